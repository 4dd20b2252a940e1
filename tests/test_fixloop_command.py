"""`tracedoc fix-loop` as a command: arguments, exit codes, output, artifacts (torch-free workload)."""

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
import typer
from helpers import report_of
from typer.testing import CliRunner

from tracedoc.fixloop import runner as runner_mod
from tracedoc.fixloop.command import fix_loop
from tracedoc.report.model import Report

WORKLOAD = textwrap.dedent("""
    import os
    from dataclasses import dataclass

    @dataclass(frozen=True)
    class Config:
        batch_size: int = 8
        fast_path: bool = False
        device: str = "auto"
        crash_fast_path: bool = False
        sleep_s: float = 0.0

    def run(config, out_dir):
        import time
        time.sleep(config.sleep_s)
        if config.fast_path and config.crash_fast_path:
            raise RuntimeError("fast path exploded")
        speed = 200.0 if config.fast_path else 100.0
        with open(os.path.join(out_dir, "trace.pt.trace.json.gz"), "wb") as fh:
            fh.write(b"fast" if config.fast_path else b"slow")
        return {"samples_per_s": [speed, speed, speed], "step_time_ms": [1000 * config.batch_size / speed] * 3,
                "batch_size": config.batch_size, "trace": "trace.pt.trace.json.gz",
                "device": {"type": config.device if config.device != "auto" else "cpu", "name": "fake"}}
""")


def fake_analyze(trace, settings=None) -> Report:
    slow = trace.read_bytes() == b"slow"
    findings = (
        [
            {
                "code": "TD900",
                "name": "slow-path",
                "severity": "warning",
                "message": "slow",
                "estimated_saving_ms": 40.0,
                "evidence": {},
                "fix": {"summary": "take the fast path", "safety": "safe", "knobs": ["fast_path"]},
            }
        ]
        if slow
        else []
    )
    return report_of(findings)


@pytest.fixture()
def app(monkeypatch):
    monkeypatch.setattr(runner_mod, "default_analyze", fake_analyze)
    app = typer.Typer()
    app.command("fix-loop")(fix_loop)
    app.command("other")(lambda: None)  # two commands: typer keeps the sub-command name
    return app


@pytest.fixture()
def workload(tmp_path):
    path = tmp_path / "wl.py"
    path.write_text(WORKLOAD)
    return path


def invoke(app, *args):
    return CliRunner().invoke(app, ["fix-loop", *map(str, args)], env={"COLUMNS": "200"})


def test_full_run_writes_table_and_artifacts(app, workload, tmp_path):
    out = tmp_path / "out"
    result = invoke(app, workload, "--out", out, "--device", "cpu", "--max-trials", "3")
    assert result.exit_code == 0, result.output
    assert "fast_path: false -> true" in result.stdout and "kept" in result.stdout
    summary = json.loads((out / "summary.json").read_text())
    assert [t["status"] for t in summary["trials"]] == ["baseline", "kept"]
    assert summary["final"]["samples_per_s"] == 200.0 and summary["final"]["speedup"] == 2.0
    assert summary["trials"][1]["predicted_saving_ms"] == 40.0
    assert summary["trials"][1]["measured_saving_ms"] == pytest.approx(40.0)
    assert json.loads((out / "final_config.json").read_text()) == {
        "batch_size": 8,
        "fast_path": True,
        "device": "cpu",
        "crash_fast_path": False,
        "sleep_s": 0.0,
    }
    for f in ("summary.md", "trial-00/config.json", "trial-01/analysis.json", "trial-01/result.json"):
        assert (out / f).exists(), f


def test_json_and_markdown_formats(app, workload, tmp_path):
    result = invoke(app, workload, "--out", tmp_path / "a", "--format", "json")
    assert result.exit_code == 0
    assert json.loads(result.stdout)["schema_version"] == 5
    result = invoke(app, workload, "--out", tmp_path / "b", "--format", "markdown", "--max-trials", "0")
    assert result.exit_code == 0 and result.stdout.startswith("# tracedoc fix-loop")


