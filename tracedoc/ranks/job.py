"""The per-rank job: load and analyze one trace where it runs (a pool process, a Dask
worker), and send back a compact result: the report (signals, findings, per-step
breakdown, the idle ledger where the report has one) and the rank's collective timings.
Frames never leave the worker.

Collective timings (for the cross-rank comparison in :mod:`tracedoc.ranks.summary`):
the rank's communication kernels (:func:`tracedoc.signals.comm.comm_kernel_mask`), or,
on a rank without any (a CPU-only gloo job), its blocking ``gloo:*`` CPU collectives
(from :func:`tracedoc.signals.comm.comm_op_mask`; ``nccl:*`` and ``c10d::*`` CPU ops only
enqueue work and do not wait, and ``record_param_comms`` wraps them). Each is given a
*kind* (the collective named in the kernel, e.g. ``AllReduce``, else the name itself)
and, in time order within its kind, an index: the n-th ``AllReduce`` of one rank is
matched with the n-th of every other rank.
"""

from __future__ import annotations

import re
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING

import numpy as np

from tracedoc.errors import TracedocError
from tracedoc.ranks.discover import rank_from_filename
from tracedoc.report.model import Report

if TYPE_CHECKING:
    from tracedoc.settings import Settings

_COLLECTIVE = re.compile(
    r"(AllReduce|AllGather|ReduceScatter|AllToAll|Broadcast|SendRecv|Reduce|Send|Recv|all_reduce|all_gather|"
    r"reduce_scatter|all_to_all|alltoall|broadcast|barrier)",
    re.IGNORECASE,
)


def collective_kind(name: str) -> str:
    """The collective a communication kernel or op performs, as written in its name
    (``ncclDevKernel_AllReduce_Sum_f32_RING_LL`` -> ``AllReduce``;
    ``gloo:all_reduce`` -> ``gloo:all_reduce``); the name before ``(`` otherwise."""
    if name.startswith("gloo:"):
        return name
    m = _COLLECTIVE.search(name)
    return m.group(1) if m else name.split("(", 1)[0]


@dataclass
class Collectives:
    """One rank's collectives, per kind, in time order.

    Attributes:
        source: ``"kernels"`` (GPU communication kernels) or ``"gloo ops"`` (CPU).
        kinds: kind -> ``(start_us, dur_us, step)`` arrays of equal length: absolute start
            (the trace's own clock, µs), duration (µs), and the ``ProfilerStep`` number the
            launch (or the op) falls in, -1 outside any step.
    """

    source: str
    kinds: dict[str, tuple[np.ndarray, np.ndarray, np.ndarray]] = field(default_factory=dict)

    @property
    def count(self) -> int:
        return sum(len(v[0]) for v in self.kinds.values())


def _step_of(ts: np.ndarray, steps) -> np.ndarray:
    if not len(steps) or not len(ts):
        return np.full(len(ts), -1, dtype=np.int64)
    starts = steps["ts_us"].to_numpy()
    ends = steps["end_us"].to_numpy()
    nums = steps["step"].to_numpy()
    i = np.searchsorted(starts, ts, side="right") - 1
    ok = (i >= 0) & (ts < ends[np.clip(i, 0, len(ends) - 1)])
    return np.where(ok, nums[np.clip(i, 0, len(nums) - 1)], -1).astype(np.int64)


def extract_collectives(trace) -> Collectives | None:
    """The collective timings of a loaded trace (see the module docstring); None without any."""
    from tracedoc.signals.comm import comm_kernel_mask, comm_op_mask

    k = trace.kernels
    if len(k):
        ck = k[comm_kernel_mask(k["name"])]
    else:
        ck = k
    if len(ck):
        # a kernel's step: the step its launching runtime call falls in (GPU time may lag the CPU)
        launch = trace.runtime.dropna(subset=["correlation"]).drop_duplicates("correlation")
        launch_ts = ck["correlation"].map(launch.set_index("correlation")["ts_us"]).to_numpy(dtype=float)
        at = np.where(np.isnan(launch_ts), ck["ts_us"].to_numpy(), launch_ts)
        names, ts, dur, source = ck["name"].to_numpy(), ck["ts_us"].to_numpy(), ck["dur_us"].to_numpy(), "kernels"
    else:
        ops = trace.ops
        co = ops[comm_op_mask(ops["name"])] if len(ops) else ops
        co = co[co["name"].str.startswith("gloo:")] if len(co) else co
        if not len(co):
            return None
        names, ts, dur, source = co["name"].to_numpy(), co["ts_us"].to_numpy(), co["dur_us"].to_numpy(), "gloo ops"
        at = ts
    step = _step_of(at, trace.steps)
    kinds_of = np.array([collective_kind(str(n)) for n in names], dtype=object)
    out = Collectives(source=source)
    for kind in sorted(set(kinds_of)):
        sel = np.flatnonzero(kinds_of == kind)
        order = sel[np.argsort(ts[sel], kind="stable")]
        out.kinds[kind] = (
            (ts[order] + trace.origin_us).astype(np.float64),
            dur[order].astype(np.float64),
            step[order],
        )
    return out


