"""The fix-loop summary: built from the loop as a :class:`~tracedoc.report.fixloop.FixLoopSummary`
(the document, in :mod:`tracedoc.report.fixloop`, with its JSON schema), written as JSON and
Markdown, rendered as a rich table.

``summary.json`` is :meth:`FixLoopSummary.to_dict` (``schema_version`` 3: A/B rounds,
``inconclusive``, ``warnings``; 3 replaced ``prediction_ratio`` by ``prediction_error``).
Each trial also has ``ab`` (the A/B rounds: samples/s and step ms of incumbent and
candidate per round, their medians and coefficients of variation),
``prediction_error`` ((predicted - measured) / measured, the prediction rescaled to the timed
step when known; until schema 2 this was ``prediction_ratio``, measured / predicted), ``trace_diff`` (``tracedoc diff``'s row
for the applied finding between the two profiled traces), ``profiled_step_ms`` (the
profiled trace's mean step, ms, beside the timed ``step_time_ms``) and
``predicted_saving_timed_ms`` (the prediction rescaled by the incumbent's timed / profiled
step). The file is strict JSON: a non-finite number is written as ``null``.

``trials[0]`` is the baseline. ``final`` is the incumbent (the last kept trial, or the
baseline); it is ``null`` only when the baseline itself failed.

The renderers (:func:`render_markdown`, :func:`render_table`, :func:`render_notes`) take the
document or its ``to_dict()`` form (a saved ``summary.json``).
"""

from __future__ import annotations

import json
import os
import time
from pathlib import Path
from typing import TYPE_CHECKING, Any

from tracedoc.fixloop.workload import strict_json
from tracedoc.render.fixloop import render_markdown
from tracedoc.report.fixloop import SCHEMA_VERSION, FixLoopSummary

if TYPE_CHECKING:  # pragma: no cover
    from tracedoc.fixloop.loop import FixLoop

NOISE_RULE = (
    "incumbent (A) and candidate (B) run in alternating A/B rounds (fresh processes, at least 5); "
    "keep a change only if the sign-test confidence interval (>= 90%) of the median paired ratio B/A "
    "lies above 1 + min_gain; revert if it lies below; otherwise run more rounds up to max_rounds, "
    "then 'inconclusive' (not kept)"
)


def predicted_vs_measured(
    predicted_ms: float | None,
    incumbent_step_ms: float | None,
    incumbent_batch: int | None,
    candidate_step_ms: float | None,
    candidate_batch: int | None,
    incumbent_profiled_step_ms: float | None = None,
) -> dict[str, float | None]:
    """A trial's predicted saving beside the measured one (the one place this is computed).

    ``measured_saving_ms = incumbent_step_ms - candidate_step_ms * incumbent_batch /
    candidate_batch``: time saved per incumbent step's worth of samples (a batch-size
    change is compared per sample). ``error = (predicted - measured) / measured``, the one
    convention of every predicted-against-measured figure in tracedoc (0: the estimate was
    exact; the prediction is ``predicted_saving_timed_ms`` when known, else ``predicted_ms``;
    ``None`` when either side is missing or nothing was measured).
    Step times are medians of the trial's A/B rounds, in ms.
    ``predicted_saving_timed_ms = predicted_ms * incumbent_step_ms / incumbent_profiled_step_ms``:
    the prediction, read off the incumbent's profiled trace, in the time base of the timed
    rounds (first order: the profiler's overhead taken as spread evenly over the step);
    ``None`` without the profiled step.
    """
    measured = None
    if incumbent_step_ms is not None and candidate_step_ms is not None:
        scale = (incumbent_batch or 1) / (candidate_batch or 1)
        measured = incumbent_step_ms - candidate_step_ms * scale
    timed = None
    if isinstance(predicted_ms, (int, float)) and incumbent_step_ms is not None and incumbent_profiled_step_ms:
        timed = predicted_ms * incumbent_step_ms / incumbent_profiled_step_ms
    pred = timed if timed is not None else predicted_ms
    error = None
    if measured and isinstance(pred, (int, float)):
        error = (pred - measured) / measured
    return {
        "predicted_saving_ms": predicted_ms,
        "measured_saving_ms": measured,
        "error": error,
        "predicted_saving_timed_ms": timed,
    }


#: A trial whose profiled steps average this factor above (or below) its timed step gets a
#: warning: the trace, and the savings predicted from it, are off scale. A project choice
#: (not from a published source): beyond the 3-step windows' own spread on the bundled CPU
#: workloads (0.8x to 1.05x of the timed step), where 8,000 tiny ops per step made the
#: profiled step 1.6x to 2.3x the timed one (workloads/dispatch_bound.py, 2026-11-22).
PROFILED_STEP_FACTOR = 1.3


