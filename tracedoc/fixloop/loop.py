"""The fix-loop's decisions: run the baseline, pick the top applicable fix, try it, keep or revert.

The baseline (trial 0) first: its timed windows must agree
(:func:`tracedoc.fixloop.noise.check_repeats`) before any trial is judged; while they do not,
the loop measures more of them (measure-only runs, up to ``max_rounds``), and a baseline whose
windows still disagree is marked unusable (``repeats_check``; the table shows none of its
figures). Then one iteration:

1. Take the incumbent's findings in rank order (largest ``estimated_saving_ms`` first;
   ``None`` last). For each finding, take its ``fix.knobs`` in order; the first knob
   that (a) is a field of the workload's ``Config``, (b) has a safety level the options
   allow, (c) applies on the device the baseline ran on, and (d) has a next value that
   was not tried before (see :func:`tracedoc.fixloop.knobs.propose_value`) is the change.
   Every knob passed over is recorded once in ``skipped`` with the reason. On the CPU a
   ``num_workers`` change that would oversubscribe the cores comes with its ``num_threads``
   (:func:`tracedoc.fixloop.knobs.thread_companion`: ``num_workers: 0 -> 1 + num_threads:
   0 -> 1`` on two cores), the fix the CPU step model replays.
2. Run the incumbent's configuration with that one change as a new trial: one
   profiled run (trace and findings), then interleaved A/B rounds of incumbent and
   candidate (fresh processes, no trace; see :mod:`tracedoc.fixloop.noise`). While a knob with
   a one-off cost per process is on in either (``compile``), both sides warm up for at least
   :data:`tracedoc.fixloop.knobs.WARMUP_STEPS` steps. A ``num_workers`` search starts at the
   count the finding suggests (:func:`tracedoc.fixloop.knobs.suggested_value`).
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
import os
import statistics
import time
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Any, Protocol

from tracedoc._version import __version__
from tracedoc.fixloop import knobs as knobs_mod
from tracedoc.fixloop.files import describe_oserror, is_disk_full
from tracedoc.fixloop.noise import MIN_ROUNDS, check_repeats, decide
from tracedoc.fixloop.runner import Runner, TrialOutcome, as_report
from tracedoc.fixloop.summary import NOISE_RULE, PROFILED_STEP_FACTOR, predicted_vs_measured, write_summary
from tracedoc.fixloop.workload import WorkloadError, WorkloadSpec, strict_json
from tracedoc.report.fixloop import FixLoopSummary

if TYPE_CHECKING:  # annotations only
    from tracedoc.report.model import Finding, Report

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
    #: the profiled run's own measurements, one per timed repeat (``samples_per_s``,
    #: ``step_time_ms``), kept beside the A/B medians: every finished measurement is in the
    #: summary (None: the profiled run did not measure)
    profiled_run: dict[str, list[float]] | None = None
    #: the baseline's check of its timed windows (:func:`tracedoc.fixloop.noise.check_repeats`:
    #: ``verdict``, ``usable``, ``n``, ``median``, ``cv``, ``low``, ``high``, ``confidence``,
    #: ``reason``), with ``extra``: the samples/s and step ms of the measure-only runs made
    #: when the profiled run's repeats disagreed (None: not the baseline, or it failed)
    repeats_check: dict[str, Any] | None = None

    def to_dict(self) -> dict[str, Any]:
        """JSON-safe form."""
        return asdict(self)


@dataclass(frozen=True)
class Proposal:
    """The next change: set ``knob`` from ``old`` to ``new`` because of ``finding``.

    A follow-up also sets ``extra`` (``{knob: (old, new)}``) because of ``followup``.
    """

    finding: Finding
    knob: knobs_mod.Knob
    old: Any
    new: Any
    extra: tuple[tuple[str, Any, Any], ...] = ()
    followup: Finding | None = None

    def key(self) -> frozenset:
        """What identifies the change set (for "already tried")."""
        return frozenset([(self.knob.name, repr(self.new))] + [(k, repr(new)) for k, _, new in self.extra])


class Progress(Protocol):
    """Progress callbacks (the command shows them on stderr; tests pass :class:`NullProgress`)."""

    def trial_started(self, index: int, max_trials: int, change: str, finding: Finding | None) -> None: ...
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
        self.out_dir = Path(os.path.abspath(out_dir))  # once: a relative path must not follow a chdir
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
        self._incumbent_analysis: Report | None = None
        #: the trial in flight and its start (time.monotonic()); None between trials
        self._pending: tuple[TrialRecord, float] | None = None
        #: the first failed write for a full disk (one line), which stops the loop
        self.disk_full: str | None = None
        #: why summary.json could not be written (None: it was, the last time)
        self.summary_error: str | None = None
        #: logs removed to make room for summary.json on a full disk
        self.freed_logs = 0

    # ---------------------------------------------------------------- running
    def run(self) -> dict[str, Any]:
        """Run the loop and return the summary dict (also written to ``out_dir``): the
        ``to_dict()`` of the document left in :attr:`summary`.

        On Ctrl-C, SIGTERM or SIGHUP the trial in flight is recorded as ``interrupted`` with
        everything it had measured (its profiled run, its finished A/B rounds and the
        finished half of an unfinished one), and the summary is written.

        Raises:
            WorkloadError: a bad ``--set`` or ``--device`` (nothing has run yet).
        """
        config = start_config(self.spec, self.options.sets, self.options.device)
        try:
            self.out_dir.mkdir(parents=True, exist_ok=True)
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
            self._finish_pending(exc)
        except OSError as exc:  # the output folder itself cannot be made (a full disk, no permission)
            self._note_write_error(exc)
            self.stop_reason = f"cannot write to {self.out_dir}: {describe_oserror(exc)}"
        try:
            return self.write()
        except KeyboardInterrupt:  # a second signal while writing: write once more, then stop
            return self.write()

    def write(self) -> dict[str, Any]:
        """Write summary.json (first), summary.md and final_config.json now; keep the summary
        document in :attr:`summary` and return its ``to_dict()`` (what summary.json holds).

        Never raises for a failed write: the summary stays in memory (:attr:`summary`) and is
        written again next time. On a full disk the old summary.md and final_config.json
        (written again from the summary) and then the logs of this run, largest first, are
        removed until summary.json fits (the summary holds every measurement; a log only the
        text around one); :attr:`summary_error` says why summary.json is not up to date, if it
        is not.
        """
        summary = build_summary(self)
        failed = write_summary(self.out_dir, summary)
        if "summary.json" in failed and is_disk_full(failed["summary.json"]):
            self._note_write_error(failed["summary.json"])
            for path in _removable(self.out_dir):
                path.unlink(missing_ok=True)
                self.freed_logs += path.suffix == ".log"
                summary = build_summary(self)
                failed = write_summary(self.out_dir, summary, only_json=True)
                if "summary.json" not in failed:
                    break
        for exc in failed.values():
            self._note_write_error(exc)
        self.summary_error = describe_oserror(failed["summary.json"]) if "summary.json" in failed else None
        self.summary = summary
        return summary.to_dict()

    def _note_write_error(self, exc: OSError) -> None:
        """Remember a failed write; a full disk stops the loop after the trial in flight."""
        if is_disk_full(exc) and not self.disk_full:
            self.disk_full = describe_oserror(exc)
            self.progress.note(f"disk full ({self.disk_full}): stopping after this trial to write the summary")

    def _trial_dir(self, index: int) -> Path:
        return self.out_dir / f"trial-{index:02d}"

    def _begin(self, index: int, change: str, config: dict[str, Any], proposal: Proposal | None) -> TrialRecord:
        """The record of a trial about to start: :attr:`_pending` until it ends (an interrupt
        finds in it what was measured so far)."""
        record = TrialRecord(
            index=index, change=change, status="interrupted", config=config, dir=str(self._trial_dir(index))
        )
        if proposal is not None:
            self._describe_change(record, proposal)
        self._pending = (record, time.monotonic())
        self.progress.trial_started(index, self.options.max_trials, change, proposal.finding if proposal else None)
        return record

    def _end(self, record: TrialRecord) -> None:
        self._pending = None
        self.records.append(record)
        self.progress.trial_finished(record)

    def _finish_pending(self, exc: KeyboardInterrupt) -> None:
        """Record the trial in flight as ``interrupted``, with what it had measured."""
        if self._pending is None:
            return
        record, started = self._pending
        record.status = "interrupted"
        record.error = "terminated by signal" if isinstance(exc, Terminated) else "interrupted by Ctrl-C"
        record.elapsed_s = round(time.monotonic() - started, 2)
        self._end(record)

    def _execute(self, record: TrialRecord, config: dict[str, Any]) -> TrialOutcome:
        """The trial's profiled run, its outcome copied into ``record``. An interrupt after the
        run had measured (``exc.outcome``, see :class:`~tracedoc.fixloop.runner.Runner`) leaves
        those measurements in ``record`` before it propagates."""
        try:
            outcome = self.runner.run(config, self._trial_dir(record.index), on_tick=self.progress.tick)
        except KeyboardInterrupt as exc:
            partial = getattr(exc, "outcome", None)
            if isinstance(partial, TrialOutcome):
                self._fill(record, partial)
            raise
        self._fill(record, outcome)
        return outcome

    def _run_baseline(self, config: dict[str, Any]) -> None:
        record = self._begin(0, "baseline", config, None)
        outcome = self._execute(record, config)
        if record.status == "ok":
            self._check_baseline(record, config)
            record.status = "baseline"
            record.speedup = 1.0
            self.device = dict(outcome.device)
            self.incumbent = record
            self._incumbent_analysis = self._analysis_of(outcome)
            self._note_not_applicable()
        else:
            self.stop_reason = f"baseline {record.status}: {record.error}"
        self._end(record)
        self.write()

    def _check_baseline(self, record: TrialRecord, config: dict[str, Any]) -> None:
        """Check that the baseline's timed windows agree (:func:`tracedoc.fixloop.noise.check_repeats`)
        before any trial is judged; while they do not, measure one more window of the baseline
        (a fresh measure-only process, as an A/B run), up to ``max_rounds`` more. The baseline's
        ``samples_per_s`` and ``step_time_ms`` are then the medians of all its windows, and
        ``repeats_check`` records the verdict: when the windows still disagree the baseline's
        figures are marked unusable (the table shows none; a warning says why). The trials are
        judged on their own A/B rounds either way."""
        sps = list(record.samples_per_s_repeats)
        ms = list((record.profiled_run or {}).get("step_time_ms") or [])
        extra: dict[str, list[float]] = {"samples_per_s": [], "step_time_ms": []}
        budget = max(self.options.max_rounds, MIN_ROUNDS)
        note = ""
        while True:
            check = check_repeats(sps, final=len(extra["samples_per_s"]) >= budget or bool(note))
            record.repeats_check = {**check.to_dict(), "extra": extra}
            if check.verdict != "more":
                break
            i = len(extra["samples_per_s"]) + 1
            if i == 1:
                self._info(f"baseline: its timed windows disagree ({check.reason}); measuring more")
            out = self.runner.measure(config, self._trial_dir(0) / f"repeat-{i:02d}", on_tick=self.progress.tick)
            if out.write_error is not None:
                self._note_write_error(out.write_error)
            if out.status != "ok" or not out.samples_per_s:
                note = f"; extra run {i}: {out.status}: {out.error}"
                continue
            got_sps, got_ms = statistics.median(out.samples_per_s), statistics.median(out.step_time_ms)
            extra["samples_per_s"].append(got_sps)
            extra["step_time_ms"].append(got_ms)
            sps.append(got_sps)
            ms.append(got_ms)
            record.samples_per_s_repeats = list(sps)
            record.samples_per_s = statistics.median(sps)
            record.step_time_ms = statistics.median(ms) if ms else record.step_time_ms
            self._info(f"baseline extra run {i}: {got_sps:.1f} samples/s")
            if self.disk_full:
                note = f"; disk full ({self.disk_full})"
        if note:
            record.repeats_check["reason"] += note

    def _iterate(self) -> None:
        while True:
            done = len(self.records) - 1
            if self.disk_full:
                self.stop_reason = f"disk full ({self.disk_full}): stopped to keep the summary"
                return
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
        record.predicted_saving_ms = proposal.finding.estimated_saving_ms
        record.predicted_slice_ms = proposal.finding.slice_saving_ms
        record.predicted_low_ms = proposal.finding.replayed_low_ms
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
        self.tried.add(proposal.key())
        record = self._begin(index, " + ".join(parts), config, proposal)
        outcome = self._execute(record, config)
        analysis = self._analysis_of(outcome)
        record.trace_diff = _trace_diff(self._incumbent_analysis, analysis, proposal.finding)
        if record.status == "ok":
            self._ab_rounds(index, record, config)
        record.elapsed_s = round(time.monotonic() - started, 2)
        if record.status == "kept":
            self.incumbent = record
            self._incumbent_analysis = analysis
            self.exhausted.difference_update({name, *(k for k, _, _ in proposal.extra)})
        else:
            if proposal.knob.search != "target":
                self.exhausted.add(name)  # stop searching a value that stopped helping / failed
            if record.status in ("reverted", "inconclusive") and proposal.followup is None:
                self._queue_followup(proposal, config, analysis)
        self._end(record)

    def _ab_rounds(self, index: int, record: TrialRecord, config: dict[str, Any]) -> None:
        """Measure incumbent (A) and candidate (B) in alternating rounds and decide (noise.py).

        ``record.ab`` is brought up to date after every measurement, so an interrupt leaves
        every finished one in it; a full disk stops the rounds (the trial is then undecided,
        ``inconclusive``)."""
        assert self.incumbent is not None
        inc_config, ab_config = self._ab_configs(self.incumbent.config, config)
        rounds = _Rounds()
        if ab_config is not config:
            rounds.warmup_steps = int(ab_config["warmup_steps"])
            on = ", ".join(k for k in knobs_mod.WARMUP_STEPS if True in (ab_config.get(k), inc_config.get(k)))
            self._info(
                f"A/B runs warm up for {rounds.warmup_steps} steps: {on} is on, a one-off cost in every fresh process"
            )
        config = ab_config
        n = max(self.options.ab_rounds, MIN_ROUNDS)
        max_rounds = max(self.options.max_rounds, n)
        while True:
            while len(rounds.b_sps) < n:
                i = len(rounds.b_sps)
                for side, cfg in (
                    (("A", inc_config), ("B", config)) if i % 2 == 0 else (("B", config), ("A", inc_config))
                ):
                    run_dir = self._trial_dir(index) / f"ab-{i + 1:02d}-{side}"
                    out = self.runner.measure(cfg, run_dir, on_tick=self.progress.tick)
                    if out.write_error is not None:
                        self._note_write_error(out.write_error)
                    if out.status != "ok":
                        who = "incumbent" if side == "A" else "candidate"
                        record.status = out.status if side == "B" else "inconclusive"
                        record.error = f"A/B round {i + 1}, {who}: {out.status}: {out.error}"
                        record.ab = rounds.as_dict()
                        return
                    rounds.add(side, out)
                    record.ab = rounds.as_dict()
                self._info(f"A/B round {i + 1}: A {rounds.a_sps[-1]:.1f}, B {rounds.b_sps[-1]:.1f} samples/s")
                if self.disk_full:
                    record.status = "inconclusive"
                    record.error = f"disk full after A/B round {i + 1} ({self.disk_full})"
                    return
            decision = decide(rounds.a_sps, rounds.b_sps, min_gain=self.options.min_gain, final=n >= max_rounds)
            if decision.verdict != "undecided":
                break
            n += 1
            self._info(f"undecided ({decision.reason}); measuring round {n}")
        self._decided(record, decision, rounds)

    def _ab_configs(self, inc: dict[str, Any], cand: dict[str, Any]) -> tuple[dict[str, Any], dict[str, Any]]:
        """The configurations the A/B runs measure: incumbent and candidate, both with
        ``warmup_steps`` raised to :data:`tracedoc.fixloop.knobs.WARMUP_STEPS` of a knob with a
        one-off cost that is on in either (``compile``: each run compiles again), when the
        workload's Config has a ``warmup_steps`` field. The trial's ``config`` is unchanged."""
        if "warmup_steps" not in self.spec.fields:
            return inc, cand
        current = int(cand.get("warmup_steps") or 0)
        steps = knobs_mod.warmup_for([inc, cand], current)
        if steps == current and int(inc.get("warmup_steps") or 0) == current:
            return inc, cand
        return {**inc, "warmup_steps": steps}, {**cand, "warmup_steps": steps}

    def _decided(self, record: TrialRecord, decision: Any, rounds: _Rounds) -> None:
        """Fill ``record`` from the decision of its A/B rounds (noise.py) and their medians."""
        assert self.incumbent is not None
        record.decision = decision.to_dict()
        record.ab = rounds.as_dict()
        record.status = {"keep": "kept", "revert": "reverted"}.get(decision.verdict, "inconclusive")
        record.samples_per_s = statistics.median(rounds.b_sps)
        record.samples_per_s_repeats = list(rounds.b_sps)
        record.step_time_ms = statistics.median(rounds.b_ms)
        record.speedup = (self.incumbent.speedup or 1.0) * decision.ratio_median
        pvm = predicted_vs_measured(
            record.predicted_saving_ms,
            statistics.median(rounds.a_ms),
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

    def _queue_followup(self, proposal: Proposal, config: dict[str, Any], analysis: Report | None) -> None:
        """Queue the change again with the fix of a finding that only its own trace shows."""
        before = {f.code for f in _ranked(self._incumbent_analysis)}
        dev = self.device_type()
        for finding in _ranked(analysis):
            if finding.code in before:
                continue
            for name in finding.fix.knobs:
                if name == proposal.knob.name or name in {k for k, _, _ in proposal.extra}:
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
                    extra=(*proposal.extra, (name, self.incumbent.config.get(name) if self.incumbent else None, value)),
                    followup=finding,
                )
                if followup.key() in self.tried:
                    continue
                self.followups.append(followup)
                self._info(
                    f"{proposal.knob.name}={_fmt(proposal.new)} shows {finding.code} {finding.name}: "
                    f"trying it again with {name}={_fmt(value)}"
                )
                return

    def _fill(self, record: TrialRecord, outcome: TrialOutcome) -> None:
        """Copy what a profiled run measured into ``record`` (its status, repeats, findings);
        a failed write of the run's own files is remembered (:meth:`_note_write_error`)."""
        analysis = self._analysis_of(outcome)
        record.status = outcome.status
        record.samples_per_s = _median(outcome.samples_per_s)
        record.samples_per_s_repeats = list(outcome.samples_per_s)
        record.step_time_ms = _median(outcome.step_time_ms)
        record.batch_size = outcome.batch_size if outcome.batch_size is not None else record.config.get("batch_size")
        record.error = outcome.error
        record.elapsed_s = round(outcome.elapsed_s, 2)
        record.dir = outcome.dir or record.dir
        record.top_findings = [_finding_brief(f) for f in _ranked(analysis)[:5]]
        if outcome.samples_per_s:
            record.profiled_run = {
                "samples_per_s": list(outcome.samples_per_s),
                "step_time_ms": list(outcome.step_time_ms),
            }
        record.profiled_step_ms = _profiled_step_ms(analysis)
        if outcome.status == "ok" and outcome.analysis is not None and analysis is None:
            record.status, record.error = "crashed", "the trial's analysis is not a readable report"
        if outcome.write_error is not None:
            self._note_write_error(outcome.write_error)

    @staticmethod
    def _analysis_of(outcome: TrialOutcome) -> Report | None:
        """The outcome's report (a runner may hand the saved report's dict form: it is read with
        :func:`tracedoc.report.model.read_report`); None when absent or unreadable."""
        return as_report(outcome.analysis)

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
            for name in finding.fix.knobs:
                got = self._candidate(finding, name, current, dev)
                if got is None:
                    continue
                knob, value = got
                companion = knobs_mod.thread_companion(name, value, current, self.n_cpus, dev, self.spec.fields)
                proposal = Proposal(
                    finding=finding,
                    knob=knob,
                    old=current.get(name),
                    new=value,
                    extra=(companion,) if companion else (),
                )
                if proposal.key() in self.tried:
                    self._skip(finding, name, f"{_fmt(value)} already tried")
                    continue
                return proposal
        return None

    def _candidate(
        self, finding: Finding, name: str, current: dict[str, Any], dev: str
    ) -> tuple[knobs_mod.Knob, Any] | None:
        """The knob and next value for ``name`` from ``current``, or ``None`` (noted in ``skipped``)."""
        if not isinstance(name, str) or name not in self.spec.fields:
            self._skip(finding, str(name), "the workload's Config has no such knob")
            return None
        knob = knobs_mod.resolve_knob(name, self.spec.fields[name].type, self.spec.knobs, finding.fix.safety)
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
            knob,
            current.get(name),
            self.device,
            self.n_cpus,
            name in self.exhausted,
            config=current,
            suggested=knobs_mod.suggested_value(name, finding.evidence),
        )
        if value is None:
            self._skip(finding, name, f"nothing left to try from {_fmt(current.get(name))}")
            return None
        return knob, value

    def _skip(self, finding: Finding, knob: str, reason: str) -> None:
        entry = {"code": finding.code, "name": finding.name, "knob": knob, "reason": reason}
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


