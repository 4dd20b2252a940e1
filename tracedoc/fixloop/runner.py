"""Run one trial in a fresh subprocess with its own timeout, and classify what happened.

A trial directory holds ``config.json`` (the configuration asked for, rewritten by the
trial with every field), ``trace.pt.trace.json.gz``, ``analysis.json`` (the report's
``to_dict()``), ``result.json`` (status, samples/s and step time per repeat, error) and
``stdout.log`` / ``stderr.log``.

Status of a trial (:attr:`TrialOutcome.status`):

``ok``          exit 0, measurements written, trace analyzed.
``oom``         the workload raised an out-of-memory error (CUDA OOM, ``MemoryError``),
                or the process was killed by signal 9 (SIGKILL, what the kernel's
                OOM killer sends) without the loop having killed it.
``timeout``     still running after ``timeout_s``; its process group (DataLoader
                workers included) is terminated, then killed.
``crashed``     any other failure, including a trace that :func:`tracedoc.analyze`
                rejects (``TracedocError``).
``interrupted`` Ctrl-C, SIGTERM or SIGHUP arrived while it ran (then the
                :class:`KeyboardInterrupt` propagates, after the trial's process group
                has been stopped).

A trial reads only what it wrote in this run: the trial directory's earlier
``result.json``, ``analysis.json``, trace and logs are removed before it starts, and the
``result.json`` it reads must carry the random token this run handed to the trial.

Trials run isolated from the caller's working directory: ``PYTHONSAFEPATH=1`` (Python
3.11+; no current directory or script directory on ``sys.path``, so a stray ``orjson.py``
beside you is not imported) and ``PYTHONDONTWRITEBYTECODE=1`` (no ``__pycache__`` is
written beside the workload; nothing is written outside the trial directory).
"""

from __future__ import annotations

import json
import os
import secrets
import signal
import subprocess
import sys
import time
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Any, Callable, Protocol

from tracedoc.errors import TracedocError
from tracedoc.fixloop import files
from tracedoc.fixloop.files import LOG_HEAD_BYTES, LOG_TAIL_BYTES, BoundedLog
from tracedoc.fixloop.proctree import CGROUP_ROOT, MARKER_ENV, ProcessTree
from tracedoc.fixloop.workload import WorkloadError, WorkloadSpec, strict_json, validate_result
from tracedoc.report.model import Report, read_report

TRACE_NAME = "trace.pt.trace.json.gz"
_LOGS = ("stdout.log", "stderr.log")
_OOM_TEXT = ("out of memory", "outofmemoryerror", "memoryerror")


@dataclass
class TrialOutcome:
    """What one trial produced.

    Attributes:
        status: ``ok``, ``crashed``, ``oom``, ``timeout`` or ``interrupted``.
        samples_per_s: throughput of each timed repeat (samples/s); empty unless ok.
        step_time_ms: step time of each timed repeat (ms); empty unless ok.
        batch_size: the batch size the workload ran with.
        device: the device the workload reported (``type``, ``name``, ``bf16_supported``).
        analysis: the analyzer's :class:`~tracedoc.report.model.Report` of the trace; ``None``
            unless ok.
        error: one line saying why the trial failed.
        elapsed_s: wall time of the trial (s).
        dir: the trial directory.
        write_error: the first write of the trial's own files that failed (a log,
            ``config.json``, ``result.json``, ``analysis.json``), e.g. a full disk; the
            measurements are still in this object. None: every write succeeded.
    """

    status: str
    samples_per_s: list[float] = field(default_factory=list)
    step_time_ms: list[float] = field(default_factory=list)
    batch_size: int | None = None
    device: dict[str, Any] = field(default_factory=dict)
    analysis: Report | None = None
    error: str | None = None
    elapsed_s: float = 0.0
    dir: str = ""
    write_error: OSError | None = None


