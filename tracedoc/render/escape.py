"""Trace text reaching people and machines: one escaping function per output kind.

Kernel, op, device, rank and file names, and the skip reasons and notes built from them, are
written by whoever made the trace. Before any of it is written, it passes through the function
of the output it goes to:

================== ================================== ==========================================
output             function                           what it neutralises
================== ================================== ==========================================
every output       :func:`visible`                    control, format, bidi and zero-width
                                                      characters, line breaks, the surrogates of
                                                      a non-UTF-8 file name
terminal (rich)    :func:`terminal`, :func:`markup`   escape sequences (OSC titles and links,
                                                      clear screen, cursor moves, C1 controls);
                                                      rich markup tags (``[bold]``)
Markdown           :func:`markdown`, :func:`code_span` links, images, headings, lists, raw HTML,
                                                      comments, emphasis, autolinks, code spans
HTML               :func:`html`                       tags, attributes, entities
plotly text        :func:`plotly`                     plotly's own tags (``<a href>``, ``<br>``,
                                                      ``<span style>``) and entities
GitHub Actions log :func:`workflow_data`,             workflow commands (``::error::``,
                   :func:`workflow_property`          ``::stop-commands::``) and their fields
SARIF message      :func:`sarif_text`                 SARIF's embedded links (``[text](1)``)
JSON               :func:`json_safe`                  only what JSON cannot hold: lone surrogates
================== ================================== ==========================================

**Visible** (:func:`visible`, the first step of every other function): a character of Unicode
general category Cc (C0 controls, DEL, the C1 controls U+0080-U+009F), Cf (format characters:
the bidi embeddings and overrides U+202A-U+202E, the isolates U+2066-U+2069, the marks
U+200E/U+200F/U+061C, the zero-width U+200B-U+200D and U+2060, the byte order mark U+FEFF),
Cs (the surrogates U+DC80-U+DCFF that Python's ``surrogateescape`` gives the bytes of a file name
that are not valid UTF-8), Co and Cn (private use, unassigned), Zl/Zp (U+2028, U+2029) or a
space other than U+0020 is written as a Python escape (``\\n``, ``\\r``, ``\\t``, ``\\x1b``,
``\\u202e``, ``\\udcff``), which is printable ASCII. That is :func:`tracedoc.errors.display_path`
(``str.isprintable`` is False for exactly those categories), the one definition shared with the
one-line error messages. A string of printable characters is returned as it is, so a report
of ordinary names is byte for byte what it was.

Sources: the Unicode Standard, chapter 4.5 (general categories) and UAX #9 (the bidirectional
algorithm: explicit embeddings, overrides and isolates); ECMA-48 (C0/C1 control functions, the
ESC and CSI/OSC sequences terminals act on); CommonMark 0.31 (https://spec.commonmark.org/0.31.2/:
2.4 backslash escapes, 4.2 ATX headings, 4.6 HTML blocks, 5.2/5.3 list items, 6.1 code spans,
6.2 emphasis, 6.3 links, 6.4 images, 6.5 autolinks, 6.6 raw HTML) and the GitHub Flavored
Markdown spec (https://github.github.com/gfm/: 4.10 tables, 6.9 extended autolinks);
GitHub Actions, "Workflow commands for GitHub Actions" and the ``@actions/core`` toolkit's
``command.ts`` (``escapeData``: ``%`` ``\\r`` ``\\n``; ``escapeProperty``: also ``:`` and ``,``);
the HTML Living Standard (13.1.2 elements, 13.1.4 character references) through
:func:`html.escape`; plotly.js ``svg_text_utils`` (the pseudo-HTML tags ``<br> <b> <i> <sub>
<sup> <span style> <a href>`` and the entities it decodes); SARIF 2.1.0 3.11.6 (embedded
links in plain-text messages, literal brackets escaped with a backslash).

:func:`document` applies :func:`visible` to every string of a document (the parts it changes
are copied; the document itself is never changed). :func:`tracedoc.render.render` does so for every format but the structured
ones (``json``, ``sarif``), so no renderer can pass a raw control character on; the renderers
then apply their output's function where they write a trace-derived string.
"""

from __future__ import annotations

import dataclasses
import html as _html
import re
from typing import Any

from rich.console import Console
from rich.markup import escape as _rich_escape

from tracedoc.errors import display_path, one_line

__all__ = [
    "code_span",
    "document",
    "html",
    "json_safe",
    "json_text",
    "markdown",
    "markup",
    "plotly",
    "sarif_text",
    "terminal",
    "visible",
    "workflow_data",
    "workflow_property",
]


def visible(text: Any) -> str:
    """``text`` (made a str) with every control, format, bidi, zero-width, line-break and
    surrogate character written as a printable Python escape (see the module docstring):
    ``visible("a\\x1b]0;x\\x07\\u202e")`` is ``'a\\\\x1b]0;x\\\\x07\\\\u202e'``."""
    return display_path(text if isinstance(text, str) else str(text))


