"""The fix-loop's decisions: run the baseline, pick the top applicable fix, try it, keep or revert.

One iteration:

1. Take the incumbent's findings in rank order (largest ``estimated_saving_ms`` first;
   ``None`` last). For each finding, take its ``fix.knobs`` in order; the first knob
   that (a) is a field of the workload's ``Config``, (b) has a safety level the options
   allow, (c) applies on the device the baseline ran on, and (d) has a next value that
   was not tried before (see :func:`tracedoc.fixloop.knobs.propose_value`) is the change.
   Every knob passed over is recorded once in ``skipped`` with the reason.
2. Run the incumbent's configuration with that one change as a new trial: one
   profiled run (trace and findings), then interleaved A/B rounds of incumbent and
   candidate (fresh processes, no trace; see :mod:`tracedoc.fixloop.noise`).
3. The change is kept when :func:`tracedoc.fixloop.noise.decide` says ``keep``;
   ``revert`` and (after ``max_rounds`` rounds) ``inconclusive`` are not kept; a
   crashed, out-of-memory or timed-out trial is reverted. A knob whose value is searched
   (num_workers, batch_size) stops being searched once a step of it is not kept.
4. A change that was not kept, whose own trace shows a finding the incumbent's did not
   (e.g. DataLoader workers that oversubscribe the cores), is tried once more together
   with that finding's fix (a *follow-up*: ``num_workers: 0 -> 1 + num_threads: 0 -> 1``).
5. Write the summary (after every trial, so the best configuration is never lost).

It stops when no finding has an applicable change, when ``max_trials`` trials (not
counting the baseline) have run, or on Ctrl-C, SIGTERM or SIGHUP (the summary is still
written). ``speedup`` is the product of the kept trials' median paired ratios (each
measured interleaved with its incumbent, so changes in the machine's load between
trials do not enter it).
"""

from __future__ import annotations

import math
import statistics
import time
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Any, Protocol

from tracedoc._version import __version__
from tracedoc.fixloop import knobs as knobs_mod
from tracedoc.fixloop.noise import MIN_ROUNDS, decide
from tracedoc.fixloop.runner import Runner, TrialOutcome
from tracedoc.fixloop.summary import NOISE_RULE, PROFILED_STEP_FACTOR, predicted_vs_measured, write_summary
from tracedoc.fixloop.workload import WorkloadError, WorkloadSpec, strict_json
from tracedoc.report.fixloop import FixLoopSummary

#: Statuses a trial can end with. ``baseline`` is the first trial when it measured.
STATUSES = ("baseline", "kept", "reverted", "inconclusive", "crashed", "oom", "timeout", "interrupted")


class Terminated(KeyboardInterrupt):
    """SIGTERM or SIGHUP, raised by the command's signal handler; handled like Ctrl-C.

    Attributes:
        signum: the signal number (exit status ``128 + signum``: 143 SIGTERM, 129 SIGHUP).
    """

    def __init__(self, signum: int) -> None:
        super().__init__(signum)
        self.signum = signum


@dataclass
class LoopOptions:
    """Options of one fix-loop run.

    Attributes:
        max_trials: trials after the baseline, at most.
        unsafe_fixes: also apply unsafe knobs (batch_size, amp).
        device: ``auto`` or a device name given to the workload's ``device`` field.
        sets: ``KNOB=VALUE`` assignments for the starting configuration.
        min_gain: minimum relative gain to keep a change (fraction; see noise.py).
        ab_rounds: A/B rounds run for every trial (at least ``noise.MIN_ROUNDS`` = 5).
        max_rounds: rounds at most, when the first ones cannot decide (then ``inconclusive``).
        n_cpus: CPUs for the num_workers / num_threads search; ``None``: this machine's.
    """

    max_trials: int = 8
    unsafe_fixes: bool = False
    device: str = "auto"
    sets: list[str] = field(default_factory=list)
    min_gain: float = 0.02
    ab_rounds: int = MIN_ROUNDS
    max_rounds: int = 9
    n_cpus: int | None = None


