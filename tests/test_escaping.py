"""Trace text reaching people and machines (issue 21): every string a trace or a path brings
in is escaped for the output it reaches (tracedoc/render/escape.py).

hypothesis builds traces whose kernel, op and device names, and whose file name, come from
hostile character classes: C0 and C1 controls, escape sequences (OSC titles and links, clear
screen, conceal, cursor moves), the bidi embeddings, overrides and isolates (U+202A-U+202E,
U+2066-U+2069), zero-width characters (U+200B-U+200D, U+FEFF), line breaks, Markdown
(backticks, ``<!--``, links, images, headings), workflow commands (``::error::``,
``::stop-commands::``, ``%``), plotly markup (``<a href>``, ``<span style>``) and bytes that are
not UTF-8 in the file name. Every format of every document is rendered and checked:

* text, Markdown, GitHub, HTML, summary: no raw control, format (bidi, zero-width),
  line-separator or surrogate character (the terminal's own colour codes aside);
* GitHub: every line that starts with ``::`` is one of tracedoc's annotations;
* Markdown (parsed by markdown-it, CommonMark with GFM tables): no link, image, raw HTML,
  comment, strikethrough or emphasis, no heading, quote, nested list or code block but those
  tracedoc writes;
* HTML: only the tags and attributes tracedoc and plotly write, no comment; every plotly
  label, legend name, category and hover text free of ``<`` and ``>``;
* JSON and SARIF: valid JSON (a non-UTF-8 file name does not stop the report), the names kept
  as data in JSON, SARIF messages with no live embedded link.

Each check is also run on unescaped text (``test_the_checks_catch_raw_trace_text``), so a check
that could not fail would show. Every name carries a marker (``MARKO``, ``MARKD`` ...) and the
tests assert it reaches the output where that name is shown, so the checks look at real
trace text, not at an output that left it out.
"""

from __future__ import annotations

import io
import json
import os
import re
import subprocess
import sys
import tempfile
import unicodedata
from html.parser import HTMLParser
from pathlib import Path

import pytest
import typer
from helpers import terminal_console
from hypothesis import HealthCheck, Phase, given, settings
from hypothesis import strategies as st
from markdown_it import MarkdownIt
from tracebuilder import TraceBuilder

import tracedoc
from tracedoc.render import RENDERERS, escape, formats, render
from tracedoc.render.html import HtmlRenderer
from tracedoc.report.comparison import DiffResult, Row, StepTime
from tracedoc.report.fixloop import FixLoopSummary
from tracedoc.report.ranks import MultiRankReport, MultiTraceReport, RankEntry

#: Failing examples are reported as generated: shrinking a rendered report takes minutes.
NO_SHRINK = (Phase.explicit, Phase.reuse, Phase.generate)

# -- hostile text ------------------------------------------------------------------------------

PIECES = [
    "\x1b]0;pwned\x07",  # OSC: set the terminal title
    "\x1b]8;;https://evil.example/\x1b\\click\x1b]8;;\x1b\\",  # OSC 8 hyperlink
    "\x1b[2J\x1b[H",  # clear screen, cursor home
    "\x1b[8m",  # conceal
    "\x1b[1A\x1b[2K",  # cursor up, erase line
    "\r",
    "\n",
    "\r\n",
    "\t",
    "\x9b31m",  # C1 CSI
    "\x85",  # C1 next line
    "\x00\x07\x08\x7f",
    "\u202a\u202b\u202c\u202d\u202e",  # bidi embeddings and overrides
    "\u2066\u2067\u2068\u2069",  # bidi isolates
    "\u200b\u200c\u200d\ufeff",  # zero width, byte order mark
    "\u2028\u2029",
    "`",
    "``",
    "<!--",
    "[x](https://evil.example/)",
    "![x](https://evil.example/pixel.png)",
    "\n# Heading",
    "\n> quote",
    "\n- item",
    "\n```\n",
    "*em* _em_ ~~s~~",
    "<b>b</b>",
    "<img src=x onerror=alert(1)>",
    "<script>alert(1)</script>",
    "\n::error file=a.py,line=1::fake finding\n",
    "\n::stop-commands::tok\n",
    "::warning::x",
    "%0A::error::y",
    "%",
    ":,",
    '<a href="https://evil.example/">link</a>',
    '<span style="font-size:99px">big</span>',
    "<br>",
    "&lt;b&gt;",
    "[bold red]",
    "[link=https://evil.example/]x[/link]",
    "|",
    "\\",
    "\\[x\\](y)",
    "https://evil.example/",
    "www.evil.example",
    "@someone",
    "#1",
    "No findings",
]

