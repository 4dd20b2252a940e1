"""Host-to-device copy signals (``Memcpy HtoD`` GPU events).

Kineto names each copy with its source memory: ``Memcpy HtoD (Pageable -> Device)``
is staged by the driver through a pinned bounce buffer and cannot overlap compute;
``(Pinned -> Device)`` can be asynchronous (CUDA C Best Practices Guide, "Pinned
Memory" and "Asynchronous and Overlapping Transfers with Computation").

A copy that a kernel overlaps costs the step no wall-clock time; ``h2d_exposed_share``
keeps only the copy time with no compute kernel running on the same device.
"""

from __future__ import annotations

import numpy as np
import pandas as pd

from tracedoc.signals.base import SignalContext, SignalUnavailable, signal
from tracedoc.signals.intervals import overlap_per_window, subtract
from tracedoc.signals.steps import (
    averaged,
    complete_mask,
    gpu_events,
    in_complete_steps,
    primary_gpu_events,
    step_windows,
)


def _h2d(ctx: SignalContext, pageable_only: bool = False) -> pd.DataFrame:
    t = ctx.trace
    if not t.has_gpu_activity:
        raise SignalUnavailable("the trace has no GPU activity (a CPU-only trace)")
    m = t.memcpys
    m = m[m["copy_kind"] == "HtoD"]
    if pageable_only:
        m = m[m["src_memory"] == "Pageable"]
    return m[in_complete_steps(ctx, m["ts_us"].to_numpy())]


def _per_step(ctx: SignalContext) -> int:
    return max(int(complete_mask(ctx).sum()), 1)


def _interval_share(ctx: SignalContext, starts: np.ndarray, ends: np.ndarray) -> float:
    # union of the intervals inside each step window, summed over the complete steps / their length
    w = step_windows(ctx)
    per = overlap_per_window(starts, ends, w["start_us"].to_numpy(), w["end_us"].to_numpy())
    return averaged(ctx, per)


def _time_share(ctx: SignalContext, m: pd.DataFrame) -> float:
    return _interval_share(ctx, m["ts_us"].to_numpy(), m["end_us"].to_numpy())


@signal("share", scope="all devices")
def h2d_share(ctx: SignalContext) -> float:
    """Union of HtoD copy intervals inside the step windows / step time (0..1)."""
    return _time_share(ctx, _h2d(ctx))


@signal("ms", scope="all devices")
def h2d_ms(ctx: SignalContext) -> float:
    """HtoD copy time per step, ms: ``h2d_share * step_time_ms``."""
    return ctx.get("h2d_share") * ctx.get("step_time_ms")


@signal("share")
def h2d_exposed_share(ctx: SignalContext) -> float:
    """Host-to-device copy time on the primary device that no compute kernel overlaps, over the
    step time (0..1).

    ``union(HtoD copies) - union(compute kernels)``, both on the primary device (the one with the
    most kernel time): the ``Memcpy HtoD`` events that start inside a complete step, minus every
    interval in which a kernel other than a communication kernel (NCCL/RCCL, ...,
    :mod:`tracedoc.signals.comm`) runs on any stream of that device. What remains is clipped to the
    complete step windows and summed, over their total length (µs / µs), as ``h2d_share`` is.
    The subtraction is Holistic Trace Analysis's exposed-communication measure applied to copies
    (as ``exposed_comm_kernel_ms`` does): an overlapped copy is hidden behind compute (CUDA C Best
    Practices Guide, "Asynchronous and Overlapping Transfers with Computation") and costs the step
    nothing, so only the exposed part is time the step waits on the copy.

    Returns 0.0 when the steps hold no HtoD copy on the primary device.

    Raises:
        SignalUnavailable: a CPU-only trace; the step windows have zero length.
    """
    m = _h2d(ctx)
    dev = ctx.device
    # the primary device as primary_gpu_events chooses it (a trace whose GPU events name no
    # described device keeps all of them)
    if dev is not None and (gpu_events(ctx)["device"] == dev.id).any():
        m = m[(m["device"] == dev.id).to_numpy()]
    g = primary_gpu_events(ctx)
    k = g[(g["kind"] == "kernel").to_numpy() & ~g["comm"].to_numpy(dtype=bool)]
    s, e = subtract(
        m["ts_us"].to_numpy(dtype=float),
        m["end_us"].to_numpy(dtype=float),
        k["ts_us"].to_numpy(dtype=float),
        k["end_us"].to_numpy(dtype=float),
    )
    return _interval_share(ctx, s, e)


@signal("ms")
def h2d_exposed_ms(ctx: SignalContext) -> float:
    """Host-to-device copy time per step that no compute kernel overlaps on the primary device, ms:
    ``h2d_exposed_share * step_time_ms``."""
    return ctx.get("h2d_exposed_share") * ctx.get("step_time_ms")


@signal("bytes", scope="all devices")
def h2d_bytes_per_step(ctx: SignalContext) -> float:
    """Bytes copied host-to-device per step (``args.bytes``; NaN-sized copies count 0)."""
    return float(_h2d(ctx)["bytes"].fillna(0).sum() / _per_step(ctx))


@signal("count", scope="all devices")
def h2d_count_per_step(ctx: SignalContext) -> float:
    """HtoD copies per step."""
    return len(_h2d(ctx)) / _per_step(ctx)


@signal("count", scope="all devices")
def pageable_h2d_count(ctx: SignalContext) -> float:
    """HtoD copies from pageable host memory, per step."""
    return len(_h2d(ctx, pageable_only=True)) / _per_step(ctx)


@signal("bytes", scope="all devices")
def pageable_h2d_bytes_per_step(ctx: SignalContext) -> float:
    """Bytes copied host-to-device from pageable memory per step."""
    return float(_h2d(ctx, pageable_only=True)["bytes"].fillna(0).sum() / _per_step(ctx))


@signal("share", scope="all devices")
def pageable_h2d_share(ctx: SignalContext) -> float:
    """Union of pageable HtoD copy intervals / step time (0..1)."""
    return _time_share(ctx, _h2d(ctx, pageable_only=True))


@signal("ms", scope="all devices")
def pageable_h2d_ms(ctx: SignalContext) -> float:
    """Pageable HtoD copy time per step, ms: ``pageable_h2d_share * step_time_ms``."""
    return ctx.get("pageable_h2d_share") * ctx.get("step_time_ms")


@signal("table", scope="all devices")
def top_h2d_copies(ctx: SignalContext) -> list[dict]:
    """The largest HtoD copies per step: name, bytes per copy, mean µs, copies per step."""
    m = _h2d(ctx)
    n = _per_step(ctx)
    g = m.groupby(["name", "bytes"], dropna=False).agg(us=("dur_us", "mean"), count=("dur_us", "size"))
    g = g.reset_index().sort_values(["bytes", "us"], ascending=False).head(5)
    return [
        {
            "copy": r["name"],
            "bytes": None if pd.isna(r["bytes"]) else int(r["bytes"]),
            "mean_us": round(float(r.us), 2),
            "per_step": round(float(r["count"]) / n, 2),
        }
        for _, r in g.iterrows()
    ]
