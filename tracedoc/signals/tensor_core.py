"""Tensor Core signals: how much kernel time runs on Tensor Cores, how much could, and how much
of the GEMM/conv work already has 16-bit inputs.

Kernel classes come from name patterns kept as data in ``patterns.toml``; the
launching op comes from :mod:`tracedoc.signals.attribution`. All shares are of the
total kernel time of the primary device's kernels that start inside the (complete) step
windows (``tc_eligible_low_precision_share``: of their GEMM/conv time). "Tensor Core" covers
NVIDIA Tensor Cores and AMD CDNA matrix cores (MFMA); layout transposes are neither Tensor
Core nor GEMM/conv work.
"""

from __future__ import annotations

import re

import numpy as np
import pandas as pd

from tracedoc.signals.attribution import kernel_ops
from tracedoc.signals.base import SignalContext, SignalUnavailable, signal
from tracedoc.signals.gpu import kernels_in_windows_mask
from tracedoc.signals.intervals import overlap_per_window
from tracedoc.signals.steps import complete_mask, keep_rows, step_windows
from tracedoc.signals.strings import cached_name_mask

#: First NVIDIA compute capability with Tensor Cores (Volta, sm_70).
#: Source: NVIDIA Volta architecture whitepaper (2017).
TENSOR_CORE_MIN_CC = (7, 0)

#: AMD Instinct GPUs with matrix cores (MFMA), matched in the device name: MI100 (CDNA,
#: gfx908), MI200 (CDNA2, gfx90a: MI210/MI250/MI250X), MI300 (CDNA3, gfx942: MI300A/X,
#: MI325X) and later (CDNA4, gfx950: MI350/MI355X). Source: AMD CDNA, CDNA2 and CDNA3
#: architecture whitepapers. MI50/MI60/MI25/MI8/MI6 (GCN/Vega) have none.
AMD_MATRIX_CORE_NAME = re.compile(r"\bMI(100|[2-4]\d\d)[A-Z]?\b", re.IGNORECASE)
#: gfx94x and later (HIP reports gfx942 as compute capability 9.4) are CDNA3+: all have MFMA.
AMD_MATRIX_CORE_MIN_CC = (9, 4)
#: gfx9.0 covers both Vega (gfx900/gfx906: at most 64 compute units, no MFMA: MI25, MI50,
#: MI60, Radeon VII) and CDNA1/2 (gfx908: 120 CUs; gfx90a: 104 or 110 CUs per GCD). More
#: than this many compute units on a 9.0 device means CDNA (whitepapers above).
AMD_VEGA_MAX_CUS = 64


#: A kernel that computes in TF32 on Tensor Cores, by name: the ``tf32`` data-type token of cuDNN,
#: cuBLAS and CUTLASS kernel names (``sm90_xmma_fprop_implicit_gemm_f32f32_tf32f32_f32_...``,
#: ``cutlass_tensorop_s1688dgrad_optimized_tf32_...`` in this project's H100 recordings,
#: ``fixtures/h100_resnet18_*``). The ``s1688`` instruction token alone does not say TF32: it names
#: the fp32 accumulator of the m16n8k8 MMA, which 16-bit kernels use too
#: (``cutlass_75_tensorop_bf16_s1688gemm_bf16_...`` in ``fixtures/h100_timesformer_inference``).
TF32_KERNEL = re.compile(r"tf32", re.IGNORECASE)


def tf32_kernel_mask(ctx: SignalContext) -> np.ndarray:
    """Per row of ``trace.kernels``: the kernel's name says it computes in TF32 (:data:`TF32_KERNEL`)."""
    return cached_name_mask(ctx, "kernels", "tf32_kernel", TF32_KERNEL.search)


def _primary_kernel_mask(ctx: SignalContext) -> np.ndarray:
    """Kernels (rows of ``kernel_ops``) of the primary device that start in a complete step."""
    ko = kernel_ops(ctx)
    m = kernels_in_windows_mask(ctx)
    dev = ctx.device
    if dev is not None and (ko["device"] == dev.id).any():
        m = m & (ko["device"] == dev.id).to_numpy()
    return m


