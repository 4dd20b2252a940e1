"""The fix-loop's decisions: run the baseline, pick the top applicable fix, try it, keep or revert.

One iteration:

1. Take the incumbent's findings in rank order (largest ``estimated_saving_ms`` first;
   ``None`` last). For each finding, take its ``fix.knobs`` in order; the first knob
   that (a) is a field of the workload's ``Config``, (b) has a safety level the options
   allow, (c) applies on the device the baseline ran on, and (d) has a next value that
   was not tried before (see :func:`tracedoc.fixloop.knobs.propose_value`) is the change.
   Every knob passed over is recorded once in ``skipped`` with the reason.
2. Run the incumbent's configuration with that one change as a new trial.
3. A trial that measured is kept when :func:`tracedoc.fixloop.noise.decide` says so,
   else reverted; a crashed, out-of-memory or timed-out trial is reverted. A knob whose
   value is searched (num_workers, batch_size) stops being searched once a step of it
   is not kept.
4. Write the summary (after every trial, so the best configuration is never lost).

It stops when no finding has an applicable change, when ``max_trials`` trials (not
counting the baseline) have run, or on Ctrl-C (the summary is still written).
"""

from __future__ import annotations

import statistics
import time
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Any, Protocol

from tracedoc.fixloop import knobs as knobs_mod
from tracedoc.fixloop.noise import decide
from tracedoc.fixloop.runner import Runner, TrialOutcome
from tracedoc.fixloop.summary import build_summary, write_summary
from tracedoc.fixloop.workload import WorkloadError, WorkloadSpec

#: Statuses a trial can end with. ``baseline`` is the first trial when it measured.
STATUSES = ("baseline", "kept", "reverted", "crashed", "oom", "timeout", "interrupted")


@dataclass
class LoopOptions:
    """Options of one fix-loop run.

    Attributes:
        max_trials: trials after the baseline, at most.
        unsafe_fixes: also apply unsafe knobs (batch_size, amp).
        device: ``auto`` or a device name given to the workload's ``device`` field.
        sets: ``KNOB=VALUE`` assignments for the starting configuration.
        min_gain: minimum relative gain to keep a change (fraction; see noise.py).
        noise_k: multiplier of the measured spread (see noise.py).
        n_cpus: CPUs for the num_workers search; ``None``: this machine's.
    """

    max_trials: int = 8
    unsafe_fixes: bool = False
    device: str = "auto"
    sets: list[str] = field(default_factory=list)
    min_gain: float = 0.02
    noise_k: float = 1.0
    n_cpus: int | None = None


@dataclass
class TrialRecord:
    """One row of the summary (all times in ms, throughputs in samples/s).

    ``samples_per_s`` and ``step_time_ms`` are the medians of the repeats.
    ``predicted_saving_ms`` is the finding's ``estimated_saving_ms`` (per incumbent step);
    ``measured_saving_ms`` is the incumbent's step time minus the candidate's, the
    candidate's scaled to the incumbent's batch size (``cand_ms * inc_batch / cand_batch``),
    so a batch-size change is compared per sample.
    """

    index: int
    change: str
    status: str
    config: dict[str, Any]
    knob: str | None = None
    old_value: Any = None
    new_value: Any = None
    finding: dict[str, Any] | None = None
    samples_per_s: float | None = None
    samples_per_s_repeats: list[float] = field(default_factory=list)
    step_time_ms: float | None = None
    batch_size: int | None = None
    speedup: float | None = None
    predicted_saving_ms: float | None = None
    measured_saving_ms: float | None = None
    decision: dict[str, Any] | None = None
    error: str | None = None
    elapsed_s: float = 0.0
    dir: str = ""
    top_findings: list[dict[str, Any]] = field(default_factory=list)

    def to_dict(self) -> dict[str, Any]:
        """JSON-safe form."""
        return asdict(self)


