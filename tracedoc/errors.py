"""Error types. Every error tracedoc raises on purpose carries the process exit code
the CLI must use, so bad input never reaches the user as a traceback."""

from __future__ import annotations

import os


def display_path(path: str | os.PathLike[str] | bytes) -> str:
    """A file name safe to print on one line of a terminal.

    Characters that are not printable (``str.isprintable``: Unicode categories Cc, Cf, Cs, Co,
    Cn, Zl, Zp and spaces other than U+0020 -- newline, tab, ESC and the other C0 and C1
    controls, the bidi embeddings, overrides and isolates U+202A-U+202E and U+2066-U+2069, the
    zero-width characters U+200B-U+200D and U+FEFF, the surrogates Python uses for bytes of a
    file name that are not valid UTF-8) are written as Python escapes (``\\n``, ``\\x1b``,
    ``\\u202e``, ``\\udcff``); a backslash stays as it is. The renderers' escaping
    (:mod:`tracedoc.render.escape`) starts from this.
    ``display_path("a\\nb.json")`` is ``'a\\\\nb.json'`` (shown as ``a\\nb.json``).
    """
    text = os.fsdecode(path) if isinstance(path, bytes) else str(path)
    if text.isprintable():
        return text
    out = []
    for ch in text:
        if ch.isprintable():
            out.append(ch)
        else:
            code = ord(ch)
            out.append(
                {"\n": "\\n", "\r": "\\r", "\t": "\\t"}.get(ch)
                or (f"\\x{code:02x}" if code < 0x100 else f"\\u{code:04x}" if code < 0x10000 else f"\\U{code:08x}")
            )
    return "".join(out)


def install_hint(extra: str) -> str:
    """How to install an optional extra, for both kinds of user: from PyPI and from a clone
    (issue "What a person sees": a hint that names only one leaves the other stuck).
    ``install_hint("html") == "pip install 'tracedoc[html]' (from a clone: pip install -e '.[html]')"``."""
    return f"pip install 'tracedoc[{extra}]' (from a clone: pip install -e '.[{extra}]')"


def one_line(text: str) -> str:
    """``text`` with line breaks and other control characters escaped (see :func:`display_path`):
    what every stderr warning and error line is made of, so no text it quotes (a file name, an
    option value, an exception) can move the cursor, retitle the terminal or split the line."""
    return display_path(text)


class TracedocError(Exception):
    """Base class of tracedoc's own errors.

    Attributes:
        exit_code: process exit code the CLI uses for this error (2: bad input or usage).
    """

    exit_code = 2


class TraceLoadError(TracedocError):
    """A trace file cannot be read or is not a usable Kineto/Chrome trace.

    The message is one line and names the file and the problem, e.g.
    ``trace.json.gz: truncated gzip stream``. The file name is escaped with
    :func:`display_path` (a name holding a newline or an escape sequence is printed as
    ``\\n``/``\\x1b``), and so is the problem text.

    Attributes:
        path: the file name as given (not escaped).
        problem: the problem, one line.
    """

    def __init__(self, path: str, problem: str) -> None:
        self.path = str(path)
        self.problem = one_line(problem)
        super().__init__(f"{display_path(self.path)}: {self.problem}")


class RuleError(TracedocError):
    """A rule file is malformed (bad TOML, unknown signal, disallowed expression, a field of
    the wrong type, a value beyond the bounds in :mod:`tracedoc.engine.rules`). The message
    names the rule file and the field."""

    def __init__(self, message: str) -> None:
        super().__init__(one_line(message))


class SettingsError(TracedocError):
    """An analysis option that cannot be used: a ``TRACEDOC_*`` environment variable with a
    value it does not take (the message names the variable: ``$TRACEDOC_CACHE_MIN_BYTES:
    invalid size 'x'...``)."""

    def __init__(self, message: str) -> None:
        super().__init__(one_line(message))


class HostFactError(SettingsError, ValueError):
    """A forced host fact that cannot be used (``$TRACEDOC_HOST_CORES``,
    ``$TRACEDOC_HOST_CPU_FLAGS``, :mod:`tracedoc.hostfacts`): one line naming the variable, like
    every other bad ``TRACEDOC_*`` value; a ``ValueError`` too, for code that catches that."""


class DocumentError(TracedocError):
    """A document's ``from_dict`` was given something it does not read: not an object, no
    ``schema_version`` or another one, another ``kind``, a field missing or of the wrong shape.
    The message is one line."""

    def __init__(self, message: str) -> None:
        super().__init__(one_line(message)[:300])