@dataclass
class TrialRecord:
    """One row of the summary (all times in ms, throughputs in samples/s).

    ``samples_per_s`` and ``step_time_ms`` are the medians of the candidate's A/B rounds
    (of the profiled run's repeats for the baseline and failed trials);
    ``samples_per_s_repeats`` are the values they are the median of. ``ab`` holds both
    sides of the A/B rounds (samples/s and step ms per round, median, CV).
    ``predicted_saving_ms`` is the finding's ``estimated_saving_ms`` (per incumbent step: the
    step model's replayed saving where the rule declares a replay, its slice and range beside
    it in ``predicted_slice_ms`` / ``predicted_low_ms``);
    ``measured_saving_ms`` is the incumbent's step time minus the candidate's, both from
    the A/B rounds, the candidate's scaled to the incumbent's batch size
    (:func:`tracedoc.fixloop.summary.predicted_vs_measured`). ``extra_changes`` are the
    further knob changes of a follow-up trial (``{knob: [old, new]}``), caused by
    ``followup_finding``.
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
    ab: dict[str, Any] | None = None
    extra_changes: dict[str, list[Any]] = field(default_factory=dict)
    followup_finding: dict[str, Any] | None = None
    prediction_error: float | None = None
    #: ``tracedoc diff``'s predicted-vs-measured row for the applied finding, between the
    #: incumbent's and this trial's profiled traces (:func:`tracedoc.diff.predicted_vs_measured`,
    #: the same code as ``tracedoc diff``): step times from the traces, beside the A/B figures
    trace_diff: dict[str, Any] | None = None
    #: the profiled trace's mean complete step (its analysis' ``step_time_ms``), beside the
    #: timed ``step_time_ms``: predicted savings are read off the trace, in its time
    profiled_step_ms: float | None = None
    #: ``predicted_saving_ms`` rescaled from the incumbent's profiled step to its timed one
    #: (``predicted * incumbent timed step / incumbent profiled step``): the prediction in
    #: the time base of ``measured_saving_ms``, first-order (it takes the profiler's
    #: overhead as spread evenly over the step)
    predicted_saving_timed_ms: float | None = None
    #: beside a replayed prediction (the step model's, :mod:`tracedoc.signals.stepmodel`): the
    #: finding's granted slice, its upper bound, and the low end of the replayed range
    predicted_slice_ms: float | None = None
    predicted_low_ms: float | None = None

    def to_dict(self) -> dict[str, Any]:
        """JSON-safe form."""
        return asdict(self)


@dataclass(frozen=True)
class Proposal:
    """The next change: set ``knob`` from ``old`` to ``new`` because of ``finding``.

    A follow-up also sets ``extra`` (``{knob: (old, new)}``) because of ``followup``.
    """

    finding: dict[str, Any]
    knob: knobs_mod.Knob
    old: Any
    new: Any
    extra: tuple[tuple[str, Any, Any], ...] = ()
    followup: dict[str, Any] | None = None

    def key(self) -> frozenset:
        """What identifies the change set (for "already tried")."""
        return frozenset([(self.knob.name, repr(self.new))] + [(k, repr(new)) for k, _, new in self.extra])


class Progress(Protocol):
    """Progress callbacks (the command shows them on stderr; tests pass :class:`NullProgress`)."""

    def trial_started(self, index: int, max_trials: int, change: str, finding: dict | None) -> None: ...
    def tick(self, elapsed_s: float) -> None: ...
    def trial_finished(self, record: TrialRecord) -> None: ...
    def note(self, text: str) -> None: ...
    def info(self, text: str) -> None: ...


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

    def info(self, text) -> None:  # noqa: D102
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
        self.tried: set[frozenset] = set()
        self.exhausted: set[str] = set()
        self.stop_reason = ""
        self.interrupted = False
        self.signal: int | None = None
        self.followups: list[Proposal] = []
        self.started = time.time()
        self.device: dict[str, Any] = {}
        self.incumbent: TrialRecord | None = None
        #: the last summary written (:meth:`write`), the document; None before the first
        self.summary: FixLoopSummary | None = None
        self._incumbent_analysis: dict[str, Any] | None = None

    # ---------------------------------------------------------------- running
    def run(self) -> dict[str, Any]:
        """Run the loop and return the summary dict (also written to ``out_dir``): the
        ``to_dict()`` of the document left in :attr:`summary`.

        Raises:
            WorkloadError: a bad ``--set`` or ``--device`` (nothing has run yet).
        """
        config = start_config(self.spec, self.options.sets, self.options.device)
        self.out_dir.mkdir(parents=True, exist_ok=True)
        try:
            self._run_baseline(config)
            if self.incumbent is not None:
                self._iterate()
        except KeyboardInterrupt as exc:
            self.interrupted = True
            if isinstance(exc, Terminated):
                import signal as signal_mod

                self.signal = exc.signum
                self.stop_reason = f"terminated by {signal_mod.Signals(exc.signum).name}"
            else:
                self.stop_reason = "interrupted (Ctrl-C)"
        try:
            return self.write()
        except KeyboardInterrupt:  # a second signal while writing: write once more, then stop
            return self.write()

    def write(self) -> dict[str, Any]:
        """Write summary.json, summary.md and final_config.json now; keep the summary document
        in :attr:`summary` and return its ``to_dict()`` (what summary.json holds)."""
        summary = build_summary(self)
        write_summary(self.out_dir, summary)
        self.summary = summary
        return summary.to_dict()

    def _trial_dir(self, index: int) -> Path:
        return self.out_dir / f"trial-{index:02d}"

    def _interrupted(self, index: int, config: dict[str, Any], change: str, proposal, started: float, exc) -> None:
        why = "terminated by signal" if isinstance(exc, Terminated) else "interrupted by Ctrl-C"
        record = TrialRecord(
            index=index,
            change=change,
            status="interrupted",
            config=config,
            error=why,
            elapsed_s=round(time.monotonic() - started, 2),
            dir=str(self._trial_dir(index)),
        )
        if proposal is not None:
            self._describe_change(record, proposal)
        self.records.append(record)
        self.progress.trial_finished(record)

    def _execute(
        self, index: int, config: dict[str, Any], change: str, proposal: Proposal | None, started: float
    ) -> TrialOutcome:
        finding = proposal.finding if proposal else None
        self.progress.trial_started(index, self.options.max_trials, change, finding)
        trial_dir = self._trial_dir(index)
        try:
            return self.runner.run(config, trial_dir, on_tick=self.progress.tick)
        except KeyboardInterrupt as exc:
            self._interrupted(index, config, change, proposal, started, exc)
            raise

    def _run_baseline(self, config: dict[str, Any]) -> None:
        outcome = self._execute(0, config, "baseline", None, time.monotonic())
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
                from tracedoc.text import plural

                self.stop_reason = f"trial budget spent ({plural(self.options.max_trials, 'trial')})"
                return
            proposal = self.followups.pop(0) if self.followups else self.propose()
            if proposal is None:
                self.stop_reason = "no applicable finding left"
                return
            self._try(done + 1, proposal)
            self.write()

    def _describe_change(self, record: TrialRecord, proposal: Proposal) -> None:
        record.knob, record.old_value, record.new_value = proposal.knob.name, proposal.old, proposal.new
        record.finding = _finding_brief(proposal.finding)
        record.predicted_saving_ms = proposal.finding.get("estimated_saving_ms")
        record.predicted_slice_ms = proposal.finding.get("slice_saving_ms")
        record.predicted_low_ms = proposal.finding.get("replayed_low_ms")
        record.extra_changes = {k: [old, new] for k, old, new in proposal.extra}
        record.followup_finding = _finding_brief(proposal.followup) if proposal.followup else None

    def _try(self, index: int, proposal: Proposal) -> None:
        assert self.incumbent is not None
        started = time.monotonic()
        name = proposal.knob.name
        config = dict(self.incumbent.config)
        config[name] = proposal.new
        parts = [f"{name}: {_fmt(proposal.old)} -> {_fmt(proposal.new)}"]
        for knob, old, new in proposal.extra:
            config[knob] = new
            parts.append(f"{knob}: {_fmt(old)} -> {_fmt(new)}")
        change = " + ".join(parts)
        self.tried.add(proposal.key())
        outcome = self._execute(index, config, change, proposal, started)
        record = self._record_from(index, change, config, outcome, proposal)
        if outcome.status == "ok":
            try:
                self._ab_rounds(index, record, config)
            except KeyboardInterrupt as exc:
                self._interrupted(index, config, change, proposal, started, exc)
                raise
        record.elapsed_s = round(time.monotonic() - started, 2)
        record.trace_diff = _trace_diff(self._incumbent_analysis, outcome.analysis, record.finding)
        if record.status == "kept":
            self.incumbent = record
            self._incumbent_analysis = outcome.analysis
            self.exhausted.difference_update({name, *(k for k, _, _ in proposal.extra)})
        else:
            if proposal.knob.search != "target":
                self.exhausted.add(name)  # stop searching a value that stopped helping / failed
            if record.status in ("reverted", "inconclusive") and not proposal.extra:
                self._queue_followup(proposal, config, outcome.analysis)
        self.records.append(record)
        self.progress.trial_finished(record)

    def _ab_rounds(self, index: int, record: TrialRecord, config: dict[str, Any]) -> None:
        """Measure incumbent (A) and candidate (B) in alternating rounds and decide (noise.py)."""
        assert self.incumbent is not None
        inc_config = self.incumbent.config
        a_sps: list[float] = []
        b_sps: list[float] = []
        a_ms: list[float] = []
        b_ms: list[float] = []
        rounds = max(self.options.ab_rounds, MIN_ROUNDS)
        max_rounds = max(self.options.max_rounds, rounds)
        decision = None
        i = 0
        while True:
            while i < rounds:
                order = (("A", inc_config), ("B", config)) if i % 2 == 0 else (("B", config), ("A", inc_config))
                got: dict[str, TrialOutcome] = {}
                for side, cfg in order:
                    run_dir = self._trial_dir(index) / f"ab-{i + 1:02d}-{side}"
                    out = self.runner.measure(cfg, run_dir, on_tick=self.progress.tick)
                    if out.status != "ok":
                        who = "incumbent" if side == "A" else "candidate"
                        record.status = out.status if side == "B" else "inconclusive"
                        record.error = f"A/B round {i + 1}, {who}: {out.status}: {out.error}"
                        record.ab = _ab_dict(a_sps, b_sps, a_ms, b_ms)
                        return
                    got[side] = out
                a_sps.append(statistics.median(got["A"].samples_per_s))
                b_sps.append(statistics.median(got["B"].samples_per_s))
                self._info(f"A/B round {i + 1}: A {a_sps[-1]:.1f}, B {b_sps[-1]:.1f} samples/s")
                a_ms.append(statistics.median(got["A"].step_time_ms))
                b_ms.append(statistics.median(got["B"].step_time_ms))
                i += 1
            decision = decide(a_sps, b_sps, min_gain=self.options.min_gain, final=rounds >= max_rounds)
            if decision.verdict != "undecided":
                break
            rounds += 1
            self._info(f"undecided ({decision.reason}); measuring round {rounds}")
        record.decision = decision.to_dict()
        record.ab = _ab_dict(a_sps, b_sps, a_ms, b_ms)
        record.status = {"keep": "kept", "revert": "reverted"}.get(decision.verdict, "inconclusive")
        record.samples_per_s = statistics.median(b_sps)
        record.samples_per_s_repeats = list(b_sps)
        record.step_time_ms = statistics.median(b_ms)
        record.speedup = (self.incumbent.speedup or 1.0) * decision.ratio_median
        pvm = predicted_vs_measured(
            record.predicted_saving_ms,
            statistics.median(a_ms),
            self.incumbent.batch_size,
            record.step_time_ms,
            record.batch_size,
            self.incumbent.profiled_step_ms,
        )
        record.measured_saving_ms = pvm["measured_saving_ms"]
        record.prediction_error = pvm["error"]
        record.predicted_saving_timed_ms = pvm["predicted_saving_timed_ms"]

    def _info(self, text: str) -> None:
        info = getattr(self.progress, "info", None)
        if info is not None:
            info(text)

    def _queue_followup(self, proposal: Proposal, config: dict[str, Any], analysis: dict[str, Any] | None) -> None:
        """Queue the change again with the fix of a finding that only its own trace shows."""
        before = {f.get("code") for f in _ranked(self._incumbent_analysis)}
        dev = self.device_type()
        for finding in _ranked(analysis):
            if finding.get("code") in before:
                continue
            fix = finding.get("fix") or {}
            for name in fix.get("knobs") or []:
                if name == proposal.knob.name:
                    continue
                got = self._candidate(finding, name, config, dev)
                if got is None:
                    continue
                knob, value = got
                followup = Proposal(
                    finding=proposal.finding,
                    knob=proposal.knob,
                    old=proposal.old,
                    new=proposal.new,
                    extra=((name, self.incumbent.config.get(name) if self.incumbent else None, value),),
                    followup=finding,
                )
                if followup.key() in self.tried:
                    continue
                self.followups.append(followup)
                self._info(
                    f"{proposal.knob.name}={_fmt(proposal.new)} shows {finding.get('code')} {finding.get('name')}: "
                    f"trying it again with {name}={_fmt(value)}"
                )
                return

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
            profiled_step_ms=_profiled_step_ms(outcome.analysis),
        )
        if proposal is not None:
            self._describe_change(record, proposal)
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
                got = self._candidate(finding, name, current, dev)
                if got is None:
                    continue
                knob, value = got
                if frozenset([(name, repr(value))]) in self.tried:
                    self._skip(finding, name, f"{_fmt(value)} already tried")
                    continue
                return Proposal(finding=finding, knob=knob, old=current.get(name), new=value)
        return None

    def _candidate(
        self, finding: dict[str, Any], name: str, current: dict[str, Any], dev: str
    ) -> tuple[knobs_mod.Knob, Any] | None:
        """The knob and next value for ``name`` from ``current``, or ``None`` (noted in ``skipped``)."""
        fix = finding.get("fix") or {}
        if not isinstance(name, str) or name not in self.spec.fields:
            self._skip(finding, str(name), "the workload's Config has no such knob")
            return None
        knob = knobs_mod.resolve_knob(name, self.spec.fields[name].type, self.spec.knobs, fix.get("safety"))
        if knob is None:
            self._skip(finding, name, "no values to search; declare them in the workload's KNOBS")
            return None
        if not knobs_mod.allowed(knob.safety, self.options.unsafe_fixes):
            self._skip(finding, name, f"{knob.safety} fix: needs --unsafe-fixes")
            return None
        if not knob.applies_to(dev, self.device):
            self._skip(finding, name, f"not applicable on {dev}" + (f": {knob.why_not}" if knob.why_not else ""))
            return None
        value = knobs_mod.propose_value(
            knob, current.get(name), self.device, self.n_cpus, name in self.exhausted, config=current
        )
        if value is None:
            self._skip(finding, name, f"nothing left to try from {_fmt(current.get(name))}")
            return None
        return knob, value

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
            if knob is not None and not knob.applies_to(dev, self.device):
                reason = f"not applicable on {dev}" + (f": {knob.why_not}" if knob.why_not else "")
                self.not_applicable.append({"knob": name, "reason": reason})


def _trace_diff(
    before: dict[str, Any] | None, after: dict[str, Any] | None, finding: dict[str, Any] | None
) -> dict[str, Any] | None:
    """``tracedoc diff``'s predicted-vs-measured row of ``finding`` between two trials' analyses
    (None when either analysis or the finding is missing, or the analyses are not reports)."""
    if not before or not after or not finding or not finding.get("code"):
        return None
    from tracedoc.diff import predicted_vs_measured

    try:
        rows = predicted_vs_measured(before, after, names=[finding["code"]])
    except (TypeError, ValueError, KeyError):
        return None
    return rows[0] if rows else None


def _profiled_step_ms(analysis: dict[str, Any] | None) -> float | None:
    """The analysis' ``step_time_ms`` signal (ms), None when absent or not a positive number."""
    signals = (analysis or {}).get("signals")
    v = signals.get("step_time_ms") if isinstance(signals, dict) else None
    ok = isinstance(v, (int, float)) and not isinstance(v, bool) and math.isfinite(v) and v > 0
    return float(v) if ok else None