def test_text_format_is_the_table_and_table_is_a_deprecated_alias(app, workload, tmp_path):
    """`--format text` as in `tracedoc analyze`; the old name `table` still works, with a warning."""
    text = invoke(app, workload, "--out", tmp_path / "a", "--format", "text", "--max-trials", "0")
    assert text.exit_code == 0, text.output
    assert "baseline" in text.stdout and "deprecated" not in text.stderr
    default = invoke(app, workload, "--out", tmp_path / "b", "-f", "text", "--max-trials", "0")
    old = invoke(app, workload, "--out", tmp_path / "c", "--format", "table", "--max-trials", "0")
    assert (
        old.exit_code == 0
        and old.stdout.splitlines()[:4] == text.stdout.splitlines()[:4] == default.stdout.splitlines()[:4]
    )
    assert "--format table is deprecated; use --format text" in old.stderr
    help_text = " ".join(CliRunner().invoke(app, ["fix-loop", "--help"], env={"COLUMNS": "200"}).stdout.split())
    assert "text (the table), json or markdown" in help_text and "'table' is a deprecated alias of text" in help_text


def test_crashed_trial_reverted(app, workload, tmp_path):
    out = tmp_path / "out"
    result = invoke(app, workload, "--out", out, "--set", "crash_fast_path=true")
    assert result.exit_code == 0, result.output
    summary = json.loads((out / "summary.json").read_text())
    assert [t["status"] for t in summary["trials"]] == ["baseline", "crashed"]
    assert "fast path exploded" in summary["trials"][1]["error"]
    assert summary["final"]["config"]["fast_path"] is False


@pytest.mark.parametrize(
    "args,message",
    [
        (["missing.py"], "workload file not found"),
        (["{wl}", "--set", "batch_size=many"], "bad --set 'batch_size=many'"),
        (["{wl}", "--set", "nonsense"], "expected KNOB=VALUE"),
        (["{wl}", "--set", "nope=1"], "has no 'nope'"),
        (["{wl}", "--format", "xml"], "--format must be one of text, json, markdown"),
        (["{wl}", "--max-trials", "-1"], "--max-trials"),
    ],
)
def test_bad_arguments_exit_2_with_one_line(app, workload, tmp_path, args, message):
    args = [a.replace("{wl}", str(workload)) for a in args]
    result = invoke(app, *args, "--out", tmp_path / "out")
    assert result.exit_code == 2
    assert message in result.output
    assert len(result.output.strip().splitlines()) == 1
    assert "Traceback" not in result.output
    assert not (tmp_path / "out").exists()


def test_failed_baseline_exits_2(app, tmp_path):
    wl = tmp_path / "bad.py"
    wl.write_text(WORKLOAD.replace("speed = 200.0", 'raise RuntimeError("no GPU here")\n    speed = 200.0'))
    result = invoke(app, wl, "--out", tmp_path / "out")
    assert result.exit_code == 2
    assert "baseline trial failed" in result.output and "no GPU here" in result.output
    assert json.loads((tmp_path / "out" / "summary.json").read_text())["final"] is None


def test_bad_rules_exit_2(app, workload, tmp_path):
    result = invoke(app, workload, "--rules", tmp_path / "nowhere", "--out", tmp_path / "out")
    assert result.exit_code == 2 and "--rules" in result.output and "no such file" in result.output
    bad = tmp_path / "bad.toml"
    bad.write_text('code = "TX1"\nname = "x"\n')
    result = invoke(app, workload, "--rules", bad, "--out", tmp_path / "out")
    assert result.exit_code == 2 and "bad.toml" in result.output
    assert len(result.output.strip().splitlines()) == 1


@pytest.mark.skipif(sys.platform == "win32", reason="POSIX signals")
def test_ctrl_c_in_a_real_process(workload, tmp_path):
    """SIGINT to `python -m tracedoc fix-loop` mid-trial: the trial is stopped, the summary written, exit 130."""
    out = tmp_path / "out"
    root = Path(__file__).resolve().parents[1]
    env = dict(os.environ, PYTHONPATH=str(root) + os.pathsep + os.environ.get("PYTHONPATH", ""))
    proc = subprocess.Popen(
        [sys.executable, "-m", "tracedoc", "fix-loop", str(workload), "--out", str(out), "--set", "sleep_s=60"],
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        env=env,
        text=True,
    )
    deadline = time.monotonic() + 60
    while not (out / "trial-00" / "config.json").exists() and time.monotonic() < deadline:
        time.sleep(0.2)
    time.sleep(1.0)
    proc.send_signal(signal.SIGINT)
    stdout, stderr = proc.communicate(timeout=60)
    assert proc.returncode == 130, stderr
    summary = json.loads((out / "summary.json").read_text())
    assert summary["interrupted"] is True
    assert summary["trials"][0]["status"] == "interrupted"
    assert "interrupted" in stdout
