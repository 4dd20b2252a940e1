"""GPU utilisation signals: busy share, idle shares, kernel statistics.

Idle time and its causes come from the idle ledger (:mod:`tracedoc.signals.ledger`),
so every idle figure in a report adds up; the shares here are ledger slices divided
by the step time. All cover the primary device.
"""

from __future__ import annotations

import numpy as np
import pandas as pd

from tracedoc.signals.base import SignalContext, SignalUnavailable, signal
from tracedoc.signals.intervals import overlap_per_window
from tracedoc.signals.steps import (
    averaged,
    complete_mask,
    in_complete_steps,
    keep_rows,
    primary_gpu_events,
    rows_of,
    step_windows,
)
from tracedoc.signals.strings import owned_frame, text_rows


def _require_kernels(ctx: SignalContext) -> None:
    if not len(ctx.trace.kernels):
        raise SignalUnavailable("the trace has no GPU kernels (a CPU-only trace)")


@signal("share")
def gpu_busy_share(ctx: SignalContext) -> float:
    """Union of kernel intervals on the primary device over the step windows / step time (0..1)."""
    _require_kernels(ctx)
    k = primary_gpu_events(ctx)
    k = k[(k["kind"] == "kernel").to_numpy()]
    w = step_windows(ctx)
    busy = overlap_per_window(
        k["ts_us"].to_numpy(dtype=float),
        k["end_us"].to_numpy(dtype=float),
        w["start_us"].to_numpy(),
        w["end_us"].to_numpy(),
    )
    return averaged(ctx, busy)


def _per_step_share(ctx: SignalContext, ms: float) -> float:
    step = ctx.get("step_time_ms")
    if step <= 0:
        raise SignalUnavailable("the step windows have zero length")
    return ms / step


@signal("share")
def gpu_idle_share(ctx: SignalContext) -> float:
    """Share of step time with no kernel, memcpy or memset on the primary device (0..1): ``gpu_idle_ms / step_time_ms``."""
    _require_kernels(ctx)
    return _per_step_share(ctx, ctx.get("gpu_idle_ms"))


@signal("share")
def idle_host_wait_share(ctx: SignalContext) -> float:
    """Share of step time the primary GPU idles waiting for the host (the idle ledger's host-wait causes), 0..1."""
    _require_kernels(ctx)
    return _per_step_share(ctx, ctx.get("idle_host_wait_ms"))


@signal("share")
def idle_kernel_wait_share(ctx: SignalContext) -> float:
    """Share of step time the primary GPU idles with work already queued (ledger ``kernel_wait`` + ``other_idle``), 0..1."""
    _require_kernels(ctx)
    return _per_step_share(ctx, ctx.get("idle_kernel_wait_ms") + ctx.get("idle_other_idle_ms"))


@signal("share")
def launch_overhead_share(ctx: SignalContext) -> float:
    """Share of step time the primary GPU idles while the CPU launches work (ledger ``launch_overhead``), 0..1.

    The idle time attributable to the CPU not launching work fast enough (Python,
    dispatcher and ``cudaLaunchKernel`` time per op), with every other host-wait cause
    (DataLoader, blocking calls, allocator, communication, start-up, zero_grad) removed.
    """
    _require_kernels(ctx)
    return _per_step_share(ctx, ctx.get("idle_launch_overhead_ms"))


def kernels_in_windows_mask(ctx: SignalContext) -> np.ndarray:
    """Boolean mask over ``trace.kernels``: a kernel of the primary device that starts inside a complete step window.

    Raises:
        SignalUnavailable: the trace has no kernels.
    """
    _require_kernels(ctx)
    k = ctx.trace.kernels
    mask = in_complete_steps(ctx, k["ts_us"].to_numpy())
    dev = ctx.device
    if dev is not None and (k["device"] == dev.id).any():
        mask &= (k["device"] == dev.id).to_numpy()
    return mask


def _kernels_in_windows(ctx: SignalContext) -> pd.DataFrame:
    # a view where the windows keep one run of kernels (keep_rows): counting them copied the
    # kernels frame, 23 MiB on 1 M small events (issue 24)
    return keep_rows(ctx.trace.kernels, kernels_in_windows_mask(ctx))


@signal("count")
def kernels_per_step(ctx: SignalContext) -> float:
    """Mean number of kernels starting inside a complete step window."""
    return len(_kernels_in_windows(ctx)) / max(int(complete_mask(ctx).sum()), 1)


@signal("us")
def median_kernel_us(ctx: SignalContext) -> float:
    """Median kernel duration inside the step windows, µs."""
    k = _kernels_in_windows(ctx)
    if not len(k):
        raise SignalUnavailable("no kernel starts inside a step window")
    return float(k["dur_us"].median())


