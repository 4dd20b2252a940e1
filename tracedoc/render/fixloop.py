"""The fix-loop summary (:class:`tracedoc.report.fixloop.FixLoopSummary`, or its JSON form as a
dict) as a terminal table with its notes, and as Markdown (``summary.md``)."""

from __future__ import annotations

import json
from pathlib import Path
from typing import TYPE_CHECKING, Any

from tracedoc.report.fixloop import as_dict

if TYPE_CHECKING:
    from rich.table import Table

    from tracedoc.report.fixloop import FixLoopSummary

#: The table's columns (text and Markdown).
COLUMNS = ("#", "change", "step ms", "samples/s", "CV", "speedup", "status", "predicted ms", "measured ms")


def _pct(value: float | None) -> str:
    return "-" if value is None else f"{value:.0%}"


def _num(value: float | None, digits: int = 1, signed: bool = False) -> str:
    if value is None:
        return "-"
    return f"{value:+.{digits}f}" if signed else f"{value:.{digits}f}"


def rows(summary: FixLoopSummary | dict[str, Any]) -> list[list[str]]:
    """The table's rows as text, one per trial, in :data:`COLUMNS` order."""
    summary = as_dict(summary)
    out = []
    for t in summary["trials"]:
        speed = "-" if t.get("speedup") is None else f"{t['speedup']:.2f}x"
        ab = t.get("ab") or {}
        if ab.get("rounds"):
            cv_a, cv_b = ab["incumbent"].get("cv"), ab["candidate"].get("cv")
            cvs = f"{_pct(cv_b)} (A {_pct(cv_a)})"
        else:
            reps = t.get("samples_per_s_repeats") or []
            from tracedoc.stats import cv

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


def _final_line(summary: FixLoopSummary | dict[str, Any]) -> str:
    summary = as_dict(summary)
    final = summary.get("final")
    if final is None:
        return f"No result: {summary.get('stop_reason')}."
    changes = ", ".join(final["changes"]) or "none kept"
    return (
        f"Final: {_num(final['samples_per_s'])} samples/s, {final['speedup']:.2f}x the baseline "
        f"(trial {final['trial']}; changes: {changes}). Stopped: {summary.get('stop_reason')}."
    )


def render_markdown(summary: FixLoopSummary | dict[str, Any]) -> str:
    """The summary as a Markdown document (table, final result, notes, the noise rule)."""
    summary = as_dict(summary)
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


def render_table(summary: FixLoopSummary | dict[str, Any], width: int | None = None) -> Table:
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

    summary = as_dict(summary)
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


def render_notes(summary: FixLoopSummary | dict[str, Any]) -> list[str]:
    """Plain-text notes printed under the table: failures, not-applicable knobs, fixes not tried."""
    summary = as_dict(summary)
    notes = [f"warning: {w}" for w in summary.get("warnings") or []]
    notes += [f"trial {t['index']} {t['status']}: {t['error']}" for t in summary["trials"] if t.get("error")]
    notes += [f"{n['knob']}: {n['reason']}" for n in summary.get("not_applicable") or []]
    notes += [f"{s['code']} {s['name']} -> {s['knob']}: {s['reason']}" for s in summary.get("skipped") or []]
    return notes
