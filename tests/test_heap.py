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
