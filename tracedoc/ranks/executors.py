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
from tracedoc.errors import TraceLoadError, display_path, install_hint
from tracedoc.ranks.discover import Discovery, discover
from tracedoc.ranks.job import RankResult, analyze_one
from tracedoc.ranks.scheduler import SchedulerError, check_scheduler
from tracedoc.ranks.summary import MultiRankReport, MultiTraceReport, RankEntry, summarize

if TYPE_CHECKING:
    from tracedoc.settings import Settings


def _sort_key(r: RankResult) -> tuple:
    return (r.rank is None, r.rank if r.rank is not None else 0, r.path)


def _died(exitcode: int | None) -> str:
    """How a worker process ended, from its exit code (negative: the signal that killed it)."""
    import signal

    if exitcode is None:
        return "it did not end"
    if exitcode < 0:
        try:
            name = signal.Signals(-exitcode).name
        except ValueError:
            name = f"signal {-exitcode}"
        return f"killed by {name}" + (", the OOM killer's signal" if name == "SIGKILL" else "")
    return f"exit status {exitcode}"


def lost_result(path: str, exitcode: int | None) -> RankResult:
    """The failed result of a trace lost with the pool whose retry, alone in its own process,
    died too: ``exitcode`` is the retry's (``multiprocessing.Process.exitcode``)."""
    return RankResult(
        path=path,
        error=f"{path}: its worker process died when retried alone ({_died(exitcode)}), after a worker "
        "process of the pool died; out of memory? fewer --jobs leave each rank more",
        retried=True,
    )


def _pool_round(job: Callable, files: list[str], kwargs: dict, jobs: int, results: list, tick: Callable) -> list[int]:
    """Run ``job`` on every file in a pool of ``jobs`` processes; put each result in
    ``results`` (same index) and return the indices lost when a worker died abruptly (the pool
    breaks then, and every job not finished is lost with it: not only the one that killed it)."""
    from concurrent.futures.process import BrokenProcessPool

    lost: list[int] = []
    with ProcessPoolExecutor(max_workers=jobs) as pool:
        futures = []
        for f in files:
            try:
                futures.append(pool.submit(job, f, decode_workers=1, **kwargs))
            except BrokenProcessPool:  # it broke while the jobs were still being handed out
                break
        lost.extend(range(len(futures), len(files)))
        for i, fut in enumerate(futures):
            try:
                results[i] = fut.result()
            except BrokenProcessPool:
                lost.append(i)
                continue
            tick()
    return sorted(lost)


def _run_alone(job: Callable, path: str, kwargs: dict, conn) -> None:
    """The body of a retry's own process: ``job``'s result sent back through ``conn``."""
    try:
        conn.send(job(path, decode_workers=1, **kwargs))
    finally:
        conn.close()


def _retry_alone(
    job: Callable, files: list[str], lost: list[int], kwargs: dict, jobs: int, results: list, tick: Callable
) -> None:
    """Retry each lost file once, each in a fresh process of its own, ``jobs`` at a time: a
    trace that kills its worker again takes no other with it. A retry that dies too gives the
    trace's failed result (:func:`lost_result`, with how the process ended)."""
    import multiprocessing as mp

    ctx = mp.get_context()  # the pool's own start method
    for at in range(0, len(lost), jobs):
        batch = []
        try:
            for i in lost[at : at + jobs]:
                recv, send = ctx.Pipe(duplex=False)
                proc = ctx.Process(target=_run_alone, args=(job, files[i], kwargs, send))
                proc.start()
                send.close()  # the child's end: the parent's copy would hide the child's death
                batch.append((i, proc, recv))
            for i, proc, recv in batch:
                try:
                    r = recv.recv()
                except (EOFError, OSError):  # the process died before sending its result
                    r = None
                proc.join()
                results[i] = r if r is not None else lost_result(files[i], proc.exitcode)
                results[i].retried = True
                tick()
        finally:
            for _, proc, recv in batch:
                recv.close()
                if proc.is_alive():  # interrupted: leave no process behind
                    proc.kill()
                    proc.join()