#: Single characters of the hostile Unicode classes (controls, format characters, separators).
HOSTILE_CHARS = st.characters(categories=("Cc", "Cf", "Zl", "Zp", "Zs"))


def hostile(marker: str) -> st.SearchStrategy[str]:
    """A name: hostile pieces and characters around a marker that tells where it shows."""
    piece = st.one_of(st.sampled_from(PIECES), st.text(HOSTILE_CHARS, min_size=1, max_size=3))
    side = st.lists(piece, min_size=0, max_size=3).map("".join)
    return st.tuples(side, side).map(lambda lr: f"{lr[0]}{marker}{lr[1]}")


FILE_PIECES = [
    b"\x1b]0;pwned\x07",
    b"\x1b[2J",
    b"\n",
    b"\r",
    b"\t",
    b"\xff",
    b"\xfe\x80",
    b"\x9b",  # not UTF-8 alone
    "\u202e".encode(),
    "\u200b".encode(),
    b"\xc2\x9b",  # C1 CSI, as UTF-8
    b"::error::x",
    b"%0A",
    b"`",
    b"<!--",
    b"[x](y)",
    b"# ",
    b"<a href='y'>",
    b" ",
    b"|",
    b",",
    b":",
]


def hostile_file_name() -> st.SearchStrategy[bytes]:
    side = st.lists(st.sampled_from(FILE_PIECES), min_size=0, max_size=4).map(b"".join)
    return st.tuples(side, side).map(lambda lr: lr[0] + b"MARKF" + lr[1] + b".json")


# -- the checks --------------------------------------------------------------------------------

_SGR = re.compile(r"\x1b\[[0-9;]*m")


def raw_controls(text: str) -> list[str]:
    """Characters no output may carry raw: controls but the newline between lines, format
    (bidi, zero-width), line and paragraph separators, spaces other than U+0020, surrogates,
    private use and unassigned code points."""
    bad = []
    for ch in text:
        if ch == "\n":
            continue
        cat = unicodedata.category(ch)
        if cat in ("Cc", "Cf", "Cs", "Co", "Cn", "Zl", "Zp") or (cat == "Zs" and ch != " "):
            bad.append(ch)
    return bad


def check_printable(text: str, what: str) -> None:
    bad = raw_controls(text)
    assert not bad, f"{what}: raw {sorted(set(map(ascii, bad)))}"


ANNOTATION = re.compile(r"::(error|warning|notice) file=[^:,\n]*,title=[^:,\n]*::[^\n]*")


def check_github(text: str) -> None:
    """Every line that starts with ``::`` (leading blanks aside) is a tracedoc annotation."""
    check_printable(text, "github")
    for ln in text.split("\n"):
        if ln.lstrip().startswith("::"):
            assert ANNOTATION.fullmatch(ln), f"not tracedoc's annotation: {ln!r}"


_MD = MarkdownIt("commonmark").enable(["table", "strikethrough"])

#: How tracedoc's own Markdown headings begin (every renderer's).
HEADINGS = (
    "tracedoc report",
    "tracedoc multi-rank report",
    "tracedoc diff",
    "tracedoc fix-loop",
    "Step-time breakdown",
    "Findings",
    "Also true",
    "Skipped rules",
    "Cross-rank summary",
    "GPU idle ledger",
    "Resolved findings",
    "New findings",
    "Changed findings",
    "Warnings",
    "Decisions",
    "Failed trials",
    "Not applicable",
    "Fixes not tried",
    "Keep rule",
    "Final configuration",
)
FORBIDDEN_MD = {"link_open", "image", "html_inline", "html_block", "s_open", "em_open", "code_block", "lheading"}


