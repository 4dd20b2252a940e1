"""The fix-loop summary: plain data, written as JSON and Markdown, rendered as a rich table.

``summary.json`` (``schema_version`` 3: A/B rounds, ``inconclusive``, ``warnings``; 3 replaced
``prediction_ratio`` by ``prediction_error``)::

    {"schema_version": 1, "tool": {...}, "workload": str, "out_dir": str,
     "device": {"type", "name", "bf16_supported", "torch"},
     "options": {...}, "noise_rule": str,
     "baseline": {"config", "samples_per_s", "step_time_ms"},
     "final": {"config", "samples_per_s", "step_time_ms", "speedup", "trial", "changes": [str]},
     "trials": [{"index", "change", "status", "samples_per_s", "step_time_ms", "speedup",
                 "predicted_saving_ms", "measured_saving_ms", "decision", "error", ...}],
     "not_applicable": [{"knob", "reason"}], "skipped": [{"code", "name", "knob", "reason"}],
     "warnings": [str], "stop_reason": str, "interrupted": bool, "signal": int | null,
     "started_at", "wall_s"}

Each trial also has ``ab`` (the A/B rounds: samples/s and step ms of incumbent and
candidate per round, their medians and coefficients of variation),
``prediction_error`` ((predicted - measured) / measured, the prediction rescaled to the timed
step when known; until schema 2 this was ``prediction_ratio``, measured / predicted), ``trace_diff`` (``tracedoc diff``'s row
for the applied finding between the two profiled traces), ``profiled_step_ms`` (the
profiled trace's mean step, ms, beside the timed ``step_time_ms``) and
``predicted_saving_timed_ms`` (the prediction rescaled by the incumbent's timed / profiled
step). The file is strict JSON: a
non-finite number is written as ``null``.

``trials[0]`` is the baseline. ``final`` is the incumbent (the last kept trial, or the
baseline); it is ``null`` only when the baseline itself failed.
"""

from __future__ import annotations

import json
import os
import time
from pathlib import Path
from typing import TYPE_CHECKING, Any

from tracedoc.fixloop.workload import strict_json

if TYPE_CHECKING:  # pragma: no cover
    from rich.table import Table

    from tracedoc.fixloop.loop import FixLoop

SCHEMA_VERSION = 3

NOISE_RULE = (
    "incumbent (A) and candidate (B) run in alternating A/B rounds (fresh processes, at least 5); "
    "keep a change only if the sign-test confidence interval (>= 90%) of the median paired ratio B/A "
    "lies above 1 + min_gain; revert if it lies below; otherwise run more rounds up to max_rounds, "
    "then 'inconclusive' (not kept)"
)

COLUMNS = ("#", "change", "step ms", "samples/s", "CV", "speedup", "status", "predicted ms", "measured ms")


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


def build_summary(loop: FixLoop) -> dict[str, Any]:
    """Collect the loop's state into the summary dict described in the module docstring."""
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
    return strict_json(
        {
            "schema_version": SCHEMA_VERSION,
            "tool": {"name": "tracedoc", "command": "fix-loop", "version": _version()},
            "workload": loop.workload,
            "out_dir": str(loop.out_dir),
            "device": loop.device,
            "options": {
                "max_trials": loop.options.max_trials,
                "unsafe_fixes": loop.options.unsafe_fixes,
                "device": loop.options.device,
                "sets": list(loop.options.sets),
                "min_gain": loop.options.min_gain,
                "ab_rounds": loop.options.ab_rounds,
                "max_rounds": loop.options.max_rounds,
                "n_cpus": loop.n_cpus,
            },
            "noise_rule": NOISE_RULE,
            "baseline": None
            if baseline is None
            else {
                "config": baseline.config,
                "samples_per_s": baseline.samples_per_s,
                "step_time_ms": baseline.step_time_ms,
                "status": baseline.status,
            },
            "final": final,
            "trials": [r.to_dict() for r in records],
            "not_applicable": loop.not_applicable,
            "skipped": loop.skipped,
            "warnings": warnings(loop),
            "stop_reason": loop.stop_reason or "running",
            "interrupted": loop.interrupted,
            "signal": loop.signal,
            "started_at": time.strftime("%Y-%m-%dT%H:%M:%S%z", time.localtime(loop.started)),
            "wall_s": round(time.time() - loop.started, 1),
        }
    )