def _ranked(analysis: dict[str, Any] | None) -> list[dict[str, Any]]:
    """Findings largest ``estimated_saving_ms`` first, ``None`` savings last (stable)."""
    findings = list((analysis or {}).get("findings") or [])
    return sorted(
        findings, key=lambda f: (f.get("estimated_saving_ms") is None, -(f.get("estimated_saving_ms") or 0.0))
    )


def _ab_dict(a_sps: list[float], b_sps: list[float], a_ms: list[float], b_ms: list[float]) -> dict[str, Any]:
    from tracedoc.fixloop.noise import cv

    def side(sps: list[float], ms: list[float]) -> dict[str, Any]:
        return {
            "samples_per_s": list(sps),
            "step_time_ms": list(ms),
            "median_samples_per_s": statistics.median(sps) if sps else None,
            "cv": cv(sps) if sps else None,
        }

    return {"rounds": len(b_sps), "incumbent": side(a_sps, a_ms), "candidate": side(b_sps, b_ms)}


def _finding_brief(finding: dict[str, Any]) -> dict[str, Any]:
    fix = finding.get("fix") or {}
    return {
        "code": finding.get("code"),
        "name": finding.get("name"),
        "severity": finding.get("severity"),
        "estimated_saving_ms": finding.get("estimated_saving_ms"),
        "knobs": list(fix.get("knobs") or []),
    }


