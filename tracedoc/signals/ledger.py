"""The idle ledger: every idle millisecond of a step, per device, owned by one cause.

For each device and each step window, GPU time is *busy* (the union of its kernels,
memcpys and memsets, any stream) or *idle*. Idle time is cut into elementary segments,
and each segment gets exactly one owner, so the parts always add up to the idle time.

**Step 1: queued or not (HTA's idle split).** Holistic Trace Analysis classifies the gap
before each kernel of a stream: *host-wait* when the kernel's runtime launch started
after the previous kernel ended (the CPU had not enqueued work), *kernel-wait* when the
gap is shorter than ``consecutive_kernel_delay`` (default 30, "the overhead to launch
consecutive kernels"), *other* otherwise (e.g. waiting on an event of another stream).
HTA works per stream and skips the gap before a stream's first kernel. The ledger applies
the same test per device and per instant, so leading and trailing gaps count too. An idle
instant ``t`` is *queued* when some GPU event of the device has been launched and has not
started: its launch call had returned (``launch_end <= t``) and ``t < start``. Work whose
launch call is not in the trace is never queued. A queued instant is never host-wait,
whatever the CPU does meanwhile: a CPU blocked in a synchronisation or a copy at that
moment waits on the GPU's queue, not the reverse. It is owned by:

* ``kernel_wait`` -- the idle gap holding ``t`` (the hole in the device's busy union) is
  shorter than :data:`KERNEL_WAIT_MAX_US` (30 µs);
* ``dependency_wait`` -- otherwise, when one of the events queued at ``t`` is a
  *dependent event* (below): queued work that cannot start because its stream waits on an
  event;
* ``other_idle`` -- otherwise (HTA's *other*).

A **stream-wait call** is a runtime call named ``cudaStreamWaitEvent``,
``hipStreamWaitEvent`` or ``cuStreamWaitEvent`` (prefix match). Its *waiting stream* is
the (device, stream) of the ``cuda_sync`` event named ``Stream Wait Event`` with the same
correlation id when the trace has one (recorded), else the (device, stream) of the first
GPU event whose launch call is on the same (pid, tid) and starts at or after the wait
call's end (inferred); without either, the wait is ignored. Its **dependent event** is
the first GPU event on the waiting stream whose launch call starts at or after the wait
call's start. Its *producer* is the event-record call the wait is for: where the sync event carries
``wait_on_cuda_event_record_corr_id`` (newer Kineto), the runtime call with that
correlation id (none in the trace: the producer is outside the window); otherwise it is
inferred as the last event-record call (``cudaEventRecord``, ``hipEventRecord``,
``cuEventRecord``, prefix match) of any thread that starts before the wait call starts,
and when there is none, the producer is outside the profiled window (a report note says
so, :func:`dependency_waits`). The producer decides nothing in the ledger's figures.

**Step 2: host-wait causes.** An idle instant with nothing queued is host-wait. It is
owned by what the CPU threads that launch this device's work were doing, first match
wins:

1. ``pageable_h2d`` -- inside a blocking call (see 2) that issues a host-to-device copy
   whose source memory is not ``Pinned`` (``Pageable``, or host memory of unknown kind, as
   ROCm traces write it: ``Host``). The driver stages such a copy and returns only when it
   is done; pinned memory and ``non_blocking=True`` remove the call (its refill, 9, too).
   Any other blocking runtime call of 2) that starts inside the innermost enclosing
   ``cpu_op`` of such a copy call on the same thread (the stream synchronisation that
   ``tensor.to(device)`` issues after the copy) is ``pageable_h2d`` too. An asynchronous
   copy is blocking only as 2) says (pageable memory named as such, or D2H into memory
   that is not pinned).
2. ``blocking_sync`` -- inside another blocking call: ``cuda/hip/cu{Stream,Device,Event,
   Ctx}Synchroni[sz]e``, a synchronous ``cudaMemcpy``/``cudaMemcpy2D``/``cudaMemcpy3D``/
   ``hipMemcpy``/``hipMemcpyWithStream``/``cuMemcpy{D,H}to{D,H}``, a ``*MemcpyAsync`` whose
   copy reads or writes pageable memory or is a D2H
   copy into memory that is not pinned; or inside a CPU op that blocks on the GPU
   (``aten::item``, ``aten::_local_scalar_dense``, ``aten::nonzero``, ``aten::is_nonzero``,
   ``aten::equal``, ``aten::tolist``). Such a blocking CPU op is a blocking call of 2) in
   every respect (it has a refill, 9), but never ``pageable_h2d``.
3. ``allocator`` -- inside ``cudaMalloc``/``cudaFree``/``hipMalloc``/``hipFree`` (and
   their async, host, managed, pitch and array variants, ``cuMemAlloc*``/``cuMemFree*``,
   ``cudaHostAlloc``/``cudaFreeHost``) that is not start-up work (5).
4. ``communication`` -- inside a CPU collective (``gloo:*``, ``c10d::*``, ...).
5. ``startup`` -- one-off start-up work: context or module creation calls (``cuInit``,
   ``cuCtxCreate``, ``cuModuleLoad*``, ...); any allocator call that starts before the
   trace's first GPU event (CUDA and HIP create the context lazily, inside the first
   call, often a ``cudaFree``); any other runtime call longer than
   :data:`SLOW_LAUNCH_MIN_US` that starts before the trace's first GPU event and is not a
   blocking call (a launch call may be one); *lazy initialisation in an op's first call*,
   only in a trace that records the process's GPU start-up (it has a start-up runtime call
   by name, or a runtime call longer than :data:`SLOW_LAUNCH_MIN_US` that is not a
   blocking call, starting before the trace's first GPU event; a trace that begins in
   steady state sees no first calls): an allocator call, or a runtime call longer than
   :data:`SLOW_LAUNCH_MIN_US` that is neither a launch call (10) nor a blocking call,
   whose innermost enclosing ``cpu_op`` (below) is the first call of that op's name on
   that (pid, tid) (the earliest ``ts`` among the ``cpu_op`` events of that name and
   thread, the first in trace order on a tie; cuDNN and cuBLAS create handles, streams
   and workspaces there);
   compilation (Dynamo/Inductor/Triton spans); and first launches that load modules: a
   *kernel*-launch call (``cudaLaunchKernel``, ``cuLaunchKernel``, ``hipLaunchKernel``,
   ``hipModuleLaunchKernel``, ...; not a memcpy or memset call) longer than both
   :data:`SLOW_LAUNCH_MIN_US` and :data:`SLOW_LAUNCH_FACTOR` times the trace's median
   kernel-launch call.
6. ``dataloader`` -- inside ``enumerate(DataLoader)#...__next__``.
7. ``zero_grad`` -- inside ``Optimizer.zero_grad#...`` (its per-parameter fill kernels).
8. ``optimizer_step`` -- inside ``Optimizer.step#...`` (a single-tensor optimizer launches
   its kernels parameter by parameter there).
9. The *refill* after a blocking call of 1) or 2), owned by the same cause (``pageable_h2d``
   after a pageable H2D copy, else ``blocking_sync``). The queue the call drained is
   empty, and the GPU waits for the CPU to launch again. When no GPU event of this device
   is launched after the call ends, there is no refill (the program stopped issuing work;
   the trailing idle is not the call's). The refill runs from the call's
   end to the first of: the next launch of a GPU event of this device (the start of its
   launch call, any thread); the start of the next *other work* on the blocking call's own
   thread that starts at or after the call's end; the end of recorded activity (below). Other work is a
   CPU op, annotation or Python function (any category, but ``ProfilerStep#N``) that
   contains no launch call of its thread (a launch call ``[ts, end)`` is contained when
   ``op.ts <= call.ts`` and ``call.ts <= op.end``), or a runtime call that is neither a
   launch call (10) nor a stream-wait nor an event-record call. From there the idle
   belongs to that work.
10. ``launch_overhead`` -- inside a launch call (a kernel-launch, memcpy or memset runtime
    call), or inside a ``cpu_op`` that contains one on its thread (dispatcher, framework
    and Python-binding time spent issuing GPU work). Record-function annotations
    (``Optimizer.step#...``, ``enumerate(DataLoader)#...``) are not ops, whatever their
    category: old traces file them as ``Operator``, so they are told by the ``#`` in
    their name.
11. ``other_cpu`` -- inside any other CPU op, annotation, Python function or runtime call.
    ``ProfilerStep#N`` spans do not count: they cover the whole step and are no activity.
12. ``untraced`` -- nothing of the launching threads covers the instant (but a
    ``ProfilerStep#N`` span).

The launching threads of a device are the (pid, tid) pairs whose runtime calls launched
its work; a trace whose work cannot be linked to runtime calls uses every thread.
Every span above is half-open, ``[start, end)`` in µs, and is clipped to the step window.

Terms used above:

* A *launch call* is a runtime call whose name is a kernel launch, memcpy or memset call
  (:data:`LAUNCH_CALL_PATTERNS`, by name, whether or not a GPU event links to it); a
  *kernel-launch call* is one of the first pattern only.
* An op *contains* a runtime call when both are on the same (pid, tid) and
  ``op.ts <= call.ts <= op.end`` (closed at both ends, unlike the spans painted); a
  call's *innermost enclosing* ``cpu_op`` is the containing ``cpu_op`` with the latest
  ``ts`` (on a tie, the shortest). "Starts inside" an op means the same test.
* Names of compilation spans (:data:`STARTUP_OPS`) are matched on every event of the ops
  frame (``cpu_op``, ``user_annotation``, ``python_function``). An allocator call inside a
  compilation span stays ``allocator`` (3 comes first) unless 5 makes the call itself
  start-up.
* The launch patterns are wide on purpose: ``cudaLaunchHostFunc`` counts as a launch call,
  and the synchronous ``*Memcpy`` calls are launch calls too (blocking as 2 says).
* The refill of 9 runs at most to the end of the last step window, complete or not, or
  to the trace's ``Record Window End`` instant when that comes first (the end of recorded
  activity); it may cross into the next window, and each window counts its own part. Where the refills of a ``pageable_h2d``
  call and of another blocking call overlap, ``pageable_h2d`` owns the overlap.
* The recorded waiting stream of a stream-wait call is read per call: a call with a
  ``Stream Wait Event`` sync event of its own correlation id uses it; another call of the
  same trace without one is inferred.
"""