def md_tokens(text: str) -> list:
    out = []
    for tok in _MD.parse(text):
        out.append(tok)
        out += tok.children or []
    return out


def check_markdown(text: str) -> str:
    """The Markdown checks; returns the text a reader sees (for the markers)."""
    check_printable(text, "markdown")
    toks = md_tokens(text)
    bad = [t.type for t in toks if t.type in FORBIDDEN_MD]
    assert not bad, f"markdown from names: {bad}"
    depth, seen = 0, []
    for i, t in enumerate(toks):
        if t.type == "heading_open":
            inline = toks[i + 1]
            assert inline.type == "inline" and re.match(r"\d+\. |" + "|".join(HEADINGS), inline.content), inline.content
        depth += {"bullet_list_open": 1, "ordered_list_open": 1, "bullet_list_close": -1}.get(t.type, 0)
        depth -= t.type == "ordered_list_close"
        assert depth <= 1, "a nested list"
        assert t.type != "ordered_list_open", "an ordered list"
        if t.type == "fence":
            assert t.info == "json", t.info  # the fix-loop's final configuration, whole:
            json.loads(t.content)  # no name closed the fence
        if t.type == "blockquote_open":
            assert toks[i + 2].content.startswith("**Note:**"), toks[i + 2].content
        if t.type in ("text", "code_inline"):
            seen.append(t.content)
    return " ".join(seen)


PAGE_TAGS = {"html", "head", "meta", "title", "style", "script", "body", "h1", "h2", "h3", "p", "code"}
PAGE_TAGS |= {"span", "section", "table", "thead", "tbody", "tr", "th", "td", "b", "ul", "li", "div"}
PAGE_ATTRS = {"class", "id", "lang", "charset", "name", "content", "type"}


class _Page(HTMLParser):
    def __init__(self) -> None:
        super().__init__(convert_charrefs=True)
        self.tags: list[tuple[str, dict]] = []
        self.comments: list[str] = []
        self.text: list[str] = []
        self._in = ""

    def handle_starttag(self, tag, attrs):
        self.tags.append((tag, dict(attrs)))
        self._in = tag

    def handle_endtag(self, tag):
        self._in = ""

    def handle_comment(self, data):
        self.comments.append(data)

    def handle_data(self, data):
        if self._in not in ("script", "style"):
            self.text.append(data)


def check_html(text: str) -> str:
    """Only tracedoc's and plotly's tags and attributes, no comment; returns the page's text.
    The scripts (plotly.js, and each figure's JSON, which :func:`check_figures` reads) are
    left out of the printable check."""
    outside = re.sub(r"(?s)<script\b[^>]*>.*?</script>", "", text)
    check_printable(outside, "html")
    assert "<!--" not in outside, "a comment"
    page = _Page()
    page.feed(text)
    page.close()
    assert not page.comments, page.comments
    n_divs = 0
    for tag, attrs in page.tags:
        assert tag in PAGE_TAGS, f"a <{tag}> from names"
        n_divs += tag == "div" and attrs.get("class") == "plotly-graph-div"
        sizing = tag == "div" and re.fullmatch(r"height:[\d.]+(px|%); width:[\d.]+(px|%);", attrs.get("style") or "")
        extra = set(attrs) - PAGE_ATTRS - ({"style"} if sizing else set())  # plotly sizes its divs
        assert not extra, f"<{tag}> with {extra}"
    scripts = sum(tag == "script" for tag, _ in page.tags)
    assert scripts in (0, n_divs + 1), f"{scripts} scripts for {n_divs} plots"
    return " ".join(page.text)