def _atomic_write(path: Path, text: str) -> None:
    tmp = path.with_name(path.name + ".tmp")
    tmp.write_text(text, encoding="utf-8")
    os.replace(tmp, path)


def write_summary(out_dir: Path, summary: dict[str, Any]) -> None:
    """Write ``summary.json``, ``summary.md`` and ``final_config.json`` (each replaced atomically)."""
    out_dir.mkdir(parents=True, exist_ok=True)
    _atomic_write(
        out_dir / "summary.json", json.dumps(strict_json(summary), indent=2, allow_nan=False, default=str) + "\n"
    )
    _atomic_write(out_dir / "summary.md", render_markdown(summary))
    if summary.get("final") is not None:
        _atomic_write(out_dir / "final_config.json", json.dumps(summary["final"]["config"], indent=2) + "\n")


def _pct(value: float | None) -> str:
    return "-" if value is None else f"{value:.0%}"


def _num(value: float | None, digits: int = 1, signed: bool = False) -> str:
    if value is None:
        return "-"
    return f"{value:+.{digits}f}" if signed else f"{value:.{digits}f}"


def rows(summary: dict[str, Any]) -> list[list[str]]:
    """The table's rows as text, one per trial, in :data:`COLUMNS` order."""
    out = []
    for t in summary["trials"]:
        speed = "-" if t.get("speedup") is None else f"{t['speedup']:.2f}x"
        ab = t.get("ab") or {}
        if ab.get("rounds"):
            cv_a, cv_b = ab["incumbent"].get("cv"), ab["candidate"].get("cv")
            cvs = f"{_pct(cv_b)} (A {_pct(cv_a)})"
        else:
            reps = t.get("samples_per_s_repeats") or []
            from tracedoc.fixloop.noise import cv

            cvs = _pct(cv(reps)) if len(reps) > 1 else "-"
        out.append(
            [
                str(t["index"]),
                t["change"],
                _num(t.get("step_time_ms")),
                _num(t.get("samples_per_s")),
                cvs,
                speed,
                t["status"],
                _num(t.get("predicted_saving_ms"), signed=False),
                _num(t.get("measured_saving_ms"), signed=True),
            ]
        )
    return out


def _final_line(summary: dict[str, Any]) -> str:
    final = summary.get("final")
    if final is None:
        return f"No result: {summary.get('stop_reason')}."
    changes = ", ".join(final["changes"]) or "none kept"
    return (
        f"Final: {_num(final['samples_per_s'])} samples/s, {final['speedup']:.2f}x the baseline "
        f"(trial {final['trial']}; changes: {changes}). Stopped: {summary.get('stop_reason')}."
    )