class Runner(Protocol):
    """What the loop needs from a runner (the tests use a fake one)."""

    def describe(self) -> WorkloadSpec:
        """The workload's Config fields. Raises WorkloadError when it cannot be loaded."""

    def run(
        self, config: dict[str, Any], trial_dir: Path, on_tick: Callable[[float], None] | None = None
    ) -> TrialOutcome:
        """Run one trial; raise KeyboardInterrupt (after cleaning up) on Ctrl-C. When the
        interrupt came after the run had measured, the exception carries that outcome as
        ``exc.outcome`` (status ``interrupted``, its measurements kept)."""

    def measure(
        self, config: dict[str, Any], run_dir: Path, on_tick: Callable[[float], None] | None = None
    ) -> TrialOutcome:
        """Time one configuration without a trace (one A/B sample); raise KeyboardInterrupt on Ctrl-C."""


def default_analyze(trace_path: Path, settings: Any = None) -> Report:
    """The trial's :class:`~tracedoc.report.model.Report`: :func:`tracedoc.pipeline.analyze`
    under ``settings`` (default: resolved from the working directory; imported lazily).

    Raises:
        tracedoc.errors.TracedocError: a trace the loader or the engine rejects.
    """
    from tracedoc import pipeline
    from tracedoc.settings import Settings

    return pipeline.analyze(trace_path, settings if settings is not None else Settings.resolve(None))


def trial_analyzer(settings: Any) -> Callable[[Path], Report]:
    """An analyze function for every trial of one fix-loop, under one
    :class:`~tracedoc.settings.Settings` resolved once (the project's ``[tool.tracedoc]`` and
    ``--rules``): its rules are loaded and validated now, so a bad one fails before any trial.

    Raises:
        tracedoc.errors.RuleError: a missing path, a malformed rule file, a code or name that
            repeats a built-in rule's, or a selector that matches no rule.
        tracedoc.config.ConfigError: a bad threshold override.
    """
    settings.rules()

    def analyze(trace_path: Path) -> Report:
        return default_analyze(trace_path, settings)

    return analyze


def as_report(analysis: Any) -> Report | None:
    """A trial's analysis as a :class:`~tracedoc.report.model.Report`: a Report as is; a dict
    (a saved report's JSON form, from a runner of one's own) read with
    :func:`~tracedoc.report.model.read_report`; None when absent or not a readable report."""
    if analysis is None or isinstance(analysis, Report):
        return analysis
    if isinstance(analysis, dict):
        try:
            return read_report(analysis)
        except TracedocError:
            return None
    return None


def _package_root() -> str:
    return str(Path(__file__).resolve().parents[2])  # tracedoc/fixloop/runner.py -> the source root


def trial_env(python: str) -> dict[str, str]:
    """The environment trials run in: isolated from the current directory, no bytecode written.

    ``PYTHONSAFEPATH=1`` keeps the current directory off ``sys.path``,
    ``PYTHONDONTWRITEBYTECODE=1`` writes no ``__pycache__``. tracedoc's own source root
    is put on ``PYTHONPATH`` only when ``python`` cannot import tracedoc without it (a
    checkout that is not installed).
    """
    env = dict(os.environ)
    env["PYTHONSAFEPATH"] = "1"
    env["PYTHONDONTWRITEBYTECODE"] = "1"
    env.setdefault("PYTHONUNBUFFERED", "1")
    env.pop(MEASURE_ONLY_ENV, None)
    try:
        probe = subprocess.run(
            [python, "-c", "import tracedoc.fixloop.trial"],
            capture_output=True,
            env=env,
            timeout=120,
            stdin=subprocess.DEVNULL,
            cwd=os.path.dirname(os.path.abspath(python)) or None,
        )
        importable = probe.returncode == 0
    except (OSError, subprocess.SubprocessError):
        importable = False
    if not importable:
        root = _package_root()
        env["PYTHONPATH"] = root + (os.pathsep + env["PYTHONPATH"] if env.get("PYTHONPATH") else "")
    return env