def _trace_diff(before: Report | None, after: Report | None, finding: Finding | None) -> dict[str, Any] | None:
    """``tracedoc diff``'s predicted-vs-measured row of ``finding`` between two trials' reports
    (None when either report or the finding is missing, or the reports cannot be compared)."""
    if before is None or after is None or finding is None or not finding.code:
        return None
    from tracedoc.diff import predicted_vs_measured
    from tracedoc.errors import TracedocError

    try:
        rows = predicted_vs_measured(before, after, names=[finding.code])
    except (TypeError, ValueError, KeyError, TracedocError):
        return None
    return rows[0] if rows else None


def _profiled_step_ms(analysis: Report | None) -> float | None:
    """The report's ``step_time_ms`` signal (ms), None when absent or not a positive number."""
    v = analysis.signals.get("step_time_ms") if analysis is not None else None
    ok = isinstance(v, (int, float)) and not isinstance(v, bool) and math.isfinite(v) and v > 0
    return float(v) if ok else None


def _ranked(analysis: Report | None) -> list[Finding]:
    """The report's findings, largest ``estimated_saving_ms`` first, ``None`` savings last (stable)."""
    findings = list(analysis.findings) if analysis is not None else []
    return sorted(findings, key=lambda f: (f.estimated_saving_ms is None, -(f.estimated_saving_ms or 0.0)))


