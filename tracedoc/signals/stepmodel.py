"""The step model: each complete step replayed from its events, its critical path, and fixes
replayed on it.

Slices of the idle ledger say where idle time went; they cannot say what a fix saves. On a
step the host holds, a faster GPU saves nothing; on a step the GPU holds, a host fix saves
nothing. The model replays each step as a schedule of CPU work and GPU work joined by
dependencies, reads the critical path off the replay, and answers "what if" by replaying it
with the fix applied (the method of Daydream: Zhu, Phanishayee, Pekhimenko, "Daydream:
Accurately Estimating the Efficacy of Optimizations for DNN Training", USENIX ATC 2020,
which simulates a dependency graph built from CUPTI traces).

**The schedule.** For the primary device (the one that ran the most kernel time) and the
step windows ``[ws_k, we_k)`` with CPU spans ``[cs_k, ce_k)``
(:func:`~tracedoc.signals.steps.step_windows`; a trace without steps has one window, whose
CPU span is the window itself):

* *Anchors* are the runtime calls (not CPU ops) on the device's launching threads (the
  threads whose runtime calls launched its GPU events) that are launch calls or blocking
  calls (the idle ledger's definitions, :mod:`tracedoc.signals.ledger`; a call that is both,
  a pageable ``cudaMemcpyAsync`` say, is a blocking anchor), whose start lies in some
  ``[cs_k, ce_k)``, in order of start (ties in trace order). The launching threads are
  merged into one CPU timeline: PyTorch's main and autograd threads issue work in turn. A
  blocking anchor is a *pageable copy* when the ledger calls it ``pageable_h2d``, else a
  *sync*.
* The CPU time before anchor ``i`` of step ``k`` is the interval ``[p_i, max(p_i, ts_i))``,
  where ``p_i`` is the latest end of the step's earlier anchors (``cs_k`` before the
  first); its length is ``gap_i``. The step's *tail* is ``[max(e_last, cs_k), max(ce_k,
  e_last))`` after the latest end ``e_last`` of its anchors (``[cs_k, ce_k)`` without
  anchors), and the CPU time between two steps is ``[ce_{k-1}, max(ce_{k-1}, cs_k))``.
* An anchor's GPU events are those of the device linked to it (kernels, memcpys, memsets,
  by the one correlation join of :mod:`tracedoc.signals.links`), in order of observed
  start. Each has a stream, a duration ``d``, a *producer* and a start latency. The
  producer is the GPU event another stream must finish first: where a stream-wait call
  (:func:`tracedoc.signals.ledger.dependency_waits`) has a dependent event and a producer
  event-record call in the trace, the producer is the last GPU event of the device launched
  by the record call's thread before the record call starts; none when that event is on
  the dependent's own stream (program order already holds it). The latency is
  ``lat = max(0, start - max(launch_end, prev_end, producer_end))``, where ``launch_end``
  is its launch call's end, ``prev_end`` is the observed end of the previous GPU event of
  the same stream (by start) in the same step window (``ws`` of that window for the
  first), and ``producer_end`` the producer's observed end (absent: not counted). It holds
  what the schedule does not model (the GPU's own launch latency).
* A blocking anchor waits for the device. ``ready_obs`` is the latest observed end of every
  GPU event enqueued so far in the trace (earlier anchors, and its own events), ``ws_0``
  before any; its *overhead* is ``o = max(0, te - max(ts, ready_obs))``: the call's time
  after the work it waited for was done, or the whole call when it did not wait.

**Replay**, one pass over every step in order, the CPU clock and the streams carrying over
from one step to the next. Under a transformation (below) a stretch of CPU time
``[a, b)`` lasts ``kept(a, b) = (b - a) - removed(a, b)``, scaled by the contention factor
``f`` where the text says so (unchanged: ``kept = b - a``, ``f = 1``). The CPU clock ``c``
starts at ``cs_0``; a stream not used yet is free from ``E``; ``ready`` (the replayed
``ready_obs``) starts at ``ws_0``; the previous replayed window end ``E`` starts at
``ws_0``. For step ``k``:

1. From the second step on, ``c`` advances by ``f * kept`` of the CPU time between the two
   steps. The step's replayed CPU start is ``C_k = c``.
2. For each anchor in order: ``c`` advances by ``f * kept`` of its CPU time before it. A
   launch anchor then takes ``kept(max(ts, p_i), max(te, p_i))``: its call, less any part an
   earlier anchor of the step already covered (calls of the merged threads can overlap; their
   shared time counts once). A blocking anchor that the transformation
   makes non-blocking takes no time and waits for nothing. Each of the anchor's events (a
   blocking anchor's too, enqueued at the ``c`` reached before its wait) starts at
   ``max(c, free[stream], producer's replayed end) + lat``, frees its stream ``d`` later,
   and raises ``ready`` to its end. A blocking anchor then sets ``c = max(c, ready) + o``.
3. ``c`` advances by ``f * kept`` of the tail. The replayed window is ``[S_k, E_k)`` with
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

**The critical path** of each replayed (unchanged) step is the chain of work that set its
end, read back from the replay: every node records the constraint that released it last
(its predecessor). Nodes: each anchor (its CPU time before it and, for a launch anchor, the
call itself; a blocking anchor's wait is a second node), and each GPU event. A launch
anchor's predecessor is the previous CPU node; a GPU event's is whichever of its launch
point, its stream's previous event and its producer ended last (the launch on a tie); a
blocking wait's is the GPU event that set ``ready`` when ``ready`` exceeded ``c``, else the
anchor. The step's end node is the CPU node when ``c`` exceeds the step's latest event end by
more than :data:`TIE_US`, else that event (a tie goes to the GPU: a trace without steps has a
CPU span that ends with its last event, and its idle tail is no host work); walking predecessors back from it until a node ends at or before ``S_k``,
each node contributes ``its end - max(its predecessor's end, S_k)`` (the CPU end adds the
tail), so the contributions add up to the replayed step. A GPU event's contribution is its
duration (``min(contribution, d)``) by kind, the rest ``gpu_wait``; a launch anchor's is
the call (``min(contribution, te - ts)``: ``startup`` when the ledger calls the launch
start-up work, else ``launch_overhead``) and the rest, the CPU time before it, split by the
share of the observed interval ``[p_i, max(p_i, ts_i))`` inside the regions ``startup``,
``dataloader``, ``zero_grad``, ``optimizer_step`` and ``launching_ops`` (below), in that
precedence (causes ``startup``, ``dataloader``, ``zero_grad``, ``optimizer_step``,
``launch_overhead``), the rest ``other_cpu``; the CPU end's tail is split the same way by
the observed tail interval; a blocking wait's is ``sync``. Causes (:data:`PATH_CAUSES`) on
the host side: ``startup``, ``dataloader``, ``zero_grad``, ``optimizer_step``,
``launch_overhead``, ``sync``, ``other_cpu``; on the device side: ``compute`` (kernels that are not communication),
``communication``, ``memcpy`` (memcpys and memsets), ``gpu_wait``. HTA's critical path
analysis (Holistic Trace Analysis, ``critical_path_analysis``) builds the same kind of
graph from CUDA sync events; this one needs no sync events and follows kernels launched
through CUDA graphs like any other (``cudaGraphLaunch`` is a launch call, and its kernels
link to it by correlation), the gap HTA issue #290 reports.

**What-ifs** (:class:`WhatIf`; the named fixes of :data:`FIXES`, declared beside each rule as
``[fix] replay``). A fix transforms the schedule; its saving is the mean over the complete
steps of the unchanged replay minus the transformed one (ms per step; steps either replay
leaves without a duration are left out), and a negative mean counts as 0, so the model's
own error cancels. Transformations of CPU time name *regions* (merged spans on the
launching threads): ``startup`` (runtime calls the ledger calls start-up work),
``dataloader`` (``enumerate(DataLoader)#...`` spans), ``optimizer_step``
(``Optimizer.step#...``), ``zero_grad`` (``Optimizer.zero_grad#...``), ``launching_ops``
(CPU ops that contain a launch call on their thread, and the launch calls themselves, less
the ``startup`` region: no fix removes one-off start-up work) and
``allocator`` (allocator runtime calls, the ledger's ``allocator`` class) and ``other_cpu``
(the steps' CPU spans ``[cs_k, ce_k)`` outside every other region and outside the anchors).
GPU classes (:data:`GPU_CLASSES`) scale GPU events the same way. A region with
factor ``s`` keeps ``s`` of the CPU time inside it: ``removed(a, b)`` is the integral over
``[a, b)`` of ``1 - s(t)``, ``s(t)`` the smallest factor of the regions covering ``t`` (1
outside them).

**Cost models of two fixes.** ``tensor_cores`` (AMP) divides each eligible kernel that is not a
Tensor Core kernel by ``r = P16 / FP32`` (:func:`tensor_core_ratio`) and each eligible Tensor
Core kernel whose name says TF32 (:data:`tracedoc.signals.tensor_core.TF32_KERNEL`) by ``r32 =
P16 / TF32`` (:func:`tf32_tensor_core_ratio`), where ``P16`` is the primary device's dense bf16
Tensor Core peak (fp16 where the device has no bf16), ``FP32`` its FP32 vector peak and ``TF32``
its TF32 Tensor Core peak, all from the row :func:`tracedoc.perf.peaks.match_device` finds for
the device (``tracedoc/perf/peaks.toml``, vendor datasheets); a kernel in both classes is not
possible (one is Tensor Core, the other not). A device without a row (or a row without ``P16``
or ``FP32``) takes ``r`` from :data:`TENSOR_CORE_PEAK_RATIO`, the first family whose name is in
the device name, else its smallest ratio; without a row or a ``TF32`` rate ``r32 = 1``. Each
ratio is at least 1. ``fused_attention`` keeps the share ``s``
(:func:`tracedoc.signals.attention.fused_attention_factor`) of every event of the
``eager_attention`` class (the softmax, batched-matmul and score-scaling kernels of eager
attention in the complete step windows; :func:`tracedoc.signals.attention.replaced_by_fused_mask`):
``s = min(1, T_fused / T_replaced)``, where ``T_replaced`` is the summed duration of the class's
kernels and ``T_fused = F / (0.35 * P16(dtype))`` is the fused kernel's time: ``F`` the summed
FLOPs of the distinct batched-matmul op calls that launched kernels of the class (``2 * b * m * n
* k``, plus ``b * m * n`` for ``baddbmm`` unless ``beta = 0``: docs/op-models.md; that is ``4 * B *
H * Lq * Lk * D`` per attention, never halved), at :data:`tracedoc.signals.attention.FLASH_ATTENTION_PEAK_SHARE` of the dense Tensor Core
peak of their dtype (fp16 or bf16); :data:`FUSED_ATTENTION_FACTOR` where any of those calls lacks
recorded shapes, their dtypes are not one 16-bit dtype, or the device has no row
(:mod:`tracedoc.signals.attention`, module docstring).
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Callable

import numpy as np

from tracedoc.signals.arrays import sorted_unique
from tracedoc.signals.attention import FUSED_ATTENTION_FACTOR  # re-exported: the fused_attention fallback
from tracedoc.signals.base import SignalContext, SignalUnavailable, signal
from tracedoc.signals.cpumodel import CPU_FIXES, cpu_model_error_ms, cpu_replay_saving_ms
from tracedoc.signals.intervals import covered_before, covered_length, covered_upto, is_union, merge, subtract, union_of
from tracedoc.signals.steps import complete_mask, dataloader_mask, gpu_events, launch_of, step_windows
from tracedoc.signals.strings import _narrow, on_threads
from tracedoc.trace import id_array

#: Fallback only, for a device the peak table (:mod:`tracedoc.perf.peaks`, ``peaks.toml``) does not
#: match: dense peak ratio of 16-bit Tensor Core (matrix core) throughput to FP32 (vector)
#: throughput, by device family, matched on the device name (first match wins). Sources, vendor
#: datasheets: V100 SXM2 125 / 15.7 TFLOPS (NVIDIA Tesla V100 datasheet); A100 312 / 19.5 (NVIDIA
#: A100 datasheet, FP16/BF16 Tensor Core dense); H100 SXM 989.5 / 67 (NVIDIA H100 datasheet, BF16
#: dense = half the sparse 1,979, as ``peaks.toml`` holds it); MI250 362.1 / 45.3 (AMD Instinct
#: MI250 datasheet, FP16 matrix / FP32 vector); MI300X 1,307.4 / 163.4 (AMD Instinct MI300X
#: datasheet, FP16 dense). Every GPU fixture's device is in the peak table, so none uses it.
TENSOR_CORE_PEAK_RATIO: tuple[tuple[str, float], ...] = (
    ("V100", 125.0 / 15.7),
    ("A100", 312.0 / 19.5),
    ("H100", 989.5 / 67.0),
    ("MI250", 362.1 / 45.3),
    ("MI300", 1307.4 / 163.4),
)

#: Contention range when the host's core count is unknown: the training process's own CPU
#: work is 1.0x to this factor slower beside DataLoader workers. Measured on the V100 pair in
#: fixtures/ (v100_resnet50_workers0 -> workers4, num_workers 0 -> 4): host ops 13-19% slower.
CONTENTION_MAX = 1.19

#: Share of ``optimizer.step()``'s host time that stays with ``foreach=True``: measured on the
#: same ResNet-50 / V100 job single-tensor vs foreach, 18.83 -> 0.93 ms per step (0.049).
FOREACH_HOST_FACTOR = 0.93 / 18.83

#: CPU regions a transformation can scale (module docstring, "What-ifs").
REGIONS = ("startup", "dataloader", "optimizer_step", "zero_grad", "launching_ops", "allocator", "other_cpu")
#: Blocking-anchor classes a transformation can make non-blocking.
WAIT_CLASSES = ("sync", "pageable_copy")
#: GPU-event classes a transformation can scale: ``comm`` (communication kernels),
#: ``zero_grad`` (events launched from inside ``zero_grad`` spans), ``eager_attention`` (the
#: kernels a fused attention kernel replaces: the softmax and batched-matmul kernels of eager
#: attention and the score-scaling kernels, :func:`tracedoc.signals.attention.replaced_by_fused_mask`).
GPU_CLASSES = ("comm", "zero_grad", "eager_attention")

#: Two replayed times closer than this (µs) are a tie (float rounding of rebased timestamps).
TIE_US = 1e-3
#: Causes on the critical path (module docstring): host side, then device side.
HOST_PATH_CAUSES = ("startup", "dataloader", "zero_grad", "optimizer_step", "launch_overhead", "sync", "other_cpu")
DEVICE_PATH_CAUSES = ("compute", "communication", "memcpy", "gpu_wait")
PATH_CAUSES = (*HOST_PATH_CAUSES, *DEVICE_PATH_CAUSES)


@dataclass(frozen=True)
class WhatIf:
    """A transformation of the step schedule (module docstring, "What-ifs").

    Attributes:
        cpu_scale: ``(region, factor)`` pairs: the CPU time inside the region keeps
            ``factor`` (0: removed) of its length; regions are :data:`REGIONS`.
        cpu_factor: the contention factor ``f`` (>= 1) on the CPU time that stays (gaps,
            tails, time between steps; not the calls themselves).
        tensor_core_ratio: divide the duration of eligible kernels that do not use Tensor
            Cores by this ratio (1.0: unchanged).
        tf32_ratio: divide the duration of eligible Tensor Core kernels that run in TF32
            (:func:`tracedoc.signals.tensor_core.tf32_kernel_mask`) by this ratio (1.0: unchanged).
        no_wait: blocking-anchor classes (:data:`WAIT_CLASSES`) made non-blocking: such an
            anchor takes no CPU time and waits for nothing; its GPU events stay.
        gpu_scale: ``(class, factor)`` pairs over :data:`GPU_CLASSES`: an event of the class
            lasts ``factor * d``; with factor 0 its latency is 0 too (the event is gone). An
            event in several classes takes the smallest factor.
    """

    cpu_scale: tuple[tuple[str, float], ...] = ()
    cpu_factor: float = 1.0
    tensor_core_ratio: float = 1.0
    no_wait: frozenset[str] = field(default_factory=frozenset)
    gpu_scale: tuple[tuple[str, float], ...] = ()
    tf32_ratio: float = 1.0

    def __post_init__(self) -> None:
        bad = [r for r, _ in self.cpu_scale if r not in REGIONS]
        bad += [c for c in self.no_wait if c not in WAIT_CLASSES]
        bad += [c for c, _ in self.gpu_scale if c not in GPU_CLASSES]
        if bad:
            raise ValueError(f"unknown what-if names: {', '.join(sorted(bad))}")
        if (
            self.cpu_factor < 1.0
            or self.tensor_core_ratio < 1.0
            or self.tf32_ratio < 1.0
            or any(not 0 <= s <= 1 for _, s in (*self.cpu_scale, *self.gpu_scale))
        ):
            raise ValueError("cpu_factor, tensor_core_ratio and tf32_ratio are >= 1, region factors in [0, 1]")

    def combine(self, other: WhatIf) -> WhatIf:
        """Both transformations at once: a region or GPU class keeps the smaller factor, the
        larger ``cpu_factor``, ``tensor_core_ratio`` and ``tf32_ratio`` apply, the ``no_wait`` sets
        unite."""

        def smaller(
            a: tuple[tuple[str, float], ...], b: tuple[tuple[str, float], ...]
        ) -> tuple[tuple[str, float], ...]:
            out = dict(a)
            for r, s in b:
                out[r] = min(s, out.get(r, 1.0))
            return tuple(sorted(out.items()))

        return WhatIf(
            smaller(self.cpu_scale, other.cpu_scale),
            max(self.cpu_factor, other.cpu_factor),
            max(self.tensor_core_ratio, other.tensor_core_ratio),
            self.no_wait | other.no_wait,
            smaller(self.gpu_scale, other.gpu_scale),
            max(self.tf32_ratio, other.tf32_ratio),
        )

    @property
    def key(self) -> str:
        """A stable cache key."""
        return repr(
            (
                tuple(sorted(self.cpu_scale)),
                self.cpu_factor,
                self.tensor_core_ratio,
                tuple(sorted(self.no_wait)),
                tuple(sorted(self.gpu_scale)),
                self.tf32_ratio,
            )
        )


BASELINE = WhatIf()


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


def _sixteen_bit_peak(peak) -> float | None:
    """The 16-bit Tensor Core (matrix core) dense peak AMP runs at: bf16 where the device has it
    (AMP's dtype on Ampere and later, MI200 and later), else fp16 (Volta, Turing: TD301's fix)."""
    return peak.bf16_tc if peak.bf16_tc is not None else peak.fp16_tc


def tensor_core_ratio(ctx: SignalContext) -> float:
    """The speed-up AMP gives an eligible kernel that runs on the CUDA cores (vector units) in fp32:
    the primary device's 16-bit Tensor Core peak (``bf16_tc``, else ``fp16_tc``) over its FP32
    vector peak (``fp32``), both dense, from the peak table
    (:func:`tracedoc.signals.opview.device_peak`, :func:`tracedoc.perf.peaks.match_device`;
    vendor datasheets, ``tracedoc/perf/peaks.toml``). A device the table does not match (or whose
    row lacks either rate) falls back to :data:`TENSOR_CORE_PEAK_RATIO` by name, and a name not
    there either to that table's smallest ratio, the least the replay can assume."""
    from tracedoc.signals.opview import device_peak

    peak = device_peak(ctx)
    if peak is not None:
        p16 = _sixteen_bit_peak(peak)
        if p16 is not None and peak.fp32:
            return max(p16 / peak.fp32, 1.0)
    dev = ctx.device
    name = (dev.name or "") if dev is not None else ""
    for family, ratio in TENSOR_CORE_PEAK_RATIO:
        if family.lower() in name.lower():
            return ratio
    return min(r for _, r in TENSOR_CORE_PEAK_RATIO)


