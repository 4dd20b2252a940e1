"""The Parquet frame cache (tracedoc/cache.py): hits give the same trace and report as a
fresh load; stale and corrupt entries are detected and rebuilt; `tracedoc cache`."""

from __future__ import annotations

import json
import os
import shutil

import pandas as pd
import pytest
from conftest import FIXTURES
from typer.testing import CliRunner

from tracedoc.cache import FrameCache
from tracedoc.cli import app
from tracedoc.engine import analyze_trace
from tracedoc.errors import TraceLoadError
from tracedoc.load import load
from tracedoc.schema import FRAME_COLUMNS

runner = CliRunner()
REAL = FIXTURES / "v100_resnet50_workers0.pt.trace.json.gz"


@pytest.fixture
def trace_copy(tmp_path):
    p = tmp_path / "t.json.gz"
    shutil.copy(REAL, p)
    return p


@pytest.fixture
def cache(tmp_path):
    return FrameCache(tmp_path / "cache", min_bytes=0)


def _report(t):
    return json.dumps(analyze_trace(t).to_dict(), sort_keys=True, default=str)


def test_hit_gives_the_same_frames_and_report(trace_copy, cache):
    fresh = load(trace_copy, cache=cache)
    assert cache.last == "miss"
    cached = load(trace_copy, cache=cache)
    assert cache.last == "hit"
    for kind in FRAME_COLUMNS:
        pd.testing.assert_frame_equal(getattr(fresh, kind), getattr(cached, kind), check_exact=True)
    assert cached.devices == fresh.devices and cached.metadata == fresh.metadata
    assert (cached.origin_us, cached.span_us, cached.n_events) == (fresh.origin_us, fresh.span_us, fresh.n_events)
    assert _report(cached) == _report(fresh)


def test_stale_entry_is_rebuilt(trace_copy, cache):
    load(trace_copy, cache=cache)
    st = os.stat(trace_copy)
    os.utime(trace_copy, ns=(st.st_atime_ns, st.st_mtime_ns + 1_000_000_000))  # touched: stale
    load(trace_copy, cache=cache)
    assert cache.last == "stale"
    load(trace_copy, cache=cache)
    assert cache.last == "hit"


def test_same_size_and_mtime_but_other_content_is_stale(tmp_path, cache):
    """A rewrite that keeps size and mtime (cp -p of another run) is caught by the content digest
    (any byte: tests/test_cache_key.py)."""
    a = tmp_path / "a.json.gz"
    shutil.copy(REAL, a)
    load(a, cache=cache)
    st = os.stat(a)
    data = bytearray(a.read_bytes())
    data[100:110] = bytes(10)
    a.write_bytes(bytes(data))
    os.utime(a, ns=(st.st_atime_ns, st.st_mtime_ns))
    assert os.stat(a).st_size == st.st_size
    with pytest.raises(TraceLoadError):  # the damaged gzip is read again, not served from the cache
        load(a, cache=cache)
    assert cache.last == "stale"


