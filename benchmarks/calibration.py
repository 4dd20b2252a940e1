"""Calibration: what tracedoc predicted a fix would save, against what it saved, on real pairs.

    python benchmarks/calibration.py            # the table, Markdown (the README's)
    python benchmarks/calibration.py --json     # every figure

Each pair is a before trace and an after trace of one job with one fix applied:

* the V100 pair in ``fixtures/``: ``v100_resnet50_workers0`` -> ``workers4`` (ResNet-50 training,
  ``num_workers`` 0 -> 4; Kineto's TensorBoard-plugin samples), fix of ``dataloader-stall``;
* every folder of ``fixtures/calibration/``: a trial of ``tracedoc fix-loop`` on this project's
  machine (``before``/``after`` profiled traces and the loop's ``summary.json``; provenance in
  ``fixtures/calibration/PROVENANCE.md``), fix of the finding the trial applied.

For each pair the before trace is analyzed and the applied finding's prediction is read off it:
*replayed* (the step model's saving, :mod:`tracedoc.signals.stepmodel`; with its range where the
fix has one) and its *slice* (the rule's own estimate granted from its ledger claims, the upper
bound), or, on a CPU-only trace, which the step model does not replay, the rule's estimate
(column ``model``: ``cpu`` there). *Measured* is the change of the median complete step between
the two traces (the mean beside it; :func:`tracedoc.diff.predicted_vs_measured`), and, for a
fix-loop trial, the change of its timed median step in the interleaved A/B rounds, with the
prediction rescaled by that trial's own timed / profiled step ratio (the profiler's overhead,
measured per trial against the incumbent's A/B rounds, fresh processes without the profiler:
``predicted_saving_timed_ms`` of ``summary.json``). Error is
``(predicted - measured) / measured``; a range meets the measured value when it lies in the range
widened by 25% at each end (``tracedoc.diff.RANGE_WIDENING``). The target (issue "A model of
the step"): every pair within 25% of the median-step change.
"""

from __future__ import annotations

import argparse
import json
import statistics
import sys
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

from tracedoc import analyze  # noqa: E402
from tracedoc.diff import RANGE_WIDENING, predicted_vs_measured  # noqa: E402
from tracedoc.fixloop.summary import PROFILED_STEP_FACTOR  # noqa: E402

#: The tolerance of the issue's target: |error| on the median-step change.
TARGET = 0.25


def pairs() -> list[dict[str, Any]]:
    """Every pair: ``name``, ``before``, ``after`` (paths), ``code`` (the applied rule, or None to
    read it from ``summary``) and ``summary`` (a fix-loop ``summary.json`` path, or None)."""
    out = [
        {
            "name": "v100_resnet50 num_workers 0 -> 4",
            "before": ROOT / "fixtures" / "v100_resnet50_workers0.pt.trace.json.gz",
            "after": ROOT / "fixtures" / "v100_resnet50_workers4.pt.trace.json.gz",
            "code": "TD101",
            "summary": None,
        }
    ]
    for d in sorted((ROOT / "fixtures" / "calibration").glob("*/")):
        if (d / "before.pt.trace.json.gz").is_file() and (d / "summary.json").is_file():
            out.append(
                {
                    "name": d.name,
                    "before": d / "before.pt.trace.json.gz",
                    "after": d / "after.pt.trace.json.gz",
                    "code": None,
                    "summary": d / "summary.json",
                }
            )
    return out


def _trial(summary: dict[str, Any]) -> dict[str, Any]:
    """The first trial after the baseline (the applied fix)."""
    return next(t for t in summary["trials"] if t.get("index") == 1)


def _err(pred: float | None, measured: float | None) -> float | None:
    if pred is None or measured is None or measured == 0:
        return None
    return (pred - measured) / measured


def _model(report: Any, finding: Any) -> str:
    """How the prediction was made: ``replay`` (the GPU step model), ``cpu replay`` (the CPU step
    model, :mod:`tracedoc.signals.cpumodel`) or ``rule`` (the rule's closed-form estimate)."""
    if finding is None or finding.replayed_saving_ms is None:
        return "rule"
    return "replay" if report.signals.get("gpu_busy_ms") is not None else "cpu replay"