def tf32_tensor_core_ratio(ctx: SignalContext) -> float:
    """The speed-up AMP gives an eligible kernel that already runs on Tensor Cores in TF32 (cuDNN
    allows TF32 for fp32 convolutions by default on Ampere and later: PyTorch docs,
    "TensorFloat-32 (TF32) on Ampere (and later) devices"): the 16-bit Tensor Core peak over the
    TF32 one (``tf32_tc``), from the peak table as :func:`tensor_core_ratio` reads it (2.0 on an
    A100, 312 / 156, and an H100 SXM, 989.5 / 494.5). 1.0 (no speed-up assumed) where the table
    does not match the device or its row has no TF32 rate."""
    from tracedoc.signals.opview import device_peak

    peak = device_peak(ctx)
    if peak is None or peak.tf32_tc is None:
        return 1.0
    p16 = _sixteen_bit_peak(peak)
    return max(p16 / peak.tf32_tc, 1.0) if p16 is not None and peak.tf32_tc > 0 else 1.0


def _fused_factor(ctx: SignalContext) -> float:
    """:func:`tracedoc.signals.attention.fused_attention_factor`, or :data:`FUSED_ATTENTION_FACTOR`
    where it is unavailable (no kernel time in the steps: the class is empty, the factor moot)."""
    from tracedoc.signals.attention import fused_attention_factor

    try:
        return float(fused_attention_factor(ctx))
    except SignalUnavailable:
        return FUSED_ATTENTION_FACTOR


