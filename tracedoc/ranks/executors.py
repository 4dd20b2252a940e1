"""Executors: run the per-trace jobs in a local process pool (the default) or on a Dask
cluster (the ``dask`` extra), and assemble the report.

Both executors run the same job (:func:`tracedoc.ranks.job.analyze_one`) on the same
inputs and return its compact results in input order, so the cross-rank summary is the
same whichever ran it (``tests/test_dask_fleet.py`` compares the JSON byte for byte).
Rule files are parsed once here, in the client, and the parsed rules are sent to the
workers (Dask: scattered once to every worker), never re-read per rank.
"""

from __future__ import annotations

import os
import time
from concurrent.futures import ProcessPoolExecutor
from pathlib import Path
from typing import TYPE_CHECKING, Callable

from tracedoc import hostfacts
from tracedoc.errors import TracedocError, TraceLoadError
from tracedoc.ranks.discover import Discovery, discover
from tracedoc.ranks.job import RankResult, analyze_one
from tracedoc.ranks.summary import MultiRankReport, MultiTraceReport, RankEntry, summarize

if TYPE_CHECKING:
    from tracedoc.settings import Settings


class SchedulerError(TracedocError):
    """The Dask scheduler cannot be used (extra not installed, address unreachable)."""


def _sort_key(r: RankResult) -> tuple:
    return (r.rank is None, r.rank if r.rank is not None else 0, r.path)


def run_pool(
    files: list[str], kwargs: dict, jobs: int, progress: Callable[[str], None] | None = None
) -> list[RankResult]:
    """Run :func:`analyze_one` on every file in ``jobs`` local processes (1: in this one).

    Returns the results in ``files`` order."""
    from tracedoc.text import plural

    if jobs <= 1:
        out = []
        for i, f in enumerate(files):
            out.append(analyze_one(f, **kwargs))
            if progress:
                progress(f"analyzed {i + 1}/{plural(len(files), 'trace')}")
        return out
    with ProcessPoolExecutor(max_workers=jobs) as pool:
        futures = [pool.submit(analyze_one, f, decode_workers=1, **kwargs) for f in files]
        out = []
        for i, fut in enumerate(futures):
            out.append(fut.result())
            if progress:
                progress(f"analyzed {i + 1}/{plural(len(files), 'trace')}")
        return out


def _start_local_cluster(n_workers: int):
    """Start a :class:`distributed.LocalCluster` of ``n_workers`` single-threaded, forked
    worker processes on this machine (no dashboard, quiet logs), and return it."""
    import logging

    import dask
    from distributed import LocalCluster

    import tracedoc.engine  # noqa: F401  (imported once here, inherited by the forked workers)

    # fork, not Dask's default spawn: a spawned worker and its nanny re-import
    # distributed, pandas and tracedoc (about 3 s of CPU per worker, measured in
    # docs/scale.md); forked ones inherit them, as the process pool's workers do
    # and fewer wake-ups of each worker's event loop: every wake-up takes the GIL
    # from the analysis thread, and on a busy machine waiting to get it back costs
    # far more than the wake-up itself (measured in docs/scale.md). No statistical
    # profiler (a sample every 10 ms; a result carries no profile anyway), the
    # blocked-loop tick every 2 s instead of 20 ms, the memory monitor every 1 s
    # instead of 100 ms, the system monitor every 5 s instead of 0.5 s.
    settings = {
        "distributed.worker.multiprocessing-method": "fork",
        "distributed.worker.profile.enabled": False,
        "distributed.admin.tick.interval": "2s",
        "distributed.worker.memory.monitor-interval": "1s",
        "distributed.admin.system-monitor.interval": "5s",
    }
    with dask.config.set(settings):
        return LocalCluster(
            n_workers=n_workers,
            threads_per_worker=1,
            processes=True,
            dashboard_address=None,
            silence_logs=logging.ERROR,
        )


