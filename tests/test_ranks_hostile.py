"""Issue 21, "Rank folders and Dask": hostile conditions of a many-trace run, each class tested
from its general rule.

* a worker process that dies abruptly (killed as by the OOM killer, crashed, exited) loses no
  finished rank; every lost trace is retried once in a process of its own, and a trace whose
  retry dies too is listed as failed;
* a glob's matches are taken or skipped exactly as the same folder's entries are (a FIFO is
  skipped, never read);
* a scheduler address whose peer is not a Dask scheduler, or never answers, ends within the
  timeout with "cannot reach the Dask scheduler ADDRESS (not a Dask scheduler: ...)" or
  "(no answer: ...)"; the servers are the test's own, on 127.0.0.1, a bounded number, each
  closed at the end of its test;
* traces that claim the same rank are named (a note, or the error under ``--ranks``).
"""

from __future__ import annotations

import contextlib
import faulthandler
import json
import os
import random
import signal
import socket
import struct
import subprocess
import sys
import threading
from pathlib import Path

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from tracebuilder import dataloader_bound
from typer.testing import CliRunner

from tracedoc.cli import app
from tracedoc.errors import TraceLoadError
from tracedoc.ranks import analyze_inputs
from tracedoc.ranks import executors as ex
from tracedoc.ranks.discover import discover
from tracedoc.ranks.job import analyze_one
from tracedoc.ranks.scheduler import SchedulerError, check_scheduler, handshake_message
from tracedoc.report.ranks import MultiRankReport, MultiTraceReport

runner = CliRunner()

#: A bound on anything that could hang (seconds): far above what each step takes, so it only
#: turns a hang into a failure.
HANG_BOUND_S = 120


def _trace(rank: int | None, world: int, step_us: float = 1000.0) -> dict:
    d = dataloader_bound(n_steps=3, step_us=step_us, dl_us=20.0).doc()
    if rank is not None:
        d["distributedInfo"] = {"backend": "nccl", "rank": rank, "world_size": world}
    return d


def _one_line_exit_2(r) -> str:
    assert r.exit_code == 2, r.output
    err = r.stderr.strip()
    assert err.count("\n") == 0 and "Traceback" not in r.output
    return err


# -- a worker process killed in the pool --------------------------------------------------------------

#: How a trace whose file name holds the key ends its worker process.
DEATHS = {
    "kill9": lambda: os.kill(os.getpid(), signal.SIGKILL),  # what the OOM killer sends
    "segv": lambda: os.kill(os.getpid(), signal.SIGSEGV),  # a crash in native code
    "exit3": lambda: os._exit(3),  # a C library calling exit()
}
DEATH_TEXT = {"kill9": "killed by SIGKILL", "segv": "killed by SIGSEGV", "exit3": "exit status 3"}


def dying_job(path: str, *args, **kwargs):
    """The rank job, except that it counts its attempts (one line per attempt in
    ``../attempts/<file name>``) and ends its own process on a trace named for a death."""
    name = os.path.basename(path)
    attempts = Path(path).parent.parent / "attempts"
    with open(attempts / name, "a") as fh:
        fh.write("x\n")
    for key, die in DEATHS.items():
        if key in name:
            faulthandler.disable()  # pytest's, inherited: no stack dump of a death on purpose
            die()
    return analyze_one(path, *args, **kwargs)


def _job_dir(tmp_path: Path, n: int, deaths: dict[int, str]) -> tuple[Path, dict[int, str]]:
    d = tmp_path / "job"
    d.mkdir()
    (tmp_path / "attempts").mkdir()
    names = {}
    for r in range(n):
        names[r] = f"rank-{r}{'-' + deaths[r] if r in deaths else ''}.json"
        (d / names[r]).write_text(json.dumps(_trace(r, n, 1000.0 + 10 * r)))
    return d, names


