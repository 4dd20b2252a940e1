"""The rule engine: compute the signals rules need, evaluate rules, rank findings."""

from __future__ import annotations

from typing import Any

from tracedoc.engine.rules import Rule, builtin_rules, load_rules, select_rules
from tracedoc.report.model import AlsoTrue, Finding, Fix, Report, Severity, Skipped, summarize_trace
from tracedoc.signals import SIGNALS, SignalContext
from tracedoc.trace import Trace

__all__ = [
    "report_notes",
    "AlsoTrue",
    "Finding",
    "Fix",
    "Rule",
    "Severity",
    "Skipped",
    "analyze_trace",
    "builtin_rules",
    "load_rules",
    "rank_findings",
    "run_rules",
    "select_rules",
]


def rank_findings(findings: list[Finding]) -> list[Finding]:
    """Largest estimated saving first; findings without an estimate last; then the more
    severe (:class:`~tracedoc.report.model.Severity`), then by code."""
    return sorted(
        findings,
        key=lambda f: (
            f.estimated_saving_ms is None,
            -(f.estimated_saving_ms or 0.0),
            -Severity(f.severity).rank,
            f.code,
        ),
    )


def run_rules(ctx: SignalContext, rules: list[Rule]) -> tuple[list[Finding], list[Skipped]]:
    """Evaluate ``rules`` on a signal context; returns (ranked findings, skipped rules).

    Savings are granted from the ledger slices each rule claims
    (:func:`tracedoc.engine.claims.grant_savings`), so they add up to at most the step; a
    rule that declares ``[fix] replay`` then gets the step model's replayed saving instead,
    its slice beside it (:func:`tracedoc.engine.claims.apply_replays`). Each finding's shown
    severity is then set by its saving's share of the step, the rule's own level kept in
    ``base_severity`` (:func:`tracedoc.engine.claims.apply_impact_severity`: below 1% info, from 1%
    warning, from 10% error).

    Before the step model is built, and after each stage of its build
    (:func:`tracedoc.signals.stepmodel.build_model`), every large intermediate of the context but
    the step model's is released (:meth:`~tracedoc.signals.base.SignalContext.release`; issue 24).
    """
    from tracedoc.engine.claims import apply_impact_severity, apply_replays, grant_savings

    findings, skipped = [], []
    for rule in rules:
        out = rule.evaluate(ctx.get)
        if isinstance(out, Finding):
            findings.append(out)
        elif isinstance(out, Skipped):
            skipped.append(out)
    grant_savings(findings, ctx.get)
    # the replays read the step model's own intermediates only: the rules' others go first, so
    # that they are not held under the model's build, and what it was built from goes before
    # the replays (issue 24; a later signal rebuilds what it needs)
    from tracedoc.signals.stepmodel import build_model, step_model_key

    ctx.release(keep=step_model_key)
    build_model(ctx)  # releases what each of its stages was built from
    apply_replays(findings, ctx)
    apply_impact_severity(findings, ctx.try_get("step_time_ms")[0])
    return rank_findings(findings), skipped


#: Share of launch calls without their GPU event above which the report says so, and the
#: share above which the idle-ledger findings are set aside (most GPU work is unrecorded, so
#: what looks idle may be busy).
MISSING_LAUNCH_NOTE_SHARE = 0.05
MISSING_LAUNCH_SUPPRESS_SHARE = 0.5
#: Share of the step the GPU must wait on a dependency whose producer is not in the trace
#: before the report says the window starts mid-step (5%: the threshold of a material finding,
#: as dataloader-stall's).
DEPENDENCY_NOTE_SHARE = 0.05


