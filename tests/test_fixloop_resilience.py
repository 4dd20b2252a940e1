"""Issue 21, fix-loop: nothing measured is lost, nothing started outlives the loop.

Each class of failure is tested from its general rule, over every point or variant where it
can happen, not from one example:

1. every completed measurement is in ``summary.json``, wherever an interrupt lands;
2. every process a trial starts, however detached, is gone when the trial ends, however it ends;
3. a relative ``--out`` means the folder it named when the loop started, whatever the workload does;
4. each log keeps its head and tail, and is whole when it fits;
5. on a full disk the summary is written first, whatever filled it;
6. a run that deletes ``--out`` loses nothing: what is measured is written again.

Workloads are small torch-free scripts written by the tests; every wait is bounded.
"""

from __future__ import annotations

import errno
import json
import os
import signal
import subprocess
import sys
import textwrap
import time
from collections import Counter
from pathlib import Path

import pytest

from tracedoc.fixloop import files
from tracedoc.fixloop.loop import FixLoop, LoopOptions, Terminated
from tracedoc.fixloop.proctree import ProcessTree, _own_cgroup
from tracedoc.fixloop.runner import SubprocessRunner, TrialOutcome
from tracedoc.report.fixloop import FixLoopSummary
from tracedoc.report.model import Finding, Report

pytestmark = pytest.mark.skipif(sys.platform != "linux", reason="POSIX signals, /proc")

WORKLOAD = textwrap.dedent('''
    """A torch-free workload that misbehaves as its Config says."""
    import gzip, json, os, shutil, signal, subprocess, sys, time
    from dataclasses import dataclass
    from pathlib import Path

    @dataclass(frozen=True)
    class Config:
        fast_path: bool = False
        batch_size: int = 8
        chatter: int = 0          # bytes written to stdout and to stderr
        crash_after_chatter: bool = False
        spawn: str = ""           # how to start a child that should not outlive the trial
        hang_at: str = ""         # sleep until stopped in the runs whose folder starts so ("ab-03")
        chdir: bool = False       # move to / first
        delete_at: str = ""       # the run (e.g. "trial-01/ab-02-B") that deletes --out
        recreate: bool = True     # ... and then makes its own folder again

    SLEEPER = "import signal, time; signal.signal(signal.SIGTERM, signal.SIG_IGN); time.sleep(120)"

    def stream(n):
        return "".join(f"{i:08d}\\n" for i in range(n // 9 + 1))[:n]

    def spawn(kind, pids):
        if kind == "child":
            pids.append(subprocess.Popen([sys.executable, "-c", SLEEPER]).pid)
        elif kind == "setsid":
            pids.append(subprocess.Popen([sys.executable, "-c", SLEEPER], start_new_session=True).pid)
        elif kind == "setsid_tree":  # a new session whose leader starts a child and exits
            code = ("import subprocess, sys; p = subprocess.Popen([sys.executable, '-c', %r], "
                    "stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL); "
                    "print(p.pid, flush=True)" % SLEEPER)
            out = subprocess.run([sys.executable, "-c", code], start_new_session=True, capture_output=True,
                                 text=True)
            pids.append(int(out.stdout.split()[0]))
        elif kind == "daemon":  # double fork: re-parented to init, in a session of its own
            r, w = os.pipe()
            if os.fork() == 0:
                os.setsid()
                pid = os.fork()
                if pid == 0:
                    os.execv(sys.executable, [sys.executable, "-c", SLEEPER])
                os.write(w, str(pid).encode())
                os._exit(0)
            os.close(w)
            pids.append(int(os.read(r, 64)))

    def run(config, out_dir):
        here = Path(out_dir)
        out = here.parent if here.name.startswith("trial-") else here.parent.parent
        if config.chdir:
            os.chdir("/")
        if config.delete_at and str(here).endswith(config.delete_at):
            shutil.rmtree(out)  # "clean the output folder", and perhaps make its own again
            if config.recreate:
                here.mkdir(parents=True)
        if config.chatter:
            text = stream(config.chatter)
            sys.stdout.write(text)
            sys.stdout.flush()
            sys.stderr.write(text)
            sys.stderr.flush()
            if config.crash_after_chatter:
                raise RuntimeError("the last words of a chatty workload")
        pids = []
        spawn(config.spawn, pids)
        if pids:
            with open(out.parent / "pids.txt", "a") as fh:
                fh.write("".join(f"{p}\\n" for p in pids))
        if config.hang_at and here.name.startswith(config.hang_at):
            time.sleep(120)
        speed = 200.0 if config.fast_path else 100.0
        events = [{"ph": "X", "cat": "user_annotation", "name": f"ProfilerStep#{i}", "ts": 1000 * (i + 1),
                   "dur": 900, "pid": 1, "tid": 1} for i in range(3)]  # a tiny trace the analyzer reads
        if not os.environ.get("TRACEDOC_MEASURE_ONLY"):  # as the harness: a trace only when profiled
            with gzip.open(os.path.join(out_dir, "trace.pt.trace.json.gz"), "wt") as fh:
                json.dump({"traceEvents": events, "fast": config.fast_path}, fh)
        return {"samples_per_s": [speed] * 3, "step_time_ms": [1000 * config.batch_size / speed] * 3,
                "batch_size": config.batch_size, "trace": "trace.pt.trace.json.gz",
                "device": {"type": "cpu", "name": "fake"}}
''')