def check_figures(figures: list) -> str:
    """Every string plotly draws (names, categories, hover text) free of tags; returns them."""
    shown = []
    for fig in figures:
        for trace in fig.data:
            for attr in ("x", "y", "name", "hovertext", "text"):
                v = getattr(trace, attr, None)
                for s in [v] if isinstance(v, str) else list(v) if v is not None else []:
                    if isinstance(s, str):
                        check_printable(s, f"plotly {attr}")
                        assert "<" not in s and ">" not in s, f"plotly {attr}: {s!r}"
                        shown.append(s)
    return " ".join(shown)


_SARIF_LINK = re.compile(r"(?<!\\)\[(?:[^\]\\]|\\.)*\]\(")


def check_sarif(text: str) -> str:
    log = json.loads(text)
    messages = []
    for run in log["runs"]:
        for r in run["results"]:
            messages.append(r["message"]["text"])
        for inv in run["invocations"]:
            messages += [n["message"]["text"] for n in inv["toolExecutionNotifications"]]
        for a in run["artifacts"]:
            uri = a["location"]["uri"]
            assert uri.isascii() and not raw_controls(uri) and " " not in uri, uri
    for m in messages:
        check_printable(m, "sarif message")
        assert not _SARIF_LINK.search(m), f"an embedded link: {m!r}"
    return " ".join(messages)


def terminal(doc, fmt: str = "text", width: int = 100, colour: bool = False) -> str:
    console, buf = terminal_console(width, colour)
    render(doc, fmt, console=console)
    return buf.getvalue()


def check_terminal(doc) -> str:
    """The terminal checks at 100 columns, with and without colour; returns the report at 1,000
    columns (where no name is shortened, for the markers)."""
    check_printable(terminal(doc), "text")
    check_printable(_SGR.sub("", terminal(doc, colour=True)), "text (colour)")
    wide = terminal(doc, width=1000)
    check_printable(wide, "text (wide)")
    return wide


def rendered(doc) -> dict[str, str]:
    """Every command-line format of ``doc`` (and the summary line, the notebook fragment),
    each checked; returns the text each one shows a reader."""
    shown = {}
    for fmt in formats(type(doc).KIND):
        if fmt == "text":
            shown[fmt] = check_terminal(doc)
            continue
        out = render(doc, fmt)
        if fmt == "json":
            json.loads(out)
            shown[fmt] = out
        elif fmt == "markdown":
            shown[fmt] = check_markdown(out)
        elif fmt == "github":
            check_github(out)
            shown[fmt] = out
        elif fmt == "sarif":
            shown[fmt] = check_sarif(out)
        elif fmt == "html":
            shown[fmt] = check_html(out)
    if type(doc).KIND == "report":
        shown["fragment"] = check_html(render(doc, "fragment"))
    if ("summary", type(doc).KIND) in RENDERERS:
        line = render(doc, "summary")
        check_printable(line, "summary")
        assert line.count("\n") == 1
    return shown


# -- the trace ---------------------------------------------------------------------------------


def launch_bound(kernel: str, op: str, device: str) -> TraceBuilder:
    """Four steps of 30 tiny kernels, each launched from its own op: launch-bound-gpu-idle
    fires, and its evidence names the ops; the kernels are the report's top kernels."""
    dev = {"id": 0, "name": device, "totalGlobalMem": 34089730048, "computeMajor": 7, "computeMinor": 0}
    b = TraceBuilder(devices=[dev | {"numSms": 80}])
    for i in range(4):
        t0 = i * 1000
        b.step(i + 1, t0, 1000)
        for j in range(30):
            ts = t0 + 10 + j * 32
            b.op(f"{op}{j % 3}", ts, 28)
            b.kernel(f"{kernel}{j % 2}", ts + 2, ts + 24, 6, launch_dur=20)
    return b


def analyzed(tmp: Path, file_name: bytes, kernel: str, op: str, device: str):
    path = os.fsdecode(os.path.join(os.fsencode(str(tmp)), file_name))
    launch_bound(kernel, op, device).write(Path(path))
    return tracedoc.analyze(path)


