"""Tensor Core signals: how much kernel time runs on Tensor Cores, and how much could.

Kernel classes come from name patterns kept as data in ``patterns.toml``; the
launching op comes from :mod:`tracedoc.signals.attribution`. All shares are of the
total kernel time of kernels that start inside the (complete) step windows.
"""

from __future__ import annotations

import pandas as pd

from tracedoc.signals.attribution import kernel_ops
from tracedoc.signals.base import SignalContext, SignalUnavailable, signal
from tracedoc.signals.gpu import kernels_in_windows_mask
from tracedoc.signals.steps import complete_mask

#: First NVIDIA compute capability with Tensor Cores (Volta, sm_70).
#: Source: NVIDIA Volta architecture whitepaper (2017).
TENSOR_CORE_MIN_CC = (7, 0)


def _window_kernels(ctx: SignalContext) -> pd.DataFrame:
    ko = kernel_ops(ctx)[kernels_in_windows_mask(ctx)]
    if not len(ko) or ko["dur_us"].sum() <= 0:
        raise SignalUnavailable("no kernel time inside the step windows")
    return ko


@signal("bool")
def has_tensor_cores(ctx: SignalContext) -> bool:
    """Whether the primary device has Tensor Cores: NVIDIA compute capability >= 7.0.

    Unavailable without device properties, and for AMD GPUs (their matrix-core
    kernel names are not classified yet).
    """
    dev = ctx.device
    if dev is None or dev.compute_capability is None:
        raise SignalUnavailable("the trace has no device properties (compute capability unknown)")
    if dev.vendor != "NVIDIA":
        raise SignalUnavailable(
            f"Tensor Core detection covers NVIDIA GPUs only; this trace ran on {dev.vendor} {dev.name}"
        )
    return tuple(dev.compute_capability) >= TENSOR_CORE_MIN_CC


@signal("share")
def tensor_core_kernel_share(ctx: SignalContext) -> float:
    """Kernel time of Tensor Core kernels (name patterns) / all kernel time in the steps (0..1)."""
    ko = _window_kernels(ctx)
    return float(ko.loc[ko["tensor_core"], "dur_us"].sum() / ko["dur_us"].sum())


@signal("share")
def tc_eligible_kernel_share(ctx: SignalContext) -> float:
    """Kernel time from Tensor-Core-eligible work (GEMM/conv/attention ops or kernels) / all kernel time (0..1)."""
    ko = _window_kernels(ctx)
    return float(ko.loc[ko["eligible"], "dur_us"].sum() / ko["dur_us"].sum())


@signal("share")
def tc_eligible_non_tc_share(ctx: SignalContext) -> float:
    """Kernel time that is eligible but not on Tensor Core kernels / all kernel time (0..1)."""
    ko = _window_kernels(ctx)
    m = ko["eligible"] & ~ko["tensor_core"]
    return float(ko.loc[m, "dur_us"].sum() / ko["dur_us"].sum())


@signal("ms")
def tc_eligible_non_tc_ms(ctx: SignalContext) -> float:
    """Eligible kernel time not on Tensor Cores, ms per step."""
    ko = _window_kernels(ctx)
    m = ko["eligible"] & ~ko["tensor_core"]
    return float(ko.loc[m, "dur_us"].sum() / 1000.0 / max(int(complete_mask(ctx).sum()), 1))


@signal("table")
def top_non_tc_eligible_kernels(ctx: SignalContext) -> list[dict]:
    """The eligible kernels not on Tensor Cores with the most time: kernel, op, ms per step, count per step."""
    ko = _window_kernels(ctx)
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
