"""The step model: each complete step replayed from its events, and fixes replayed on it.

Slices of the idle ledger say where idle time went; they cannot say what a fix saves. On a
step the host holds, a faster GPU saves nothing; on a step the GPU holds, a host fix saves
nothing. The model replays each step as a schedule of CPU work and GPU work and answers
"what if" by replaying it with the fix applied (the method of Daydream: Zhu, Phanishayee,
Pekhimenko, "Daydream: Accurately Estimating the Efficacy of Optimizations for DNN
Training", USENIX ATC 2020, which simulates a dependency graph built from CUPTI traces).

**The schedule.** For the primary device (the one that ran the most kernel time) and the
step windows ``[ws_k, we_k)`` with CPU spans ``[cs_k, ce_k)``
(:func:`~tracedoc.signals.steps.step_windows`; a trace without steps has one window, whose
CPU span is the window itself):

* *Anchors* are the runtime calls (not CPU ops) on the device's launching threads (the
  threads whose runtime calls launched its GPU events) that are launch calls or blocking
  calls (the idle ledger's definitions, :mod:`tracedoc.signals.ledger`; a call that is both,
  a pageable ``cudaMemcpyAsync`` say, is a blocking anchor), whose start lies in some
  ``[cs_k, ce_k)``, in order of start (ties in trace order). The launching threads are
  merged into one CPU timeline: PyTorch's main and autograd threads issue work in turn.
* The CPU time before anchor ``i`` of step ``k`` is ``gap_i = max(0, ts_i - e_{i-1})``,
  where ``e_{i-1}`` is the latest end of the step's earlier anchors (``cs_k`` before the
  first). The step's *tail* is ``max(0, ce_k - e_last)`` (``ce_k - cs_k`` without anchors),
  and the CPU time between two steps is ``max(0, cs_k - ce_{k-1})``.
* An anchor's GPU events are those of the device linked to it (kernels, memcpys, memsets,
  by the one correlation join of :mod:`tracedoc.signals.links`), in order of observed
  start. Each has a stream, a duration ``d`` and a start latency
  ``lat = max(0, start - max(launch_end, prev_end))``, where ``launch_end`` is its launch
  call's end and ``prev_end`` is the observed end of the previous GPU event of the same
  stream (by start) in the same step window, or ``ws`` of that window for the first. The
  latency holds what the schedule does not model (the GPU's own launch latency, waits on
  other streams).
* A blocking anchor waits for the device. ``ready_obs`` is the latest observed end of every
  GPU event enqueued so far in the trace (earlier anchors, and its own events), ``ws_0``
  before any; its *overhead* is ``o = max(0, te - max(ts, ready_obs))``: the call's time
  after the work it waited for was done, or the whole call when it did not wait.

**Replay**, one pass over every step in order, the CPU clock and the streams carrying over
from one step to the next. The CPU clock ``c`` starts at ``cs_0``; a stream not used yet is
free from ``E``; ``ready`` (the replayed ``ready_obs``)
starts at ``ws_0``; the previous replayed window end ``E`` starts at ``ws_0``. For step ``k``:

1. From the second step on, ``c`` advances by the CPU time between the two steps. The
   step's replayed CPU start is ``C_k = c``.
2. For each anchor in order: ``c`` advances by ``gap_i``. A launch anchor then takes its
   duration (``c += te - ts``). Each of its events (a blocking anchor's too, enqueued at
   the ``c`` reached before its wait) starts at ``max(c, free[stream]) + lat``, frees its
   stream ``d`` later, and raises ``ready`` to its end. A blocking anchor then sets
   ``c = max(c, ready) + o``.
3. ``c`` advances by the tail. The replayed window is ``[S_k, E_k)`` with
   ``S_k = max(C_k, E)`` and ``E_k = max(c, the latest end of the events enqueued in this
   step, S_k)``, the TensorBoard plugin's window rule applied to the replayed times;
   ``E = E_k``. A step with no anchor has no replayed duration (``E`` still advances).

Replayed unchanged, the schedule gives the observed windows back up to what it leaves out
(:func:`replay_error_ms` measures it). Launch calls keep their observed duration, back-pressure
included: where the launch queue was full (``cudaLaunchKernel`` calls of milliseconds, as on
``v100_resnet50_ddp_gpu_bound`` from its second step), a faster GPU would have shortened them,
so there the ``tensor_cores`` saving is understated. Because windows tile the timeline, a fix that ends
one step's GPU work earlier can make the next window start earlier and last longer; the mean
over steps is the change of the whole timeline.

**What-ifs** (:class:`WhatIf`). A fix transforms the schedule; its saving is the mean over
the complete steps of the unchanged replay minus the transformed one (ms per step; steps
either replay leaves without a duration are left out), and a negative mean counts as 0, so
the model's own error cancels:

* ``dataloader``: the CPU time inside spans named ``enumerate(DataLoader)#...`` on the
  launching threads is removed from every gap and tail (workers load the batch), and the
  CPU time that stays (gaps, tails, time between steps) is multiplied by a contention
  factor ``f`` (more processes on the host slow the training process's own work,
  :func:`dataloader_contention`).
* ``tensor_cores``: every Tensor-Core-eligible kernel that does not use them
  (:func:`tracedoc.signals.attribution.kernel_ops`: ``eligible`` and not
  ``tensor_core``) lasts ``d / r``, with ``r`` the device's Tensor Core to FP32 peak ratio
  (:func:`tensor_core_ratio`): an upper bound on what AMP does to that kernel.

Every figure is µs inside the model and ms per step in the signals.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from tracedoc.signals.base import SignalContext, SignalUnavailable, signal
from tracedoc.signals.intervals import covered_length, merge
from tracedoc.signals.steps import complete_mask, dataloader_mask, gpu_events, step_windows
from tracedoc.signals.strings import on_threads

#: Dense peak ratio of 16-bit Tensor Core (matrix core) throughput to FP32 (vector) throughput,
#: by device family, matched on the device name (first match wins). Sources, vendor datasheets:
#: V100 SXM2 125 / 15.7 TFLOPS (NVIDIA Tesla V100 datasheet); A100 312 / 19.5 (NVIDIA A100
#: datasheet, FP16/BF16 Tensor Core dense); H100 SXM 989.4 / 67 (NVIDIA H100 datasheet, BF16
#: dense = half the sparse 1,979); MI250 362.1 / 45.3 (AMD Instinct MI250 datasheet, FP16
#: matrix / FP32 vector); MI300X 1,307.4 / 163.4 (AMD Instinct MI300X datasheet, FP16 dense).
TENSOR_CORE_PEAK_RATIO: tuple[tuple[str, float], ...] = (
    ("V100", 125.0 / 15.7),
    ("A100", 312.0 / 19.5),
    ("H100", 989.4 / 67.0),
    ("MI250", 362.1 / 45.3),
    ("MI300", 1307.4 / 163.4),
)

#: Contention range when the host's core count is unknown: the training process's own CPU
#: work is 1.0x to this factor slower beside DataLoader workers. Measured on the V100 pair in
#: fixtures/ (v100_resnet50_workers0 -> workers4, num_workers 0 -> 4): host ops 13-19% slower.
CONTENTION_MAX = 1.19


@dataclass(frozen=True)
class WhatIf:
    """A transformation of the step schedule (module docstring, "What-ifs").

    Attributes:
        drop_dataloader: remove the CPU time inside DataLoader ``__next__`` spans.
        cpu_factor: multiply the CPU time that stays (gaps, tails, time between steps) by this
            factor (>= 1).
        tensor_core_ratio: divide the duration of eligible kernels that do not use Tensor
            Cores by this ratio (1.0: unchanged).
    """

    drop_dataloader: bool = False
    cpu_factor: float = 1.0
    tensor_core_ratio: float = 1.0


BASELINE = WhatIf()


@dataclass
class _Schedule:
    """The arrays of one trace's schedule (µs), built once per context."""

    anchors: np.ndarray  # runtime row positions, all steps, sorted by start
    a_ts: np.ndarray
    a_end: np.ndarray
    a_blocking: np.ndarray
    a_step: np.ndarray  # step window row of each anchor (-1: none)
    ev_of: dict[int, np.ndarray]  # runtime row -> gpu_events rows (primary device)
    ev_stream: np.ndarray
    ev_dur: np.ndarray
    ev_end: np.ndarray  # observed end
    ev_tc_slow: np.ndarray  # eligible and not a Tensor Core kernel
    ev_lat: np.ndarray
    dl_starts: np.ndarray  # merged DataLoader spans on the launching threads
    dl_ends: np.ndarray