# -- the terminal ------------------------------------------------------------------------------


def terminal(text: Any) -> str:
    """Text for a terminal through a rich :class:`~rich.text.Text` (no markup): :func:`visible`.
    A terminal acts on nothing but control characters (ESC, CSI, OSC, the C1 controls) and
    the bidi/zero-width ones reorder or hide what is shown, so visible text is safe there."""
    return visible(text)


def markup(text: Any) -> str:
    """Text for a rich markup string (``console.print(f"...{markup(name)}...")``): :func:`terminal`,
    then rich's own escape of ``[`` so a name like ``[bold]`` or ``[link=...]`` prints as it is."""
    return _rich_escape(terminal(text))


# -- Markdown ----------------------------------------------------------------------------------

#: Characters that open an inline construct anywhere (CommonMark 6.1-6.6; GFM 6.5
#: strikethrough, 4.10 table cells): backslash, code span, emphasis, links and images (the
#: brackets), raw HTML, comments and autolinks (``<``; a ``>`` closes nothing without one),
#: entities, strikethrough, cell separators, @mentions.
_MD_ALWAYS = re.compile(r"([\\`*\[\]<&~|@])")
#: An underscore opens or closes emphasis unless both its neighbours are alphanumeric
#: (CommonMark 6.2, left- and right-flanking delimiter runs): ``step_time_ms`` stays as it is.
_MD_UNDERSCORE = re.compile(r"(?<![^\W_])_|_(?![^\W_])")
#: GFM extended autolinks (6.9): ``www.``, ``scheme://``; and GitHub issue references ``#12``.
_MD_AUTOLINK = re.compile(r"(?i)(?<=www)\.|:(?=//)|#(?=\d)")
#: Block starts (CommonMark 4.2 headings, 5.1 block quotes, 5.2 list items, 4.1 breaks): a
#: string that begins a list item's text must not open a block of its own.
_MD_BLOCK_START = re.compile(r"^(?:[#>+=-]|\d{1,9}(?=[.)]))")


def markdown(text: Any, line_start: bool = False) -> str:
    """Text for inline Markdown (a paragraph, a list item, a heading, a table cell): :func:`visible`
    (no line break survives, so no line of it can start a block), then a backslash before each
    character that could open a link, an image, raw HTML or a comment, an autolink, a code span
    or emphasis (CommonMark 2.4: a backslash escapes any ASCII punctuation). With
    ``line_start`` (the text begins a line or a list item's content, ``- {text}``) a leading
    ``#``, ``>``, ``-``, ``+``, ``=`` or ``1.`` is escaped too, so it opens no heading, quote
    or nested list; mid-line they open nothing and stay as they are (``torch 2.5.1``)."""
    s = visible(text)
    s = _MD_ALWAYS.sub(r"\\\1", s)
    s = _MD_UNDERSCORE.sub(r"\\_", s)
    s = _MD_AUTOLINK.sub(lambda m: "\\" + m.group(0), s)
    m = _MD_BLOCK_START.match(s) if line_start else None
    if m:
        s = s[: m.end()] + "\\" + s[m.end() :] if m.group(0)[0].isdigit() else "\\" + s
    return s


def code_span(text: Any) -> str:
    """A whole Markdown code span (backticks included) showing ``text`` literally (CommonMark 6.1):
    :func:`visible`, then a backtick fence longer than any run of backticks inside, and a space
    inside each end when the text starts or ends with a backtick or a space (the parser strips
    one space from each end). Nothing is interpreted inside a code span, so links, HTML and
    ``<!--`` stay text. In a table cell, ``|`` still needs ``\\|`` (GFM 4.10), which
    :func:`tracedoc.render.report.md_table` adds to every cell."""
    s = visible(text)
    if not s:
        return "` `"
    fence = "`" * (max((len(r) for r in re.findall(r"`+", s)), default=0) + 1)
    pad = " " if s[0] in "` " or s[-1] in "` " else ""
    return f"{fence}{pad}{s}{pad}{fence}"


# -- HTML and plotly ---------------------------------------------------------------------------


def html(text: Any) -> str:
    """Text for HTML element content or a quoted attribute: :func:`visible`, then
    :func:`html.escape` (``& < > " '`` as character references)."""
    return _html.escape(visible(text), quote=True)


def plotly(text: Any) -> str:
    """Text for a plotly label, legend name, category or hover text: :func:`visible` (plotly
    turns ``\\n`` into ``<br>``), then ``&``, ``<`` and ``>`` as character references. plotly.js
    splits its text on tags first and decodes ``&amp; &lt; &gt;`` only in the text between
    them, so an escaped ``<a href>`` or ``<span style>`` is shown, never followed or applied;
    quotes are left alone (plotly would show ``&quot;`` as it is)."""
    return _html.escape(visible(text), quote=False)


