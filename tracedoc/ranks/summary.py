"""The cross-rank summary: step time per rank, the straggler from the collectives,
findings by scope, per-rank exposed communication.

**Straggler (collective skew).** In a collective every rank waits for the last one to
arrive, so the ranks that arrived earlier show a *longer* collective: their kernel (or
gloo op) starts earlier and runs until the last rank joins. The n-th collective of each
kind is matched across ranks (:mod:`tracedoc.ranks.job`); for collective ``j``:

* the rank with the shortest duration arrived last: the straggler of ``j``;
* each rank's wait is its duration minus that shortest one (µs);
* the straggler's lag is the median wait of the other ranks.

Durations are compared, not start times: each rank's clock is its own host's, and hosts
disagree by more than the lags sought, while durations need no common clock. The job's
straggler is the rank whose lags add up to the most (it made the others wait longest);
its lag is also given per step (``ProfilerStep``) and per collective kind, with the
worst single collectives. The step-time comparison is kept beside it: with synchronous
collectives every rank's step is about as long, so step time alone rarely shows the
straggler.

The documents built from the results (:class:`MultiRankReport`, :class:`MultiTraceReport`,
their :class:`RankEntry`) live in :mod:`tracedoc.report.ranks`; they are importable from here
too. Their ``summary`` is :func:`summarize`'s dict.
"""

from __future__ import annotations

import statistics
from typing import Any

import numpy as np

from tracedoc.ranks.job import RankResult
from tracedoc.report.ranks import MultiRankReport, MultiTraceReport, RankEntry

#: Worst single collectives listed in the summary.
WORST_COLLECTIVES = 10


def _r3(v: Any) -> Any:
    return round(float(v), 3) if isinstance(v, (int, float)) and not isinstance(v, bool) else v


def _kind_row(kind: str, labels: list[str], counts: list[int], last: np.ndarray, lag: np.ndarray) -> dict[str, Any]:
    """The ``kinds`` entry of one collective kind.

    ``counts`` are the collectives of that kind per rank; ``last`` (rank index) and ``lag``
    (µs) are per matched collective (the first ``min(counts)`` of each rank). The kind's
    straggler is the rank that arrived last most often, None when no collective had a lag.
    """
    n = min(counts)
    mode = int(np.bincount(last, minlength=len(labels)).argmax())
    return {
        "kind": kind,
        "count": int(n),
        "counts_differ": dict(zip(labels, counts, strict=True)) if len(set(counts)) > 1 else None,
        "straggler": labels[mode] if lag.sum() > 0 else None,
        "lag_ms_total": _r3(lag.sum() / 1000.0),
        "lag_ms_median": _r3(float(np.median(lag)) / 1000.0),
    }


def _step_rows(per_step: dict[int, np.ndarray], labels: list[str]) -> list[dict[str, Any]]:
    """The ``per_step`` rows, in step order: for each step (a negative step: outside any
    ``ProfilerStep``, reported as None) the rank that caused the most wait, and that wait
    in ms. ``per_step`` maps a step to the wait (µs) each rank caused in it."""
    step_rows = []
    for st in sorted(per_step):
        acc = per_step[st]
        i = int(np.argmax(acc))
        step_rows.append(
            {
                "step": None if st < 0 else st,
                "straggler": labels[i] if acc[i] > 0 else None,
                "lag_ms": _r3(acc[i] / 1e3),
            }
        )
    return step_rows


def _worst_rows(worst: list[tuple], labels: list[str]) -> list[dict[str, Any]]:
    """The ``worst`` rows from ``(lag µs, kind, index, step, straggler rank index, waits µs per
    rank)`` tuples, in the given order; times in ms, a negative step as None."""
    return [
        {
            "kind": kind,
            "index": j,
            "step": None if st < 0 else st,
            "straggler": labels[li],
            "lag_ms": _r3(lg / 1e3),
            "wait_ms": {lab: _r3(w / 1e3) for lab, w in zip(labels, waits, strict=True)},
        }
        for lg, kind, j, st, li, waits in worst
    ]