@dataclass
class RankResult:
    """One trace's analysis (or the one-line error that stopped it), as sent back by a worker.

    The computation's record, not a document: the many-trace documents hold each result's
    :class:`~tracedoc.report.ranks.RankEntry` (path, rank, rank source, report or error),
    without the collective timings (numpy arrays, for :func:`tracedoc.ranks.summary.summarize`)
    and the worker's timings.

    Attributes:
        path: the trace path or URL.
        rank: ``distributedInfo.rank``, else the rank in the file name, else None.
        rank_source: ``"distributedInfo"``, ``"file name"`` or None.
        world_size: ``distributedInfo.world_size`` when the trace carries it.
        report: the single-trace report (None on error).
        collectives: the rank's collective timings (None when it has none).
        error: ``"<path>: <problem>"``, one line, when the trace could not be analyzed.
        seconds: wall time of the job in the worker (a timing: not part of the JSON summary).
        cpu_seconds: CPU time of the job's thread in the worker (``time.thread_time``).
        retried: the job ran a second time, in a process of its own, after the worker process
            running it (or the pool's) died (:func:`tracedoc.ranks.executors.run_pool`).
    """

    path: str
    rank: int | None = None
    rank_source: str | None = None
    world_size: int | None = None
    report: Report | None = None
    collectives: Collectives | None = None
    error: str | None = None
    seconds: float = 0.0
    cpu_seconds: float = 0.0
    retried: bool = False

    @property
    def label(self) -> str:
        """``rank N``, or the file name when the rank is unknown."""
        return f"rank {self.rank}" if self.rank is not None else Path(self.path).name


def analyze_one(
    path: str,
    settings: Settings | None = None,
    decode_workers: int | None = None,
    rules: list | None = None,
    cache_dir: str | None = None,
) -> RankResult:
    """Load and analyze one trace; errors come back as data (they cross processes).

    Args:
        settings: the analysis options (:class:`~tracedoc.settings.Settings`, picklable: the
            same object reaches every worker); default ``Settings()``.
        decode_workers: passed to :func:`tracedoc.load.load` (1 inside a worker pool:
            the ranks already use the CPUs).
        rules: the rules, already parsed once by the caller (a rules folder is not parsed
            again for every rank); default ``settings.rules()``.
        cache_dir: a frame-cache folder (:class:`tracedoc.cache.FrameCache`, with the cache
            sizes of ``settings.env``); None: no cache.
    """
    import time

    from tracedoc import pipeline
    from tracedoc.load import load
    from tracedoc.settings import Settings

    settings = settings if settings is not None else Settings()
    t0, c0 = time.perf_counter(), time.thread_time()
    out = RankResult(path=path)
    try:
        cache = None
        if cache_dir is not None:
            from tracedoc.cache import default_cache

            cache = default_cache(cache_dir, env=settings.env)
        trace = load(path, workers=decode_workers, cache=cache, max_bytes=settings.max_trace_bytes)
        report = pipeline.analyze(trace, settings, rules=rules if rules is not None else settings.rules())
        out.collectives = extract_collectives(trace)
    except TracedocError as exc:
        out.error = str(exc)
        return out
    except MemoryError:
        out.error = f"{path}: out of memory while analyzing"
        return out
    except Exception as exc:  # never a traceback for a bad trace
        if settings.env.debug:
            raise
        out.error = f"{path}: cannot analyze ({type(exc).__name__}: {exc})"
        return out
    finally:
        out.seconds = time.perf_counter() - t0
        out.cpu_seconds = time.thread_time() - c0
    info = trace.metadata.get("distributedInfo")
    if isinstance(info, dict) and isinstance(info.get("world_size"), int) and not isinstance(info["world_size"], bool):
        out.world_size = info["world_size"]
    if trace.rank is not None:
        out.rank, out.rank_source = trace.rank, "distributedInfo"
    else:
        r = rank_from_filename(Path(path).name)
        if r is not None:
            out.rank, out.rank_source = r, "file name"
    out.report = report
    return out


def result_nbytes(r: RankResult) -> int:
    """Bytes of a result as pickled to the client (the per-rank transfer in docs/scale.md)."""
    import pickle

    return len(pickle.dumps(r, protocol=pickle.HIGHEST_PROTOCOL))