def warnings(loop: FixLoop) -> list[str]:
    """Notes on measurements that could not decide: noisy sides (CV above noise.NOISY_CV),
    inconclusive trials, and profiled steps more than :data:`PROFILED_STEP_FACTOR` away from
    the timed step."""
    from tracedoc.fixloop.noise import NOISY_CV

    out = []
    for r in loop.records:
        prof, timed = r.profiled_step_ms, r.step_time_ms
        if prof and timed and max(prof / timed, timed / prof) >= PROFILED_STEP_FACTOR:
            out.append(
                f"trial {r.index}: its profiled steps averaged {prof:.1f} ms, {prof / timed:.2f}x the timed "
                f"step ({timed:.1f} ms); the savings predicted from its trace are in the trace's time "
                "(profiler overhead on many small ops, or an unrepresentative profiled window); "
                "predicted_saving_timed_ms rescales them to the timed step"
            )
        d = r.decision or {}
        if d.get("noisy"):
            out.append(
                f"trial {r.index}: the machine was too noisy (CV incumbent {d['incumbent_cv']:.1%}, "
                f"candidate {d['candidate_cv']:.1%}; above {NOISY_CV:.0%})"
            )
        if r.status == "inconclusive":
            out.append(f"trial {r.index} ({r.change}) is inconclusive: {r.error or d.get('reason', '')}")
    return out


def _version() -> str:
    try:
        from importlib.metadata import version

        return version("tracedoc")
    except Exception:  # noqa: BLE001 - not installed (PYTHONPATH checkout)
        return "0+unknown"


def build_summary(loop: FixLoop) -> FixLoopSummary:
    """The loop's state as the summary document (:class:`~tracedoc.report.fixloop.FixLoopSummary`;
    every non-finite number replaced by None, :func:`tracedoc.fixloop.workload.strict_json`)."""
    records = loop.records
    baseline = records[0] if records else None
    inc = loop.incumbent
    final = None
    if inc is not None:
        kept = [r.change for r in records[1:] if r.status == "kept"]
        final = {
            "config": inc.config,
            "samples_per_s": inc.samples_per_s,
            "step_time_ms": inc.step_time_ms,
            "speedup": inc.speedup,
            "trial": inc.index,
            "changes": kept,
        }
    return FixLoopSummary(
        version=_version(),
        workload=loop.workload,
        out_dir=str(loop.out_dir),
        device=strict_json(loop.device),
        options=strict_json(
            {
                "max_trials": loop.options.max_trials,
                "unsafe_fixes": loop.options.unsafe_fixes,
                "device": loop.options.device,
                "sets": list(loop.options.sets),
                "min_gain": loop.options.min_gain,
                "ab_rounds": loop.options.ab_rounds,
                "max_rounds": loop.options.max_rounds,
                "n_cpus": loop.n_cpus,
            }
        ),
        noise_rule=NOISE_RULE,
        baseline=None
        if baseline is None
        else strict_json(
            {
                "config": baseline.config,
                "samples_per_s": baseline.samples_per_s,
                "step_time_ms": baseline.step_time_ms,
                "status": baseline.status,
            }
        ),
        final=strict_json(final),
        trials=strict_json([r.to_dict() for r in records]),
        not_applicable=strict_json(loop.not_applicable),
        skipped=strict_json(loop.skipped),
        warnings=warnings(loop),
        stop_reason=loop.stop_reason or "running",
        interrupted=loop.interrupted,
        signal=loop.signal,
        started_at=time.strftime("%Y-%m-%dT%H:%M:%S%z", time.localtime(loop.started)),
        wall_s=round(time.time() - loop.started, 1),
    )


def _plain(summary: FixLoopSummary | dict[str, Any]) -> dict[str, Any]:
    """The summary's JSON form: the document's ``to_dict()``, or the dict as given."""
    return summary.to_dict() if isinstance(summary, FixLoopSummary) else summary


def _atomic_write(path: Path, text: str) -> None:
    tmp = path.with_name(path.name + ".tmp")
    tmp.write_text(text, encoding="utf-8")
    os.replace(tmp, path)


def write_summary(out_dir: Path, summary: FixLoopSummary | dict[str, Any]) -> None:
    """Write ``summary.json`` (the document's ``to_dict()``), ``summary.md`` and
    ``final_config.json`` (each replaced atomically)."""
    summary = _plain(summary)
    out_dir.mkdir(parents=True, exist_ok=True)
    _atomic_write(
        out_dir / "summary.json", json.dumps(strict_json(summary), indent=2, allow_nan=False, default=str) + "\n"
    )
    _atomic_write(out_dir / "summary.md", render_markdown(summary))
    if summary.get("final") is not None:
        _atomic_write(out_dir / "final_config.json", json.dumps(summary["final"]["config"], indent=2) + "\n")


__all__ = [
    "NOISE_RULE",
    "PROFILED_STEP_FACTOR",
    "SCHEMA_VERSION",
    "FixLoopSummary",
    "build_summary",
    "predicted_vs_measured",
    "warnings",
    "write_summary",
]
