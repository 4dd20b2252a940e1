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
``interrupted`` Ctrl-C arrived while it ran (then :class:`KeyboardInterrupt` propagates).
"""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import time
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Any, Callable, Protocol

from tracedoc.fixloop.workload import WorkloadError, WorkloadSpec

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


def default_analyze(trace_path: Path) -> dict[str, Any]:
    """``tracedoc.analyze(trace_path).to_dict()`` (imported lazily)."""
    import tracedoc

    return tracedoc.analyze(trace_path).to_dict()


def analyzer_with_rules(paths: list[Path]) -> Callable[[Path], dict[str, Any]]:
    """An analyze function that evaluates the built-in rules plus the rule files in ``paths``.

    The rule files are loaded (and validated) now, so a bad one fails before any trial.

    Raises:
        tracedoc.errors.RuleError: a missing path, a malformed rule file, or a code or
            name that repeats a built-in rule's.
    """
    import tracedoc
    from tracedoc.engine import load_rules

    rules = load_rules(list(paths))

    def analyze(trace_path: Path) -> dict[str, Any]:
        return tracedoc.analyze(trace_path, rules=rules).to_dict()

    return analyze


def _package_root() -> str:
    import tracedoc.fixloop

    return str(Path(tracedoc.fixloop.__file__).resolve().parents[2])


class SubprocessRunner:
    """Runs ``python -m tracedoc.fixloop.trial`` for each trial.

    Args:
        workload: the workload file.
        timeout_s: wall-clock limit of one trial (s).
        analyze: trace path -> report dict; defaults to :func:`default_analyze`.
        python: the interpreter to run trials with (defaults to this one).
    """

    def __init__(
        self,
        workload: str | Path,
        timeout_s: float = 900.0,
        analyze: Callable[[Path], dict[str, Any]] | None = None,
        python: str | None = None,
    ) -> None:
        self.workload = str(Path(workload).resolve())
        self.timeout_s = timeout_s
        self.analyze = analyze or default_analyze
        self.python = python or sys.executable
        env = dict(os.environ)
        root = _package_root()
        env["PYTHONPATH"] = root + (os.pathsep + env["PYTHONPATH"] if env.get("PYTHONPATH") else "")
        env.setdefault("PYTHONUNBUFFERED", "1")
        self.env = env

    def describe(self) -> WorkloadSpec:
        """Describe the workload in a subprocess (its imports never touch this process).

        Raises:
            WorkloadError: the file is missing, fails to import, or breaks the contract.
        """
        if not Path(self.workload).is_file():
            raise WorkloadError(f"{self.workload}: workload file not found")
        proc = subprocess.run(
            [self.python, "-m", "tracedoc.fixloop.trial", "describe", self.workload],
            capture_output=True,
            text=True,
            env=self.env,
            timeout=300,
        )
        if proc.returncode != 0:
            why = _last_line(proc.stderr) or f"exit status {proc.returncode}"
            raise WorkloadError(f"cannot load workload {self.workload}: {why}")
        return WorkloadSpec.from_dict(json.loads(proc.stdout))

    def run(
        self, config: dict[str, Any], trial_dir: Path, on_tick: Callable[[float], None] | None = None
    ) -> TrialOutcome:
        """Run one trial in ``trial_dir`` and return its classified outcome (see the module docstring)."""
        trial_dir.mkdir(parents=True, exist_ok=True)
        (trial_dir / "config.json").write_text(json.dumps(config, indent=2) + "\n", encoding="utf-8")
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
        ]
        start = time.monotonic()
        timed_out = False
        with open(trial_dir / "stdout.log", "wb") as out, open(trial_dir / "stderr.log", "wb") as err:
            proc = subprocess.Popen(
                cmd, stdout=out, stderr=err, stdin=subprocess.DEVNULL, env=self.env, start_new_session=True
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
                            _kill_group(proc)
                            break
            except KeyboardInterrupt:
                _kill_group(proc)
                outcome = TrialOutcome(
                    "interrupted", error="interrupted by Ctrl-C", elapsed_s=time.monotonic() - start, dir=str(trial_dir)
                )
                _write_result(trial_dir, outcome, proc.returncode, {})
                raise
        elapsed = time.monotonic() - start
        outcome, measured = self._classify(proc.returncode, timed_out, trial_dir, elapsed)
        if outcome.status == "ok":
            trace = trial_dir / str(measured.get("trace") or TRACE_NAME)
            try:
                outcome.analysis = self.analyze(trace)
                (trial_dir / "analysis.json").write_text(
                    json.dumps(outcome.analysis, indent=2) + "\n", encoding="utf-8"
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
        self, returncode: int | None, timed_out: bool, trial_dir: Path, elapsed: float
    ) -> tuple[TrialOutcome, dict]:
        measured: dict[str, Any] = {}
        result_file = trial_dir / "result.json"
        if result_file.is_file():
            try:
                measured = json.loads(result_file.read_text(encoding="utf-8"))
            except (OSError, ValueError):
                measured = {}
        stderr_tail = _tail(trial_dir / "stderr.log")
        base = dict(elapsed_s=elapsed, dir=str(trial_dir))
        if timed_out:
            return TrialOutcome("timeout", error=f"no result after {self.timeout_s:g} s", **base), measured
        if returncode == 0 and measured.get("status") == "ok":
            try:
                outcome = TrialOutcome(
                    "ok",
                    samples_per_s=[float(v) for v in measured["samples_per_s"]],
                    step_time_ms=[float(v) for v in measured["step_time_ms"]],
                    batch_size=measured.get("batch_size"),
                    device=dict(measured.get("device") or {}),
                    **base,
                )
            except (KeyError, TypeError, ValueError) as exc:
                return TrialOutcome("crashed", error=f"bad result.json: {exc}", **base), measured
            if not outcome.samples_per_s:
                return TrialOutcome("crashed", error="result.json has no samples_per_s", **base), measured
            return outcome, measured
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
    (trial_dir / "result.json").write_text(json.dumps(data, indent=2) + "\n", encoding="utf-8")


def _kill_group(proc: subprocess.Popen, grace_s: float = 5.0) -> None:
    """SIGTERM the trial's process group (its DataLoader workers too), SIGKILL after ``grace_s``."""
    for sig, wait in ((signal.SIGTERM, grace_s), (signal.SIGKILL, grace_s)):
        try:
            os.killpg(proc.pid, sig)
        except (ProcessLookupError, PermissionError, AttributeError):
            try:
                proc.send_signal(sig)
            except ProcessLookupError:
                pass
        try:
            proc.wait(timeout=wait)
            return
        except subprocess.TimeoutExpired:
            continue


def _tail(path: Path, n_bytes: int = 20000) -> str:
    try:
        with open(path, "rb") as fh:
            fh.seek(0, os.SEEK_END)
            fh.seek(max(0, fh.tell() - n_bytes))
            return fh.read().decode("utf-8", "replace")
    except OSError:
        return ""


def _last_line(text: str) -> str:
    lines = [line.strip() for line in text.splitlines() if line.strip()]
    return lines[-1][:300] if lines else ""


def _first_line(text: str) -> str:
    lines = [line.strip() for line in text.splitlines() if line.strip()]
    return lines[0][:300] if lines else ""