def run_dask(
    files: list[str],
    kwargs: dict,
    scheduler: str,
    workers: int | None = None,
    progress: Callable[[str], None] | None = None,
    timeout: str | None = None,
) -> list[RankResult]:
    """Run :func:`analyze_one` on every file on a Dask cluster.

    Args:
        scheduler: ``"local"`` (a :class:`distributed.LocalCluster` of ``workers``
            single-threaded worker processes on this machine, closed afterwards) or a
            scheduler address such as ``tcp://HOST:8786``.
        workers: LocalCluster worker processes (default ``min(CPUs, files)``).
        timeout: how long to wait for a remote scheduler, as Dask takes it (default ``"10s"``;
            ``$TRACEDOC_DASK_TIMEOUT`` through :class:`tracedoc.settings.Environment`).

    Each worker opens its own file (a path every worker can read: shared storage or an
    fsspec URL); only the compact results travel back.

    Raises:
        SchedulerError: ``distributed`` is not installed, or the scheduler cannot be reached.
    """
    try:
        from distributed import Client
    except ImportError:
        raise SchedulerError("--scheduler needs the dask extra: pip install 'tracedoc[dask]'") from None
    import logging

    from tracedoc.text import plural

    logging.getLogger("distributed").setLevel(logging.ERROR)  # its INFO lines are not our output
    cluster = None
    try:
        if scheduler == "local":
            cluster = _start_local_cluster(workers or min(hostfacts.cpu_cores(), max(1, len(files))))
            client = Client(cluster)
        else:
            client = Client(scheduler, timeout=timeout or "10s")
    except (OSError, TimeoutError, ValueError) as exc:
        if cluster is not None:
            cluster.close()
        raise SchedulerError(f"cannot reach the Dask scheduler {scheduler} ({exc})") from None
    try:
        if progress:
            progress(f"analyzing {plural(len(files), 'trace')} on Dask ({scheduler})")
        kw = dict(kwargs)
        if kw.get("rules") is not None:
            kw["rules"] = client.scatter(kw["rules"], broadcast=True)  # sent once, not per task
        futures = client.map(analyze_one, files, decode_workers=1, pure=False, **kw)
        out = client.gather(futures)
    finally:
        client.close()
        if cluster is not None:
            cluster.close()
    return list(out)


def _decide_rank_mode(results: list[RankResult]) -> bool:
    """True when the traces are ranks of one job: at least two, each with a rank, all
    ranks distinct, and every ``distributedInfo.world_size`` present equal and larger than
    every rank."""
    if len(results) < 2 or any(r.rank is None for r in results):
        return False
    ranks = [r.rank for r in results]
    if len(set(ranks)) != len(ranks):
        return False
    sizes = {r.world_size for r in results if r.world_size is not None}
    if len(sizes) > 1:
        return False
    return not sizes or max(ranks) < next(iter(sizes))


def _execute(
    files: list[str],
    kwargs: dict,
    jobs: int | None,
    scheduler: str | None,
    progress: Callable[[str], None] | None,
    dask_timeout: str | None = None,
) -> tuple[list[RankResult], dict]:
    """Run :func:`analyze_one` on ``files`` with Dask (``scheduler`` given) or the process
    pool; return the results in ``files`` order and the report's ``run`` dict (executor,
    workers or scheduler, wall-clock ``seconds``). ``dask_timeout``: see :func:`run_dask`."""
    from tracedoc.text import plural

    n_jobs = max(1, min(jobs or hostfacts.cpu_cores(), len(files)))
    t0 = time.perf_counter()
    if scheduler:
        results = run_dask(files, kwargs, scheduler, workers=jobs, progress=progress, timeout=dask_timeout)
        executor = {"executor": "dask", "scheduler": scheduler}
    else:
        if progress:
            progress(
                f"analyzing {plural(len(files), 'trace')} with {plural(n_jobs, 'worker process', 'worker processes')}"
            )
        results = run_pool(files, kwargs, n_jobs, progress)
        executor = {"executor": "process pool", "workers": n_jobs}
    return results, {**executor, "seconds": round(time.perf_counter() - t0, 3)}


def _split_failures(results: list[RankResult], strict: bool) -> tuple[list[RankResult], list[RankResult]]:
    """Split ``results`` into ``(ok, failed)``, in order.

    Raises:
        TraceLoadError: about the first failure, when every trace failed or (``strict``) any did.
    """
    failed = [r for r in results if r.error]
    ok = [r for r in results if not r.error]
    if failed and (strict or not ok):
        first = failed[0]
        more = f" (and {len(failed) - 1} more failed)" if len(failed) > 1 else ""
        prefix = first.path + ": "
        problem = first.error[len(prefix) :] if first.error.startswith(prefix) else first.error
        raise TraceLoadError(first.path, problem + more + (" [--strict]" if strict and ok else ""))
    return ok, failed


def _check_one_trace_per_rank(results: list[RankResult]) -> None:
    """Raise TraceLoadError at the first trace whose rank an earlier one already has."""
    seen: dict[int, str] = {}
    for r in results:
        if r.rank is not None:
            if r.rank in seen:
                raise TraceLoadError(
                    r.path, f"rank {r.rank} again (also in {Path(seen[r.rank]).name}); one trace per rank expected"
                )
            seen[r.rank] = r.path


def _rank_report(
    inputs: list[str], ok: list[RankResult], failed: list[RankResult], found: Discovery, run: dict
) -> MultiRankReport:
    """The report of ``ok`` as the ranks of one job: checks there is one trace per rank,
    sorts ``ok`` in place into rank order and adds the cross-rank :func:`summarize`."""
    _check_one_trace_per_rank(ok)
    ok.sort(key=_sort_key)
    return MultiRankReport(
        directory=" ".join(str(i) for i in inputs),
        ranks=[RankEntry.of(r) for r in ok],  # the document: no collective timings, no worker timings
        summary=summarize(ok),
        failed=[RankEntry.failure_of(r) for r in failed],
        skipped=found.skipped,
        followed=found.followed,
        run=run,
    )


