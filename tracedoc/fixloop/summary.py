"""The fix-loop summary: the document (:class:`~tracedoc.report.fixloop.FixLoopSummary`, with its
JSON schema, built from the loop by :func:`tracedoc.fixloop.loop.build_summary`), written as
JSON and Markdown; and the predicted-against-measured figures of a trial.

``summary.json`` is :meth:`FixLoopSummary.to_dict` (``schema_version`` 5: A/B rounds,
``inconclusive``, ``warnings``; 3 replaced ``prediction_ratio`` by ``prediction_error``; 4 added
a trial's ``profiled_run`` and ``ab.unpaired``, so that every finished measurement is in it; 5
added the baseline's ``repeats_check`` and ``ab.warmup_steps``; a schema-4 file is still read).
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

The renderers (:mod:`tracedoc.render.fixloop`) take the document or its ``to_dict()`` form
(a saved ``summary.json``).
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

from tracedoc.fixloop import files
from tracedoc.fixloop.workload import strict_json
from tracedoc.render.fixloop import render_markdown
from tracedoc.report.fixloop import SCHEMA_VERSION, FixLoopSummary, as_dict

NOISE_RULE = (
    "incumbent (A) and candidate (B) run in alternating A/B rounds (fresh processes, at least 5); "
    "keep a change only if the sign-test confidence interval (>= 90%) of the median paired ratio B/A "
    "lies above 1 + min_gain; revert if it lies below; otherwise run more rounds up to max_rounds, "
    "then 'inconclusive' (not kept); the baseline's timed windows must agree first (CV <= 10%, or from 5 "
    "windows a >= 90% sign-test interval of their median within 10% of it): else up to max_rounds more "
    "measure-only windows, and a baseline that still disagrees is marked unusable (its figures not shown)"
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


def write_summary(
    out_dir: Path, summary: FixLoopSummary | dict[str, Any], only_json: bool = False
) -> dict[str, OSError]:
    """Write ``summary.json`` first (the document's ``to_dict()``: the record of every
    measurement), then ``summary.md`` and ``final_config.json``, each replaced atomically
    and ``out_dir`` made again if it is gone (:func:`tracedoc.fixloop.files.write_text`).
    With ``only_json`` only ``summary.json``.

    Returns:
        the files that could not be written, name -> the :class:`OSError` (empty: all were);
        a failed write never stops the others and is never raised.
    """
    doc = summary if isinstance(summary, FixLoopSummary) else FixLoopSummary.from_dict(summary)
    plain = as_dict(doc)
    parts = [("summary.json", json.dumps(strict_json(plain), indent=2, allow_nan=False, default=str) + "\n")]
    if not only_json:
        parts.append(("summary.md", render_markdown(doc)))
        if plain.get("final") is not None:
            parts.append(("final_config.json", json.dumps(plain["final"]["config"], indent=2) + "\n"))
    failed: dict[str, OSError] = {}
    for name, text in parts:
        try:
            files.write_text(out_dir / name, text)
        except OSError as exc:
            failed[name] = exc
    return failed


__all__ = [
    "NOISE_RULE",
    "PROFILED_STEP_FACTOR",
    "SCHEMA_VERSION",
    "FixLoopSummary",
    "predicted_vs_measured",
    "write_summary",
]