def report_of(findings: list[Finding]) -> Report:
    return Report(
        trace={}, signals={}, signals_unavailable={}, units={}, steps=[], findings=findings, skipped=[]
    )  # fmt: skip


SLOW_PATH = Finding.from_dict(
    {
        "code": "TD900",
        "name": "slow-path",
        "severity": "warning",
        "message": "slow",
        "estimated_saving_ms": 40.0,
        "saving_basis": "",
        "evidence": {},
        "fix": {"summary": "take the fast path", "safety": "safe", "knobs": ["fast_path"]},
    }
)


def fake_analyze(trace: Path) -> Report:
    import gzip

    fast = json.loads(gzip.decompress(trace.read_bytes()))["fast"]
    return report_of([] if fast else [SLOW_PATH])


@pytest.fixture()
def workload(tmp_path) -> Path:
    path = tmp_path / "wl" / "workload.py"
    path.parent.mkdir()
    path.write_text(WORKLOAD)
    return path


def alive(pid: int) -> bool:
    try:
        with open(f"/proc/{pid}/stat") as fh:
            return fh.read().rsplit(")", 1)[1].split()[0] not in ("Z", "X")
    except OSError:
        return False


def wait_gone(pids: list[int], timeout: float = 10.0) -> list[int]:
    """The pids still alive after up to ``timeout`` s (a SIGKILLed process may take a moment)."""
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline and any(alive(p) for p in pids):
        time.sleep(0.05)
    return [p for p in pids if alive(p)]


def read_pids(path: Path) -> list[int]:
    return [int(x) for x in path.read_text().split()] if path.exists() else []


def loop_in_process(workload: Path, out: Path, sets: list[str], **runner_kw) -> FixLoop:
    runner = SubprocessRunner(workload, timeout_s=runner_kw.pop("timeout_s", 60), analyze=fake_analyze, **runner_kw)
    loop = FixLoop(runner, runner.describe(), out, LoopOptions(n_cpus=2, max_trials=1, sets=sets))
    loop.run()
    return loop


def on_disk(out: Path) -> dict:
    return json.loads((out / "summary.json").read_text())