@dataclass(frozen=True)
class Proposal:
    """The next change: set ``knob`` from ``old`` to ``new`` because of ``finding``."""

    finding: dict[str, Any]
    knob: knobs_mod.Knob
    old: Any
    new: Any


class Progress(Protocol):
    """Progress callbacks (the command shows them on stderr; tests pass :class:`NullProgress`)."""

    def trial_started(self, index: int, max_trials: int, change: str, finding: dict | None) -> None: ...
    def tick(self, elapsed_s: float) -> None: ...
    def trial_finished(self, record: TrialRecord) -> None: ...
    def note(self, text: str) -> None: ...


class NullProgress:
    """Progress that shows nothing."""

    def trial_started(self, index, max_trials, change, finding) -> None:  # noqa: D102
        pass

    def tick(self, elapsed_s) -> None:  # noqa: D102
        pass

    def trial_finished(self, record) -> None:  # noqa: D102
        pass

    def note(self, text) -> None:  # noqa: D102
        pass


def start_config(spec: WorkloadSpec, sets: list[str], device: str) -> dict[str, Any]:
    """The starting configuration: the Config defaults, then ``--set`` values, then ``--device``.

    Raises:
        WorkloadError: a bad ``--set``, or ``--device`` given to a workload without a
            ``device`` field.
    """
    config = spec.apply_sets(spec.defaults(), sets)
    if device != "auto":
        if "device" not in spec.fields:
            raise WorkloadError(f"--device {device}: the workload's Config has no 'device' field")
        config["device"] = device
    return config


def _median(values: list[float]) -> float | None:
    return statistics.median(values) if values else None


def _fmt(value: Any) -> str:
    return str(value).lower() if isinstance(value, bool) else str(value)


