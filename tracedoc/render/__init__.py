"""The one door out: every output of every document, chosen in one registry.

:func:`render` takes a document and a format name and returns what that format writes. The
document's kind is its class attribute ``KIND``:

========== ==================================================== ==================================
kind       document                                             formats
========== ==================================================== ==================================
report     :class:`tracedoc.report.model.Report`                text, json, markdown, github,
                                                                sarif, html, summary, fragment,
                                                                figure
ranks      the ranks of one job (:mod:`tracedoc.report.ranks`)  text, json, markdown, github,
                                                                sarif, html, summary, fragment
traces     unrelated traces (:mod:`tracedoc.report.ranks`)      text, json, markdown, github,
                                                                sarif, summary, fragment
comparison ``tracedoc diff`` (:mod:`tracedoc.report.comparison`) text, json, markdown
fixloop    ``tracedoc fix-loop`` (:mod:`tracedoc.report.fixloop`)  text, json, markdown
========== ==================================================== ==================================

``text`` prints to a rich console and returns None; ``summary`` is the closing line;
``fragment`` is the HTML a notebook shows for a Report or the reports of several traces (no
plots); ``figure`` the step-time
breakdown as a plotly figure. Every other format returns the whole output as one string,
rendered before any file is opened, so a renderer that cannot run (``html`` without plotly)
leaves no half-written file.

Trace text (kernel, op, device, rank and file names, skip reasons) is escaped for the output
it goes to (:mod:`tracedoc.render.escape`): :func:`render` gives every renderer but the
structured ones (:data:`STRUCTURED`) the document with its strings all
:func:`~tracedoc.render.escape.visible` (no control, bidi or zero-width character, no line
break, no surrogate of a non-UTF-8 file name), and each renderer applies its output's escape
(terminal markup, Markdown, HTML, plotly, workflow commands, SARIF messages) where it writes
such a string. JSON and SARIF keep the document's strings as they are (their encoder escapes
them), but for lone surrogates, which JSON cannot hold (:func:`~tracedoc.render.escape.json_safe`).

Renderers read documents; they never compute signals and never import the layers that build
the documents (the analysis, the rank jobs, the comparison, the fix-loop), so the documents'
notebook hooks (``Report.print``, ``_repr_html_``) can call in here.
"""

from __future__ import annotations

from typing import Any, Callable

from tracedoc.errors import TracedocError

#: What each kind of document is called in an error message.
KINDS = {
    "report": "one trace",
    "ranks": "the ranks of one job",
    "traces": "several unrelated traces",
    "comparison": "a comparison",
    "fixloop": "a fix-loop summary",
}


# -- the renderers, one small adapter each: (document, **options) -> str | None ---------------


def _json(doc: Any, **_: Any) -> str:
    from tracedoc.render.escape import json_text

    return json_text(doc.to_dict()) + "\n"


def _report_text(doc: Any, console: Any, top: int | None = None, **_: Any) -> None:
    from tracedoc.render.report import ConsoleRenderer

    ConsoleRenderer(console, top=top).render(doc)


def _report_markdown(doc: Any, **_: Any) -> str:
    from tracedoc.render.report import MarkdownRenderer

    return MarkdownRenderer().render(doc)


def _report_github(doc: Any, **_: Any) -> str:
    from tracedoc.render.github import GithubRenderer

    return GithubRenderer().render(doc)


def _report_sarif(doc: Any, rules: list[Any] | None = None, **_: Any) -> str:
    from tracedoc.render.sarif import SarifRenderer

    return SarifRenderer().render([doc], rules) + "\n"


def _ranks_sarif(doc: Any, rules: list[Any] | None = None, **_: Any) -> str:
    from tracedoc.render.sarif import SarifRenderer

    failed = [(f.path, f.error or "could not be analyzed") for f in doc.failed]
    return SarifRenderer().render([r.report for r in doc.ranks if r.report], rules, failed=failed) + "\n"


def _report_html(doc: Any, **_: Any) -> str:
    from tracedoc.render.html import HtmlRenderer

    return HtmlRenderer().render(doc)


def _ranks_html(doc: Any, **_: Any) -> str:
    from tracedoc.render.html import HtmlRenderer

    return HtmlRenderer().render_ranks(doc)