@settings(
    max_examples=8,
    deadline=None,
    derandomize=True,
    phases=NO_SHRINK,
    suppress_health_check=[HealthCheck.too_slow],
)
@given(hostile_file_name(), hostile("MARKK"), hostile("MARKO"), hostile("MARKD"))
def test_every_format_of_a_hostile_trace_escapes_its_names(file_name, kernel, op, device):
    with tempfile.TemporaryDirectory() as tmp:
        seen: list = []
        original = HtmlRenderer._fig_html
        HtmlRenderer._fig_html = lambda self, fig, div_id: seen.append(fig) or original(self, fig, div_id)
        try:
            report = analyzed(Path(tmp), file_name, kernel, op, device)
            assert [f.code for f in report.findings] == ["TD201"]  # the ops are in its evidence
            shown = rendered(report)
            plotted = check_figures(seen)
        finally:
            HtmlRenderer._fig_html = original
    # the names reached every output that shows them (so the checks read real trace text)
    for fmt in ("text", "markdown", "github", "sarif", "html", "json"):
        assert "MARKF" in shown[fmt], fmt
    for fmt in ("text", "markdown", "html"):
        assert "MARKD" in shown[fmt] and "MARKO" in shown[fmt], fmt
    assert "MARKK" in plotted
    # JSON keeps the data as it is (only a lone surrogate of the file name is written as text)
    data = json.loads(render(report, "json"))
    assert data["trace"]["device"]["name"] == device
    assert data["trace"]["path"] == escape.json_safe(report.trace["path"])


@settings(
    max_examples=4,
    deadline=None,
    derandomize=True,
    phases=NO_SHRINK,
    suppress_health_check=[HealthCheck.too_slow],
)
@given(hostile_file_name(), hostile_file_name(), hostile("MARKO"), hostile("MARKR"))
def test_the_ranks_and_traces_documents_escape_paths_labels_and_errors(name0, name1, op, reason):
    with tempfile.TemporaryDirectory() as tmp:
        rep = analyzed(Path(tmp), name0, "k", op, "GPU")
        entries = [
            RankEntry(path=rep.trace["path"], rank=0, report=rep),
            RankEntry(path=os.fsdecode(name1), report=rep),
        ]
        summary = {
            "n_ranks": 2,
            "median_step_time_ms": 1.0,
            "slowest_rank": Path(os.fsdecode(name1)).name,
            "slowest_step_time_ms": 1.0,
            "slowest_lag_ms": 0.0,
            "slowest_lag_pct": 0.0,
            "findings": [
                {
                    "code": "TD201",
                    "name": "launch-bound-gpu-idle",
                    "severity": "warning",
                    "ranks": ["rank 0", Path(os.fsdecode(name1)).name],
                    "n_ranks": 2,
                    "scope": "most",
                }
            ],
        }
        failed = [RankEntry(path=os.fsdecode(name1), error=reason)]
        skipped = [(os.fsdecode(name1), reason)]
        mr = MultiRankReport(os.fsdecode(name0), entries, summary, failed=failed, skipped=skipped, followed=[reason])
        mt = MultiTraceReport([os.fsdecode(name0)], entries, failed=failed, skipped=skipped, followed=[reason])
        for doc in (mr, mt):
            shown = rendered(doc)
            for fmt in ("text", "markdown"):
                assert "MARKF" in shown[fmt] and "MARKR" in shown[fmt], (type(doc).__name__, fmt)