def render_markdown(summary: dict[str, Any]) -> str:
    """The summary as a Markdown document (table, final result, notes, the noise rule)."""
    dev = summary.get("device") or {}
    lines = [
        f"# tracedoc fix-loop: `{Path(summary['workload']).name}`",
        "",
        f"Device: {dev.get('name', '?')} ({dev.get('type', '?')}), torch {dev.get('torch', '?')}. "
        f"Savings are ms per step of the incumbent; predicted = the finding's estimated saving, "
        f"measured = incumbent step time - candidate step time (per sample when the batch size changes), "
        f"both from interleaved A/B rounds; CV = coefficient of variation of the candidate's rounds "
        f"(A: the incumbent's in the same rounds).",
        "",
        "| " + " | ".join(COLUMNS) + " |",
        "|" + "|".join("---:" if c not in ("change", "status") else "---" for c in COLUMNS) + "|",
    ]
    for row in rows(summary):
        lines.append("| " + " | ".join(cell.replace("|", "\\|") for cell in row) + " |")
    lines += ["", _final_line(summary), ""]
    if summary.get("warnings"):
        lines += ["## Warnings", ""] + [f"- {w}" for w in summary["warnings"]] + [""]
    decided = [t for t in summary["trials"] if t.get("decision")]
    if decided:
        lines += ["## Decisions", ""] + [f"- trial {t['index']}: {t['decision']['reason']}" for t in decided] + [""]
    errors = [t for t in summary["trials"] if t.get("error")]
    if errors:
        lines += (
            ["## Failed trials", ""] + [f"- trial {t['index']} ({t['status']}): {t['error']}" for t in errors] + [""]
        )
    if summary.get("not_applicable"):
        lines += ["## Not applicable on this device", ""]
        lines += [f"- `{n['knob']}`: {n['reason']}" for n in summary["not_applicable"]] + [""]
    if summary.get("skipped"):
        lines += ["## Fixes not tried", ""]
        lines += [f"- {s['code']} {s['name']} -> `{s['knob']}`: {s['reason']}" for s in summary["skipped"]] + [""]
    opts = summary["options"]
    lines += [
        "## Keep rule",
        "",
        f"{summary['noise_rule']}; here min_gain = {opts['min_gain']:.0%}, "
        f"{opts.get('ab_rounds')} to {opts.get('max_rounds')} rounds.",
        "",
    ]
    if summary.get("final") is not None:
        lines += ["## Final configuration", "", "```json", json.dumps(summary["final"]["config"], indent=2), "```", ""]
    return "\n".join(lines)


def render_table(summary: dict[str, Any], width: int | None = None) -> Table:
    """The summary as a rich :class:`~rich.table.Table` (trace text escaped).

    Fits ``width`` columns (default: the terminal's, 80 when not a terminal): light column
    rules, every column but "change" kept on one line (two-word headers stack), so numbers
    and statuses are never cut; a long change wraps at its spaces, and a word of it too
    long for the column is shortened in the middle (``samples_p…knob_name:``).
    """
    from rich import box
    from rich.console import Console
    from rich.markup import escape
    from rich.table import Table

    from tracedoc.text import middle_ellipsis

    style = {
        "kept": "green",
        "baseline": "bold",
        "reverted": "yellow",
        "inconclusive": "yellow",
        "crashed": "red",
        "oom": "red",
        "timeout": "red",
        "interrupted": "magenta",
    }
    table = Table(
        title=f"tracedoc fix-loop: {escape(Path(summary['workload']).name)}",
        caption=escape(_final_line(summary)),
        box=box.SIMPLE_HEAD,
        pad_edge=False,
        collapse_padding=True,
    )
    body = rows(summary)
    heads = [c.replace(" ms", "\nms") if c in ("step ms", "predicted ms", "measured ms") else c for c in COLUMNS]
    fixed = sum(
        max(max(len(h) for h in heads[j].split("\n")), *(len(r[j]) for r in body)) if body else len(heads[j])
        for j in range(len(COLUMNS))
        if COLUMNS[j] != "change"
    )
    change_w = max(14, (width or Console().width) - fixed - 2 * (len(COLUMNS) - 1) - 2)
    for col in COLUMNS:
        table.add_column(
            heads[COLUMNS.index(col)],
            justify="left" if col in ("change", "status") else "right",
            no_wrap=col != "change",
            min_width=14 if col == "change" else None,
            overflow="fold",
        )
    at = COLUMNS.index("status")
    for row in body:
        status = row[at]
        row[1] = " ".join(middle_ellipsis(w, change_w) for w in row[1].split(" "))
        row = [escape(c) for c in row]
        row[at] = f"[{style.get(status, '')}]{row[at]}[/]" if style.get(status) else row[at]
        table.add_row(*row)
    return table


def render_notes(summary: dict[str, Any]) -> list[str]:
    """Plain-text notes printed under the table: failures, not-applicable knobs, fixes not tried."""
    notes = [f"warning: {w}" for w in summary.get("warnings") or []]
    notes += [f"trial {t['index']} {t['status']}: {t['error']}" for t in summary["trials"] if t.get("error")]
    notes += [f"{n['knob']}: {n['reason']}" for n in summary.get("not_applicable") or []]
    notes += [f"{s['code']} {s['name']} -> {s['knob']}: {s['reason']}" for s in summary.get("skipped") or []]
    return notes