def _report_summary(doc: Any, width: int | None = None, **_: Any) -> str:
    from tracedoc.render.report import summary_line

    return summary_line(doc, width) + "\n"


def _report_fragment(doc: Any, **_: Any) -> str:
    from tracedoc.render.html import findings_html

    return findings_html(doc)


def _many_fragment(doc: Any, **_: Any) -> str:
    from tracedoc.render.html import many_fragment

    return many_fragment(doc, RENDERERS[("summary", kind_of(doc))](doc))


def _report_figure(doc: Any, **_: Any) -> Any:
    from tracedoc.render.html import step_breakdown_figure

    return step_breakdown_figure(doc)


def _ranks_text(doc: Any, console: Any, **_: Any) -> None:
    from tracedoc.render.ranks import multi_summary, render_text

    render_text(doc, console)
    console.print(f"\n{multi_summary(doc)}", style="bold", highlight=False)


def _ranks_markdown(doc: Any, **_: Any) -> str:
    from tracedoc.render.ranks import render_markdown

    return render_markdown(doc)


def _ranks_github(doc: Any, **_: Any) -> str:
    from tracedoc.render.github import GithubRenderer
    from tracedoc.render.ranks import multi_summary

    r = GithubRenderer()
    lines = [ln for rr in doc.ranks if rr.report for ln in r.lines(rr.report, rr.path)]
    lines += [r.failure(f.path, f.error) for f in doc.failed]
    return "\n".join([*lines, multi_summary(doc)]) + "\n"


def _ranks_summary(doc: Any, **_: Any) -> str:
    from tracedoc.render.ranks import multi_summary

    return multi_summary(doc) + "\n"


def _traces_text(doc: Any, console: Any, **_: Any) -> None:
    from tracedoc.render.overview import overview_table
    from tracedoc.render.ranks import render_multi_text

    render_multi_text(doc, console)
    console.print()  # the overview last: what a terminal shows when the reports have scrolled by
    console.print(overview_table(doc, console.width))
    console.print(f"\n{_traces_summary(doc).rstrip()}", style="bold", highlight=False, markup=False)


def _traces_json(doc: Any, **_: Any) -> str:
    from tracedoc.render.escape import json_text
    from tracedoc.render.overview import overview_rows

    d = doc.to_dict()
    at = list(d).index("traces") + 1  # the derived overview right after the traces it sums up
    items = list(d.items())
    return json_text(dict([*items[:at], ("overview", overview_rows(doc)), *items[at:]])) + "\n"


def _traces_markdown(doc: Any, **_: Any) -> str:
    from tracedoc.render.overview import overview_markdown
    from tracedoc.render.ranks import render_multi_markdown

    return "\n".join(overview_markdown(doc)) + "\n" + render_multi_markdown(doc)


def _traces_github(doc: Any, **_: Any) -> str:
    from tracedoc.render.github import GithubRenderer

    r = GithubRenderer()
    lines = [ln for t in doc.traces for ln in r.lines(t.report, t.path, named=True)]
    lines += [r.failure(f.path, f.error) for f in doc.failed]
    return "\n".join([*lines, _traces_summary(doc).rstrip("\n")]) + "\n"


def _traces_sarif(doc: Any, rules: list[Any] | None = None, **_: Any) -> str:
    from tracedoc.render.sarif import SarifRenderer

    failed = [(f.path, f.error or "could not be analyzed") for f in doc.failed]
    return SarifRenderer().render([t.report for t in doc.traces], rules, failed=failed) + "\n"


def _traces_summary(doc: Any, **_: Any) -> str:
    from tracedoc.text import plural

    failed = f"; {plural(len(doc.failed), 'trace')} could not be analyzed" if doc.failed else ""
    return f"{plural(len(doc.traces), 'trace')}: {plural(len(doc.findings), 'finding')}{failed}\n"


def _comparison_text(doc: Any, console: Any, **_: Any) -> None:
    from tracedoc.render.comparison import TextDiffRenderer

    TextDiffRenderer(console).render(doc)


def _comparison_markdown(doc: Any, **_: Any) -> str:
    from tracedoc.render.comparison import MarkdownDiffRenderer

    return MarkdownDiffRenderer().render(doc)


