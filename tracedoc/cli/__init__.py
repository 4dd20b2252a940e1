"""The ``tracedoc`` command line (typer + rich): one module per command, parsing and dispatch
only, and one error funnel (:func:`tracedoc.cli.common.funnel`).

- :mod:`tracedoc.cli.analyze`: ``tracedoc analyze``;
- :mod:`tracedoc.cli.diff`: ``tracedoc diff``;
- :mod:`tracedoc.cli.listing`: ``tracedoc rules``, ``rule`` and ``signals``;
- :mod:`tracedoc.cli.cache`: ``tracedoc cache info|clear``;
- :mod:`tracedoc.fixloop.command`: ``tracedoc fix-loop`` (registered when its extra is there).

Exit codes (ruff's convention): 0 clean, 1 findings at or above ``--fail-on``,
2 error (bad input, bad usage). The report goes to stdout; progress, warnings and
errors go to stderr, errors as a single line.
"""

from __future__ import annotations

import os
import sys

import typer
from rich.markup import escape

from tracedoc._version import __version__
from tracedoc.cli import analyze, cache, diff, listing, mcpcmd, ops  # noqa: F401  (each registers its commands)
from tracedoc.cli.common import app, debugging, err_console
from tracedoc.errors import TracedocError

__all__ = ["app", "main"]


def _version(value: bool) -> None:
    if value:
        print(f"tracedoc {__version__}")
        raise typer.Exit(0)


@app.callback()
def main_callback(
    version: bool = typer.Option(
        False, "--version", callback=_version, is_eager=True, help="Print the version and exit."
    ),
) -> None:
    """tracedoc: diagnose PyTorch Profiler (Kineto) traces."""
    from tracedoc import hostfacts

    hostfacts.check()  # a bad TRACEDOC_HOST_* value is one line and exit 2, before any work


def _register_fix_loop() -> None:
    try:
        from tracedoc.fixloop.command import fix_loop
    except ImportError:
        return
    app.command("fix-loop")(fix_loop)


_register_fix_loop()


def _usage_exceptions() -> tuple:
    """The framework's usage-error types (typer vendors click in recent releases)."""
    types = []
    for mod in ("click.exceptions", "typer._click.exceptions"):
        try:
            m = __import__(mod, fromlist=["ClickException"])
            types.append(m.ClickException)
        except ImportError:
            pass
    return tuple(types)


def usage_message(exc: BaseException) -> str:
    """A framework usage error as one line: no box, no "Usage:" block, no stray
    "Value error," from the type coercion; the command named when known."""
    import re

    text = exc.format_message() if hasattr(exc, "format_message") else str(exc)
    text = re.sub(r"\bValue error, ", "", text)
    text = " ".join(text.split())
    ctx = getattr(exc, "ctx", None)
    where = ctx.command_path if ctx is not None and getattr(ctx, "command_path", None) else "tracedoc"
    return f"{where}: {text} (see '{where} --help')"


def main() -> None:
    """Console-script entry point.

    A usage error (unknown option, bad value, missing argument) prints one line,
    ``tracedoc: error: tracedoc analyze: ...``, and exits 2.

    Once the command has finished and its output is flushed, the process ends with
    ``os._exit``: tearing down the interpreter would free a large trace's frames object
    by object (about 0.2 s for a 300 MB trace, measured in benchmarks/RESULTS.md) for
    nothing. Nothing tracedoc runs relies on ``atexit`` handlers.
    """
    code = 0
    usage_errors = _usage_exceptions()
    try:
        rv = app(standalone_mode=False)
        code = rv if isinstance(rv, int) else 0
    except SystemExit as exc:
        code = exc.code if isinstance(exc.code, int) else (0 if exc.code is None else 1)
    except KeyboardInterrupt:
        err_console.print("tracedoc: interrupted")
        code = 130
    except usage_errors as exc:
        err_console.print(f"tracedoc: error: {escape(usage_message(exc))}", soft_wrap=True)
        code = getattr(exc, "exit_code", 2) or 2
    except TracedocError as exc:  # a known problem raised outside a command's own funnel
        if debugging():
            raise
        err_console.print(f"tracedoc: error: {escape(str(exc))}", soft_wrap=True)
        code = 2
    except Exception as exc:  # an abort or an internal error: one line, never a traceback
        if debugging():
            raise
        name = type(exc).__name__
        err_console.print(
            f"tracedoc: error: {escape(name)}: {escape(str(exc))} (set TRACEDOC_DEBUG=1 for a traceback)",
            soft_wrap=True,
        )
        code = 130 if name == "Abort" else 2
    try:
        sys.stdout.flush()
        sys.stderr.flush()
    except (OSError, ValueError):  # a closed pipe: nothing more to say
        pass
    os._exit(code)