def _schedule(ctx: SignalContext) -> _Schedule:
    def build() -> _Schedule:
        from tracedoc.signals.attribution import kernel_ops
        from tracedoc.signals.ledger import _runtime_classes, launching_threads

        t = ctx.trace
        g_all = gpu_events(ctx)
        dev = ctx.device
        on_dev = np.ones(len(g_all), dtype=bool)
        device = None  # no described device ran the work: every device's
        if dev is not None and (g_all["device"] == dev.id).any():
            on_dev = (g_all["device"] == dev.id).to_numpy()
            device = dev.id
        if not on_dev.any():
            raise SignalUnavailable("the trace has no GPU activity (a CPU-only trace)")
        threads = launching_threads(ctx, device)
        if threads is None:
            raise SignalUnavailable("no GPU event is linked to the runtime call that launched it")
        rt = t.runtime
        cls = _runtime_classes(ctx)
        rt_on = on_threads(ctx, "runtime", threads)
        blocking = cls["blocking"].to_numpy()
        is_anchor = rt_on & (cls["issues_gpu"].to_numpy() | blocking)
        anchors = np.flatnonzero(is_anchor)
        a_ts = rt["ts_us"].to_numpy(dtype=float)[anchors]
        order = np.argsort(a_ts, kind="stable")
        anchors, a_ts = anchors[order], a_ts[order]
        a_end = rt["end_us"].to_numpy(dtype=float)[anchors]
        w = step_windows(ctx)
        cs, ce = w["cpu_start_us"].to_numpy(), w["cpu_end_us"].to_numpy()
        k = np.searchsorted(cs, a_ts, side="right") - 1
        a_step = np.where((k >= 0) & (a_ts < ce[np.maximum(k, 0)]), k, -1)
        # the GPU events of each anchor, and each event's observed latency
        rows = np.flatnonzero(on_dev & (g_all["rt_pos"].to_numpy() >= 0))
        rt_pos = g_all["rt_pos"].to_numpy()[rows].astype(np.int64)
        srt = np.lexsort((g_all["ts_us"].to_numpy(dtype=float)[rows], rt_pos))  # by anchor, then start
        rows, rt_pos = rows[srt], rt_pos[srt]
        bounds = np.flatnonzero(np.diff(rt_pos)) + 1
        ev_of = {int(p[0]): r for p, r in zip(np.split(rt_pos, bounds), np.split(rows, bounds), strict=True) if len(p)}
        gs = g_all["ts_us"].to_numpy(dtype=float)
        ge = g_all["end_us"].to_numpy(dtype=float)
        stream = g_all["stream"].to_numpy().astype(np.int64) * 1024 + g_all["device"].to_numpy().astype(np.int64)
        lte = g_all["launch_end_us"].to_numpy(dtype=float)
        ws = w["start_us"].to_numpy()
        win = np.searchsorted(ws, gs, side="right") - 1
        prev_end = np.full(len(g_all), np.nan)
        ordered = np.lexsort((gs, stream))
        for s in np.unique(stream[ordered]):  # per stream: the previous event's end, within the step
            idx = ordered[stream[ordered] == s]
            pe = np.concatenate([[np.nan], ge[idx][:-1]])
            same = np.concatenate([[False], win[idx][1:] == win[idx][:-1]])
            pe = np.where(same, pe, ws[np.maximum(win[idx], 0)])
            prev_end[idx] = pe
        lat = np.maximum(gs - np.fmax(lte, prev_end), 0.0)
        lat = np.where(np.isnan(lat), 0.0, lat)
        tc_slow = np.zeros(len(g_all), dtype=bool)
        ko = kernel_ops(ctx)
        nk = len(ko)
        tc_slow[:nk] = ko["eligible"].to_numpy() & ~ko["tensor_core"].to_numpy()  # kernels come first
        ops = t.ops
        dl = on_threads(ctx, "ops", threads) & dataloader_mask(ctx) if len(ops) else np.zeros(0, dtype=bool)
        s_, e_ = merge(ops["ts_us"].to_numpy(dtype=float)[dl], ops["end_us"].to_numpy(dtype=float)[dl])
        return _Schedule(
            anchors, a_ts, a_end, blocking[anchors], a_step, ev_of, stream, ge - gs, ge, tc_slow, lat, s_, e_
        )

    return ctx.cached("stepmodel_schedule", build)


