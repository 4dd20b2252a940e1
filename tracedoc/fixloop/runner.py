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

from tracedoc.fixloop.workload import WorkloadError, WorkloadSpec, strict_json, validate_result

TRACE_NAME = "trace.pt.trace.json.gz"
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
        analysis: the analyzer's ``Report.to_dict()``; ``None`` unless ok.
        error: one line saying why the trial failed.
        elapsed_s: wall time of the trial (s).
        dir: the trial directory.
    """

    status: str
    samples_per_s: list[float] = field(default_factory=list)
    step_time_ms: list[float] = field(default_factory=list)
    batch_size: int | None = None
    device: dict[str, Any] = field(default_factory=dict)
    analysis: dict[str, Any] | None = None
    error: str | None = None
    elapsed_s: float = 0.0
    dir: str = ""


class Runner(Protocol):
    """What the loop needs from a runner (the tests use a fake one)."""

    def describe(self) -> WorkloadSpec:
        """The workload's Config fields. Raises WorkloadError when it cannot be loaded."""

    def run(
        self, config: dict[str, Any], trial_dir: Path, on_tick: Callable[[float], None] | None = None
    ) -> TrialOutcome:
        """Run one trial; raise KeyboardInterrupt (after cleaning up) on Ctrl-C."""

    def measure(
        self, config: dict[str, Any], run_dir: Path, on_tick: Callable[[float], None] | None = None
    ) -> TrialOutcome:
        """Time one configuration without a trace (one A/B sample); raise KeyboardInterrupt on Ctrl-C."""


def default_analyze(trace_path: Path, settings: Any = None) -> dict[str, Any]:
    """The trial's report as a dict: :func:`tracedoc.pipeline.analyze` under ``settings``
    (default: resolved from the working directory; imported lazily)."""
    from tracedoc import pipeline
    from tracedoc.settings import Settings

    return pipeline.analyze(trace_path, settings if settings is not None else Settings.resolve(None)).to_dict()