from __future__ import annotations

import re

import numpy as np
import pandas as pd

from tracedoc.signals.arrays import join_chunks, sorted_unique
from tracedoc.signals.base import SignalContext, SignalUnavailable, signal
from tracedoc.signals.intervals import _union, merge, paint, per_window, window_groups
from tracedoc.signals.optimizer import optimizer_step_mask, zero_grad_mask
from tracedoc.signals.steps import (
    comm_op_rows,
    complete_mask,
    dataloader_mask,
    gpu_events,
    launch_of,
    profiler_step_mask,
    rows_of,
    step_windows,
)
from tracedoc.signals.strings import cached_name_mask, frame_threads, on_threads, texts

#: Launch calls by name (the runtime-call classes of :mod:`tracedoc.load.categories`): a
#: kernel launch (first pattern), a memcpy or a memset call.
LAUNCH_CALL_PATTERNS = (
    r"^(cuda|hip)(LaunchKernel|LaunchKernelExC|LaunchCooperativeKernel|ExtLaunchKernel|ExtModuleLaunchKernel|"
    r"ModuleLaunchKernel|GraphLaunch)|^cu(LaunchKernel|LaunchKernelEx|LaunchCooperativeKernel|GraphLaunch)|"
    r"^hipLaunch|^cudaLaunch",
    r"^(cuda|hip|cu)Memcpy",
    r"^(cuda|hip|cu)Memset",
)

#: Host-wait causes, in the order the ledger reports them.
HOST_WAIT_CAUSES = (
    "dataloader",
    "blocking_sync",
    "pageable_h2d",
    "allocator",
    "communication",
    "startup",
    "zero_grad",
    "optimizer_step",
    "launch_overhead",
    "other_cpu",
    "untraced",
)
#: Causes of idle time with work queued on the device (never charged to the host).
QUEUED_CAUSES = ("kernel_wait", "dependency_wait", "other_idle")
#: Every key of a device's ledger; the values add up to the device's idle time.
LEDGER_KEYS = (*HOST_WAIT_CAUSES, *QUEUED_CAUSES)

#: HTA's ``consecutive_kernel_delay`` default (get_idle_time_breakdown): queued gaps shorter than
#: this are the overhead of launching back-to-back kernels.
KERNEL_WAIT_MAX_US = 30.0
#: A launch call is start-up work (module load, JIT) when it is longer than both this and
#: SLOW_LAUNCH_FACTOR x the median launch call. A steady-state cudaLaunchKernel takes 2-10 µs
#: (NVIDIA's launch-latency figures in the CUDA Graphs documentation); 1 ms is two orders more.
SLOW_LAUNCH_MIN_US = 1000.0
SLOW_LAUNCH_FACTOR = 50.0

