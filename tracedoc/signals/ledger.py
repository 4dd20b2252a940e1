"""The idle ledger: every idle millisecond of a step, per device, owned by one cause.

For each device and each step window, GPU time is *busy* (the union of its kernels,
memcpys and memsets, any stream) or *idle*. Idle time is cut into elementary segments,
and each segment gets exactly one owner, so the parts always add up to the idle time.

**Step 1: the idle split of Holistic Trace Analysis (HTA).** HTA classifies the gap
before each kernel of a stream: *host-wait* when the kernel's runtime launch started
after the previous kernel ended (the CPU had not enqueued work), *kernel-wait* when the
gap is shorter than ``consecutive_kernel_delay`` (default 30, "the overhead to launch
consecutive kernels"), *other* otherwise (e.g. waiting on an event of another stream).
HTA works per stream and skips the gap before a stream's first kernel. The ledger applies
the same test per device and per instant, so leading and trailing gaps count too:

* an idle instant ``t`` is **host-wait** when no work is queued on the device at ``t``
  (no GPU event whose launch call had returned and that had not started:
  ``launch_end <= t < start``), or when the launching CPU thread
  is inside a *blocking call* at ``t`` (it holds the work back: a pageable copy being
  staged, ``hipMemcpyWithStream``, a synchronisation);
* otherwise work is queued and the GPU waits on something else: **kernel_wait** when the
  idle gap containing ``t`` is shorter than :data:`KERNEL_WAIT_MAX_US` (30 µs), else
  **other_idle**.

**Step 2: host-wait causes.** A host-wait instant is owned by what the CPU threads that
launch this device's work were doing, first match wins:

1. ``blocking_sync`` -- inside a blocking call: ``cuda/hip{Stream,Device,Event,Ctx}
   Synchronize``, a synchronous ``cudaMemcpy``/``hipMemcpy``/``hipMemcpyWithStream``, a
   ``*MemcpyAsync`` whose copy reads or writes pageable memory (the driver stages it and
   returns only when done) or is a D2H copy to unpinned memory, or the CPU ops that block
   on the GPU (``aten::item``, ``aten::_local_scalar_dense``, ``aten::nonzero``, ...).
2. ``allocator`` -- inside ``cudaMalloc``/``cudaFree``/``hipMalloc``/``hipFree`` (and
   their async, host and managed variants).
3. ``communication`` -- inside a CPU collective (``gloo:*``, ``c10d::*``, ...).
4. ``startup`` -- one-off start-up work: context or module creation calls; any other
   non-blocking runtime call longer than :data:`SLOW_LAUNCH_MIN_US` that starts before the
   trace's first GPU work (CUDA and HIP create the context lazily, inside the first call);
   compilation (Dynamo/Inductor/Triton spans); and first launches that load modules: a
   *kernel*-launch call (``cudaLaunchKernel``, ``cuLaunchKernel``, ``hipLaunchKernel``,
   ``hipModuleLaunchKernel``, ...; not a memcpy or memset call) longer than both
   :data:`SLOW_LAUNCH_MIN_US` and :data:`SLOW_LAUNCH_FACTOR` times the trace's median
   kernel-launch call.
5. ``dataloader`` -- inside ``enumerate(DataLoader)#...__next__``.
6. ``zero_grad`` -- inside ``Optimizer.zero_grad#...`` (its per-parameter fill kernels).
6b. ``optimizer_step`` -- inside ``Optimizer.step#...`` (a single-tensor optimizer launches
   its kernels parameter by parameter there).
7. ``blocking_sync`` again for the *refill* after a blocking call: from its end until the
   next launch on the device, the queue it drained is empty and the GPU waits for the CPU
   to catch up; without the blocking call that CPU work would have overlapped GPU work.
8. ``launch_overhead`` -- inside a launch call (a kernel-launch, memcpy or memset runtime
   call), or inside a ``cpu_op`` that contains one on its thread (dispatcher, framework
   and Python-binding time spent issuing GPU work). Record-function annotations
   (``Optimizer.step#...``, ``enumerate(DataLoader)#...``) are not ops, whatever their
   category: old traces file them as ``Operator``, so they are told by the ``#`` in
   their name.
9. ``other_cpu`` -- inside any other CPU op, annotation, Python function or runtime call.
   ``ProfilerStep#N`` spans do not count: they cover the whole step and are no activity.
10. ``untraced`` -- nothing of the launching threads covers the instant (but a
    ``ProfilerStep#N`` span).

The launching threads of a device are the (pid, tid) pairs whose runtime calls launched
its work; a trace whose work cannot be linked to runtime calls uses every thread.
"""

from __future__ import annotations

import re

import numpy as np
import pandas as pd