@dataclass
class _Rounds:
    """The A/B measurements of one trial so far: samples/s and step ms of each side per
    finished round, and the finished first half of an unfinished round (``half``: side,
    samples/s, step ms), so that nothing measured is lost to an interrupt or a failure."""

    a_sps: list[float] = field(default_factory=list)
    b_sps: list[float] = field(default_factory=list)
    a_ms: list[float] = field(default_factory=list)
    b_ms: list[float] = field(default_factory=list)
    half: tuple[str, float, float] | None = None
    #: the warm-up steps both sides ran with, when the loop raised them (``_ab_configs``)
    warmup_steps: int | None = None

    def add(self, side: str, out: TrialOutcome) -> None:
        """One measurement of ``side`` (``"A"`` or ``"B"``): the medians of its repeats."""
        got = (side, statistics.median(out.samples_per_s), statistics.median(out.step_time_ms))
        if self.half is None:
            self.half = got
            return
        for s, sps, ms in (self.half, got):
            (self.a_sps if s == "A" else self.b_sps).append(sps)
            (self.a_ms if s == "A" else self.b_ms).append(ms)
        self.half = None

    def as_dict(self) -> dict[str, Any]:
        """The summary's ``ab``: :func:`_ab_dict`, and ``unpaired`` while a round is half done."""
        d = _ab_dict(self.a_sps, self.b_sps, self.a_ms, self.b_ms)
        if self.warmup_steps is not None:
            d["warmup_steps"] = self.warmup_steps
        if self.half is not None:
            side, sps, ms = self.half
            who = "incumbent" if side == "A" else "candidate"
            d["unpaired"] = [{"side": who, "round": len(self.b_sps) + 1, "samples_per_s": sps, "step_time_ms": ms}]
        return d