#: Environment variable that makes :func:`tracedoc.fixloop.harness.measure` time one
#: window without a trace (the A/B measurement runs).
MEASURE_ONLY_ENV = "TRACEDOC_MEASURE_ONLY"


class SubprocessRunner:
    """Runs ``python -m tracedoc.fixloop.trial`` for each trial.

    Args:
        workload: the workload file.
        timeout_s: wall-clock limit of one trial (s).
        analyze: trace path -> :class:`~tracedoc.report.model.Report`; defaults to
            :func:`default_analyze`.
        python: the interpreter to run trials with (defaults to this one).
        kill_grace_s: seconds a trial stopped by a timeout or an interrupt gets between
            SIGTERM and SIGKILL (a second interrupt sends SIGKILL at once).
        log_head_bytes, log_tail_bytes: bytes of each log kept from its start and its end
            (:class:`tracedoc.fixloop.files.BoundedLog`; defaults 1 MiB each).
        cgroup_root: the cgroup v2 mount the trials' processes are tracked in where a cgroup
            can be made (:class:`tracedoc.fixloop.proctree.ProcessTree`); None: /proc only.
    """

    def __init__(
        self,
        workload: str | Path,
        timeout_s: float = 900.0,
        analyze: Callable[[Path], Report] | None = None,
        python: str | None = None,
        kill_grace_s: float = 5.0,
        log_head_bytes: int = LOG_HEAD_BYTES,
        log_tail_bytes: int = LOG_TAIL_BYTES,
        cgroup_root: Path | None = CGROUP_ROOT,
    ) -> None:
        self.workload = str(Path(workload).resolve())
        self.timeout_s = timeout_s
        self.kill_grace_s = kill_grace_s
        self.analyze = analyze or default_analyze
        self.python = python or sys.executable
        self.log_head_bytes = log_head_bytes
        self.log_tail_bytes = log_tail_bytes
        self.cgroup_root = cgroup_root
        self.env = trial_env(self.python)

    def describe(self) -> WorkloadSpec:
        """Describe the workload in a subprocess (its imports never touch this process).

        Raises:
            WorkloadError: the file is missing, fails to import, or breaks the contract.
        """
        if not Path(self.workload).is_file():
            raise WorkloadError(f"{self.workload}: workload file not found")
        try:
            proc = subprocess.run(
                [self.python, "-m", "tracedoc.fixloop.trial", "describe", self.workload],
                capture_output=True,
                text=True,
                errors="replace",
                env=self.env,
                stdin=subprocess.DEVNULL,
                timeout=300,
            )
        except subprocess.TimeoutExpired:
            raise WorkloadError(f"cannot load workload {self.workload}: describing it took over 300 s") from None
        if proc.returncode != 0:
            why = _last_line(proc.stderr) or f"exit status {proc.returncode}"
            raise WorkloadError(f"cannot load workload {self.workload}: {why}")
        try:  # the description is the last line; the workload's own prints go to stderr
            return WorkloadSpec.from_dict(json.loads(_last_line(proc.stdout, limit=None)))
        except (ValueError, KeyError, TypeError, AttributeError) as exc:
            raise WorkloadError(f"cannot load workload {self.workload}: unreadable description ({exc})") from None

    def run(
        self, config: dict[str, Any], trial_dir: Path, on_tick: Callable[[float], None] | None = None
    ) -> TrialOutcome:
        """Run one trial in ``trial_dir`` and return its classified outcome (see the module docstring)."""
        return self._launch(config, trial_dir, on_tick, measure_only=False)

    def measure(
        self, config: dict[str, Any], run_dir: Path, on_tick: Callable[[float], None] | None = None
    ) -> TrialOutcome:
        """Time ``config`` once, with no trace and no analysis (``TRACEDOC_MEASURE_ONLY=1``: the
        harness runs its warm-up and one timed window). Used for the loop's A/B rounds."""
        return self._launch(config, run_dir, on_tick, measure_only=True)

    def _launch(
        self, config: dict[str, Any], trial_dir: Path, on_tick: Callable[[float], None] | None, measure_only: bool
    ) -> TrialOutcome:
        start = time.monotonic()
        try:
            _prepare_dir(trial_dir, config)
        except OSError as exc:
            return _write_failed(trial_dir, "config.json", exc, time.monotonic() - start)
        token = secrets.token_hex(8)
        cmd = [self.python, "-m", "tracedoc.fixloop.trial", "run", self.workload, "--out", str(trial_dir)]
        cmd += ["--config", str(trial_dir / "config.json"), "--token", token]
        env = dict(self.env)
        env[MARKER_ENV] = secrets.token_hex(16)
        if measure_only:
            env[MEASURE_ONLY_ENV] = "1"
        logs = [BoundedLog(trial_dir / n, self.log_head_bytes, self.log_tail_bytes) for n in _LOGS]
        tree = ProcessTree(env[MARKER_ENV], cgroup_root=self.cgroup_root)
        try:
            proc = subprocess.Popen(
                cmd, stdout=logs[0].write_fd, stderr=logs[1].write_fd, stdin=subprocess.DEVNULL, env=env,
                start_new_session=True,
            )  # fmt: skip
        except OSError as exc:
            for log in logs:
                log.close()
            return TrialOutcome("crashed", error=f"cannot start the trial: {exc}", dir=str(trial_dir))
        tree.attach(proc.pid)
        for log in logs:
            log.start()
        try:
            timed_out = self._wait(proc, tree, start, on_tick)
        except KeyboardInterrupt:  # Ctrl-C, or SIGTERM/SIGHUP turned into one by the command
            _kill_group(proc, grace_s=self.kill_grace_s, tree=tree)
            _close_logs(logs)
            outcome = TrialOutcome(
                "interrupted", error="interrupted", elapsed_s=time.monotonic() - start, dir=str(trial_dir)
            )
            _save_result(trial_dir, outcome, proc.returncode, {})
            raise
        _kill_group(proc, grace_s=1.0, only_group=True, tree=tree)  # leftovers of a trial that exited
        _close_logs(logs)
        outcome, measured = self._classify(
            proc.returncode, timed_out, trial_dir, time.monotonic() - start, token, logs[1].tail_text()
        )
        outcome.write_error = _first_write_error(logs)
        if outcome.status == "ok" and not measure_only:
            self._analyze(outcome, trial_dir, measured)
        _save_result(trial_dir, outcome, proc.returncode, measured)
        return outcome

    def _wait(
        self, proc: subprocess.Popen, tree: ProcessTree, start: float, on_tick: Callable[[float], None] | None
    ) -> bool:
        """Wait for the trial, following its processes (:meth:`ProcessTree.scan`) and showing
        progress every 0.5 s; returns whether it timed out (then it has been stopped)."""
        while True:
            try:
                proc.wait(timeout=0.5)
                return False
            except subprocess.TimeoutExpired:
                tree.scan()
                elapsed = time.monotonic() - start
                if on_tick is not None:
                    on_tick(elapsed)
                if elapsed > self.timeout_s:
                    _kill_group(proc, grace_s=self.kill_grace_s, tree=tree)
                    return True

    def _analyze(self, outcome: TrialOutcome, trial_dir: Path, measured: dict[str, Any]) -> None:
        """Analyze the trial's trace into ``outcome.analysis`` and write ``analysis.json``.

        A failed analysis makes the outcome ``crashed``. An interrupt during it is re-raised
        carrying the measured outcome (``exc.outcome``, status ``interrupted``): the profiled
        run's measurements are complete and the loop keeps them.
        """
        trace = trial_dir / str(measured.get("trace") or TRACE_NAME)
        try:
            report = self.analyze(trace)
            if not isinstance(report, Report):
                raise TypeError(f"the analyzer returned a {type(report).__name__}, not a Report")
            outcome.analysis = report
        except KeyboardInterrupt as exc:
            outcome.status, outcome.error = "interrupted", "interrupted while analyzing the trace"
            _save_result(trial_dir, outcome, 0, measured)
            exc.outcome = outcome  # type: ignore[attr-defined]
            raise
        except Exception as exc:  # TracedocError on a broken trace; anything else is an analyzer bug
            outcome.status = "crashed"
            outcome.error = f"analysis failed: {type(exc).__name__}: {_first_line(str(exc))}"
            return
        text = json.dumps(strict_json(report.to_dict()), indent=2, allow_nan=False) + "\n"
        try:
            files.write_text(trial_dir / "analysis.json", text)
        except OSError as exc:
            outcome.write_error = outcome.write_error or exc

    def _classify(
        self,
        returncode: int | None,
        timed_out: bool,
        trial_dir: Path,
        elapsed: float,
        token: str | None = None,
        stderr_tail: str = "",
    ) -> tuple[TrialOutcome, dict]:
        measured: dict[str, Any] = {}
        result_problem = "the workload wrote no result.json"
        result_file = trial_dir / "result.json"
        if result_file.is_file():
            try:
                loaded = json.loads(result_file.read_bytes()[:10_000_000])
            except (OSError, ValueError) as exc:
                loaded, result_problem = None, f"result.json is not valid JSON ({_first_line(str(exc))})"
            if isinstance(loaded, dict):
                if token is not None and loaded.get("token") != token:
                    result_problem = "result.json was not written by this run"
                else:
                    measured, result_problem = loaded, ""
            elif loaded is not None:
                result_problem = f"result.json holds a JSON {type(loaded).__name__}, not an object"
        base = dict(elapsed_s=elapsed, dir=str(trial_dir))
        if timed_out:
            return TrialOutcome("timeout", error=f"no result after {self.timeout_s:g} s", **base), measured
        if returncode == 0 and result_problem:
            return TrialOutcome("crashed", error=f"exit status 0, but {result_problem}", **base), measured
        if returncode == 0 and measured.get("status") == "ok":
            try:
                clean = validate_result(measured)
            except WorkloadError as exc:
                return TrialOutcome("crashed", error=f"bad result: {exc}", **base), measured
            outcome = TrialOutcome(
                "ok",
                samples_per_s=clean["samples_per_s"],
                step_time_ms=clean["step_time_ms"],
                batch_size=clean["batch_size"],
                device=clean["device"],
                **base,
            )
            return outcome, measured
        if returncode == 0:
            error = measured.get("error") if isinstance(measured.get("error"), str) else None
            why = error or f"result.json has status {str(measured.get('status'))[:40]!r}, not 'ok'"
            return TrialOutcome("crashed", error=why, **base), measured
        if (
            measured.get("status") == "oom"
            or returncode == -signal.SIGKILL
            or any(t in stderr_tail.lower() for t in _OOM_TEXT)
        ):
            error = measured.get("error") or (
                "killed by signal 9 (SIGKILL; likely the kernel's OOM killer)"
                if returncode == -signal.SIGKILL
                else _last_line(stderr_tail)
            )
            return TrialOutcome("oom", error=error, **base), measured
        if returncode is not None and returncode < 0:
            error = f"killed by signal {-returncode}"
        else:
            error = measured.get("error") or _last_line(stderr_tail) or f"exit status {returncode}"
        return TrialOutcome("crashed", error=error, **base), measured


