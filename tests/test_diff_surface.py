"""What a person sees of `tracedoc diff` (issue 22): a failing --fail-on-regression says why on
one stderr line, and the terminal tables leave out the rows that are zero on both sides."""

from __future__ import annotations

import io
import json
import subprocess
import sys
from functools import cache

import pytest
from conftest import real_trace
from rich.console import Console

import tracedoc
from tracedoc.diff import compare_reports, regression_reason
from tracedoc.render.comparison import TextDiffRenderer, zero_rows
from tracedoc.report.comparison import Row

WORKERS = "h100_resnet18_workers.pt.trace.json.gz"  # 26.9 ms step
BASELINE = "h100_resnet18_baseline.pt.trace.json.gz"  # 54.2 ms step: the regression, read backwards


def run(*args):
    return subprocess.run(
        [sys.executable, "-m", "tracedoc", *map(str, args)], capture_output=True, text=True, timeout=300
    )


def report(step_ms: float | None, steps: list[float] | None = None) -> dict:
    """A saved report of one step time (the shape `analyze --format json` writes)."""
    steps = steps if steps is not None else [step_ms or 1.0] * 3
    return {
        "schema_version": 2,
        "tool": {"name": "tracedoc", "version": "test"},
        "trace": {"path": "t.json", "device": {"name": "GPU"}, "n_steps": len(steps)},
        "signals": {"step_time_ms": step_ms, "step_count": len(steps)},
        "signals_unavailable": {},
        "units": {},
        "steps": [{"step": i, "step_time_ms": t} for i, t in enumerate(steps)],
        "findings": [],
        "skipped": [],
        "rules_evaluated": [],
    }


@cache
def real_pair():
    return compare_reports(tracedoc.analyze(real_trace(WORKERS)), tracedoc.analyze(real_trace(BASELINE)))


# ------------------------------------------------------------------ --fail-on-regression says why


@pytest.mark.parametrize(
    "after,pct,reason",
    [
        (125.9, 5.0, "step time +25.9% > 5% (100.0 ms -> 125.9 ms per step)"),
        (105.04, 5.0, "step time +5.04% > 5% (100.0 ms -> 105.0 ms per step)"),  # never "+5.0% > 5%"
        (100.5, 0.0, "step time +0.5% > 0% (100.0 ms -> 100.5 ms per step)"),
        (112.0, 2.5, "step time +12.0% > 2.5% (100.0 ms -> 112.0 ms per step)"),
        (105.0, 5.0, None),  # exactly PCT is no regression
        (90.0, 0.0, None),
    ],
)
def test_regression_reason(after, pct, reason):
    result = compare_reports(report(100.0), report(after))
    assert regression_reason(result, pct) == reason
    assert (reason is not None) == result.regressed(pct)


def test_failing_gate_says_why_on_one_stderr_line(tmp_path):
    b, a = tmp_path / "b.json", tmp_path / "a.json"
    b.write_text(json.dumps(report(100.0)))
    a.write_text(json.dumps(report(125.9)))
    r = run("diff", b, a, "--format", "json", "--fail-on-regression", "5")
    assert r.returncode == 1
    assert r.stderr == "tracedoc: regression: step time +25.9% > 5% (100.0 ms -> 125.9 ms per step)\n"
    assert json.loads(r.stdout)["step_time_ms"]["change_pct"] == pytest.approx(25.9)  # the comparison still on stdout
    ok = run("diff", b, a, "--format", "json", "--fail-on-regression", "30")
    assert ok.returncode == 0 and ok.stderr == ""
    plain = run("diff", b, a, "--format", "json")  # no gate, no line
    assert plain.returncode == 0 and plain.stderr == ""


def test_gate_without_a_step_time_warns_and_passes(tmp_path):
    b, a = tmp_path / "b.json", tmp_path / "a.json"
    b.write_text(json.dumps(report(None)))
    a.write_text(json.dumps(report(125.9)))
    r = run("diff", b, a, "--format", "json", "--fail-on-regression", "5")
    assert r.returncode == 0
    lines = r.stderr.splitlines()
    assert len(lines) == 1 and lines[0].startswith("tracedoc: warning: --fail-on-regression not checked")


def test_real_regression_says_why():
    """h100 ResNet-18 with DataLoader workers, then without: the step doubles."""
    r = run("diff", real_trace(WORKERS), real_trace(BASELINE), "--fail-on-regression", "5")
    assert r.returncode == 1
    assert r.stderr.count("\n") == 1 and r.stderr.startswith("tracedoc: regression: step time +101.7% > 5% (26.9 ms")
    assert "tracedoc diff" in r.stdout


# ------------------------------------------------------------------ zero rows hidden in text


def test_zero_rows():
    rows = [
        Row("zero", 0.0, 0.0, 0.0),
        Row("reads zero", 0.04, -0.03, -0.07),
        Row("grew", 0.0, 0.1, 0.1),
        Row("fell", 2.0, 0.0, -2.0),
        Row("unknown", None, None, None),  # unknown is not zero: shown as n/a
        Row("half unknown", 0.0, None, None),
    ]
    assert [r.name for r in zero_rows(rows)] == ["zero", "reads zero"]


def text(result) -> list[str]:
    buf = io.StringIO()
    TextDiffRenderer(Console(file=buf, width=200, color_system=None, highlight=False)).render(result)
    return buf.getvalue().splitlines()


def test_real_pair_text_hides_rows_zero_on_both_sides():
    result = real_pair()
    lines = text(result)
    cells = {ln.split("│")[0].strip() for ln in lines if "│" in ln}
    hidden = {r.name for r in zero_rows(result.breakdown)}
    hidden_ledger = {r.name for rows in result.idle_ledger.values() for r in zero_rows(rows)}
    # on this pair: no memset and no communication, no allocator, start-up, optimizer-step or dependency waits
    assert {"memset", "communication"} <= hidden
    assert {"allocator", "startup", "optimizer_step", "dependency_wait"} <= hidden_ledger
    assert not (hidden | hidden_ledger) & cells
    assert {"kernel", "dataloader", "launch_overhead", "zero_grad"} <= cells  # non-zero rows stay
    notes = [ln.strip() for ln in lines if ln.strip().startswith("not shown, 0.0 on both sides:")]
    assert len(notes) == 2
    assert notes[0] == "not shown, 0.0 on both sides: " + ", ".join(r.name for r in zero_rows(result.breakdown))
    # JSON keeps every row
    d = result.to_dict()
    assert {r["name"] for r in d["breakdown_ms"]} >= hidden | {"kernel"}


def test_no_note_when_every_row_has_time():
    result = compare_reports(report(100.0), report(110.0))
    lines = text(result)
    assert not any("not shown" in ln for ln in lines)
