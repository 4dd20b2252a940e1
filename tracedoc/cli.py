"""The ``tracedoc`` command line (typer + rich).

Exit codes (ruff's convention): 0 clean, 1 findings at or above ``--fail-on``,
2 error (bad input, bad usage). The report goes to stdout; progress, warnings and
errors go to stderr, errors as a single line.
"""

from __future__ import annotations

import contextlib
import os
import sys
from enum import Enum
from pathlib import Path
from typing import List, Optional

import typer
from rich.console import Console
from rich.markup import escape

from tracedoc._version import __version__
from tracedoc.errors import TracedocError

app = typer.Typer(
    add_completion=False,
    context_settings={"help_option_names": ["-h", "--help"]},
    no_args_is_help=True,
    rich_markup_mode=None,
    help="Diagnose PyTorch Profiler traces: ranked findings with evidence, estimated savings and fixes.",
)
err_console = Console(stderr=True, highlight=False)


class Format(str, Enum):
    """Output formats; every command that has ``--format`` takes these names."""

    text = "text"
    json = "json"
    markdown = "markdown"
    github = "github"
    sarif = "sarif"
    html = "html"


class Color(str, Enum):
    auto = "auto"
    always = "always"
    never = "never"


class Level(str, Enum):
    info = "info"
    warning = "warning"
    error = "error"


_LEVELS = {"info": 0, "warning": 1, "error": 2}

EXIT_CODES = (
    "Exit codes: 0 no finding at or above --fail-on; "
    "1 a finding at or above --fail-on, or with --strict an incomplete analysis (a selected rule skipped); "
    "2 bad input, bad usage or an internal error."
)


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
    from tracedoc import hostfacts

    hostfacts.check()  # a bad TRACEDOC_HOST_* value is one line and exit 2, before any work


def exit_code_for(findings, fail_on: str, exit_zero: bool) -> int:
    """0, or 1 when a finding's severity is at or above ``fail_on`` (and not ``exit_zero``)."""
    if exit_zero:
        return 0
    return 1 if any(_LEVELS[f.severity] >= _LEVELS[fail_on] for f in findings) else 0


def split_selectors(values: Optional[List[str]]) -> Optional[List[str]]:
    """``["TD101,TD202", "TD3"]`` -> ``["TD101", "TD202", "TD3"]`` (None stays None)."""
    if values is None:
        return None
    return [p.strip() for v in values for p in v.split(",") if p.strip()]


def check_selectors(selectors: List[str], rules: list) -> None:
    """Raise a one-line usage error, with a "did you mean" suggestion, for a selector
    that matches no rule (code, code prefix or name; difflib's closest match)."""
    import difflib

    names = [r.name for r in rules] + [r.code for r in rules]
    for sel in selectors:
        if any(sel == r.name or r.code.startswith(sel.upper()) for r in rules):
            continue
        close = difflib.get_close_matches(sel.upper() if sel[:1].isupper() else sel, names, n=1, cutoff=0.5)
        hint = f"; did you mean {close[0]!r}?" if close else " (see `tracedoc rules`)"
        raise fail(f"no rule matches {sel!r}{hint}")


def make_console(color: Color, file=None, width: Optional[int] = None) -> Console:
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