# ------------------------------------------------------------------ 1. every measurement is kept
class CountingRunner:
    """A fake runner whose every run returns a value no other run returns (the incumbent about
    100 samples/s, the candidate about 150), and that is interrupted at call ``stop_at``;
    ``during_analysis`` interrupts a profiled run after it measured (``exc.outcome``)."""

    def __init__(self, stop_at: int | None = None, exc: type | None = None, during_analysis: bool = False):
        self.calls = 0
        self.stop_at, self.exc, self.during_analysis = stop_at, exc, during_analysis
        self.returned: list[float] = []  # every samples/s value a finished run handed back

    def describe(self):  # not used by FixLoop
        raise NotImplementedError

    def _interrupt(self) -> KeyboardInterrupt:
        return Terminated(signal.SIGTERM) if self.exc is Terminated else KeyboardInterrupt()

    def _value(self, config) -> float:
        self.calls += 1
        return (150.0 if config["fast_path"] else 100.0) + self.calls / 1000

    def run(self, config, trial_dir: Path, on_tick=None) -> TrialOutcome:
        if self.calls == self.stop_at and not self.during_analysis:
            raise self._interrupt()
        v = self._value(config)
        reps = [v, v + 0.0001, v + 0.0002]
        outcome = TrialOutcome(
            "ok",
            samples_per_s=reps,
            step_time_ms=[800.0 / s for s in reps],
            batch_size=8,
            device={"type": "cpu", "name": "fake"},
            analysis=report_of([] if config["fast_path"] else [SLOW_PATH]),
            dir=str(trial_dir),
        )
        if self.calls - 1 == self.stop_at and self.during_analysis:
            exc = self._interrupt()
            outcome.status, outcome.analysis = "interrupted", None
            exc.outcome = outcome
            self.returned += reps
            raise exc
        self.returned += reps
        return outcome

    def measure(self, config, run_dir: Path, on_tick=None) -> TrialOutcome:
        if self.calls == self.stop_at:
            raise self._interrupt()
        v = self._value(config)
        self.returned.append(v)
        return TrialOutcome("ok", samples_per_s=[v], step_time_ms=[800.0 / v], batch_size=8, device={"type": "cpu"})


def fake_spec():
    from tracedoc.fixloop.workload import FieldSpec, WorkloadSpec

    fields = [FieldSpec("fast_path", "bool", False), FieldSpec("batch_size", "int", 8)]
    return WorkloadSpec(path="fake.py", fields={f.name: f for f in fields}, knobs={})


def summary_values(summary: dict) -> list[float]:
    """Every samples/s value the summary holds: each trial's profiled run and its A/B rounds."""
    out: list[float] = []
    for t in summary["trials"]:
        out += (t.get("profiled_run") or {}).get("samples_per_s") or []
        ab = t.get("ab") or {}
        for side in ("incumbent", "candidate"):
            out += (ab.get(side) or {}).get("samples_per_s") or []
        out += [u["samples_per_s"] for u in ab.get("unpaired") or []]
    return out


def _full_run_calls(tmp_path) -> int:
    runner = CountingRunner()
    FixLoop(runner, fake_spec(), tmp_path / "full", LoopOptions(n_cpus=2, max_trials=1)).run()
    return runner.calls


@pytest.mark.parametrize("exc", [KeyboardInterrupt, Terminated])
@pytest.mark.parametrize("during_analysis", [False, True])
def test_an_interrupt_anywhere_keeps_every_finished_measurement(tmp_path, exc, during_analysis):
    total = _full_run_calls(tmp_path)
    assert total == 12  # the baseline, trial 1's profiled run, 5 A/B rounds of two runs
    for stop_at in range(total):
        runner = CountingRunner(stop_at, exc, during_analysis)
        out = tmp_path / f"out-{stop_at}"
        loop = FixLoop(runner, fake_spec(), out, LoopOptions(n_cpus=2, max_trials=1))
        returned = loop.run()
        summary = on_disk(out)
        assert summary == returned and summary["interrupted"] is True
        assert Counter(summary_values(summary)) == Counter(runner.returned), f"interrupted at call {stop_at}"
        last = summary["trials"][-1]
        assert last["status"] == "interrupted" and last["elapsed_s"] >= 0
        if stop_at > 1 or (stop_at == 1 and during_analysis):  # trial 1's profiled run had measured
            assert last["index"] == 1 and last["profiled_run"]["samples_per_s"]
            assert last["change"] == "fast_path: false -> true" and last["finding"]["code"] == "TD900"
        assert FixLoopSummary.from_dict(summary).to_dict() == summary


