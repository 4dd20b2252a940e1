"""The fix-loop summary (:class:`tracedoc.report.fixloop.FixLoopSummary`) as a terminal table
with its notes, and as Markdown (``summary.md``).

The renderers read the document's attributes; its JSON form (a saved ``summary.json``, or
``to_dict()``) is read back with :meth:`FixLoopSummary.from_dict` first (:func:`document`).
A trial, the device, the options and ``final`` are plain JSON data in the document itself,
so those are read by key."""

from __future__ import annotations

import json
from pathlib import Path
from typing import TYPE_CHECKING, Any, Callable

from tracedoc.render.escape import code_span, markdown
from tracedoc.render.escape import document as escaped
from tracedoc.report.fixloop import FixLoopSummary

if TYPE_CHECKING:
    from rich.table import Table

#: The table's columns (text and Markdown). Every figure of a row is computable from the table
#: (issue 22): a decided trial's ``step ms`` shows its candidate's (B) median beside its
#: incumbent's (A) in the same A/B rounds, ``measured ms`` is A minus B (per sample when the
#: batch size changes), ``B/A`` is the median paired ratio the decision read, and ``speedup``
#: is the incumbent row's speedup times ``B/A``.
COLUMNS = ("#", "change", "step ms", "samples/s", "CV", "B/A", "speedup", "status", "predicted ms", "measured ms")


def _pct(value: float | None) -> str:
    return "-" if value is None else f"{value:.0%}"


def _num(value: float | None, digits: int = 1, signed: bool = False) -> str:
    if value is None:
        return "-"
    return f"{value:+.{digits}f}" if signed else f"{value:.{digits}f}"


def document(summary: FixLoopSummary | dict[str, Any]) -> FixLoopSummary:
    """The document itself, or the document of its JSON form (``to_dict()``, a saved
    ``summary.json``), with every string made visible (:func:`tracedoc.render.escape.visible`:
    workload names, errors and reasons are the workload's text, and ``summary.md`` is written
    from here without the registry).

    Raises:
        tracedoc.errors.DocumentError: a dict that is not a fix-loop summary of this schema.
    """
    return escaped(summary if isinstance(summary, FixLoopSummary) else FixLoopSummary.from_dict(summary))


def _unusable(t: dict[str, Any]) -> bool:
    """A baseline whose timed windows still disagreed after more runs (its ``repeats_check``)."""
    rc = t.get("repeats_check")
    return isinstance(rc, dict) and rc.get("verdict") == "disagree"


def _a_step_ms(t: dict[str, Any]) -> float | None:
    """The median of the incumbent's (A) step ms in a decided trial's A/B rounds (None: undecided)."""
    import statistics

    if not t.get("decision"):
        return None
    a = ((t.get("ab") or {}).get("incumbent") or {}).get("step_time_ms") or []
    return statistics.median(a) if a else None


def rows(summary: FixLoopSummary | dict[str, Any]) -> list[list[str]]:
    """The table's rows as text, one per trial, in :data:`COLUMNS` order.

    A decided trial's ``step ms`` is ``B (A a)``: the candidate's median and the incumbent's
    in the same rounds; an unusable baseline (its windows disagree, ``repeats_check``) shows
    ``-`` for its step time and throughput."""
    out = []
    for t in document(summary).trials:
        speed = "-" if t.get("speedup") is None else f"{t['speedup']:.2f}x"
        ratio = (t.get("decision") or {}).get("ratio_median")
        a_ms = _a_step_ms(t)
        step = _num(t.get("step_time_ms")) + (f" (A {_num(a_ms)})" if a_ms is not None else "")
        sps = _num(t.get("samples_per_s"))
        if _unusable(t):
            step = sps = "-"
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
                step,
                sps,
                cvs,
                "-" if ratio is None else f"{ratio:.3f}",
                speed,
                t["status"],
                _num(t.get("predicted_saving_ms"), signed=False),
                _num(t.get("measured_saving_ms"), signed=True),
            ]
        )
    return out


