"""The ``tracedoc fix-loop`` command (registered by ``tracedoc/cli.py``).

The report (text, JSON or Markdown: ``--format``, the names ``tracedoc analyze`` uses) goes to stdout; progress, notes and errors to stderr.
Exit status: 0 the loop ran (whether or not a change was kept), 2 bad arguments, a
workload that cannot be loaded, or a baseline trial that failed, 130 interrupted (Ctrl-C),
143 terminated (SIGTERM), 129 hung up (SIGHUP); the summary is written all the same and
the running trial's process group is stopped. Nothing heavy (torch, pandas) is imported here.
"""

from __future__ import annotations

import contextlib
import math
import os
import re
import shutil
import signal
import sys
import time
from collections.abc import Iterator
from pathlib import Path
from typing import TYPE_CHECKING, Optional

import typer

if TYPE_CHECKING:
    from tracedoc.report.fixloop import FixLoopSummary
    from tracedoc.report.model import Finding

FORMATS = ("text", "json", "markdown")
#: Old ``--format`` names still accepted, with a warning on stderr: name -> current name.
DEPRECATED_FORMATS = {"table": "text"}


class RichProgress:
    """Progress on stderr: a line per trial start and end, a live elapsed counter on a terminal."""

    def __init__(self, console) -> None:
        self.console = console
        self.started = time.monotonic()
        self._status = None
        self._label = ""

    def trial_started(self, index: int, max_trials: int, change: str, finding: Finding | None) -> None:
        """Print which trial starts, what it changes and why (the finding's predicted saving, ms/step)."""
        from rich.markup import escape

        self._label = "baseline" if index == 0 else f"trial {index}/{max_trials}"
        why = ""
        if finding is not None:
            saving = finding.estimated_saving_ms
            pred = f", predicted saving {saving:.1f} ms/step" if isinstance(saving, (int, float)) else ""
            why = f"  ({finding.code} {finding.name}{pred})"
        self.console.print(f"[bold]{self._label}[/]: {escape(change)}{escape(why)}", soft_wrap=True)
        self._status = self.console.status(f"{self._label}: starting")
        self._status.start()

    def tick(self, elapsed_s: float) -> None:
        """Update the live line with the trial's and the loop's elapsed time."""
        if self._status is not None:
            total = time.monotonic() - self.started
            self._status.update(f"{self._label}: running {elapsed_s:.0f} s (loop {total:.0f} s)")

    def trial_finished(self, record) -> None:
        """Print the trial's outcome."""
        from rich.markup import escape

        if self._status is not None:
            self._status.stop()
            self._status = None
        total = time.monotonic() - self.started
        rc = record.repeats_check or {}
        if record.samples_per_s is not None and rc.get("verdict") == "disagree":
            what = f"its timed windows disagree, no figure shown ({rc.get('reason', '')})"
        elif record.samples_per_s is not None:
            what = f"{record.samples_per_s:.1f} samples/s, {record.step_time_ms:.1f} ms/step"
            inc = (record.ab or {}).get("incumbent") or {}
            if record.decision and inc.get("median_samples_per_s") and inc.get("step_time_ms"):
                # the incumbent's figures of the same rounds, beside the candidate's: the ratio's sides
                import statistics

                a_ms = statistics.median(inc["step_time_ms"])
                what += f" (A {inc['median_samples_per_s']:.1f} samples/s, {a_ms:.1f} ms/step in the same rounds)"
                what += f", B/A {record.decision['ratio_median']:.3f}"
            if record.speedup is not None and record.index > 0:
                what += f", {record.speedup:.2f}x baseline"
            if record.decision:
                what += f"; {record.decision['reason']}"
        else:
            what = record.error or ""
        self.console.print(
            f"  -> {record.status}: {escape(what)}  [dim]({record.elapsed_s:.0f} s, loop {total:.0f} s)[/]",
            soft_wrap=True,
        )

    def info(self, text: str) -> None:
        """Print a line about the running trial (A/B rounds, follow-ups)."""
        from rich.markup import escape

        self.console.print(f"  {escape(text)}", soft_wrap=True, highlight=False)

    def note(self, text: str) -> None:
        """Print a fix that is passed over, and why."""
        from rich.markup import escape

        self.console.print(f"  [dim]skip {escape(text)}[/]", soft_wrap=True)