_BLOCKING_SYNC = re.compile(r"^(cuda|hip|cu)(Stream|Device|Event|Ctx)Synchroni[sz]e")
_STREAM_WAIT = re.compile(r"^(cuda|hip|cu)StreamWaitEvent")
_EVENT_RECORD = re.compile(r"^(cuda|hip|cu)EventRecord")
_SYNC_MEMCPY = re.compile(r"^(cudaMemcpy|cudaMemcpy2D|cudaMemcpy3D|hipMemcpy|hipMemcpyWithStream|cuMemcpy[DH]to[DH])$")
_ALLOCATOR = re.compile(
    r"^(cuda|hip)(Malloc|Free)(Async|Host|Managed|Pitch|Array)?$|^cu(MemAlloc|MemFree)|^(cuda|hip)(HostAlloc|FreeHost)$"
)
_STARTUP_RUNTIME = re.compile(
    r"^(cuInit|hipInit|cuCtxCreate|cuDevicePrimaryCtxRetain|hipDevicePrimaryCtxRetain|cuModuleLoad\w*|"
    r"hipModuleLoad\w*|cudaGetDeviceCount|hipGetDeviceCount|cuLibraryLoad\w*)$"
)
#: CPU ops that block until the GPU has produced a value (a device-to-host sync).
BLOCKING_OPS = re.compile(r"^aten::(item|_local_scalar_dense|nonzero|is_nonzero|equal|tolist)$")
#: Compilation spans (TorchDynamo / Inductor / Triton), matched anywhere in op or Python-function names.
STARTUP_OPS = re.compile(
    r"(_compile\.compile_inner|compile_fx|OutputGraph\.call_user_compiler|inductor_codecache|"
    r"async_compile|triton\.compiler|/triton/compiler/|TorchDynamo Cache Lookup.*compile|"
    r"torch/_dynamo/convert_frame|torch/_inductor/compile_fx|CachingAutotuner\.benchmark_all_configs)"
)


def _runtime_classes(ctx: SignalContext) -> pd.DataFrame:
    """Per runtime call (bools): blocking, pageable_h2d (a blocking H2D copy from pageable
    memory, also ``blocking``), allocator (not start-up), startup, launch (a kernel-launch
    call), issues_gpu (a kernel launch, memcpy or memset call: a *launch call* of the
    ledger), stream_wait, event_record (see the module docstring)."""

    def build() -> pd.DataFrame:
        rt = ctx.trace.runtime
        blocking = cached_name_mask(
            ctx, "runtime", "blocking", lambda n: bool(_BLOCKING_SYNC.match(n) or _SYNC_MEMCPY.match(n))
        ).copy()  # a copy: the blocking async copies are added below
        pageable_h2d = np.zeros(len(rt), dtype=bool)
        # an async copy blocks the CPU when one side is pageable host memory, or when it is D2H
        # into memory that is not pinned (Kineto names the memory kinds of each copy)
        g = gpu_events(ctx)
        copies = g[(g["kind"] == "memcpy").to_numpy() & (g["rt_pos"].to_numpy() >= 0)]
        if len(copies):
            mc = ctx.trace.memcpys
            pageable = mc["src_memory"].eq("Pageable") | mc["dst_memory"].eq("Pageable")
            d2h_unpinned = mc["copy_kind"].eq("DtoH") & ~mc["dst_memory"].eq("Pinned")
            by_corr = pd.Series((pageable | d2h_unpinned).to_numpy(), index=mc["correlation"].to_numpy())
            by_corr = by_corr[~by_corr.index.isna()].groupby(level=0).any()
            flag = by_corr.reindex(copies["correlation"].to_numpy()).fillna(False).to_numpy(dtype=bool)
            blocking[copies["rt_pos"].to_numpy()[flag]] = True
            pg = pd.Series(
                ~mc["src_memory"].eq("Pinned").to_numpy() & mc["copy_kind"].eq("HtoD").to_numpy(),
                index=mc["correlation"].to_numpy(),
            )
            pg = pg[~pg.index.isna()].groupby(level=0).any()
            pflag = pg.reindex(copies["correlation"].to_numpy()).fillna(False).to_numpy(dtype=bool)
            pageable_h2d[copies["rt_pos"].to_numpy()[pflag]] = True
            pageable_h2d &= blocking  # a non-blocking copy from unpinned memory is no call to remove
            pageable_h2d |= blocking & _in_op_of(ctx, pageable_h2d)  # the copy's own stream sync
        allocator = cached_name_mask(ctx, "runtime", "allocator", lambda n: bool(_ALLOCATOR.match(n))).copy()
        launch = (rt["kind"] == "launch").to_numpy()
        issues_gpu = rt["kind"].isin(("launch", "memcpy", "memset")).to_numpy()
        startup = cached_name_mask(ctx, "runtime", "startup", lambda n: bool(_STARTUP_RUNTIME.match(n))).copy()
        dur = rt["dur_us"].to_numpy()
        if launch.any():
            med = float(np.median(dur[launch]))
            startup |= launch & (dur > max(SLOW_LAUNCH_MIN_US, SLOW_LAUNCH_FACTOR * med))
        process_start = False
        if len(g):
            # CUDA and HIP create the context lazily, inside whichever runtime call comes first:
            # a slow call before any GPU work has started is that initialisation
            first_gpu = float(g["ts_us"].min())
            early = rt["ts_us"].to_numpy() < first_gpu
            slow_early = early & (dur > SLOW_LAUNCH_MIN_US) & ~blocking
            process_start = bool((slow_early | (early & startup)).any())
            startup |= slow_early
            startup |= early & allocator  # the first cudaFree/cudaMalloc creates the context
        if process_start:
            # lazy initialisation inside the first call of an op (cuDNN/cuBLAS handles, workspaces)
            slow_other = (dur > SLOW_LAUNCH_MIN_US) & ~issues_gpu & ~blocking
            startup |= _in_first_call(ctx, (allocator | slow_other) & ~startup)
        allocator &= ~startup
        return pd.DataFrame(
            {
                "blocking": blocking,
                "pageable_h2d": pageable_h2d,
                "allocator": allocator,
                "startup": startup,
                "launch": launch,
                "issues_gpu": issues_gpu,
                "stream_wait": cached_name_mask(ctx, "runtime", "stream_wait", lambda n: bool(_STREAM_WAIT.match(n))),
                "event_record": cached_name_mask(
                    ctx, "runtime", "event_record", lambda n: bool(_EVENT_RECORD.match(n))
                ),
            },
            index=rt.index,
        )

    return ctx.cached("ledger_runtime_classes", build)