# -- GitHub Actions workflow commands ----------------------------------------------------------


def workflow_data(text: str) -> str:
    """A workflow command's message (``::error ...::message``): ``%``, CR and LF as ``%25``,
    ``%0D``, ``%0A`` (``@actions/core`` ``escapeData``), so the command is one line whatever it
    says. Trace text in it is :func:`visible` first (the renderer's line breaks are its own)."""
    return text.replace("%", "%25").replace("\r", "%0D").replace("\n", "%0A")


def workflow_property(text: str) -> str:
    """A workflow command's property value (``file=``, ``title=``): :func:`workflow_data`, and
    ``:`` and ``,`` as ``%3A`` and ``%2C`` (``escapeProperty``), so a value cannot end the
    properties or the command. Trace text in it is :func:`visible` first."""
    return workflow_data(text).replace(":", "%3A").replace(",", "%2C")


# -- SARIF and JSON ----------------------------------------------------------------------------


def sarif_text(text: Any) -> str:
    """Trace text in a SARIF ``message.text``: :func:`visible`, then ``\\``, ``[`` and ``]``
    escaped with a backslash, so a name cannot form an embedded link (SARIF 2.1.0 3.11.6)
    when a viewer such as GitHub code scanning shows the message."""
    return re.sub(r"([\\\[\]])", r"\\\1", visible(text))


def _unsurrogate(s: str) -> str:
    return re.sub(r"[\ud800-\udfff]", lambda m: f"\\u{ord(m.group(0)):04x}", s)


def json_safe(obj: Any) -> Any:
    """Plain JSON data with every lone surrogate (the bytes of a non-UTF-8 file name under
    ``surrogateescape``) written as its ``\\udcXX`` escape text, in keys and values: a JSON
    text is UTF-8 and cannot hold them. Everything else is returned as it is."""
    if isinstance(obj, str):
        return _unsurrogate(obj)
    if isinstance(obj, dict):
        return {json_safe(k): json_safe(v) for k, v in obj.items()}
    if isinstance(obj, (list, tuple)):
        return [json_safe(v) for v in obj]
    return obj


def json_text(data: Any) -> str:
    """Plain data as indented JSON text (numpy values as numbers), what ``--format json`` and
    ``sarif`` write; with a lone surrogate in it, the text of :func:`json_safe` rather than a
    failure to write the report."""
    import orjson

    opt = orjson.OPT_INDENT_2 | orjson.OPT_SERIALIZE_NUMPY
    try:
        return orjson.dumps(data, option=opt).decode()
    except orjson.JSONEncodeError:
        return orjson.dumps(json_safe(data), option=opt).decode()


# -- documents ---------------------------------------------------------------------------------


def document(doc: Any, fn: Any = visible) -> Any:
    """``doc`` (a document dataclass, or plain data) with ``fn`` applied to every ``str`` in it,
    dict keys included; other values (numbers, None, enums such as a
    :class:`~tracedoc.report.model.Severity`) are kept. The document is never changed: a part
    with a string ``fn`` changes is rebuilt (dataclasses with :func:`dataclasses.replace`, so
    their ``__post_init__`` checks run again), and a part with none is the same object (a
    report of ordinary names is not copied at all)."""
    if type(doc) is str:
        return fn(doc)
    if isinstance(doc, dict):
        items = [(document(k, fn), document(v, fn)) for k, v in doc.items()]
        same = all(k2 is k and v2 is v for (k2, v2), (k, v) in zip(items, doc.items(), strict=True))
        return doc if same else dict(items)
    if type(doc) in (list, tuple):
        vals = [document(v, fn) for v in doc]
        return doc if all(a is b for a, b in zip(vals, doc, strict=True)) else type(doc)(vals)
    if dataclasses.is_dataclass(doc) and not isinstance(doc, type):
        changes = {}
        for f in dataclasses.fields(doc):
            if f.init:
                old = getattr(doc, f.name)
                new = document(old, fn)
                if new is not old:
                    changes[f.name] = new
        return dataclasses.replace(doc, **changes) if changes else doc
    return doc


class OneLineConsole(Console):
    """A rich Console for stderr whose ``print`` writes every string it is given through
    :func:`tracedoc.errors.one_line` (markup is kept: it is printable). For one-line messages
    only: a line break in a message is shown as ``\\n``. Every command's warnings and errors go
    through one (the CLI's ``err_console``, rank folders, the fix-loop)."""

    def print(self, *objects: Any, **kwargs: Any) -> None:
        super().print(*(one_line(o) if isinstance(o, str) else o for o in objects), **kwargs)
