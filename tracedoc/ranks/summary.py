"""The cross-rank summary: step time per rank, the slowest rank, findings by scope."""

from __future__ import annotations

import statistics
from dataclasses import dataclass, field
from typing import Any

from tracedoc import __version__
from tracedoc.ranks.job import RankResult
from tracedoc.report.model import SCHEMA_VERSION


@dataclass
class MultiRankReport:
    """Per-rank reports and the cross-rank summary of a directory of traces."""

    directory: str
    ranks: list[RankResult]
    summary: dict[str, Any] = field(default_factory=dict)

    def to_dict(self) -> dict[str, Any]:
        return {
            "schema_version": SCHEMA_VERSION,
            "kind": "multi-rank",
            "tool": {"name": "tracedoc", "version": __version__},
            "directory": self.directory,
            "ranks": [
                {
                    "rank": r.rank,
                    "rank_source": r.rank_source,
                    "path": r.path,
                    "report": r.report.to_dict() if r.report else None,
                }
                for r in self.ranks
            ],
            "summary": self.summary,
        }

    @property
    def findings(self) -> list:
        """Every finding of every rank (for the exit code)."""
        return [f for r in self.ranks if r.report for f in r.report.findings]


def summarize(ranks: list[RankResult]) -> dict[str, Any]:
    """The cross-rank summary (see the module docstring)."""
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
            e = by_code.setdefault(f.code, {"code": f.code, "name": f.name, "severity": f.severity, "ranks": []})
            e["ranks"].append(r.label)
    findings = []
    for e in by_code.values():
        k = len(e["ranks"])
        e["n_ranks"] = k
        e["scope"] = "most" if k > n / 2 else ("one" if k == 1 else "some")
        findings.append(e)
    order = {"most": 0, "some": 1, "one": 2}
    out["findings"] = sorted(findings, key=lambda e: (order[e["scope"]], -e["n_ranks"], e["code"]))
    return out