def test_an_uninterrupted_loop_keeps_every_measurement_too(tmp_path):
    runner = CountingRunner()
    summary = FixLoop(runner, fake_spec(), tmp_path / "out", LoopOptions(n_cpus=2, max_trials=1)).run()
    assert [t["status"] for t in summary["trials"]] == ["baseline", "kept"]
    assert Counter(summary_values(summary)) == Counter(runner.returned)
    assert "unpaired" not in summary["trials"][1]["ab"]


def test_a_real_sigterm_during_the_rounds_keeps_what_is_on_disk(workload, tmp_path):
    """The loop as a command, stopped while trial 1's third round runs: every run that wrote
    a measured result.json is in summary.json."""
    out = tmp_path / "out"
    rules = tmp_path / "rules" / "TX1_always.toml"
    rules.parent.mkdir()
    rules.write_text(RULE)
    cmd = [sys.executable, "-m", "tracedoc", "fix-loop", str(workload), "--out", str(out), "--rules", str(rules)]
    cmd += ["--max-trials", "1", "--set", "hang_at=ab-03"]
    proc = subprocess.Popen(cmd, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    deadline = time.monotonic() + 120
    while not (out / "trial-01" / "ab-03-A").exists() and time.monotonic() < deadline:
        time.sleep(0.05)
    time.sleep(0.3)
    proc.send_signal(signal.SIGTERM)
    _, stderr = proc.communicate(timeout=120)
    assert proc.returncode == 143, stderr
    assert "Traceback" not in stderr
    summary = on_disk(out)
    measured = []
    for result in sorted(out.glob("trial-*/**/result.json")):
        data = json.loads(result.read_text())
        if data.get("samples_per_s"):
            measured += data["samples_per_s"] if "ab-" not in str(result) else [data["samples_per_s"][1]]
    trial = summary["trials"][1]
    assert trial["status"] == "interrupted" and trial["ab"]["rounds"] == 2
    assert trial["profiled_run"]["samples_per_s"] == [200.0] * 3
    assert Counter(summary_values(summary)) == Counter(measured)


def test_an_interrupt_during_the_analysis_keeps_the_profiled_run(workload, tmp_path):
    """The real runner: a run that measured and is interrupted while its trace is analyzed
    hands its measurements on with the interrupt, and its result.json holds them."""

    def analyze(trace):
        raise Terminated(signal.SIGTERM)

    runner = SubprocessRunner(workload, timeout_s=60, analyze=analyze)
    with pytest.raises(Terminated) as info:
        runner.run(runner.describe().defaults(), tmp_path / "trial-00")
    outcome = info.value.outcome
    assert outcome.status == "interrupted" and outcome.samples_per_s == [100.0] * 3
    result = json.loads((tmp_path / "trial-00" / "result.json").read_text())
    assert result["status"] == "interrupted" and result["samples_per_s"] == [100.0] * 3


RULE = textwrap.dedent("""
    code = "TX901"
    name = "always"
    severity = "info"
    summary = "fires on every trace with steps"
    condition = "step_time_ms > 0"
    message = "m"
    estimated_saving_ms = "step_time_ms"
    [fix]
    summary = "take the fast path"
    safety = "safe"
    knobs = ["fast_path"]
    [docs]
    what = "w"
    why = "w"
    example = "e"
    fix = "f"
    safety = "s"
    """)


# ------------------------------------------------------------------ 2. no process outlives its trial
SPAWNS = ["child", "setsid", "setsid_tree", "daemon"]


def _stop_when_spawned(pids_file: Path):
    def tick(elapsed):
        if read_pids(pids_file):
            raise KeyboardInterrupt

    return tick


@pytest.mark.parametrize("spawn", SPAWNS)
@pytest.mark.parametrize("ending", ["exits", "timeout", "interrupted"])
def test_every_process_a_trial_starts_ends_with_it(workload, tmp_path, spawn, ending):
    """However a child detaches (its own session, a re-parented grandchild, a double-forked
    daemon; each ignoring SIGTERM) and however the trial ends, nothing it started is left."""
    out = tmp_path / "out"
    runner = SubprocessRunner(workload, timeout_s=3 if ending == "timeout" else 30, analyze=fake_analyze)
    runner.kill_grace_s = 0.5
    config = {**runner.describe().defaults(), "spawn": spawn, "hang_at": "" if ending == "exits" else "trial"}
    pids_file = tmp_path / "pids.txt"
    if ending == "interrupted":
        with pytest.raises(KeyboardInterrupt):
            runner.run(config, out / "trial-00", on_tick=_stop_when_spawned(pids_file))
    else:
        outcome = runner.run(config, out / "trial-00")
        assert outcome.status == ("ok" if ending == "exits" else "timeout"), outcome.error
    pids = read_pids(pids_file)
    assert pids, "the workload started no child"
    assert wait_gone(pids) == [], f"{spawn} child outlived a trial that {ending}"


def test_the_loop_leaves_no_process_after_any_run(workload, tmp_path):
    """Every profiled run and every A/B run starts a detached daemon; none is left."""
    loop = loop_in_process(workload, tmp_path / "out", ["spawn=daemon"])
    assert [t["status"] for t in on_disk(tmp_path / "out")["trials"]] == ["baseline", "kept"]
    pids = read_pids(tmp_path / "pids.txt")
    assert len(pids) == 2 + 2 * loop.records[1].ab["rounds"]
    assert wait_gone(pids) == []


def test_a_cgroup_member_is_ended_even_outside_the_tree(tmp_path):
    """Where the trial has a cgroup, whatever the cgroup lists is ended, whether or not /proc
    shows it below the trial (a process that left the tree and cleared its environment)."""
    own = _own_cgroup()
    if own is None:
        pytest.skip("no cgroup v2 line in /proc/self/cgroup")
    parent = tmp_path / own.lstrip("/")
    parent.mkdir(parents=True, exist_ok=True)
    (parent / "cgroup.procs").write_text("")
    leader = subprocess.Popen([sys.executable, "-c", "import time; time.sleep(60)"])
    stranger = subprocess.Popen([sys.executable, "-c", "import time; time.sleep(60)"], env={})
    try:
        tree = ProcessTree("0123456789abcdef", cgroup_root=tmp_path)
        tree.attach(leader.pid)
        assert tree.cgroup is not None and (tree.cgroup / "cgroup.procs").read_text().split() == [str(leader.pid)]
        (tree.cgroup / "cgroup.procs").write_text(f"{leader.pid}\n{stranger.pid}\n")  # the kernel would list it
        assert tree.signal(signal.SIGKILL) == 2
        assert leader.wait(timeout=10) == -signal.SIGKILL and stranger.wait(timeout=10) == -signal.SIGKILL
    finally:
        for p in (leader, stranger):
            if p.poll() is None:
                p.kill()
                p.wait()


def test_a_reused_pid_is_never_signalled(tmp_path):
    """A process is named by its pid and start time: an unrelated process is not ended even
    when a pid the trial once had is recorded (here: a start time that cannot match)."""
    other = subprocess.Popen([sys.executable, "-c", "import time; time.sleep(60)"])
    try:
        tree = ProcessTree("fedcba9876543210", cgroup_root=None)
        tree.seen.add((other.pid, -1))
        assert tree.signal(signal.SIGKILL) == 0 and other.poll() is None
    finally:
        other.kill()
        other.wait()


# ------------------------------------------------------------------ 3. a relative --out
@pytest.mark.parametrize("out_arg", ["out", "runs/../out", "./deep/er/out"])
def test_a_relative_out_is_resolved_once(workload, tmp_path, out_arg):
    """Whatever relative --out is given, and though every run of the workload changes
    directory, each trial writes into the folder --out named when the loop started."""
    cwd = tmp_path / "cwd"
    cwd.mkdir()
    cmd = [sys.executable, "-m", "tracedoc", "fix-loop", str(workload), "--out", out_arg, "--set", "chdir=true"]
    proc = subprocess.run([*cmd, "--format", "json"], capture_output=True, text=True, timeout=120, cwd=cwd)
    assert proc.returncode == 0, proc.stderr
    out = (cwd / out_arg).resolve()
    summary = on_disk(out)
    assert summary["out_dir"] == str(out) and summary["trials"][0]["status"] == "baseline"
    for t in summary["trials"]:
        assert Path(t["dir"]).is_absolute() and Path(t["dir"]).parent == out
        assert (Path(t["dir"]) / "result.json").is_file()
    assert json.loads(proc.stdout) == summary


# ------------------------------------------------------------------ 4. bounded logs
HEAD, TAIL = 1000, 700


def stream(n: int) -> bytes:
    return "".join(f"{i:08d}\n" for i in range(n // 9 + 1))[:n].encode()


@pytest.mark.parametrize("n", [0, 1, HEAD - 1, HEAD, HEAD + TAIL, HEAD + TAIL + 1, 20_000, 3_000_000])
def test_each_log_keeps_its_head_and_tail(workload, tmp_path, n):
    """Whatever a workload prints, each log holds its first HEAD and last TAIL bytes and a line
    saying how much is left out between them; a stream that fits is kept whole."""
    runner = SubprocessRunner(workload, analyze=fake_analyze, log_head_bytes=HEAD, log_tail_bytes=TAIL)
    outcome = runner.run({**runner.describe().defaults(), "chatter": n}, tmp_path / "trial-00")
    assert outcome.status == "ok", outcome.error
    # stdout: the workload's stream, then the line the trial prints with the result
    result_line = json.dumps({"samples_per_s": [100.0] * 3, "step_time_ms": [80.0] * 3}).encode() + b"\n"
    for name, sent in (("stderr.log", stream(n)), ("stdout.log", stream(n) + result_line)):
        got = (tmp_path / "trial-00" / name).read_bytes()
        if len(sent) <= HEAD + TAIL:
            assert got == sent, name
            continue
        note = (
            f"\n[tracedoc: {len(sent) - HEAD - TAIL} bytes of this log left out; the first {HEAD} and "
            f"the last {TAIL} bytes are kept]\n"
        ).encode()
        assert got == sent[:HEAD] + note + sent[-TAIL:], name


def test_the_default_limits_bound_a_runaway_log_and_keep_its_last_words(workload, tmp_path):
    runner = SubprocessRunner(workload, analyze=fake_analyze)
    config = {**runner.describe().defaults(), "chatter": 6_000_000, "crash_after_chatter": True}
    outcome = runner.run(config, tmp_path / "trial-00")
    assert outcome.status == "crashed" and "the last words of a chatty workload" in outcome.error
    for name in ("stdout.log", "stderr.log"):
        size = (tmp_path / "trial-00" / name).stat().st_size
        assert size <= files.LOG_HEAD_BYTES + files.LOG_TAIL_BYTES + 200, (name, size)
    assert b"the last words" in (tmp_path / "trial-00" / "stderr.log").read_bytes()[-5000:]


# ------------------------------------------------------------------ 5. a full disk
class FakeDisk:
    """A disk of ``quota`` bytes under ``root``: a write through the fix-loop's one writer
    (:func:`tracedoc.fixloop.files._store`) that would take the files under ``root`` past the
    quota raises ``ENOSPC``, as a full file system does. Removing files frees room."""

    def __init__(self, root: Path, quota: int, store) -> None:
        self.root, self.quota, self._store = root, quota, store
        self.refused: list[str] = []

    def used(self) -> int:
        total = 0
        for f in self.root.rglob("*"):
            try:
                total += f.stat().st_size if f.is_file() else 0
            except OSError:
                continue
        return total

    def store(self, path: Path, data: bytes, mode: str) -> None:
        if self.used() + len(data) > self.quota:
            self.refused.append(path.name)
            raise OSError(errno.ENOSPC, os.strerror(errno.ENOSPC), str(path))
        self._store(path, data, mode)


@pytest.mark.parametrize("quota", [0, 400, 4_000, 12_000, 30_000, 60_000, 10**9])
def test_on_a_full_disk_the_summary_is_written_first(workload, tmp_path, monkeypatch, quota):
    """Wherever the disk fills (the first config.json, a log, a result, the summary itself),
    the loop stops without an exception after the trial in flight; summary.json, when it is
    there, is the summary in memory, whole; and it is missing only when even removing every
    log of the run could not make room for it (the failure is then reported)."""
    out = tmp_path / "out"
    disk = FakeDisk(out, quota, files._store)
    monkeypatch.setattr(files, "_store", disk.store)
    loop = loop_in_process(workload, out, ["chatter=1500"])
    memory = loop.summary.to_dict()
    assert len(memory["trials"]) >= 1
    if (out / "summary.json").exists() and on_disk(out) == memory:
        assert loop.summary_error is None
    else:  # missing or out of date: reported, and everything that may go for it is gone
        assert loop.summary_error and "No space left" in loop.summary_error
        assert list(out.glob("trial-*/**/*.log")) == [], "a log was kept while the summary was not written"
        assert not (out / "summary.md").exists() and not (out / "final_config.json").exists()
    if disk.refused:
        assert loop.disk_full and "No space left" in loop.disk_full, disk.refused
        assert any("disk filled" in w for w in memory["warnings"])
        if any(not name.startswith(("summary.", "final_config.")) for name in disk.refused):  # during a trial
            assert memory["stop_reason"].startswith(("disk full", "baseline crashed: cannot write"))
    else:
        assert memory["stop_reason"] == "trial budget spent (1 trial)" and not loop.disk_full


@pytest.mark.parametrize("fills", ["config.json", "stdout.log", "stderr.log", "result.json"])
def test_a_full_disk_in_the_rounds_stops_the_loop_after_that_trial(workload, tmp_path, monkeypatch, fills):
    """Whichever file of round 3 finds the disk full, trial 1 keeps every round measured
    before it (and round 3 when only its own records failed), and it is the last trial."""
    out = tmp_path / "out"
    real = files._store

    def store(path, data, mode):
        if "ab-03" in str(path) and path.name.startswith(fills):
            raise OSError(errno.ENOSPC, os.strerror(errno.ENOSPC), str(path))
        real(path, data, mode)

    monkeypatch.setattr(files, "_store", store)
    runner = SubprocessRunner(workload, timeout_s=60, analyze=fake_analyze)
    loop = FixLoop(runner, runner.describe(), out, LoopOptions(n_cpus=2, max_trials=5))
    summary = loop.run()
    assert on_disk(out) == summary
    trial = summary["trials"][-1]
    assert len(summary["trials"]) == 2 and trial["status"] == "inconclusive"
    if fills == "config.json":  # the run could not start
        assert trial["ab"]["rounds"] == 2 and "cannot write config.json: No space left" in trial["error"]
    else:  # the run measured; only its record on disk failed
        assert trial["ab"]["rounds"] == 3 and "disk full after A/B round 3" in trial["error"]
    assert summary["stop_reason"].startswith("disk full")


# ------------------------------------------------------------------ 6. a run that deletes --out
@pytest.mark.parametrize("recreate", [True, False])
@pytest.mark.parametrize(
    "delete_at", ["trial-00", "trial-01", "trial-01/ab-01-A", "trial-01/ab-02-B", "trial-01/ab-05-A"]
)
def test_a_run_that_deletes_out_loses_nothing(workload, tmp_path, delete_at, recreate):
    """Whichever run deletes --out (a profiled run, either side of any round), whether or not
    it makes its own folder again, the loop goes on without an exception, and summary.json
    holds every trial and round: what is measured is kept in memory and written again."""
    out = tmp_path / "out"
    loop = loop_in_process(workload, out, [f"delete_at={delete_at}", f"recreate={str(recreate).lower()}"])
    summary = on_disk(out)
    assert summary == loop.summary.to_dict()
    statuses = [t["status"] for t in summary["trials"]]
    if not recreate and delete_at in ("trial-00", "trial-01"):  # the workload cannot write its own trace
        assert statuses[-1] == "crashed" and "No such file or directory" in summary["trials"][-1]["error"]
        assert statuses == (["crashed"] if delete_at == "trial-00" else ["baseline", "crashed"])
        return
    assert statuses == ["baseline", "kept"]
    assert summary["trials"][1]["ab"]["rounds"] == 5 and summary["final"]["config"]["fast_path"] is True
    assert json.loads((out / "final_config.json").read_text())["fast_path"] is True
