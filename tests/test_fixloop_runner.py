"""The subprocess runner and the trial entry point, on a tiny torch-free workload."""

from __future__ import annotations

import json
import sys
import textwrap
import time
from pathlib import Path

import pytest
from helpers import report_of

from tracedoc.errors import TracedocError
from tracedoc.fixloop.runner import SubprocessRunner
from tracedoc.fixloop.workload import WorkloadError
from tracedoc.report.model import Report

FAKE_WORKLOAD = textwrap.dedent('''
    """A torch-free stand-in workload: `mode` picks what happens."""
    import os, signal, subprocess, sys, time
    from dataclasses import dataclass
    from typing import Literal

    @dataclass(frozen=True)
    class Config:
        mode: Literal["ok", "crash", "oom", "cuda_oom", "sleep", "sigkill", "no_trace"] = "ok"
        batch_size: int = 4
        speed: float = 100.0
        flag: bool = False

    class OutOfMemoryError(RuntimeError):
        pass

    def run(config, out_dir):
        if config.mode == "crash":
            raise RuntimeError("boom: the workload crashed")
        if config.mode == "oom":
            raise MemoryError()
        if config.mode == "cuda_oom":
            raise OutOfMemoryError("CUDA out of memory. Tried to allocate 2.00 GiB")
        if config.mode == "sleep":
            child = subprocess.Popen([sys.executable, "-c", "import time; time.sleep(120)"])
            with open(os.path.join(out_dir, "child.pid"), "w") as fh:
                fh.write(str(child.pid))
            time.sleep(120)
        if config.mode == "sigkill":
            os.kill(os.getpid(), signal.SIGKILL)
        if config.mode != "no_trace":
            with open(os.path.join(out_dir, "trace.pt.trace.json.gz"), "wb") as fh:
                fh.write(b"fake")
        return {"samples_per_s": [config.speed] * 3, "step_time_ms": [1000 * config.batch_size / config.speed] * 3,
                "batch_size": config.batch_size, "trace": "trace.pt.trace.json.gz",
                "device": {"type": "cpu", "name": "fake", "bf16_supported": False}}
''')


@pytest.fixture()
def workload(tmp_path) -> Path:
    path = tmp_path / "fake_workload.py"
    path.write_text(FAKE_WORKLOAD)
    return path


def fake_analyze(trace: Path) -> Report:
    assert trace.read_bytes() == b"fake"
    return report_of([])


def run_mode(workload, tmp_path, mode, analyze=fake_analyze, timeout=60.0):
    runner = SubprocessRunner(workload, timeout_s=timeout, analyze=analyze)
    config = runner.describe().defaults()
    config["mode"] = mode
    return runner.run(config, tmp_path / f"trial-{mode}")


def test_describe(workload):
    spec = SubprocessRunner(workload).describe()
    assert list(spec.fields) == ["mode", "batch_size", "speed", "flag"]
    assert spec.fields["mode"].choices[0] == "ok"
    assert spec.defaults()["batch_size"] == 4


def test_describe_missing_or_broken(tmp_path):
    with pytest.raises(WorkloadError, match="not found"):
        SubprocessRunner(tmp_path / "nope.py").describe()
    broken = tmp_path / "broken.py"
    broken.write_text("import this_module_does_not_exist\n")
    with pytest.raises(WorkloadError, match="this_module_does_not_exist"):
        SubprocessRunner(broken).describe()
    no_config = tmp_path / "no_config.py"
    no_config.write_text("def run(c, d):\n    pass\n")
    with pytest.raises(WorkloadError, match="no dataclass named Config"):
        SubprocessRunner(no_config).describe()


def test_ok_trial_leaves_its_directory(workload, tmp_path):
    outcome = run_mode(workload, tmp_path, "ok")
    assert outcome.status == "ok", outcome.error
    assert outcome.samples_per_s == [100.0] * 3 and outcome.batch_size == 4
    d = Path(outcome.dir)
    for name in ("config.json", "result.json", "analysis.json", "stdout.log", "stderr.log", "trace.pt.trace.json.gz"):
        assert (d / name).exists(), name
    result = json.loads((d / "result.json").read_text())
    assert result["status"] == "ok" and result["returncode"] == 0
    assert json.loads((d / "config.json").read_text())["flag"] is False


@pytest.mark.parametrize(
    "mode,status,text",
    [
        ("crash", "crashed", "boom: the workload crashed"),
        ("oom", "oom", "MemoryError"),
        ("cuda_oom", "oom", "CUDA out of memory"),
        ("sigkill", "oom", "signal 9"),
    ],
)
def test_failures_are_classified(workload, tmp_path, mode, status, text):
    outcome = run_mode(workload, tmp_path, mode)
    assert outcome.status == status
    assert text in outcome.error
    assert json.loads((Path(outcome.dir) / "result.json").read_text())["status"] == status


@pytest.mark.skipif(sys.platform != "linux", reason="reads /proc")
def test_timeout_kills_the_process_group(workload, tmp_path):
    start = time.monotonic()
    outcome = run_mode(workload, tmp_path, "sleep", timeout=3.0)
    assert outcome.status == "timeout"
    assert time.monotonic() - start < 30
    child_pid = int((Path(outcome.dir) / "child.pid").read_text())
    assert not _alive(child_pid)  # the workload's own child is gone too


def _alive(pid: int) -> bool:
    """Whether ``pid`` runs (a zombie waiting for init to reap it counts as gone)."""
    time.sleep(0.3)
    try:
        with open(f"/proc/{pid}/stat") as fh:
            return fh.read().rsplit(")", 1)[1].split()[0] != "Z"
    except FileNotFoundError:
        return False


def test_broken_trace_counts_as_crashed(workload, tmp_path):
    def analyze(trace):
        raise TracedocError(f"{trace}: truncated gzip stream")

    outcome = run_mode(workload, tmp_path, "ok", analyze=analyze)
    assert outcome.status == "crashed"
    assert "analysis failed" in outcome.error and "truncated gzip" in outcome.error


def test_missing_trace_counts_as_crashed(workload, tmp_path):
    def analyze(trace):
        from tracedoc.errors import TraceLoadError

        if not trace.exists():
            raise TraceLoadError(str(trace), "no such file")
        return report_of([])

    outcome = run_mode(workload, tmp_path, "no_trace", analyze=analyze)
    assert outcome.status == "crashed" and "no such file" in outcome.error