def compare_collectives(ranks: list[RankResult]) -> dict[str, Any] | None:
    """Match the n-th collective of each kind across ranks and find who the others wait for.

    Returns None when fewer than two ranks have collectives. Otherwise (times in ms)::

        {"source": "kernels" | "gloo ops" | "mixed", "n_ranks": int, "n_matched": int,
         "straggler": label | None, "straggler_lag_ms_total": float,
         "straggler_lag_ms_per_step": float | None (median over steps),
         "straggler_last_share": float (0..1, share of matched collectives it arrived last in),
         "last_count": {label: int}, "caused_wait_ms": {label: float},
         "kinds": [{"kind", "count", "counts_differ": {label: n} | None, "straggler", "lag_ms_total",
                    "lag_ms_median"}],
         "per_step": [{"step", "straggler", "lag_ms"}],
         "worst": [{"kind", "index", "step", "straggler", "lag_ms", "wait_ms": {label: ms}}]}

    The straggler is None when no rank made the others wait (all durations equal). ``ranks``
    are :class:`RankResult` s; entries without collective timings (a document's
    :class:`RankEntry`) count as ranks without collectives.
    """
    # a document's RankEntry has no collective timings (they stay in the worker's RankResult)
    with_c = [r for r in ranks if getattr(r, "collectives", None) is not None and r.collectives.count]
    if len(with_c) < 2:
        return None
    labels = [r.label for r in with_c]
    n_r = len(with_c)
    kinds = sorted(set.intersection(*(set(r.collectives.kinds) for r in with_c)))
    last_count = np.zeros(n_r, dtype=np.int64)
    caused = np.zeros(n_r)
    per_step: dict[int, np.ndarray] = {}
    worst: list[tuple] = []
    kinds_out = []
    n_matched = 0
    for kind in kinds:
        counts = [len(r.collectives.kinds[kind][1]) for r in with_c]
        n = min(counts)
        if n == 0:
            continue
        dur = np.vstack([r.collectives.kinds[kind][1][:n] for r in with_c])  # ranks x collectives, µs
        steps = np.vstack([r.collectives.kinds[kind][2][:n] for r in with_c])
        shortest = dur.min(axis=0)
        last = dur.argmin(axis=0)  # ties: the lowest rank, with zero lag
        waits = dur - shortest
        lag = np.median(np.sort(waits, axis=0)[1:, :], axis=0)  # the others' median wait
        np.add.at(last_count, last, 1)
        np.add.at(caused, last, lag)
        step_of = steps[last, np.arange(n)]
        for st in np.unique(step_of):
            m = step_of == st
            acc = per_step.setdefault(int(st), np.zeros(n_r))
            np.add.at(acc, last[m], lag[m])
        top = np.argsort(-lag, kind="stable")[:WORST_COLLECTIVES]
        worst.extend((float(lag[j]), kind, int(j), int(step_of[j]), int(last[j]), waits[:, j]) for j in top)
        kinds_out.append(_kind_row(kind, labels, counts, last, lag))
        n_matched += int(n)
    if n_matched == 0:
        return None
    s_idx = int(np.argmax(caused))  # ties: the lowest rank
    straggler = labels[s_idx] if caused[s_idx] > 0 else None
    in_steps = [per_step[st][s_idx] for st in per_step if st >= 0]
    worst.sort(key=lambda w: (-w[0], w[1], w[2]))
    sources = {r.collectives.source for r in with_c}
    return {
        "source": sources.pop() if len(sources) == 1 else "mixed",
        "n_ranks": n_r,
        "n_matched": n_matched,
        "straggler": straggler,
        "straggler_lag_ms_total": _r3(caused[s_idx] / 1e3),
        "straggler_lag_ms_per_step": _r3(float(np.median(in_steps)) / 1e3) if in_steps and straggler else None,
        "straggler_last_share": _r3(last_count[s_idx] / n_matched),
        "last_count": {lab: int(c) for lab, c in zip(labels, last_count, strict=True)},
        "caused_wait_ms": {lab: _r3(c / 1e3) for lab, c in zip(labels, caused, strict=True)},
        "kinds": kinds_out,
        "per_step": _step_rows(per_step, labels),
        "worst": _worst_rows(worst[:WORST_COLLECTIVES], labels),
    }


def summarize(ranks: list[RankResult]) -> dict[str, Any]:
    """The cross-rank summary of the analyzed ranks (see the package docstring for its JSON).

    Args:
        ranks: analyzed ranks (no failed ones), in rank order: the workers'
            :class:`RankResult` s (a document's :class:`RankEntry` s give no ``collectives``).
    """
    n = len(ranks)
    step = {r.label: r.report.signals.get("step_time_ms") for r in ranks}
    known = {k: v for k, v in step.items() if isinstance(v, (int, float))}
    out: dict[str, Any] = {
        "n_ranks": n,
        "step_time_ms": {k: (round(v, 3) if v is not None else None) for k, v in step.items()},
    }
    if known:
        med = statistics.median(known.values())
        slow_label = max(known, key=lambda k: known[k])
        lag = known[slow_label] - med
        out.update(
            {
                "median_step_time_ms": round(med, 3),
                "slowest_rank": slow_label,
                "slowest_step_time_ms": round(known[slow_label], 3),
                "slowest_lag_ms": round(lag, 3),
                "slowest_lag_pct": round(100.0 * lag / med, 2) if med > 0 else None,
            }
        )
    else:
        out.update(
            {
                "median_step_time_ms": None,
                "slowest_rank": None,
                "slowest_step_time_ms": None,
                "slowest_lag_ms": None,
                "slowest_lag_pct": None,
            }
        )
    by_code: dict[str, dict[str, Any]] = {}
    for r in ranks:
        for f in r.report.findings:
            e = by_code.setdefault(f.code, {"code": f.code, "name": f.name, "severity": str(f.severity), "ranks": []})
            e["ranks"].append(r.label)
    findings = []
    for e in by_code.values():
        k = len(e["ranks"])
        e["n_ranks"] = k
        e["scope"] = "most" if k > n / 2 else ("one" if k == 1 else "some")
        findings.append(e)
    order = {"most": 0, "some": 1, "one": 2}
    out["findings"] = sorted(findings, key=lambda e: (order[e["scope"]], -e["n_ranks"], e["code"]))
    if any("exposed_comm_ms" in r.report.signals for r in ranks):
        out["exposed_comm_ms"] = {r.label: _r3(r.report.signals.get("exposed_comm_ms")) for r in ranks}
    out["collectives"] = compare_collectives(ranks)
    out["straggler"] = out["collectives"]["straggler"] if out["collectives"] else None
    return out


__all__ = [
    "WORST_COLLECTIVES",
    "MultiRankReport",
    "MultiTraceReport",
    "RankEntry",
    "compare_collectives",
    "summarize",
]
