"""Hard stops and hostile workloads (issue 9, fix-loop items 1-4): no traceback, nothing lost.

Torch-free workloads in subprocesses; each case is the issue's example plus a variant.
"""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import textwrap
import time
from pathlib import Path

import pytest
from helpers import report_of

from tracedoc.fixloop.runner import SubprocessRunner
from tracedoc.report.model import Report

pytestmark = pytest.mark.skipif(sys.platform == "win32", reason="POSIX signals and process groups")

ROOT = Path(__file__).resolve().parents[1]

WORKLOAD = textwrap.dedent('''
    """A torch-free workload whose ``mode`` misbehaves in one way or another."""
    import gzip, json, math, os, signal, subprocess, sys, time
    from dataclasses import dataclass

    @dataclass(frozen=True)
    class Config:
        mode: str = "ok"
        batch_size: int = 8
        fast_path: bool = False
        sleep_s: float = 0.0

    def run(config, out_dir):
        if config.mode in ("sleep", "stubborn"):
            if config.mode == "stubborn":
                signal.signal(signal.SIGTERM, signal.SIG_IGN)
            child = subprocess.Popen([sys.executable, "-c",
                                      "import signal, time; signal.signal(signal.SIGTERM, signal.SIG_IGN); "
                                      "time.sleep(300)"])
            with open(os.path.join(out_dir, "..", "pids.txt"), "a") as fh:
                fh.write(f"{os.getpid()} {child.pid}\\n")
            time.sleep(300)
        if config.mode == "exit0":
            os._exit(0)
        if config.mode == "list_result":
            with open(os.path.join(out_dir, "result.json"), "w") as fh:
                json.dump([1, 2, 3], fh)
            os._exit(0)
        time.sleep(config.sleep_s)
        speed = 200.0 if config.fast_path else 100.0
        samples = {"string": "987", "negative": [-5.0], "zero": [0.0], "nan": [math.nan], "inf": [math.inf],
                   "bool": [True]}.get(config.mode, [speed] * 3)
        batch = "abc" if config.mode == "bad_batch" else config.batch_size
        events = []  # a tiny real trace, three 0.9 ms steps, so the real analyzer can read it
        for i in range(3):
            events.append({"ph": "X", "cat": "user_annotation", "name": f"ProfilerStep#{i}", "ts": 1000 * (i + 1),
                           "dur": 900, "pid": 1, "tid": 1})
        with gzip.open(os.path.join(out_dir, "trace.pt.trace.json.gz"), "wt") as fh:
            json.dump({"traceEvents": events, "fast": config.fast_path}, fh)
        if config.mode == "not_a_dict":
            return [speed]
        return {"samples_per_s": samples, "step_time_ms": [1000 * config.batch_size / speed] * 3,
                "batch_size": batch, "trace": "trace.pt.trace.json.gz",
                "device": {"type": "cpu", "name": "fake"}}
''')


def fake_analyze(trace: Path) -> Report:
    import gzip

    slow = not json.loads(gzip.decompress(trace.read_bytes()))["fast"]
    fix = {"summary": "fast path", "safety": "safe", "knobs": ["fast_path"]}
    findings = [{"code": "TD900", "name": "slow-path", "estimated_saving_ms": 40.0, "fix": fix}] if slow else []
    return report_of(findings)


@pytest.fixture()
def workload(tmp_path) -> Path:
    path = tmp_path / "wl" / "workload.py"
    path.parent.mkdir()
    path.write_text(WORKLOAD)
    return path


def run_mode(workload: Path, tmp_path: Path, mode: str, **kw):
    runner = SubprocessRunner(workload, timeout_s=60, analyze=fake_analyze)
    config = {**runner.describe().defaults(), "mode": mode, **kw}
    return runner.run(config, tmp_path / f"trial-{mode}")


def strict_json(path: Path):
    def refuse(name):
        raise AssertionError(f"{path} holds a bare {name}")

    return json.loads(path.read_text(), parse_constant=refuse)


def alive(pid: int) -> bool:
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    try:  # a zombie waiting for its parent counts as gone
        with open(f"/proc/{pid}/stat") as fh:
            return fh.read().split(")")[-1].split()[0] != "Z"
    except OSError:
        return True


def loop_cmd(workload: Path, out: Path, *args: str) -> list[str]:
    return [sys.executable, "-m", "tracedoc", "fix-loop", str(workload), "--out", str(out), *args]


def start_loop(workload: Path, out: Path, *args: str) -> subprocess.Popen:
    cmd = loop_cmd(workload, out, *args)
    return subprocess.Popen(cmd, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, cwd=out.parent)


def run_loop(workload: Path, out: Path, *args: str) -> subprocess.CompletedProcess:
    """``tracedoc fix-loop WORKLOAD --out OUT ARGS`` to the end (at most 120 s), output captured."""
    return subprocess.run(loop_cmd(workload, out, *args), capture_output=True, text=True, timeout=120)


