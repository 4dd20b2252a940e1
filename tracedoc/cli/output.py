"""Where ``tracedoc analyze`` writes its report: the chosen format, through the render
registry (:mod:`tracedoc.render`), to a file or stdout.

``--format html`` never pours a page into a terminal: with stdout a terminal and no ``-o``,
the page goes to ``<trace name>.html`` in the current folder (``v100_resnet50_workers0.html``
for ``v100_resnet50_workers0.pt.trace.json.gz``; a rank folder's name for its ranks), and one
stderr line says where, as it does for ``-o``. Piped or redirected, stdout gets the page."""

from __future__ import annotations

import re
import sys
from pathlib import Path
from typing import Any, List, Optional

from rich.markup import escape

from tracedoc.cli.common import Color, Format, err_console, make_console, open_output
from tracedoc.errors import display_path

#: The end of a trace file's name that its HTML report's name leaves out.
_TRACE_SUFFIX = re.compile(r"(?:\.pt)?(?:\.trace)?(?:\.json)?(?:\.gz)?$", re.IGNORECASE)


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
    note = ""
    if fmt == "html" and output is None and getattr(sys.stdout, "isatty", lambda: False)():
        output, note = html_path(report), " (stdout is a terminal; -o FILE writes it elsewhere)"
    with open_output(output) as (out, _):
        out.write(document)
    if fmt == "html" and output is not None:
        where = escape(display_path(output))
        err_console.print(f"tracedoc: wrote the HTML report to {where}{note}", soft_wrap=True)


def html_path(report: Any) -> Path:
    """Where an HTML report goes when stdout is a terminal and no ``-o`` is given: a file in
    the current folder named after the trace (its ``.pt.trace.json.gz`` left out) or the rank
    folder, any character but letters, digits, ``.``, ``-`` and ``_`` as ``_``
    (``tracedoc-report.html`` when nothing is left)."""
    from tracedoc.render import kind_of

    source = report.directory if kind_of(report) == "ranks" else report.trace["path"]
    path = Path(str(source))
    name = path.name or path.resolve().name  # "." is the current folder
    stem = re.sub(r"[^A-Za-z0-9._-]", "_", _TRACE_SUFFIX.sub("", name)).lstrip(".")
    return Path((stem if re.search(r"[A-Za-z0-9]", stem) else "tracedoc-report") + ".html")