def _final_line(summary: FixLoopSummary, esc: Callable[[Any], str] = str) -> str:
    """The closing sentence; ``esc`` escapes the workload's text in it (the changes, the reason)."""
    final = summary.final
    if final is None:
        return f"No result: {esc(summary.stop_reason)}."
    changes = ", ".join(map(esc, final["changes"])) or "none kept"
    sps = final["samples_per_s"]
    if final.get("trial") == 0 and summary.trials and _unusable(summary.trials[0]):
        sps = None  # the baseline's windows disagree: no figure to show
    if final.get("trial") == 0:
        return f"Final: the baseline, {_num(sps)} samples/s (changes: {changes}). Stopped: {esc(summary.stop_reason)}."
    # the speedup is the product of the kept B/A ratios; the samples/s are the kept trial's own
    # A/B rounds', measured at another time than the baseline's (issue 22): said so, not divided
    return (
        f"Final: {final['speedup']:.2f}x the baseline (the product of the kept B/A; trial {final['trial']}, "
        f"{_num(sps)} samples/s in its own A/B rounds; changes: {changes}). Stopped: {esc(summary.stop_reason)}."
    )


def render_markdown(summary: FixLoopSummary | dict[str, Any]) -> str:
    """The summary as a Markdown document (table, final result, notes, the noise rule)."""
    summary = document(summary)
    dev = summary.device or {}
    lines = [
        f"# tracedoc fix-loop: {code_span(Path(summary.workload).name)}",
        "",
        f"Device: {markdown(dev.get('name', '?'))} ({markdown(dev.get('type', '?'))}), "
        f"torch {markdown(dev.get('torch', '?'))}. "
        f"Savings are ms per step of the incumbent; predicted = the finding's estimated saving, "
        f"measured = incumbent step time - candidate step time (per sample when the batch size changes), "
        f"both from interleaved A/B rounds; step ms = the candidate's (B) median (A: the incumbent's in the "
        f"same rounds); CV = coefficient of variation of the candidate's rounds (A: the incumbent's); "
        f"B/A = the median paired ratio of samples/s the decision read; speedup = the incumbent's speedup "
        f"times B/A (the baseline's: 1).",
        "",
        "| " + " | ".join(COLUMNS) + " |",
        "|" + "|".join("---:" if c not in ("change", "status") else "---" for c in COLUMNS) + "|",
    ]
    for row in (map(markdown, r) for r in rows(summary)):
        lines.append("| " + " | ".join(row) + " |")  # markdown() escapes | too
    lines += ["", _final_line(summary, markdown), ""]
    if summary.warnings:
        lines += ["## Warnings", ""] + [f"- {markdown(w, line_start=True)}" for w in summary.warnings] + [""]
    decided = [t for t in summary.trials if t.get("decision")]
    if decided:
        lines += ["## Decisions", ""]
        # the loop's own sentence (figures), made visible with the rest of the document
        lines += [f"- trial {t['index']}: {t['decision']['reason']}" for t in decided] + [""]
    errors = [t for t in summary.trials if t.get("error")]
    if errors:
        lines += (
            ["## Failed trials", ""]
            + [f"- trial {t['index']} ({t['status']}): {markdown(t['error'])}" for t in errors]
            + [""]
        )
    if summary.not_applicable:
        lines += ["## Not applicable on this device", ""]
        lines += [f"- {code_span(n['knob'])}: {markdown(n['reason'])}" for n in summary.not_applicable] + [""]
    if summary.skipped:
        lines += ["## Fixes not tried", ""]
        lines += [
            f"- {markdown(s['code'])} {markdown(s['name'])} -> {code_span(s['knob'])}: {markdown(s['reason'])}"
            for s in summary.skipped
        ] + [""]
    opts = summary.options
    lines += [
        "## Keep rule",
        "",
        f"{summary.noise_rule}; here min_gain = {opts['min_gain']:.0%}, "
        f"{opts.get('ab_rounds')} to {opts.get('max_rounds')} rounds.",
        "",
    ]
    if summary.final is not None:
        lines += ["## Final configuration", "", "```json", json.dumps(summary.final["config"], indent=2), "```", ""]
    return "\n".join(lines)