def _attempts(tmp_path: Path, name: str) -> int:
    p = tmp_path / "attempts" / name
    return len(p.read_text().splitlines()) if p.exists() else 0


@pytest.fixture
def dying(monkeypatch):
    """The pool and its retries run :func:`dying_job` (the executor looks ``analyze_one`` up
    when it runs; the function travels to the workers by name, whatever their start method)."""
    monkeypatch.setattr(ex, "analyze_one", dying_job)


@pytest.mark.parametrize(
    "n,deaths,jobs",
    [
        (4, {0: "kill9"}, 2),  # the first trace: everything after it was pending
        (5, {4: "kill9"}, 2),  # the last: most ranks had finished
        (6, {1: "kill9", 4: "exit3"}, 3),  # two traces die, two ways
        (3, {1: "segv"}, 3),  # every trace in flight at once
    ],
    ids=["first", "last", "two", "all-in-flight"],
)
def test_a_dead_worker_loses_no_finished_rank_and_the_lost_are_retried_once(tmp_path, dying, n, deaths, jobs):
    """The rule: the ranks whose job does not die are all in the report; every trace the pool
    lost ran at most twice (once more, alone); a trace whose job dies is listed as failed,
    saying how its retry ended; a trace that passed on its retry is named
    in a note; the run ends with exit 0 (the failures are warnings)."""
    d, names = _job_dir(tmp_path, n, deaths)
    r = runner.invoke(app, ["analyze", str(d), "-j", str(jobs), "-f", "json", "--exit-zero", "--no-cache"])
    assert r.exit_code == 0, r.output
    doc = json.loads(r.stdout)
    assert doc["kind"] == "multi-rank"
    assert [x["rank"] for x in doc["ranks"]] == [k for k in range(n) if k not in deaths]
    assert sorted(Path(f["path"]).name for f in doc["failed"]) == sorted(names[k] for k in deaths)
    for f in doc["failed"]:
        death = next(v for k, v in deaths.items() if names[k] == Path(f["path"]).name)
        assert "worker process died when retried alone" in f["error"] and DEATH_TEXT[death] in f["error"]
    # each trace ran at most twice (the pool, then alone once); the pool broke, so one of the
    # dying traces ran in it before its retry (a lost trace may not have started in the pool)
    assert all(1 <= _attempts(tmp_path, name) <= 2 for name in names.values())
    assert sum(_attempts(tmp_path, names[k]) for k in deaths) > len(deaths)
    retried_ok = [names[k] for k in range(n) if k not in deaths and _attempts(tmp_path, names[k]) == 2]
    notes = doc.get("notes", [])
    if retried_ok:
        assert len(notes) == 1 and "analyzed again" in notes[0]
        assert all(name in notes[0] for name in retried_ok)
    assert f"{len(deaths)} of {n} traces failed" in r.stderr and "Traceback" not in r.output
    assert doc["summary"]["n_ranks"] == n - len(deaths)


def test_every_trace_dying_twice_is_one_line_exit_2(tmp_path, dying):
    d, _ = _job_dir(tmp_path, 2, {0: "kill9", 1: "kill9"})
    err = _one_line_exit_2(runner.invoke(app, ["analyze", str(d), "-j", "2", "--no-cache"]))
    assert "rank-0-kill9.json" in err and "worker process died" in err and "1 more failed" in err


def test_a_dead_worker_under_strict_is_one_line_exit_2(tmp_path, dying):
    d, _ = _job_dir(tmp_path, 3, {2: "kill9"})
    err = _one_line_exit_2(runner.invoke(app, ["analyze", str(d), "-j", "2", "--no-cache", "--strict"]))
    assert "rank-2-kill9.json" in err and "killed by SIGKILL" in err and "[--strict]" in err