def diff_document(name: str, device: str, cause: str) -> DiffResult:
    side = {"path": name, "kind": "trace", "device": device, "step_count": 3}
    finding = {"code": "TD201", "name": cause, "severity": "warning", "estimated_saving_ms": 1.0, "message": cause}
    resolved = {
        "code": "TD101",
        "name": cause,
        "severity": "error",
        "status": "resolved",
        "slice": cause,
        "predicted_saving_ms": 5.0,
        "predicted_low_ms": 4.0,
        "predicted_slice_ms": 5.5,
        "measured_saving_ms": 4.5,
        "measured_saving_median_ms": 4.4,
        "measured_slice_saving_ms": 4.0,
        "ratio": 1.1,
        "ratio_median": 1.1,
        "ratio_slice": 1.2,
        "offset_ms": 1.0,
        "offset_by": [{"name": cause, "change_ms": 1.0}],
    }
    changed = {
        "code": "TD301",
        "name": cause,
        "severity_before": "info",
        "severity_after": "warning",
        "saving_before_ms": 1.0,
        "saving_after_ms": 2.0,
        "message_after": cause,
    }
    outlier = {"step": 2, "step_time_ms": 9.0, "excess_ms": 4.0, "top_category": cause, "top_category_excess_ms": 3.0}
    return DiffResult(
        before=side,
        after=side | {"path": name + "2"},
        step_time=StepTime.measured(10.0, 8.0, 10.0, 8.0, 0.1),
        breakdown=[Row.measured(cause, 1.0, 2.0)],
        idle_ledger={device: [Row.measured(cause, 1.0, 0.5)]},
        resolved=[resolved],
        new=[finding],
        changed=[changed],
        persisting=[changed],
        outlier_steps={"before": [outlier], "after": []},
    )


def fixloop_document(workload: str, device: str, text: str) -> FixLoopSummary:
    base = {"index": 0, "change": "baseline", "status": "baseline", "step_time_ms": 10.0, "samples_per_s": 5.0}
    trial = {"index": 1, "change": f"{text}: 0 -> 4", "status": "crashed", "error": text}
    trial["decision"] = {"reason": "median ratio 1.479 over 5 A/B rounds"}  # the loop's own figures
    return FixLoopSummary(
        version="0",
        workload=workload,
        out_dir=workload,
        device={"type": "cpu", "name": device, "torch": text},
        options={"min_gain": 0.02, "ab_rounds": 5, "max_rounds": 9},
        noise_rule="keep rule",
        baseline=None,
        final={"samples_per_s": 5.0, "speedup": 1.0, "trial": 0, "changes": [text], "config": {text: text}},
        trials=[base | {"speedup": 1.0}, trial],
        not_applicable=[{"knob": text, "reason": text}],
        skipped=[{"code": "TD101", "name": text, "knob": text, "reason": text}],
        warnings=[text],
        stop_reason=text,
    )


@settings(max_examples=40, deadline=None, derandomize=True, phases=NO_SHRINK)
@given(hostile("MARKF"), hostile("MARKD"), hostile("MARKC"))
def test_the_comparison_and_fix_loop_documents_escape_their_inputs(name, device, cause):
    shown = rendered(diff_document(name, device, cause))
    assert all("MARKF" in shown[f] and "MARKC" in shown[f] for f in ("text", "markdown"))
    assert "MARKD" in shown["markdown"]
    shown = rendered(fixloop_document(name.replace("/", "_"), device, cause))  # the file name shows
    assert all("MARKF" in shown[f] and "MARKC" in shown[f] for f in ("text", "markdown"))
    assert "MARKD" in shown["markdown"]


# -- each output's function on its own ---------------------------------------------------------


@settings(max_examples=300, deadline=None, derandomize=True, phases=NO_SHRINK)
@given(hostile("MARK"))
def test_each_escape_function_holds_its_output_kind(text):
    for fn in (escape.visible, escape.terminal, escape.markdown, escape.html, escape.plotly, escape.sarif_text):
        check_printable(fn(text), fn.__name__)
        assert "\n" not in fn(text) and "MARK" in fn(text)
    assert escape.visible(escape.visible(text)) == escape.visible(text)  # the registry may apply it twice
    # Markdown: a paragraph, a list item and a code span show the text and nothing else
    for md in (escape.markdown(text), f"- {escape.markdown(text, line_start=True)}", f"x {escape.code_span(text)} y"):
        check_markdown(md)
    assert check_markdown(escape.code_span(text)) == escape.visible(text)
    assert "MARK" in check_html(f"<p>{escape.html(text)}</p>")
    line = escape.workflow_data(escape.visible(text))
    prop = escape.workflow_property(escape.visible(text))
    check_github(f"::error file={prop},title={prop}::{line}")