def window_kernels(ctx: SignalContext) -> pd.DataFrame:
    """Rows of :func:`~tracedoc.signals.attribution.kernel_ops` for the primary device's kernels
    that start inside a complete step window (cached per context; the same columns).

    Raises:
        SignalUnavailable: no kernel, or no kernel time, inside the step windows.
    """
    # filtered once per context: the Tensor Core signals and compiled_kernel_share read it
    # every kernel kept (no kernel outside the windows): the same frame, not a copy (issue 24)
    ko = ctx.cached("window_kernels", lambda: keep_rows(kernel_ops(ctx), _primary_kernel_mask(ctx)))
    if not len(ko) or ko["dur_us"].sum() <= 0:
        raise SignalUnavailable("no kernel time inside the step windows")
    return ko


_window_kernels = window_kernels  # the older private name (tracedoc.signals.attention imports it)


def union_ms_per_step(ctx: SignalContext, starts: np.ndarray, ends: np.ndarray) -> float:
    """Wall-clock time covered by intervals ``[starts, ends)`` (µs) inside the complete step
    windows, ms per complete step.

    The intervals are merged first, so overlapping kernels (several streams) count once and
    the result can never exceed the step time. Returns 0.0 for no intervals.
    """
    w = step_windows(ctx)
    m = complete_mask(ctx)
    per = overlap_per_window(starts, ends, w["start_us"].to_numpy()[m], w["end_us"].to_numpy()[m])
    return float(per.sum() / 1000.0 / max(int(m.sum()), 1))


def _amd_has_matrix_cores(name: str, cc: tuple[int, int] | None, cus: int | None) -> bool | None:
    if AMD_MATRIX_CORE_NAME.search(name):
        return True
    if cc is None:
        return None
    if tuple(cc) >= AMD_MATRIX_CORE_MIN_CC and cc[0] == 9:
        return True
    if tuple(cc) == (9, 0) and cus is not None:
        return cus > AMD_VEGA_MAX_CUS
    if cc[0] < 9:
        return False
    return None


@signal("bool")
def has_tensor_cores(ctx: SignalContext) -> bool:
    """Whether the primary device has Tensor Cores (NVIDIA) or matrix cores (AMD).

    NVIDIA: compute capability >= 7.0 (Volta). AMD: an Instinct MI100/MI200/MI300/MI400
    name, or gfx94x+ (compute capability 9.4+), or gfx9.0 with more than 64 compute units
    (gfx908/gfx90a; Vega gfx900/gfx906 has at most 64 and no MFMA). See the constants above
    for sources.

    Raises:
        SignalUnavailable: no device properties; another vendor (MTIA, ...); an AMD device
            whose generation cannot be told from its properties.
    """
    dev = ctx.device
    if dev is not None and dev.vendor not in ("NVIDIA", "AMD"):
        raise SignalUnavailable(f"Tensor Core detection covers NVIDIA and AMD GPUs; this trace ran on {dev.full_name}")
    if dev is None or (dev.compute_capability is None and dev.vendor != "AMD"):
        raise SignalUnavailable("the trace has no device properties (compute capability unknown)")
    if dev.vendor == "AMD":
        has = _amd_has_matrix_cores(dev.name, dev.compute_capability, dev.num_sms)
        if has is None:
            gfx = "gfx {}.{}".format(*dev.compute_capability) if dev.compute_capability else "no gfx version"
            raise SignalUnavailable(f"cannot tell whether {dev.full_name} ({gfx}) has matrix cores")
        return has
    return tuple(dev.compute_capability) >= TENSOR_CORE_MIN_CC


@signal("share")
def tensor_core_kernel_share(ctx: SignalContext) -> float:
    """Kernel time of Tensor Core kernels (name patterns; layout transforms never count) / all
    kernel time in the steps (0..1)."""
    ko = window_kernels(ctx)
    return float(ko.loc[ko["tensor_core"], "dur_us"].sum() / ko["dur_us"].sum())


@signal("share")
def tc_eligible_kernel_share(ctx: SignalContext) -> float:
    """Kernel time from Tensor-Core-eligible work (GEMM/conv/attention ops or kernels, layout
    transforms excluded) / all kernel time (0..1)."""
    ko = window_kernels(ctx)
    return float(ko.loc[ko["eligible"], "dur_us"].sum() / ko["dur_us"].sum())


