"""Multi-rank analysis: a directory of per-rank traces, analyzed in parallel, with a
cross-rank summary.

Each trace file in the directory (``*.json``, ``*.json.gz``, ``*.gz``; not recursive) is
loaded and analyzed in a worker process (``jobs`` of them). A trace's rank is
``distributedInfo.rank`` when the trace carries it, else the number in its file name
(``rank-3.….pt.trace.json.gz``, ``…_rank_3…``, ``rank3…``), else unknown.

The summary compares the ranks:

* step time per rank, the median, and the slowest rank with how far it lags the
  median (ms and %): in synchronous data-parallel training every rank waits for the
  slowest at each collective, so the lag is time the other ranks lose per step;
* findings that hold on most ranks (more than half: a property of the job) versus on
  exactly one rank (a straggler: look at that machine, its data shard or its GPU).

JSON form (``schema_version`` 1, additive changes keep the version)::

    {"schema_version": 1, "kind": "multi-rank", "tool": {...}, "directory": str,
     "ranks": [{"rank": int | null, "rank_source": "distributedInfo" | "file name" | null,
                "path": str, "report": <the single-trace report document>}],
     "summary": {"n_ranks", "step_time_ms": {rank_label: ms | null}, "median_step_time_ms",
                 "slowest_rank", "slowest_step_time_ms", "slowest_lag_ms", "slowest_lag_pct",
                 "findings": [{"code", "name", "severity", "ranks": [...], "n_ranks", "scope":
                               "most" | "some" | "one"}]}}
"""

from tracedoc.ranks.discover import TRACE_SUFFIXES, find_traces, rank_from_filename
from tracedoc.ranks.executors import analyze_directory
from tracedoc.ranks.job import RankResult, analyze_one
from tracedoc.ranks.render import render_markdown, render_text
from tracedoc.ranks.summary import MultiRankReport, summarize

__all__ = [
    "TRACE_SUFFIXES",
    "MultiRankReport",
    "RankResult",
    "analyze_directory",
    "analyze_one",
    "find_traces",
    "rank_from_filename",
    "render_markdown",
    "render_text",
    "summarize",
]