def _in_op_of(ctx: SignalContext, calls: np.ndarray) -> np.ndarray:
    """Mask over ``trace.runtime``: the call starts inside (``op.ts <= call.ts <= op.end``, same
    pid/tid) the innermost enclosing ``cpu_op`` of one of ``calls``
    (:func:`tracedoc.signals.attribution.runtime_ops`). ``calls`` are few (the blocking
    pageable copies)."""
    from tracedoc.signals.attribution import runtime_ops

    out = np.zeros(len(calls), dtype=bool)
    op_pos = runtime_ops(ctx)["op_pos"].to_numpy()
    ops, rt = ctx.trace.ops, ctx.trace.runtime
    rt_codes, _ = frame_threads(ctx, "runtime")
    o_ts, o_end = ops["ts_us"].to_numpy(dtype=float), ops["end_us"].to_numpy(dtype=float)
    r_ts = rt["ts_us"].to_numpy(dtype=float)
    for i in np.flatnonzero(calls & (op_pos >= 0)).tolist():
        j = op_pos[i]
        out |= (rt_codes == rt_codes[i]) & (r_ts >= o_ts[j]) & (r_ts <= o_end[j])
    return out


def _in_first_call(ctx: SignalContext, candidates: np.ndarray) -> np.ndarray:
    """Mask over ``trace.runtime``: a ``candidates`` call whose innermost enclosing ``cpu_op``
    (:func:`tracedoc.signals.attribution.runtime_ops`) is the first call of that op's name on
    its pid/tid (the earliest ``ts``; the first in trace order on a tie)."""
    from tracedoc.signals.attribution import runtime_ops

    ops = ctx.trace.ops
    if not len(ops):
        return np.zeros(len(candidates), dtype=bool)
    op_pos = runtime_ops(ctx)["op_pos"].to_numpy()
    cpu = np.flatnonzero((ops["cat"] == "cpu_op").to_numpy())
    first = np.zeros(len(ops), dtype=bool)
    if cpu.size:
        op_codes, _ = frame_threads(ctx, "ops")
        keys = pd.DataFrame(
            {"thread": op_codes[cpu], "name": ops["name"].to_numpy(dtype=object)[cpu]},
            index=cpu,
        )
        order = np.argsort(ops["ts_us"].to_numpy(dtype=float)[cpu], kind="stable")
        first[keys.iloc[order].drop_duplicates().index.to_numpy()] = True
    return candidates & (op_pos >= 0) & first[np.maximum(op_pos, 0)]


def _contains_launch(ctx: SignalContext) -> np.ndarray:
    """Mask over ``trace.ops`` (any category): the span contains a launch call (kernel launch,
    memcpy or memset runtime call) of its own thread."""

    def build() -> np.ndarray:
        ops, rt = ctx.trace.ops, ctx.trace.runtime
        out = np.zeros(len(ops), dtype=bool)
        is_launch = _runtime_classes(ctx)["issues_gpu"].to_numpy()
        if not is_launch.any() or not len(ops):
            return out
        rt_codes, rt_labels = frame_threads(ctx, "runtime")
        op_codes, op_labels = frame_threads(ctx, "ops")
        op_code_of = {lab: i for i, lab in enumerate(op_labels)}
        ts_all = rt["ts_us"].to_numpy()
        o_ts, o_end = ops["ts_us"].to_numpy(), ops["end_us"].to_numpy()
        for rc in sorted_unique(rt_codes[is_launch]):
            oc = op_code_of.get(rt_labels[rc])
            if oc is None:
                continue
            lts = np.sort(ts_all[is_launch & (rt_codes == rc)])
            sel = np.flatnonzero(op_codes == oc)
            a = np.searchsorted(lts, o_ts[sel], side="left")
            b = np.searchsorted(lts, o_end[sel], side="right")
            out[sel] = b > a
        return out

    return ctx.cached("ledger_contains_launch", build)


def _launching_ops(ctx: SignalContext) -> np.ndarray:
    """Mask over ``trace.ops``: a ``cpu_op`` (not a ProfilerStep) that contains a launch call on its thread."""

    def build() -> np.ndarray:
        # record_function annotations (ProfilerStep#, Optimizer.step#, enumerate(DataLoader)#...) are
        # no ops: old traces file them as `Operator`, i.e. cpu_op, so they are told by the `#`
        candidate = (ctx.trace.ops["cat"] == "cpu_op").to_numpy() & ~cached_name_mask(
            ctx, "ops", "annotation", lambda n: "#" in n
        )
        return candidate & _contains_launch(ctx)

    return ctx.cached("ledger_launching_ops", build)


_WAIT_COLUMNS = (
    "rt_pos",
    "ts_us",
    "end_us",
    "thread",
    "device",
    "stream",
    "stream_source",
    "dependent",
    "producer",
    "producer_source",
)