def warnings(loop: FixLoop) -> list[str]:
    """Notes on measurements that could not decide: noisy sides (CV above noise.NOISY_CV),
    inconclusive trials, and profiled steps more than :data:`PROFILED_STEP_FACTOR` away from
    the timed step."""
    from tracedoc.fixloop.noise import NOISY_CV

    out = []
    for r in loop.records:
        prof, timed = r.profiled_step_ms, r.step_time_ms
        if prof and timed and max(prof / timed, timed / prof) >= PROFILED_STEP_FACTOR:
            out.append(
                f"trial {r.index}: its profiled steps averaged {prof:.1f} ms, {prof / timed:.2f}x the timed "
                f"step ({timed:.1f} ms); the savings predicted from its trace are in the trace's time "
                "(profiler overhead on many small ops, or an unrepresentative profiled window); "
                "predicted_saving_timed_ms rescales them to the timed step"
            )
        d = r.decision or {}
        if d.get("noisy"):
            out.append(
                f"trial {r.index}: the machine was too noisy (CV incumbent {d['incumbent_cv']:.1%}, "
                f"candidate {d['candidate_cv']:.1%}; above {NOISY_CV:.0%})"
            )
        if r.status == "inconclusive":
            out.append(f"trial {r.index} ({r.change}) is inconclusive: {r.error or d.get('reason', '')}")
    return out