#: What a fix-loop writes into ``--out``; ``--overwrite`` removes exactly these.
_OWN_FILES = ("summary.json", "summary.md", "final_config.json", "summary.json.tmp", "summary.md.tmp")
_TRIAL_DIR = re.compile(r"trial-\d{2,}")


def prepare_out(out_dir: Path, overwrite: bool) -> str | None:
    """Make ``out_dir`` ready for a new run; return an error message, or ``None``.

    A missing or empty directory is used as is. A directory that holds an earlier run
    (or anything else) is refused, unless ``overwrite``: then the earlier run's own files
    (``summary.*``, ``final_config.json``, ``trial-NN/``) are removed, and anything else
    in it makes the call refuse, so ``--overwrite`` never deletes files it did not write.
    """
    if out_dir.exists() and not out_dir.is_dir():
        return f"--out {out_dir}: exists and is not a directory"
    if not out_dir.exists():
        return None
    entries = list(out_dir.iterdir())
    if not entries:
        return None
    if not overwrite:
        return f"--out {out_dir}: not empty (an earlier run?); choose another directory or pass --overwrite"
    foreign = [e.name for e in entries if not (e.name in _OWN_FILES or (_TRIAL_DIR.fullmatch(e.name) and e.is_dir()))]
    if foreign:
        return f"--out {out_dir}: holds files a fix-loop did not write ({', '.join(sorted(foreign)[:3])}); not removing"
    for e in entries:
        if e.is_dir() and not e.is_symlink():
            shutil.rmtree(e)
        else:
            e.unlink()
    return None


def _install_signal_handlers() -> dict:
    """Turn SIGTERM and SIGHUP into :class:`tracedoc.fixloop.loop.Terminated` (a KeyboardInterrupt)."""
    from tracedoc.fixloop.loop import Terminated

    def handler(signum, frame):  # noqa: ARG001
        raise Terminated(signum)

    previous = {}
    for name in ("SIGTERM", "SIGHUP"):
        sig = getattr(signal, name, None)
        if sig is not None:
            try:
                previous[sig] = signal.signal(sig, handler)
            except (ValueError, OSError):  # not the main thread
                pass
    return previous


@contextlib.contextmanager
def _signals_raise_terminated() -> Iterator[None]:
    """Within the block, SIGTERM and SIGHUP raise :class:`tracedoc.fixloop.loop.Terminated`
    (:func:`_install_signal_handlers`); on leaving it they get their default action back."""
    previous = _install_signal_handlers()
    try:
        yield
    finally:
        for sig in previous:  # the report is written; a late SIGTERM/SIGHUP just ends the process
            signal.signal(sig, signal.SIG_DFL)


def _fail(console, message: str, code: int = 2) -> typer.Exit:
    from rich.markup import escape

    console.print(f"tracedoc: [red]error:[/] {escape(message)}", soft_wrap=True, highlight=False)
    return typer.Exit(code)


def _resolve_format(err, format_: str) -> str:
    """The ``--format`` to use: a deprecated name is replaced by its current one (with a
    warning on stderr); an unknown one fails (exit 2)."""
    if format_ in DEPRECATED_FORMATS:
        new = DEPRECATED_FORMATS[format_]
        err.print(f"tracedoc: warning: --format {format_} is deprecated; use --format {new}", highlight=False)
        format_ = new
    if format_ not in FORMATS:
        raise _fail(err, f"--format must be one of {', '.join(FORMATS)}, not {format_!r}")
    return format_