@pytest.mark.parametrize("allowed_failures", [0, 1])
def test_a_dead_dask_worker_loses_no_finished_rank(tmp_path, dying, allowed_failures):
    """On a LocalCluster the same: the trace whose worker dies each time Dask runs it (once,
    then ``allowed-failures`` more times) is failed, and every other rank is in the report, even
    when the dead workers took every copy of the scattered rules with them (the tasks Dask
    cancelled then are run once more, and named in a note)."""
    import dask
    import distributed  # noqa: F401  (its config defaults loaded before the override, not inside it)

    d, names = _job_dir(tmp_path, 3, {1: "kill9"})
    args = ["analyze", str(d), "--scheduler", "local", "-j", "2", "-f", "json", "--exit-zero", "--no-cache"]
    with dask.config.set({"distributed.scheduler.allowed-failures": allowed_failures}):
        r = runner.invoke(app, args)
    assert r.exit_code == 0, r.output
    doc = json.loads(r.stdout)
    assert [x["rank"] for x in doc["ranks"]] == [0, 2] and doc["summary"]["n_ranks"] == 2
    assert [Path(f["path"]).name for f in doc["failed"]] == [names[1]]
    assert "every Dask worker that ran it died" in doc["failed"][0]["error"]
    # Dask ran it 1 + allowed-failures times; if it was cancelled with the rules lost, once more
    assert 1 + allowed_failures <= _attempts(tmp_path, names[1]) <= 2 * (1 + allowed_failures)
    retried = [names[k] for k in (0, 2) if _attempts(tmp_path, names[k]) > 1]
    assert all(any(n in note for note in doc.get("notes", [])) for n in retried)


# -- globs and folders: one rule ----------------------------------------------------------------------


@pytest.fixture
def odd_folder(tmp_path):
    """A folder of every kind of entry the folder form skips, beside real traces."""
    d = tmp_path / "t"
    d.mkdir()
    for r in range(2):
        (d / f"rank-{r}.json").write_text(json.dumps(_trace(r, 2)))
    os.mkfifo(d / "rank-7.json")  # reading it would wait for a writer forever
    os.mkfifo(d / "pipe")
    sock = socket.socket(socket.AF_UNIX)
    sock.bind(str(d / "rank-8.json"))
    (d / "sub.json").mkdir()
    (d / "notes.txt").write_text("not a trace")
    (d / "RANK-6.JSON").write_text("{}")
    outside = tmp_path / "elsewhere.json"
    outside.write_text(json.dumps(_trace(5, 2)))
    (d / "rank-5.json").symlink_to(outside)
    (d / "fifo-link.json").symlink_to(d / "rank-7.json")
    (d / "dangling.json").symlink_to(d / "missing.json")
    yield d
    sock.close()


@pytest.mark.parametrize("pattern", ["*", "*.json", "rank-?.json", "[a-z]*", "*[0-9]*"])
@pytest.mark.parametrize("follow", [False, True])
def test_a_glob_takes_and_skips_as_the_folder_does(odd_folder, pattern, follow):
    """For any pattern, each match is taken exactly when the folder form takes it, and a match
    not taken is skipped with the folder form's reason (folders matched by the pattern keep
    their own reason)."""
    import glob

    folder = discover([str(odd_folder)], follow_symlinks=follow)
    by_glob = discover([str(odd_folder / pattern)], follow_symlinks=follow)
    matches = set(glob.glob(str(odd_folder / pattern)))
    assert set(by_glob.files) == set(folder.files) & matches
    why_folder = dict(folder.skipped)
    for p, why in by_glob.skipped:
        assert p in matches
        assert why == why_folder[p] or (os.path.isdir(p) and why.startswith("subfolder matched"))
    assert {p for p, _ in by_glob.skipped} | set(by_glob.files) == matches
    assert set(by_glob.followed) == set(folder.followed) & matches
    assert not any(Path(f).name in ("rank-7.json", "pipe", "fifo-link.json", "rank-8.json") for f in by_glob.files)


