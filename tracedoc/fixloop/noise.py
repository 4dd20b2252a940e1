"""The keep/revert rule: a change is kept only when its gain exceeds the measured noise.

Each trial repeats its timed window R times (the workload's ``repeats``) and reports
samples/s for each repeat. With ``inc`` the incumbent's repeats and ``cand`` the
candidate's:

    gain      = median(cand) - median(inc)                      (samples/s)
    noise     = k * max(spread(inc), spread(cand))              spread = max - min of the repeats
    threshold = max(noise, min_gain * median(inc))
    keep      <=>  gain > threshold

``k`` is 1 by default and ``min_gain`` 2 %. The spread (the range of the repeats) is
the run-to-run variation actually measured in this run, on this machine; the candidate
must beat the incumbent by more than the widest range either trial showed, so the two
medians are separated by more than either set's own scatter. The floor of 2 % covers
what the repeats of one process cannot see (variation between processes: clocks,
memory placement, other tenants) and a trial with a single repeat (spread 0). Both
numbers are options (``--min-gain``; ``noise_k`` in :class:`tracedoc.fixloop.loop.LoopOptions`).
"""

from __future__ import annotations

import statistics
from dataclasses import asdict, dataclass


@dataclass(frozen=True)
class Decision:
    """The outcome of :func:`decide`, all throughputs in samples/s.

    Attributes:
        keep: whether the candidate is kept.
        gain: median(candidate) - median(incumbent).
        noise: k times the larger spread (max - min) of the two sets of repeats.
        threshold: max(noise, min_gain * median(incumbent)); the gain must exceed it.
        reason: one line that states the comparison.
    """

    keep: bool
    gain: float
    noise: float
    threshold: float
    reason: str

    def to_dict(self) -> dict:
        """JSON-safe form."""
        return asdict(self)


def spread(values: list[float]) -> float:
    """Range (max - min) of a trial's repeats; 0 for fewer than two."""
    return max(values) - min(values) if len(values) > 1 else 0.0


def decide(incumbent: list[float], candidate: list[float], min_gain: float = 0.02, k: float = 1.0) -> Decision:
    """Apply the keep rule of this module to two trials' samples/s repeats.

    Args:
        incumbent: samples/s of each repeat of the configuration kept so far.
        candidate: samples/s of each repeat of the changed configuration.
        min_gain: the minimum relative gain (fraction of the incumbent's median).
        k: multiplier of the measured spread.

    Raises:
        ValueError: either list is empty.
    """
    if not incumbent or not candidate:
        raise ValueError("decide() needs at least one repeat of each trial")
    inc, cand = statistics.median(incumbent), statistics.median(candidate)
    gain = cand - inc
    noise = k * max(spread(incumbent), spread(candidate))
    floor = min_gain * inc
    threshold = max(noise, floor)
    keep = gain > threshold
    which = "noise" if noise >= floor else f"{min_gain:.0%} floor"
    verb = ">" if keep else "<="
    reason = f"gain {gain:+.1f} samples/s {verb} threshold {threshold:.1f} ({which})"
    return Decision(keep=keep, gain=gain, noise=noise, threshold=threshold, reason=reason)