@pytest.mark.parametrize("damage", ["truncate", "flip", "delete", "manifest"])
def test_corrupt_entry_is_rebuilt_not_trusted(trace_copy, cache, damage):
    fresh = load(trace_copy, cache=cache)
    entry = cache.entry_dir(cache.key(trace_copy))
    f = entry / "kernels.parquet"
    if damage == "truncate":
        f.write_bytes(f.read_bytes()[:100])
    elif damage == "flip":
        raw = bytearray(f.read_bytes())
        raw[len(raw) // 2] ^= 0xFF
        f.write_bytes(bytes(raw))
    elif damage == "delete":
        f.unlink()
    else:
        (entry / "manifest.json").write_bytes(b"{not json")
    again = load(trace_copy, cache=cache)
    assert cache.last == "corrupt"
    pd.testing.assert_frame_equal(again.kernels, fresh.kernels)
    load(trace_copy, cache=cache)
    assert cache.last == "hit"  # rebuilt


def test_small_traces_and_urls_are_not_cached(tmp_path):
    c = FrameCache(tmp_path / "c")  # default threshold: 4 MiB on disk
    p = tmp_path / "t.json.gz"
    shutil.copy(REAL, p)
    load(p, cache=c)
    assert c.last == "off" and not (tmp_path / "c").exists()
    assert c.key("memory://x/t.json") is None and c.key("-") is None


def test_eviction_keeps_the_folder_bounded(tmp_path):
    c = FrameCache(tmp_path / "c", min_bytes=0, max_bytes=1)  # every older entry must go
    paths = []
    for name in ("a", "b"):
        p = tmp_path / f"{name}.json.gz"
        shutil.copy(REAL, p)
        load(p, cache=c)
        paths.append(p)
    assert c.info().entries == 1  # a was evicted when b was written
    load(paths[1], cache=c)
    assert c.last == "hit"
    c2 = FrameCache(tmp_path / "c", min_bytes=0)
    paths[1].unlink()
    p = tmp_path / "c.json.gz"
    shutil.copy(REAL, p)
    load(p, cache=c2)  # b's trace is gone: its entry goes too
    assert c2.info().entries == 1


def test_cli_cache_info_clear_and_no_cache(trace_copy, tmp_path, monkeypatch):
    monkeypatch.setenv("TRACEDOC_CACHE_MIN_BYTES", "0")  # read by settings.Environment at each command
    cdir = tmp_path / "cc"
    r = runner.invoke(app, ["analyze", str(trace_copy), "--no-cache", "--cache-dir", str(cdir), "--exit-zero"])
    assert r.exit_code == 0 and not cdir.exists()
    r1 = runner.invoke(app, ["analyze", str(trace_copy), "-f", "json", "--cache-dir", str(cdir), "--exit-zero"])
    r2 = runner.invoke(app, ["analyze", str(trace_copy), "-f", "json", "--cache-dir", str(cdir), "--exit-zero"])
    assert r1.exit_code == r2.exit_code == 0 and r1.stdout == r2.stdout
    r = runner.invoke(app, ["cache", "info", "--cache-dir", str(cdir)])
    assert r.exit_code == 0 and "1 entry" in r.stdout
    r = runner.invoke(app, ["cache", "clear", "--cache-dir", str(cdir)])
    assert r.exit_code == 0 and "removed 1 entry" in r.stdout
    r = runner.invoke(app, ["cache", "info", "--cache-dir", str(cdir)])
    assert "0 entries" in r.stdout


def test_signal_values_are_stored_and_reused_not_recomputed(trace_copy, cache, monkeypatch):
    """A second analysis of a cached trace takes its signal values from the store: the same
    report, with no signal computed again (the ledger, the costliest, would raise here)."""
    import tracedoc.signals.ledger as ledger_mod

    first = analyze_trace(cache.load(trace_copy, lambda: load(trace_copy)), signal_store=cache.signals(trace_copy))
    store = cache.signals(trace_copy)
    assert store.get() is not None and store.path.is_file()

    def boom(*a, **k):
        raise AssertionError("a stored signal was computed again")

    monkeypatch.setattr(ledger_mod, "device_ledger_us", boom)
    import tracedoc.signals.stepmodel as stepmodel_mod

    # the replayed savings of the findings' fixes are stored too (a third of a warm run's time)
    assert any(k.startswith("replay_saving_ms[") for k in store.get()["values"])
    monkeypatch.setattr(stepmodel_mod, "_replay", boom)
    second = analyze_trace(cache.load(trace_copy, lambda: load(trace_copy)), signal_store=cache.signals(trace_copy))
    assert json.dumps(second.to_dict(), sort_keys=True, default=str) == json.dumps(
        first.to_dict(), sort_keys=True, default=str
    )
    # other rules and floors still apply anew on stored values
    only = analyze_trace(
        cache.load(trace_copy, lambda: load(trace_copy)), select=["TD101"], signal_store=cache.signals(trace_copy)
    )
    assert [f.code for f in only.findings] == ["TD101"]


def test_a_damaged_or_foreign_signal_store_is_ignored_and_rewritten(trace_copy, cache):
    t = cache.load(trace_copy, lambda: load(trace_copy))
    ref = analyze_trace(t, signal_store=cache.signals(trace_copy)).to_dict()
    store = cache.signals(trace_copy)
    for bad in (b"{not json", b'{"stamp": {"key": {}, "code": "x"}, "values": {}, "errors": {}, "idle_ledger": {}}'):
        store.path.write_bytes(bad)
        assert store.get() is None
        again = analyze_trace(t, signal_store=cache.signals(trace_copy)).to_dict()
        assert again["signals"] == ref["signals"] and again["idle_ledger"] == ref["idle_ledger"]
        assert store.get() is not None  # rewritten


def test_stored_signal_values_follow_all_of_the_code(trace_copy, cache, monkeypatch):
    # the signals read tracedoc/perf (peak table, op cost models) too: the stamp hashes the
    # whole package, so a change there is never served stale values
    import tracedoc.cache as cache_mod

    analyze_trace(cache.load(trace_copy, lambda: load(trace_copy)), signal_store=cache.signals(trace_copy))
    assert cache.signals(trace_copy).get() is not None
    monkeypatch.setattr(cache_mod, "package_code_hash", lambda: "other code")
    assert cache.signals(trace_copy).get() is None