@signal("share")
def tc_eligible_non_tc_share(ctx: SignalContext) -> float:
    """Kernel time that is eligible but not on Tensor Core kernels / all kernel time (0..1)."""
    ko = window_kernels(ctx)
    m = ko["eligible"] & ~ko["tensor_core"]
    return float(ko.loc[m, "dur_us"].sum() / ko["dur_us"].sum())


@signal("share")
def tc_eligible_low_precision_share(ctx: SignalContext) -> float:
    """Share of GEMM/convolution kernel time whose inputs are already 16-bit or narrower (0..1).

    Numerator: summed durations (µs) of the eligible kernels (GEMM/conv/attention work, layout
    transforms excluded; :func:`~tracedoc.signals.attribution.kernel_ops`) whose names carry a
    16-bit-or-narrower input type: ``[low_precision_gemm_inputs]`` of ``patterns.toml`` (fp16/bf16
    tokens of cuBLAS/cuDNN/CUTLASS/MIOpen names, ``h884``/``hgemm`` HMMA kernels, ``__half`` /
    ``__nv_bfloat16`` / ``c10::BFloat16`` / ``ck::half_t`` template arguments, Tensile's
    ``Cijk_..._BBS``/``HB`` type fields, FlashAttention, FP8/INT8 GEMMs; each family cites its
    source there). Denominator: summed durations of all eligible kernels. Both over the primary
    device's kernels that start inside the complete step windows. A kernel whose name states no
    type counts as not 16-bit (fp32 kernels such as ``volta_sgemm_*`` state none either).

    The dtype comes from kernel names only: the loader does not keep the ``Input type`` argument
    of CPU ops (``record_shapes=True`` traces), so op-recorded types are not read.

    Returns 0.0 when the steps hold no GEMM/convolution kernel time (nothing is 16-bit).

    Raises:
        SignalUnavailable: no kernel time inside the step windows.
    """
    ko = window_kernels(ctx)
    elig = ko.loc[ko["eligible"], "dur_us"].sum()
    if elig <= 0:
        return 0.0
    return float(ko.loc[ko["low_precision"], "dur_us"].sum() / elig)


@signal("ms")
def tc_eligible_non_tc_ms(ctx: SignalContext) -> float:
    """Wall-clock time of eligible kernels not on Tensor Cores, ms per step: the union (merged
    intervals) of those kernels on the primary device, clipped to the complete step windows.

    Kernels overlapping on several streams count once, so this never exceeds the step time.
    """
    ko = window_kernels(ctx)
    m = (ko["eligible"] & ~ko["tensor_core"]).to_numpy()
    return union_ms_per_step(ctx, ko["ts_us"].to_numpy()[m], ko["end_us"].to_numpy()[m])


@signal("table")
def top_non_tc_eligible_kernels(ctx: SignalContext) -> list[dict]:
    """The eligible kernels not on Tensor Cores with the most time: kernel, op, ms per step, count per step."""
    ko = window_kernels(ctx)
    ko = ko[ko["eligible"] & ~ko["tensor_core"]]
    n = max(int(complete_mask(ctx).sum()), 1)
    g = ko.groupby("name").agg(ms=("dur_us", "sum"), count=("dur_us", "size"))
    g = g.sort_values("ms", ascending=False).head(5)
    # the launching op of each listed kernel: its most frequent one (ties: first in name order)
    top = ko[ko["name"].isin(g.index)].dropna(subset=["op"])
    pairs = top.groupby(["name", "op"]).size().sort_values(ascending=False, kind="stable")
    most = pairs.reset_index().drop_duplicates("name").set_index("name")["op"]
    g["op"] = most.reindex(g.index).astype(object).where(most.reindex(g.index).notna(), None)
    return [
        {
            "kernel": name,
            "op": r.op,
            "ms_per_step": round(r.ms / 1000 / n, 3),
            "count_per_step": round(float(r["count"]) / n, 1),
        }
        for name, r in g.iterrows()
    ]