def measure(pair: dict[str, Any]) -> dict[str, Any]:
    """The figures of one pair (module docstring)."""
    before, after = analyze(pair["before"]), analyze(pair["after"])
    summary = json.loads(Path(pair["summary"]).read_text()) if pair["summary"] else None
    trial = _trial(summary) if summary else None
    code = pair["code"] or ((trial or {}).get("finding") or {}).get("code")
    rows = predicted_vs_measured(before, after, names=[code] if code else None)
    row = rows[0] if rows else {}
    f = next((x for x in before.findings if x.code == code), None)
    out = {
        "pair": pair["name"],
        "fix": code,
        "change": trial.get("change") if trial else "num_workers=4",
        "model": _model(before, f),
        "predicted_ms": row.get("predicted_saving_ms"),
        "predicted_low_ms": row.get("predicted_low_ms"),
        "slice_ms": row.get("predicted_slice_ms"),
        "measured_median_ms": row.get("measured_saving_median_ms"),
        "measured_mean_ms": row.get("measured_saving_ms"),
        "error_median": row.get("error_median"),
        "meets_range": row.get("meets_range"),
    }
    if trial is not None:
        base = summary["trials"][0]
        out["ab_measured_ms"] = trial.get("measured_saving_ms")
        out["ab_predicted_ms"] = trial.get("predicted_saving_timed_ms")
        # this trial's own overhead: the profiled step against the incumbent's timed step in the
        # A/B rounds (fresh processes, no profiler), the ratio predicted_saving_timed_ms used
        a_ms = ((trial.get("ab") or {}).get("incumbent") or {}).get("step_time_ms") or []
        prof, timed = base.get("profiled_step_ms"), statistics.median(a_ms) if a_ms else None
        out["profiled_over_timed"] = prof / timed if prof and timed else None
        out["ab_decision"] = (trial.get("decision") or {}).get("action") or trial.get("status")
        out["ab_error"] = _err(out["ab_predicted_ms"], out["ab_measured_ms"])
    point = out["error_median"] is not None and abs(out["error_median"]) <= TARGET
    out["within_target"] = point or out["meets_range"] is True
    ratio = out.get("profiled_over_timed")
    # the fix-loop's own warning (PROFILED_STEP_FACTOR): profiled steps this far from the timed
    # ones are not the job's steps, and nothing read off them can be calibrated
    out["representative"] = ratio is None or 1 / PROFILED_STEP_FACTOR <= ratio <= PROFILED_STEP_FACTOR
    return out


def _f(v: float | None, fmt: str = ".1f") -> str:
    return "n/a" if v is None else format(v, fmt)


def markdown(results: list[dict[str, Any]]) -> str:
    """The README's table."""
    lines = [
        "| pair | fix | model | predicted (range; slice) | measured, median step (mean) | error | A/B timed: predicted / measured |",
        "|---|---|---|---|---|---|---|",
    ]
    for r in results:
        pred = _f(r["predicted_ms"])
        extra = []
        if (
            r["predicted_low_ms"] is not None
            and r["predicted_ms"] is not None
            and r["predicted_low_ms"] < r["predicted_ms"]
        ):
            extra.append(f"{_f(r['predicted_low_ms'])}-{pred}")
        if r["slice_ms"] is not None:
            extra.append(f"slice {_f(r['slice_ms'])}")
        if extra:
            pred += f" ({'; '.join(extra)})"
        ab = "-"
        if "ab_measured_ms" in r:
            ab = (
                f"{_f(r.get('ab_predicted_ms'))} / {_f(r['ab_measured_ms'])} ({_f(r.get('ab_error'), '+.0%')}; "
                f"profiled/timed {_f(r.get('profiled_over_timed'), '.2f')})"
            )
        lines.append(
            f"| {r['pair']} | {r['fix']} {r['change']} | {r['model']} | {pred} | {_f(r['measured_median_ms'])} "
            f"({_f(r['measured_mean_ms'])}) | {_f(r['error_median'], '+.0%')} | {ab} |"
        )
    held = sum(r["within_target"] for r in results)
    lines.append("")
    lines.append(
        f"{held} of {len(results)} pairs within {TARGET:.0%} of the median-step change "
        f"(a range meets it widened by {RANGE_WIDENING:.0%})."
    )
    for r in results:
        if not r["representative"]:
            lines.append(
                f"Not representative: {r['pair']}, whose profiled steps took {_f(r['profiled_over_timed'], '.2f')}x "
                f"the job's timed step (beyond the fix-loop's {PROFILED_STEP_FACTOR}x warning): its trace's times "
                "are not the job's."
            )
    return "\n".join(lines)


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--json", action="store_true", help="every figure as JSON")
    args = ap.parse_args(argv)
    results = [measure(p) for p in pairs()]
    print(json.dumps(results, indent=1) if args.json else markdown(results))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