def _check_limits(
    err, max_trials: int, timeout: float, kill_grace: float, min_gain: float, ab_rounds: int, max_rounds: int
) -> None:
    """Fail (exit 2) when a numeric option is out of range (seconds for ``timeout`` and
    ``kill_grace``, a fraction for ``min_gain``)."""
    if not (math.isfinite(timeout) and math.isfinite(min_gain)):
        raise _fail(err, "--timeout and --min-gain must be finite numbers")
    if not (math.isfinite(kill_grace) and 0 < kill_grace <= 3600):
        raise _fail(err, "--kill-grace must be a number of seconds in (0, 3600]")
    if max_trials < 0 or timeout <= 0 or min_gain < 0:
        raise _fail(err, "--max-trials and --min-gain must be >= 0 and --timeout > 0")
    if ab_rounds < 5 or max_rounds < ab_rounds or max_rounds > 100:
        raise _fail(err, "--ab-rounds must be >= 5 and --max-rounds between --ab-rounds and 100")


def fix_loop(
    workload: Path = typer.Argument(
        ..., help="Workload file: a Python file with a frozen Config and run(config, out_dir)."
    ),
    set_: Optional[list[str]] = typer.Option(
        None,
        "--set",
        metavar="KNOB=VALUE",
        help="KNOB=VALUE for the starting configuration (repeatable); typed by the Config field. "
        "Step counts too, e.g. --set timed_steps=5.",
    ),
    max_trials: int = typer.Option(8, "--max-trials", help="Trials after the baseline, at most."),
    out: Optional[Path] = typer.Option(
        None, "--out", help="Output directory (default: runs/fix-loop-YYYYmmdd-HHMMSS)."
    ),
    unsafe_fixes: bool = typer.Option(
        False, "--unsafe-fixes", help="Also apply unsafe fixes (batch size, AMP), which change training numerics."
    ),
    device: str = typer.Option(
        "auto", "--device", help="Device for the workload's device field: auto, cpu, cuda, cuda:1, ..."
    ),
    timeout: float = typer.Option(900.0, "--timeout", help="Wall-clock limit of one trial, in seconds."),
    kill_grace: float = typer.Option(
        5.0,
        "--kill-grace",
        help="Seconds a stopped trial gets to exit after SIGTERM before SIGKILL (a second Ctrl-C kills at once).",
    ),
    overwrite: bool = typer.Option(
        False, "--overwrite", help="Reuse a non-empty --out: remove the earlier fix-loop run in it first."
    ),
    ab_rounds: int = typer.Option(5, "--ab-rounds", help="Interleaved A/B rounds per trial (at least 5)."),
    max_rounds: int = typer.Option(
        9, "--max-rounds", help="A/B rounds at most when the first ones cannot decide (then 'inconclusive')."
    ),
    min_gain: float = typer.Option(
        0.02,
        "--min-gain",
        help="Smallest relative throughput gain that can be kept (0.02 = 2 %), on top of the measured noise.",
    ),
    format_: str = typer.Option(
        "text",
        "--format",
        "-f",
        help="Report on stdout: text (the table), json or markdown. 'table' is a deprecated alias of text.",
    ),
    rules: Optional[list[Path]] = typer.Option(
        None,
        "--rules",
        metavar="PATH",
        help="Extra rule files (TOML) or folders of them, evaluated with the built-in rules; repeatable.",
    ),
) -> None:
    """Run the workload, apply the top finding's fix, re-measure, keep it only if it really helps; repeat."""
    from tracedoc.render.escape import OneLineConsole

    err = OneLineConsole(stderr=True)
    if out is not None:  # resolved once, now: nothing later may read it against another directory
        out = Path(os.path.abspath(out))
    if not workload.is_file():
        raise _fail(err, f"{workload}: workload file not found")
    format_ = _resolve_format(err, format_)
    _check_limits(err, max_trials, timeout, kill_grace, min_gain, ab_rounds, max_rounds)
    sets = list(set_ or [])
    with _signals_raise_terminated():
        _run(
            err,
            workload,
            sets,
            rules,
            (timeout, kill_grace),
            device,
            out,
            overwrite,
            format_,
            max_trials,
            unsafe_fixes,
            min_gain,
            ab_rounds,
            max_rounds,
        )


