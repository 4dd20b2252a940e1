"""Executors: run the per-rank jobs (a local process pool) and assemble the multi-rank report."""

from __future__ import annotations

import os
from concurrent.futures import ProcessPoolExecutor
from pathlib import Path
from typing import Callable

from tracedoc.errors import TraceLoadError
from tracedoc.ranks.discover import find_traces
from tracedoc.ranks.job import RankResult, analyze_one
from tracedoc.ranks.summary import MultiRankReport, summarize


def _sort_key(r: RankResult) -> tuple:
    return (r.rank is None, r.rank if r.rank is not None else 0, r.path)


def analyze_directory(
    directory: str | os.PathLike[str],
    jobs: int | None = None,
    select: list[str] | None = None,
    ignore: list[str] | None = None,
    progress: Callable[[str], None] | None = None,
    rule_paths: list[str] | None = None,
) -> MultiRankReport:
    """Analyze every trace in ``directory`` in ``jobs`` worker processes.

    Args:
        jobs: worker processes; default ``min(cpu count, number of traces)``. 1 runs in
            this process.
        rule_paths: extra rule files or folders, evaluated with the built-in rules.

    Raises:
        TraceLoadError: no trace files, a file that is not a readable trace (the first
            such file in name order, one line naming it), or two traces of the same rank.
        RuleError: a bad ``select``/``ignore`` selector or rule file.
    """
    d = Path(directory)
    files = find_traces(d)
    if jobs is None:
        jobs = min(os.cpu_count() or 1, len(files))
    jobs = max(1, min(jobs, len(files)))
    # fail fast on a bad selector or rule file, before any worker starts
    from tracedoc.engine.rules import load_rules, select_rules

    select_rules(load_rules(rule_paths), select, ignore)
    results: list[RankResult] = []
    if progress:
        progress(f"analyzing {len(files)} traces with {jobs} worker process{'es' if jobs > 1 else ''}")
    if jobs == 1:
        for i, f in enumerate(files):
            results.append(analyze_one(str(f), select, ignore, rule_paths=rule_paths))
            if progress:
                progress(f"analyzed {i + 1}/{len(files)} traces")
    else:
        with ProcessPoolExecutor(max_workers=jobs) as pool:
            futures = [pool.submit(analyze_one, str(f), select, ignore, 1, rule_paths) for f in files]
            for i, fut in enumerate(futures):
                results.append(fut.result())
                if progress:
                    progress(f"analyzed {i + 1}/{len(files)} traces")
    for r in results:  # files are in name order: report the first bad one
        if r.error:
            raise TraceLoadError(r.path, r.error[len(r.path) + 2 :] if r.error.startswith(r.path + ": ") else r.error)
    seen: dict[int, str] = {}
    for r in results:
        if r.rank is not None:
            if r.rank in seen:
                raise TraceLoadError(
                    r.path, f"rank {r.rank} again (also in {Path(seen[r.rank]).name}); one trace per rank expected"
                )
            seen[r.rank] = r.path
    results.sort(key=_sort_key)
    return MultiRankReport(directory=str(directory), ranks=results, summary=summarize(results))