def test_a_glob_matching_a_fifo_ends(odd_folder):
    """End to end, in a process of its own (a hang fails at the bound): the FIFO is skipped,
    said, and the traces analyzed."""
    cmd = [sys.executable, "-m", "tracedoc", "analyze", str(odd_folder / "*"), "-j", "1", "-f", "json", "--exit-zero"]
    env = {**os.environ, "TRACEDOC_NO_CONFIG": "1"}
    p = subprocess.run(cmd, capture_output=True, text=True, timeout=HANG_BOUND_S, env=env)
    assert p.returncode == 0, p.stderr
    doc = json.loads(p.stdout)
    assert [x["rank"] for x in doc["ranks"]] == [0, 1]
    reasons = {Path(s["path"]).name: s["reason"] for s in doc["skipped"]}
    assert reasons["rank-7.json"] == reasons["pipe"] == reasons["fifo-link.json"] == "a FIFO"
    assert reasons["rank-8.json"] == "a socket"


def test_one_file_under_several_names_is_read_once(tmp_path):
    """The same file named again (a symlink inside the folder, a hard link, ``./``, the folder
    and the file) is one trace, not two traces of one rank; the other names are said."""
    d = tmp_path / "job"
    d.mkdir()
    for r in range(2):
        (d / f"rank-{r}.json").write_text(json.dumps(_trace(r, 2)))
    (d / "latest.json").symlink_to(d / "rank-1.json")
    os.link(d / "rank-0.json", d / "zz-hardlink.json")
    inputs = [str(d), f"{d}/./rank-0.json", str(d / "rank-1.json")]
    found = discover(inputs)
    assert sorted(Path(f).name for f in found.files) == ["rank-0.json", "rank-1.json"]
    same = {Path(p).name: why for p, why in found.skipped}
    assert set(same) == {"latest.json", "zz-hardlink.json", "rank-0.json"}
    assert all(why.startswith("the same file as ") for why in same.values())
    rep = analyze_inputs(inputs, jobs=1)
    assert isinstance(rep, MultiRankReport) and [r.rank for r in rep.ranks] == [0, 1] and not rep.notes


# -- scheduler addresses that are not a Dask scheduler -------------------------------------------------


class _Server:
    """A TCP server on 127.0.0.1 that runs ``behave(conn)`` for each connection in a thread of
    its own; closed (listener and connections) on exit."""

    def __init__(self, behave, accept: bool = True):
        self.sock = socket.socket()
        self.sock.bind(("127.0.0.1", 0))
        self.sock.listen(8)
        self.port = self.sock.getsockname()[1]
        self.behave, self.accept = behave, accept
        self.conns: list[socket.socket] = []
        self.threads: list[threading.Thread] = []
        self.stop = threading.Event()

    @property
    def address(self) -> str:
        return f"tcp://127.0.0.1:{self.port}"

    def _serve(self) -> None:
        self.sock.settimeout(0.2)  # to see ``stop``
        while not self.stop.is_set():
            try:
                conn, _ = self.sock.accept()
            except TimeoutError:
                continue
            except OSError:
                return
            conn.settimeout(None)
            self.conns.append(conn)
            t = threading.Thread(target=self._one, args=(conn,), daemon=True)
            t.start()
            self.threads.append(t)

    def _one(self, conn) -> None:
        with contextlib.suppress(OSError):
            self.behave(conn, self.stop)

    def __enter__(self):
        if self.accept:
            t = threading.Thread(target=self._serve, daemon=True)
            t.start()
            self.threads.append(t)
        return self

    def __exit__(self, *exc):
        self.stop.set()
        for c in [self.sock, *self.conns]:
            with contextlib.suppress(OSError):
                c.shutdown(socket.SHUT_RDWR)
            c.close()
        for t in self.threads:
            t.join(timeout=10)


def _read_to_end(conn, stop) -> None:
    conn.settimeout(0.2)
    while not stop.is_set():
        try:
            if not conn.recv(4096):
                return
        except TimeoutError:
            continue


