"""Many traces: discovery, the per-trace job, executors, and the cross-rank summary.

Modules, in the order the work flows:

* :mod:`~tracedoc.ranks.discover`: inputs (files, globs, folders, fsspec URLs) to trace
  files, with what was skipped and why; a trace's rank from its file name.
* :mod:`~tracedoc.ranks.scheduler`: a ``--scheduler`` address checked to be a Dask scheduler,
  within the timeout, before Dask is handed it.
* :mod:`~tracedoc.ranks.job`: the per-trace job run in a worker: load, analyze, extract
  collective timings; a compact :class:`RankResult` comes back, never frames.
* :mod:`~tracedoc.ranks.executors`: the local process pool (default) and Dask
  (``--scheduler``); :func:`analyze_inputs` decides rank mode and assembles the report.
* :mod:`~tracedoc.ranks.summary`: the cross-rank summary (straggler from the matched
  collectives, step time per rank, exposed communication, findings by scope).
* the documents, :class:`MultiRankReport` and :class:`MultiTraceReport` (with their
  :class:`~tracedoc.report.ranks.RankEntry`), are in :mod:`tracedoc.report.ranks`, each with
  ``to_dict`` and a ``from_dict`` that reverses it; the computing code builds them from the
  workers' :class:`RankResult` s (which also carry the collective timings, kept out of the JSON).
* :mod:`~tracedoc.ranks.command`: the ``analyze`` command's many-traces path (the text and
  Markdown views are in :mod:`tracedoc.render.ranks`).

A trace's rank is ``distributedInfo.rank`` when the trace carries it, else the number in
its file name (``rank-3.….pt.trace.json.gz``, ``…_rank_3…``, ``rank3…``), else unknown.
Traces are treated as the ranks of one job when each has a rank, the ranks are distinct
and every ``distributedInfo.world_size`` agrees and exceeds them (or with ``--ranks``);
otherwise each trace gets its own report. Ranks that several traces claim are never taken in
silence: a note names each and its files (under ``--ranks``, an error does).

A worker process that dies (the OOM killer, a crash) loses no finished rank: the process
pool retries each trace it lost once, alone in a fresh process, and lists one whose retry
dies too as failed; on Dask, a trace whose workers all died is failed and the rest kept.

The summary compares the ranks:

* the straggler: the rank the others wait for at the collectives, with its lag per
  collective kind, per step and for the worst collectives (:mod:`~tracedoc.ranks.summary`);
* step time per rank, the median, and the slowest rank with how far it lags the median;
* exposed communication per rank (the ``exposed_comm_ms`` signal, where present);
* findings that hold on most ranks (more than half: a property of the job) versus on
  exactly one rank (look at that machine, its data shard or its GPU).

JSON form (``schema_version`` 2, the single-trace report's; additive changes keep the version)::

    {"schema_version": 2, "kind": "multi-rank", "tool": {...}, "directory": str,
     "ranks": [{"rank": int | null, "rank_source": "distributedInfo" | "file name" | null,
                "path": str, "report": <the single-trace report document>}],
     "summary": {"n_ranks", "step_time_ms": {rank_label: ms | null}, "median_step_time_ms",
                 "slowest_rank", "slowest_step_time_ms", "slowest_lag_ms", "slowest_lag_pct",
                 "findings": [{"code", "name", "severity", "ranks": [...], "n_ranks", "scope":
                               "most" | "some" | "one"}],
                 "exposed_comm_ms": {rank_label: ms | null} (when the signal exists),
                 "straggler": rank_label | null,
                 "collectives": <see summary.compare_collectives> | null},
     "failed": [{"path", "error"}], "skipped": [{"path", "reason"}],
     "followed_symlinks": [path], "notes": [str] (only when there are any),
     "run": {"executor", "workers" | "scheduler", "seconds"}}

Unrelated traces: ``{"schema_version": 2, "kind": "multi-trace", "tool", "inputs",
"traces": [{"path", "report"}], "failed", "skipped", "followed_symlinks", "notes", "run"}``.
"""

from tracedoc.ranks.discover import TRACE_SUFFIXES, find_traces, rank_from_filename
from tracedoc.ranks.executors import analyze_directory, analyze_inputs
from tracedoc.ranks.job import RankResult, analyze_one
from tracedoc.ranks.summary import MultiRankReport, MultiTraceReport, RankEntry, compare_collectives, summarize

__all__ = [
    "TRACE_SUFFIXES",
    "MultiRankReport",
    "MultiTraceReport",
    "RankEntry",
    "RankResult",
    "analyze_directory",
    "analyze_inputs",
    "compare_collectives",
    "analyze_one",
    "find_traces",
    "rank_from_filename",
    "summarize",
]
