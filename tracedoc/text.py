"""Text helpers at the bottom of the layers (no tracedoc imports): counts with their noun,
and names shortened in the middle. Every layer may use them; none needs a renderer for them."""

from __future__ import annotations


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
