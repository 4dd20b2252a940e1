"""A trace truncated while it is read is a one-line error, never SIGBUS (issue 21, "The
frame cache": a memory-mapped trace that shrank killed the process, exit 135, no message).

The rule, for any length the file is cut to: cut after it was read (before it is decoded,
the window in which a mapped file's pages vanish) the analysis stands on the bytes read;
cut while it is read, the loader gives either a trace or one line naming the file. No file
is memory-mapped any more, so neither can end in a signal.
"""

from __future__ import annotations

import gzip
import os
import shutil
import subprocess
import sys

import pytest
from conftest import FIXTURES, REPO
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from tracedoc.errors import TraceLoadError
from tracedoc.load import load
from tracedoc.load import source as source_mod

_EVENTS = gzip.decompress((FIXTURES / "a100_alexnet_forward.pt.trace.json.gz").read_bytes()).strip()[1:-1]
#: 20 MiB: above the size files used to be memory-mapped from (16 MiB)
BIG = b'{"pad": "' + b" " * (20 << 20) + b'", ' + _EVENTS + b"}"

# cut the file right after read_trace_bytes returned, then go on with the analysis
_CHILD = r"""
import importlib, os, sys
L = importlib.import_module("tracedoc.load")
S = importlib.import_module("tracedoc.load.source")
path, cut = sys.argv[1], int(sys.argv[2])
original = S.read_trace_bytes

def read_then_cut(*a, **k):
    data = original(*a, **k)
    os.truncate(path, cut)
    return data

S.read_trace_bytes = L.read_trace_bytes = read_then_cut
from tracedoc.cli import main
sys.argv = ["tracedoc", "analyze", path, "--no-cache", "--exit-zero", "-f", "json"]
main()
"""


def _fresh(factory, name: str):
    """One folder per test, emptied for each example (the traces here are 10-20 MiB each)."""
    d = factory.getbasetemp() / name
    shutil.rmtree(d, ignore_errors=True)
    d.mkdir()
    return d


@pytest.mark.skipif(not sys.platform.startswith("linux"), reason="SIGBUS on a truncated map is a Linux/POSIX matter")
@settings(max_examples=4, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(where=st.floats(0, 1, exclude_max=True))
def test_a_trace_cut_after_it_was_read_is_analysed_from_the_bytes_read(tmp_path_factory, where):
    p = _fresh(tmp_path_factory, "cut") / "t.json"
    p.write_bytes(BIG)
    r = subprocess.run(
        [sys.executable, "-c", _CHILD, str(p), str(int(where * len(BIG)))],
        capture_output=True,
        text=True,
        timeout=300,
        cwd=REPO,
    )
    assert r.returncode == 0, (r.returncode, r.stderr[-2000:])  # -7 / 135 was SIGBUS
    assert r.stdout.lstrip().startswith("{")


@settings(max_examples=40, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(where=st.floats(0, 1, exclude_max=True), gz=st.booleans())
def test_a_trace_cut_while_it_is_read_is_one_line_or_a_trace(tmp_path_factory, monkeypatch, where, gz):
    d = _fresh(tmp_path_factory, "cutting")
    p = d / "t.json"
    raw = gzip.compress(b"{" + _EVENTS + b"}") if gz else BIG
    p.write_bytes(raw)
    cut = int(where * len(raw))
    fill, stream = source_mod._fill, source_mod._gunzip_stream

    def cut_then_fill(fh, *a, **k):  # the file shrinks after it was opened and sized
        os.truncate(p, cut)
        return fill(fh, *a, **k)

    def cut_then_gunzip(fh, *a, **k):
        os.truncate(p, cut)
        return stream(fh, *a, **k)

    blocks = source_mod.iter_trace_blocks

    def cut_then_stream(path, *a, **k):  # the streaming reader: cut once it has opened and sized the file
        it = blocks(path, *a, **k)
        head = next(it, None)
        os.truncate(p, cut)
        if head is not None:
            yield head
        yield from it

    monkeypatch.setattr(source_mod, "_fill", cut_then_fill)
    monkeypatch.setattr(source_mod, "_gunzip_stream", cut_then_gunzip)
    monkeypatch.setattr(source_mod, "iter_trace_blocks", cut_then_stream)
    try:
        t = load(p)
    except TraceLoadError as exc:
        msg = str(exc)
        assert msg.startswith(str(p) + ": ") and "\n" not in msg
    else:
        assert t.n_events > 0
    monkeypatch.undo()
    assert os.path.getsize(p) == cut  # it really was cut