def window_checks(ctx: SignalContext) -> tuple[list[str], str | None]:
    """Checks of the profiled window: ``(notes, reason)``; ``reason`` is set when the findings
    that claim idle-ledger slices cannot be trusted (they are then listed as also true).

    * Work queued behind a stream wait whose producer (an event-record call) is not in the
      trace, when the primary device's ``dependency_wait`` slice is at least
      :data:`DEPENDENCY_NOTE_SHARE` of the step: the window starts mid-step.
    * Launch calls with no GPU event recorded (over :data:`MISSING_LAUNCH_NOTE_SHARE` of the
      kernel-launch, memcpy and memset calls): their GPU work counts as idle; over
      :data:`MISSING_LAUNCH_SUPPRESS_SHARE`, ``reason`` is set.
    * Steps whose window ends after the ``Record Window End`` instant (left out of the
      complete steps, :func:`tracedoc.signals.steps.complete_mask`).
    * A trace without ``ProfilerStep#N`` whose iterations were inferred from repeated
      ``Optimizer.step#`` annotations.
    """

    def build() -> tuple[list[str], str | None]:
        from tracedoc.signals.ledger import _STREAM_WAIT, dependency_waits, launches_without_gpu_event
        from tracedoc.signals.steps import iterations_source, step_windows, steps_past_window_end

        notes: list[str] = []
        reason = None
        trace = ctx.trace
        if trace.has_gpu_activity:
            led = ctx.try_get("idle_dependency_wait_ms")[0] or 0.0
            step_ms = ctx.try_get("step_time_ms")[0] or 0.0
            waits = dependency_waits(ctx)
            outside = waits[(waits["producer"] < 0).to_numpy() & (waits["dependent"] >= 0).to_numpy()]
            if len(outside) and step_ms > 0 and led >= DEPENDENCY_NOTE_SHARE * step_ms:
                first = outside.iloc[0]
                # the API name the call matched, never the trace's own text (it reaches terminals)
                call = _STREAM_WAIT.match(str(trace.runtime["name"].iloc[int(first["rt_pos"])])).group(0)
                notes.append(
                    f"The GPU waits {led:.1f} ms per step on work queued behind a stream wait ({call} at "
                    f"{first['ts_us'] / 1000:.3f} ms) whose event was recorded before the profiled window: the "
                    "window starts mid-step, and that wait is a dependency outside the window (dependency_wait), "
                    "not host-wait. Start the profile at an iteration boundary."
                )
            missing, n_issue = launches_without_gpu_event(ctx)
            if n_issue:
                share = missing / n_issue
                if share > MISSING_LAUNCH_NOTE_SHARE:
                    notes.append(
                        f"{missing:,} of {n_issue:,} launch calls ({share:.0%}) have no GPU event in the trace: "
                        "that GPU work was not recorded, so the idle ledger counts its time as idle."
                    )
                    if share > MISSING_LAUNCH_SUPPRESS_SHARE:
                        reason = (
                            f"most launch calls ({share:.0%}) have no GPU event recorded, so GPU idle time "
                            "cannot be measured"
                        )
        past = steps_past_window_end(ctx)
        if past.any():
            w = step_windows(ctx)
            numbers = ", ".join(str(int(n)) for n in w["step"].to_numpy()[past])
            notes.append(
                f"Step {numbers} runs past the end of recorded activity (the Record Window End instant at "
                f"{ctx.trace.record_window_end_us / 1000:.3f} ms): part of it was not recorded, so it is left "
                "out of every per-step figure."
            )
        src = iterations_source(ctx)
        if src == "Optimizer.step":
            n, _ = ctx.try_get("step_count")
            notes.append(
                "The trace has no ProfilerStep annotations: its iterations were inferred from repeated "
                f"Optimizer.step annotations (each from the end of one optimizer step to the end of the next; "
                f"{n if n is not None else '?'} counted), so per-step figures and per-iteration rules still apply."
            )
        return notes, reason

    notes, reason = ctx.cached("window_checks", build)  # report_notes and analyze_trace both ask
    return list(notes), reason