from tracedoc.signals.base import SignalContext, SignalUnavailable, signal
from tracedoc.signals.intervals import merge, paint, per_window
from tracedoc.signals.optimizer import optimizer_step_mask, zero_grad_mask
from tracedoc.signals.steps import (
    comm_op_rows,
    complete_mask,
    dataloader_mask,
    gpu_events,
    profiler_step_mask,
    step_windows,
)
from tracedoc.signals.strings import cached_name_mask, frame_threads, on_threads

#: Host-wait causes, in the order the ledger reports them.
HOST_WAIT_CAUSES = (
    "dataloader",
    "blocking_sync",
    "allocator",
    "communication",
    "startup",
    "zero_grad",
    "optimizer_step",
    "launch_overhead",
    "other_cpu",
    "untraced",
)
#: Every key of a device's ledger; the values add up to the device's idle time.
LEDGER_KEYS = (*HOST_WAIT_CAUSES, "kernel_wait", "other_idle")

#: HTA's ``consecutive_kernel_delay`` default (get_idle_time_breakdown): queued gaps shorter than
#: this are the overhead of launching back-to-back kernels.
KERNEL_WAIT_MAX_US = 30.0
#: A launch call is start-up work (module load, JIT) when it is longer than both this and
#: SLOW_LAUNCH_FACTOR x the median launch call. A steady-state cudaLaunchKernel takes 2-10 µs
#: (NVIDIA's launch-latency figures in the CUDA Graphs documentation); 1 ms is two orders more.
SLOW_LAUNCH_MIN_US = 1000.0
SLOW_LAUNCH_FACTOR = 50.0