def answers(data: bytes, first: bool = False):
    """A peer that writes ``data`` (on accepting when ``first``, else after reading the
    client's message to its end), then closes."""

    def behave(conn, stop):
        if first:
            conn.sendall(data)
        _read_to_end(conn, stop)
        if not first:
            conn.sendall(data)
        conn.close()

    return behave


def silent(conn, stop):
    """Accepts, reads whatever comes, answers nothing and keeps the connection open."""
    _read_to_end(conn, stop)
    stop.wait(HANG_BOUND_S)


def closes_at_once(conn, stop):
    conn.close()


def _probe(address: str, seconds: float = 1.0) -> str:
    """The reason :func:`check_scheduler` gives, run in a thread bounded by HANG_BOUND_S."""
    out: list = []

    def run():
        try:
            check_scheduler(address, seconds)
            out.append("")
        except SchedulerError as exc:
            out.append(str(exc))

    t = threading.Thread(target=run, daemon=True)
    t.start()
    t.join(HANG_BOUND_S)
    assert out, f"check_scheduler({address}) did not return"
    msg = out[0]
    assert msg.startswith(f"cannot reach the Dask scheduler {address} (") and "\n" not in msg
    return msg[len(f"cannot reach the Dask scheduler {address} (") :]


def _u64(n: int) -> bytes:
    return struct.pack("=Q", n)


def _framed(*frames: bytes, count: int | None = None) -> bytes:
    body = _u64(len(frames) if count is None else count) + b"".join(_u64(len(f)) for f in frames) + b"".join(frames)
    return _u64(len(body)) + body


#: Answers of peers that are not Dask schedulers: other protocols, and Dask's framing broken
#: at each of its parts.
NOT_DASK = {
    "http": (b"HTTP/1.0 400 Bad Request\r\nContent-Length: 0\r\n\r\n", False),
    "ssh-banner": (b"SSH-2.0-OpenSSH_9.6\r\n", True),
    "smtp-banner": (b"220 mail.example ESMTP\r\n", True),
    "redis-error": (b"-ERR unknown command\r\n", False),
    "tls-alert": (b"\x15\x03\x01\x00\x02\x02\x46", False),
    "zero-length": (_u64(0), False),
    "absurd-length": (_u64(2**62), False),
    "length-then-short-body": (_u64(58) + b"\x01" * 10, False),
    "no-frames": (_framed(count=0), False),
    "too-many-frames": (_framed(b"\x80", count=10**6), False),
    "frames-do-not-add-up": (_u64(19) + _u64(1) + _u64(5) + b"\x80\x80\x80", False),
    "not-msgpack": (_framed(b"\xc1\xc1\xc1"), False),
    "msgpack-list": (_framed(b"\x93\x01\x02\x03"), False),
    "msgpack-map-of-other-keys": (_framed(b"\x81\xa3foo\x01"), False),
}


@pytest.mark.parametrize("name", sorted(NOT_DASK))
def test_a_peer_that_answers_otherwise_is_not_a_dask_scheduler(name):
    data, first = NOT_DASK[name]
    with _Server(answers(data, first)) as srv:
        reason = _probe(srv.address)
    assert reason.startswith("not a Dask scheduler: "), reason


