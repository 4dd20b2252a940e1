"""``tracedoc analyze``: parse the options into :class:`~tracedoc.settings.Settings`, run the
one road (:func:`tracedoc.pipeline.analyze`, or the many-traces path of
:mod:`tracedoc.ranks.command`), write the report, and exit with the code the findings call for.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any, Callable, List, Optional

import typer
from rich.markup import escape

from tracedoc.cli.common import (
    EXIT_CODES,
    Color,
    Format,
    Level,
    app,
    config_changes,
    err_console,
    fail,
    funnel,
    progress_line,
)
from tracedoc.errors import display_path

# -- the option table -------------------------------------------------------------------------
TRACES = typer.Argument(
    ...,
    metavar="TRACE",
    help="Trace files (.json, .json.gz), '-' for standard input, a FIFO, globs ('runs/**/*.json.gz' too), "
    "folders (ranks of one job, unrelated traces, or a TensorBoard log directory: its newest run) or fsspec URLs.",
)
FORMAT = typer.Option(Format.text, "--format", "-f", help="Output format: text, json, markdown, github, sarif or html.")
OUTPUT = typer.Option(None, "--output", "-o", metavar="FILE", help="Write the report to FILE instead of stdout.")
TOP = typer.Option(None, "--top", min=1, metavar="N", help="Show only the first N findings (text).")
QUIET = typer.Option(False, "--quiet", "-q", help="Print only the closing summary line.")
COLOR = typer.Option(Color.auto, "--color", help="Colour: auto (terminal, NO_COLOR), always or never.")
FAIL_ON = typer.Option(None, "--fail-on", help="Exit 1 when a finding has this severity or higher (default info).")
EXIT_ZERO = typer.Option(False, "--exit-zero", help="Exit 0 even when there are findings.")
STRICT = typer.Option(
    False, "--strict", help="An incomplete analysis is a failure: exit 1 when a selected rule was skipped."
)
SELECT = typer.Option(
    None,
    "--select",
    metavar="RULES",
    help="Only these rules: codes, code prefixes or names, comma-separated or repeated.",
)
IGNORE = typer.Option(
    None,
    "--ignore",
    metavar="RULES",
    help="Skip these rules: codes, code prefixes or names, comma-separated or repeated.",
)
JOBS = typer.Option(
    None,
    "--jobs",
    "-j",
    min=1,
    metavar="N",
    help="Worker processes for several traces (default: min(CPUs, traces)); LocalCluster workers with "
    "--scheduler local.",
)
MIN_SAVING_MS = typer.Option(
    0.05, "--min-saving-ms", min=0.0, help="Report no finding whose saving is below this many ms per step."
)
MIN_SAVING_SHARE = typer.Option(
    0.01, "--min-saving-share", min=0.0, max=1.0, help="Report no finding whose saving is below this share of the step."
)
RULES = typer.Option(
    None, "--rules", metavar="PATH", help="Extra rule files (TOML) or folders of them, e.g. a CI budget; repeatable."
)
MAX_TRACE_BYTES = typer.Option(
    None,
    "--max-trace-bytes",
    metavar="SIZE",
    help="Largest trace accepted, in JSON bytes after decompression, e.g. 16G "
    "(default: $TRACEDOC_MAX_TRACE_BYTES or 1G).",
)
SCHEDULER = typer.Option(
    None, "--scheduler", help="Run the per-trace jobs on Dask: 'local' (a LocalCluster) or tcp://HOST:8786."
)
RANKS = typer.Option(
    None, "--ranks/--no-ranks", help="Treat the traces as ranks of one job (default: decided from the traces)."
)
FOLLOW_SYMLINKS = typer.Option(False, "--follow-symlinks", help="Follow symlinks that leave a folder.")
NO_CACHE = typer.Option(False, "--no-cache", help="Neither read nor write the frame cache.")
CACHE_DIR = typer.Option(None, "--cache-dir", help="Frame cache folder (default: user cache dir).")
SHOW_SKIPPED = typer.Option(
    False, "--show-skipped", help="List every skipped rule with its reason (text; default: one line of their codes)."
)


@app.command(epilog=EXIT_CODES)
def analyze(
    traces: List[str] = TRACES,
    format: Format = FORMAT,
    output: Optional[Path] = OUTPUT,
    top: Optional[int] = TOP,
    quiet: bool = QUIET,
    color: Color = COLOR,
    fail_on: Optional[Level] = FAIL_ON,
    exit_zero: bool = EXIT_ZERO,
    strict: bool = STRICT,
    select: Optional[List[str]] = SELECT,
    ignore: Optional[List[str]] = IGNORE,
    jobs: Optional[int] = JOBS,
    min_saving_ms: float = MIN_SAVING_MS,
    min_saving_share: float = MIN_SAVING_SHARE,
    rules: Optional[List[Path]] = RULES,
    max_trace_bytes: Optional[str] = MAX_TRACE_BYTES,
    scheduler: Optional[str] = SCHEDULER,
    ranks: Optional[bool] = RANKS,
    follow_symlinks: bool = FOLLOW_SYMLINKS,
    no_cache: bool = NO_CACHE,
    cache_dir: Optional[Path] = CACHE_DIR,
    show_skipped: bool = SHOW_SKIPPED,
) -> None:
    """Analyze traces (one, several, a glob, or a folder of per-rank or unrelated traces) and print ranked findings.

    Defaults come from [tool.tracedoc] in the closest pyproject.toml (see README);
    options given here win.
    """
    from tracedoc.cache import default_cache
    from tracedoc.ranks.command import analyze_many, progress_path, wants_many

    label = traces[0] if len(traces) == 1 else " ".join(traces)
    max_bytes = _parse_size(max_trace_bytes)
    if output is not None and not output.absolute().parent.is_dir():  # before a long analysis
        raise fail(f"{output}: cannot write (no such directory)")
    with funnel(label, "analyze", "analyzing"):
        options = _options(
            select=split_selectors(select),
            ignore=split_selectors(ignore),
            rule_paths=rules or (),
            fail_on=fail_on.value if fail_on is not None else None,
            strict=strict,
            min_saving_ms=min_saving_ms,
            min_saving_share=min_saving_share,
            max_trace_bytes=max_bytes,
        )
        settings = _settings(traces[0], **options)
        # a bad rule file or override fails before a long load (Settings.rules() is cached)
        if settings.rule_paths or settings.thresholds:
            settings.rules()
        cache = default_cache(cache_dir, enabled=not no_cache, env=settings.env)
        with progress_line(
            progress_path(traces), json_output=format is Format.json, off=settings.env.no_progress
        ) as progress:
            if wants_many(traces, ranks, scheduler):
                report = analyze_many(
                    traces,
                    settings,
                    rules=settings.rules(),
                    jobs=jobs,
                    scheduler=scheduler,
                    ranks=ranks,
                    follow_symlinks=follow_symlinks,
                    cache_dir=str(cache.directory) if cache else None,
                    progress=progress,
                )
            else:
                report = _analyze_one(traces[0], settings, cache, progress)  # the frames are freed here
    from tracedoc.cli.output import emit
    from tracedoc.render.report import terminal_options

    # a value no renderer can write must still end in one line, not a traceback
    with (
        funnel(label, "write the report", "writing the report"),
        terminal_options(show_skipped=show_skipped, config=config_changes(settings, traces[0], options)),
    ):
        shown = settings.rules() if format is Format.sarif else None  # only SARIF shows them (pandas)
        emit(report, format, output=output, top=top, quiet=quiet, color=color, rules=shown)
    raise typer.Exit(_exit_code(report, settings.fail_on, exit_zero, settings.strict))


def split_selectors(values: Optional[List[str]]) -> Optional[List[str]]:
    """``["TD101,TD202", "TD3"]`` -> ``["TD101", "TD202", "TD3"]`` (None stays None)."""
    if values is None:
        return None
    return [p.strip() for v in values for p in v.split(",") if p.strip()]


def _parse_size(text: Optional[str]) -> Optional[int]:
    """``--max-trace-bytes`` in bytes (None: not given).

    Raises:
        typer.Exit: 2, after one line, for a size :func:`tracedoc.load.source.parse_size` refuses.
    """
    if text is None:
        return None
    from tracedoc.load.source import parse_size

    try:
        return parse_size(text)
    except ValueError as exc:
        raise fail(f"--max-trace-bytes: {exc}") from None


def _settings(trace: str, **options: Any) -> Any:
    """The :class:`~tracedoc.settings.Settings` for ``trace``: ``[tool.tracedoc]`` found from the
    trace's folder up, then the working directory's, with the command line's ``options`` winning.

    Raises:
        tracedoc.config.ConfigError: a malformed ``[tool.tracedoc]`` table.
    """
    from tracedoc.settings import Settings

    return Settings.resolve(trace, **options)


def _options(
    select: Optional[List[str]] = None,
    ignore: Optional[List[str]] = None,
    rule_paths: Any = (),
    fail_on: Optional[str] = None,
    strict: bool = False,
    min_saving_ms: float = MIN_SAVING_MS.default,
    min_saving_share: float = MIN_SAVING_SHARE.default,
    max_trace_bytes: Optional[int] = None,
) -> dict[str, Any]:
    """The keywords ``analyze`` gives :func:`_settings` from its options; the defaults are
    those of an ``analyze`` given none."""
    return dict(
        select=select,
        ignore=ignore,
        rule_paths=rule_paths,
        fail_on=fail_on,
        strict=strict,
        min_saving_ms=min_saving_ms,
        min_saving_share=min_saving_share,
        max_trace_bytes=max_trace_bytes,
    )


def default_settings(trace: str) -> Any:
    """The :class:`~tracedoc.settings.Settings` ``tracedoc analyze TRACE`` uses when given no
    option (the floors at their option defaults, ``[tool.tracedoc]`` and ``TRACEDOC_*`` read
    as for any run): what ``tracedoc cache info TRACE`` checks a stored report against.

    Raises:
        tracedoc.config.ConfigError: a malformed ``[tool.tracedoc]`` table.
    """
    return _settings(trace, **_options())


def _analyze_one(path: str, settings: Any, cache: Any, progress: Optional[Callable[[str], None]]) -> Any:
    """Load one trace (warning on stderr about impossible values dropped) and analyze it into
    its :class:`~tracedoc.report.model.Report`, which holds all any renderer needs (the
    frames are freed on return)."""
    from tracedoc import pipeline

    # the frame cache serves regular files only (a stream has no size or mtime to key on)
    use_cache = cache if Path(path).is_file() else None
    reports = use_cache.reports(path, settings) if use_cache is not None else None
    stored = _stored_report(reports, path) if reports is not None else None
    if stored is not None:  # the same trace, code, settings and rule files: the report as it was made
        _warn_dropped(path, stored.trace.get("dropped_events") or {})
        return stored
    from tracedoc.load import load

    loaded = load(path, progress=progress, max_bytes=settings.max_trace_bytes, cache=use_cache)
    _warn_dropped(loaded.path, loaded.dropped_events)
    if progress:
        progress("computing signals and rules")
    report = pipeline.analyze(
        loaded,
        settings,
        rules=settings.rules(),  # thresholds applied, selectors checked
        signal_store=use_cache.signals(path) if use_cache is not None else None,
    )
    if reports is not None:
        _store_report(reports, report)
    return report


def _stored_report(reports: Any, path: str) -> Any:
    """The :class:`~tracedoc.report.model.Report` a :class:`tracedoc.cache.ReportStore` holds
    for this trace, or None (none, or not a report this version reads)."""
    from tracedoc.errors import TracedocError
    from tracedoc.report.model import Report

    d = reports.get(path)
    if d is None:
        return None
    try:
        return Report.from_dict(d)
    except (TracedocError, KeyError, TypeError, ValueError, AttributeError):
        return None


def _store_report(reports: Any, report: Any) -> None:
    """Store ``report`` when it comes back from JSON unchanged (no NaN, no type of its own), so
    that a stored report renders as the fresh one did."""
    import orjson

    from tracedoc.report.model import Report

    try:
        d = orjson.loads(orjson.dumps(report.to_dict()))
        if Report.from_dict(d).to_dict() != d:
            return
    except Exception:  # a value JSON cannot carry: the report is not stored, the run goes on
        return
    reports.put(d)


def _warn_dropped(path: str, dropped: dict[str, int]) -> None:
    """The one stderr line about impossible values the loader dropped (none: nothing)."""
    if dropped:
        parts = ", ".join(f"{n} with {why}" for why, n in dropped.items())
        err_console.print(
            f"tracedoc: warning: {escape(display_path(path))}: dropped impossible values: {escape(parts)}",
            soft_wrap=True,
        )


def _exit_code(report: Any, fail_on: str, exit_zero: bool, strict: bool) -> int:
    """0; 1 when a finding's severity is at or above ``fail_on`` (unless ``exit_zero``), or,
    with ``strict``, when a selected rule was skipped (``--exit-zero`` forgives findings, not
    an incomplete analysis: the skipped codes are named on stderr)."""
    from tracedoc.report.model import Severity

    if not exit_zero and any(Severity(f.severity) >= Severity(fail_on) for f in report.findings):
        return 1
    if strict:
        from tracedoc.cli.output import skipped_codes
        from tracedoc.text import plural

        skipped = skipped_codes(report)
        if skipped:
            err_console.print(
                f"tracedoc: strict: incomplete analysis, {plural(len(skipped), 'selected rule')} skipped: "
                + escape(", ".join(skipped)),
                soft_wrap=True,
            )
            return 1
    return 0