def _prepare_dir(trial_dir: Path, config: dict[str, Any]) -> None:
    """Make ``trial_dir`` (again, if a workload deleted it), remove what an earlier run left
    there, and write ``config.json``.

    Raises:
        OSError: the folder or ``config.json`` cannot be written (e.g. a full disk).
    """
    trial_dir.mkdir(parents=True, exist_ok=True)
    for stale in ("result.json", "analysis.json", TRACE_NAME, *_LOGS):
        (trial_dir / stale).unlink(missing_ok=True)
    files.write_text(trial_dir / "config.json", json.dumps(config, indent=2) + "\n")


def _write_failed(trial_dir: Path, name: str, exc: OSError, elapsed: float) -> TrialOutcome:
    """The outcome of a trial that could not start because ``name`` could not be written."""
    return TrialOutcome(
        "crashed",
        error=f"cannot write {name}: {files.describe_oserror(exc)}",
        elapsed_s=elapsed,
        dir=str(trial_dir),
        write_error=exc,
    )


def _close_logs(logs: list[BoundedLog]) -> None:
    for log in logs:
        log.close()


def _first_write_error(logs: list[BoundedLog]) -> OSError | None:
    return next((log.error for log in logs if log.error is not None), None)


def _save_result(trial_dir: Path, outcome: TrialOutcome, returncode: int | None, measured: dict) -> None:
    """Write the trial's ``result.json`` (the workload's result with the outcome over it); a
    failed write is noted in ``outcome.write_error``, never raised: the outcome is in memory."""
    data = dict(measured)
    data.update({k: v for k, v in asdict(outcome).items() if k not in ("analysis", "dir", "write_error")})
    data["returncode"] = returncode
    data.pop("token", None)
    text = json.dumps(strict_json(data), indent=2, allow_nan=False, default=str) + "\n"
    try:
        files.write_text(trial_dir / "result.json", text)
    except OSError as exc:
        outcome.write_error = outcome.write_error or exc