def run_pool(
    files: list[str], kwargs: dict, jobs: int, progress: Callable[[str], None] | None = None
) -> list[RankResult]:
    """Run :func:`analyze_one` on every file in ``jobs`` local processes (1: in this one).

    A worker process that dies abruptly (the kernel's OOM killer, any other signal, a crash in
    native code) breaks the whole pool, and every trace not finished by then is lost with it.
    The finished ones are kept; each lost one is retried once in a fresh process of its own
    (``jobs`` at a time), marked ``retried``, and listed as failed if that process dies too.

    Returns the results in ``files`` order."""
    from tracedoc.text import plural

    done = [0]

    def tick() -> None:
        done[0] += 1
        if progress:
            progress(f"analyzed {done[0]}/{plural(len(files), 'trace')}")

    if jobs <= 1:
        out = []
        for f in files:
            out.append(analyze_one(f, **kwargs))
            tick()
        return out
    job = analyze_one  # looked up now: the retries run the same function as the pool
    results: list = [None] * len(files)
    lost = _pool_round(job, files, kwargs, jobs, results, tick)
    if lost:
        if progress:
            progress(f"a worker process died: retrying {plural(len(lost), 'trace')}, each in a process of its own")
        _retry_alone(job, files, lost, kwargs, jobs, results, tick)
    return results


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


def _gather(client, futures: list, files: list[str]) -> list[RankResult | None]:
    """The results of ``futures`` (one per file), in ``files`` order; None for a task Dask
    cancelled (its input, the scattered rules, was lost with the workers that held it).

    A trace whose task Dask gave up on because the workers running it died (``KilledWorker``:
    Dask runs a task again on another worker, up to ``distributed.scheduler.allowed-failures``
    times, 3 by default) gets a failed result and the other ranks are kept, as in the process
    pool (:func:`run_pool`). Any other error of a task is raised as it is."""
    from distributed import KilledWorker

    done = iter(client.gather(futures, errors="skip"))
    out: list[RankResult | None] = []
    for path, fut in zip(files, futures, strict=True):
        if fut.status == "finished":
            out.append(next(done))
        elif fut.status == "cancelled":
            out.append(None)
        elif isinstance(fut.exception(), KilledWorker):
            out.append(
                RankResult(
                    path=path,
                    error=f"{path}: every Dask worker that ran it died (Dask's allowed-failures spent); "
                    "out of memory? fewer workers per machine leave each rank more",
                )
            )
        else:
            fut.result()  # raises the task's own error
    return out


def _dask_map(client, files: list[str], kwargs: dict) -> list:
    """Submit :func:`analyze_one` for ``files``; the rules are scattered to every worker once
    for all of them, not sent with each task."""
    kw = dict(kwargs)
    if kw.get("rules") is not None:
        kw["rules"] = client.scatter(kw["rules"], broadcast=True)
    return client.map(analyze_one, files, decode_workers=1, pure=False, **kw)