_BLOCKING_SYNC = re.compile(r"^(cuda|hip|cu)(Stream|Device|Event|Ctx)Synchroni[sz]e")
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
    memory), allocator, startup, launch (a kernel-launch call), issues_gpu (a kernel launch,
    memcpy or memset call: a *launch call* of the ledger)."""

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
                pageable.to_numpy() & mc["copy_kind"].eq("HtoD").to_numpy(), index=mc["correlation"].to_numpy()
            )
            pg = pg[~pg.index.isna()].groupby(level=0).any()
            pflag = pg.reindex(copies["correlation"].to_numpy()).fillna(False).to_numpy(dtype=bool)
            pageable_h2d[copies["rt_pos"].to_numpy()[pflag]] = True
        allocator = cached_name_mask(ctx, "runtime", "allocator", lambda n: bool(_ALLOCATOR.match(n)))
        launch = (rt["kind"] == "launch").to_numpy()
        issues_gpu = rt["kind"].isin(("launch", "memcpy", "memset")).to_numpy()
        startup = cached_name_mask(ctx, "runtime", "startup", lambda n: bool(_STARTUP_RUNTIME.match(n))).copy()
        dur = rt["dur_us"].to_numpy()
        if launch.any():
            med = float(np.median(dur[launch]))
            startup |= launch & (dur > max(SLOW_LAUNCH_MIN_US, SLOW_LAUNCH_FACTOR * med))
        if len(g):
            # CUDA and HIP create the context lazily, inside whichever runtime call comes first:
            # a slow call before any GPU work has started is that initialisation
            first_gpu = float(g["ts_us"].min())
            startup |= (rt["ts_us"].to_numpy() < first_gpu) & (dur > SLOW_LAUNCH_MIN_US) & ~blocking
        return pd.DataFrame(
            {
                "blocking": blocking,
                "pageable_h2d": pageable_h2d,
                "allocator": allocator,
                "startup": startup,
                "launch": launch,
                "issues_gpu": issues_gpu,
            },
            index=rt.index,
        )

    return ctx.cached("ledger_runtime_classes", build)


def _launching_ops(ctx: SignalContext) -> np.ndarray:
    """Mask over ``trace.ops``: a ``cpu_op`` (not a ProfilerStep) that contains a launch call on its thread."""

    def build() -> np.ndarray:
        ops, rt = ctx.trace.ops, ctx.trace.runtime
        out = np.zeros(len(ops), dtype=bool)
        cls = _runtime_classes(ctx)
        is_launch = cls["issues_gpu"].to_numpy()
        if not is_launch.any() or not len(ops):
            return out
        # record_function annotations (ProfilerStep#, Optimizer.step#, enumerate(DataLoader)#...) are
        # no ops: old traces file them as `Operator`, i.e. cpu_op, so they are told by the `#`
        candidate = (ops["cat"] == "cpu_op").to_numpy() & ~cached_name_mask(
            ctx, "ops", "annotation", lambda n: "#" in n
        )
        rt_codes, rt_labels = frame_threads(ctx, "runtime")
        op_codes, op_labels = frame_threads(ctx, "ops")
        op_code_of = {lab: i for i, lab in enumerate(op_labels)}
        ts_all = rt["ts_us"].to_numpy()
        o_ts, o_end = ops["ts_us"].to_numpy(), ops["end_us"].to_numpy()
        for rc in np.unique(rt_codes[is_launch]):
            oc = op_code_of.get(rt_labels[rc])
            if oc is None:
                continue
            lts = np.sort(ts_all[is_launch & (rt_codes == rc)])
            sel = np.flatnonzero(candidate & (op_codes == oc))
            if not sel.size:
                continue
            a = np.searchsorted(lts, o_ts[sel], side="left")
            b = np.searchsorted(lts, o_end[sel], side="right")
            out[sel] = b > a
        return out

    return ctx.cached("ledger_launching_ops", build)


def _spans(df: pd.DataFrame, mask: np.ndarray | None = None) -> tuple[np.ndarray, np.ndarray]:
    # the two columns only: filtering the whole frame would copy its string columns too
    s, e = df["ts_us"].to_numpy(dtype=float), df["end_us"].to_numpy(dtype=float)
    return (s, e) if mask is None else (s[mask], e[mask])


def _refill_spans(block_end: np.ndarray, launch_ts: np.ndarray, hi: float) -> tuple[np.ndarray, np.ndarray]:
    """From the end of each blocking call to the first launch of the device at or after it."""
    if not block_end.size:
        return block_end, block_end
    lts = np.sort(launch_ts[~np.isnan(launch_ts)])
    if not lts.size:
        return block_end, np.full_like(block_end, hi)
    k = np.searchsorted(lts, block_end, side="left")
    nxt = np.where(k < lts.size, lts[np.minimum(k, lts.size - 1)], hi)
    return block_end, np.maximum(nxt, block_end)


def device_ledger_us(ctx: SignalContext, device: int) -> np.ndarray:
    """The ledger of one device: array ``(n_windows, len(LEDGER_KEYS) + 2)`` in µs per step window.

    Columns follow :data:`LEDGER_KEYS` and add up to the window's idle time (window length
    minus busy time); then the device's busy time; then the part of ``blocking_sync`` spent
    in blocking H2D copies from pageable memory (a sub-slice, already inside ``blocking_sync``).

    Raises:
        SignalUnavailable: the device has no GPU activity in the trace.
    """

    def build() -> np.ndarray:
        t = ctx.trace
        g = gpu_events(ctx)
        g = g[(g["device"] == device).to_numpy()]
        if not len(g):
            raise SignalUnavailable(f"device {device} has no GPU activity in the trace")
        w = step_windows(ctx)
        ws, we = w["start_us"].to_numpy(), w["end_us"].to_numpy()
        lo, hi = float(ws.min()), float(we.max())
        gs, ge = g["ts_us"].to_numpy(dtype=float), g["end_us"].to_numpy(dtype=float)
        lts = g["launch_ts_us"].to_numpy(dtype=float)
        lte = g["launch_end_us"].to_numpy(dtype=float)

        threads = (
            set(pd.unique(g["launch_thread"].dropna().to_numpy())) or None
        )  # None: unlinked work, every thread counts
        rt, ops = t.runtime, t.ops
        rt_on = on_threads(ctx, "runtime", threads)
        ops_on = on_threads(ctx, "ops", threads)
        cls = _runtime_classes(ctx)

        # work is queued once its launch call has returned (a slow first launch that loads a
        # module has not queued anything yet), until it starts
        q = ~np.isnan(lte) & (lte < gs)
        queued_s, queued_e = lte[q], gs[q]
        blocking_ops = ops_on & cached_name_mask(ctx, "ops", "blocking", lambda n: bool(BLOCKING_OPS.match(n)))
        block = [
            _spans(rt, rt_on & cls["blocking"].to_numpy()),
            _spans(ops, blocking_ops),
        ]
        bs = np.concatenate([b[0] for b in block])
        be = np.concatenate([b[1] for b in block])
        startup_ops = ops_on & cached_name_mask(ctx, "ops", "startup", lambda n: bool(STARTUP_OPS.search(n)))
        launching = ops_on & _launching_ops(ctx)
        other_cpu = ops_on & ~profiler_step_mask(ctx)
        rs, re_ = _refill_spans(be, lts, hi)

        # layer order = ownership priority (see the module docstring)
        layers = [
            (gs, ge),  # 0 busy
            _spans(rt, rt_on & cls["pageable_h2d"].to_numpy()),  # 1 blocking pageable H2D copy (sub-slice)
            (bs, be),  # 1 blocking call in progress -> host-wait even with work queued
            (queued_s, queued_e),  # 2 work queued -> kernel_wait / other_idle
            _spans(rt, rt_on & cls["allocator"].to_numpy()),  # 3
            _spans(ops, ops_on & comm_op_rows(ctx)),  # 4 communication
            _spans(rt, rt_on & cls["startup"].to_numpy()),  # 5 startup runtime calls
            _spans(ops, startup_ops),  # 6 compilation spans
            _spans(ops, ops_on & dataloader_mask(ctx)),  # 7
            _spans(ops, ops_on & zero_grad_mask(ctx)),  # 8
            _spans(ops, ops_on & optimizer_step_mask(ctx)),  # 8b
            (rs, re_),  # 9 refill after a blocking call
            _spans(rt, rt_on & cls["issues_gpu"].to_numpy()),  # 10 launch calls (kernels, copies, memsets)
            _spans(ops, launching),  # 11 ops that launch GPU work
            _spans(ops, other_cpu),  # 12
            _spans(rt, rt_on),  # 13 any other runtime call: CPU busy in the driver
        ]
        grid, assigned = paint(layers, lo, hi, [ws, we])
        key = {k: i for i, k in enumerate(LEDGER_KEYS)}
        busy_col = len(LEDGER_KEYS)
        to_key = np.array(
            [
                busy_col,
                key["blocking_sync"],
                key["blocking_sync"],
                -1,  # queued: resolved below by gap length
                key["allocator"],
                key["communication"],
                key["startup"],
                key["startup"],
                key["dataloader"],
                key["zero_grad"],
                key["optimizer_step"],
                key["blocking_sync"],
                key["launch_overhead"],
                key["launch_overhead"],
                key["other_cpu"],
                key["other_cpu"],
                key["untraced"],
            ]
        )
        labels = to_key[assigned]
        queued = labels == -1
        if queued.any():
            # length of the idle gap (hole in the busy union) that holds each queued segment
            bs_, be_ = merge(gs, ge)
            # sentinels: an empty busy union (zero-length events) leaves one gap, the whole span
            be_ = np.concatenate([[lo], be_])
            bs_ = np.concatenate([bs_, [hi]])
            mid = (grid[:-1] + grid[1:]) / 2
            k = np.searchsorted(be_, mid, side="right") - 1  # the last block end at or before mid
            gap_start = be_[np.maximum(k, 0)]
            gap_end = bs_[np.minimum(k, bs_.size - 1)]
            short = (gap_end - gap_start) < KERNEL_WAIT_MAX_US
            labels = np.where(queued & short, key["kernel_wait"], np.where(queued, key["other_idle"], labels))
        out = per_window(grid, labels, busy_col + 1, ws, we)
        pageable = per_window(grid, (assigned == 1).astype(np.int64), 2, ws, we)[:, 1:]
        return np.hstack([out, pageable])

    return ctx.cached(f"ledger_us_{device}", build)


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
    """One device's ledger averaged over complete steps: key -> ms per step, plus ``busy``.

    Keys are :data:`LEDGER_KEYS` (they add up to the idle time), ``busy``, and
    ``pageable_h2d`` (the part of ``blocking_sync`` in blocking pageable H2D copies).
    """
    arr = device_ledger_us(ctx, device)
    m = complete_mask(ctx)
    n = max(int(m.sum()), 1)
    sums = arr[m].sum(axis=0) / n / 1000.0
    out = {k: float(sums[i]) for i, k in enumerate(LEDGER_KEYS)}
    out["busy"] = float(sums[len(LEDGER_KEYS)])
    out["pageable_h2d"] = float(sums[len(LEDGER_KEYS) + 1])
    return out


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
        "blocking_sync": "the CPU was blocked in a synchronisation or blocking copy, or refilling the queue it drained",
        "allocator": "the CPU was in cudaMalloc/cudaFree (or the HIP equivalents)",
        "communication": "the CPU was in a collective (gloo, c10d)",
        "startup": "one-off start-up work: context/module creation, compilation, first launches that load modules",
        "zero_grad": "the CPU was in optimizer.zero_grad() launching per-parameter fills",
        "optimizer_step": "the CPU was in optimizer.step() (per-parameter launches of a single-tensor optimizer)",
        "launch_overhead": "the CPU was launching kernels (launch calls, ops that launch GPU work)",
        "other_cpu": "the CPU ran other work (ops that launch nothing, Python)",
        "untraced": "no event of the launching threads covers the time",
        "kernel_wait": "work was queued and the gap was shorter than 30 µs (HTA's kernel wait)",
        "other_idle": "work was queued but waited longer (dependencies, events; HTA's other)",
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
def idle_pageable_h2d_ms(ctx: SignalContext) -> float:
    """GPU idle per step on the primary device while the CPU staged a host-to-device copy from
    pageable memory, ms: the part of the ``blocking_sync`` slice that pinned memory removes."""
    return primary_ledger(ctx)["pageable_h2d"]


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