class FixLoop:
    """Runs the loop described in this module's docstring.

    Args:
        runner: runs trials (:class:`tracedoc.fixloop.runner.SubprocessRunner` or a fake).
        spec: the workload's description (``runner.describe()``).
        out_dir: where trial directories and the summary go.
        options: the loop options.
        progress: progress callbacks.
        workload: the workload's path as shown in the summary.
    """

    def __init__(
        self,
        runner: Runner,
        spec: WorkloadSpec,
        out_dir: str | Path,
        options: LoopOptions,
        progress: Progress | None = None,
        workload: str = "",
    ) -> None:
        self.runner = runner
        self.spec = spec
        self.out_dir = Path(out_dir)
        self.options = options
        self.progress = progress or NullProgress()
        self.workload = workload or spec.path
        self.n_cpus = options.n_cpus or knobs_mod.cpu_count()
        self.records: list[TrialRecord] = []
        self.skipped: list[dict[str, Any]] = []
        self.not_applicable: list[dict[str, Any]] = []
        self.tried: set[tuple[str, str]] = set()
        self.exhausted: set[str] = set()
        self.stop_reason = ""
        self.interrupted = False
        self.started = time.time()
        self.device: dict[str, Any] = {}
        self.incumbent: TrialRecord | None = None
        self._incumbent_analysis: dict[str, Any] | None = None

    # ---------------------------------------------------------------- running
    def run(self) -> dict[str, Any]:
        """Run the loop and return the summary dict (also written to ``out_dir``).

        Raises:
            WorkloadError: a bad ``--set`` or ``--device`` (nothing has run yet).
        """
        config = start_config(self.spec, self.options.sets, self.options.device)
        self.out_dir.mkdir(parents=True, exist_ok=True)
        try:
            self._run_baseline(config)
            if self.incumbent is not None:
                self._iterate()
        except KeyboardInterrupt:
            self.interrupted = True
            self.stop_reason = "interrupted (Ctrl-C)"
        return self.write()

    def write(self) -> dict[str, Any]:
        """Write summary.json, summary.md and final_config.json now; return the summary."""
        summary = build_summary(self)
        write_summary(self.out_dir, summary)
        return summary

    def _trial_dir(self, index: int) -> Path:
        return self.out_dir / f"trial-{index:02d}"

    def _execute(self, index: int, config: dict[str, Any], change: str, proposal: Proposal | None) -> TrialOutcome:
        finding = proposal.finding if proposal else None
        self.progress.trial_started(index, self.options.max_trials, change, finding)
        trial_dir = self._trial_dir(index)
        try:
            return self.runner.run(config, trial_dir, on_tick=self.progress.tick)
        except KeyboardInterrupt:
            record = TrialRecord(
                index=index,
                change=change,
                status="interrupted",
                config=config,
                error="interrupted by Ctrl-C",
                dir=str(trial_dir),
            )
            if proposal is not None:
                record.knob, record.old_value, record.new_value = proposal.knob.name, proposal.old, proposal.new
                record.finding = _finding_brief(proposal.finding)
            self.records.append(record)
            self.progress.trial_finished(record)
            raise

    def _run_baseline(self, config: dict[str, Any]) -> None:
        outcome = self._execute(0, config, "baseline", None)
        record = self._record_from(0, "baseline", config, outcome, None)
        if outcome.status == "ok":
            record.status = "baseline"
            record.speedup = 1.0
            self.device = dict(outcome.device)
            self.incumbent = record
            self._incumbent_analysis = outcome.analysis
            self._note_not_applicable()
        else:
            self.stop_reason = f"baseline {outcome.status}: {outcome.error}"
        self.records.append(record)
        self.progress.trial_finished(record)
        self.write()

    def _iterate(self) -> None:
        while True:
            done = len(self.records) - 1
            if done >= self.options.max_trials:
                self.stop_reason = f"trial budget spent ({self.options.max_trials} trials)"
                return
            proposal = self.propose()
            if proposal is None:
                self.stop_reason = "no applicable finding left"
                return
            self._try(done + 1, proposal)
            self.write()

    def _try(self, index: int, proposal: Proposal) -> None:
        assert self.incumbent is not None
        name = proposal.knob.name
        config = dict(self.incumbent.config)
        config[name] = proposal.new
        change = f"{name}: {_fmt(proposal.old)} -> {_fmt(proposal.new)}"
        self.tried.add((name, repr(proposal.new)))
        outcome = self._execute(index, config, change, proposal)
        record = self._record_from(index, change, config, outcome, proposal)
        if outcome.status == "ok":
            decision = decide(
                self.incumbent.samples_per_s_repeats,
                outcome.samples_per_s,
                min_gain=self.options.min_gain,
                k=self.options.noise_k,
            )
            record.decision = decision.to_dict()
            record.status = "kept" if decision.keep else "reverted"
        if record.status == "kept":
            self.incumbent = record
            self._incumbent_analysis = outcome.analysis
        elif proposal.knob.search != "target":
            self.exhausted.add(name)  # stop searching a value that stopped helping / failed
        self.records.append(record)
        self.progress.trial_finished(record)

    def _record_from(
        self, index: int, change: str, config: dict[str, Any], outcome: TrialOutcome, proposal: Proposal | None
    ) -> TrialRecord:
        record = TrialRecord(
            index=index,
            change=change,
            status=outcome.status,
            config=config,
            samples_per_s=_median(outcome.samples_per_s),
            samples_per_s_repeats=list(outcome.samples_per_s),
            step_time_ms=_median(outcome.step_time_ms),
            batch_size=outcome.batch_size if outcome.batch_size is not None else config.get("batch_size"),
            error=outcome.error,
            elapsed_s=round(outcome.elapsed_s, 2),
            dir=outcome.dir,
            top_findings=[_finding_brief(f) for f in _ranked(outcome.analysis)[:5]],
        )
        if proposal is not None:
            record.knob, record.old_value, record.new_value = proposal.knob.name, proposal.old, proposal.new
            record.finding = _finding_brief(proposal.finding)
            record.predicted_saving_ms = proposal.finding.get("estimated_saving_ms")
        baseline = self.records[0] if self.records else None
        if record.samples_per_s is not None and baseline is not None and baseline.samples_per_s:
            record.speedup = record.samples_per_s / baseline.samples_per_s
        inc = self.incumbent
        if (
            proposal is not None
            and inc is not None
            and record.step_time_ms is not None
            and inc.step_time_ms is not None
        ):
            scale = (inc.batch_size or 1) / (record.batch_size or 1)
            record.measured_saving_ms = inc.step_time_ms - record.step_time_ms * scale
        return record

    # ---------------------------------------------------------------- choosing
    def device_type(self) -> str:
        """The device type the baseline ran on (``--device``'s type before it has run)."""
        if self.device.get("type"):
            return str(self.device["type"])
        return self.options.device.split(":")[0] if self.options.device != "auto" else "cpu"

    def propose(self) -> Proposal | None:
        """The next change to try (see the module docstring), or ``None`` when none is left."""
        assert self.incumbent is not None
        current = self.incumbent.config
        dev = self.device_type()
        for finding in _ranked(self._incumbent_analysis):
            fix = finding.get("fix") or {}
            for name in fix.get("knobs") or []:
                if name not in self.spec.fields:
                    self._skip(finding, name, "the workload's Config has no such knob")
                    continue
                knob = knobs_mod.resolve_knob(name, self.spec.fields[name].type, self.spec.knobs, fix.get("safety"))
                if knob is None:
                    self._skip(finding, name, "no values to search; declare them in the workload's KNOBS")
                    continue
                if not knobs_mod.allowed(knob.safety, self.options.unsafe_fixes):
                    self._skip(finding, name, f"{knob.safety} fix: needs --unsafe-fixes")
                    continue
                if not knob.applies_to(dev):
                    self._skip(
                        finding, name, f"not applicable on {dev}" + (f": {knob.why_not}" if knob.why_not else "")
                    )
                    continue
                value = knobs_mod.propose_value(
                    knob, current.get(name), self.device, self.n_cpus, name in self.exhausted
                )
                if value is None:
                    self._skip(finding, name, f"nothing left to try from {_fmt(current.get(name))}")
                    continue
                if (name, repr(value)) in self.tried:
                    self._skip(finding, name, f"{_fmt(value)} already tried")
                    continue
                return Proposal(finding=finding, knob=knob, old=current.get(name), new=value)
        return None

    def _skip(self, finding: dict[str, Any], knob: str, reason: str) -> None:
        entry = {"code": finding.get("code"), "name": finding.get("name"), "knob": knob, "reason": reason}
        if entry not in self.skipped:
            self.skipped.append(entry)
            self.progress.note(f"{entry['code']} {entry['name']}: {knob}: {reason}")

    def _note_not_applicable(self) -> None:
        dev = self.device_type()
        for name, fspec in self.spec.fields.items():
            knob = (
                knobs_mod.resolve_knob(name, fspec.type, self.spec.knobs, None)
                if (name in knobs_mod.KNOB_TABLE or name in self.spec.knobs)
                else None
            )
            if knob is not None and not knob.applies_to(dev):
                reason = f"not applicable on {dev}" + (f": {knob.why_not}" if knob.why_not else "")
                self.not_applicable.append({"knob": name, "reason": reason})


def _ranked(analysis: dict[str, Any] | None) -> list[dict[str, Any]]:
    """Findings largest ``estimated_saving_ms`` first, ``None`` savings last (stable)."""
    findings = list((analysis or {}).get("findings") or [])
    return sorted(
        findings, key=lambda f: (f.get("estimated_saving_ms") is None, -(f.get("estimated_saving_ms") or 0.0))
    )


def _finding_brief(finding: dict[str, Any]) -> dict[str, Any]:
    fix = finding.get("fix") or {}
    return {
        "code": finding.get("code"),
        "name": finding.get("name"),
        "severity": finding.get("severity"),
        "estimated_saving_ms": finding.get("estimated_saving_ms"),
        "knobs": list(fix.get("knobs") or []),
    }
