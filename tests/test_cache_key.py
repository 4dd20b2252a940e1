"""The cache key never serves a stale result (issue 21, "The frame cache").

The rule: after any edit of a cached trace that keeps its size and its mtime (any byte,
any new value), loading through the cache gives what a fresh load gives (the same frames,
or the same error), and an analysis with the stored signal values gives the fresh report.
Also when the file changes while it is read: the entry is keyed on the bytes read.
"""

from __future__ import annotations

import gzip
import json
import os
import re
import shutil

import pandas as pd
import pytest
from conftest import FIXTURES
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from tracedoc import pipeline
from tracedoc.cache import FrameCache
from tracedoc.config import Config
from tracedoc.errors import TraceLoadError
from tracedoc.load import load
from tracedoc.load.source import file_sha256, read_trace_bytes, record_reads
from tracedoc.schema import FRAME_COLUMNS
from tracedoc.settings import Environment, Settings

SMALL = FIXTURES / "a100_alexnet_forward.pt.trace.json.gz"
_EVENTS = gzip.decompress(SMALL.read_bytes()).strip()[1:-1]
#: a real trace's events between two blank strings, so that its numbers lie 1.5 MiB into a
#: 10 MiB file: where a sampled hash (first and last MiB, blocks between) misses most bytes
PLAIN = b'{"padA": "' + b" " * (3 << 19) + b'", ' + _EVENTS + b', "padB": "' + b" " * (8 << 20) + b'"}'
DIGITS = [m.start() for m in re.finditer(rb"\d", PLAIN)]


def _fresh(factory, name: str):
    """One folder per test, emptied for each example (the traces here are 10-20 MiB each)."""
    d = factory.getbasetemp() / name
    shutil.rmtree(d, ignore_errors=True)
    d.mkdir()
    return d


def _outcome(path, cache=None):
    """The frames of a load (through ``cache`` when given), or the error message."""
    try:
        t = load(path, cache=cache)
    except TraceLoadError as exc:
        return str(exc)
    return t


def _same(a, b) -> None:
    if isinstance(a, str) or isinstance(b, str):
        assert a == b
        return
    for kind in FRAME_COLUMNS:
        pd.testing.assert_frame_equal(getattr(a, kind), getattr(b, kind), check_exact=True)
    assert (a.n_events, a.span_us, a.metadata) == (b.n_events, b.span_us, b.metadata)


def _edit_keeping_size_and_mtime(path, pos: int, value: int) -> None:
    st_ = os.stat(path)
    with open(path, "r+b") as fh:
        fh.seek(pos)
        fh.write(bytes([value]))
    os.utime(path, ns=(st_.st_atime_ns, st_.st_mtime_ns))
    assert os.stat(path).st_size == st_.st_size and os.stat(path).st_mtime_ns == st_.st_mtime_ns


@settings(max_examples=25, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(
    gz=st.booleans(),
    where=st.floats(0, 1, exclude_max=True),
    digit_only=st.booleans(),
    value=st.integers(0, 255),
)
def test_any_edit_keeping_size_and_mtime_is_never_served_stale(tmp_path_factory, gz, where, digit_only, value):
    d = _fresh(tmp_path_factory, "key")
    path = d / ("t.json.gz" if gz else "t.json")
    raw = SMALL.read_bytes() if gz else PLAIN
    path.write_bytes(raw)
    cache = FrameCache(d / "c", min_bytes=0)
    load(path, cache=cache)
    assert load(path, cache=cache) is not None and cache.last == "hit"
    if digit_only and not gz:  # a digit for another: still valid JSON, another value
        pos = DIGITS[int(where * len(DIGITS))]
        new = ord("0") + (raw[pos] - ord("0") + 1 + value % 9) % 10
    else:  # any byte, any other value
        pos = int(where * len(raw))
        new = (raw[pos] + 1 + value % 255) % 256
    _edit_keeping_size_and_mtime(path, pos, new)
    _same(_outcome(path, cache), _outcome(path))
    assert cache.last == "stale"


@settings(max_examples=6, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(where=st.floats(0, 1, exclude_max=True), step=st.integers(1, 9))
def test_stored_signal_values_are_never_used_for_other_bytes(tmp_path_factory, where, step):
    d = _fresh(tmp_path_factory, "sig")
    path = d / "t.json"
    path.write_bytes(PLAIN)
    settings_ = Settings.from_config(Config(), env=Environment.read({}))
    cache = FrameCache(d / "c", min_bytes=0)
    pipeline.analyze(str(path), settings_, cache=cache)  # frames and signal values stored
    assert cache.signals(path).get() is not None
    pos = DIGITS[int(where * len(DIGITS))]
    _edit_keeping_size_and_mtime(path, pos, ord("0") + (PLAIN[pos] - ord("0") + step) % 10)
    cached = pipeline.analyze(str(path), settings_, cache=FrameCache(d / "c", min_bytes=0))
    fresh = pipeline.analyze(str(path), settings_)
    as_json = lambda r: json.dumps(r.to_dict(), sort_keys=True, default=str)  # noqa: E731
    assert as_json(cached) == as_json(fresh)


def test_a_file_changed_while_read_is_keyed_on_the_bytes_read(tmp_path):
    """The digest is of the bytes the frames were built from: an edit made right after the
    read (keeping size and mtime) makes the entry stale at once, never a wrong hit."""
    path = tmp_path / "t.json"
    path.write_bytes(PLAIN)
    cache = FrameCache(tmp_path / "c", min_bytes=0)
    pos = DIGITS[len(DIGITS) // 2]

    def build():
        t = load(path)
        _edit_keeping_size_and_mtime(path, pos, ord("0") + (PLAIN[pos] - ord("0") + 1) % 10)
        return t

    cache.load(path, build)
    assert cache.last == "miss"
    _same(_outcome(path, cache), _outcome(path))
    assert cache.last == "stale"
    load(path, cache=cache)
    assert cache.last == "hit"


@settings(max_examples=30, deadline=None)
@given(data=st.binary(min_size=2, max_size=300_000), gz=st.booleans())
def test_the_digest_recorded_while_reading_is_the_digest_of_the_file(tmp_path_factory, data, gz):
    """What the cache stores on a miss (recorded during the read) and checks on a hit (the
    file hashed alone) are the same function of the file's bytes, compressed or not."""
    p = tmp_path_factory.mktemp("dg") / "t"
    body = b'{"traceEvents": []}' + b" " * len(data)
    p.write_bytes(gzip.compress(body) if gz else body)
    with record_reads() as reads:
        read_trace_bytes(p)
    assert len(reads) == 1 and reads[0].sha256 == file_sha256(p)
    assert reads[0].size == os.stat(p).st_size and reads[0].path == os.path.realpath(p)


def test_nothing_is_recorded_outside_the_block(tmp_path):
    p = tmp_path / "t.json"
    p.write_bytes(PLAIN)
    with record_reads() as reads:
        pass
    read_trace_bytes(p)
    assert reads == []
    with pytest.raises(TraceLoadError):
        with record_reads() as reads:
            read_trace_bytes(tmp_path / "missing.json")
    assert reads == []
