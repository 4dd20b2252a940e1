"""Savings that add up: each finding's estimated saving is granted from the slices it claims.

A rule declares ``claims``: the part of the step its fix would remove. Pools:

* ``idle:<cause>`` -- a slice of the primary device's idle ledger (``idle_<cause>_ms``);
  the slices are disjoint by construction (:mod:`tracedoc.signals.ledger`);
* ``busy`` -- the primary device's busy time that is not exposed communication
  (``gpu_busy_ms - exposed_comm_kernel_ms``): compute kernels, copies, memsets;
* ``comm`` -- exposed communication kernels (``exposed_comm_kernel_ms``; CPU-side
  collective waits are the ledger slice ``idle:communication``);
* ``step`` -- no specific slice (only the step-time cap applies).

A finding's first claim is its own slice; later claims are spill-over. Pools are served
in passes: pass 1 gives every finding (largest estimate first) what it can take of its
first claim, pass 2 of its second claim, and so on, so no finding spills into a slice
before that slice's owner has been served. A finding never receives more than its
estimate, nor more than what is left of the step (``step_time_ms`` minus what was
already granted). So no millisecond is granted twice within a pool, and the granted
savings add up to at most the step time. A pool whose size cannot be measured on the
trace is capped by the step alone.
"""

from __future__ import annotations

import math
from typing import Any, Callable

from tracedoc.engine.rules import Finding

# AlsoTrue is a document (tracedoc.report.model); re-exported here, where it was first
# defined, so ``from tracedoc.engine.claims import AlsoTrue`` keeps working.
from tracedoc.report.model import AlsoTrue, Severity

#: Default floors (issue: a finding worth nothing is noise): absolute ms per step, share of the step.
MIN_SAVING_MS = 0.05
MIN_SAVING_SHARE = 0.01


def pool_sizes(get: Callable[[str], Any]) -> dict[str, float]:
    """Measured size of each pool, ms per step (pools that cannot be measured are left out)."""
    from tracedoc.signals import SignalUnavailable
    from tracedoc.signals.ledger import LEDGER_KEYS

    def value(name: str) -> float | None:
        try:
            v = get(name)
        except SignalUnavailable:
            return None
        return float(v) if isinstance(v, (int, float)) else None

    sizes: dict[str, float] = {}
    for k in LEDGER_KEYS:
        v = value(f"idle_{k}_ms")
        if v is not None:
            sizes[f"idle:{k}"] = v
    busy = value("gpu_busy_ms")
    if busy is not None:
        sizes["busy"] = max(busy - (value("exposed_comm_kernel_ms") or 0.0), 0.0)
    comm = value("exposed_comm_kernel_ms")
    if comm is not None:
        sizes["comm"] = comm
    return sizes


def grant_savings(findings: list[Finding], get: Callable[[str], Any]) -> None:
    """Cap each finding's ``estimated_saving_ms`` to the unclaimed part of its pools, in place.

    A capped finding keeps its own estimate in ``uncapped_saving_ms``.
    """
    from tracedoc.signals import SignalUnavailable

    sizes = pool_sizes(get)
    try:
        step_left = float(get("step_time_ms"))
    except SignalUnavailable:
        step_left = float("inf")
    order = sorted((f for f in findings if f.estimated_saving_ms is not None), key=lambda f: -f.estimated_saving_ms)
    want = {id(f): float(f.estimated_saving_ms) for f in order}
    granted = {id(f): 0.0 for f in order}
    takers: dict[str, list[str]] = {}  # pool -> codes of the findings granted part of it, in order
    # pass k serves every finding's k-th claim: a finding's own (first) slice goes to it before
    # any other finding may spill into that slice as a secondary claim
    for k in range(max((len(f.claims) for f in order), default=0)):
        for f in order:
            left = want[id(f)] - granted[id(f)]
            if k >= len(f.claims) or left <= 0:
                continue
            pool = f.claims[k]
            if pool == "step" or pool not in sizes:
                take = left
            else:
                take = min(left, sizes[pool])
                sizes[pool] -= take
            take = min(take, step_left)
            step_left -= take
            granted[id(f)] += take
            if take > 0:
                takers.setdefault(pool, []).append(f.code)
                takers.setdefault("step", []).append(f.code)
    for f in order:
        # rounded down to the µs, so that the granted savings, as reported, still add up to at
        # most the step (rounding each to nearest could put their sum a few µs over it)
        g = math.floor(max(granted[id(f)], 0.0) * 1000.0 + 1e-6) / 1000.0
        if g < round(want[id(f)], 3):
            f.uncapped_saving_ms = round(want[id(f)], 3)
            others = [c for pool in (*f.claims, "step") for c in takers.get(pool, []) if c != f.code]
            f.overlaps = tuple(dict.fromkeys(others))
        f.estimated_saving_ms = g