def dependency_waits(ctx: SignalContext) -> pd.DataFrame:
    """One row per stream-wait call of the trace (module docstring, step 1).

    Columns: rt_pos (row position in ``trace.runtime``), ts_us, end_us, thread
    (``"pid/tid"``), device and stream (the waiting stream, -1 when unknown),
    stream_source (``"recorded"``: a ``Stream Wait Event`` sync event with the same
    correlation; ``"inferred"``: the next GPU event launched by the same thread;
    ``"unknown"``), dependent (row position in :func:`~tracedoc.signals.steps.gpu_events`
    of the dependent event, -1 when none), producer (row position in ``trace.runtime`` of
    the producer's event-record call; -1 when it is not in the trace: outside the window),
    producer_source (``"recorded"``: the wait's ``Stream Wait Event`` sync event carries
    ``wait_on_cuda_event_record_corr_id``, and the producer is the runtime call with that
    correlation id; ``"inferred"``: the last event-record call of any thread that starts
    before the wait).
    """

    def build() -> pd.DataFrame:
        rt = ctx.trace.runtime
        cls = _runtime_classes(ctx)
        pos = np.flatnonzero(cls["stream_wait"].to_numpy())
        n = pos.size
        if not n:
            text = ("thread", "stream_source", "producer_source")
            return pd.DataFrame({c: pd.Series(dtype=object if c in text else float) for c in _WAIT_COLUMNS})
        rt_codes, rt_labels = frame_threads(ctx, "runtime")
        w_ts = rt["ts_us"].to_numpy(dtype=float)[pos]
        w_end = rt["end_us"].to_numpy(dtype=float)[pos]
        w_thread = rt_labels[rt_codes[pos]]
        dev = np.full(n, -1, dtype=np.int64)
        stream = np.full(n, -1, dtype=np.int64)
        source = np.full(n, "unknown", dtype=object)
        waited = np.full(n, np.nan)  # the recorded event-record correlation id, where written
        sy = ctx.trace.syncs
        if len(sy):
            swe = sy[(sy["name"] == "Stream Wait Event").to_numpy() & sy["correlation"].notna().to_numpy()]
            swe = swe.drop_duplicates("correlation", keep=False)  # an ambiguous id links nothing
            if len(swe):
                by_corr = pd.DataFrame(
                    {
                        "device": swe["device"].to_numpy(),
                        "stream": swe["stream"].to_numpy(),
                        "waited": swe["wait_event_corr"].to_numpy(dtype=float),
                    }
                )
                by_corr.index = swe["correlation"].to_numpy()
                hit = by_corr.reindex(rt["correlation"].to_numpy()[pos])
                ok = hit["device"].notna().to_numpy()
                dev[ok] = hit["device"].to_numpy()[ok].astype(np.int64)
                stream[ok] = hit["stream"].to_numpy()[ok].astype(np.int64)
                source[ok] = "recorded"
                waited = hit["waited"].to_numpy(dtype=float)
        g = gpu_events(ctx)
        g_lts = launch_of(ctx, g, "ts_us")
        g_thread = launch_of(ctx, g, "thread")
        g_dev, g_stream = g["device"].to_numpy(), g["stream"].to_numpy()
        todo = source == "unknown"
        for th in pd.unique(w_thread[todo]):
            rows = np.flatnonzero((g_thread == th) & ~np.isnan(g_lts))
            if not rows.size:
                continue
            rows = rows[np.argsort(g_lts[rows], kind="stable")]
            sel = np.flatnonzero(todo & (w_thread == th))
            k = np.searchsorted(g_lts[rows], w_end[sel], side="left")
            found = k < rows.size
            nxt = rows[np.minimum(k, rows.size - 1)]
            dev[sel[found]] = g_dev[nxt[found]]
            stream[sel[found]] = g_stream[nxt[found]]
            source[sel[found]] = "inferred"
        dependent = np.full(n, -1, dtype=np.int64)
        known = stream >= 0
        if known.any() and len(g):
            for d, st in {(int(a), int(b)) for a, b in zip(dev[known], stream[known], strict=True)}:
                rows = np.flatnonzero((g_dev == d) & (g_stream == st) & ~np.isnan(g_lts))
                if not rows.size:
                    continue
                rows = rows[np.argsort(g_lts[rows], kind="stable")]
                sel = np.flatnonzero(known & (dev == d) & (stream == st))
                k = np.searchsorted(g_lts[rows], w_ts[sel], side="left")
                found = k < rows.size
                dependent[sel[found]] = rows[np.minimum(k, rows.size - 1)][found]
        rec = np.flatnonzero(cls["event_record"].to_numpy())
        producer = np.full(n, -1, dtype=np.int64)
        if rec.size:
            rec_ts = rt["ts_us"].to_numpy(dtype=float)[rec]
            order = np.argsort(rec_ts, kind="stable")
            k = np.searchsorted(rec_ts[order], w_ts, side="left") - 1
            producer = np.where(k >= 0, rec[order][np.maximum(k, 0)], -1)
        producer_source = np.full(n, "inferred", dtype=object)
        known = ~np.isnan(waited)
        if known.any():  # the trace says which record: that call, or none in the window
            rec_corr = pd.Series(rec, index=rt["correlation"].to_numpy()[rec]) if rec.size else pd.Series(dtype=float)
            rec_corr = rec_corr[~rec_corr.index.duplicated(keep="first")]
            found = rec_corr.reindex(waited[known]).to_numpy()
            producer[known] = np.where(np.isnan(found.astype(float)), -1, found).astype(np.int64)
            producer_source[known] = "recorded"
        return pd.DataFrame(
            {
                "rt_pos": pos,
                "ts_us": w_ts,
                "end_us": w_end,
                "thread": texts(w_thread),
                "device": dev,
                "stream": stream,
                "stream_source": texts(source),
                "dependent": dependent,
                "producer": producer,
                "producer_source": texts(producer_source),
            }
        )

    return ctx.cached("ledger_dependency_waits", build)


def _spans(df: pd.DataFrame, mask: np.ndarray | None = None) -> tuple[np.ndarray, np.ndarray]:
    # the two columns only: filtering the whole frame would copy its string columns too; views
    # where the mask keeps one run of rows (rows_of)
    s, e = df["ts_us"].to_numpy(dtype=float), df["end_us"].to_numpy(dtype=float)
    return (s, e) if mask is None else (rows_of(s, mask), rows_of(e, mask))


def _refill_spans(
    ctx: SignalContext, block_end: np.ndarray, block_thread: np.ndarray, launch_ts: np.ndarray, hi: float
) -> tuple[np.ndarray, np.ndarray]:
    """The refill after each blocking call (module docstring, cause 9): from ``block_end`` to
    the first of the device's next launch (``launch_ts``, any thread), the start of the next
    CPU event on the call's own thread (``block_thread``, ``"pid/tid"``) that contains no
    launch call and is no ``ProfilerStep#N``, and ``hi``. Arrays of µs, one per call."""
    if not block_end.size:
        return block_end, block_end
    lts = np.sort(launch_ts[~np.isnan(launch_ts)])
    if lts.size:
        k = np.searchsorted(lts, block_end, side="left")
        # no later launch: the GPU's work is over, nothing is refilled (the trailing idle of a
        # program that stopped launching is not the blocking call's)
        end = np.where(k < lts.size, lts[np.minimum(k, lts.size - 1)], block_end)
    else:
        end = block_end.copy()
    cls = _runtime_classes(ctx)
    # other work: CPU events that launch nothing; a stream wait or event record is part of
    # issuing GPU work, as a launch is
    other_rt = ~(cls["issues_gpu"] | cls["stream_wait"] | cls["event_record"]).to_numpy()
    other_ops = ~_contains_launch(ctx) & ~profiler_step_mask(ctx)
    for frame, other in (("ops", other_ops), ("runtime", other_rt)):
        df = getattr(ctx.trace, frame)
        if not len(df):
            continue
        codes, labels = frame_threads(ctx, frame)
        code_of = {lab: i for i, lab in enumerate(labels)}
        ts = df["ts_us"].to_numpy(dtype=float)
        for th in pd.unique(block_thread):
            c = code_of.get(th)
            if c is None:
                continue
            starts = np.sort(ts[other & (codes == c)])
            if not starts.size:
                continue
            sel = np.flatnonzero(block_thread == th)
            k = np.searchsorted(starts, block_end[sel], side="left")
            cut = np.where(k < starts.size, starts[np.minimum(k, starts.size - 1)], np.inf)
            end[sel] = np.minimum(end[sel], cut)
    return block_end, np.maximum(np.minimum(end, hi), block_end)