def wait_for(path: Path, timeout: float = 60) -> None:
    deadline = time.monotonic() + timeout
    while not (path.exists() and path.read_text().strip()) and time.monotonic() < deadline:
        time.sleep(0.1)
    assert path.exists(), f"{path} never appeared"


# ---------------------------------------------------------------- 1. SIGTERM / SIGHUP
@pytest.mark.parametrize("sig,code", [(signal.SIGTERM, 143), (signal.SIGHUP, 129)])
def test_kill_term_leaves_summary_and_no_process(workload, tmp_path, sig, code):
    out = tmp_path / "out"
    proc = start_loop(workload, out, "--set", "mode=sleep")
    wait_for(out / "pids.txt")
    pids = [int(p) for p in (out / "pids.txt").read_text().split()]
    time.sleep(0.5)
    proc.send_signal(sig)
    stdout, stderr = proc.communicate(timeout=60)
    assert proc.returncode == code, stderr
    assert "Traceback" not in stderr
    summary = strict_json(out / "summary.json")
    assert summary["interrupted"] is True and summary["signal"] == sig
    assert summary["stop_reason"] == f"terminated by {signal.Signals(sig).name}"
    trial = summary["trials"][0]
    assert trial["status"] == "interrupted" and trial["elapsed_s"] > 0.4  # not 0.0
    time.sleep(0.2)
    assert not [p for p in pids if alive(p)], "a process of the run is still alive"


def test_second_signal_in_grace_period_kills_a_trial_that_ignores_sigterm(workload, tmp_path):
    out = tmp_path / "out"
    # a 600 s grace period: only the second interrupt can end this trial in time, on any host
    proc = start_loop(workload, out, "--set", "mode=stubborn", "--kill-grace", "600")
    wait_for(out / "pids.txt")
    pids = [int(p) for p in (out / "pids.txt").read_text().split()]
    time.sleep(0.5)
    proc.send_signal(signal.SIGINT)
    time.sleep(1.0)  # inside the grace period: the trial ignores SIGTERM
    assert any(alive(p) for p in pids)
    proc.send_signal(signal.SIGINT)
    stdout, stderr = proc.communicate(timeout=120)  # escalated at once, not after the 600 s grace period
    assert proc.returncode == 130, stderr
    assert "Traceback" not in stderr
    assert strict_json(out / "summary.json")["interrupted"] is True
    time.sleep(0.2)
    assert not [p for p in pids if alive(p)], "a trial that ignores SIGTERM was orphaned"


# ---------------------------------------------------------------- 2. reusing --out
def test_stale_result_json_is_never_read(workload, tmp_path):
    trial = tmp_path / "trial-exit0"
    trial.mkdir()
    old = {"status": "ok", "samples_per_s": [200.0] * 3, "step_time_ms": [40.0] * 3, "batch_size": 8}
    (trial / "result.json").write_text(json.dumps(old))
    outcome = run_mode(workload, tmp_path, "exit0")
    assert outcome.status == "crashed"
    assert outcome.error == "exit status 0, but the workload wrote no result.json"
    # variant: a result.json written this run but without this run's token (a copy of an old one)
    outcome = run_mode(workload, tmp_path, "list_result")
    assert outcome.status == "crashed" and "holds a JSON list, not an object" in outcome.error


def test_reusing_out_refuses_or_overwrites(workload, tmp_path):
    out = tmp_path / "out"
    first = run_loop(workload, out, "--max-trials", "0")
    assert first.returncode == 0, first.stderr
    (out / "trial-07").mkdir()  # a trial folder of an earlier, longer run
    again = run_loop(workload, out, "--max-trials", "0")
    assert again.returncode == 2 and "not empty" in again.stderr and "--overwrite" in again.stderr
    assert len(again.stderr.strip().splitlines()) == 1
    over = run_loop(workload, out, "--max-trials", "0", "--overwrite")
    assert over.returncode == 0, over.stderr
    assert not (out / "trial-07").exists() and (out / "trial-00" / "result.json").exists()
    # --overwrite never deletes what a fix-loop did not write
    (out / "notes.txt").write_text("mine")
    keep = run_loop(workload, out, "--overwrite")
    assert keep.returncode == 2 and "notes.txt" in keep.stderr and (out / "notes.txt").exists()


# ---------------------------------------------------------------- 3. bad results, bad options
@pytest.mark.parametrize(
    "mode,reason",
    [
        ("string", "samples_per_s must be a list of numbers (one per repeat), not a str"),
        ("bad_batch", "batch_size must be a positive integer, not 'abc'"),
        ("negative", "samples_per_s must be finite and > 0, got -5.0"),
        ("zero", "samples_per_s must be finite and > 0, got 0.0"),
        ("nan", "samples_per_s must be finite and > 0, got nan"),
        ("inf", "samples_per_s must be finite and > 0, got inf"),
        ("bool", "samples_per_s must hold numbers, not bool"),
        ("not_a_dict", "run() must return a dict, not a list"),
        ("list_result", "result.json holds a JSON list, not an object"),
    ],
)
def test_bad_results_are_failed_trials_with_a_reason(workload, tmp_path, mode, reason):
    outcome = run_mode(workload, tmp_path, mode)
    assert outcome.status == "crashed"
    assert reason in outcome.error
    assert outcome.samples_per_s == []
    strict_json(tmp_path / f"trial-{mode}" / "result.json")