def replay_steps_us(ctx: SignalContext, what: WhatIf = BASELINE) -> np.ndarray:
    """Replayed duration of every step window (µs, one per row of ``step_windows``; NaN for
    a window with no anchor), under the transformation ``what``.

    Raises:
        SignalUnavailable: no GPU activity, or no GPU event linked to its launch call.
    """
    key = f"stepmodel_replay_{what.drop_dataloader}_{what.cpu_factor!r}_{what.tensor_core_ratio!r}"

    def build() -> np.ndarray:
        sch = _schedule(ctx)
        w = step_windows(ctx)
        ws, cs, ce = w["start_us"].to_numpy(), w["cpu_start_us"].to_numpy(), w["cpu_end_us"].to_numpy()
        out = np.full(len(w), np.nan)
        # CPU time before each anchor (observed), and the part of it the what-if removes
        prev = np.empty(len(sch.anchors))
        for k in range(len(w)):  # a handful of steps
            sel = np.flatnonzero(sch.a_step == k)
            if sel.size:
                ends = np.maximum.accumulate(sch.a_end[sel])
                prev[sel] = np.concatenate([[cs[k]], ends[:-1]])
        sel_all = sch.a_step >= 0
        gap = np.zeros(len(sch.anchors))
        gap[sel_all] = np.maximum(sch.a_ts[sel_all] - prev[sel_all], 0.0)
        if what.drop_dataloader and sel_all.any():
            cut = covered_length(sch.dl_starts, sch.dl_ends, prev[sel_all], sch.a_ts[sel_all])
            gap[sel_all] -= np.minimum(cut, gap[sel_all])
        gap *= what.cpu_factor
        dur = np.where(sch.ev_tc_slow, sch.ev_dur / what.tensor_core_ratio, sch.ev_dur)
        c = float(cs[0])
        free: dict[int, float] = {}
        window_end = float(ws[0])  # replayed end of the previous window (the first: observed start)
        ready = obs_ready = float(ws[0])  # latest end of the work enqueued so far: replayed, observed
        for k in range(len(w)):
            if k:
                c += max(float(cs[k] - ce[k - 1]), 0.0) * what.cpu_factor  # between two steps
            cpu_start = c
            sel = np.flatnonzero(sch.a_step == k)
            last_end = window_end
            for i in sel.tolist():
                c += gap[i]
                rows = sch.ev_of.get(int(sch.anchors[i]))
                if not sch.a_blocking[i]:
                    c += sch.a_end[i] - sch.a_ts[i]
                if rows is not None:
                    for r in rows.tolist():
                        st = sch.ev_stream[r]
                        end = max(c, free.get(st, window_end)) + sch.ev_lat[r] + dur[r]
                        free[st] = end
                        ready = max(ready, end)
                        last_end = max(last_end, end)
                        obs_ready = max(obs_ready, float(sch.ev_end[r]))
                if sch.a_blocking[i]:
                    o = sch.a_end[i] - max(sch.a_ts[i], obs_ready)
                    c = max(c, ready) + max(o, 0.0)
            last_anchor = float(np.max(sch.a_end[sel])) if sel.size else float(cs[k])
            tail = max(float(ce[k]) - last_anchor, 0.0)
            if what.drop_dataloader:
                one = np.array([last_anchor])
                tail -= min(float(covered_length(sch.dl_starts, sch.dl_ends, one, np.array([ce[k]]))[0]), tail)
            c += tail * what.cpu_factor
            start = max(cpu_start, window_end)
            end = max(c, last_end, start)
            if sel.size:
                out[k] = end - start
            window_end = end
        return out

    return ctx.cached(key, build)


