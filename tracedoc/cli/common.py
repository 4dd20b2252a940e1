"""What every command of the ``tracedoc`` command line shares: the typer app, the option
vocabularies (formats, colours, levels), the report console, and the one error funnel.

Exit codes (ruff's convention): 0 clean, 1 findings at or above ``--fail-on``, 2 error (bad
input, bad usage). The report goes to stdout; progress, warnings and errors go to stderr,
errors as a single line.

Every line :data:`err_console` prints is made one line of printable text first
(:func:`tracedoc.errors.one_line`: control characters, escape sequences, bidi and zero-width
characters and line breaks written as ``\x1b``, ``\u202e``, ``\n``), so a file name, an option
value or an exception text cannot retitle the terminal, move the cursor or split the line.
"""

from __future__ import annotations

import contextlib
import dataclasses
import os
import sys
import time
from collections.abc import Callable, Iterator
from enum import StrEnum
from pathlib import Path
from typing import IO, Any, List, Optional

import typer
from rich.console import Console
from rich.markup import escape
from rich.text import Text

from tracedoc.errors import TracedocError, display_path, one_line
from tracedoc.render.escape import OneLineConsole

app = typer.Typer(
    add_completion=False,
    context_settings={"help_option_names": ["-h", "--help"]},
    no_args_is_help=True,
    rich_markup_mode=None,
    help="Diagnose PyTorch Profiler traces: ranked findings with evidence, estimated savings and fixes.",
)
#: Where warnings and errors go: stderr, each message one line of printable text.
err_console = OneLineConsole(stderr=True, highlight=False)

#: The variable that lets an internal error end in a traceback instead of one line.
DEBUG_ENV = "TRACEDOC_DEBUG"


class Format(StrEnum):
    """Output formats; every command that has ``--format`` takes these names."""

    text = "text"
    json = "json"
    markdown = "markdown"
    github = "github"
    sarif = "sarif"
    html = "html"


class Color(StrEnum):
    auto = "auto"
    always = "always"
    never = "never"


class Level(StrEnum):
    info = "info"
    warning = "warning"
    error = "error"


#: The formats of the listing commands (rules, signals, diff).
LIST_FORMATS = (Format.text, Format.json, Format.markdown)

EXIT_CODES = (
    "Exit codes: 0 no finding at or above --fail-on; "
    "1 a finding at or above --fail-on, or with --strict an incomplete analysis (a selected rule skipped); "
    "2 bad input, bad usage or an internal error."
)


def fail(message: str, code: int = 2) -> typer.Exit:
    """Print ``tracedoc: error: message`` on one stderr line (control characters and line
    breaks escaped, :func:`tracedoc.errors.one_line`) and return the Exit to raise."""
    err_console.print(f"tracedoc: error: {escape(one_line(message))}", soft_wrap=True)
    return typer.Exit(code)


def debugging() -> bool:
    """Whether ``$TRACEDOC_DEBUG`` asks for tracebacks instead of one-line errors.

    The one variable read outside :class:`tracedoc.settings.Environment`: it decides how a
    failure to build the settings is itself reported, so it cannot wait for them. Any value
    but an empty one, ``0``, ``false``, ``no`` or ``off`` turns it on."""
    return os.environ.get(DEBUG_ENV, "").strip().lower() not in ("", "0", "false", "no", "off")


@contextlib.contextmanager
def funnel(label: str, verb: str, gerund: str) -> Iterator[None]:
    """The one error funnel: whatever the body raises ends as one stderr line and an exit code.

    Args:
        label: what the line names (a trace, ``before / after``); made printable here.
        verb, gerund: the action, for "cannot ``verb``" and "out of memory while ``gerund``".

    Raises:
        typer.Exit: 2 (or the :class:`TracedocError`'s own code) after the line; a
            ``typer.Exit`` or ``BrokenPipeError`` from the body passes through, and with
            ``$TRACEDOC_DEBUG`` set an unexpected exception passes through with its traceback.
    """
    where = display_path(label)
    try:
        yield
    except (typer.Exit, BrokenPipeError):
        raise
    except TracedocError as exc:
        raise fail(str(exc), exc.exit_code) from None
    except MemoryError:
        raise fail(f"{where}: out of memory while {gerund}") from None
    except RecursionError:
        raise fail(f"{where}: cannot {verb} (nested too deeply)") from None
    except Exception as exc:  # never a traceback for bad input
        if debugging():
            raise
        raise fail(
            f"{where}: cannot {verb} ({type(exc).__name__}: {display_path(str(exc))[:300]}); "
            f"set {DEBUG_ENV}=1 for a traceback"
        ) from None