def test_visible_names_what_it_escapes():
    assert escape.visible("a\x1b]0;t\x07b") == "a\\x1b]0;t\\x07b"
    assert escape.visible("x\u202ey\u200bz\ufeff") == "x\\u202ey\\u200bz\\ufeff"
    assert escape.visible("l1\nl2\r\t\x85\x9b") == "l1\\nl2\\r\\t\\x85\\x9b"
    assert escape.visible(os.fsdecode(b"a\xffb")) == "a\\udcffb"
    assert escape.visible("cudnn::conv<float, 4>(x) é … ✓") == "cudnn::conv<float, 4>(x) é … ✓"  # as it is


def test_markdown_escapes_keep_ordinary_text_and_break_every_construct():
    assert escape.markdown("Tesla V100-DGXS-32GB (31.74 GiB)") == "Tesla V100-DGXS-32GB (31.74 GiB)"
    assert escape.markdown("needs dataloader_ms") == "needs dataloader_ms"  # intraword: no emphasis
    assert escape.markdown("[x](y) ![i](p) <!-- <b>") == "\\[x\\](y) !\\[i\\](p) \\<!-- \\<b>"
    assert (
        escape.markdown("# h", line_start=True) == "\\# h"
        and escape.markdown("- i", line_start=True) == "\\- i"
        and escape.markdown("12. n", line_start=True) == "12\\. n"
    )
    assert escape.markdown("2.5.1 - x") == "2.5.1 - x"  # mid-line: nothing to open
    assert escape.markdown("see https://e.x and www.e.x, #12 @me") == "see https\\://e.x and www\\.e.x, \\#12 \\@me"
    assert escape.code_span("a`b") == "``a`b``" and escape.code_span("`x") == "`` `x ``"
    assert escape.code_span("plain") == "`plain`"


def test_plotly_and_html_text_show_tags_as_text():
    assert escape.plotly('<a href="x">l</a> & <br>') == '&lt;a href="x"&gt;l&lt;/a&gt; &amp; &lt;br&gt;'
    assert escape.html('<img src=x onerror="y">') == "&lt;img src=x onerror=&quot;y&quot;&gt;"


def test_github_workflow_command_encoding_is_githubs():
    assert escape.workflow_data("50%\r\n") == "50%25%0D%0A"
    assert escape.workflow_property("a:b,c%") == "a%3Ab%2Cc%25"


def test_the_checks_catch_raw_trace_text():
    """Each check fails on what the escaping prevents, so passing means something."""
    for raw in ("a\x1bb", "a\u202eb", "a\u200bb", "a\x9bb", os.fsdecode(b"\xff")):
        with pytest.raises(AssertionError):
            check_printable(raw, "raw")
    with pytest.raises(AssertionError):
        check_github("::error file=x,title=y::m\n::stop-commands::tok\n")
    for md in ("- [x](https://e)", "x ![i](p)", "- <!-- b", "t\n# injected", "- a\n  - nested", "*x*", "a <b>"):
        with pytest.raises(AssertionError):
            check_markdown(md)
    for page in ('<p><a href="x">l</a></p>', "<p><!-- c</p>", '<p onclick="x">t</p>'):
        with pytest.raises(AssertionError):
            check_html(page)
    with pytest.raises(AssertionError):
        check_sarif(
            json.dumps({"runs": [{"results": [{"message": {"text": "[x](1)"}}], "invocations": [], "artifacts": []}]})
        )


