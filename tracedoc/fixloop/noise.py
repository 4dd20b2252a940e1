"""The keep/revert rule: interleaved A/B rounds, paired ratios, a distribution-free interval.

A candidate configuration (B) is compared with the incumbent (A) in *rounds*: each round
runs A and B once each, back to back, in fresh processes, alternating which goes first
(A B, B A, A B, ...). So slow changes in the machine's load hit both alike, and each
round gives one paired ratio ``r_i = B_i / A_i`` of throughputs (samples/s). This is the
randomised-interleaving design that Abedi and Brecht recommend for shared, variable
machines ("Conducting Repeatable Experiments in Highly Variable Cloud Computing
Environments", ICPE 2017), with the fixed order alternated as in an ABBA design.

The decision reads a confidence interval for the median ratio from the order statistics
of the ``n`` ratios (the sign-test interval; e.g. Hollander, Wolfe and Chicken,
*Nonparametric Statistical Methods*, 3rd ed., section 3.6): ``[r_(k), r_(n+1-k)]``, with
``k`` the largest integer such that ``2 * P(Binomial(n, 1/2) <= k - 1) <= 1 - CONFIDENCE``.
It assumes nothing about the shape of the noise. For ``n = 5`` it is ``[min, max]`` at
93.75 %; at least :data:`MIN_ROUNDS` rounds are needed. With ``floor = 1 + min_gain``:

- **keep** when the interval's low end is above ``floor``: the gain beats the measured
  noise, at that confidence, by at least ``min_gain`` (2 % by default);
- **revert** when its high end is below ``floor``: the change does not gain ``min_gain``;
- otherwise the noise is too wide to decide: the loop runs another round, up to a bound,
  and after that the trial is **inconclusive** (the change is not kept).

The spread of each side is reported as its coefficient of variation (sample standard
deviation / mean); a side above :data:`NOISY_CV` marks the machine as too noisy.

The baseline has no A/B rounds: its figures are the medians of its timed windows.
:func:`check_repeats` says whether those windows agree well enough for their median to be
shown as the baseline's throughput (see its docstring); the loop measures more windows
when they do not, and marks the baseline's figures unusable when even those do not agree.
"""

from __future__ import annotations

import math
import statistics
from dataclasses import asdict, dataclass
from typing import Any

from tracedoc.stats import cv  # noqa: F401  (re-exported: the fix-loop reads it here)

#: Two-sided confidence of the interval for the median ratio (at least).
CONFIDENCE = 0.90
#: Fewest rounds with which the sign-test interval reaches :data:`CONFIDENCE` (2 / 2**5 = 6.25 %).
MIN_ROUNDS = 5
#: Coefficient of variation above which a side's measurements are called too noisy.
NOISY_CV = 0.10


@dataclass(frozen=True)
class Decision:
    """The outcome of :func:`decide`; throughputs in samples/s, ratios candidate / incumbent.

    Attributes:
        verdict: ``"keep"``, ``"revert"``, or ``"undecided"`` (more rounds could decide) /
            ``"inconclusive"`` (the last word, when no more rounds are allowed).
        keep: ``verdict == "keep"``.
        rounds: number of paired rounds.
        ratio_median: median of the paired ratios.
        ratio_low, ratio_high: the distribution-free interval for the median ratio.
        confidence: its two-sided coverage (e.g. 0.9375 for 5 rounds).
        floor: ``1 + min_gain``; the interval is compared with it.
        gain: median(candidate) - median(incumbent), samples/s.
        incumbent_median, candidate_median: medians of each side, samples/s.
        incumbent_cv, candidate_cv: coefficient of variation of each side (0..; 0 for one value).
        noisy: either CV is above :data:`NOISY_CV`.
        reason: one line that states the comparison.
    """

    verdict: str
    keep: bool
    rounds: int
    ratio_median: float
    ratio_low: float | None
    ratio_high: float | None
    confidence: float | None
    floor: float
    gain: float
    incumbent_median: float
    candidate_median: float
    incumbent_cv: float
    candidate_cv: float
    noisy: bool
    reason: str

    def to_dict(self) -> dict:
        """JSON-safe form."""
        return asdict(self)