def _mean_saving_ms(ctx: SignalContext, what: WhatIf) -> float:
    """Mean over complete steps of the baseline replay minus the replay under ``what``, ms."""
    base, after = replay_steps_us(ctx), replay_steps_us(ctx, what)
    m = complete_mask(ctx) & ~np.isnan(base) & ~np.isnan(after)
    if not m.any():
        raise SignalUnavailable("no complete step has GPU work launched from its CPU span")
    return float(np.mean(base[m] - after[m]) / 1000.0)


@signal("ms", scope="steps")
def replay_error_ms(ctx: SignalContext) -> float:
    """How far the unchanged replay is from the observed step windows: the mean over complete
    steps of ``|replayed - observed|`` window duration, ms (module docstring). Small against
    the step: the schedule holds the step; large: the step is held by what it leaves out.

    Raises:
        SignalUnavailable: a CPU-only trace, or no complete step with launches.
    """
    base = replay_steps_us(ctx)
    w = step_windows(ctx)
    m = complete_mask(ctx) & ~np.isnan(base)
    if not m.any():
        raise SignalUnavailable("no complete step has GPU work launched from its CPU span")
    return float(np.mean(np.abs(base[m] - w["dur_us"].to_numpy()[m])) / 1000.0)


def dataloader_contention(ctx: SignalContext) -> float:
    """The contention factor ``f`` for the DataLoader what-if's low end: with the host's core
    count ``c`` recorded (``tracedoc_host`` metadata, the fix-loop harness) and one worker
    added beside the training process, ``f = max(1, 2 / c)`` (two busy processes time-share
    fewer than two cores); without it, :data:`CONTENTION_MAX` (measured on the V100 pair)."""
    from tracedoc.signals.cpu import cpu_cores

    try:
        cores = cpu_cores(ctx)
    except SignalUnavailable:
        return CONTENTION_MAX
    return max(1.0, 2.0 / max(int(cores), 1))