def build_summary(loop: FixLoop) -> FixLoopSummary:
    """The loop's state as the summary document (:class:`~tracedoc.report.fixloop.FixLoopSummary`;
    every non-finite number replaced by None, :func:`tracedoc.fixloop.workload.strict_json`)."""
    records = loop.records
    baseline = records[0] if records else None
    inc = loop.incumbent
    final = None
    if inc is not None:
        kept = [r.change for r in records[1:] if r.status == "kept"]
        final = {
            "config": inc.config,
            "samples_per_s": inc.samples_per_s,
            "step_time_ms": inc.step_time_ms,
            "speedup": inc.speedup,
            "trial": inc.index,
            "changes": kept,
        }
    return FixLoopSummary(
        version=__version__,
        workload=loop.workload,
        out_dir=str(loop.out_dir),
        device=strict_json(loop.device),
        options=strict_json(
            {
                "max_trials": loop.options.max_trials,
                "unsafe_fixes": loop.options.unsafe_fixes,
                "device": loop.options.device,
                "sets": list(loop.options.sets),
                "min_gain": loop.options.min_gain,
                "ab_rounds": loop.options.ab_rounds,
                "max_rounds": loop.options.max_rounds,
                "n_cpus": loop.n_cpus,
            }
        ),
        noise_rule=NOISE_RULE,
        baseline=None
        if baseline is None
        else strict_json(
            {
                "config": baseline.config,
                "samples_per_s": baseline.samples_per_s,
                "step_time_ms": baseline.step_time_ms,
                "status": baseline.status,
            }
        ),
        final=strict_json(final),
        trials=strict_json([r.to_dict() for r in records]),
        not_applicable=strict_json(loop.not_applicable),
        skipped=strict_json(loop.skipped),
        warnings=warnings(loop),
        stop_reason=loop.stop_reason or "running",
        interrupted=loop.interrupted,
        signal=loop.signal,
        started_at=time.strftime("%Y-%m-%dT%H:%M:%S%z", time.localtime(loop.started)),
        wall_s=round(time.time() - loop.started, 1),
    )