#: The step model is trusted when its unchanged replay gives the observed steps back within this
#: share of the step (``replay_error_ms / step_time_ms``). A project choice: the largest error on
#: the real GPU fixtures is 4.4% (v100_resnet50_workers4, a 40 ms host stall in one step).
REPLAY_MAX_ERROR_SHARE = 0.10


def replay_trusted(ctx: Any) -> tuple[bool, str | None]:
    """Whether the step model reproduces this trace's steps (:data:`REPLAY_MAX_ERROR_SHARE`):
    ``(True, None)``, ``(False, reason)`` when it does not, ``(False, None)`` when it cannot run."""
    err, _ = ctx.try_get("replay_error_ms")
    step, _ = ctx.try_get("step_time_ms")
    if err is None or not step:
        return False, None
    if err > REPLAY_MAX_ERROR_SHARE * step:
        return False, (
            f"The step model's replay is {err:.1f} ms per step away from the observed {step:.1f} ms step "
            f"(over {REPLAY_MAX_ERROR_SHARE:.0%}): it does not hold this trace's steps, so the findings keep "
            "their slice estimates and the headline is their sum."
        )
    return True, None


def apply_replays(findings: list[Finding], ctx: Any) -> None:
    """Replace the estimate of each finding whose rule declares ``[fix] replay`` by the step
    model's replayed saving (:func:`tracedoc.signals.stepmodel.replay_saving_ms`), in place.

    The granted slice stays beside it in ``slice_saving_ms`` (the upper bound the ledger
    gives); ``replayed_saving_ms`` is the replay (at most the step), and ``replayed_low_ms`` the low end of its
    range where the fix has a ``<name>_low`` variant. A trace the model cannot replay (CPU-only,
    no linked launches, no complete step) or whose steps it does not reproduce
    (:func:`replay_trusted`) keeps the granted slice as the estimate.
    """
    from tracedoc.signals import SignalUnavailable
    from tracedoc.signals.stepmodel import REPLAY_NAMES, fix_text, replay_saving_ms

    if not replay_trusted(ctx)[0]:
        return
    step, _ = ctx.try_get("step_time_ms")
    for f in findings:
        if f.fix.replay is None or f.estimated_saving_ms is None:
            continue
        try:
            replayed = round(min(replay_saving_ms(ctx, [f.fix.replay]), step), 3)
            low = f"{f.fix.replay}_low"
            f.replayed_low_ms = round(min(replay_saving_ms(ctx, [low]), replayed), 3) if low in REPLAY_NAMES else None
        except SignalUnavailable:
            continue
        f.slice_saving_ms = f.estimated_saving_ms
        f.replayed_saving_ms = replayed
        f.estimated_saving_ms = replayed
        if "step model" not in f.saving_basis:
            f.saving_basis = (
                f"Replayed: the step model (tracedoc.signals.stepmodel) replays every step with {fix_text(ctx, f.fix.replay)}; "
                f"the saving is the replayed step before minus after. The slice beside it ({f.slice_saving_ms:.2f} ms): "
                + f.saving_basis
            )
        f.uncapped_saving_ms, f.overlaps = None, ()  # the replay is this fix's own saving, not a share


def combined_replay(findings: list[Finding], ctx: Any) -> tuple[float, list[str]] | None:
    """The report's recoverable headline: the step model's saving of every replayable finding's
    fix applied together (ms per step), and the codes of the findings in it; None when no
    finding was replayed. Never a sum: fixes that remove the same time count it once, and a
    host fix on a device-bound step adds nothing."""
    from tracedoc.signals import SignalUnavailable
    from tracedoc.signals.stepmodel import replay_saving_ms

    replayed = [f for f in findings if f.replayed_saving_ms is not None and f.fix.replay is not None]
    if not replayed:
        return None
    try:
        total = replay_saving_ms(ctx, list(dict.fromkeys(f.fix.replay for f in replayed)))
    except SignalUnavailable:
        return None
    step, _ = ctx.try_get("step_time_ms")
    return round(min(total, step) if step else total, 3), [f.code for f in replayed]


def saving_floor(step_time_ms: float | None, min_saving_ms: float, min_saving_share: float) -> float:
    """The floor in ms per step: ``max(min_saving_ms, min_saving_share * step_time_ms)``."""
    floor = min_saving_ms
    if step_time_ms is not None and step_time_ms > 0:
        floor = max(floor, min_saving_share * step_time_ms)
    return floor