@dataclass(frozen=True)
class FixReplay:
    """A named fix of :data:`FIXES`: what it does to the schedule (``what(ctx)``) and in words."""

    name: str
    text: str
    what: Callable[[SignalContext], WhatIf]


#: The fixes rules may declare (``[fix] replay = "<name>"``), each a transformation.
FIXES: dict[str, FixReplay] = {
    f.name: f
    for f in (
        FixReplay(
            "dataloader",
            "the DataLoader's CPU time removed (workers load the batch; no contention: the high end)",
            lambda ctx: WhatIf(cpu_scale=(("dataloader", 0.0),)),
        ),
        FixReplay(
            "dataloader_low",
            "the DataLoader's CPU time removed and the rest slowed by dataloader_contention (the low end)",
            lambda ctx: WhatIf(cpu_scale=(("dataloader", 0.0),), cpu_factor=dataloader_contention(ctx)),
        ),
        FixReplay(
            "tensor_cores",
            "eligible non-Tensor-Core kernels divided by the device's 16-bit Tensor Core to FP32 peak "
            "ratio, and TF32 Tensor Core kernels by its 16-bit to TF32 peak ratio (the peak table; an "
            "upper bound for AMP)",
            lambda ctx: WhatIf(tensor_core_ratio=tensor_core_ratio(ctx), tf32_ratio=tf32_tensor_core_ratio(ctx)),
        ),
        FixReplay(
            "launch_collapse",
            "the CPU time of launching ops and launch calls removed (launches collapsed into "
            "one graph replay: CUDA graphs, torch.compile mode='reduce-overhead'; an upper bound)",
            lambda ctx: WhatIf(cpu_scale=(("launching_ops", 0.0),)),
        ),
        FixReplay(
            "foreach",
            f"optimizer.step()'s CPU time kept at {FOREACH_HOST_FACTOR:.3f} (single-tensor to foreach, "
            "measured 18.83 -> 0.93 ms)",
            lambda ctx: WhatIf(cpu_scale=(("optimizer_step", FOREACH_HOST_FACTOR),)),
        ),
        FixReplay(
            "zero_grad",
            "zero_grad()'s CPU time and the GPU work it launches removed (set_to_none=True)",
            lambda ctx: WhatIf(cpu_scale=(("zero_grad", 0.0),), gpu_scale=(("zero_grad", 0.0),)),
        ),
        FixReplay(
            "no_sync",
            "blocking syncs made non-blocking (no .item(), no explicit synchronize)",
            lambda ctx: WhatIf(no_wait=frozenset({"sync"})),
        ),
        FixReplay(
            "pinned_memory",
            "pageable copies made asynchronous from pinned memory",
            lambda ctx: WhatIf(no_wait=frozenset({"pageable_copy"})),
        ),
        FixReplay(
            "no_allocator",
            "allocator calls removed (the caching allocator keeps its blocks)",
            lambda ctx: WhatIf(cpu_scale=(("allocator", 0.0),)),
        ),
        FixReplay(
            "overlap_communication",
            "communication kernels take no time on the path (fully overlapped; an upper bound)",
            lambda ctx: WhatIf(gpu_scale=(("comm", 0.0),)),
        ),
        FixReplay(
            "fused_attention",
            "eager attention's softmax, batched-matmul and score-scaling kernels kept at the share of their "
            "time a fused attention kernel takes (fused_attention_factor: its FLOPs at FlashAttention's "
            f"achievable share of the 16-bit Tensor Core peak; {FUSED_ATTENTION_FACTOR} where shapes or the "
            "peak are unknown)",
            lambda ctx: WhatIf(gpu_scale=(("eager_attention", _fused_factor(ctx)),)),
        ),
        FixReplay(
            "host_work_offloaded",
            "the launching threads' other CPU work removed (moved to DataLoader workers, another process or "
            "the GPU; an upper bound)",
            lambda ctx: WhatIf(cpu_scale=(("other_cpu", 0.0),)),
        ),
    )
}


#: Every name a rule may declare as ``[fix] replay``: the GPU fixes of :data:`FIXES`, then the
#: CPU-only ones of :data:`tracedoc.signals.cpumodel.CPU_FIXES` (``dataloader`` is both).
REPLAY_NAMES: tuple[str, ...] = (*FIXES, *(n for n in CPU_FIXES if n not in FIXES))


@dataclass
class _Schedule:
    """The arrays of one trace's schedule (µs), built once per context. Classes and kinds are
    int8, indices and step rows int32 (2**31 GPU events or anchors would be a trace of some
    400 GB of JSON); times are float64 (issue 24: 39.7 -> 30 MiB on 1 M small events)."""

    a_ts: np.ndarray  # anchors, all steps, sorted by start
    a_end: np.ndarray
    a_class: np.ndarray  # 0 launch, 1 sync, 2 pageable copy
    a_startup: np.ndarray  # the ledger's start-up class
    a_step: np.ndarray  # step window row of each anchor (-1: none)
    by_step: np.ndarray  # anchor indices, by step window then order (anchors outside windows first)
    ev_ptr: np.ndarray  # anchor i's GPU events are ev_rows[ev_ptr[i]:ev_ptr[i + 1]]
    ev_rows: np.ndarray  # gpu_events rows (primary device), by anchor then start
    ev_stream: np.ndarray  # per gpu_events row: stream * 1024 + device (int32 where it fits)
    ev_kind: np.ndarray  # 0 kernel, 1 communication kernel, 2 memcpy / memset
    ev_dur: np.ndarray
    wait_obs: np.ndarray  # each blocking anchor's overhead o, in replay order (:func:`_wait_overheads`)
    ev_tc_slow: np.ndarray  # eligible and not a Tensor Core kernel
    ev_tf32: np.ndarray  # eligible, a Tensor Core kernel, in TF32
    ev_zero_grad: np.ndarray  # launched from inside a zero_grad span
    ev_attention: np.ndarray  # an eager attention kernel
    ev_dep: np.ndarray  # producer row (-1: none)
    ev_lat: np.ndarray
    regions: dict[str, tuple[np.ndarray, np.ndarray]]  # merged spans on the launching threads


def _producers(ctx: SignalContext, g, on_dev: np.ndarray) -> np.ndarray:
    """Per ``gpu_events`` row, the producer row (module docstring) or -1."""
    from tracedoc.signals.ledger import dependency_waits

    dep = np.full(len(g), -1, dtype=np.int64)
    waits = dependency_waits(ctx)
    ok = (waits["dependent"].to_numpy() >= 0) & (waits["producer"].to_numpy() >= 0)
    if not ok.any():
        return dep
    rt = ctx.trace.runtime
    from tracedoc.signals.strings import frame_threads

    codes, labels = frame_threads(ctx, "runtime")
    prod = waits["producer"].to_numpy()[ok].astype(np.int64)
    dependent = waits["dependent"].to_numpy()[ok].astype(np.int64)
    rec_ts = rt["ts_us"].to_numpy(dtype=float)[prod]
    rec_thread = labels[codes[prod]]
    lts = launch_of(ctx, g, "ts_us")
    thr = launch_of(ctx, g, "thread")
    stream = g["stream"].to_numpy()
    for th in set(rec_thread.tolist()):
        rows = np.flatnonzero(on_dev & (thr == th) & ~np.isnan(lts))
        if not rows.size:
            continue
        rows = rows[np.argsort(lts[rows], kind="stable")]
        sel = np.flatnonzero(rec_thread == th)
        k = np.searchsorted(lts[rows], rec_ts[sel], side="left") - 1
        has = k >= 0
        p = rows[np.maximum(k, 0)]
        d = dependent[sel]
        good = has & on_dev[d] & (stream[p] != stream[d])
        dep[d[good]] = p[good]
    return dep