def _thread_labels(ctx: SignalContext, frame: str, mask: np.ndarray) -> np.ndarray:
    """``"pid/tid"`` of the rows of ``trace.<frame>`` selected by ``mask``."""
    codes, labels = frame_threads(ctx, frame)
    return labels[codes[mask]] if len(codes) else np.array([], dtype=object)


def launching_threads(ctx: SignalContext, device: int | None) -> set[str] | None:
    """The launching threads of ``device`` (every device when None): the ``"pid/tid"`` of
    every runtime call that launched one of its GPU events; None when none of that work is
    linked to a call (then every thread counts)."""
    g = gpu_events(ctx)
    pos = g["rt_pos"].to_numpy()
    keep = pos >= 0
    if device is not None:
        keep &= (g["device"] == device).to_numpy()
    if not keep.any():
        return None
    codes, labels = frame_threads(ctx, "runtime")
    return set(labels[sorted_unique(codes[pos[keep]])].tolist())


def device_ledger_us(ctx: SignalContext, device: int) -> np.ndarray:
    """The ledger of one device: array ``(n_windows, len(LEDGER_KEYS) + 1)`` in µs per step window.

    Columns follow :data:`LEDGER_KEYS` and add up to the window's idle time (window length
    minus busy time); the last column is the device's busy time.

    Raises:
        SignalUnavailable: the device has no GPU activity in the trace.
    """
    grid, labels = _device_paint(ctx, device)
    w = step_windows(ctx)
    return per_window(grid, labels, len(LEDGER_KEYS) + 1, w["start_us"].to_numpy(), w["end_us"].to_numpy())


def paint_key(key: str) -> bool:
    """Whether ``key`` is a cached intermediate of a device's ledger paint
    (:func:`_device_paint`): for :meth:`~tracedoc.signals.base.SignalContext.release`, which the
    engine calls once the window checks have read the primary device's ledger
    (:func:`tracedoc.engine.analyze_trace`)."""
    return key.startswith("ledger_paint_")


