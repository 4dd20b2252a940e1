"""The ``tracedoc`` command line (typer + rich).

Exit codes (ruff's convention): 0 clean, 1 findings at or above ``--fail-on``,
2 error (bad input, bad usage). The report goes to stdout; progress, warnings and
errors go to stderr, errors as a single line.
"""

from __future__ import annotations

import os
import sys
from enum import Enum
from pathlib import Path
from typing import List, Optional

import typer
from rich.console import Console
from rich.markup import escape

from tracedoc import __version__
from tracedoc.errors import TracedocError

app = typer.Typer(
    add_completion=False,
    no_args_is_help=True,
    rich_markup_mode=None,
    help="Diagnose PyTorch Profiler traces: ranked findings with evidence, estimated savings and fixes.",
)
err_console = Console(stderr=True, highlight=False)


class Format(str, Enum):
    text = "text"
    json = "json"
    markdown = "markdown"


class Level(str, Enum):
    info = "info"
    warning = "warning"
    error = "error"


_LEVELS = {"info": 0, "warning": 1, "error": 2}


def fail(message: str, code: int = 2) -> typer.Exit:
    """Print ``tracedoc: error: message`` on one stderr line and return the Exit to raise."""
    err_console.print(f"tracedoc: error: {escape(message)}", soft_wrap=True)
    return typer.Exit(code)


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


def exit_code_for(findings, fail_on: str, exit_zero: bool) -> int:
    """0, or 1 when a finding's severity is at or above ``fail_on`` (and not ``exit_zero``)."""
    if exit_zero:
        return 0
    return 1 if any(_LEVELS[f.severity] >= _LEVELS[fail_on] for f in findings) else 0


@app.command()
def analyze(
    trace: Path = typer.Argument(
        ..., help="A trace (.json or .json.gz), a FIFO, '-' for standard input, or a directory of per-rank traces."
    ),
    format: Format = typer.Option(Format.text, "--format", "-f", help="Output format."),
    fail_on: Level = typer.Option(Level.info, "--fail-on", help="Exit 1 when a finding has this severity or higher."),
    exit_zero: bool = typer.Option(False, "--exit-zero", help="Exit 0 even when there are findings."),
    select: Optional[List[str]] = typer.Option(
        None, "--select", help="Only these rules (code, code prefix or name); repeatable."
    ),
    ignore: Optional[List[str]] = typer.Option(
        None, "--ignore", help="Skip these rules (code, code prefix or name); repeatable."
    ),
    jobs: Optional[int] = typer.Option(
        None,
        "--jobs",
        "-j",
        min=1,
        help="Worker processes for a directory of per-rank traces (default: min(CPUs, traces)).",
    ),
    rules: Optional[List[Path]] = typer.Option(
        None,
        "--rules",
        metavar="PATH",
        help="Extra rule files (TOML) or folders of them, e.g. a CI budget; repeatable.",
    ),
    max_trace_bytes: Optional[str] = typer.Option(
        None,
        "--max-trace-bytes",
        metavar="SIZE",
        help="Largest trace accepted, in JSON bytes after decompression, e.g. 16G "
        "(default: $TRACEDOC_MAX_TRACE_BYTES or 4G).",
    ),
) -> None:
    """Analyze a trace (or a directory of per-rank traces) and print ranked findings."""
    from tracedoc.errors import display_path
    from tracedoc.progress import progress_for

    max_bytes = None
    if max_trace_bytes is not None:
        from tracedoc.load.source import MAX_BYTES_ENV, parse_size

        try:
            max_bytes = parse_size(max_trace_bytes)
        except ValueError as exc:
            raise fail(f"--max-trace-bytes: {exc}") from None
        os.environ[MAX_BYTES_ENV] = str(max_bytes)  # rank workers read it too
    try:
        with progress_for(trace, json_output=format is Format.json) as progress:
            if trace.is_dir():
                from tracedoc.ranks import analyze_directory

                report = analyze_directory(
                    trace,
                    jobs=jobs,
                    select=select,
                    ignore=ignore,
                    progress=progress,
                    rule_paths=[str(r) for r in rules or []],
                )
            else:
                from tracedoc.load import load

                extra = None
                if rules:  # a bad rule file fails before a long load
                    from tracedoc.engine.rules import load_rules

                    extra = load_rules(list(rules))
                loaded = load(trace, progress=progress, max_bytes=max_bytes)  # imports pandas while workers decode
                if loaded.dropped_events:
                    parts = ", ".join(f"{n} with {why}" for why, n in loaded.dropped_events.items())
                    err_console.print(
                        f"tracedoc: warning: {escape(display_path(loaded.path))}: dropped impossible values: "
                        f"{escape(parts)}",
                        soft_wrap=True,
                    )
                from tracedoc.engine import analyze_trace

                if progress:
                    progress("computing signals and rules")
                report = analyze_trace(loaded, rules=extra, select=select, ignore=ignore)
                del loaded
    except TracedocError as exc:
        raise fail(str(exc), exc.exit_code) from None
    except MemoryError:
        raise fail(f"{display_path(trace)}: out of memory while analyzing") from None
    except RecursionError:
        raise fail(f"{display_path(trace)}: cannot analyze (nested too deeply)") from None
    except Exception as exc:  # never a traceback for a bad trace
        if os.environ.get("TRACEDOC_DEBUG"):
            raise
        raise fail(
            f"{display_path(trace)}: cannot analyze ({type(exc).__name__}: {display_path(str(exc))[:300]}); "
            "set TRACEDOC_DEBUG=1 for a traceback"
        ) from None
    try:  # a value no renderer can write must still end in one line, not a traceback
        from tracedoc.report.render import ConsoleRenderer, JsonRenderer, MarkdownRenderer

        if format is Format.json:  # a Report or a MultiRankReport: both have to_dict()
            sys.stdout.write(JsonRenderer().render(report) + "\n")
        elif trace.is_dir():
            from tracedoc.ranks import render_markdown, render_text

            if format is Format.markdown:
                sys.stdout.write(render_markdown(report))
            else:
                render_text(report, Console(highlight=False))
        elif format is Format.markdown:
            sys.stdout.write(MarkdownRenderer().render(report))
        else:
            ConsoleRenderer(Console(highlight=False)).render(report)
    except BrokenPipeError:
        raise
    except Exception as exc:
        if os.environ.get("TRACEDOC_DEBUG"):
            raise
        raise fail(
            f"{display_path(trace)}: cannot write the report ({type(exc).__name__}: {display_path(str(exc))[:300]}); "
            "set TRACEDOC_DEBUG=1 for a traceback"
        ) from None
    raise typer.Exit(exit_code_for(report.findings, fail_on.value, exit_zero))


