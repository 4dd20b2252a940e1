"""GPU utilisation signals: busy share, idle time split by cause, launch overhead.

Idle gaps are the holes in the union of all GPU activity (kernels, memcpys,
memsets) on the primary device. A gap is *host-wait* when the runtime call that
launched the activity ending the gap began at or after the gap's start: the GPU had
nothing queued and waited for the CPU to issue work. Otherwise (work was already
queued, or the launch cannot be linked by ``correlation``) it is *kernel-wait*
(dependencies, events, other streams). This is the "idle time" split of Holistic
Trace Analysis (HTA), which calls the first kind "host wait".
"""

from __future__ import annotations

import numpy as np
import pandas as pd

from tracedoc.signals.base import SignalContext, SignalUnavailable, signal
from tracedoc.signals.intervals import merge, overlap_per_window
from tracedoc.signals.steps import (
    averaged,
    complete_mask,
    dataloader_spans,
    gpu_events,
    in_complete_steps,
    step_windows,
)


def _require_kernels(ctx: SignalContext) -> None:
    if not len(ctx.trace.kernels):
        raise SignalUnavailable("the trace has no GPU kernels (a CPU-only trace)")


def _device_events(ctx: SignalContext) -> pd.DataFrame:
    dev = ctx.device
    g = gpu_events(ctx)
    if dev is not None and (g["device"] == dev.id).any():
        g = g[g["device"] == dev.id]
    return g


def idle_gaps(ctx: SignalContext) -> pd.DataFrame:
    """Idle gaps of the primary device: start_us, end_us, host_wait (bool), launch_ts_us."""

    def build() -> pd.DataFrame:
        _require_kernels(ctx)
        g = _device_events(ctx)
        ms, me = merge(g["ts_us"].to_numpy(), g["end_us"].to_numpy())
        w = step_windows(ctx)
        lo, hi = w["start_us"].min(), w["end_us"].max()
        # gaps between merged blocks, plus the leading/trailing idle of the windows
        gs = np.concatenate([[lo], me])
        ge = np.concatenate([ms, [hi]])
        keep = ge > gs
        gs, ge = gs[keep], ge[keep]
        # the event that ends each gap: the earliest-starting GPU event at ge
        order = np.argsort(g["ts_us"].to_numpy(), kind="stable")
        ev_ts = g["ts_us"].to_numpy()[order]
        ev_corr = g["correlation"].to_numpy()[order]
        k = np.searchsorted(ev_ts, ge, side="left")
        has_next = k < ev_ts.size
        corr = np.where(has_next, ev_corr[np.minimum(k, ev_ts.size - 1)], np.nan)
        rt = ctx.trace.runtime
        launch = pd.Series(rt["ts_us"].to_numpy(), index=rt["correlation"].to_numpy())
        launch = launch[~launch.index.isna()]
        launch = launch[~launch.index.duplicated()]
        launch_ts = launch.reindex(corr).to_numpy() if len(launch) else np.full(corr.size, np.nan)
        host_wait = has_next & (launch_ts >= gs)
        return pd.DataFrame({"start_us": gs, "end_us": ge, "host_wait": host_wait, "launch_ts_us": launch_ts})

    return ctx.cached("idle_gaps", build)


def _idle_per_step(ctx: SignalContext, which: str) -> np.ndarray:
    gaps = idle_gaps(ctx)
    if which == "host":
        gaps = gaps[gaps["host_wait"]]
    elif which == "kernel":
        gaps = gaps[~gaps["host_wait"]]
    w = step_windows(ctx)
    return overlap_per_window(
        gaps["start_us"].to_numpy(), gaps["end_us"].to_numpy(), w["start_us"].to_numpy(), w["end_us"].to_numpy()
    )


@signal("share")
def gpu_busy_share(ctx: SignalContext) -> float:
    """Union of kernel intervals on the primary device over the step windows / step time (0..1)."""
    _require_kernels(ctx)
    k = ctx.trace.kernels
    dev = ctx.device
    if dev is not None and (k["device"] == dev.id).any():
        k = k[k["device"] == dev.id]
    w = step_windows(ctx)
    busy = overlap_per_window(
        k["ts_us"].to_numpy(), k["end_us"].to_numpy(), w["start_us"].to_numpy(), w["end_us"].to_numpy()
    )
    return averaged(ctx, busy)


@signal("share")
def gpu_idle_share(ctx: SignalContext) -> float:
    """Share of step time with no kernel, memcpy or memset on the primary device (0..1)."""
    return averaged(ctx, _idle_per_step(ctx, "all"))


@signal("share")
def idle_host_wait_share(ctx: SignalContext) -> float:
    """Share of step time the GPU idles waiting for the host to launch work (module doc), 0..1."""
    return averaged(ctx, _idle_per_step(ctx, "host"))


@signal("share")
def idle_kernel_wait_share(ctx: SignalContext) -> float:
    """Share of step time the GPU idles with work already launched (module doc), 0..1."""
    return averaged(ctx, _idle_per_step(ctx, "kernel"))


@signal("share")
def launch_idle_share(ctx: SignalContext) -> float:
    """Host-wait idle time outside DataLoader spans, as a share of step time (0..1).

    This is the idle time attributable to the CPU not launching work fast enough
    (Python and dispatcher overhead per op, ``cudaLaunchKernel`` latency), with the
    time the host spent fetching a batch removed (that is ``dataloader-stall``'s).
    """
    gaps = idle_gaps(ctx)
    gaps = gaps[gaps["host_wait"]]
    dl = dataloader_spans(ctx)
    w = step_windows(ctx)
    ws, we = w["start_us"].to_numpy(), w["end_us"].to_numpy()
    total = overlap_per_window(gaps["start_us"].to_numpy(), gaps["end_us"].to_numpy(), ws, we)
    if len(dl):
        from tracedoc.signals.intervals import subtract

        s, e = subtract(
            gaps["start_us"].to_numpy(), gaps["end_us"].to_numpy(), dl["ts_us"].to_numpy(), dl["end_us"].to_numpy()
        )
        total = overlap_per_window(s, e, ws, we)
    return averaged(ctx, total)


@signal("ms")
def launch_idle_ms(ctx: SignalContext) -> float:
    """Host-wait idle outside DataLoader spans per step, ms: ``launch_idle_share * step_time_ms``."""
    return ctx.get("launch_idle_share") * ctx.get("step_time_ms")


def kernels_in_windows_mask(ctx: SignalContext) -> np.ndarray:
    """Boolean mask over ``trace.kernels``: the kernel starts inside a complete step window.

    Raises:
        SignalUnavailable: the trace has no kernels.
    """
    _require_kernels(ctx)
    return in_complete_steps(ctx, ctx.trace.kernels["ts_us"].to_numpy())


def _kernels_in_windows(ctx: SignalContext) -> pd.DataFrame:
    return ctx.trace.kernels[kernels_in_windows_mask(ctx)]


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

    ko = kernel_ops(ctx)[kernels_in_windows_mask(ctx)]
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
