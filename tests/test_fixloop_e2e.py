"""The real fix-loop end to end on the CPU: torch, subprocess trials, real traces, the real analyzer.

Skipped when torch/torchvision are not installed. About 1-3 minutes on 2 cores.
"""

from __future__ import annotations

import json
import subprocess
import sys
import textwrap
from pathlib import Path

import pytest

from tracedoc.fixloop.noise import decide

pytestmark = [pytest.mark.slow, pytest.mark.needs_torch]

ROOT = Path(__file__).resolve().parents[1]
RESNET = ROOT / "workloads" / "resnet.py"


@pytest.fixture(autouse=True)
def _needs_torch_and_analyzer():
    pytest.importorskip("torch")
    pytest.importorskip("torchvision")
    import tracedoc

    if not hasattr(tracedoc, "analyze"):
        pytest.skip("tracedoc.analyze is not available yet")


def fix_loop(*args: str, timeout: float = 600) -> subprocess.CompletedProcess:
    env_path = str(ROOT)
    cmd = [sys.executable, "-m", "tracedoc", "fix-loop", *args]
    import os

    env = dict(os.environ, PYTHONPATH=env_path + os.pathsep + os.environ.get("PYTHONPATH", ""), COLUMNS="200")
    return subprocess.run(cmd, capture_output=True, text=True, timeout=timeout, env=env, cwd=ROOT)


def check_decisions(summary: dict) -> None:
    """Every decision follows from the recorded numbers and the incumbent's findings."""
    opts = summary["options"]
    trials = summary["trials"]
    inc = trials[0]
    assert inc["status"] == "baseline" and inc["samples_per_s"] > 0
    assert len(inc["samples_per_s_repeats"]) == inc["config"]["repeats"]
    for t in trials[1:]:
        analysis = json.loads((Path(inc["dir"]) / "analysis.json").read_text())
        # the change was the fix of a finding of the incumbent, applied to the incumbent's config
        assert t["finding"]["code"] in [f["code"] for f in analysis["findings"]]
        assert t["knob"] in t["finding"]["knobs"]
        assert t["config"] == {**inc["config"], t["knob"]: t["new_value"]}
        if t["status"] in ("kept", "reverted"):
            d = decide(inc["samples_per_s_repeats"], t["samples_per_s_repeats"], opts["min_gain"], opts["noise_k"])
            assert d.keep == (t["status"] == "kept"), (t["change"], d.reason)
            assert t["measured_saving_ms"] == pytest.approx(inc["step_time_ms"] - t["step_time_ms"])
            assert t["speedup"] == pytest.approx(t["samples_per_s"] / trials[0]["samples_per_s"])
        if t["status"] == "kept":
            inc = t
    assert summary["final"]["config"] == inc["config"]
    assert summary["final"]["samples_per_s"] == inc["samples_per_s"]


def check_artifacts(out: Path, summary: dict) -> None:
    for name in ("summary.json", "summary.md", "final_config.json"):
        assert (out / name).is_file(), name
    for t in summary["trials"]:
        d = Path(t["dir"])
        for name in ("config.json", "result.json", "stdout.log", "stderr.log"):
            assert (d / name).is_file(), f"{d.name}/{name}"
        if t["status"] in ("baseline", "kept", "reverted"):
            assert (d / "analysis.json").is_file() and (d / "trace.pt.trace.json.gz").is_file()
            assert (d / "trace.pt.trace.json.gz").stat().st_size < 5_000_000


def test_done_when_command(tmp_path):
    """The issue's command: resnet18 on the CPU at 32x32, at most 4 trials."""
    out = tmp_path / "run"
    proc = fix_loop(str(RESNET), "--device", "cpu", "--set", "image_size=32", "--max-trials", "4", "--out", str(out))
    assert proc.returncode == 0, proc.stderr[-3000:]
    summary = json.loads((out / "summary.json").read_text())
    check_artifacts(out, summary)
    check_decisions(summary)
    assert summary["device"]["type"] == "cpu"
    assert len(summary["trials"]) <= 5
    # on the CPU these are reported, never tried
    na = {n["knob"] for n in summary["not_applicable"]}
    assert {"pin_memory", "non_blocking", "input_dtype", "amp"} <= na
    for t in summary["trials"][1:]:
        assert t["knob"] not in na
    assert "baseline" in proc.stdout and "samples/s" in proc.stdout  # the table
    assert "baseline" in proc.stderr  # progress


RULE = textwrap.dedent("""
    code = "TX901"
    name = "dataloader-share-low-bar"
    severity = "info"
    summary = "Any DataLoader time at all (a test rule that fires on small CPU runs)"
    condition = "dataloader_share > 0.001"
    message = "DataLoader: {dataloader_share:.1%} of the step"
    estimated_saving_ms = "dataloader_ms"
    evidence = ["dataloader_share"]

    [fix]
    summary = "Use DataLoader workers"
    safety = "safe"
    knobs = ["num_workers"]

    [docs]
    what = "DataLoader share above 0.1 %."
    why = "Test rule."
    example = "DataLoader(ds)"
    fix = "num_workers"
    safety = "Safe."
""")


def test_user_rule_drives_real_worker_trials(tmp_path):
    """A user rule (--rules) makes the loop try real num_workers trials; decisions follow the numbers."""
    rule = tmp_path / "rules" / "TX901.toml"
    rule.parent.mkdir()
    rule.write_text(RULE)
    out = tmp_path / "run"
    proc = fix_loop(
        str(RESNET),
        "--device",
        "cpu",
        "--rules",
        str(rule.parent),
        "--max-trials",
        "2",
        "--out",
        str(out),
        "--set",
        "image_size=32",
        "--set",
        "warmup_steps=3",
        "--set",
        "timed_steps=8",
        "--format",
        "json",
    )
    assert proc.returncode == 0, proc.stderr[-3000:]
    summary = json.loads(proc.stdout)
    assert summary == json.loads((out / "summary.json").read_text()) | {"wall_s": summary["wall_s"]}
    check_artifacts(out, summary)
    check_decisions(summary)
    changes = [t["change"] for t in summary["trials"]]
    assert changes[1] == "num_workers: 0 -> 1"
    assert summary["trials"][1]["predicted_saving_ms"] is not None
    assert summary["trials"][1]["status"] in ("kept", "reverted")
    if summary["trials"][1]["status"] == "kept":
        assert changes[2:] == ["num_workers: 1 -> 2"]  # two CPUs here: the search goes on