def _trial_analyzer(err, workload: Path, rules):
    """The analysis every trial's trace gets: the project's settings, resolved once (the
    workload's folder up, then the working directory) with the ``--rules`` files added.
    A bad rule file or a malformed ``[tool.tracedoc]`` fails (exit 2)."""
    from tracedoc.errors import RuleError, TracedocError
    from tracedoc.fixloop.runner import trial_analyzer
    from tracedoc.settings import Settings

    try:  # resolved once (the workload's folder up, then the working directory) for every trial
        return trial_analyzer(Settings.resolve(workload, rule_paths=list(rules or ())))
    except RuleError as exc:
        raise _fail(err, f"--rules: {exc}") from None
    except TracedocError as exc:  # a malformed [tool.tracedoc]
        raise _fail(err, str(exc)) from None
    except Exception as exc:  # noqa: BLE001 - a rule file the loader did not validate (e.g. knobs = 5)
        raise _fail(err, f"--rules: invalid rule file: {type(exc).__name__}: {exc}") from None


def _print_report(summary: FixLoopSummary, format_: str) -> None:
    """Write the loop's report on stdout: JSON, Markdown, or the text table and its notes
    (160 columns wide when stdout is not a terminal and ``$COLUMNS`` is unset)."""
    from rich.console import Console

    from tracedoc.render import render

    if format_ != "text":
        sys.stdout.write(render(summary, format_))
        return
    out_console = Console()
    if not out_console.is_terminal and "COLUMNS" not in os.environ:
        out_console = Console(width=160)  # a log or a pipe: do not squeeze the table to 80 columns
    render(summary, "text", console=out_console)


def _run(
    err,
    workload,
    sets,
    rules,
    limits,
    device,
    out,
    overwrite,
    format_,
    max_trials,
    unsafe_fixes,
    min_gain,
    ab_rounds,
    max_rounds,
) -> None:
    from tracedoc.errors import TracedocError
    from tracedoc.fixloop.loop import FixLoop, LoopOptions, Terminated, start_config
    from tracedoc.fixloop.runner import SubprocessRunner
    from tracedoc.text import plural

    timeout, kill_grace = limits
    analyze = _trial_analyzer(err, workload, rules)
    try:
        runner = SubprocessRunner(workload, timeout_s=timeout, analyze=analyze, kill_grace_s=kill_grace)
        spec = runner.describe()
        start_config(spec, sets, device)  # validate --set / --device before anything runs
    except TracedocError as exc:  # WorkloadError, RuleError
        raise _fail(err, str(exc)) from None
    except KeyboardInterrupt as exc:
        code = 128 + exc.signum if isinstance(exc, Terminated) else 130
        raise _fail(err, "interrupted before the baseline started", code) from None
    out_dir = out or Path(os.path.abspath(Path("runs") / time.strftime("fix-loop-%Y%m%d-%H%M%S")))
    problem = prepare_out(out_dir, overwrite)
    if problem:
        raise _fail(err, problem)
    options = LoopOptions(
        max_trials=max_trials,
        unsafe_fixes=unsafe_fixes,
        device=device,
        sets=sets,
        min_gain=min_gain,
        ab_rounds=ab_rounds,
        max_rounds=max_rounds,
    )
    loop = FixLoop(runner, spec, out_dir, options, progress=RichProgress(err), workload=str(workload))
    err.print(
        f"fix-loop: {workload} -> {out_dir}  (max {plural(max_trials, 'trial')}, "
        f"{'safe and unsafe' if unsafe_fixes else 'safe'} fixes, timeout {timeout:g} s per trial)",
        highlight=False,
        soft_wrap=True,
    )
    loop.run()
    summary = loop.summary  # the document run() wrote

    _print_report(summary, format_)
    if loop.summary_error:  # the disk is full even without this run's logs: stdout has the report
        code = 128 + summary.signal if summary.signal else (130 if summary.interrupted else 2)
        raise _fail(
            err, f"could not write {out_dir}/summary.json ({loop.summary_error}); the report is on stdout", code
        )
    err.print(f"wrote {out_dir}/summary.json, summary.md, final_config.json", highlight=False, soft_wrap=True)
    if summary.interrupted:
        raise typer.Exit(128 + summary.signal if summary.signal else 130)
    if summary.final is None:
        raise _fail(err, f"the baseline trial failed: {summary.stop_reason}; see {out_dir}/trial-00/stderr.log")