@signal("table")
def top_launching_ops(ctx: SignalContext) -> list[dict]:
    """Ops that launch the most kernels per step, with the mean duration of those kernels."""
    from tracedoc.signals.attribution import kernel_ops

    ko = keep_rows(kernel_ops(ctx), kernels_in_windows_mask(ctx))
    n_steps = max(int(complete_mask(ctx).sum()), 1)
    g = ko.groupby("op", dropna=False).agg(kernels=("dur_us", "size"), mean_kernel_us=("dur_us", "mean"))
    g = g.sort_values("kernels", ascending=False).head(5)
    return [
        {
            "op": str(op),
            "kernels_per_step": round(float(r.kernels) / n_steps, 1),
            "mean_kernel_us": round(float(r.mean_kernel_us), 2),
        }
        for op, r in g.iterrows()
    ]


#: The categories of :func:`kernel_time_by_category`, in the order reports show them.
KERNEL_CATEGORIES = ("communication", "GEMM/conv on Tensor Cores", "GEMM/conv not on Tensor Cores", "other compute")


def _categorised_kernels(ctx: SignalContext) -> tuple[pd.DataFrame, int]:
    """Kernels starting in the step windows (:func:`tracedoc.signals.attribution.kernel_ops`
    rows, its index), as the columns ``name``, ``dur_us`` (µs) and ``category`` (one of
    :data:`KERNEL_CATEGORIES`), and the number of complete steps to average over (at least 1).
    Only those three columns: a filtered copy of every column of ``kernel_ops`` held 42 MiB on
    a trace of 1 M events (issue 24).

    A kernel is *communication* when its name is a collective's
    (:func:`tracedoc.signals.catalog.comm_kernel_mask`); else *on Tensor Cores* or *not on
    Tensor Cores* by the Tensor Core signals' classification (``tensor_core``, then
    ``eligible``: :mod:`tracedoc.signals.tensor_core`); else *other compute*.

    Raises:
        SignalUnavailable: no kernel starts in a step window.
    """

    def build() -> tuple[pd.DataFrame, int]:
        from tracedoc.signals.attribution import kernel_ops
        from tracedoc.signals.catalog import comm_kernel_mask

        _require_kernels(ctx)
        ko = kernel_ops(ctx)
        keep = kernels_in_windows_mask(ctx)
        if not keep.any():
            raise SignalUnavailable("no kernel starts inside a step window")
        n = max(int(complete_mask(ctx).sum()), 1)
        idx = ko.index[keep]
        names = text_rows(ko["name"], lambda v: rows_of(v, keep), idx)
        comm = comm_kernel_mask(names)
        tc = ko["tensor_core"].to_numpy(dtype=bool)[keep] & ~comm
        elig = ko["eligible"].to_numpy(dtype=bool)[keep] & ~comm & ~tc
        # the category's index, a Categorical of KERNEL_CATEGORIES: np.where over the texts
        # made fixed-width unicode arrays (116 bytes a kernel each, three of them at once: +44 to
        # 77 MiB on 1 M small events, the analysis's peak), then a text per kernel, which the
        # groupbys below hashed one by one (a further 20 MiB; issue 24)
        code = np.where(comm, 0, np.where(tc, 1, np.where(elig, 2, 3))).astype(np.int8)
        cat = pd.Series(
            pd.Categorical.from_codes(code, categories=pd.Index(KERNEL_CATEGORIES, dtype=object)), index=idx
        )
        dur = rows_of(ko["dur_us"].to_numpy(dtype=float), keep)
        return owned_frame({"name": names, "dur_us": dur, "category": cat}, index=idx), n

    return ctx.cached("categorised_kernels", build)


@signal("table", scope="steps")
def kernel_time_by_category(ctx: SignalContext) -> list[dict]:
    """Kernel time per complete step by category: ``[{"category", "ms_per_step"}]``, one row per
    :data:`KERNEL_CATEGORIES` entry in that order (0.0 where none), kernels starting in the step
    windows (see :func:`_categorised_kernels` for the categories)."""
    ko, n = _categorised_kernels(ctx)
    by_cat = (ko.groupby("category")["dur_us"].sum() / 1000.0 / n).to_dict()
    return [{"category": c, "ms_per_step": round(float(by_cat.get(c, 0.0)), 3)} for c in KERNEL_CATEGORIES]


@signal("table", scope="steps")
def top_kernels(ctx: SignalContext) -> list[dict]:
    """The 10 kernels (by name) with the most time per complete step: ``[{"kernel",
    "ms_per_step", "count_per_step", "category"}]``, largest first (kernels starting in the step
    windows; ``category`` as in :func:`kernel_time_by_category`)."""
    ko, n = _categorised_kernels(ctx)
    g = ko.groupby("name").agg(us=("dur_us", "sum"), count=("dur_us", "size"), category=("category", "first"))
    g = g.sort_values("us", ascending=False, kind="stable").head(10)
    return [
        {
            "kernel": str(name),
            "ms_per_step": round(float(r.us) / 1000.0 / n, 3),
            "count_per_step": round(float(r["count"]) / n, 1),
            "category": str(r.category),
        }
        for name, r in g.iterrows()
    ]
