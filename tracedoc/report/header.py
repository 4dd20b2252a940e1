"""The header every tracedoc document's ``from_dict`` checks (``schema_version``, ``kind``), and
the one-line error for a field of the wrong shape. It imports no document, so every document
module (and the renderers that read them) can use it without an import cycle."""

from __future__ import annotations

from typing import Any

from tracedoc.errors import DocumentError, one_line


def check_header(d: Any, what: str, version: int, kind: str | None = None) -> None:
    """Check a document's header: ``d`` is a JSON object with ``schema_version == version``
    (an int; a bool is no version) and, when ``kind`` is given, ``d["kind"] == kind``.

    Args:
        what: the document, in words (``"tracedoc multi-rank report"``), for the message.

    Raises:
        DocumentError: one line naming what is wrong.
    """
    if not isinstance(d, dict):
        raise DocumentError(f"not a {what}: a JSON {type(d).__name__}, not an object")
    if "schema_version" not in d:
        raise DocumentError(f"not a {what}: no schema_version (expected {version})")
    v = d["schema_version"]
    if type(v) is not int or v != version:
        raise DocumentError(
            f"unsupported {what} schema_version {one_line(repr(v)[:40])} (this tracedoc reads {version})"
        )
    if kind is not None and d.get("kind") != kind:
        raise DocumentError(f"not a {what}: kind {one_line(repr(d.get('kind'))[:40])}, expected {kind!r}")


def shape_error(what: str, exc: Exception) -> DocumentError:
    """The :class:`DocumentError` for a ``KeyError``/``TypeError``/``ValueError``/
    ``AttributeError`` met while reading a ``what`` document's fields."""
    if isinstance(exc, KeyError):
        return DocumentError(f"not a {what}: missing {one_line(repr(exc.args[0])[:60])}")
    return DocumentError(f"not a {what}: {one_line(str(exc))[:200]}")