def analyze_inputs(
    inputs: list[str],
    settings: Settings | None = None,
    *,
    jobs: int | None = None,
    scheduler: str | None = None,
    ranks: bool | None = None,
    follow_symlinks: bool = False,
    cache_dir: str | None = None,
    progress: Callable[[str], None] | None = None,
    rules: list | None = None,
) -> MultiRankReport | MultiTraceReport:
    """Analyze several traces: files, globs, folders, URLs (see :mod:`tracedoc.ranks.discover`).

    Args:
        jobs: worker processes (pool), or LocalCluster workers with ``scheduler="local"``;
            default ``min(CPUs, traces)``.
        scheduler: None for the local process pool; ``"local"`` or ``tcp://HOST:PORT`` for Dask.
        ranks: True: the traces are ranks of one job (a cross-rank summary); False: unrelated
            traces (one report each); None: decide from the traces (:func:`_decide_rank_mode`).
        cache_dir: frame-cache folder for the workers; None: no cache.
        settings: the :class:`~tracedoc.settings.Settings` of every rank's analysis (selectors,
            rule files, threshold overrides, floors, ``strict``, the size limit, the
            environment); sent to each worker as it is. Default: ``Settings`` with the
            ``TRACEDOC_*`` variables read now.
        rules: the rules, already parsed (default ``settings.rules()``: parsed once here, with
            the overrides applied and the selectors checked, before any worker starts).

    Every rank is analyzed with the same rules, overrides and floors as a single trace
    would be, whichever executor runs it (the parsed rules travel to the workers).

    Raises:
        TraceLoadError: nothing to analyze, every trace failed, a failure under ``strict``,
            or (rank mode) two traces of the same rank.
        RuleError: a bad selector or rule file (before any worker starts).
        ConfigError: a threshold override that names no rule or does not fit its condition.
        SchedulerError: the Dask scheduler cannot be used.
    """
    from tracedoc.settings import Environment, Settings

    settings = settings if settings is not None else Settings(env=Environment.read())
    found: Discovery = discover(inputs, follow_symlinks=follow_symlinks)
    files = found.files
    kwargs = {"settings": settings, "rules": rules if rules is not None else settings.rules(), "cache_dir": cache_dir}
    results, run = _execute(files, kwargs, jobs, scheduler, progress, settings.env.dask_timeout)
    ok, failed = _split_failures(results, settings.strict)
    rank_mode = _decide_rank_mode(ok) if ranks is None else ranks
    if not rank_mode:
        return MultiTraceReport(
            inputs=[str(i) for i in inputs],
            traces=[RankEntry.trace_of(r) for r in ok],
            failed=[RankEntry.failure_of(r) for r in failed],
            skipped=found.skipped,
            followed=found.followed,
            run=run,
        )
    return _rank_report(inputs, ok, failed, found, run)


def analyze_directory(
    directory: str | os.PathLike[str],
    jobs: int | None = None,
    select: list[str] | None = None,
    ignore: list[str] | None = None,
    progress: Callable[[str], None] | None = None,
    rule_paths: list[str] | None = None,
    scheduler: str | None = None,
    strict: bool = False,
    cache_dir: str | None = None,
    follow_symlinks: bool = False,
    thresholds: dict[str, dict[str, float]] | None = None,
    min_saving_ms: float | None = None,
    min_saving_share: float | None = None,
) -> MultiRankReport:
    """Analyze every trace in ``directory`` as the ranks of one job (see :func:`analyze_inputs`),
    under the project's ``[tool.tracedoc]`` found from the folder up, then from the working
    directory up (:meth:`tracedoc.settings.Settings.resolve`; the explicit arguments win).

    A trace that cannot be analyzed is listed in ``failed`` and the rest analyzed, unless
    ``strict``. ``thresholds``, ``min_saving_ms`` and ``min_saving_share`` apply to every
    rank as to a single trace (see :func:`analyze_inputs`).

    Raises:
        TraceLoadError: no trace files, every trace failed (or one, under ``strict``), or
            two traces of the same rank.
        RuleError: a bad ``select``/``ignore`` selector or rule file.
    """
    import dataclasses

    from tracedoc.settings import Settings

    # the project's [tool.tracedoc], found from the folder as for a single trace; explicit arguments win
    settings = Settings.resolve(
        directory,
        select=select,
        ignore=ignore,
        rule_paths=list(rule_paths or ()),
        strict=strict,
        min_saving_ms=min_saving_ms,
        min_saving_share=min_saving_share,
    )
    if thresholds is not None:
        settings = dataclasses.replace(settings, thresholds=tuple((k, tuple(v.items())) for k, v in thresholds.items()))
    out = analyze_inputs(
        [str(directory)],
        settings,
        jobs=jobs,
        scheduler=scheduler,
        ranks=True,
        follow_symlinks=follow_symlinks,
        cache_dir=cache_dir,
        progress=progress,
    )
    assert isinstance(out, MultiRankReport)
    out.directory = str(directory)
    return out