def _fixloop_text(doc: Any, console: Any, **_: Any) -> None:
    from tracedoc.render.fixloop import render_notes, render_table

    console.print(render_table(doc, width=console.width))
    for note in render_notes(doc):
        console.print(f"  {note}", markup=False, highlight=False, soft_wrap=True)


def _fixloop_markdown(doc: Any, **_: Any) -> str:
    from tracedoc.render.fixloop import render_markdown

    return render_markdown(doc) + "\n"


#: (format, kind) -> renderer: the only place a format is chosen.
RENDERERS: dict[tuple[str, str], Callable[..., Any]] = {
    ("text", "report"): _report_text,
    ("json", "report"): _json,
    ("markdown", "report"): _report_markdown,
    ("github", "report"): _report_github,
    ("sarif", "report"): _report_sarif,
    ("html", "report"): _report_html,
    ("summary", "report"): _report_summary,
    ("fragment", "report"): _report_fragment,
    ("figure", "report"): _report_figure,
    ("text", "ranks"): _ranks_text,
    ("json", "ranks"): _json,
    ("markdown", "ranks"): _ranks_markdown,
    ("github", "ranks"): _ranks_github,
    ("sarif", "ranks"): _ranks_sarif,
    ("html", "ranks"): _ranks_html,
    ("summary", "ranks"): _ranks_summary,
    ("fragment", "ranks"): _many_fragment,
    ("text", "traces"): _traces_text,
    ("json", "traces"): _traces_json,
    ("markdown", "traces"): _traces_markdown,
    ("github", "traces"): _traces_github,
    ("sarif", "traces"): _traces_sarif,
    ("summary", "traces"): _traces_summary,
    ("fragment", "traces"): _many_fragment,
    ("text", "comparison"): _comparison_text,
    ("json", "comparison"): _json,
    ("markdown", "comparison"): _comparison_markdown,
    ("text", "fixloop"): _fixloop_text,
    ("json", "fixloop"): _json,
    ("markdown", "fixloop"): _fixloop_markdown,
}

#: Formats that are not output formats of the command line (``summary`` is ``--quiet``).
INTERNAL_FORMATS = ("summary", "fragment", "figure")

#: Structured formats: their renderers get the document as it is (their encoders escape; the
#: SARIF renderer escapes its messages itself). Every other renderer gets the document with its
#: strings all :func:`tracedoc.render.escape.visible` (:func:`tracedoc.render.escape.document`).
STRUCTURED = ("json", "sarif")


def kind_of(document: Any) -> str:
    """The document's kind (its class's ``KIND``).

    Raises:
        TypeError: not a tracedoc document.
    """
    kind = getattr(type(document), "KIND", None)
    if kind not in KINDS:
        raise TypeError(f"not a tracedoc document: {type(document).__name__}")
    return kind


def formats(kind: str) -> list[str]:
    """The command-line formats a kind of document has, in the registry's order."""
    return [f for f, k in RENDERERS if k == kind and f not in INTERNAL_FORMATS]


def render(document: Any, fmt: str, **options: Any) -> Any:
    """Render ``document`` in ``fmt``.

    Args:
        document: a document with a ``KIND`` (see the module docstring).
        fmt: a format name (the ``--format`` values, or ``summary``, ``fragment``, ``figure``).
        options: ``console`` (a rich Console for ``text``; default a new one on stdout),
            ``top`` (first N findings, ``text``), ``width`` (the terminal width, ``summary``),
            ``rules`` (the evaluated Rule objects, whose descriptions ``sarif`` carries).

    Returns:
        The whole output as a string; None for ``text`` (printed on ``console``); a plotly
        figure for ``figure``.

    Raises:
        TracedocError: the document has no such format (one line naming the ones it has), or
            the renderer cannot run (``html`` or ``figure`` without plotly).
        TypeError: not a tracedoc document.
    """
    kind = kind_of(document)
    fn = RENDERERS.get((fmt, kind))
    if fn is None:
        raise TracedocError(f"--format {fmt} is not available for {KINDS[kind]} (use {', '.join(formats(kind))})")
    if fmt == "text" and options.get("console") is None:
        from rich.console import Console

        options["console"] = Console(highlight=False)
    if fmt not in STRUCTURED:
        from tracedoc.render.escape import document as escaped

        document = escaped(document)
    return fn(document, **options)