def test_the_registry_escapes_a_copy_and_keeps_json_data(tmp_path):
    rep = analyzed(tmp_path, b"t.json", "k", "op\x1b[2J", "GPU\u202e")
    before = rep.to_dict()
    assert "\\x1b[2J" in render(rep, "markdown") and "\x1b" not in render(rep, "markdown")
    assert rep.to_dict() == before  # the document itself is not changed
    plain = diff_document("a.json", "cuda:0", "kernel")
    assert escape.document(plain) is plain  # ordinary names: nothing to copy
    assert "op\\u001b[2J" in render(rep, "json")  # JSON escapes it as data


# -- a non-UTF-8 file name, end to end ---------------------------------------------------------


def test_a_non_utf8_file_name_never_stops_the_report(tmp_path):
    """Through the command line, every format of a trace named with bytes that are not UTF-8,
    an escape sequence and a line break: written (exit 0 or 1, no error line), one header
    line, and the controls shown as escapes."""
    name = os.path.join(os.fsencode(str(tmp_path)), b"bad\xff\x1b]0;t\x07\nname.json")
    launch_bound("k", "op", "GPU").write(Path(os.fsdecode(name)))
    for fmt in ("text", "json", "markdown", "github", "sarif", "html"):
        r = subprocess.run(
            [sys.executable, "-m", "tracedoc", "analyze", name, "--format", fmt],
            capture_output=True,
            timeout=300,
            env=os.environ | {"COLUMNS": "1000"},  # the header line whole
        )
        out = r.stdout.decode("utf-8")  # valid UTF-8
        assert r.returncode in (0, 1) and r.stderr == b"", (fmt, r.stderr)
        check_html(out) if fmt == "html" else check_printable(out, fmt)
        shown = "bad\\udcff\\x1b]0;t\\x07\\nname.json"
        if fmt == "json":  # the data, its one surrogate as text
            assert json.loads(out)["trace"]["path"].endswith("bad\\udcff\x1b]0;t\x07\nname.json")
        elif fmt == "sarif":  # the URI has the file's bytes
            run = json.loads(out)["runs"][0]
            assert run["artifacts"][0]["location"]["uri"].endswith("bad%FF%1B%5D0%3Bt%07%0Aname.json")
            notes = run["invocations"][0]["toolExecutionNotifications"]
            assert escape.sarif_text(shown) in notes[0]["message"]["text"]
        else:
            assert shown in out.replace("\\\\", "\\"), fmt


# -- stderr ------------------------------------------------------------------------------------


@settings(max_examples=60, deadline=None, derandomize=True, phases=NO_SHRINK)
@given(hostile("MARK"))
def test_error_lines_are_one_printable_line(text):
    from tracedoc.cli.common import err_console, fail, funnel
    from tracedoc.errors import TracedocError

    buf = io.StringIO()
    old = err_console._file  # None: the console follows sys.stderr (CliRunner swaps it); keep that
    err_console.file = buf
    try:
        assert isinstance(fail(text), typer.Exit)
        for exc in (TracedocError(text), ValueError(text)):
            with pytest.raises(typer.Exit), funnel(text, "read", "reading"):
                raise exc
        err_console.print(f"tracedoc: error: {text}", soft_wrap=True)  # the usage/internal-error line
    finally:
        err_console._file = old
    lines = buf.getvalue().split("\n")
    assert lines[-1] == "" and len(lines) == 5, lines
    for ln in lines:
        check_printable(ln, "stderr")
    assert all("MARK" in ln for ln in lines[:-1])


def test_an_output_path_with_a_line_break_is_a_one_line_error(tmp_path):
    bad = tmp_path / "no such dir" / "out\n\x1b[2Jput.md"
    r = subprocess.run(
        [sys.executable, "-m", "tracedoc", "analyze", str(launch_bound("k", "op", "G").write(tmp_path / "t.json"))]
        + ["--format", "markdown", "-o", str(bad)],
        capture_output=True,
        text=True,
        timeout=300,
    )
    assert r.returncode == 2 and r.stderr.count("\n") == 1, r.stderr
    assert "out\\n\\x1b[2Jput.md: cannot write" in r.stderr
    check_printable(r.stderr, "stderr")
