"""Reading the TOML files tracedoc takes from users -- rule files and ``pyproject.toml`` -- within
bounds, with one-line errors (:class:`tracedoc.errors.RuleError`), and the listing of the rule
files a rule path names (:func:`rule_files`). A module of its own, with no
tracedoc import but the errors: reading a project's ``[tool.tracedoc]`` table must not import the
rules engine, its signals and pandas (0.4 s), which a stored report does not need (issue 24's warm
path, :class:`tracedoc.cache.ReportStore`).

Bounds (:mod:`tracedoc.engine.rules`, module docstring): a file of at most ``max_bytes`` (a rule
file: :data:`MAX_RULE_FILE_BYTES`); no TOML key with more than :data:`MAX_DOTTED_PARTS` dotted
parts (Python's ``tomllib`` takes time quadratic in them).
"""

from __future__ import annotations

import os
import re
import stat
import tomllib
from pathlib import Path
from typing import Any

from tracedoc.errors import RuleError, display_path

#: Largest rule file accepted (bytes); the built-in rules are about 3 KB each.
MAX_RULE_FILE_BYTES = 64 << 10
#: Most dotted parts in one TOML key or table header (``a.b.c`` has 3).
MAX_DOTTED_PARTS = 32
# Possessive quantifiers and a start only where no key character precedes: each run of key
# characters is read once, so the search is linear (with plain ``+`` a 64 KiB run of letters
# took 196 s: every start inside the run read the run to its end).
_KEY_PART = r"(?:[A-Za-z0-9_-]++|\"[^\"\n]*+\"|'[^'\n]*+')"
_LONG_DOTTED_KEY = re.compile(rf"(?<![A-Za-z0-9_\-\"'])(?:{_KEY_PART}[ \t]*+\.[ \t]*+){{{MAX_DOTTED_PARTS}}}")


def parse_toml(text: str, src: str, max_bytes: int = MAX_RULE_FILE_BYTES, what: str = "rule file") -> dict[str, Any]:
    """Parse TOML text within the bounds of the module docstring: at most ``max_bytes``
    characters (a rule file: :data:`MAX_RULE_FILE_BYTES`), no key with more than
    :data:`MAX_DOTTED_PARTS` dotted parts (``tomllib`` takes time and memory quadratic in
    them: a 40 KB key of 20,000 parts took 34 s and 1.5 GB), nesting that ``tomllib`` can
    parse without exhausting the recursion limit or memory. Shared by rule files and
    ``pyproject.toml`` (:mod:`tracedoc.config`).

    Raises:
        RuleError: ``"{src}: ..."``: too long, a key with too many dotted parts, nested too
            deeply, too large to parse, or invalid TOML (an integer of more than 4,300 digits,
            Python's limit on converting one, included).
    """
    if len(text) > max_bytes:
        raise RuleError(f"{src}: {what} larger than {_size_text(max_bytes)}")
    if _LONG_DOTTED_KEY.search(text):
        raise RuleError(f"{src}: a key with more than {MAX_DOTTED_PARTS} dotted parts")
    try:
        return tomllib.loads(text)
    except tomllib.TOMLDecodeError as exc:
        raise RuleError(f"{src}: invalid TOML ({exc})") from None
    except ValueError as exc:  # an integer of more digits than Python converts (4,300)
        raise RuleError(f"{src}: invalid TOML ({exc})") from None
    except RecursionError:
        raise RuleError(f"{src}: invalid TOML (nested too deeply)") from None
    except MemoryError:
        raise RuleError(f"{src}: TOML too large to parse (out of memory)") from None


def _size_text(n: int) -> str:
    """A size bound as the errors say it: ``"1 MiB"``, ``"64 KiB"``."""
    return f"{n // (1 << 20)} MiB" if n >= 1 << 20 else f"{n // 1024} KiB"


def read_toml_text(
    p: Path,
    max_bytes: int = MAX_RULE_FILE_BYTES,
    what: str = "rule file",
    hint: str | None = "rule files must be regular .toml files",
) -> str:
    """The text of a TOML file tracedoc reads (a rule file; ``pyproject.toml``,
    :mod:`tracedoc.config`): a regular file (a FIFO or device is refused before it is opened),
    of at most ``max_bytes`` bytes, UTF-8.

    Raises:
        RuleError: ``"{file}: ..."``: not a regular file (``hint`` appended), larger than
            ``max_bytes`` (named ``what``), unreadable, or not UTF-8.
    """
    shown = display_path(p)
    try:
        st = os.stat(p)
        if not stat.S_ISREG(st.st_mode):
            raise RuleError(f"{shown}: not a regular file" + (f"; {hint}" if hint else ""))
        if st.st_size > max_bytes:
            raise RuleError(f"{shown}: {what} larger than {_size_text(max_bytes)}")
        with open(p, "rb") as fh:
            raw = fh.read(max_bytes + 1)
        return raw.decode("utf-8")
    except RuleError:
        raise
    except UnicodeDecodeError as exc:
        raise RuleError(f"{shown}: not UTF-8 text ({exc.reason} at byte {exc.start})") from None
    except OSError as exc:
        raise RuleError(f"{shown}: cannot read ({exc.strerror or exc})") from None


def rule_files(paths: list[str | Path]) -> list[Path]:
    """Expand rule paths: a file is itself, a directory is its ``*.toml`` files (sorted).

    Raises:
        RuleError: a path that does not exist.
    """
    files: list[Path] = []
    for p in map(Path, paths):
        if p.is_dir():
            files.extend(sorted(p.glob("*.toml")))
        elif p.is_file():
            files.append(p)
        else:
            raise RuleError(f"{display_path(p)}: no such file or directory")
    return files
