"""GEMMs and convolutions below the Tensor Core peak, with the shape that explains it.

Built on the op view (:mod:`tracedoc.signals.opview`): op calls grouped by name and recorded
inputs, each group's GPU time from the kernels it launched, its FLOPs, bytes and implicit-GEMM
dimensions ``m``, ``n``, ``k`` from :func:`tracedoc.perf.flops.op_cost`. Only groups of kind
``gemm`` or ``conv`` with a cost model (recorded shapes) are read; kernels attach to the
innermost op, so each GEMM is counted at one level only. The batched matmuls of eager attention
(ops whose kernels :mod:`tracedoc.signals.attention` counts as eager attention) are left out:
TD310 (unfused-attention) owns them, and its fix (a fused attention kernel) removes them.

A group is *below peak* when both hold:

- its achieved rate is under :data:`BELOW_PEAK_FRACTION` of the roofline's attainable rate
  ``min(peak TFLOP/s, intensity * peak TB/s)`` (Williams, Waterman and Patterson, CACM 2009)
  against the device's Tensor Core peak for its dtype (fp32: the TF32 Tensor Core peak), and
- its shape explains it (:func:`gemm_reasons`): ``unaligned`` (``m``, ``n`` or ``k`` not a
  multiple of 16 bytes' worth of elements, :attr:`tracedoc.perf.flops.OpCost.tc_aligned`),
  ``small`` (a dimension under :data:`SMALL_DIM`), or ``fp32`` (an fp32 matmul, which PyTorch
  runs off the Tensor Cores by default, on an NVIDIA GPU with TF32 Tensor Cores).

The saving of one group is its time above what the same work takes at
:data:`REALISTIC_FRACTION` of the attainable rate:
``max(0, t - max(flops / (f * peak TFLOP/s), bytes / (f * peak TB/s)))`` per call.
"""

from __future__ import annotations

import re

from tracedoc.signals.base import SignalContext, SignalUnavailable, signal

#: Fraction of the roofline's attainable rate that well-shaped GEMMs reach in practice. Source:
#: measured on fixtures/h100_timesformer_inference (``tracedoc ops``): its aligned bf16 ``addmm``
#: groups (m = 25,096, n and k multiples of 768) reach 72-76% of the H100 SXM's 989.5 TFLOP/s
#: bf16 Tensor Core peak; the low end is taken.
REALISTIC_FRACTION = 0.72
#: A GEMM is "far below peak" under this fraction of the attainable rate: under 0.5 it takes more
#: than 1.44x the time of the same work at :data:`REALISTIC_FRACTION`. A judgment: above it the
#: shape costs too little to be worth changing.
BELOW_PEAK_FRACTION = 0.5
#: A dimension under this is "small": the smallest Tensor Core tiles cuBLAS and CUTLASS pick are
#: 64 wide (NVIDIA, "Matrix Multiplication Background User's Guide", section "Tile
#: Quantization": tiles 256x128, 128x256, 128x128, 64x128, 128x64, 64x64), so a dimension under
#: 64 leaves part of every tile idle; a ``k`` under 64 gives each tile too few multiply-adds to
#: hide the loads and the epilogue.
SMALL_DIM = 64
#: First NVIDIA compute capability with TF32 Tensor Cores (Ampere, sm_80). Source: NVIDIA A100
#: Tensor Core GPU architecture whitepaper (2020); PyTorch docs, "CUDA semantics", section
#: "TensorFloat-32 (TF32) on Ampere (and later) devices".
TF32_MIN_CC = (8, 0)
#: Rows of :func:`top_gemms_below_peak`.
TOP_N = 10
_KINDS = ("gemm", "conv")
#: Op names of GEMM and convolution work (the ``aten::`` ops :func:`tracedoc.perf.flops.op_cost`
#: models as ``gemm``/``conv``, and their PyTorch 1.x spellings): where their kernels ran for ops
#: the model could not read (no shapes, no Concrete Inputs) more than for the ones it could, the
#: signals are unavailable rather than a verdict on the minority.
GEMM_OP_NAME = re.compile(r"^aten::(?:.*conv.*|mm|bmm|addmm|baddbmm|addbmm|matmul|linear|_scaled_mm)$")


def _tf32_available(ctx: SignalContext, peak) -> bool:
    """An NVIDIA GPU of compute capability 8.0 or later whose peak row has a TF32 rate."""
    dev = ctx.trace.primary_device()
    if dev is None or peak is None or peak.tf32_tc is None or peak.vendor != "nvidia":
        return False
    cc = dev.compute_capability
    return cc is None or tuple(cc) >= TF32_MIN_CC


def _eager_attention_ops(ctx: SignalContext) -> set[str]:
    """Names of the ops that launched the batched-matmul kernels of eager attention."""
    from tracedoc.signals.attention import _eager_mask, attention_kernels

    try:
        ak = attention_kernels(ctx)
    except SignalUnavailable:
        return set()
    m = _eager_mask(ak) & ak["batched_matmul"].to_numpy()
    return {str(x) for x in ak.loc[m, "op"].dropna().unique()}


def gemm_reasons(cost, tf32: bool) -> list[str]:
    """Why a GEMM's shape keeps it off its Tensor Core peak (module docstring): a sublist of
    ``["fp32", "unaligned", "small"]``."""
    out = []
    if cost.kind == "gemm" and cost.dtype == "fp32" and tf32:
        out.append("fp32")
    if cost.tc_aligned is False:
        out.append("unaligned")
    if min(cost.m, cost.n, cost.k) < SMALL_DIM:
        out.append("small")
    return out