def _device_paint(ctx: SignalContext, device: int) -> tuple[np.ndarray, np.ndarray]:
    """The ledger of one device as painted segments: ``(grid, labels)``, the sorted segment
    boundaries (µs) and each segment's owner (a column of :func:`device_ledger_us`). Only the
    segments inside the step windows are the ledger's: the time between two windows may be one
    segment owned by ``untraced`` whatever ran then (the paint goes a group of windows at a time).

    Raises:
        SignalUnavailable: the device has no GPU activity in the trace.
    """

    def build() -> tuple[np.ndarray, np.ndarray]:
        t = ctx.trace
        g_all = gpu_events(ctx)
        on_dev = (g_all["device"] == device).to_numpy()
        g = g_all[on_dev]
        if not len(g):
            raise SignalUnavailable(f"device {device} has no GPU activity in the trace")
        w = step_windows(ctx)
        ws, we = w["start_us"].to_numpy(), w["end_us"].to_numpy()
        lo, hi = float(ws.min()), float(we.max())
        gs, ge = g["ts_us"].to_numpy(dtype=float), g["end_us"].to_numpy(dtype=float)
        lts = launch_of(ctx, g, "ts_us")
        lte = launch_of(ctx, g, "end_us")

        threads = launching_threads(ctx, device)
        rt, ops = t.runtime, t.ops
        rt_on = on_threads(ctx, "runtime", threads)
        ops_on = on_threads(ctx, "ops", threads)
        cls = _runtime_classes(ctx)

        # work is queued once its launch call has returned (a slow first launch that loads a
        # module has not queued anything yet), until it starts
        q = ~np.isnan(lte) & (lte < gs)
        dep = np.zeros(len(g_all), dtype=bool)
        waits = dependency_waits(ctx)
        if len(waits):
            d = waits["dependent"].to_numpy()
            dep[d[d >= 0]] = True
        qd = q & dep[on_dev]
        pageable = rt_on & cls["pageable_h2d"].to_numpy()
        blocking_rt = rt_on & cls["blocking"].to_numpy() & ~pageable
        blocking_ops = ops_on & cached_name_mask(ctx, "ops", "blocking", lambda n: bool(BLOCKING_OPS.match(n)))
        page_s, page_e = _spans(rt, pageable)
        (rt_bs, rt_be), (op_bs, op_be) = _spans(rt, blocking_rt), _spans(ops, blocking_ops)
        bs, be = np.concatenate([rt_bs, op_bs]), np.concatenate([rt_be, op_be])
        del rt_bs, rt_be, op_bs, op_be
        b_thread = np.concatenate(
            [_thread_labels(ctx, "runtime", blocking_rt), _thread_labels(ctx, "ops", blocking_ops)]
        )
        startup_ops = ops_on & cached_name_mask(ctx, "ops", "startup", lambda n: bool(STARTUP_OPS.search(n)))
        launching = ops_on & _launching_ops(ctx)
        issues_gpu = cls["issues_gpu"].to_numpy()
        # the ops of layer 16 and the calls of layer 17 less those a layer above holds whole (the
        # launching ops of layer 15, the launch calls of layer 14): a layer owns a point only where
        # none above it covers it, so the owners are the same, without a copy of most of the
        # trace's ops and calls in the paint (42 MiB on 4 M small events, issue 24)
        other_cpu = ops_on & ~profiler_step_mask(ctx) & ~launching
        rwe = t.record_window_end_us
        refill_hi = hi if rwe is None else min(hi, float(rwe))

        # layer order = ownership priority (see the module docstring)
        layers = [
            (gs, ge),  # 0 busy
            (lte[qd], gs[qd]),  # 1 a dependent event queued -> kernel_wait / dependency_wait
            (lte[q], gs[q]),  # 2 work queued -> kernel_wait / other_idle
            (page_s, page_e),  # 3 blocking pageable H2D copy
            (bs, be),  # 4 other blocking calls
            _spans(rt, rt_on & cls["allocator"].to_numpy()),  # 5
            _spans(ops, ops_on & comm_op_rows(ctx)),  # 6 communication
            _spans(rt, rt_on & cls["startup"].to_numpy()),  # 7 startup runtime calls
            _spans(ops, startup_ops),  # 8 compilation spans
            _spans(ops, ops_on & dataloader_mask(ctx)),  # 9
            _spans(ops, ops_on & zero_grad_mask(ctx)),  # 10
            _spans(ops, ops_on & optimizer_step_mask(ctx)),  # 11
            _refill_spans(ctx, page_e, _thread_labels(ctx, "runtime", pageable), lts, refill_hi),  # 12 (pageable)
            _refill_spans(ctx, be, b_thread, lts, refill_hi),  # 13 refill (other blocking calls)
            _spans(rt, rt_on & issues_gpu),  # 14 launch calls (kernels, copies, memsets)
            _spans(ops, launching),  # 15 ops that launch GPU work
            _spans(ops, other_cpu),  # 16
            _spans(rt, rt_on & ~issues_gpu),  # 17 any other runtime call: CPU busy in the driver
        ]
        key = {k: i for i, k in enumerate(LEDGER_KEYS)}
        busy_col = len(LEDGER_KEYS)
        to_key = np.array(
            [
                busy_col,
                -2,  # dependent work queued: resolved below by gap length
                -1,  # work queued: resolved below by gap length
                key["pageable_h2d"],
                key["blocking_sync"],
                key["allocator"],
                key["communication"],
                key["startup"],
                key["startup"],
                key["dataloader"],
                key["zero_grad"],
                key["optimizer_step"],
                key["pageable_h2d"],
                key["blocking_sync"],
                key["launch_overhead"],
                key["launch_overhead"],
                key["other_cpu"],
                key["other_cpu"],
                key["untraced"],
            ]
        )
        to_key = to_key.astype(np.int8)
        # the idle gaps (holes in the busy union) that hold queued segments; sentinels: an empty
        # busy union (zero-length events) leaves one gap, the whole span
        bs_, be_ = merge(gs, ge)
        be_ = np.concatenate([[lo], be_])
        bs_ = np.concatenate([bs_, [hi]])

        def owners(grid: np.ndarray, assigned: np.ndarray) -> np.ndarray:
            labels = to_key[assigned]
            # queued segments only: one (m,) temporary per step over every segment held m
            # floats at a time (issue 24)
            queued = np.flatnonzero(labels < 0)
            if queued.size:
                mid = (grid[queued] + grid[queued + 1]) / 2
                k = np.searchsorted(be_, mid, side="right") - 1  # the last block end at or before mid
                gap_start = be_[np.maximum(k, 0)]
                gap_end = bs_[np.minimum(k, bs_.size - 1)]
                short = (gap_end - gap_start) < KERNEL_WAIT_MAX_US
                long_owner = np.where(labels[queued] == -2, key["dependency_wait"], key["other_idle"])
                labels[queued] = np.where(short, key["kernel_wait"], long_owner)
            return labels

        unions = [_union(a, b) for a, b in layers]
        del layers
        if not all(flag for _, _, flag in unions):  # a NaN bound: the one whole paint
            grid, assigned = paint([(a, b) for a, b, _ in unions], lo, hi, [ws, we])
            return _merge_same_owner(grid, owners(grid, assigned), np.concatenate([ws, we]))
        # painted a group of windows at a time, each group's owners merged as they come: the
        # whole trace's bounds at once were the ledger's peak (59 MiB over what the analysis held,
        # 1 M small events; issue 24). Inside the windows the segments and owners are the whole
        # paint's (tracedoc.signals.intervals.window_groups); the time between two groups, outside
        # every window, is one segment owned by nothing (untraced), which no reader of the
        # ledger counts (device_ledger_us and idle_segments read the windows only).
        grids, labels = [], []
        last = None  # the grid's last point so far
        for k0, k1, part in window_groups([(a, b) for a, b, _ in unions], ws, we):
            gw_s, gw_e = ws[k0:k1], we[k0:k1]
            grid, assigned = paint(part, float(gw_s[0]), float(gw_e[-1]), [gw_s, gw_e])
            grid, lab = _merge_same_owner(grid, owners(grid, assigned), np.concatenate([gw_s, gw_e]))
            del assigned, part
            if last is not None and last == grid[0]:
                grid = grid[1:]  # the same point: the groups touch
            elif last is not None:
                labels.append(to_key[-1:])  # the time between them
            grids.append(grid)
            labels.append(lab)
            last = grid[-1] if grid.size else last
        # joined without holding the chunks and their join at once: the paint's peak, 34 MiB
        # over the loop's on 4 M small events (issue 24)
        return join_chunks(grids), join_chunks(labels)

    return ctx.cached(f"ledger_paint_{device}", build)