@settings(max_examples=30, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(data=st.binary(min_size=0, max_size=300), first=st.booleans())
def test_any_answer_but_a_handshake_is_refused_or_no_answer(data, first):
    """Any bytes a peer may send and then close on: no answer when it sent none, otherwise not
    a Dask scheduler (arbitrary bytes are never a msgpack handshake with Dask's keys)."""
    with _Server(answers(data, first)) as srv:
        reason = _probe(srv.address)
    assert reason.startswith("no answer: " if not data else "not a Dask scheduler: "), reason


@pytest.mark.parametrize(
    "behave,accept", [(silent, True), (closes_at_once, True), (None, False)], ids=["silent", "closes", "never-accepts"]
)
def test_a_peer_that_never_answers_ends_within_the_timeout(behave, accept):
    """Accepting and saying nothing, closing at once, or never accepting (the kernel completes the
    connection): "no answer", once the timeout (1 s here) is spent or the peer has closed."""
    with _Server(behave, accept=accept) as srv:
        reason = _probe(srv.address, 1.0)
    assert reason.startswith("no answer: "), reason


def test_a_refused_port_is_no_answer():
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        port = s.getsockname()[1]  # bound, not listening: refused
        reason = _probe(f"tcp://127.0.0.1:{port}", 0.5)
    assert reason.startswith("no answer: ") and "retried for 0.5 s" in reason


def test_a_real_scheduler_passes_and_its_own_handshake_is_dask_s():
    """A real Dask scheduler (the test's own, on 127.0.0.1) passes the check, and a peer that
    sends the handshake Dask writes passes too: the check refuses only what is not Dask."""
    from distributed import LocalCluster

    with LocalCluster(n_workers=0, processes=False, protocol="tcp", dashboard_address=None) as cluster:
        check_scheduler(cluster.scheduler_address, 5.0)
    with _Server(answers(handshake_message(), first=True)) as srv:
        check_scheduler(srv.address, 5.0)


def test_other_schemes_and_unparsable_addresses_are_left_to_dask():
    for address in ("inproc://nowhere/1/2", "tls://127.0.0.1", "tcp://127.0.0.1"):
        check_scheduler(address, 0.1)  # nothing checked, nothing raised: Dask says why


@pytest.fixture
def two_ranks(tmp_path):
    for r in range(2):
        (tmp_path / f"rank-{r}.json").write_text(json.dumps(_trace(r, 2)))
    return tmp_path


def _http_server():
    import http.server

    class Quiet(http.server.BaseHTTPRequestHandler):
        def log_message(self, *args) -> None:  # not on the test's stderr
            pass

    srv = http.server.ThreadingHTTPServer(("127.0.0.1", 0), Quiet)
    threading.Thread(target=srv.serve_forever, daemon=True).start()
    return srv


def test_cli_http_server_and_silent_server_as_scheduler(two_ranks, monkeypatch):
    """End to end: Python's own HTTP server (once "out of memory while analyzing") and a silent
    server (once a hang) give the refused port's one-line error, exit 2."""
    monkeypatch.setenv("TRACEDOC_DASK_TIMEOUT", "1s")
    srv = _http_server()
    try:
        addr = f"tcp://127.0.0.1:{srv.server_address[1]}"
        r = runner.invoke(app, ["analyze", str(two_ranks), "--scheduler", addr, "--no-cache"])
    finally:
        srv.shutdown()
        srv.server_close()
    err = _one_line_exit_2(r)
    # it answers Dask's binary handshake as a bad HTTP/0.9 request: an HTML page, no status line
    assert f"cannot reach the Dask scheduler {addr} (not a Dask scheduler: it answered '<!DOCTYPE HTML>" in err
    assert "out of memory" not in err
    with _Server(silent) as s:
        err = _one_line_exit_2(runner.invoke(app, ["analyze", str(two_ranks), "--scheduler", s.address]))
    assert f"cannot reach the Dask scheduler {s.address} (no answer: nothing within 1 s)" in err


# -- duplicate ranks ----------------------------------------------------------------------------------

#: Layouts of traces: (file name, rank in distributedInfo or None), at least one rank twice.
LAYOUTS = {
    "one-rank-two-sources": [("a.json", 1), ("rank-1.json", None), ("rank-0.json", None)],
    "two-ranks-twice": [("x.json", 0), ("rank-0.json", None), ("rank-1.json", None), ("y.json", 2), ("z.json", 2)],
    "one-rank-thrice": [("rank-3.json", None), ("b.json", 3), ("c.json", 3), ("rank-0.json", None)],
}


def _write_layout(d: Path, layout) -> dict[int, list[str]]:
    claims: dict[int, list[str]] = {}
    for name, rank in layout:
        (d / name).write_text(json.dumps(_trace(rank, 4)))
        claims.setdefault(rank if rank is not None else int(name.split("-")[1].split(".")[0]), []).append(name)
    return {r: names for r, names in claims.items() if len(names) > 1}


@pytest.mark.parametrize("layout", sorted(LAYOUTS))
def test_duplicate_ranks_are_named(tmp_path, layout):
    """The rule: traces that claim one rank are never taken silently. Left to decide, tracedoc
    reports them as unrelated traces with a note naming every duplicated rank and each file that
    claims it; told ``--ranks``, it stops with one line naming them."""
    dups = _write_layout(tmp_path, LAYOUTS[layout])
    rep = analyze_inputs([str(tmp_path)], jobs=1)
    assert isinstance(rep, MultiTraceReport) and len(rep.notes) == 1
    note = rep.notes[0]
    assert note.startswith("duplicate ranks")
    for rank, names in dups.items():
        assert f"rank {rank} in {len(names)} traces" in note and all(n in note for n in names)
    assert MultiTraceReport.from_dict(json.loads(json.dumps(rep.to_dict()))) == rep
    r = runner.invoke(app, ["analyze", str(tmp_path), "-j", "1", "-f", "json", "--exit-zero"])
    assert r.exit_code == 0 and json.loads(r.stdout)["notes"] == [note]
    assert "warning: duplicate ranks" in r.stderr
    err = _one_line_exit_2(runner.invoke(app, ["analyze", str(tmp_path), "-j", "1", "--ranks"]))
    first = min(dups)
    assert f"rank {first} again" in err and all(n in err for names in dups.values() for n in names)
    with pytest.raises(TraceLoadError, match="one trace per rank expected"):
        analyze_inputs([str(tmp_path)], jobs=1, ranks=True)


def test_no_duplicates_no_note_and_the_unrelated_mode_says_nothing(tmp_path):
    for r in range(3):
        (tmp_path / f"rank-{r}.json").write_text(json.dumps(_trace(r, 3)))
    rep = analyze_inputs([str(tmp_path)], jobs=1)
    assert isinstance(rep, MultiRankReport) and rep.notes == [] and "notes" not in rep.to_dict()
    (tmp_path / "again.json").write_text(json.dumps(_trace(2, 3)))
    assert analyze_inputs([str(tmp_path)], jobs=1, ranks=False).notes == []  # told: unrelated traces


def test_a_rank_report_with_notes_round_trips():
    rep = MultiRankReport(directory="job", ranks=[], summary={"n_ranks": 0}, notes=["a worker process died: ..."])
    d = json.loads(json.dumps(rep.to_dict()))
    assert d["notes"] == rep.notes and list(d)[-2:] == ["notes", "run"]
    assert MultiRankReport.from_dict(d) == rep


def test_random_layouts_name_every_duplicate(tmp_path):
    """Seeded random layouts (ranks from distributedInfo or file names): the note names exactly
    the ranks claimed more than once."""
    rng = random.Random(21)
    for case in range(6):
        d = tmp_path / f"c{case}"
        d.mkdir()
        ranks = [rng.randrange(4) for _ in range(rng.randrange(2, 7))]
        for i, rank in enumerate(ranks):
            by_name = rng.random() < 0.5
            name = f"t{i}_rank_{rank}.json" if by_name else f"t{i}.json"
            (d / name).write_text(json.dumps(_trace(None if by_name else rank, 4)))
        rep = analyze_inputs([str(d)], jobs=1)
        twice = sorted({r for r in ranks if ranks.count(r) > 1})
        named = sorted(int(x.split(" in ")[0].split()[-1]) for x in "; ".join(rep.notes).split("; ") if " in " in x)
        assert named == twice, (ranks, rep.notes)
        assert isinstance(rep, MultiTraceReport) == bool(twice)
