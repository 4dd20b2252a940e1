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

from typing import Any, Callable

from tracedoc.engine.rules import Finding

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
    for f in order:
        g = round(max(granted[id(f)], 0.0), 3)
        if g < round(want[id(f)], 3):
            f.uncapped_saving_ms = round(want[id(f)], 3)
        f.estimated_saving_ms = g


def apply_floors(
    findings: list[Finding], step_time_ms: float | None, min_saving_ms: float, min_saving_share: float
) -> tuple[list[Finding], list[Finding]]:
    """Split findings into (kept, below the floor).

    A finding with an estimate below ``max(min_saving_ms, min_saving_share * step_time_ms)``
    is below the floor; findings without an estimate are kept.
    """
    floor = min_saving_ms
    if step_time_ms is not None and step_time_ms > 0:
        floor = max(floor, min_saving_share * step_time_ms)
    kept, below = [], []
    for f in findings:
        (below if f.estimated_saving_ms is not None and f.estimated_saving_ms < floor else kept).append(f)
    return kept, below