def test_workload_printing_at_import(tmp_path):
    path = tmp_path / "noisy.py"
    path.write_text('print("hello from the workload")\nprint("{not json")\n' + WORKLOAD)
    runner = SubprocessRunner(path, timeout_s=60, analyze=fake_analyze)
    spec = runner.describe()
    assert "mode" in spec.fields
    outcome = runner.run(spec.defaults(), tmp_path / "t")
    assert outcome.status == "ok" and outcome.samples_per_s == [100.0] * 3


def test_summary_is_strict_json_and_bad_trial_is_reverted(workload, tmp_path):
    out = tmp_path / "out"
    proc = run_loop(workload, out, "--set", "mode=nan")
    assert proc.returncode == 2 and "Traceback" not in proc.stderr
    summary = strict_json(out / "summary.json")
    assert summary["trials"][0]["status"] == "crashed"
    assert "finite and > 0, got nan" in summary["trials"][0]["error"]


@pytest.mark.parametrize(
    "args,message",
    [
        (["--timeout", "nan"], "--timeout and --min-gain must be finite numbers"),
        (["--timeout", "inf"], "--timeout and --min-gain must be finite numbers"),
        (["--min-gain", "nan"], "--timeout and --min-gain must be finite numbers"),
        (["--ab-rounds", "3"], "--ab-rounds must be >= 5"),
    ],
)
def test_non_finite_options_rejected(workload, tmp_path, args, message):
    proc = run_loop(workload, tmp_path / "o", *args)
    assert proc.returncode == 2 and message in proc.stderr
    assert len(proc.stderr.strip().splitlines()) == 1


@pytest.mark.parametrize("field", ["knobs = 5", 'knobs = "num_workers"', "knobs = [1, 2]"])
def test_rules_with_wrong_typed_fields(workload, tmp_path, field):
    rule = tmp_path / "r" / "TX1_bad.toml"
    rule.parent.mkdir()
    rule.write_text(
        textwrap.dedent(f"""
        code = "TX901"
        name = "bad-knobs"
        severity = "info"
        summary = "s"
        condition = "step_time_ms > 0"
        message = "m"
        estimated_saving_ms = "step_time_ms"
        [fix]
        summary = "f"
        safety = "safe"
        {field}
        [docs]
        what = "w"
        why = "w"
        example = "e"
        fix = "f"
        safety = "s"
        """)
    )
    proc = subprocess.run(
        [
            sys.executable,
            "-m",
            "tracedoc",
            "fix-loop",
            str(workload),
            "--out",
            str(tmp_path / "o"),
            "--rules",
            str(rule),
        ],
        capture_output=True,
        text=True,
        timeout=120,
    )
    # the rule loader rejects every wrong-typed knobs field, naming the file and the field, in one line
    assert proc.returncode == 2, proc.stderr
    assert "Traceback" not in proc.stderr
    assert len(proc.stderr.strip().splitlines()) == 1 and "--rules" in proc.stderr
    assert "TX1_bad.toml" in proc.stderr and "knobs" in proc.stderr


# ---------------------------------------------------------------- 4. isolation
def test_no_module_from_the_current_directory_and_nothing_written_outside_out(workload, tmp_path):
    cwd = tmp_path / "here"
    cwd.mkdir()
    marker = tmp_path / "stray-ran"
    for name in ("orjson.py", "dataclasses_json.py", "typing_extensions.py"):
        (cwd / name).write_text(f"open({str(marker)!r}, 'a').write({name!r})\n")
    (cwd / "json.py").write_text(f"open({str(marker)!r}, 'a').write('json')\n")
    out = tmp_path / "out"
    # the command itself is started as its console script would be (-P: no current directory on
    # sys.path); the point is that the trials it starts do not import from there either
    proc = subprocess.run(
        [sys.executable, "-P", "-m", "tracedoc", "fix-loop", str(workload), "--out", str(out), "--max-trials", "1"],
        capture_output=True,
        text=True,
        timeout=300,
        cwd=cwd,
        env={k: v for k, v in os.environ.items() if k not in ("PYTHONDONTWRITEBYTECODE", "PYTHONPATH")},
    )
    assert proc.returncode == 0, proc.stderr
    assert not marker.exists(), f"a module from the current directory ran: {marker.read_text()}"
    assert not (workload.parent / "__pycache__").exists()
    assert sorted(p.name for p in workload.parent.iterdir()) == ["workload.py"]
    assert sorted(p.name for p in cwd.iterdir()) == sorted(
        ["orjson.py", "dataclasses_json.py", "typing_extensions.py", "json.py"]
    )
