"""The overview of several unrelated traces (:class:`tracedoc.report.ranks.MultiTraceReport`):
one row per trace with its top finding, that finding's saving and the step time, so a folder
of benchmarks reads at a glance before each trace's own report.

The rows are read from the document (:func:`overview_rows`), never computed from a trace:

* ``path``: the trace as discovered;
* ``top_finding``: ``{"code", "name", "severity"}`` of the first finding (findings are ranked
  by their saving, largest first), None when the trace has none or failed;
* ``saving_ms``: that finding's estimated saving (ms per step; None: not estimated);
* ``saving_share``: ``saving_ms`` over the step time (None when either is unknown);
* ``step_time_ms``: the trace's ``step_time_ms`` signal;
* ``findings``: how many findings the trace has;
* ``error``: the one-line error of a trace that could not be analyzed (else None).

``--format json`` writes them as the document's ``overview`` key (after ``traces``; derived,
so :meth:`~tracedoc.report.ranks.MultiTraceReport.from_dict` ignores it); the terminal and
Markdown show them as a table (the terminal's fits 80 columns: file names are shortened in
the middle, the finding's name at its end). Trace text is escaped for each output
(:mod:`tracedoc.render.escape`).
"""

from __future__ import annotations

from pathlib import Path
from typing import TYPE_CHECKING, Any

from tracedoc.render.escape import code_span, markdown

if TYPE_CHECKING:
    from tracedoc.report.ranks import MultiTraceReport

#: Columns of the terminal table: at 80 columns, what is left after the numbers goes to the
#: file name and the finding, shared between them.
_NUMBER_COLUMNS = 31


def _row(path: str, report: Any, error: str | None = None) -> dict[str, Any]:
    step = report.signals.get("step_time_ms") if report is not None else None
    step = step if isinstance(step, (int, float)) and not isinstance(step, bool) else None
    top = report.findings[0] if report is not None and report.findings else None
    saving = top.estimated_saving_ms if top is not None else None
    share = saving / step if saving is not None and step else None
    return {
        "path": path,
        "top_finding": {"code": top.code, "name": top.name, "severity": str(top.severity)} if top else None,
        "saving_ms": None if saving is None else round(float(saving), 3),
        "saving_share": None if share is None else round(float(share), 4),
        "step_time_ms": None if step is None else round(float(step), 3),
        "findings": len(report.findings) if report is not None else 0,
        "error": error,
    }


def overview_rows(mt: MultiTraceReport) -> list[dict[str, Any]]:
    """One row per trace (see the module docstring), the analyzed ones in the document's
    order, then the failed ones."""
    rows = [_row(r.path, r.report) for r in mt.traces]
    return rows + [_row(r.path, None, r.error or "could not be analyzed") for r in mt.failed]


def _saving(row: dict[str, Any]) -> str:
    if row["saving_ms"] is None:
        return "-" if row["top_finding"] is None else "n/a"
    share = f" ({row['saving_share']:.0%})" if row["saving_share"] is not None else ""
    return f"{row['saving_ms']:.2f}{share}"


def _finding(row: dict[str, Any]) -> str:
    if row["error"] is not None:
        return "not analyzed (failed)"
    t = row["top_finding"]
    if t is None:
        return "no findings"
    more = f" +{row['findings'] - 1}" if row["findings"] > 1 else ""
    return f"{t['code']} {t['name']}{more}"


def overview_table(mt: MultiTraceReport, width: int) -> Any:
    """The rich table of the overview for a terminal ``width`` columns wide (80 fits)."""
    from rich.table import Table
    from rich.text import Text

    from tracedoc.text import middle_ellipsis

    room = max(24, width - _NUMBER_COLUMNS)
    file_w = max(12, room // 2)
    table = Table(show_edge=False, title="overview", title_justify="left", pad_edge=False)
    table.add_column("trace", no_wrap=True, max_width=file_w)
    table.add_column("top finding", no_wrap=True, overflow="ellipsis", max_width=max(12, room - file_w))
    table.add_column("saving ms/step", justify="right", no_wrap=True)
    table.add_column("step ms", justify="right", no_wrap=True)
    for row in overview_rows(mt):
        step = "n/a" if row["step_time_ms"] is None else f"{row['step_time_ms']:.2f}"
        table.add_row(
            Text(middle_ellipsis(Path(row["path"]).name, file_w)),
            Text(_finding(row), style="red" if row["error"] is not None else ""),
            _saving(row),
            step,
        )
    return table


def overview_markdown(mt: MultiTraceReport) -> list[str]:
    """The overview as Markdown lines (a heading and a table)."""
    from tracedoc.text import plural

    lines = [
        f"# tracedoc report: overview of {plural(len(mt.traces) + len(mt.failed), 'trace')}",
        "",
        "| trace | top finding | saving (ms/step) | step time (ms) |",
        "|---|---|---:|---:|",
    ]
    for row in overview_rows(mt):
        file = code_span(Path(row["path"]).name).replace("|", "\\|")  # a cell: GFM splits on any |
        step = "n/a" if row["step_time_ms"] is None else f"{row['step_time_ms']:.2f}"
        finding = markdown(_finding(row)).replace("|", "\\|")
        lines.append(f"| {file} | {finding} | {_saving(row)} | {step} |")
    return [*lines, ""]
