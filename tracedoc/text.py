"""Text helpers at the bottom of the layers (no tracedoc imports): counts with their noun,
names shortened in the middle, paths shortened from the left, docstrings made plain. Every layer may use them; none needs a renderer for them."""

from __future__ import annotations

import re


def plural(n: int, word: str, plural_word: str | None = None) -> str:
    """``"1 trace"``, ``"2 traces"``: the count and the word, pluralised (``plural_word``
    when the plural is not ``word + "s"``)."""
    return f"{n} {word if n == 1 else (plural_word or word + 's')}"


def middle_ellipsis(text: str, width: int) -> str:
    """``text`` shortened to at most ``width`` characters by replacing its middle with ``…``.

    The end of a kernel name (its template and parameter list) tells kernels apart as much
    as its start, so both ends are kept; the head gets the extra character. ``width < 1``
    gives ``""``.
    """
    if len(text) <= width:
        return text
    if width < 1:
        return ""
    if width == 1:
        return "…"
    head = (width - 1 + 1) // 2
    tail = width - 1 - head
    return text[:head] + "…" + (text[-tail:] if tail else "")


def _fits_path(head: str, rest: str, width: int) -> str | None:
    """The longest ``…/dirs/file(line)rest`` of ``head`` (a path) that fits ``width``, else None."""
    parts = head.split("/")
    for k in range(len(parts) - 1, -1, -1):  # most directories first
        cand = ("" if k == len(parts) - 1 else "…/") + "/".join(parts[len(parts) - 1 - k :]) + rest
        if len(cand) <= width:
            return cand
    return None


def left_ellipsis_path(text: str, width: int) -> str:
    """A path (or a Python frame, ``pkg/models/videomae.py(443): forward``) shortened to at most
    ``width`` characters from the left, whole directories first: ``…/models/videomae.py(443): forward``.

    What tells a frame apart is kept longest: the file name with its line number, then the
    function (shortened at its end: ``…/videomae.py(443): for…``), then the directories nearest
    the file. Text that is no path (no ``/`` and no ``file.py(N)``) gets :func:`middle_ellipsis`.
    """
    if len(text) <= width:
        return text
    m = re.match(r"^(?P<head>[^()\s]*?\.\w+\(\d+\))(?P<rest>.*)$", text)
    if m:
        head, rest = m.group("head"), m.group("rest")
    elif "/" in text and " " not in text:
        head, rest = text, ""
    else:
        return middle_ellipsis(text, width)
    found = _fits_path(head, rest, width)
    if found is not None:
        return found
    base = "…/" + head.rsplit("/", 1)[-1] if "/" in head else head
    room = width - len(base)
    if rest and room >= 4:  # ": f…" at least
        return base + rest[: room - 1] + "…"
    found = _fits_path(head, "", width)
    if found is not None:
        return found
    return middle_ellipsis(text, width) if width < 2 else "…" + head[-(width - 1) :]


#: Sphinx roles (``:func:`x```, ``:data:`~a.b.c```, ``:class:`text <target>```) and literals.
_RST_ROLE = re.compile(r":[a-z]+(?::[a-z]+)?:`([^`]*)`")
_RST_LITERAL = re.compile(r"``(.+?)``")


def _role_text(m: re.Match) -> str:
    inner = m.group(1)
    named = re.match(r"^(.*?)\s*<[^>]*>$", inner)
    if named and named.group(1):
        return named.group(1)
    if inner.startswith("~"):
        return inner[1:].rsplit(".", 1)[-1]
    return inner.lstrip("!")


def plain_rst(text: str) -> str:
    """Docstring text for a terminal: reStructuredText roles and literals shown as their text
    (``:func:`~tracedoc.x.f``` -> ``f``, ````code```` -> ``code``, ``:data:`X``` -> ``X``),
    whitespace runs (a docstring's line breaks) as one space."""
    text = " ".join(text.split())
    text = _RST_ROLE.sub(_role_text, text)
    return _RST_LITERAL.sub(r"\1", text)
