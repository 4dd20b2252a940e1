"""Where ``tracedoc analyze`` writes its report: the chosen format, to a file or stdout."""

from __future__ import annotations

from pathlib import Path
from typing import Any, List, Optional

from tracedoc.cli.common import Color, Format, make_console, open_output
from tracedoc.errors import TracedocError


def skipped_codes(report: Any) -> List[str]:
    """The codes of the selected rules that were skipped, in every report ``report`` holds."""
    if hasattr(report, "traces"):  # unrelated traces: one report each
        return sorted({k.code for r in report.traces if r.report for k in r.report.skipped})
    if hasattr(report, "ranks"):
        return sorted({k.code for r in report.ranks if r.report for k in r.report.skipped})
    return [k.code for k in report.skipped]


def render_document(report: Any, format: Format) -> Optional[str]:
    """The whole output of a document format (json, markdown, github, sarif, html) as text;
    None for ``text``, which prints to a console. Rendered before any file is opened, so a
    failure (``--format html`` without plotly) leaves no half-written file."""
    from tracedoc.report.render import JsonRenderer, MarkdownRenderer

    multi = hasattr(report, "ranks")
    if format is Format.json:  # a Report or a MultiRankReport: both have to_dict()
        return JsonRenderer().render(report) + "\n"
    if format is Format.github:
        from tracedoc.report.github import GithubRenderer

        if not multi:
            return GithubRenderer().render(report)
        r = GithubRenderer()
        lines = [ln for rr in report.ranks if rr.report for ln in r.lines(rr.report, rr.path)]
        return "\n".join([*lines, multi_summary(report)]) + "\n"
    if format is Format.sarif:
        from tracedoc.report.sarif import SarifRenderer

        return SarifRenderer().render(report) + "\n"
    if format is Format.html:
        from tracedoc.report.html import HtmlRenderer

        return HtmlRenderer().render(report)  # no kernel charts without the loaded trace (see emit)
    if format is Format.markdown:
        if multi:
            from tracedoc.ranks import render_markdown

            return render_markdown(report)
        return MarkdownRenderer().render(report)
    return None


def emit(
    report: Any,
    format: Format,
    output: Optional[Path] = None,
    top: Optional[int] = None,
    quiet: bool = False,
    color: Color = Color.auto,
    trace: Any = None,
) -> None:
    """Render ``report`` (a Report or a multi-rank report) in ``format`` to ``output`` or stdout.

    ``trace``: the loaded Trace, for the HTML report's kernel charts.

    Raises:
        typer.Exit(2): ``output`` cannot be written (one-line message).
        TracedocError: a renderer cannot run (``--format html`` without plotly).
    """
    from tracedoc.report.render import ConsoleRenderer, summary_line

    if hasattr(report, "traces"):  # a folder of unrelated traces: one report each
        _emit_many_traces(report, format, output=output, quiet=quiet, color=color)
        return
    multi = hasattr(report, "ranks")
    if format is Format.html:
        from tracedoc.report.html import HtmlRenderer

        document: Optional[str] = HtmlRenderer().render(report, trace=trace)
    else:
        document = None if format is Format.text else render_document(report, format)
    with open_output(output) as (out, fh):
        if document is not None:
            out.write(document)
        elif quiet:
            if multi:
                text = multi_summary(report)
            else:
                con = make_console(color, file=fh)
                text = summary_line(report, con.width if con.is_terminal else None)
            out.write(text + "\n")
        elif multi:
            from tracedoc.ranks import render_text

            con = make_console(color, file=fh)
            render_text(report, con)
            con.print(f"\n{multi_summary(report)}", style="bold", highlight=False)
        else:
            ConsoleRenderer(make_console(color, file=fh), top=top).render(report)


def multi_summary(mr: Any) -> str:
    """The closing line of a multi-rank report."""
    from tracedoc.text import plural

    n_findings = sum(len(r.report.findings) for r in mr.ranks if r.report)
    n_err = sum(1 for r in mr.ranks if r.error)
    line = f"{plural(len(mr.ranks), 'trace')}: {plural(n_findings, 'finding')} in all"
    return line + (f"; {plural(n_err, 'trace')} could not be analyzed" if n_err else "")


def _emit_many_traces(
    report: Any, format: Format, output: Optional[Path] = None, quiet: bool = False, color: Color = Color.auto
) -> None:
    """Write a report per unrelated trace (:class:`tracedoc.ranks.summary.MultiTraceReport`).

    Raises:
        TracedocError: a format that describes one trace or one job (github, sarif, html).
    """
    from tracedoc.ranks.render import render_multi_markdown, render_multi_text
    from tracedoc.report.render import JsonRenderer
    from tracedoc.text import plural

    if format not in (Format.text, Format.json, Format.markdown):
        raise TracedocError(
            f"--format {format.value} describes one trace or the ranks of one job; "
            "for several unrelated traces use text, json or markdown"
        )
    with open_output(output) as (out, fh):
        if quiet:
            n = len(report.findings)
            out.write(f"{plural(len(report.traces), 'trace')}: {plural(n, 'finding')}\n")
        elif format is Format.json:
            out.write(JsonRenderer().render(report) + "\n")
        elif format is Format.markdown:
            out.write(render_multi_markdown(report))
        else:
            render_multi_text(report, make_console(color, file=fh))