def report_notes(ctx: SignalContext) -> list[str]:
    """Caveats that change how the whole report reads (e.g. a window dominated by start-up),
    the :func:`window_checks` notes included."""
    notes = list(window_checks(ctx)[0])
    from tracedoc.engine.claims import replay_trusted

    _, untrusted = replay_trusted(ctx)
    if untrusted:
        notes.append(untrusted)
    share, _ = ctx.try_get("startup_share")
    if share is not None and share > 0.5:
        notes.append(
            f"One-off start-up work is {share:.0%} of the profiled window: the other figures are not "
            "representative of steady state. Profile later steps with torch.profiler.schedule(wait=1, warmup=1, active=3)."
        )
    trace = ctx.trace
    if trace.has_gpu_activity and not len(trace.ops):
        notes.append(
            "The trace has GPU activity but no CPU operators (recorded without ProfilerActivity.CPU): "
            "host-side causes of GPU idle time (DataLoader, syncs, launch overhead) show as 'untraced', "
            "and the rules that read CPU operators cannot fire. Record with activities=[CPU, CUDA]."
        )
    from tracedoc.signals.links import CLOCK_SKEW_MIN_SHARE
    from tracedoc.signals.steps import launch_before_start

    try:
        skew = launch_before_start(ctx)
    except Exception:  # a caveat only: an odd trace must not lose its report over it
        skew = None
    if skew is not None and skew[0] > CLOCK_SKEW_MIN_SHARE * skew[1]:
        early, linked, median_us = skew
        notes.append(
            f"{early} of {linked} GPU events start before the runtime call that launched them "
            f"(median {median_us / 1000:.3g} ms early): the trace's CPU and GPU clocks disagree, so the "
            "idle ledger and the step windows, which join the two timelines, are uncertain."
        )
    return notes


def analyze_trace(
    trace: Trace,
    rules: list[Rule] | None = None,
    select: list[str] | None = None,
    ignore: list[str] | None = None,
    min_saving_ms: float | None = None,
    min_saving_share: float | None = None,
    signal_store: Any = None,
) -> Report:
    """Compute every signal, evaluate the rules and build the :class:`Report`.

    Memory (issue 24): the ledger's paint is released once the window checks have read the
    primary device's ledger (:func:`tracedoc.signals.ledger.paint_key`); the context's large
    intermediates are released
    (:meth:`~tracedoc.signals.base.SignalContext.release`) before the step model's build and
    before its replays, all but the step model's (:func:`run_rules`), and once the step model's
    signals are computed, all. A
    released intermediate that a later signal reads is built again: time, never a result. The
    window checks (:func:`window_checks`) run before the rules, on what little is held then.

    Args:
        min_saving_ms, min_saving_share: the floors (default 0.05 ms per step and 1% of the
            step, :mod:`tracedoc.engine.claims`): a finding whose granted saving is below
            either is reported in ``also_true`` instead of ``findings``, with the reason
            (another finding claims its time, or below the floor).
        signal_store: a :class:`tracedoc.cache.SignalStore` of this trace: its stored signal
            values seed the analysis (rules, selections and floors still apply anew), and the
            values computed now are stored in it when it had none.

    Raises:
        tracedoc.errors.RuleError: a bad ``select``/``ignore`` selector or rule file.
    """
    from tracedoc.engine.claims import MIN_SAVING_MS, MIN_SAVING_SHARE, also_true, apply_floors, saving_floor
    from tracedoc.signals.ledger import idle_ledger, paint_key

    rules = select_rules(rules if rules is not None else builtin_rules(), select, ignore)
    ctx = SignalContext(trace)
    stored = signal_store.get() if signal_store is not None else None
    if stored is not None:
        ctx.seed(stored["values"], stored["errors"])
    # the window checks first (cached; the same value whenever they run): their transients, the
    # launches with no GPU event, sat on the step model's schedule and replays when they ran after
    # the rules (535 MiB on 4 M small events, their peak then; issue 24)
    window_checks(ctx)
    # the primary device's ledger per step is cached now (small); its paint, the largest
    # intermediate then held (34 MiB of 4 M small events), sat under every rule's peak though
    # only host_bound_frames reads it again, which paints it anew (issue 24)
    ctx.release(keep=lambda key: not paint_key(key), min_bytes=0)
    findings, skipped = run_rules(ctx, rules)
    step_ms, _ = ctx.try_get("step_time_ms")
    floors = (
        MIN_SAVING_MS if min_saving_ms is None else min_saving_ms,
        MIN_SAVING_SHARE if min_saving_share is None else min_saving_share,
    )
    findings, below = apply_floors(findings, step_ms, *floors)
    also = also_true(below, findings, saving_floor(step_ms, *floors))
    _, distrust = window_checks(ctx)
    if distrust:
        idle = [f for f in findings if f.claims and f.claims[0].startswith("idle:")]
        findings = [f for f in findings if f not in idle]
        also = [
            AlsoTrue(f.code, f.name, "window", f"set aside: {distrust}", f.estimated_saving_ms, f.uncapped_saving_ms)
            for f in idle
        ] + also
    from tracedoc.engine.claims import combined_replay
    from tracedoc.signals import stepmodel

    # the step model's readers first, then its intermediates go (issue 24: the schedule was
    # held under every later peak); every signal's value is the same in any order
    combined = combined_replay(findings, ctx)
    model = stepmodel.__name__  # its signals: the replays and the critical path
    signals: dict[str, Any] = {}
    unavailable: dict[str, str] = {}
    for of_model in (True, False):
        if not of_model:
            ctx.release()
        for name, sig in SIGNALS.items():
            if sig.unit == "table" or (sig.func.__module__ == model) != of_model:
                continue
            value, reason = ctx.try_get(name)
            if reason is None:
                signals[name] = round(value, 6) if isinstance(value, float) else value
            else:
                signals[name] = None
                unavailable[name] = reason
    signals = {name: signals[name] for name in SIGNALS if name in signals}  # the registry's order
    unavailable = {name: unavailable[name] for name in SIGNALS if name in unavailable}
    per_step, _ = ctx.try_get("step_breakdown")
    ledger = stored["idle_ledger"] if stored is not None else idle_ledger(ctx)
    if signal_store is not None and stored is None:
        values, reasons = ctx.export()
        signal_store.put(values, reasons, ledger)
    return Report(
        trace=summarize_trace(trace),
        signals=signals,
        signals_unavailable=unavailable,
        units={n: s.unit for n, s in SIGNALS.items() if s.unit != "table"},
        scopes={n: s.scope for n, s in SIGNALS.items() if s.unit != "table"},
        steps=per_step or [],
        findings=findings,
        skipped=skipped,
        idle_ledger=ledger,
        also_true=also,
        notes=report_notes(ctx),
        rules_evaluated=[r.code for r in rules],
        recoverable=_recoverable(combined, findings),
        kernels=_kernels(ctx),
        op_view=_op_view(ctx),
    )