def _signal_group(proc: subprocess.Popen, sig: int) -> None:
    try:
        os.killpg(proc.pid, sig)
    except (ProcessLookupError, PermissionError, AttributeError):
        try:
            proc.send_signal(sig)
        except ProcessLookupError:
            pass


def _done(proc: subprocess.Popen, tree: ProcessTree | None) -> bool:
    return proc.poll() is not None and not _group_alive(proc.pid) and not (tree is not None and tree.alive())


def _group_alive(pgid: int) -> bool:
    try:
        os.killpg(pgid, 0)
        return True
    except (ProcessLookupError, PermissionError, AttributeError):
        return False


def _kill_group(
    proc: subprocess.Popen, grace_s: float = 5.0, only_group: bool = False, tree: ProcessTree | None = None
) -> None:
    """SIGTERM the trial's processes, SIGKILL what is left after ``grace_s`` seconds: its
    process group (DataLoader workers) and, with ``tree``, every process it started however
    detached (``setsid``, daemons: :class:`tracedoc.fixloop.proctree.ProcessTree`).

    A second interrupt (Ctrl-C, SIGTERM) during the grace period sends SIGKILL at once and
    is then re-raised, so a trial that ignores SIGTERM is never left running. With
    ``only_group`` the leader has already exited and only what is left of it is stopped
    (nothing is signalled when nothing is left).
    """
    try:
        for sig in (signal.SIGTERM, signal.SIGKILL):
            if only_group and _done(proc, tree):
                return
            _signal_group(proc, sig)
            if tree is not None:
                tree.signal(sig)
            deadline = time.monotonic() + grace_s
            while time.monotonic() < deadline:
                if _done(proc, tree):
                    return
                time.sleep(0.05)
    except BaseException:
        _signal_group(proc, signal.SIGKILL)
        if tree is not None:
            tree.signal(signal.SIGKILL)
        try:
            proc.wait(timeout=grace_s)
        except BaseException:  # noqa: BLE001 - a third interrupt: the SIGKILL is sent already
            pass
        raise
    finally:
        if proc.returncode is None:
            try:
                proc.wait(timeout=0.1)
            except subprocess.TimeoutExpired:
                pass
        if tree is not None:
            tree.close()


def _last_line(text: str, limit: int | None = 300) -> str:
    lines = [line.strip() for line in text.splitlines() if line.strip()]
    return (lines[-1][:limit] if limit else lines[-1]) if lines else ""


def _first_line(text: str) -> str:
    lines = [line.strip() for line in text.splitlines() if line.strip()]
    return lines[0][:300] if lines else ""
