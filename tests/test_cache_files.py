"""Cache files are read only as regular files, with a size bound (issue 21, "The frame cache").

The rule: whichever file of an entry is replaced by whichever kind of non-regular file (a
FIFO with no writer, a link to ``/dev/zero`` or to a FIFO, a folder), an analysis neither
hangs nor reads without bound: it rebuilds (or ignores the signal file) and gives the same
trace as a fresh load. The space is small, so every (file, kind) pair is tried, in one
child process under a memory limit and an alarm (a regression fails there, not here).
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
import threading

import pytest
from conftest import FIXTURES, REPO
from hypothesis import given, settings
from hypothesis import strategies as st

from tracedoc.cache import MANIFEST, MARKER
from tracedoc.load.source import read_regular

REAL = FIXTURES / "v100_resnet50_workers0.pt.trace.json.gz"
NAMES = [MARKER, MANIFEST, "ops.parquet", "kernels.parquet", "signals.json"]
KINDS = ["fifo", "link-dev-zero", "link-fifo", "folder"]

_CHILD = r"""
import json, os, resource, shutil, signal, sys, tempfile
resource.setrlimit(resource.RLIMIT_AS, (3 << 30, 3 << 30))  # reading /dev/zero ends in MemoryError

def alarm(*_):
    raise TimeoutError("hung")

signal.signal(signal.SIGALRM, alarm)
import pandas as pd
from tracedoc.cache import FrameCache
from tracedoc.engine import analyze_trace
from tracedoc.load import load

src, names, kinds = sys.argv[1], json.loads(sys.argv[2]), json.loads(sys.argv[3])
tmp = tempfile.mkdtemp()
trace = os.path.join(tmp, "t.json.gz")
shutil.copy(src, trace)
fresh = load(trace)
first = FrameCache(os.path.join(tmp, "c"), min_bytes=0)  # one entry with its signals, copied for each case
analyze_trace(first.load(trace, lambda: load(trace)), signal_store=first.signals(trace))
out = []
for name in names:
    for kind in kinds:
        shutil.copytree(os.path.join(tmp, "c"), os.path.join(tmp, f"c-{name}-{kind}"))
        cache = FrameCache(os.path.join(tmp, f"c-{name}-{kind}"), min_bytes=0)
        entry = cache.entry_dir(cache.key(trace))
        f = os.path.join(entry, name)
        os.unlink(f)
        if kind == "fifo":
            os.mkfifo(f)
        elif kind == "link-dev-zero":
            os.symlink("/dev/zero", f)
        elif kind == "link-fifo":
            os.mkfifo(f + ".p")
            os.symlink(f + ".p", f)
        else:
            os.mkdir(f)
        signal.alarm(20)
        try:
            got = cache.load(trace, lambda: load(trace))
            store = cache.signals(trace)
            stored = store.get() if store is not None else None
            error = None
        except BaseException as exc:
            got, stored, error = None, None, f"{type(exc).__name__}: {exc}"
        signal.alarm(0)
        same = got is not None and all(
            getattr(got, k).equals(getattr(fresh, k)) for k in ("ops", "runtime", "kernels", "memory")
        ) and got.n_events == fresh.n_events
        out.append({"name": name, "kind": kind, "last": cache.last, "same": same, "error": error,
                    "signals": stored is not None})
print(json.dumps(out))
"""


@pytest.mark.skipif(not sys.platform.startswith("linux"), reason="FIFOs, /dev/zero and RLIMIT_AS")
def test_no_non_regular_file_in_an_entry_is_ever_read():
    r = subprocess.run(
        [sys.executable, "-c", _CHILD, str(REAL), json.dumps(NAMES), json.dumps(KINDS)],
        capture_output=True,
        text=True,
        timeout=500,
        cwd=REPO,
    )
    assert r.returncode == 0, r.stderr[-2000:]
    results = json.loads(r.stdout.strip().splitlines()[-1])
    assert len(results) == len(NAMES) * len(KINDS)
    for res in results:
        assert res["error"] is None, res
        assert res["same"], res  # the trace equals a fresh load
        if res["name"] == "signals.json":
            assert res["last"] == "hit" and not res["signals"], res  # frames fine; signals ignored
        else:
            assert res["last"] == "corrupt", res  # rebuilt, never read


@settings(max_examples=60, deadline=None)
@given(data=st.binary(max_size=4096), slack=st.integers(-64, 64))
def test_read_regular_returns_a_regular_file_within_the_bound_and_refuses_above(tmp_path_factory, data, slack):
    p = tmp_path_factory.mktemp("rr") / "f"
    p.write_bytes(data)
    limit = max(0, len(data) + slack)
    if len(data) <= limit:
        assert read_regular(p, limit) == data
    else:
        with pytest.raises(ValueError, match="larger than"):
            read_regular(p, limit)


@pytest.mark.skipif(not sys.platform.startswith("linux"), reason="FIFOs and /dev/zero")
@settings(max_examples=20, deadline=None)
@given(payload=st.binary(min_size=1, max_size=4096), kind=st.sampled_from(["fifo", "dev-zero", "folder", "link"]))
def test_read_regular_refuses_anything_else_before_reading(tmp_path_factory, payload, kind):
    d = tmp_path_factory.mktemp("nr")
    p = d / "x"
    w = None
    if kind in ("fifo", "link"):
        os.mkfifo(d / "p")
        r_fd = os.open(d / "p", os.O_RDONLY | os.O_NONBLOCK)  # so the writer can open
        w = os.open(d / "p", os.O_WRONLY | os.O_NONBLOCK)
        os.write(w, payload)
        if kind == "fifo":
            p = d / "p"
        else:
            p.symlink_to(d / "p")
    elif kind == "dev-zero":
        p = "/dev/zero"
    else:
        p.mkdir()
    done: list[BaseException] = []

    def attempt() -> None:
        try:
            read_regular(p, 1 << 20)
        except BaseException as exc:  # noqa: BLE001 (reported below)
            done.append(exc)

    t = threading.Thread(target=attempt, daemon=True)
    t.start()
    t.join(10)
    assert done and isinstance(done[0], ValueError), done  # refused at once, not blocked or read
    if w is not None:
        assert os.read(r_fd, len(payload) + 1) == payload  # nothing was taken from the FIFO
        os.close(w)
        os.close(r_fd)
