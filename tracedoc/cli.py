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
    traces: List[str] = typer.Argument(
        ...,
        metavar="TRACE",
        help="Trace files (.json, .json.gz), globs, folders (ranks of one job, or unrelated traces) or fsspec URLs.",
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
        help="Worker processes for several traces (default: min(CPUs, traces)); LocalCluster workers with --scheduler local.",
    ),
    rules: Optional[List[Path]] = typer.Option(
        None,
        "--rules",
        metavar="PATH",
        help="Extra rule files (TOML) or folders of them, e.g. a CI budget; repeatable.",
    ),
    # -- several traces (tracedoc/ranks) --
    scheduler: Optional[str] = typer.Option(
        None, "--scheduler", help="Run the per-trace jobs on Dask: 'local' (a LocalCluster) or tcp://HOST:8786."
    ),
    ranks: Optional[bool] = typer.Option(
        None, "--ranks/--no-ranks", help="Treat the traces as ranks of one job (default: decided from the traces)."
    ),
    follow_symlinks: bool = typer.Option(False, "--follow-symlinks", help="Follow symlinks that leave a folder."),
    strict: bool = typer.Option(False, "--strict", help="An incomplete analysis (a trace that failed) is a failure."),
    no_cache: bool = typer.Option(False, "--no-cache", help="Neither read nor write the frame cache."),
    cache_dir: Optional[Path] = typer.Option(None, "--cache-dir", help="Frame cache folder (default: user cache dir)."),
) -> None:
    """Analyze traces (one, several, a glob, or a folder of per-rank traces) and print ranked findings."""
    from tracedoc.progress import progress_for
    from tracedoc.ranks.command import analyze_many, progress_path, render_many, wants_many

    label = traces[0] if len(traces) == 1 else " ".join(traces)
    try:
        from tracedoc.cache import default_cache

        cache = default_cache(cache_dir, enabled=not no_cache)
        many = wants_many(traces, ranks, scheduler)
        with progress_for(progress_path(traces), json_output=format is Format.json) as progress:
            if many:
                report = analyze_many(
                    traces,
                    jobs=jobs,
                    scheduler=scheduler,
                    select=select,
                    ignore=ignore,
                    rule_paths=[str(r) for r in rules or []],
                    ranks=ranks,
                    follow_symlinks=follow_symlinks,
                    strict=strict,
                    cache_dir=str(cache.directory) if cache else None,
                    progress=progress,
                )
            else:
                from tracedoc.load import load

                extra = None
                if rules:  # a bad rule file fails before a long load
                    from tracedoc.engine.rules import load_rules

                    extra = load_rules(list(rules))
                loaded = load(traces[0], progress=progress, cache=cache)  # imports pandas while its workers decode
                from tracedoc.engine import analyze_trace

                if progress:
                    progress("computing signals and rules")
                report = analyze_trace(loaded, rules=extra, select=select, ignore=ignore)
                del loaded
    except TracedocError as exc:
        raise fail(str(exc), exc.exit_code) from None
    except MemoryError:
        raise fail(f"{label}: out of memory while analyzing") from None
    except Exception as exc:  # never a traceback for a bad trace
        if os.environ.get("TRACEDOC_DEBUG"):
            raise
        raise fail(
            f"{label}: cannot analyze ({type(exc).__name__}: {exc}); set TRACEDOC_DEBUG=1 for a traceback"
        ) from None
    from tracedoc.report.render import ConsoleRenderer, JsonRenderer, MarkdownRenderer

    if many:
        render_many(report, format.value)
    elif format is Format.json:
        sys.stdout.write(JsonRenderer().render(report) + "\n")
    elif format is Format.markdown:
        sys.stdout.write(MarkdownRenderer().render(report))
    else:
        ConsoleRenderer(Console(highlight=False)).render(report)
    raise typer.Exit(exit_code_for(report.findings, fail_on.value, exit_zero))


cache_app = typer.Typer(help="The frame cache: Parquet copies of loaded traces (see docs/scale.md).")
app.add_typer(cache_app, name="cache")


@cache_app.command("info")
def cache_info(cache_dir: Optional[Path] = typer.Option(None, "--cache-dir", help="Cache folder.")) -> None:
    """Print the cache folder, its entries and their size."""
    from tracedoc.cache import FrameCache

    i = FrameCache(cache_dir).info()
    print(f"{i.directory}: {i.entries} entr{'y' if i.entries == 1 else 'ies'}, {i.bytes / 1e6:,.1f} MB")
    if not i.available:
        print("pyarrow is not installed: nothing is cached (pip install 'tracedoc[cache]')")


@cache_app.command("clear")
def cache_clear(cache_dir: Optional[Path] = typer.Option(None, "--cache-dir", help="Cache folder.")) -> None:
    """Remove every cache entry."""
    from tracedoc.cache import FrameCache

    c = FrameCache(cache_dir)
    n = c.clear()
    print(f"removed {n} entr{'y' if n == 1 else 'ies'} from {c.directory}")


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