def _below_peak(ctx: SignalContext) -> tuple[list[dict], int]:
    """The GEMM/convolution groups below peak (rows as in :func:`top_gemms_below_peak`, largest
    saving first) and the number of complete steps."""

    def build():
        from tracedoc.signals.opview import _group_costs, _op_calls, device_peak

        _, _, n = _op_calls(ctx)
        peak = device_peak(ctx)
        if peak is None:
            raise SignalUnavailable("the device's peak is unknown (tracedoc.perf.peaks)")
        g = _group_costs(ctx)
        unmodelled = g[g["kind"].isna() & g["name"].map(lambda x: bool(GEMM_OP_NAME.search(str(x))))]
        g = g[g["kind"].isin(_KINDS)]
        if not len(g):
            raise SignalUnavailable("no GEMM or convolution with recorded shapes (record_shapes=True)")
        if unmodelled["gpu_us"].sum() > g["gpu_us"].sum():
            raise SignalUnavailable(
                f"most GEMM/convolution time has no cost model ({unmodelled['gpu_us'].sum() / 1000.0 / n:.1f} ms "
                "per step; convolutions need Concrete Inputs, recorded since PyTorch 2.0)"
            )
        g = g[~g["name"].isin(_eager_attention_ops(ctx))]
        tf32 = _tf32_available(ctx, peak)
        bw = peak.mem_tbs
        rows = []
        for r in g.itertuples(index=False):
            cost = r.cost  # the group's OpCost, computed once by the op view
            if cost is None or cost.m is None or cost.n is None or cost.k is None or not (r.gpu_us > 0):
                continue
            reasons = gemm_reasons(cost, tf32)
            p = peak.peak_tflops(cost.dtype, True)
            if not reasons or not p or not bw:
                continue
            t = float(r.gpu_us) / r.calls * 1e-6  # seconds per call
            attainable = min(p, (cost.flops / cost.bytes) * bw) if cost.bytes > 0 else p  # TFLOP/s
            achieved = cost.flops / t / 1e12
            if not (achieved < BELOW_PEAK_FRACTION * attainable):
                continue
            target = max(cost.flops / (REALISTIC_FRACTION * p * 1e12), cost.bytes / (REALISTIC_FRACTION * bw * 1e12))
            dims = f"{cost.m}x{cost.n}x{cost.k}" + (f" (x{cost.batch})" if cost.batch and cost.batch > 1 else "")
            rows.append(
                {
                    "op": str(r.name),
                    "mnk": dims,
                    "dtype": cost.dtype,
                    "reason": ", ".join(reasons),
                    "calls_per_step": round(r.calls / n, 2),
                    "gpu_ms": float(r.gpu_us) / 1000.0 / n,
                    "pct_of_peak": round(100.0 * achieved / p, 1),
                    "pct_of_attainable": round(100.0 * achieved / attainable, 1),
                    "saving_ms": max(0.0, t - target) * r.calls / n * 1000.0,
                }
            )
        rows.sort(key=lambda x: -x["saving_ms"])
        return rows, n

    return ctx.cached("gemm_below_peak", build)


@signal("ms", scope="steps")
def gemm_below_peak_ms(ctx: SignalContext) -> float:
    """GPU time per complete step of the GEMM/convolution op groups that run under
    :data:`BELOW_PEAK_FRACTION` of their attainable Tensor Core rate for a reason their shape
    shows (module docstring): the sum of the kernel time they launched, over the steps.

    Raises:
        SignalUnavailable: no kernels, an unknown device peak, or no GEMM/convolution with
            recorded shapes.
    """
    rows, _ = _below_peak(ctx)
    return float(sum(r["gpu_ms"] for r in rows))


@signal("share", scope="steps")
def gemm_below_peak_share(ctx: SignalContext) -> float:
    """``gemm_below_peak_ms / step_time_ms`` (0..1)."""
    step = ctx.get("step_time_ms")
    if not step or not (step > 0):
        raise SignalUnavailable("no step time")
    return min(float(ctx.get("gemm_below_peak_ms")) / float(step), 1.0)


@signal("ms", scope="steps")
def gemm_below_peak_saving_ms(ctx: SignalContext) -> float:
    """Per complete step, the kernel time of the below-peak GEMMs above what the same FLOPs and
    bytes take at :data:`REALISTIC_FRACTION` of the Tensor Core and bandwidth peaks:
    ``sum over groups of calls * max(0, t - max(flops / (f * peak), bytes / (f * bw)))``, f = 0.72."""
    rows, _ = _below_peak(ctx)
    return float(sum(r["saving_ms"] for r in rows))


@signal("table", scope="steps")
def top_gemms_below_peak(ctx: SignalContext) -> list[dict]:
    """The :data:`TOP_N` below-peak GEMM/convolution groups by saving: ``{"op", "mnk"``
    (implicit GEMM ``m x n x k``, batch), ``"dtype", "reason"`` (``fp32``, ``unaligned``,
    ``small``), ``"calls_per_step", "gpu_ms"`` (per step), ``"pct_of_peak"`` (achieved TFLOP/s
    over the Tensor Core peak for the dtype; fp32: TF32),
    ``"pct_of_attainable"`` (of the roofline's attainable rate), ``"saving_ms"}`` (per step)."""
    rows, _ = _below_peak(ctx)
    return [{**r, "gpu_ms": round(r["gpu_ms"], 3), "saving_ms": round(r["saving_ms"], 3)} for r in rows[:TOP_N]]
