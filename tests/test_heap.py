"""tracedoc.heap: glibc's malloc_trim, and nothing anywhere else (issue 24)."""

from __future__ import annotations

from tracedoc import heap


def test_no_op_without_glibc(monkeypatch):
    monkeypatch.setattr(heap, "_libc", lambda: None)
    assert heap.release_free_memory() is False


def test_calls_reach_the_c_library(monkeypatch):
    calls = []

    class FakeLibc:
        def malloc_trim(self, pad):
            calls.append(pad)
            return 1

    monkeypatch.setattr(heap, "_libc", FakeLibc)
    assert heap.release_free_memory() is True
    assert calls == [0]


def test_a_libc_without_the_call_is_a_no_op(monkeypatch):
    monkeypatch.setattr(heap, "_libc", lambda: object())
    assert heap.release_free_memory() is False


def test_the_real_c_library():
    assert heap.release_free_memory() in (True, False)  # never raises, wherever it runs


def test_the_loader_trims_after_building_the_frames(monkeypatch, tmp_path):
    from tests.tracebuilder import dataloader_bound
    from tracedoc.load import load

    calls = []
    monkeypatch.setattr(heap, "release_free_memory", lambda: calls.append(1) or True)
    trace = load(dataloader_bound().write(tmp_path / "t.json"))
    assert trace.n_events > 0 and calls == [1]


def test_growth_trim_releases_only_after_a_step_of_growth(monkeypatch):
    rss = iter([100, 120, 150, 140, 141, 300, 200])  # bytes: made, then each read in order
    released = []
    monkeypatch.setattr(heap, "_libc", lambda: object())
    monkeypatch.setattr(heap, "_rss_bytes", lambda: next(rss))
    monkeypatch.setattr(heap, "release_free_memory", lambda: released.append(1) or True)
    trim = heap.GrowthTrim(step=40)
    assert trim.base == 100
    assert trim() is False  # 120: grew 20
    assert trim() is True and trim.base == 140  # 150: grew 50; after the release it reads 140
    assert trim() is False  # 141
    assert trim() is True and trim.base == 200  # 300
    assert released == [1, 1] and trim.releases == 2


def test_growth_trim_is_a_no_op_without_glibc_or_procfs(monkeypatch):
    monkeypatch.setattr(heap, "_libc", lambda: None)
    assert heap.GrowthTrim(step=0)() is False
    monkeypatch.setattr(heap, "_libc", lambda: object())
    monkeypatch.setattr(heap, "_rss_bytes", lambda: None)
    assert heap.GrowthTrim(step=0)() is False


def test_the_real_resident_set_is_read_on_linux():
    import sys

    got = heap._rss_bytes()
    if sys.platform.startswith("linux"):
        assert got is not None and got > 1 << 20  # an interpreter with numpy is megabytes
    else:
        assert got is None


def test_signal_context_trims_after_building_a_shared_result(tmp_path):
    from tests.tracebuilder import dataloader_bound
    from tracedoc.load import load
    from tracedoc.signals import SignalContext

    ctx = SignalContext(load(dataloader_bound().write(tmp_path / "t.json")))
    calls = []
    ctx._trim = lambda: calls.append(1)
    assert ctx.cached("k", lambda: 42) == 42
    assert ctx.cached("k", lambda: 43) == 42  # cached: built once, trimmed once
    assert calls == [1]


def test_finding_the_c_library_starts_no_process(monkeypatch):
    # ctypes.util.find_library runs ldconfig in a child: a fork of a large process counts twice
    # in the tree's RSS (a benchmark's tiled-trace peak went 295 -> 534 MiB when it was sampled)
    import subprocess

    started = []

    class NoPopen:
        def __init__(self, *a, **k):
            started.append(a)
            raise OSError("no child processes here")

    monkeypatch.setattr(subprocess, "Popen", NoPopen)
    heap._libc.cache_clear()
    try:
        heap.release_free_memory()
        heap.GrowthTrim()()
    finally:
        heap._libc.cache_clear()
    assert started == []


def test_the_streaming_decoder_trims_after_each_part_and_each_joined_column(monkeypatch, tmp_path):
    # the parts' decoded events and pieces are freed into glibc's heap, which kept them: on the
    # 301 MB tiled trace this process held 108 MiB more after decoding its parts, with 38 MiB
    # of them live; trimmed as it grows, 65 (code of 18173e9; the tree's peak 264 -> 257 MiB)
    from tests.tracebuilder import dataloader_bound
    from tracedoc.load import fast

    made = []

    class Counting(heap.GrowthTrim):
        def __init__(self):
            super().__init__(step=0)
            made.append(self)
            self.calls = 0

        def __call__(self):
            self.calls += 1
            return super().__call__()

    monkeypatch.setattr(fast, "GrowthTrim", Counting)
    data = dataloader_bound().write(tmp_path / "t.json").read_bytes()
    parts = list(fast.stream_parts([data], part_bytes=300))
    assert len(parts) > 3
    doc, cols = fast.load_stream([data], workers=1, part_bytes=300)
    assert len(made) == 2  # the decoding loop's and the join's
    assert made[0].calls == len(parts)
    assert made[1].calls == sum(len(spec) for spec in fast.all_frame_columns().values())
    assert len(cols.cols["kernels"]["ts_us"]) > 0


def test_growth_trim_release_trims_now_and_takes_a_new_base(monkeypatch):
    rss = iter([100, 90, 95])  # bytes: made, after the release, then read
    released = []
    monkeypatch.setattr(heap, "_libc", lambda: object())
    monkeypatch.setattr(heap, "_rss_bytes", lambda: next(rss))
    monkeypatch.setattr(heap, "release_free_memory", lambda: released.append(1) or True)
    trim = heap.GrowthTrim(step=40)
    assert trim.release() is True  # no growth asked for
    assert released == [1] and trim.base == 90 and trim.releases == 1
    monkeypatch.setattr(heap, "_libc", lambda: None)
    assert heap.GrowthTrim().release() is False  # no glibc: nothing


def test_signal_context_release_trims_only_when_it_dropped_something(tmp_path):
    import numpy as np

    from tests.tracebuilder import dataloader_bound
    from tracedoc.load import load
    from tracedoc.signals import SignalContext

    ctx = SignalContext(load(dataloader_bound().write(tmp_path / "t.json")))
    calls = []

    class Trim:
        def __call__(self):
            return False

        def release(self):
            calls.append(1)
            return True

    ctx._trim = Trim()
    assert ctx.release() == 0 and calls == []  # nothing held: no trim
    ctx.cached("big", lambda: np.zeros(1 << 17))  # 1 MiB of its own
    assert ctx.release() == 1 << 20 and calls == [1]