@app.command("rules")
def list_rules(format: Format = typer.Option(Format.text, "--format", "-f")) -> None:
    """List the rules: code, name, severity, fix safety, summary."""
    from rich.table import Table

    from tracedoc.engine.rules import builtin_rules

    rules = builtin_rules()
    if format is Format.json:
        import orjson

        sys.stdout.write(
            orjson.dumps(
                [
                    {
                        "code": r.code,
                        "name": r.name,
                        "severity": r.severity,
                        "summary": r.summary,
                        "condition": r.condition.source,
                        "fix": r.fix.to_dict(),
                    }
                    for r in rules
                ],
                option=orjson.OPT_INDENT_2,
            ).decode()
            + "\n"
        )
        return
    table = Table(show_edge=False)
    for col in ("code", "name", "severity", "fix safety", "summary"):
        table.add_column(col)
    for r in rules:
        table.add_row(r.code, r.name, r.severity, r.fix.safety, r.summary)
    Console(highlight=False).print(table)


@app.command("rule")
def explain_rule(
    name_or_code: str = typer.Argument(..., help="A rule code (TD101) or name (dataloader-stall)."),
) -> None:
    """Explain one rule: what it detects, why it matters, an example, the fix and its safety."""
    from tracedoc.engine.rules import builtin_rules

    key = name_or_code.strip()
    matches = [r for r in builtin_rules() if key.upper() == r.code or key == r.name]
    if not matches:
        raise fail(f"no rule {key!r} (see `tracedoc rules`)")
    r = matches[0]
    c = Console(highlight=False)
    c.print(f"[bold]{r.code} {r.name}[/] ({r.severity}): {escape(r.summary)}\n")
    c.print(f"[bold]condition[/]  {escape(r.condition.source)}")
    if r.estimated_saving_ms is not None:
        c.print(
            f"[bold]estimated saving (ms/step)[/]  {escape(r.estimated_saving_ms.source)}: {escape(r.saving_basis)}"
        )
    for section, title in (
        ("what", "What it detects"),
        ("why", "Why it matters"),
        ("example", "Example"),
        ("fix", "Fix"),
        ("safety", "Fix safety"),
    ):
        c.print(f"\n[bold]{title}[/]" + (escape(f" [{r.fix.safety}]") if section == "safety" else ""))
        c.print(escape(r.docs[section].strip("\n")))
    if r.fix.knobs:
        c.print(f"\n[bold]fix-loop knobs[/]  {', '.join(r.fix.knobs)}")


@app.command("signals")
def list_signals() -> None:
    """List the signals rules can use, with units and definitions."""
    from rich.table import Table

    from tracedoc.signals import SIGNALS

    table = Table(show_edge=False)
    for col in ("signal", "unit", "definition"):
        table.add_column(col)
    for name, sig in sorted(SIGNALS.items()):
        table.add_row(name, sig.unit, sig.summary)
    Console(highlight=False).print(table)


def _register_fix_loop() -> None:
    try:
        from tracedoc.fixloop.command import fix_loop
    except ImportError:
        return
    app.command("fix-loop")(fix_loop)


_register_fix_loop()


def main() -> None:
    """Console-script entry point.

    Once the command has finished and its output is flushed, the process ends with
    ``os._exit``: tearing down the interpreter would free a large trace's frames object
    by object (about 0.2 s for a 300 MB trace, measured in benchmarks/RESULTS.md) for
    nothing. Nothing tracedoc runs relies on ``atexit`` handlers.
    """
    code = 0
    try:
        app(standalone_mode=True)
    except SystemExit as exc:
        code = exc.code if isinstance(exc.code, int) else (0 if exc.code is None else 1)
    except KeyboardInterrupt:
        err_console.print("tracedoc: interrupted")
        code = 130
    try:
        sys.stdout.flush()
        sys.stderr.flush()
    except (OSError, ValueError):  # a closed pipe: nothing more to say
        pass
    os._exit(code)