def _model_device(ctx: SignalContext, g) -> tuple[np.ndarray, int | None]:
    """``(on_dev, device)``: the rows of ``g`` (:func:`gpu_events`) the step model schedules,
    those of the described device, or every row (device None) when no described device ran
    the work.

    Raises:
        SignalUnavailable: no GPU event (a CPU-only trace).
    """
    dev = ctx.device
    on_dev = np.ones(len(g), dtype=bool)
    device = None
    if dev is not None and (g["device"] == dev.id).any():
        on_dev = (g["device"] == dev.id).to_numpy()
        device = dev.id
    if not on_dev.any():
        raise SignalUnavailable("the trace has no GPU activity (a CPU-only trace)")
    return on_dev, device


@dataclass
class _EventFlags:
    """What the step model reads of each GPU event's kind, per :func:`gpu_events` row (shape
    ``(len(gpu_events),)``): ``kind`` (int8: 0 kernel, 1 communication kernel, 2 memcpy or
    memset), ``tc_slow`` (an eligible kernel not on Tensor Cores), ``tf32`` (an eligible Tensor
    Core kernel in TF32) and ``attention`` (an eager attention kernel a fused kernel replaces)."""

    kind: np.ndarray
    tc_slow: np.ndarray
    tf32: np.ndarray
    attention: np.ndarray


def _event_flags(ctx: SignalContext) -> _EventFlags:
    """The :class:`_EventFlags` of the context's GPU events (cached: the schedule holds them).

    Built apart from the schedule, so that what they are read from (the kernels' launching ops
    and their attention classes: 35 MiB on 4 M small events) can be released before the
    schedule's own build (:func:`build_model`, issue 24)."""

    def build() -> _EventFlags:
        from tracedoc.signals.attribution import kernel_ops
        from tracedoc.signals.comm import comm_kernel_mask
        from tracedoc.signals.tensor_core import tf32_kernel_mask

        g_all = gpu_events(ctx)
        n = len(g_all)
        tc_slow = np.zeros(n, dtype=bool)
        tf32 = np.zeros(n, dtype=bool)
        if n:
            ko = kernel_ops(ctx)
            nk = len(ko)  # kernels come first in gpu_events
            eligible, tensor_core = ko["eligible"].to_numpy(), ko["tensor_core"].to_numpy()
            tc_slow[:nk] = eligible & ~tensor_core
            tf32[:nk] = eligible & tensor_core & tf32_kernel_mask(ctx)
            del ko, eligible, tensor_core
        is_kernel = (g_all["kind"] == "kernel").to_numpy()
        kind = np.where(is_kernel, 0, 2).astype(np.int8)
        if is_kernel.any():
            comm = np.zeros(n, dtype=bool)
            comm[is_kernel] = comm_kernel_mask(g_all["name"][is_kernel])
            kind = np.where(comm, 1, kind).astype(np.int8)
        attention = np.zeros(n, dtype=bool)
        try:
            from tracedoc.signals.attention import attention_kernels, replaced_by_fused_mask

            ak = attention_kernels(ctx)
            attention[ak.index.to_numpy()[replaced_by_fused_mask(ak)]] = True  # kernel rows come first
        except SignalUnavailable:
            pass
        return _EventFlags(kind, tc_slow, tf32, attention)

    return ctx.cached("stepmodel_event_flags", build)


