"""Where ``tracedoc analyze`` writes its report: the chosen format, through the render
registry (:mod:`tracedoc.render`), to a file or stdout."""

from __future__ import annotations

from pathlib import Path
from typing import Any, List, Optional

from tracedoc.cli.common import Color, Format, make_console, open_output


def skipped_codes(report: Any) -> List[str]:
    """The codes of the selected rules that were skipped, in every report ``report`` holds
    (a Report, the ranks of a job, or unrelated traces)."""
    from tracedoc.render import kind_of

    kind = kind_of(report)
    if kind == "report":
        return [k.code for k in report.skipped]
    entries = report.traces if kind == "traces" else report.ranks
    return sorted({k.code for r in entries if r.report for k in r.report.skipped})


def emit(
    report: Any,
    format: Format,
    output: Optional[Path] = None,
    top: Optional[int] = None,
    quiet: bool = False,
    color: Color = Color.auto,
    rules: Optional[list] = None,
) -> None:
    """Write ``report`` (any document :mod:`tracedoc.render` knows) in ``format`` to ``output``
    or stdout; ``quiet``: the closing summary line only. A document format is rendered whole
    before the file is opened, so a renderer that cannot run leaves no half-written file.

    Args:
        rules: the evaluated Rule objects (their descriptions go into SARIF).

    Raises:
        typer.Exit(2): ``output`` cannot be written (one-line message).
        TracedocError: the document has no such format, or a renderer cannot run
            (``--format html`` without plotly).
    """
    from tracedoc.render import render

    fmt = "summary" if quiet and format is Format.text else format.value
    if fmt == "text":
        with open_output(output) as (_, fh):
            render(report, "text", console=make_console(color, file=fh), top=top)
        return
    if fmt == "summary":
        with open_output(output) as (out, fh):
            con = make_console(color, file=fh)
            out.write(render(report, "summary", width=con.width if con.is_terminal else None))
        return
    document = render(report, fmt, rules=rules)
    with open_output(output) as (out, _):
        out.write(document)