def median_interval(n: int, confidence: float = CONFIDENCE) -> tuple[int, float] | None:
    """The sign-test interval for a median from ``n`` values: ``(k, coverage)``.

    The interval is the ``k``-th smallest to the ``k``-th largest value; ``coverage`` is
    ``1 - 2 * P(Binomial(n, 1/2) <= k - 1)``. ``None`` when even ``[min, max]`` covers
    less than ``confidence`` (fewer than 5 values at 0.90).
    """
    best = None
    cum = 0.0
    for k in range(1, n // 2 + 1):
        cum += math.comb(n, k - 1) / 2**n
        coverage = 1 - 2 * cum
        if coverage >= confidence:
            best = (k, coverage)
        else:
            break
    return best


def decide(incumbent: list[float], candidate: list[float], min_gain: float = 0.02, final: bool = True) -> Decision:
    """Apply the rule of this module to paired rounds of samples/s.

    Args:
        incumbent: samples/s of the incumbent (A) in each round.
        candidate: samples/s of the candidate (B) in the same rounds (same order).
        min_gain: the smallest relative gain worth keeping (fraction).
        final: no more rounds will be run: an undecided result becomes ``inconclusive``.

    Raises:
        ValueError: the lists are empty, differ in length, or hold a value <= 0.
    """
    if not incumbent or len(incumbent) != len(candidate):
        raise ValueError("decide() needs the same number (>= 1) of incumbent and candidate rounds")
    if min(incumbent) <= 0 or min(candidate) <= 0:
        raise ValueError("decide() needs throughputs > 0")
    ratios = sorted(b / a for a, b in zip(incumbent, candidate, strict=True))
    n = len(ratios)
    floor = 1.0 + min_gain
    inc_med, cand_med = statistics.median(incumbent), statistics.median(candidate)
    inc_cv, cand_cv = cv(incumbent), cv(candidate)
    interval = median_interval(n)
    low = high = conf = None
    if interval is None:
        verdict = "undecided"
        why = f"at least {MIN_ROUNDS} are needed for a {CONFIDENCE:.0%} interval"
    else:
        k, conf = interval
        low, high = ratios[k - 1], ratios[n - k]
        if low > floor:
            verdict = "keep"
            why = f"{conf:.1%} interval of the ratio [{low:.3f}, {high:.3f}] is above {floor:.2f}"
        elif high < floor:
            verdict = "revert"
            why = f"{conf:.1%} interval of the ratio [{low:.3f}, {high:.3f}] is below {floor:.2f}"
        else:
            verdict = "undecided"
            why = f"{conf:.1%} interval of the ratio [{low:.3f}, {high:.3f}] straddles {floor:.2f}: too noisy to decide"
    if verdict == "undecided" and final:
        verdict = "inconclusive"
    noisy = inc_cv > NOISY_CV or cand_cv > NOISY_CV
    from tracedoc.text import plural

    reason = (
        f"median ratio {statistics.median(ratios):.3f} over {plural(n, 'A/B round')}; {why} "
        f"(CV incumbent {inc_cv:.1%}, candidate {cand_cv:.1%})"
    )
    return Decision(
        verdict=verdict,
        keep=verdict == "keep",
        rounds=n,
        ratio_median=statistics.median(ratios),
        ratio_low=low,
        ratio_high=high,
        confidence=conf,
        floor=floor,
        gain=cand_med - inc_med,
        incumbent_median=inc_med,
        candidate_median=cand_med,
        incumbent_cv=inc_cv,
        candidate_cv=cand_cv,
        noisy=noisy,
        reason=reason,
    )


@dataclass(frozen=True)
class RepeatsCheck:
    """The outcome of :func:`check_repeats` on one configuration's timed windows (samples/s).

    Attributes:
        verdict: ``"agree"``, ``"unchecked"`` (fewer than 2 windows), ``"more"`` (measure
            more windows) or ``"disagree"`` (the last word: no more windows will be
            measured; the median is not a usable figure).
        usable: ``verdict`` is ``"agree"`` or ``"unchecked"``.
        n: number of windows.
        median: their median (samples/s).
        cv: their coefficient of variation (None for fewer than 2 windows).
        low, high: the sign-test interval of the median (at least :data:`CONFIDENCE`; None
            for fewer than :data:`MIN_ROUNDS` windows).
        confidence: its coverage (None without an interval).
        reason: one line that states the check.
    """

    verdict: str
    usable: bool
    n: int
    median: float | None
    cv: float | None
    low: float | None
    high: float | None
    confidence: float | None
    reason: str

    def to_dict(self) -> dict[str, Any]:
        """JSON-safe form."""
        return asdict(self)


def check_repeats(values: list[float], final: bool = True) -> RepeatsCheck:
    """Whether one configuration's timed windows (samples/s) agree: the baseline's check.

    They **agree** when either

    - their CV is at most :data:`NOISY_CV` (the spread the loop already calls "too noisy"
      for an A/B side; a quiet machine's 3 repeats pass here), or
    - there are at least :data:`MIN_ROUNDS` of them and the sign-test interval of their
      median (the one :func:`decide` uses, at least :data:`CONFIDENCE`) lies within
      ``median * (1 +- NOISY_CV)``: the median is known to 10 % even when one window was
      an outlier (issue 22: ``[73, 816, 821]`` samples/s, CV 75 %, on a loaded 2-core
      machine; a few more windows near 816 make that median sure, while their CV stays high).

    Otherwise more windows are needed (``"more"``), or, with ``final``, they **disagree**.
    A single window (``--set repeats=1``) has no spread to check: ``"unchecked"``, usable
    (nothing contradicts it; the user chose one window).
    """
    vals = [float(v) for v in values if isinstance(v, (int, float)) and math.isfinite(v) and v > 0]
    n = len(vals)
    med = statistics.median(vals) if vals else None
    spread = cv(vals) if n >= 2 else None
    low = high = conf = None
    interval = median_interval(n) if n >= MIN_ROUNDS else None
    if interval is not None:
        k, conf = interval
        ordered = sorted(vals)
        low, high = ordered[k - 1], ordered[n - k]
    from tracedoc.text import plural

    what = plural(n, "timed window")
    if n < 2:
        verdict, why = "unchecked", f"{what}: no spread to check"
    elif spread is not None and spread <= NOISY_CV:
        verdict, why = "agree", f"CV {spread:.1%} of {what} is at most {NOISY_CV:.0%}"
    elif (
        med is not None
        and low is not None
        and high is not None
        and (low >= med * (1 - NOISY_CV) and high <= med * (1 + NOISY_CV))
    ):
        verdict = "agree"
        why = (
            f"the {conf:.1%} interval [{low:.1f}, {high:.1f}] of the median {med:.1f} samples/s of {what} "
            f"is within {NOISY_CV:.0%} of it (CV {spread:.1%})"
        )
    else:
        verdict = "disagree" if final else "more"
        if low is None:
            why = f"CV {spread:.1%} of {what} is above {NOISY_CV:.0%}"
        else:
            why = (
                f"CV {spread:.1%} of {what} is above {NOISY_CV:.0%}, and the {conf:.1%} interval "
                f"[{low:.1f}, {high:.1f}] of their median {med:.1f} samples/s is not within {NOISY_CV:.0%} of it"
            )
    return RepeatsCheck(
        verdict=verdict,
        usable=verdict in ("agree", "unchecked"),
        n=n,
        median=med,
        cv=spread,
        low=low,
        high=high,
        confidence=conf,
        reason=why,
    )