def make_console(color: Color, file: Optional[IO[str]] = None, width: Optional[int] = None) -> Console:
    """The report console: ``--color always`` forces colour (even into a file or a pipe),
    ``never`` drops it, ``auto`` follows the terminal and ``NO_COLOR``."""
    kw: dict = {"highlight": False, "file": file}
    if width:
        kw["width"] = width
    if color is Color.always:
        kw["force_terminal"] = True
        kw["color_system"] = "truecolor"
    elif color is Color.never:
        kw["color_system"] = None
        kw["no_color"] = True
    return Console(**kw)


@contextlib.contextmanager
def open_output(output: Optional[Path]) -> Iterator[tuple[IO[str], Optional[IO[str]]]]:
    """Where a report goes: ``output`` opened for writing (closed afterwards), else stdout.

    Yields ``(stream, file)``: the stream to write to, and the opened file (None for stdout),
    which a rich console takes as its ``file``.

    Raises:
        typer.Exit: code 2, after one stderr line naming ``output``, when it cannot be opened.
    """
    try:
        fh = open(output, "w", encoding="utf-8") if output is not None else None  # noqa: SIM115
    except OSError as exc:
        raise fail(f"{display_path(output)}: cannot write ({exc.strerror or exc})") from None
    try:
        yield (fh if fh is not None else sys.stdout), fh
    finally:
        if fh is not None:
            fh.close()


def list_format(format: Format, command: str) -> None:
    """Refuse a format the listing ``command`` cannot write (one line, exit 2)."""
    if format not in LIST_FORMATS:
        raise fail(f"tracedoc {command}: --format {format.value} is not available here (text, json or markdown)")


def md_table(header: List[str], rows: List[List[str]]) -> str:
    """A Markdown table; ``|`` and newlines in cells are escaped."""

    def cell(v: str) -> str:
        return str(v).replace("|", "\\|").replace("\n", " ")

    lines = ["| " + " | ".join(header) + " |", "|" + "---|" * len(header)]
    lines += ["| " + " | ".join(cell(c) for c in r) + " |" for r in rows]
    return "\n".join(lines) + "\n"


def config_changes(settings: Any, trace: str, options: dict[str, Any]) -> Optional[tuple[str, tuple[str, ...]]]:
    """What the ``[tool.tracedoc]`` table changed: ``(its pyproject.toml, the keys whose values
    the analysis took from it)``, found by resolving the same command-line ``options`` without
    the file; None when no file was found or it changed nothing (every key it sets overridden
    on the command line, or an empty table). The path is relative to the working directory when
    it lies below it."""
    if not settings.config_path:
        return None
    from tracedoc.settings import Settings

    base = Settings.resolve(trace, env=dataclasses.replace(settings.env, no_config=True), **options)
    fields = (
        ("select", "select"),
        ("ignore", "ignore"),
        ("rule_paths", "rules"),
        ("thresholds", "thresholds"),
        ("fail_on", "fail-on"),
        ("strict", "strict"),
    )
    keys = tuple(key for attr, key in fields if getattr(settings, attr) != getattr(base, attr))
    if not keys:
        return None
    path = settings.config_path
    rel = os.path.relpath(path) if os.path.isabs(path) else path
    return (path if rel.startswith("..") else rel), keys


class Elapsed:
    """The text of the progress line: ``trace.json.gz: loading (12.3 s)``, the seconds read from
    ``clock`` each time it is drawn, so they run while a step of the load takes its time (a
    status line is redrawn about twelve times a second). ``message`` is what is being done."""

    def __init__(self, name: str, clock: Callable[[], float] = time.perf_counter) -> None:
        self.name = display_path(name)
        self.message = "starting"
        self.clock = clock
        self.start = clock()

    def text(self) -> Text:
        """The line as it reads now."""
        return Text.assemble(f"{self.name}: {self.message} ", (f"({self.clock() - self.start:.1f} s)", "dim"))

    def __rich_console__(self, console: Console, options: Any) -> Iterator[Text]:
        yield self.text()


@contextlib.contextmanager
def progress_line(path: Path, json_output: bool, off: bool = False) -> Iterator[Optional[Callable[[str], None]]]:
    """Yield a ``progress(message)`` callback that updates a transient stderr status line whose
    elapsed time keeps counting (:class:`Elapsed`), or None where no display is wanted (a pipe, JSON, CI, ``off``, a small
    input: :func:`tracedoc.progress.wanted`). File names and messages are made printable
    (:func:`tracedoc.errors.display_path`) and shown as text, never as markup."""
    from tracedoc.progress import MIN_BYTES, input_bytes, wanted

    if not wanted(json_output, off=off) or input_bytes(path) < MIN_BYTES:
        yield None
        return
    line = Elapsed(path.name)
    with Console(stderr=True, highlight=False).status(line, spinner="dots"):

        def update(message: str) -> None:
            line.message = display_path(message)

        yield update