def _removable(out_dir: Path) -> list[Path]:
    """What may go to make room for summary.json on a full disk, in that order: summary.md and
    final_config.json (written again from the summary), then the trial logs (``stdout.log``,
    ``stderr.log``) under ``out_dir``, largest first."""
    sized = []
    for path in out_dir.glob("trial-*/**/*.log"):
        try:
            sized.append((path.stat().st_size, str(path), path))
        except OSError:
            continue
    return [out_dir / "summary.md", out_dir / "final_config.json"] + [p for _, _, p in sorted(sized, reverse=True)]


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


def _finding_brief(finding: Finding) -> dict[str, Any]:
    """The summary's plain form of a finding: code, name, severity (its string), saving, knobs."""
    return {
        "code": finding.code,
        "name": finding.name,
        "severity": str(finding.severity.value),
        "estimated_saving_ms": finding.estimated_saving_ms,
        "knobs": list(finding.fix.knobs),
    }


def warnings(loop: FixLoop) -> list[str]:
    """Notes on measurements that could not decide: noisy sides (CV above noise.NOISY_CV),
    a baseline whose own timed windows are noisy or disagree (its ``repeats_check``), A/B runs
    that measured a candidate far below its own profiled run (:func:`_cold_ab`),
    inconclusive trials, profiled steps more than :data:`PROFILED_STEP_FACTOR` away from
    the timed step; and a full disk (the loop stopped, logs removed for the summary)."""
    from tracedoc.fixloop.noise import NOISY_CV
    from tracedoc.stats import cv

    out = []
    incumbent: TrialRecord | None = None
    for r in loop.records:
        cold = _cold_ab(r, incumbent)
        if cold is not None:
            out.append(
                f"trial {r.index}: its A/B runs measured the candidate at {cold:.2f}x the throughput of its own "
                f"profiled run's windows, relative to the incumbent's (below {COLD_AB_FACTOR}): a one-off cost per "
                "process (compilation, autotuning) may still be in the A/B timed windows; raise warmup_steps"
            )
        if r.status in ("baseline", "kept"):
            incumbent = r
        rc = r.repeats_check
        first = (r.profiled_run or {}).get("samples_per_s") or []
        if rc is not None and (len(first) > 1 and cv(first) > NOISY_CV or not rc.get("usable")):
            more = len((rc.get("extra") or {}).get("samples_per_s") or [])
            said = f"CV {cv(first):.1%} of its {len(first)} timed windows" if len(first) > 1 else "one timed window"
            text = f"trial {r.index} (baseline): the machine was too noisy ({said}; above {NOISY_CV:.0%})"
            if rc.get("usable"):
                text += f"; after {more} more run(s) its figures are the median of all: {rc.get('reason')}"
            elif rc.get("verdict") != "disagree":
                text += f"; stopped after {more} more run(s), before its windows agreed ({rc.get('reason')})"
            else:
                text += (
                    f"; after {more} more run(s) its windows still disagree ({rc.get('reason')}): its step time and "
                    "throughput are unusable and not shown; each trial is judged against the incumbent measured "
                    "in its own A/B rounds"
                )
            out.append(text)
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
    if loop.disk_full:
        out.append(f"the disk filled ({loop.disk_full}); the loop stopped after the trial in flight")
    if loop.freed_logs:
        out.append(f"{loop.freed_logs} trial log file(s) removed to make room for summary.json on the full disk")
    return out