def _schedule(ctx: SignalContext) -> _Schedule:
    def build() -> _Schedule:
        from tracedoc.signals.ledger import _launching_ops, _runtime_classes, launching_threads
        from tracedoc.signals.optimizer import optimizer_step_mask, zero_grad_mask

        t = ctx.trace
        g_all = gpu_events(ctx)
        on_dev, device = _model_device(ctx, g_all)
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
        a_class = np.where(blocking[anchors], np.where(cls["pageable_h2d"].to_numpy()[anchors], 2, 1), 0).astype(
            np.int8
        )
        w = step_windows(ctx)
        cs, ce = w["cpu_start_us"].to_numpy(), w["cpu_end_us"].to_numpy()
        k = np.searchsorted(cs, a_ts, side="right") - 1
        a_step = np.where((k >= 0) & (a_ts < ce[np.maximum(k, 0)]), k, -1).astype(np.int32)
        del k  # the build's intermediates go as soon as they are used: it peaks at its end (issue 24)
        # the GPU events of each anchor (CSR by anchor order), and each event's observed latency
        anchor_of_rt = np.full(len(rt), -1, dtype=np.int64)
        anchor_of_rt[anchors] = np.arange(anchors.size)
        rt_pos = g_all["rt_pos"].to_numpy()
        rows = np.flatnonzero(on_dev & (rt_pos >= 0))
        a_of = anchor_of_rt[rt_pos[rows].astype(np.int64)]
        rows, a_of = rows[a_of >= 0], a_of[a_of >= 0]
        gs = g_all["ts_us"].to_numpy(dtype=float)
        ge = g_all["end_us"].to_numpy(dtype=float)
        srt = np.lexsort((gs[rows], a_of))  # by anchor, then start
        rows, a_of = rows[srt], a_of[srt]
        ev_ptr = np.searchsorted(a_of, np.arange(anchors.size + 1), side="left").astype(np.int32)
        del anchor_of_rt, rt_pos, a_of, srt
        rows, anchors = _narrow(rows), _narrow(anchors)  # below len(g_all), len(rt)
        ws = w["start_us"].to_numpy()
        # here, before the inputs of the masks below are built and held: its temporaries were the
        # build's peak at its end (issue 24)
        by_step = _narrow(np.argsort(a_step, kind="stable"))  # the replay's order; anchor indices: below na
        wait_obs = _wait_overheads(a_ts, a_end, a_step, by_step, a_class > 0, ev_ptr, ge[rows], float(ws[0]))
        stream = g_all["stream"].to_numpy().astype(np.int64) * 1024 + g_all["device"].to_numpy().astype(np.int64)
        lte = launch_of(ctx, g_all, "end_us")
        stream = id_array(stream)  # held for the whole analysis: int32 where every id fits
        # per stream, by start: the previous event's end within the same step window, else the
        # window's start; every stream in one pass over the events sorted by (stream, start), a
        # few arrays of the events at once (a pass per stream held a dozen, the build's largest
        # transient: 41 MiB on 4 M small events, issue 24)
        ordered = np.lexsort((gs, stream))
        win = _narrow(np.searchsorted(ws, gs, side="right") - 1)[ordered]  # below len(ws) + 1
        same = np.zeros(ordered.size, dtype=bool)  # the previous event in that order: same stream, same window
        if ordered.size > 1:
            so = stream[ordered]
            np.equal(so[1:], so[:-1], out=same[1:])
            del so
            same[1:] &= win[1:] == win[:-1]
        pe = ws[np.maximum(win, 0)]
        del win
        after = np.flatnonzero(same)
        del same
        pe[after] = ge[ordered[after - 1]]
        del after
        prev_end = np.empty(len(g_all))
        prev_end[ordered] = pe
        del ordered, pe
        dep = _producers(ctx, g_all, on_dev).astype(np.int32)  # rows: below len(g_all)
        dep_end = np.where(dep >= 0, ge[np.maximum(dep, 0)], np.nan)
        lat = np.maximum(gs - np.fmax(np.fmax(lte, prev_end), dep_end), 0.0)
        lat = np.where(np.isnan(lat), 0.0, lat)
        del prev_end, dep_end, lte
        flags = _event_flags(ctx)  # built here when no stage of build_model built it
        ops = t.ops
        ops_on = on_threads(ctx, "ops", threads) if len(ops) else np.zeros(0, dtype=bool)
        o_ts, o_end = ops["ts_us"].to_numpy(dtype=float), ops["end_us"].to_numpy(dtype=float)

        def op_region(mask: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
            return merge(o_ts[ops_on & mask], o_end[ops_on & mask]) if len(ops) else merge(np.zeros(0), np.zeros(0))

        startup = cls["startup"].to_numpy()
        r_ts, r_end = rt["ts_us"].to_numpy(dtype=float), rt["end_us"].to_numpy(dtype=float)
        launch_calls = rt_on & cls["issues_gpu"].to_numpy()
        lo = ops_on & _launching_ops(ctx) if len(ops) else np.zeros(0, dtype=bool)
        regions = {
            "dataloader": op_region(dataloader_mask(ctx) if len(ops) else np.zeros(0, dtype=bool)),
            "optimizer_step": op_region(optimizer_step_mask(ctx) if len(ops) else np.zeros(0, dtype=bool)),
            "zero_grad": op_region(zero_grad_mask(ctx) if len(ops) else np.zeros(0, dtype=bool)),
            "launching_ops": subtract(
                *union_of(o_ts[lo], o_end[lo], r_ts[launch_calls], r_end[launch_calls]),
                r_ts[rt_on & startup],
                r_end[rt_on & startup],
            ),
            "startup": merge(r_ts[rt_on & startup], r_end[rt_on & startup]),
            "allocator": merge(r_ts[rt_on & cls["allocator"].to_numpy()], r_end[rt_on & cls["allocator"].to_numpy()]),
        }
        zs, ze = regions["zero_grad"]
        zero = np.zeros(len(g_all), dtype=bool)
        if zs.size:
            kz = np.searchsorted(zs, a_ts, side="right") - 1
            a_in = (kz >= 0) & (a_ts < ze[np.maximum(kz, 0)])  # the anchor starts inside a zero_grad span
            for i in np.flatnonzero(a_in):
                zero[rows[ev_ptr[i] : ev_ptr[i + 1]]] = True
        del r_ts, r_end
        others = list(regions.values())
        # the anchors' calls, but for the launch calls: those lie in launching_ops and startup
        # already (launching_ops is every launch call and launching op less the start-up calls),
        # and a union is the same set whichever of its parts are listed twice
        extra = ~launch_calls[anchors]
        # the steps' CPU spans less each region in turn (a union at every step: the same
        # intervals as less the union of all, without a copy of every region's spans)
        rest_s, rest_e = subtract(cs, ce, a_ts[extra], a_end[extra])
        del extra
        for x in others:
            rest_s, rest_e = subtract(rest_s, rest_e, *x)
        regions["other_cpu"] = (rest_s, rest_e)
        del rest_s, rest_e
        return _Schedule(
            a_ts,
            a_end,
            a_class,
            startup[anchors],
            a_step,
            by_step,
            ev_ptr,
            rows,
            stream,
            flags.kind,
            ge - gs,
            wait_obs,
            flags.tc_slow,
            flags.tf32,
            zero,
            flags.attention,
            dep,
            lat,
            regions,
        )

    return ctx.cached("stepmodel_schedule", build)


def _wait_overheads(a_ts, a_end, a_step, by_step, blocking, ev_ptr, ev_end, ready0: float) -> np.ndarray:
    """The overhead ``o = max(0, te - max(ts, ready_obs))`` of each blocking anchor (module
    docstring), float64, shape ``(number of blocking anchors in windows,)``, in the order the
    replay meets them: ``by_step`` (the stable argsort of ``a_step``) less its anchors outside
    every window, which come first and are never replayed. ``ready_obs`` is the running maximum of the observed ends of the events of the
    anchors met so far, the anchor's own included, from ``ready0`` (``ws_0``); NaN ends count
    for nothing. It depends on no transformation, so the schedule holds these values, a float
    per blocking anchor, instead of every GPU event's observed end (8 bytes per event, issue 24);
    the floats are those the replay's loop computed from the ends (Python's ``max`` on a tie or
    a NaN: the first argument unless the second is greater)."""
    seq = by_step[np.count_nonzero(a_step < 0) :]  # anchors in windows, in replay order
    n = np.diff(ev_ptr)
    last = np.full(a_ts.size, -np.inf)
    has = n > 0
    if has.any():
        last[has] = np.fmax.reduceat(ev_end, ev_ptr[:-1][has])  # a run ends where the next starts
    ready = np.fmax.accumulate(np.concatenate([[ready0], last[seq]]))[1:]
    wait = blocking[seq]
    ts, ready = a_ts[seq][wait], ready[wait]
    later = np.where(ready > ts, ready, ts)
    o = a_end[seq][wait] - later
    return np.where(0.0 > o, 0.0, o)


def build_model(ctx: SignalContext) -> bool:
    """Build the step model's schedule and anchor order (cached), so that the engine can release
    what they were built from before the replays (issue 24); False when the trace has no
    schedule (the reason stays cached: a replay raises it) or its build fails (a replay's signal
    fails the same way and gives the reason, as every signal does: never the whole analysis).

    Built in three stages, the GPU events' flags (:func:`_event_flags`), the schedule, the anchor
    order, with what each stage was built from released (all but the step model's cached
    intermediates, :meth:`~tracedoc.signals.base.SignalContext.release`) before the next: held
    under the next stage's build, those inputs were its peak (557 -> 528 MiB on 4 M small
    events). The values are the same: a released intermediate that is asked for again is built
    again."""
    try:
        for stage in (_event_flags, _schedule, _anchor_order):
            stage(ctx)
            ctx.release(keep=step_model_key)
    except MemoryError:
        raise
    except Exception:  # unavailable, or a bug an odd trace reaches: the replays' signals say which
        return False
    return True


def step_model_key(key: str) -> bool:
    """Whether ``key`` names one of the step model's cached intermediates (its schedule, anchor
    order and replays): what the engine keeps through its release before the replays
    (:meth:`tracedoc.signals.base.SignalContext.release`)."""
    return key.startswith("stepmodel_")


class _Removed:
    """``removed(a, b)`` of a transformation (module docstring): the integral of ``1 - s(t)``
    over ``[a, b)``, vectorised; ``s(t)`` the smallest factor of the regions covering ``t``.

    One region removed whole (``s = 0``, as most fixes do), a union as the schedule's regions
    are: ``removed(a, b)`` is its covered length inside ``[a, b)``
    (:func:`~tracedoc.signals.intervals.covered_upto` over the region's prefix sums), one
    float per span held, where the breakpoints, rates and running sums below hold six: 15 MiB
    of a replay's transients on 1 M small events (issue 24). The floats are the same: with a
    rate of 1 between a span's bounds and 0 between spans, both add the same lengths in the
    same order."""

    def __init__(self, regions: dict[str, tuple[np.ndarray, np.ndarray]], scale: tuple[tuple[str, float], ...]):
        parts = [(regions[r], s) for r, s in scale if s < 1.0 and regions[r][0].size]
        self.whole: tuple[np.ndarray, np.ndarray, np.ndarray] | None = None
        if not parts:
            self.bp = np.zeros(0)
            return
        if len(parts) == 1 and parts[0][1] == 0.0 and is_union(*parts[0][0]):
            (st, en), _ = parts[0]
            self.whole = (st, en, covered_before(st, en))
            self.bp = st
            return
        if len(parts) == 1 and is_union(*parts[0][0]):
            # one region, a union (as the schedule's are): its bounds alternate start, end, and
            # the rate is 1 - s from each start to its end; the same arrays as below without the
            # sort, the searches and their temporaries (issue 24)
            (st, en), s = parts[0]
            bp = np.empty(2 * st.size)
            bp[0::2], bp[1::2] = st, en
            rate = np.zeros(bp.size)
            rate[0::2] = np.maximum(0.0, 1.0 - s)
        else:
            bp = sorted_unique(np.concatenate([np.concatenate([st, en]) for (st, en), _ in parts]))
            rate = np.zeros(bp.size)  # 1 - s on [bp[j], bp[j + 1])
            mid = bp[:-1]
            for (st, en), s in parts:
                k = np.searchsorted(st, mid, side="right") - 1
                inside = (k >= 0) & (mid < en[np.maximum(k, 0)])
                rate[:-1] = np.where(inside, np.maximum(rate[:-1], 1.0 - s), rate[:-1])
        self.bp, self.rate = bp, rate
        seg = np.diff(bp)
        seg *= rate[:-1]
        self.cum = np.concatenate([[0.0], np.cumsum(seg)])

    def _upto(self, x: np.ndarray) -> np.ndarray:
        """``removed(-inf, x)`` per point of the 1-d float array ``x`` (a chunk: its
        temporaries are a few arrays of its length). ``self.bp`` is not empty."""
        if self.whole is not None:
            return covered_upto(*self.whole, x)
        j = np.searchsorted(self.bp, x, side="right") - 1
        jj = np.maximum(j, 0)
        return np.where(j >= 0, self.cum[jj] + (x - self.bp[jj]) * self.rate[jj], 0.0)

    def __call__(self, a, b=None, length=None) -> np.ndarray:
        """``removed(a, max(a, b))`` per element, shape of ``a`` (µs); ``length`` instead of
        ``b`` gives ``b = a + length``, computed a chunk at a time (no array of ``b`` held).

        Elementwise, so computed in parts of :data:`_SHARES_CHUNK`: the whole-array form held
        the upper bounds, their clamp and both ends' sums for every anchor at once (some eight
        arrays per end, then four), a replay's peak under a launching-op transformation (issue
        24). The floats are the same.

        Raises:
            TypeError: both ``b`` and ``length`` given, or neither.
        """
        if (b is None) == (length is None):
            raise TypeError("removed(a, b) or removed(a, length=...): one upper bound")
        a = np.asarray(a, dtype=float)
        other = np.asarray(b if length is None else length, dtype=float)
        out = np.zeros(a.shape)
        if not self.bp.size:
            return out
        fa, fo, dest = a.reshape(-1), other.reshape(-1), out.reshape(-1)
        for lo in range(0, fa.size, _SHARES_CHUNK):
            pa, po = fa[lo : lo + _SHARES_CHUNK], fo[lo : lo + _SHARES_CHUNK]
            pb = np.maximum(po if length is None else pa + po, pa)
            part = self._upto(pb)
            part -= self._upto(pa)
            dest[lo : lo + pa.size] = part
        return out


@dataclass
class _Replay:
    """One replay: per step window the replayed ``[S_k, E_k)`` (NaN: no anchor), and, when
    traced, the critical path's ms per cause per window (µs, ``len(PATH_CAUSES)`` columns)."""

    start: np.ndarray
    end: np.ndarray
    path_us: np.ndarray | None = None


class _GapShares:
    """``shares(a, b)``: per interval ``[a_i, b_i)``, the share inside start-up, dataloader,
    zero_grad, optimizer_step and launching-op spans in that precedence (shape ``(n, 5)``; the
    rest is other CPU). The cumulative unions of those regions and their prefix sums
    (:func:`covered_before`) are built once, so asking about a few intervals at a time costs
    O(n log R) for R region spans, not O(R)."""

    def __init__(self, sch: _Schedule) -> None:
        self.levels = []
        s_acc, e_acc = np.zeros(0), np.zeros(0)
        for r in ("startup", "dataloader", "zero_grad", "optimizer_step", "launching_ops"):
            rs, re_ = sch.regions[r]
            # a union with nothing added, or the first region alone, is what merge would return
            if rs.size and not (s_acc.size == 0 and is_union(rs, re_)):
                s_acc, e_acc = merge(np.concatenate([s_acc, rs]), np.concatenate([e_acc, re_]))
            elif rs.size:
                s_acc, e_acc = rs, re_
            self.levels.append((s_acc, e_acc, covered_before(s_acc, e_acc)))

    def __call__(self, a: np.ndarray, b: np.ndarray) -> np.ndarray:
        out = np.zeros((a.size, len(_GAP_CAUSES)))
        # elementwise, so computed in chunks of intervals: covered_length's temporaries for every
        # anchor at once added 10 MiB to the traced replay's peak on 1 M small events (issue 24)
        for lo in range(0, a.size, _SHARES_CHUNK):
            ca, cb = a[lo : lo + _SHARES_CHUNK], b[lo : lo + _SHARES_CHUNK]
            length = np.maximum(cb - ca, 0.0)
            done = np.zeros(ca.size)
            for j, (sj, ej, before) in enumerate(self.levels):
                cov = covered_length(sj, ej, ca, np.maximum(ca, cb), before)
                out[lo : lo + ca.size, j] = np.divide(cov - done, length, out=np.zeros(ca.size), where=length > 0)
                done = cov
        return out


#: Intervals :class:`_GapShares` measures at once.
_SHARES_CHUNK = 1 << 16


@dataclass
class _AnchorOrder:
    """The parts of every replay that no transformation changes (built once per context)."""

    by_step: np.ndarray  # anchor indices, by step window then order (anchors outside windows first)
    bounds: np.ndarray  # step k's anchors are by_step[bounds[k]:bounds[k + 1]]
    prev: np.ndarray  # p_i: the latest end of the step's earlier anchors (cs_k before the first)
    gap_obs: np.ndarray  # max(ts_i - p_i, 0): the observed CPU time before anchor i
    t_from: np.ndarray  # per window, where its tail starts: its anchors' latest end, or cs_k


def _anchor_order(ctx: SignalContext) -> _AnchorOrder:
    """The :class:`_AnchorOrder` of the context's schedule (cached: every replay reads it)."""

    def build() -> _AnchorOrder:
        sch = _schedule(ctx)
        cs = step_windows(ctx)["cpu_start_us"].to_numpy()
        nw, na = cs.size, sch.a_ts.size
        prev = np.array(cs, dtype=float)[np.maximum(sch.a_step, 0)] if na else np.zeros(0)
        # each step's anchors, in order, from one stable sort: a scan of every anchor per step was
        # quadratic in the trace's length (11,667 steps of 35 M events, issue 24)
        by_step = sch.by_step
        bounds = np.searchsorted(sch.a_step[by_step], np.arange(nw + 1), side="left")
        for k in range(nw):
            sel = by_step[bounds[k] : bounds[k + 1]]
            if sel.size > 1:
                prev[sel[1:]] = np.maximum.accumulate(sch.a_end[sel])[:-1]
        t_from = np.array(cs, dtype=float)
        if na:
            has = sch.a_step >= 0
            np.maximum.at(t_from, sch.a_step[has], sch.a_end[has])
        return _AnchorOrder(by_step, bounds, prev, np.maximum(sch.a_ts - prev, 0.0), t_from)

    return ctx.cached("stepmodel_anchor_order", build)


def _replay(ctx: SignalContext, what: WhatIf, trace_path: bool = False) -> _Replay:
    """Replay every step window under ``what`` (module docstring); with ``trace_path`` also
    read the critical path of each replayed window.

    The transformation's arithmetic is vectorised; the pass itself is a loop over anchors and
    GPU events in order, reading and writing the arrays through memoryviews (:func:`_views`: a
    numpy scalar read costs about twice as much, and the loop is most of the step model's
    cost: issue 24's profile; 145 -> 70 ms per replay on the tiled x10 trace)."""
    sch = _schedule(ctx)
    order = _anchor_order(ctx)
    w = step_windows(ctx)
    ws, cs, ce = w["start_us"].to_numpy(), w["cpu_start_us"].to_numpy(), w["cpu_end_us"].to_numpy()
    nw, na = len(w), sch.a_ts.size
    removed = _Removed(sch.regions, what.cpu_scale)
    f = what.cpu_factor
    prev, gap_obs, t_from = order.prev, order.gap_obs, order.t_from
    # (gap_obs - removed) * f, written in place; the observed gaps themselves (no copy) when the
    # transformation removes no CPU time and f is 1, as in the traced replay (issue 24)
    if removed.bp.size:
        gap = removed(prev, length=gap_obs)
        np.subtract(gap_obs, gap, out=gap)
        if f != 1.0:
            gap *= f
    else:
        gap = gap_obs * f if f != 1.0 else gap_obs
    # a launch call's own time: the part of [ts, te) after the earlier anchors' latest end (merged
    # threads can overlap: their shared time counts once), (c1 - c0) - removed(c0, c1) in place
    c0 = np.maximum(sch.a_ts, prev)
    call = np.maximum(sch.a_end, c0)
    cut = removed(c0, call) if removed.bp.size else None
    call -= c0
    del c0
    if cut is not None:
        call -= cut
        del cut
    blocking = sch.a_class > 0
    waitless = np.zeros(na, dtype=bool)
    if "sync" in what.no_wait:
        waitless |= sch.a_class == 1
    if "pageable_copy" in what.no_wait:
        waitless |= sch.a_class == 2
    # the schedule's own arrays where the transformation leaves them as they are (a ratio of 1
    # divides exactly; the loop only reads them): three arrays of the GPU events fewer per replay
    dur, lat = sch.ev_dur, sch.ev_lat
    if what.tensor_core_ratio != 1.0:
        dur = np.where(sch.ev_tc_slow, dur / what.tensor_core_ratio, dur)
    if what.tf32_ratio != 1.0:
        dur = np.where(sch.ev_tf32, dur / what.tf32_ratio, dur)
    if what.gpu_scale:
        factor = np.ones(dur.size)
        for cls_, s_ in what.gpu_scale:
            member = {"comm": sch.ev_kind == 1, "zero_grad": sch.ev_zero_grad, "eager_attention": sch.ev_attention}[
                cls_
            ]
            factor = np.where(member, np.minimum(factor, s_), factor)
        dur = dur * factor
        lat = np.where(factor == 0.0, 0.0, lat)
        del factor
    # the CPU time between two steps (from the second on) and each step's tail, kept
    ce_prev = ce[:-1]
    between = np.maximum(cs[1:] - ce_prev, 0.0)
    between_kept = np.concatenate([[0.0], (between - removed(ce_prev, length=between)) * f])
    tail = np.maximum(ce - t_from, 0.0)
    tail_kept = (tail - removed(t_from, length=tail)) * f
    # the critical path's graph: nodes 0..na-1 anchors (CPU time and call), na..na+G-1 GPU
    # events, na+G+q the wait of the q-th blocking anchor the loop meets (a node per blocking
    # anchor, not per anchor: 12 bytes per launch anchor less, issue 24)
    n_ev = dur.size
    pred_a = np.full(na + n_ev + sch.wait_obs.size if trace_path else 0, -1, dtype=np.int32)
    nend_a = np.full(pred_a.size, np.nan)
    path = np.zeros((nw, len(PATH_CAUSES))) if trace_path else None
    # every per-anchor and per-event value the loop reads or writes, as memoryviews of the arrays:
    # a memoryview reads a Python float or int at a third of a numpy scalar read's cost and, unlike
    # a list, holds no object per element (lists of the 1 M-event trace's columns took 160 MiB)
    # replayed end per event, -inf (or NaN: no comparison holds either way) until replayed; a
    # traced replay's GPU nodes hold the same ends, so there it is their slice of nend_a
    ev_end_a = nend_a[na : na + n_ev] if trace_path else np.full(n_ev, -np.inf)
    gap_l, call_l, blocking_l, waitless_l = _views(gap, call, blocking, waitless)
    ptr, ev_rows = _views(sch.ev_ptr, sch.ev_rows)
    ev_stream, ev_dep, wait_obs, lat_l, dur_l = _views(sch.ev_stream, sch.ev_dep, sch.wait_obs, lat, dur)
    by_step, bounds, between_l, tail_l = _views(order.by_step, order.bounds, between_kept, tail_kept)
    pred, nend, ev_end = _views(pred_a, nend_a, ev_end_a)
    out_s, out_e = np.full(nw, np.nan), np.full(nw, np.nan)
    c = float(cs[0])
    cpu_node = -1
    free: dict[int, float] = {}
    free_node: dict[int, int] = {}
    window_end = float(ws[0])
    ready = float(ws[0])
    ready_node = -1
    q_wait = 0  # blocking anchors met so far
    walk = _Walk(sch, order, t_from, ce, dur) if trace_path else None
    for k in range(nw):
        c += between_l[k]
        cpu_start = c
        last_end, last_node = window_end, -1
        for q in range(bounds[k], bounds[k + 1]):
            i = by_step[q]
            c += gap_l[i]
            if not blocking_l[i]:
                c += call_l[i]
            if trace_path:
                pred[i], nend[i] = cpu_node, c
                cpu_node = i
            for j in range(ptr[i], ptr[i + 1]):
                r = ev_rows[j]
                st = ev_stream[r]
                t0, p0 = c, i
                fr = free.get(st, window_end)
                if fr > t0:
                    t0, p0 = fr, free_node.get(st, -1)
                d = ev_dep[r]
                if d >= 0 and ev_end[d] > t0:
                    t0, p0 = ev_end[d], na + d
                end = t0 + lat_l[r] + dur_l[r]
                ev_end[r] = end
                free[st], free_node[st] = end, na + r
                if end > ready:
                    ready, ready_node = end, na + r
                if end > last_end:
                    last_end, last_node = end, na + r
                if trace_path:
                    pred[na + r], nend[na + r] = p0, end
            if blocking_l[i]:
                if not waitless_l[i]:
                    waited = ready > c
                    c = max(c, ready) + wait_obs[q_wait]
                    if trace_path:
                        node = na + n_ev + q_wait
                        pred[node], nend[node] = (ready_node if waited else i), c
                        cpu_node = node
                q_wait += 1
        c += tail_l[k]
        start = max(cpu_start, window_end)
        end = max(c, last_end, start)
        if bounds[k + 1] > bounds[k]:
            out_s[k], out_e[k] = start, end
            if walk is not None:
                path[k] = walk(k, (start, end, c, last_end), (cpu_node, last_node), pred, nend)
        window_end = end
    return _Replay(out_s, out_e, path)


#: Column of each cause in a path row (built once: the walk adds to it per node on the path).
_COL = {c_: j for j, c_ in enumerate(PATH_CAUSES)}
_GAP_CAUSES = ("startup", "dataloader", "zero_grad", "optimizer_step", "launch_overhead")


def _views(*arrays: np.ndarray) -> list[memoryview]:
    """A flat memoryview of each array (made contiguous): indexing one gives a Python scalar."""
    return [memoryview(np.ascontiguousarray(x).reshape(-1)) for x in arrays]


class _Walk:
    """The walk back along one replayed window's critical path (module docstring).

    The CPU time before an anchor is split among the gap causes by its :class:`_GapShares`,
    measured for one window's anchors when the walk reaches that window: held for every anchor
    at once, the shares were 48 bytes per anchor and their build the traced replay's peak
    (71 -> 56 MiB on 1 M small events, issue 24). Per anchor the floats are the same: each
    interval's shares are computed alone."""

    def __init__(self, sch: _Schedule, order: _AnchorOrder, t_from, ce, dur: np.ndarray):
        self.na, self.n_ev = sch.a_ts.size, dur.size
        self.a_class, self.a_startup, self.ev_kind, self.dur = _views(sch.a_class, sch.a_startup, sch.ev_kind, dur)
        self.a_ts, self.a_end, self.a_step = _views(sch.a_ts, sch.a_end, sch.a_step)
        self.order = order
        self.shares_of = _GapShares(sch)
        tail = self.shares_of(t_from, np.maximum(ce, t_from))
        self.tail, self.tail_rest = _views(tail, np.maximum(1.0 - tail.sum(axis=1), 0.0))

    def _shares(self, anchors: np.ndarray) -> tuple[memoryview, memoryview]:
        """The gap shares (flat, 5 per anchor) and the rest of each of ``anchors``."""
        prev, gap_obs = self.order.prev[anchors], self.order.gap_obs[anchors]
        shares = self.shares_of(prev, prev + gap_obs)
        return tuple(_views(shares, np.maximum(1.0 - shares.sum(axis=1), 0.0)))

    def _window_shares(self, k: int) -> tuple[memoryview, memoryview, dict[int, int]]:
        """Window ``k``'s gap shares and rests (:meth:`_shares` of its anchors, in by_step
        order) and each of its anchors' row in them. The rows are found per window, when the
        walk first reaches one of its anchors: held for every anchor with its temporaries, they
        were 15 MiB of the traced replay's peak on 4 M small events (issue 24)."""
        anchors = self.order.by_step[self.order.bounds[k] : self.order.bounds[k + 1]]
        return (*self._shares(anchors), {a: j for j, a in enumerate(anchors.tolist())})

    def __call__(self, k: int, times: tuple[float, float, float, float], ends: tuple[int, int], pred, nend) -> list:
        """Window ``k``'s row of the path (µs per cause, :data:`PATH_CAUSES` order)."""
        start, end, c, last_end = times
        cpu_node, last_node = ends
        na, n_ev = self.na, self.n_ev
        row = [0.0] * len(PATH_CAUSES)
        col = _COL
        launch, startup, sync = col["launch_overhead"], col["startup"], col["sync"]
        gpu_wait = col["gpu_wait"]
        ev_col = (col["compute"], col["communication"], col["memcpy"])
        gap_cols = [col[c_] for c_ in _GAP_CAUSES]
        other = col["other_cpu"]
        mine = None  # this window's shares, measured when its first anchor is reached
        a_step = self.a_step

        n_gap = len(gap_cols)

        def add_cpu(amount: float, shares: memoryview, at: int, rest: float) -> None:
            for j, cj in enumerate(gap_cols):
                row[cj] += amount * shares[at + j]
            row[other] += amount * rest

        if c > last_end + TIE_US or last_node < 0:
            t_cpu = nend[cpu_node] if cpu_node >= 0 else start
            add_cpu(max(end - max(t_cpu, start), 0.0), self.tail, k * n_gap, self.tail_rest[k])
            node = cpu_node
        else:
            node = last_node
        guard, limit = 0, len(pred)
        while node >= 0 and nend[node] > start and guard < limit:
            guard += 1
            p = pred[node]
            t_pred = nend[p] if p >= 0 else start
            contrib = nend[node] - max(t_pred, start)
            if contrib > 0:
                if node < na:  # an anchor: its call, then the CPU time before it
                    own = 0.0 if self.a_class[node] > 0 else min(contrib, max(self.a_end[node] - self.a_ts[node], 0.0))
                    row[startup if self.a_startup[node] else launch] += own
                    if a_step[node] == k:
                        if mine is None:
                            mine = self._window_shares(k)
                        shares, rests, rows = mine
                        at = rows[node]
                    else:  # an anchor of another window on this path (rare): measured alone
                        shares, rests = self._shares(np.array([node]))
                        at = 0
                    add_cpu(contrib - own, shares, at * n_gap, rests[at])
                elif node < na + n_ev:
                    r = node - na
                    d = min(contrib, self.dur[r])
                    row[ev_col[self.ev_kind[r]]] += d
                    row[gpu_wait] += contrib - d
                else:
                    row[sync] += contrib
            node = p
        return row


def _cached_replay(ctx: SignalContext, what: WhatIf) -> _Replay:
    """The replay of ``what`` (cached). The unchanged replay is the one traced (its critical
    path is read): the critical-path signals read it on every GPU trace, and its windows are
    the same either way, so one traced replay serves both; no other replay is traced."""
    trace_path = what == BASELINE
    return ctx.cached(f"stepmodel_replay_{what.key}", lambda: _replay(ctx, what, trace_path))


def replay_steps_us(ctx: SignalContext, what: WhatIf = BASELINE) -> np.ndarray:
    """Replayed duration of every step window (µs, one per row of ``step_windows``; NaN for
    a window with no anchor), under the transformation ``what``.

    Raises:
        SignalUnavailable: no GPU activity, or no GPU event linked to its launch call.
    """
    r = _cached_replay(ctx, what)
    return r.end - r.start


def _mean_saving_ms(ctx: SignalContext, what: WhatIf) -> float:
    """Mean over complete steps of the baseline replay minus the replay under ``what``, ms."""
    base, after = replay_steps_us(ctx), replay_steps_us(ctx, what)
    m = complete_mask(ctx) & ~np.isnan(base) & ~np.isnan(after)
    if not m.any():
        raise SignalUnavailable("no complete step has GPU work launched from its CPU span")
    return float(np.mean(base[m] - after[m]) / 1000.0)


def fix_whatif(ctx: SignalContext, names: list[str] | tuple[str, ...]) -> WhatIf:
    """The transformation of the named fixes (:data:`FIXES`) applied together.

    Raises:
        KeyError: a name that is not a fix.
    """
    what = BASELINE
    for n in names:
        what = what.combine(FIXES[n].what(ctx))
    return what


def replay_saving_ms(ctx: SignalContext, names: list[str] | tuple[str, ...]) -> float:
    """What the named fixes save together per step, replayed, ms (>= 0; module docstring,
    "What-ifs"): one fix's saving, or the combined saving of several (never their sum). A
    CPU-only trace is replayed by the CPU step model
    (:func:`tracedoc.signals.cpumodel.cpu_replay_saving_ms`), which knows the fixes of
    :data:`tracedoc.signals.cpumodel.CPU_FIXES`.

    Raises:
        SignalUnavailable: no complete step with launches (a GPU trace), a CPU-only trace the
            CPU model cannot place, a GPU fix on a CPU-only trace, or a CPU-only fix on a GPU
            trace.
        KeyError: a name that is not a fix.
    """

    def compute() -> float:
        if not ctx.trace.has_gpu_activity:
            gpu_only = [n for n in names if n not in CPU_FIXES]
            if gpu_only:
                raise SignalUnavailable(f"the CPU step model does not replay {', '.join(gpu_only)}")
            return cpu_replay_saving_ms(ctx, names)
        cpu_only = [n for n in names if n not in FIXES]
        if cpu_only:
            raise SignalUnavailable(
                f"{', '.join(cpu_only)}: replayed on CPU-only traces only (tracedoc.signals.cpumodel)"
            )
        return max(_mean_saving_ms(ctx, fix_whatif(ctx, names)), 0.0)

    # kept with the signal values: a warm analysis (the frame cache's SignalStore) replays nothing
    return ctx.memo(f"replay_saving_ms[{'+'.join(names)}]", compute)


def fix_text(ctx: SignalContext, name: str) -> str:
    """What the named fix does, in words, for this trace (the CPU model's text on a CPU-only
    trace, where it has one).

    Raises:
        KeyError: a name that is not a fix.
    """
    if not ctx.trace.has_gpu_activity and name in CPU_FIXES:
        return CPU_FIXES[name]
    return FIXES[name].text


@signal("ms", scope="steps")
def replay_error_ms(ctx: SignalContext) -> float:
    """How far the unchanged replay is from the observed step windows: the mean over complete
    steps of ``|replayed - observed|`` window duration, ms (module docstring). Small against
    the step: the schedule holds the step; large: the step is held by what it leaves out.

    On a CPU-only trace: the CPU step model's error
    (:func:`tracedoc.signals.cpumodel.cpu_model_error_ms`).

    Raises:
        SignalUnavailable: no complete step with launches (a GPU trace), or a CPU-only trace
            the CPU model cannot place.
    """
    if not ctx.trace.has_gpu_activity:
        return cpu_model_error_ms(ctx)
    base = replay_steps_us(ctx)
    w = step_windows(ctx)
    m = complete_mask(ctx) & ~np.isnan(base)
    if not m.any():
        raise SignalUnavailable("no complete step has GPU work launched from its CPU span")
    return float(np.mean(np.abs(base[m] - w["dur_us"].to_numpy()[m])) / 1000.0)


@signal("ms", scope="steps")
def dataloader_replay_saving_ms(ctx: SignalContext) -> float:
    """What moving the DataLoader into workers saves per step, replayed, ms: the ``dataloader``
    fix, the high end of the range whose low end is :func:`dataloader_replay_saving_low_ms`. On
    a GPU trace: no contention. On a CPU-only trace: the CPU step model's
    (:mod:`tracedoc.signals.cpumodel`), the loading hidden by workers that need no core.

    Raises:
        SignalUnavailable: no complete step with launches (a GPU trace), or a CPU-only trace
            the CPU model cannot place.
    """
    return replay_saving_ms(ctx, ["dataloader"])


@signal("ms", scope="steps")
def dataloader_replay_saving_low_ms(ctx: SignalContext) -> float:
    """The low end of the DataLoader what-if's range, ms: the ``dataloader_low`` fix. On a GPU
    trace: the rest of the CPU work slowed by :func:`dataloader_contention`. On a CPU-only trace:
    the CPU step model's, all the arithmetic spread over fewer threads.

    Raises:
        SignalUnavailable: no complete step with launches (a GPU trace), or a CPU-only trace
            the CPU model cannot place.
    """
    return replay_saving_ms(ctx, ["dataloader_low"])


@signal("ms", scope="steps")
def tensor_core_replay_saving_ms(ctx: SignalContext) -> float:
    """What running the eligible kernels on Tensor Cores saves per step, replayed, ms: the
    ``tensor_cores`` fix with the device's peak ratio, an upper bound for AMP. On a step the
    host holds it is near 0, whatever the kernel time.

    Raises:
        SignalUnavailable: a CPU-only trace, or no complete step with launches.
    """
    return replay_saving_ms(ctx, ["tensor_cores"])


@signal("ms", scope="steps")
def tensor_core_kernel_saving_ms(ctx: SignalContext) -> float:
    """The kernel time the ``tensor_cores`` fix removes, per complete step, ms: the sum over
    eligible kernels that do not use Tensor Cores, launched from a complete step, of
    ``d * (1 - 1/r)`` (:func:`tensor_core_ratio`), plus the sum over eligible TF32 Tensor Core
    kernels launched from a complete step of ``d * (1 - 1/r32)`` (:func:`tf32_tensor_core_ratio`),
    divided by the number of complete steps. The
    slice-style upper bound beside :func:`tensor_core_replay_saving_ms`: what AMP saves if every
    such kernel were on the critical path.

    Raises:
        SignalUnavailable: a CPU-only trace, or no complete step with launches.
    """
    from tracedoc.signals.attribution import kernel_ops
    from tracedoc.signals.ledger import _runtime_classes
    from tracedoc.signals.tensor_core import tf32_kernel_mask

    # the schedule's GPU events (:func:`_schedule`) of the complete steps' anchors, found without
    # building it: that 29 MiB on 1 M small events was then held through every later rule
    # (issue 24). A linked event's launch call is on a launching thread by definition; it is an
    # anchor when it issues GPU work or blocks. Summed in the schedule's order (anchor start,
    # anchor row, event start): the same floats.
    g = gpu_events(ctx)
    on_dev, _ = _model_device(ctx, g)
    pos = g["rt_pos"].to_numpy()
    if not (on_dev & (pos >= 0)).any():
        raise SignalUnavailable("no GPU event is linked to the runtime call that launched it")
    complete = complete_mask(ctx)
    if not complete.any():
        raise SignalUnavailable("no complete step has GPU work launched from its CPU span")
    ko = kernel_ops(ctx)
    nk = len(ko)
    eligible, tensor_core = ko["eligible"].to_numpy(), ko["tensor_core"].to_numpy()
    cls = _runtime_classes(ctx)
    anchor_call = cls["issues_gpu"].to_numpy() | cls["blocking"].to_numpy()
    rt_ts = ctx.trace.runtime["ts_us"].to_numpy(dtype=float)
    w = step_windows(ctx)
    cs, ce = w["cpu_start_us"].to_numpy(), w["cpu_end_us"].to_numpy()
    gs, ge = g["ts_us"].to_numpy(dtype=float)[:nk], g["end_us"].to_numpy(dtype=float)[:nk]

    def kernel_ms(member: np.ndarray) -> float:  # kernels come first in gpu_events
        rows = np.flatnonzero(member & on_dev[:nk] & (pos[:nk] >= 0))
        at = pos[rows].astype(np.int64)
        rows, at = rows[anchor_call[at]], at[anchor_call[at]]
        a_ts = rt_ts[at]
        k = np.searchsorted(cs, a_ts, side="right") - 1
        ok = (k >= 0) & (a_ts < ce[np.maximum(k, 0)])
        ok[ok] = complete[k[ok]]
        rows, at, a_ts = rows[ok], at[ok], a_ts[ok]
        rows = rows[np.lexsort((gs[rows], at, a_ts))]
        return float((ge[rows] - gs[rows]).sum())

    r, r32 = tensor_core_ratio(ctx), tf32_tensor_core_ratio(ctx)
    removed = kernel_ms(eligible & ~tensor_core) * (1.0 - 1.0 / r)
    removed += kernel_ms(eligible & tensor_core & tf32_kernel_mask(ctx)) * (1.0 - 1.0 / r32)
    return removed / int(complete.sum()) / 1000.0


def critical_path_ms(ctx: SignalContext) -> dict[str, float]:
    """The critical path of the unchanged replay: ms per step on the path by cause
    (:data:`PATH_CAUSES`), the mean over complete steps; they add up to the mean replayed step.

    Raises:
        SignalUnavailable: a CPU-only trace, or no complete step with launches.
    """
    r = _cached_replay(ctx, BASELINE)
    m = complete_mask(ctx) & ~np.isnan(r.end)
    if not m.any():
        raise SignalUnavailable("no complete step has GPU work launched from its CPU span")
    mean = r.path_us[m].mean(axis=0) / 1000.0
    return {c: float(v) for c, v in zip(PATH_CAUSES, mean, strict=True)}


@signal("share", scope="steps")
def critical_path_host_share(ctx: SignalContext) -> float:
    """Share (0..1) of the replayed step whose critical path runs on the host (CPU causes of
    :func:`critical_path_ms`): near 1, a host-bound step, where GPU speed-ups save nothing.

    Raises:
        SignalUnavailable: a CPU-only trace, or no complete step with launches.
    """
    cp = critical_path_ms(ctx)
    total = sum(cp.values())
    return sum(cp[c] for c in HOST_PATH_CAUSES) / total if total > 0 else 0.0


@signal("share", scope="steps")
def critical_path_device_share(ctx: SignalContext) -> float:
    """Share (0..1) of the replayed step whose critical path runs on the device (kernels,
    copies and GPU waits): near 1, a device-bound step, where host fixes save nothing.

    Raises:
        SignalUnavailable: a CPU-only trace, or no complete step with launches.
    """
    cp = critical_path_ms(ctx)
    total = sum(cp.values())
    return sum(cp[c] for c in DEVICE_PATH_CAUSES) / total if total > 0 else 0.0


def _register_path_signals() -> None:
    for cause in PATH_CAUSES:

        def f(ctx: SignalContext, cause: str = cause) -> float:
            return critical_path_ms(ctx)[cause]

        f.__name__ = f"critical_path_{cause}_ms"
        f.__doc__ = (
            f"ms per step the critical path spends in ``{cause}`` (:func:`critical_path_ms`, the "
            "mean over complete steps).\n\n    Raises:\n        SignalUnavailable: a CPU-only trace, "
            "or no complete step with launches."
        )
        signal("ms", scope="steps")(f)


_register_path_signals()
