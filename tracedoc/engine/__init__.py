"""The rule engine: compute the signals rules need, evaluate rules, rank findings."""

from __future__ import annotations

import os
from typing import Any

from tracedoc.engine.rules import Finding, Rule, Skipped, builtin_rules, load_rules, select_rules
from tracedoc.report.model import Report, summarize_trace
from tracedoc.signals import SIGNALS, SignalContext
from tracedoc.trace import Trace

__all__ = [
    "report_notes",
    "Finding",
    "Rule",
    "Skipped",
    "analyze",
    "analyze_trace",
    "builtin_rules",
    "load_rules",
    "rank_findings",
    "run_rules",
    "select_rules",
]

_SEVERITY_RANK = {"error": 0, "warning": 1, "info": 2}


def rank_findings(findings: list[Finding]) -> list[Finding]:
    """Largest estimated saving first; findings without an estimate last; then severity, code."""
    return sorted(
        findings,
        key=lambda f: (
            f.estimated_saving_ms is None,
            -(f.estimated_saving_ms or 0.0),
            _SEVERITY_RANK[f.severity],
            f.code,
        ),
    )


def run_rules(ctx: SignalContext, rules: list[Rule]) -> tuple[list[Finding], list[Skipped]]:
    """Evaluate ``rules`` on a signal context; returns (ranked findings, skipped rules).

    Savings are granted from the ledger slices each rule claims
    (:func:`tracedoc.engine.claims.grant_savings`), so they add up to at most the step.
    """
    from tracedoc.engine.claims import grant_savings

    findings, skipped = [], []
    for rule in rules:
        out = rule.evaluate(ctx.get)
        if isinstance(out, Finding):
            findings.append(out)
        elif isinstance(out, Skipped):
            skipped.append(out)
    grant_savings(findings, ctx.get)
    return rank_findings(findings), skipped


def report_notes(ctx: SignalContext) -> list[str]:
    """Caveats that change how the whole report reads (e.g. a window dominated by start-up)."""
    notes = []
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
    from tracedoc.signals.links import CLOCK_SKEW_MIN_SHARE, launch_before_start

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

    Args:
        min_saving_ms, min_saving_share: the floors (default 0.05 ms per step and 1% of the
            step, :mod:`tracedoc.engine.claims`): a finding whose granted saving is below
            either is reported in ``below_floor`` instead of ``findings``.
        signal_store: a :class:`tracedoc.cache.SignalStore` of this trace: its stored signal
            values seed the analysis (rules, selections and floors still apply anew), and the
            values computed now are stored in it when it had none.

    Raises:
        tracedoc.errors.RuleError: a bad ``select``/``ignore`` selector or rule file.
    """
    from tracedoc.engine.claims import MIN_SAVING_MS, MIN_SAVING_SHARE, apply_floors
    from tracedoc.signals.ledger import idle_ledger

    rules = select_rules(rules if rules is not None else builtin_rules(), select, ignore)
    ctx = SignalContext(trace)
    stored = signal_store.get() if signal_store is not None else None
    if stored is not None:
        ctx.seed(stored["values"], stored["errors"])
    findings, skipped = run_rules(ctx, rules)
    step_ms, _ = ctx.try_get("step_time_ms")
    findings, below = apply_floors(
        findings,
        step_ms,
        MIN_SAVING_MS if min_saving_ms is None else min_saving_ms,
        MIN_SAVING_SHARE if min_saving_share is None else min_saving_share,
    )
    signals: dict[str, Any] = {}
    unavailable: dict[str, str] = {}
    for name, sig in SIGNALS.items():
        if sig.unit == "table":
            continue
        value, reason = ctx.try_get(name)
        if reason is None:
            signals[name] = round(value, 6) if isinstance(value, float) else value
        else:
            signals[name] = None
            unavailable[name] = reason
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
        below_floor=below,
        notes=report_notes(ctx),
        rules_evaluated=[r.code for r in rules],
    )


def analyze(
    path: str | os.PathLike[str],
    select: list[str] | None = None,
    ignore: list[str] | None = None,
    rules: list[Rule] | None = None,
    min_saving_ms: float | None = None,
    min_saving_share: float | None = None,
) -> Report:
    """Load a trace file and analyze it (see :func:`analyze_trace`).

    Args:
        rules: the rules to evaluate; default the built-in ones. Add your own with
            ``tracedoc.engine.load_rules(["my_rules/"])``.

    Raises:
        tracedoc.errors.TraceLoadError: the file is not a readable trace.
        tracedoc.errors.RuleError: a bad selector.
    """
    from tracedoc.load import load

    return analyze_trace(
        load(path),
        rules=rules,
        select=select,
        ignore=ignore,
        min_saving_ms=min_saving_ms,
        min_saving_share=min_saving_share,
    )