def trial_analyzer(settings: Any) -> Callable[[Path], dict[str, Any]]:
    """An analyze function for every trial of one fix-loop, under one
    :class:`~tracedoc.settings.Settings` resolved once (the project's ``[tool.tracedoc]`` and
    ``--rules``): its rules are loaded and validated now, so a bad one fails before any trial.

    Raises:
        tracedoc.errors.RuleError: a missing path, a malformed rule file, a code or name that
            repeats a built-in rule's, or a selector that matches no rule.
        tracedoc.config.ConfigError: a bad threshold override.
    """
    settings.rules()

    def analyze(trace_path: Path) -> dict[str, Any]:
        return default_analyze(trace_path, settings)

    return analyze


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
        analyze: trace path -> report dict; defaults to :func:`default_analyze`.
        python: the interpreter to run trials with (defaults to this one).
        kill_grace_s: seconds a trial stopped by a timeout or an interrupt gets between
            SIGTERM and SIGKILL (a second interrupt sends SIGKILL at once).
    """

    def __init__(
        self,
        workload: str | Path,
        timeout_s: float = 900.0,
        analyze: Callable[[Path], dict[str, Any]] | None = None,
        python: str | None = None,
        kill_grace_s: float = 5.0,
    ) -> None:
        self.workload = str(Path(workload).resolve())
        self.timeout_s = timeout_s
        self.kill_grace_s = kill_grace_s
        self.analyze = analyze or default_analyze
        self.python = python or sys.executable
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
        trial_dir.mkdir(parents=True, exist_ok=True)
        for stale in ("result.json", "analysis.json", TRACE_NAME, "stdout.log", "stderr.log"):
            (trial_dir / stale).unlink(missing_ok=True)
        (trial_dir / "config.json").write_text(json.dumps(config, indent=2) + "\n", encoding="utf-8")
        token = secrets.token_hex(8)
        cmd = [
            self.python,
            "-m",
            "tracedoc.fixloop.trial",
            "run",
            self.workload,
            "--out",
            str(trial_dir),
            "--config",
            str(trial_dir / "config.json"),
            "--token",
            token,
        ]
        env = dict(self.env)
        if measure_only:
            env[MEASURE_ONLY_ENV] = "1"
        start = time.monotonic()
        timed_out = False
        with open(trial_dir / "stdout.log", "wb") as out, open(trial_dir / "stderr.log", "wb") as err:
            proc = subprocess.Popen(
                cmd, stdout=out, stderr=err, stdin=subprocess.DEVNULL, env=env, start_new_session=True
            )
            try:
                while True:
                    try:
                        proc.wait(timeout=0.5)
                        break
                    except subprocess.TimeoutExpired:
                        elapsed = time.monotonic() - start
                        if on_tick is not None:
                            on_tick(elapsed)
                        if elapsed > self.timeout_s:
                            timed_out = True
                            _kill_group(proc, grace_s=self.kill_grace_s)
                            break
            except KeyboardInterrupt:  # Ctrl-C, or SIGTERM/SIGHUP turned into one by the command
                _kill_group(proc, grace_s=self.kill_grace_s)
                outcome = TrialOutcome(
                    "interrupted", error="interrupted", elapsed_s=time.monotonic() - start, dir=str(trial_dir)
                )
                _write_result(trial_dir, outcome, proc.returncode, {})
                raise
        _kill_group(proc, grace_s=1.0, only_group=True)  # leftovers of a trial that exited (stray workers)
        elapsed = time.monotonic() - start
        outcome, measured = self._classify(proc.returncode, timed_out, trial_dir, elapsed, token)
        if outcome.status == "ok" and not measure_only:
            trace = trial_dir / str(measured.get("trace") or TRACE_NAME)
            try:
                outcome.analysis = self.analyze(trace)
                (trial_dir / "analysis.json").write_text(
                    json.dumps(strict_json(outcome.analysis), indent=2, allow_nan=False) + "\n", encoding="utf-8"
                )
            except KeyboardInterrupt:
                raise
            except Exception as exc:  # TracedocError on a broken trace; anything else is an analyzer bug
                outcome.status = "crashed"
                outcome.error = f"analysis failed: {type(exc).__name__}: {_first_line(str(exc))}"
                outcome.analysis = None
        _write_result(trial_dir, outcome, proc.returncode, measured)
        return outcome

    def _classify(
        self, returncode: int | None, timed_out: bool, trial_dir: Path, elapsed: float, token: str | None = None
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
        stderr_tail = _tail(trial_dir / "stderr.log")
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


def _write_result(trial_dir: Path, outcome: TrialOutcome, returncode: int | None, measured: dict) -> None:
    data = dict(measured)
    data.update({k: v for k, v in asdict(outcome).items() if k not in ("analysis", "dir")})
    data["returncode"] = returncode
    data.pop("token", None)
    text = json.dumps(strict_json(data), indent=2, allow_nan=False, default=str) + "\n"
    (trial_dir / "result.json").write_text(text, encoding="utf-8")


def _group_alive(pgid: int) -> bool:
    try:
        os.killpg(pgid, 0)
        return True
    except (ProcessLookupError, PermissionError, AttributeError):
        return False


def _kill_group(proc: subprocess.Popen, grace_s: float = 5.0, only_group: bool = False) -> None:
    """SIGTERM the trial's process group (its DataLoader workers too), SIGKILL after ``grace_s``.

    A second interrupt (Ctrl-C, SIGTERM) during the grace period sends SIGKILL to the
    group at once and is then re-raised, so a trial that ignores SIGTERM is never left
    running. With ``only_group`` the leader has already exited and only what is left of
    its group is stopped.
    """
    pgid = proc.pid
    try:
        for sig in (signal.SIGTERM, signal.SIGKILL):
            if only_group and not _group_alive(pgid):
                return
            try:
                os.killpg(pgid, sig)
            except (ProcessLookupError, PermissionError, AttributeError):
                if only_group:
                    return
                try:
                    proc.send_signal(sig)
                except ProcessLookupError:
                    pass
            deadline = time.monotonic() + grace_s
            while time.monotonic() < deadline:
                if proc.poll() is not None and not _group_alive(pgid):
                    return
                time.sleep(0.05)
    except BaseException:
        try:
            os.killpg(pgid, signal.SIGKILL)
        except (ProcessLookupError, PermissionError, AttributeError):
            pass
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


def _tail(path: Path, n_bytes: int = 20000) -> str:
    try:
        with open(path, "rb") as fh:
            fh.seek(0, os.SEEK_END)
            fh.seek(max(0, fh.tell() - n_bytes))
            return fh.read().decode("utf-8", "replace")
    except OSError:
        return ""


def _last_line(text: str, limit: int | None = 300) -> str:
    lines = [line.strip() for line in text.splitlines() if line.strip()]
    return (lines[-1][:limit] if limit else lines[-1]) if lines else ""


def _first_line(text: str) -> str:
    lines = [line.strip() for line in text.splitlines() if line.strip()]
    return lines[0][:300] if lines else ""
