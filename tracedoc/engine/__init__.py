"""The rule engine: compute the signals rules need, evaluate rules, rank findings."""

from __future__ import annotations

import os
from typing import Any

from tracedoc.engine.rules import Finding, Rule, Skipped, builtin_rules, load_rules, select_rules
from tracedoc.report.model import Report, summarize_trace
from tracedoc.signals import SIGNALS, SignalContext
from tracedoc.trace import Trace

__all__ = [
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
    """Evaluate ``rules`` on a signal context; returns (ranked findings, skipped rules)."""
    findings, skipped = [], []
    for rule in rules:
        out = rule.evaluate(ctx.get)
        if isinstance(out, Finding):
            findings.append(out)
        elif isinstance(out, Skipped):
            skipped.append(out)
    return rank_findings(findings), skipped


def analyze_trace(
    trace: Trace, rules: list[Rule] | None = None, select: list[str] | None = None, ignore: list[str] | None = None
) -> Report:
    """Compute every signal, evaluate the rules and build the :class:`Report`.

    Raises:
        tracedoc.errors.RuleError: a bad ``select``/``ignore`` selector or rule file.
    """
    rules = select_rules(rules if rules is not None else builtin_rules(), select, ignore)
    ctx = SignalContext(trace)
    findings, skipped = run_rules(ctx, rules)
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
    return Report(
        trace=summarize_trace(trace),
        signals=signals,
        signals_unavailable=unavailable,
        units={n: s.unit for n, s in SIGNALS.items() if s.unit != "table"},
        steps=per_step or [],
        findings=findings,
        skipped=skipped,
        rules_evaluated=[r.code for r in rules],
    )


def analyze(
    path: str | os.PathLike[str],
    select: list[str] | None = None,
    ignore: list[str] | None = None,
    rules: list[Rule] | None = None,
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

    return analyze_trace(load(path), rules=rules, select=select, ignore=ignore)