def render_table(summary: FixLoopSummary | dict[str, Any], width: int | None = None) -> Table:
    """The summary as a rich :class:`~rich.table.Table` (trace text escaped).

    Fits ``width`` columns (default: the terminal's, 80 when not a terminal): light column
    rules, the incumbent's figures of a decided trial (``step ms``, ``CV``) stacked under the
    candidate's as ``A ...`` and its ``B/A`` under its speedup as ``x1.750``, every column but
    "change" kept on one line (two-word headers stack), so numbers and statuses are never cut; a long change wraps at its spaces, and a word of it too
    long for the column is shortened in the middle (``samples_p…knob_name:``).
    """
    from rich import box
    from rich.console import Console
    from rich.markup import escape
    from rich.table import Table

    from tracedoc.text import middle_ellipsis

    summary = document(summary)
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
        title=f"tracedoc fix-loop: {escape(Path(summary.workload).name)}",
        caption=escape(_final_line(summary)),
        box=box.SIMPLE_HEAD,
        pad_edge=False,
        collapse_padding=True,
    )
    # the terminal table has no B/A column: a decided trial's ratio is stacked under its
    # speedup as "x1.750" (80 columns hold the rest), and the incumbent's step ms and CV under
    # the candidate's as "A ..."
    cols = tuple(c for c in COLUMNS if c != "B/A")
    ratio_at, speed_at = COLUMNS.index("B/A"), COLUMNS.index("speedup")
    stacked = {COLUMNS.index("step ms"), COLUMNS.index("CV")}
    body = []
    for r in rows(summary):
        cells = [
            c.replace(" (A ", "\nA ").removesuffix(")") if j in stacked and " (A " in c else c for j, c in enumerate(r)
        ]
        if cells[ratio_at] != "-":
            cells[speed_at] += f"\n\u00d7{cells[ratio_at]}"
        body.append([c for j, c in enumerate(cells) if j != ratio_at])
    heads = [c.replace(" ms", "\nms") if c in ("step ms", "predicted ms", "measured ms") else c for c in cols]
    heads[cols.index("speedup")] = "speedup\n(\u00d7B/A)"
    fixed = sum(
        max(max(len(h) for h in heads[j].split("\n")), *(len(x) for r in body for x in r[j].split("\n")))
        if body
        else len(heads[j])
        for j in range(len(cols))
        if cols[j] != "change"
    )
    change_w = max(14, (width or Console().width) - fixed - 2 * (len(cols) - 1) - 2)
    for j, col in enumerate(cols):
        table.add_column(
            heads[j],
            justify="left" if col in ("change", "status") else "right",
            no_wrap=col != "change",
            min_width=14 if col == "change" else None,
            overflow="fold",
        )
    at = cols.index("status")
    for row in body:
        status = row[at]
        row[1] = " ".join(middle_ellipsis(w, change_w) for w in row[1].split(" "))
        row = [escape(c) for c in row]
        row[at] = f"[{style.get(status, '')}]{row[at]}[/]" if style.get(status) else row[at]
        table.add_row(*row)
    return table


def render_notes(summary: FixLoopSummary | dict[str, Any]) -> list[str]:
    """Plain-text notes printed under the table: failures, not-applicable knobs, fixes not tried."""
    summary = document(summary)
    notes = [f"warning: {w}" for w in summary.warnings]
    notes += [f"trial {t['index']} {t['status']}: {t['error']}" for t in summary.trials if t.get("error")]
    notes += [f"{n['knob']}: {n['reason']}" for n in summary.not_applicable]
    notes += [f"{s['code']} {s['name']} -> {s['knob']}: {s['reason']}" for s in summary.skipped]
    return notes