def _dask_run(client, files: list[str], kwargs: dict) -> list[RankResult]:
    """Run every file on ``client``'s cluster. Tasks cancelled because workers died with the
    scattered rules (every copy of them lost) are submitted once more, with the rules
    scattered again, and marked ``retried``; lost a second time, they are failed."""
    out = _gather(client, _dask_map(client, files, kwargs), files)
    lost = [i for i, r in enumerate(out) if r is None]
    if lost:
        names = [files[i] for i in lost]
        for i, r in zip(lost, _gather(client, _dask_map(client, names, kwargs), names), strict=True):
            why = "lost twice with Dask workers that died (out of memory?)"
            out[i] = r if r is not None else RankResult(path=files[i], error=f"{files[i]}: {why}")
            out[i].retried = True
    return out  # type: ignore[return-value]  (no None left)


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

    A scheduler address is checked first (:func:`tracedoc.ranks.scheduler.check_scheduler`),
    within ``timeout``: a peer that is not a Dask scheduler, or that never answers, is an error
    before Dask reads from it (Dask's handshake has no deadline of its own).

    Raises:
        SchedulerError: ``distributed`` is not installed, or the scheduler cannot be reached,
            is not a Dask scheduler or does not answer within ``timeout``.
    """
    try:
        from distributed import Client
    except ImportError:
        raise SchedulerError(f"--scheduler needs the dask extra: {install_hint('dask')}") from None
    import logging

    from tracedoc.text import plural

    logging.getLogger("distributed").setLevel(logging.ERROR)  # its INFO lines are not our output
    cluster = None
    try:
        if scheduler == "local":
            cluster = _start_local_cluster(workers or min(hostfacts.cpu_cores(), max(1, len(files))))
            client = Client(cluster)
        else:
            from dask.utils import parse_timedelta

            check_scheduler(scheduler, parse_timedelta(timeout or "10s", default="seconds"))
            client = Client(scheduler, timeout=timeout or "10s")
    except (OSError, TimeoutError, ValueError, MemoryError) as exc:
        if cluster is not None:
            cluster.close()
        why = "not a Dask scheduler: it sent an impossible message length" if isinstance(exc, MemoryError) else exc
        raise SchedulerError(f"cannot reach the Dask scheduler {display_path(scheduler)} ({why})") from None
    try:
        if progress:
            progress(f"analyzing {plural(len(files), 'trace')} on Dask ({scheduler})")
        out = _dask_run(client, files, kwargs)
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


def duplicate_ranks(results: list[RankResult]) -> dict[int, list[RankResult]]:
    """The ranks that more than one of ``results`` claims, in rank order, each with its
    results in input order (results without a rank are never duplicates)."""
    by_rank: dict[int, list[RankResult]] = {}
    for r in results:
        if r.rank is not None:
            by_rank.setdefault(r.rank, []).append(r)
    return {k: v for k, v in sorted(by_rank.items()) if len(v) > 1}


def describe_duplicates(dups: dict[int, list[RankResult]], limit: int = 5) -> str:
    """One line naming each duplicated rank (up to ``limit``, then how many more) and the files
    that claim it, with where each took its rank from: ``rank 1 in 2 traces (a.json:
    distributedInfo, rank-1.json: file name)``."""

    parts = []
    for rank, rs in list(dups.items())[:limit]:
        names = [f"{display_path(Path(r.path).name)}: {r.rank_source}" for r in rs[:4]]
        more = f", +{len(rs) - 4} more" if len(rs) > 4 else ""
        parts.append(f"rank {rank} in {len(rs)} traces ({', '.join(names)}{more})")
    if len(dups) > limit:
        parts.append(f"+{len(dups) - limit} more duplicated ranks")
    return "; ".join(parts)


def _check_one_trace_per_rank(results: list[RankResult]) -> None:
    """Raise TraceLoadError when two traces claim one rank, at the second trace of the first
    such rank, naming every duplicated rank and its files."""
    dups = duplicate_ranks(results)
    if dups:
        rank = next(iter(dups))
        rs = dups.pop(rank)
        others = ", ".join(Path(r.path).name for r in rs if r is not rs[1])
        also = f"; also {describe_duplicates(dups)}" if dups else ""
        raise TraceLoadError(rs[1].path, f"rank {rank} again (also in {others}); one trace per rank expected{also}")


def _notes(results: list[RankResult], ok: list[RankResult], ranks: bool | None) -> list[str]:
    """The notes of a many-trace report: the traces analyzed again after a worker process died,
    and (rank mode decided from the traces, ``ranks`` None) the ranks several traces claim."""
    from tracedoc.text import plural

    notes = []
    retried = [Path(r.path).name for r in results if r.retried and not r.error]
    if retried:
        shown = ", ".join(retried[:5]) + (f", +{len(retried) - 5} more" if len(retried) > 5 else "")
        notes.append(
            f"a worker process died: {plural(len(retried), 'trace')} analyzed again, each in a process of its "
            f"own ({shown})"
        )
    dups = duplicate_ranks(ok)
    if dups and ranks is None:
        notes.append(
            f"duplicate ranks, so not the ranks of one job (one report per trace): {describe_duplicates(dups)}"
        )
    return notes


def _rank_report(
    inputs: list[str],
    ok: list[RankResult],
    failed: list[RankResult],
    found: Discovery,
    run: dict,
    notes: list[str],
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
        notes=notes,
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
            or (``ranks=True``) two traces of the same rank, naming every duplicated rank.

    With ``ranks`` None, traces that claim the same rank are not the ranks of one job: each
    gets its own report and a note names the duplicated ranks and their files. A trace
    whose worker process died is retried once (:func:`run_pool`); a note names those that
    were analyzed on the retry.
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
    notes = _notes(results, ok, ranks)
    if not rank_mode:
        return MultiTraceReport(
            inputs=[str(i) for i in inputs],
            traces=[RankEntry.trace_of(r) for r in ok],
            failed=[RankEntry.failure_of(r) for r in failed],
            skipped=found.skipped,
            followed=found.followed,
            run=run,
            notes=notes,
        )
    return _rank_report(inputs, ok, failed, found, run, notes)


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