@app.command(epilog=EXIT_CODES)
def analyze(
    traces: List[str] = typer.Argument(
        ...,
        metavar="TRACE",
        help="Trace files (.json, .json.gz), '-' for standard input, a FIFO, globs, folders (ranks of one job, "
        "or unrelated traces) or fsspec URLs.",
    ),
    format: Format = typer.Option(
        Format.text, "--format", "-f", help="Output format: text, json, markdown, github, sarif or html."
    ),
    output: Optional[Path] = typer.Option(
        None, "--output", "-o", metavar="FILE", help="Write the report to FILE instead of stdout."
    ),
    top: Optional[int] = typer.Option(None, "--top", min=1, metavar="N", help="Show only the first N findings (text)."),
    quiet: bool = typer.Option(False, "--quiet", "-q", help="Print only the closing summary line."),
    color: Color = typer.Option(Color.auto, "--color", help="Colour: auto (terminal, NO_COLOR), always or never."),
    fail_on: Optional[Level] = typer.Option(
        None, "--fail-on", help="Exit 1 when a finding has this severity or higher (default info)."
    ),
    exit_zero: bool = typer.Option(False, "--exit-zero", help="Exit 0 even when there are findings."),
    strict: bool = typer.Option(
        False, "--strict", help="An incomplete analysis is a failure: exit 1 when a selected rule was skipped."
    ),
    select: Optional[List[str]] = typer.Option(
        None,
        "--select",
        metavar="RULES",
        help="Only these rules: codes, code prefixes or names, comma-separated or repeated.",
    ),
    ignore: Optional[List[str]] = typer.Option(
        None,
        "--ignore",
        metavar="RULES",
        help="Skip these rules: codes, code prefixes or names, comma-separated or repeated.",
    ),
    jobs: Optional[int] = typer.Option(
        None,
        "--jobs",
        "-j",
        min=1,
        metavar="N",
        help="Worker processes for several traces (default: min(CPUs, traces)); LocalCluster workers with "
        "--scheduler local.",
    ),
    min_saving_ms: float = typer.Option(
        0.05, "--min-saving-ms", min=0.0, help="Report no finding whose saving is below this many ms per step."
    ),
    min_saving_share: float = typer.Option(
        0.01,
        "--min-saving-share",
        min=0.0,
        max=1.0,
        help="Report no finding whose saving is below this share of the step.",
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
    # -- several traces (tracedoc/ranks) --
    scheduler: Optional[str] = typer.Option(
        None, "--scheduler", help="Run the per-trace jobs on Dask: 'local' (a LocalCluster) or tcp://HOST:8786."
    ),
    ranks: Optional[bool] = typer.Option(
        None, "--ranks/--no-ranks", help="Treat the traces as ranks of one job (default: decided from the traces)."
    ),
    follow_symlinks: bool = typer.Option(False, "--follow-symlinks", help="Follow symlinks that leave a folder."),
    no_cache: bool = typer.Option(False, "--no-cache", help="Neither read nor write the frame cache."),
    cache_dir: Optional[Path] = typer.Option(None, "--cache-dir", help="Frame cache folder (default: user cache dir)."),
) -> None:
    """Analyze traces (one, several, a glob, or a folder of per-rank or unrelated traces) and print ranked findings.

    Defaults come from [tool.tracedoc] in the closest pyproject.toml (see README);
    options given here win.
    """
    from tracedoc.config import apply_thresholds, load_config
    from tracedoc.errors import display_path
    from tracedoc.progress import progress_for
    from tracedoc.ranks.command import analyze_many, progress_path, wants_many

    label = traces[0] if len(traces) == 1 else " ".join(traces)
    trace = Path(traces[0])  # where [tool.tracedoc] is looked up, and the name in errors
    max_bytes = None
    if max_trace_bytes is not None:
        from tracedoc.load.source import parse_size

        try:
            max_bytes = parse_size(max_trace_bytes)
        except ValueError as exc:
            raise fail(f"--max-trace-bytes: {exc}") from None

    if output is not None and not output.absolute().parent.is_dir():  # before a long analysis
        raise fail(f"{output}: cannot write (no such directory)")
    loaded = None
    try:
        from tracedoc.settings import Settings

        cfg = load_config(trace)
        settings = Settings.from_config(
            cfg,
            select=split_selectors(select),
            ignore=split_selectors(ignore),
            rule_paths=rules or (),
            fail_on=fail_on.value if fail_on is not None else None,
            strict=strict,
            min_saving_ms=min_saving_ms,
            min_saving_share=min_saving_share,
            max_trace_bytes=max_bytes,
        )
        select = list(settings.select) if settings.select is not None else None
        ignore = list(settings.ignore) if settings.ignore is not None else None
        fail_level, strict, rule_paths = settings.fail_on, settings.strict, list(settings.rule_paths)

        def prepare_rules() -> list:
            from tracedoc.engine.rules import load_rules  # imports pandas

            out = load_rules(rule_paths)
            if cfg.thresholds:
                out = apply_thresholds(out, cfg.thresholds, cfg.path)
            check_selectors([*(select or []), *(ignore or [])], out)
            return out

        # a bad rule file or override fails before a long load; otherwise the rules (and
        # pandas) are imported while the loader's workers decode the trace
        all_rules = prepare_rules() if rule_paths or cfg.thresholds else None
        from tracedoc.cache import default_cache

        cache = default_cache(cache_dir, enabled=not no_cache)
        many = wants_many(traces, ranks, scheduler)
        with progress_for(progress_path(traces), json_output=format is Format.json) as progress:
            if many:
                if all_rules is None:
                    all_rules = prepare_rules()
                report = analyze_many(
                    traces,
                    jobs=jobs,
                    scheduler=scheduler,
                    select=select,
                    ignore=ignore,
                    rule_paths=rule_paths,
                    ranks=ranks,
                    follow_symlinks=follow_symlinks,
                    strict=strict,
                    cache_dir=str(cache.directory) if cache else None,
                    progress=progress,
                    rules=all_rules,  # with the [tool.tracedoc] threshold overrides, as for one trace
                    min_saving_ms=min_saving_ms,
                    min_saving_share=min_saving_share,
                    max_bytes=max_bytes,
                )
            else:
                from tracedoc.load import load

                # the frame cache serves regular files only (a stream has no size or mtime to key on)
                use_cache = cache if trace.is_file() else None
                loaded = load(traces[0], progress=progress, max_bytes=max_bytes, cache=use_cache)
                if loaded.dropped_events:
                    parts = ", ".join(f"{n} with {why}" for why, n in loaded.dropped_events.items())
                    err_console.print(
                        f"tracedoc: warning: {escape(display_path(loaded.path))}: dropped impossible values: "
                        f"{escape(parts)}",
                        soft_wrap=True,
                    )
                from tracedoc import pipeline

                if all_rules is None:
                    all_rules = prepare_rules()

                if progress:
                    progress("computing signals and rules")
                report = pipeline.analyze(
                    loaded,
                    settings,
                    rules=all_rules,  # prepared above (thresholds applied, selectors checked)
                    signal_store=use_cache.signals(traces[0]) if use_cache is not None else None,
                )
                if format is not Format.html:
                    loaded = None  # free the frames before rendering
    except typer.Exit:
        raise
    except TracedocError as exc:
        raise fail(str(exc), exc.exit_code) from None
    except MemoryError:
        raise fail(f"{display_path(label)}: out of memory while analyzing") from None
    except RecursionError:
        raise fail(f"{display_path(label)}: cannot analyze (nested too deeply)") from None
    except Exception as exc:  # never a traceback for a bad trace
        if os.environ.get("TRACEDOC_DEBUG"):
            raise
        raise fail(
            f"{display_path(label)}: cannot analyze ({type(exc).__name__}: {display_path(str(exc))[:300]}); "
            "set TRACEDOC_DEBUG=1 for a traceback"
        ) from None
    try:  # a value no renderer can write must still end in one line, not a traceback
        emit(report, format, output=output, top=top, quiet=quiet, color=color, trace=loaded)
    except (typer.Exit, BrokenPipeError):
        raise
    except TracedocError as exc:  # e.g. --format html without plotly
        raise fail(str(exc), exc.exit_code) from None
    except Exception as exc:
        if os.environ.get("TRACEDOC_DEBUG"):
            raise
        raise fail(
            f"{display_path(label)}: cannot write the report ({type(exc).__name__}: {display_path(str(exc))[:300]}); "
            "set TRACEDOC_DEBUG=1 for a traceback"
        ) from None
    code = exit_code_for(report.findings, fail_level, exit_zero)
    if strict and not code:  # --exit-zero forgives findings, not an incomplete analysis
        skipped = _skipped_of(report)
        if skipped:
            from tracedoc.text import plural

            err_console.print(
                f"tracedoc: strict: incomplete analysis, {plural(len(skipped), 'selected rule')} skipped: "
                + escape(", ".join(skipped)),
                soft_wrap=True,
            )
            code = 1
    raise typer.Exit(code)


def _skipped_of(report) -> List[str]:
    if hasattr(report, "traces"):  # unrelated traces: one report each
        return sorted({k.code for r in report.traces if r.report for k in r.report.skipped})
    if hasattr(report, "ranks"):
        return sorted({k.code for r in report.ranks if r.report for k in r.report.skipped})
    return [k.code for k in report.skipped]


def render_document(report, format: Format) -> Optional[str]:
    """The whole output of a document format (json, markdown, github, sarif, html) as text;
    None for ``text``, which prints to a console. Rendered before any file is opened, so a
    failure (``--format html`` without plotly) leaves no half-written file."""
    from tracedoc.report.render import JsonRenderer, MarkdownRenderer

    multi = hasattr(report, "ranks")
    if format is Format.json:  # a Report or a MultiRankReport: both have to_dict()
        return JsonRenderer().render(report) + "\n"
    if format is Format.github:
        from tracedoc.report.github import GithubRenderer

        if not multi:
            return GithubRenderer().render(report)
        r = GithubRenderer()
        lines = [ln for rr in report.ranks if rr.report for ln in r.lines(rr.report, rr.path)]
        return "\n".join([*lines, _multi_summary(report)]) + "\n"
    if format is Format.sarif:
        from tracedoc.report.sarif import SarifRenderer

        return SarifRenderer().render(report) + "\n"
    if format is Format.html:
        from tracedoc.report.html import HtmlRenderer

        return HtmlRenderer().render(report)  # no kernel charts without the loaded trace (see emit)
    if format is Format.markdown:
        if multi:
            from tracedoc.ranks import render_markdown

            return render_markdown(report)
        return MarkdownRenderer().render(report)
    return None


def emit(report, format: Format, output=None, top=None, quiet=False, color=Color.auto, trace=None) -> None:
    """Render ``report`` (a Report or a multi-rank report) in ``format`` to ``output`` or stdout.

    ``trace``: the loaded Trace, for the HTML report's kernel charts.

    Raises:
        typer.Exit(2): ``output`` cannot be written (one-line message).
        TracedocError: a renderer cannot run (``--format html`` without plotly).
    """
    from tracedoc.report.render import ConsoleRenderer, summary_line

    if hasattr(report, "traces"):  # a folder of unrelated traces: one report each
        _emit_many_traces(report, format, output=output, quiet=quiet, color=color)
        return
    multi = hasattr(report, "ranks")
    if format is Format.html:
        from tracedoc.report.html import HtmlRenderer

        document: Optional[str] = HtmlRenderer().render(report, trace=trace)
    else:
        document = None if format is Format.text else render_document(report, format)
    with _open_output(output) as (out, fh):
        if document is not None:
            out.write(document)
        elif quiet:
            if multi:
                text = _multi_summary(report)
            else:
                con = make_console(color, file=fh)
                text = summary_line(report, con.width if con.is_terminal else None)
            out.write(text + "\n")
        elif multi:
            from tracedoc.ranks import render_text

            con = make_console(color, file=fh)
            render_text(report, con)
            con.print(f"\n{_multi_summary(report)}", style="bold", highlight=False)
        else:
            ConsoleRenderer(make_console(color, file=fh), top=top).render(report)


@contextlib.contextmanager
def _open_output(output: Optional[Path]):
    """Where a report goes: ``output`` opened for writing (closed afterwards), else stdout.

    Yields ``(stream, file)``: the stream to write to, and the opened file (None for stdout),
    which a rich console takes as its ``file``.

    Raises:
        typer.Exit: code 2, after one stderr line naming ``output``, when it cannot be opened.
    """
    try:
        fh = open(output, "w", encoding="utf-8") if output is not None else None  # noqa: SIM115
    except OSError as exc:
        raise fail(f"{output}: cannot write ({exc.strerror or exc})") from None
    try:
        yield (fh if fh is not None else sys.stdout), fh
    finally:
        if fh is not None:
            fh.close()


def _multi_summary(mr) -> str:
    from tracedoc.text import plural

    n_findings = sum(len(r.report.findings) for r in mr.ranks if r.report)
    n_err = sum(1 for r in mr.ranks if r.error)
    line = f"{plural(len(mr.ranks), 'trace')}: {plural(n_findings, 'finding')} in all"
    return line + (f"; {plural(n_err, 'trace')} could not be analyzed" if n_err else "")


LIST_FORMATS = (Format.text, Format.json, Format.markdown)


def _list_format(format: Format, command: str) -> None:
    if format not in LIST_FORMATS:
        raise fail(f"tracedoc {command}: --format {format.value} is not available here (text, json or markdown)")


def _md_table(header: List[str], rows: List[List[str]]) -> str:
    def cell(v: str) -> str:
        return str(v).replace("|", "\\|").replace("\n", " ")

    lines = ["| " + " | ".join(header) + " |", "|" + "---|" * len(header)]
    lines += ["| " + " | ".join(cell(c) for c in r) + " |" for r in rows]
    return "\n".join(lines) + "\n"


def _emit_many_traces(report, format: Format, output=None, quiet=False, color=Color.auto) -> None:
    """Write a report per unrelated trace (:class:`tracedoc.ranks.summary.MultiTraceReport`).

    Raises:
        TracedocError: a format that describes one trace or one job (github, sarif, html).
    """
    from tracedoc.ranks.render import render_multi_markdown, render_multi_text
    from tracedoc.report.render import JsonRenderer
    from tracedoc.text import plural

    if format not in (Format.text, Format.json, Format.markdown):
        raise TracedocError(
            f"--format {format.value} describes one trace or the ranks of one job; "
            "for several unrelated traces use text, json or markdown"
        )
    with _open_output(output) as (out, fh):
        if quiet:
            n = len(report.findings)
            out.write(f"{plural(len(report.traces), 'trace')}: {plural(n, 'finding')}\n")
        elif format is Format.json:
            out.write(JsonRenderer().render(report) + "\n")
        elif format is Format.markdown:
            out.write(render_multi_markdown(report))
        else:
            render_multi_text(report, make_console(color, file=fh))


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
def list_rules(
    format: Format = typer.Option(Format.text, "--format", "-f", help="Output format: text, json or markdown."),
) -> None:
    """List the rules: code, name, severity, fix safety, summary."""
    from rich.table import Table

    from tracedoc.engine.rules import builtin_rules

    _list_format(format, "rules")
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
    header = ["code", "name", "severity", "fix safety", "summary"]
    rows = [[r.code, r.name, r.severity, r.fix.safety, r.summary] for r in rules]
    if format is Format.markdown:
        sys.stdout.write(_md_table(header, [[f"`{c}`" if j < 2 else c for j, c in enumerate(r)] for r in rows]))
        return
    table = Table(show_edge=False)
    for col in header:
        table.add_column(col, no_wrap=col != "summary", overflow="fold" if col == "summary" else "ellipsis")
    for row in rows:
        table.add_row(*(escape(c) for c in row))
    Console(highlight=False).print(table)


@app.command("rule")
def explain_rule(
    name_or_code: str = typer.Argument(..., help="A rule code (TD101) or name (dataloader-stall)."),
) -> None:
    """Explain one rule: what it detects, why it matters, an example, the fix and its safety.

    Code (the example and the fix) is printed line for line, never re-wrapped.
    """
    from tracedoc.engine.rules import builtin_rules

    key = name_or_code.strip()
    rules = builtin_rules()
    matches = [r for r in rules if key.upper() == r.code or key == r.name]
    if not matches:
        import difflib

        close = difflib.get_close_matches(key, [r.code for r in rules] + [r.name for r in rules], n=1, cutoff=0.5)
        raise fail(f"no rule {key!r}" + (f"; did you mean {close[0]!r}?" if close else " (see `tracedoc rules`)"))
    r = matches[0]
    c = Console(highlight=False)
    c.print(f"[bold]{r.code} {r.name}[/] ({r.severity}): {escape(r.summary)}\n")
    c.print(f"[bold]condition[/]  {escape(r.condition.source)}", soft_wrap=True)
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
        # the example and the fix are code: soft_wrap keeps each line whole (the terminal may
        # fold a long one visually, but no newline is inserted into it)
        c.print(escape(r.docs[section].strip("\n")), soft_wrap=section in ("example", "fix"))
    if r.fix.knobs:
        c.print(f"\n[bold]fix-loop knobs[/]  {', '.join(r.fix.knobs)}")


@app.command("signals")
def list_signals(
    format: Format = typer.Option(Format.text, "--format", "-f", help="Output format: text, json or markdown."),
) -> None:
    """List the signals rules can use, with units and definitions."""
    from rich.table import Table

    from tracedoc.signals import SIGNALS

    _list_format(format, "signals")
    rows = [[name, sig.unit, sig.scope, sig.summary] for name, sig in sorted(SIGNALS.items())]
    if format is Format.json:
        import orjson

        data = [{"signal": n, "unit": u, "covers": c, "summary": d} for n, u, c, d in rows]
        sys.stdout.write(orjson.dumps(data, option=orjson.OPT_INDENT_2).decode() + "\n")
        return
    if format is Format.markdown:
        sys.stdout.write(
            _md_table(["signal", "unit", "covers", "definition"], [[f"`{n}`", u, c, d] for n, u, c, d in rows])
        )
        return
    table = Table(show_edge=False)
    table.add_column("signal", no_wrap=True)
    table.add_column("unit", no_wrap=True)
    table.add_column("covers", no_wrap=True)
    table.add_column("definition", overflow="fold")
    for row in rows:
        table.add_row(*(escape(x) for x in row))
    Console(highlight=False).print(table)


@app.command("diff")
def diff_command(
    before: Path = typer.Argument(..., help="Before: a trace, a saved JSON report, or a fix-loop trial directory."),
    after: Path = typer.Argument(..., help="After: a trace, a saved JSON report, or a fix-loop trial directory."),
    format: Format = typer.Option(Format.text, "--format", "-f", help="Output format: text, json or markdown."),
    fail_on_regression: Optional[float] = typer.Option(
        None, "--fail-on-regression", metavar="PCT", min=0.0, help="Exit 1 when the step time grew by more than PCT %."
    ),
) -> None:
    """Compare two analyses: step time, breakdown, findings, predicted vs measured savings."""
    _list_format(format, "diff")
    try:
        from tracedoc.diff import diff

        result = diff(before, after)
    except TracedocError as exc:
        raise fail(str(exc), exc.exit_code) from None
    except MemoryError:
        raise fail(f"{before} / {after}: out of memory while comparing") from None
    except Exception as exc:  # never a traceback for bad input
        if os.environ.get("TRACEDOC_DEBUG"):
            raise
        raise fail(
            f"{before} / {after}: cannot compare ({type(exc).__name__}: {exc}); TRACEDOC_DEBUG=1 shows a traceback"
        ) from None
    from tracedoc.report.diff import JsonDiffRenderer, MarkdownDiffRenderer, TextDiffRenderer

    if format is Format.json:
        sys.stdout.write(JsonDiffRenderer().render(result) + "\n")
    elif format is Format.markdown:
        sys.stdout.write(MarkdownDiffRenderer().render(result))
    else:
        TextDiffRenderer(Console(highlight=False)).render(result)
    raise typer.Exit(1 if fail_on_regression is not None and result.regressed(fail_on_regression) else 0)


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
    except Exception as exc:  # an abort or an internal error: one line, never a traceback
        if os.environ.get("TRACEDOC_DEBUG"):
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