def _merge_same_owner(grid: np.ndarray, labels: np.ndarray, keep_at: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """``(grid, labels)`` (:func:`tracedoc.signals.intervals.paint`'s form) without the bounds
    between two segments of one owner, except those in ``keep_at`` (the windows' edges, which
    :func:`tracedoc.signals.intervals.per_window` needs as grid points). Each owner's set of
    time is the same. The ledger's paint is held for the whole analysis, and half its bounds
    (back-to-back kernels, a call followed by its op's CPU time) separate two segments of one
    owner: 17 -> 9 MiB on 1 M small events (issue 24). Per window the sums can differ from the
    unmerged grid's in the last bits (one segment is added where two were)."""
    if grid.size < 3:
        return grid, labels
    keep = np.ones(grid.size, dtype=bool)
    keep[1:-1] = labels[1:] != labels[:-1]
    at = np.searchsorted(grid, keep_at)
    ok = at < grid.size
    ok[ok] = grid[at[ok]] == keep_at[ok]
    keep[at[ok]] = True
    if keep.all():
        return grid, labels
    return grid[keep], labels[keep[:-1]]


def idle_segments(ctx: SignalContext, device: int, cause: str) -> tuple[np.ndarray, np.ndarray]:
    """The elementary segments of one device's ledger owned by ``cause`` (a key of
    :data:`LEDGER_KEYS`) inside the complete step windows: sorted ``(starts, ends)`` in µs.

    Raises:
        SignalUnavailable: the device has no GPU activity in the trace.
        KeyError: ``cause`` is not a ledger key.
    """
    col = LEDGER_KEYS.index(cause)
    grid, labels = _device_paint(ctx, device)
    w = step_windows(ctx)
    keep = complete_mask(ctx)
    s, e = grid[:-1], grid[1:]
    mine = labels == col
    ws, we = w["start_us"].to_numpy()[keep], w["end_us"].to_numpy()[keep]
    mid = (s + e) / 2
    k = np.searchsorted(ws, mid, side="right") - 1
    inside = (k >= 0) & (mid < we[np.maximum(k, 0)])
    sel = mine & inside
    return s[sel], e[sel]


def launches_without_gpu_event(ctx: SignalContext) -> tuple[int, int]:
    """``(missing, total)``: launch calls (kernel-launch, memcpy and memset runtime calls) of
    the whole trace, and how many of them no GPU event links to (through
    :func:`tracedoc.signals.links.link_launches`)."""
    issues = _runtime_classes(ctx)["issues_gpu"].to_numpy()
    linked = np.zeros(len(issues), dtype=bool)
    pos = gpu_events(ctx)["rt_pos"].to_numpy()
    linked[pos[pos >= 0].astype(np.int64)] = True
    return int((issues & ~linked).sum()), int(issues.sum())


def ledger_devices(ctx: SignalContext) -> list[int]:
    """Devices with GPU activity, the primary device first.

    Raises:
        SignalUnavailable: the trace has no GPU activity (a CPU-only trace).
    """
    g = gpu_events(ctx)
    if not len(g):
        raise SignalUnavailable("the trace has no GPU activity (a CPU-only trace)")
    devs = sorted(int(d) for d in pd.unique(g["device"]))
    prim = ctx.device.id if ctx.device is not None and ctx.device.id in devs else devs[0]
    return [prim] + [d for d in devs if d != prim]


def device_label(ctx: SignalContext, device: int) -> str:
    """``"cuda:N"`` for NVIDIA devices, ``"hip:N"`` for AMD, ``"gpu:N"`` when the vendor is unknown."""
    by_id = {d.id: d for d in ctx.trace.devices}
    vendors = {d.vendor for d in ctx.trace.devices}
    vendor = by_id[device].vendor if device in by_id else (vendors.pop() if len(vendors) == 1 else None)
    prefix = {"NVIDIA": "cuda", "AMD": "hip"}.get(vendor or "", "gpu")
    return f"{prefix}:{device}"


def ledger_ms_per_step(ctx: SignalContext, device: int) -> dict[str, float]:
    """One device's ledger averaged over complete steps: key -> ms per step, plus ``busy``
    (cached: the report's ledger asks again after the engine has released the paint).

    Keys are :data:`LEDGER_KEYS` (they add up to the idle time) and ``busy``.
    """

    def build() -> dict[str, float]:
        arr = device_ledger_us(ctx, device)
        m = complete_mask(ctx)
        n = max(int(m.sum()), 1)
        sums = arr[m].sum(axis=0) / n / 1000.0
        out = {k: float(sums[i]) for i, k in enumerate(LEDGER_KEYS)}
        out["busy"] = float(sums[len(LEDGER_KEYS)])
        return out

    return dict(ctx.cached(f"ledger_ms_{device}", build))


def primary_ledger(ctx: SignalContext) -> dict[str, float]:
    """:func:`ledger_ms_per_step` of the primary device (cached)."""
    return ctx.cached("primary_ledger", lambda: ledger_ms_per_step(ctx, ledger_devices(ctx)[0]))


def idle_ledger(ctx: SignalContext) -> dict[str, dict[str, float]]:
    """The report's ``idle_ledger``: device label -> {cause: ms per step}, idle causes only.

    Each device's values add up to its idle time per step (step time minus busy time).
    Empty for a trace without GPU activity.
    """
    try:
        devices = ledger_devices(ctx)
    except SignalUnavailable:
        return {}
    out = {}
    for d in devices:
        led = ledger_ms_per_step(ctx, d)
        out[device_label(ctx, d)] = {k: round(led[k], 4) for k in LEDGER_KEYS}
    return out


def _slice(key: str):
    def f(ctx: SignalContext) -> float:
        return primary_ledger(ctx)[key]

    return f


def _register_slices() -> None:
    docs = {
        "dataloader": "the CPU was fetching a batch (DataLoader ``__next__``)",
        "blocking_sync": "nothing was queued and the CPU was blocked in a synchronisation or blocking copy "
        "(pageable host-to-device copies aside), or refilling the queue it drained",
        "pageable_h2d": "nothing was queued and the CPU was staging a host-to-device copy from pageable memory, "
        "or refilling the queue after it",
        "allocator": "the CPU was in cudaMalloc/cudaFree (or the HIP equivalents)",
        "communication": "the CPU was in a collective (gloo, c10d)",
        "startup": "one-off start-up work: context/module creation, compilation, first launches that load modules",
        "zero_grad": "the CPU was in optimizer.zero_grad() launching per-parameter fills",
        "optimizer_step": "the CPU was in optimizer.step() (per-parameter launches of a single-tensor optimizer)",
        "launch_overhead": "the CPU was launching kernels (launch calls, ops that launch GPU work)",
        "other_cpu": "the CPU ran other work (ops that launch nothing, Python)",
        "untraced": "no event of the launching threads covers the time",
        "kernel_wait": "work was queued and the gap was shorter than 30 µs (HTA's kernel wait)",
        "dependency_wait": "work was queued but could not start: its stream waited on an event (a dependency)",
        "other_idle": "work was queued but waited longer, with no stream wait recorded or inferred (HTA's other)",
    }
    for key, what in docs.items():
        f = _slice(key)
        f.__name__ = f"idle_{key}_ms"
        f.__doc__ = (
            f"GPU idle time per step on the primary device while {what}, ms (idle ledger slice "
            f"``{key}``, see tracedoc.signals.ledger)."
        )
        signal("ms")(f)


_register_slices()


@signal("ms")
def gpu_idle_ms(ctx: SignalContext) -> float:
    """GPU idle time per step on the primary device, ms: the sum of its idle-ledger slices."""
    led = primary_ledger(ctx)
    return float(sum(led[k] for k in LEDGER_KEYS))


@signal("ms")
def gpu_busy_ms(ctx: SignalContext) -> float:
    """GPU busy time per step on the primary device (union of kernels, memcpys, memsets), ms."""
    return primary_ledger(ctx)["busy"]


@signal("ms")
def idle_host_wait_ms(ctx: SignalContext) -> float:
    """Host-wait idle per step on the primary device (the ledger's host-wait causes), ms."""
    led = primary_ledger(ctx)
    return float(sum(led[k] for k in HOST_WAIT_CAUSES))


@signal("table", scope="all devices")
def idle_ledger_table(ctx: SignalContext) -> list[dict]:
    """The idle ledger as rows: device, cause, ms per step, share of the device's idle time."""
    rows = []
    for dev, led in idle_ledger(ctx).items():
        total = sum(led.values()) or 1.0
        for cause, ms in led.items():
            if ms > 0:
                rows.append(
                    {"device": dev, "cause": cause, "ms_per_step": round(ms, 3), "idle_share": round(ms / total, 4)}
                )
    return rows