#: :func:`_cold_ab` below this warns. A project choice, warning only: on the H100 run of issue 22
#: (fixtures/gpu_runs/h100_fixloop/) the compile trial, whose A/B windows still held its
#: compilation, gave 0.33, and the num_workers trial on the same machine 1.12; a load change
#: between the runs hits the incumbent's ratio as well and cancels to first order.
COLD_AB_FACTOR = 0.5


def _cold_ab(r: TrialRecord, incumbent: TrialRecord | None) -> float | None:
    """How the candidate's A/B throughput compares with its own profiled run's, relative to the
    incumbent's: ``(median B / median of r's profiled windows) / (median A / median of the
    incumbent's profiled windows)``, when below :data:`COLD_AB_FACTOR` (else None). The profiled
    run's windows come after its warm-up, profiled steps and trace export, well past a one-off
    cost; the A/B windows right after the warm-up."""
    ab = r.ab or {}
    if not r.decision or incumbent is None or not ab.get("rounds"):
        return None
    b_prof = (r.profiled_run or {}).get("samples_per_s") or []
    a_prof = (incumbent.profiled_run or {}).get("samples_per_s") or []
    a_ab = (ab.get("incumbent") or {}).get("median_samples_per_s")
    b_ab = (ab.get("candidate") or {}).get("median_samples_per_s")
    if not (b_prof and a_prof and a_ab and b_ab):
        return None
    q = (b_ab / statistics.median(b_prof)) / (a_ab / statistics.median(a_prof))
    return q if q < COLD_AB_FACTOR else None


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