def _kernels(ctx: SignalContext) -> dict[str, list[dict[str, Any]]] | None:
    """The report's ``kernels`` section: the table signals ``kernel_time_by_category`` and
    ``top_kernels`` (:mod:`tracedoc.signals.gpu`); None when the trace has no kernel in its
    step windows."""
    by_category, why = ctx.try_get("kernel_time_by_category")
    top, why_top = ctx.try_get("top_kernels")
    if why is not None or why_top is not None:
        return None
    return {"by_category": by_category, "top": top}


def _op_view(ctx: SignalContext) -> dict[str, Any] | None:
    """The report's ``op_view`` section: ``{"peak", "ops", "kernels"}``, the device's peak
    (:func:`tracedoc.signals.opview.device_peak` as a dict; None: peak unknown) and the table
    signals ``op_view`` and ``kernel_view``; None when the trace has no kernel in its step
    windows."""
    import dataclasses

    from tracedoc.signals.opview import device_peak

    ops, why = ctx.try_get("op_view")
    kernels, why_k = ctx.try_get("kernel_view")
    if why is not None or why_k is not None:
        return None
    peak = device_peak(ctx)
    return {"peak": dataclasses.asdict(peak) if peak is not None else None, "ops": ops, "kernels": kernels}


def _recoverable(combined: tuple[float, list[str]] | None, findings: list[Finding]) -> dict[str, Any] | None:
    """The report's ``recoverable`` section (see :mod:`tracedoc.report.model`)."""
    if combined is None:
        return None
    ms, codes = combined
    rest = [f.code for f in findings if f.code not in codes and f.estimated_saving_ms is not None]
    return {"ms": ms, "basis": "replay", "findings": codes, "not_replayed": rest}