@signal("ms", scope="steps")
def dataloader_replay_saving_ms(ctx: SignalContext) -> float:
    """What moving the DataLoader into workers saves per step on a GPU trace, replayed, ms:
    the ``dataloader`` what-if with ``f = 1`` (no contention; the high end of the range whose
    low end is :func:`dataloader_replay_saving_low_ms`).

    Raises:
        SignalUnavailable: a CPU-only trace, or no complete step with launches.
    """
    return max(_mean_saving_ms(ctx, WhatIf(drop_dataloader=True)), 0.0)


@signal("ms", scope="steps")
def dataloader_replay_saving_low_ms(ctx: SignalContext) -> float:
    """The low end of the DataLoader what-if's range, ms: the rest of the CPU work slowed by
    :func:`dataloader_contention`.

    Raises:
        SignalUnavailable: a CPU-only trace, or no complete step with launches.
    """
    return max(_mean_saving_ms(ctx, WhatIf(drop_dataloader=True, cpu_factor=dataloader_contention(ctx))), 0.0)


def tensor_core_ratio(ctx: SignalContext) -> float:
    """The primary device's Tensor Core to FP32 peak ratio (:data:`TENSOR_CORE_PEAK_RATIO`);
    a device not in the table (ROCm traces often name it only "AMD Radeon Graphics") gets the
    table's smallest ratio, the least the replay can assume."""
    dev = ctx.device
    name = (dev.name or "") if dev is not None else ""
    for family, ratio in TENSOR_CORE_PEAK_RATIO:
        if family.lower() in name.lower():
            return ratio
    return min(r for _, r in TENSOR_CORE_PEAK_RATIO)


@signal("ms", scope="steps")
def tensor_core_replay_saving_ms(ctx: SignalContext) -> float:
    """What running the eligible kernels on Tensor Cores saves per step, replayed, ms: the
    ``tensor_cores`` what-if (module docstring) with the device's peak ratio, an upper bound
    for AMP. On a step the host holds it is near 0, whatever the kernel time.

    Raises:
        SignalUnavailable: a CPU-only trace, or no complete step with launches.
    """
    return max(_mean_saving_ms(ctx, WhatIf(tensor_core_ratio=tensor_core_ratio(ctx))), 0.0)