def apply_floors(
    findings: list[Finding], step_time_ms: float | None, min_saving_ms: float, min_saving_share: float
) -> tuple[list[Finding], list[Finding]]:
    """Split findings into (kept, below the floor).

    A finding with an estimate below ``max(min_saving_ms, min_saving_share * step_time_ms)``
    is below the floor; findings without an estimate are kept.
    """
    floor = saving_floor(step_time_ms, min_saving_ms, min_saving_share)
    kept, below = [], []
    for f in findings:
        (below if f.estimated_saving_ms is not None and f.estimated_saving_ms < floor else kept).append(f)
    return kept, below


def also_true(below: list[Finding], ranked: list[Finding], floor_ms: float) -> list[AlsoTrue]:
    """The :class:`AlsoTrue` entries of the findings :func:`apply_floors` set aside.

    A finding capped by :func:`grant_savings` overlaps the findings that were granted its
    slices first (named with their rule names when they are in ``ranked`` or ``below``);
    an uncapped one is simply below the floor of ``floor_ms`` ms per step.
    """
    names = {f.code: f.name for f in (*ranked, *below)}
    out = []
    for f in below:
        granted = f.estimated_saving_ms or 0.0
        if f.overlaps:
            first = f.overlaps[0]
            label = f"{first} {names.get(first, '')}".strip()
            why = (
                f"its estimate of {f.uncapped_saving_ms:.2f} ms per step lies in time already claimed by "
                f"{', '.join(f.overlaps)}; {granted:.2f} ms is left for it, under the floor of {floor_ms:.2f} ms"
            )
        elif f.replayed_saving_ms is not None:
            label = "below floor"
            why = f"the step model replays its fix at {granted:.2f} ms per step, under the floor of {floor_ms:.2f} ms"
            if (f.slice_saving_ms or 0.0) > 2 * granted:
                why += f": its slice ({f.slice_saving_ms:.2f} ms) is mostly off the step's critical path"
        else:
            label = "below floor"
            why = f"its estimated saving of {granted:.2f} ms per step is under the floor of {floor_ms:.2f} ms"
        out.append(AlsoTrue(f.code, f.name, label, why, f.estimated_saving_ms, f.uncapped_saving_ms))
    return out


#: Shown severity by impact: the finding's saving (the replayed one where the step model replays
#: its fix, else its granted slice) as a share of the step. Below :data:`SEVERITY_WARNING_SHARE`
#: a finding is at most ``info``; from it up to :data:`SEVERITY_ERROR_SHARE`, ``warning``; from
#: :data:`SEVERITY_ERROR_SHARE`, ``error``.
#:
#: 1%: the default floor of a reported finding (:data:`MIN_SAVING_SHARE`): a saving below it is
#: noise by the same measure, so a finding shown under a lowered floor says ``info``.
#: 10%: the step model's own error bound (:data:`REPLAY_MAX_ERROR_SHARE`): a saving of at least a
#: tenth of every step stands above the largest replay error the model is trusted with, so it is
#: a real cost whatever the model's error, and a fix worth it outranks any other work on the loop.
SEVERITY_WARNING_SHARE = MIN_SAVING_SHARE
SEVERITY_ERROR_SHARE = REPLAY_MAX_ERROR_SHARE


def impact_severity(base: Severity, saving_ms: float | None, step_ms: float | None) -> Severity:
    """The severity a finding shows: set by its saving's share of the step (thresholds
    :data:`SEVERITY_WARNING_SHARE` and :data:`SEVERITY_ERROR_SHARE`), so that a 0.7 ms stall
    never outranks a 6 ms one; the rule's own ``severity`` (``base``) where the share cannot be
    known (no saving estimate, or no step time)."""
    if saving_ms is None or not step_ms or step_ms <= 0 or not math.isfinite(saving_ms):
        return Severity(base)
    share = saving_ms / step_ms
    if share >= SEVERITY_ERROR_SHARE:
        return Severity.ERROR
    if share >= SEVERITY_WARNING_SHARE:
        return Severity.WARNING
    return Severity.INFO


def apply_impact_severity(findings: list[Finding], step_ms: float | None) -> None:
    """Set each finding's shown ``severity`` by :func:`impact_severity`, in place, keeping the
    rule's own level in ``base_severity``. ``--fail-on``, the ranking and every renderer read
    the shown one."""
    for f in findings:
        base = f.base_severity if f.base_severity is not None else f.severity
        f.base_severity = Severity(base)
        f.severity = impact_severity(f.base_severity, f.estimated_saving_ms, step_ms)
