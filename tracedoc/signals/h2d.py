"""Host-to-device copy signals (``Memcpy HtoD`` GPU events).

Kineto names each copy with its source memory: ``Memcpy HtoD (Pageable -> Device)``
is staged by the driver through a pinned bounce buffer and cannot overlap compute;
``(Pinned -> Device)`` can be asynchronous (CUDA C Best Practices Guide, "Pinned
Memory" and "Asynchronous and Overlapping Transfers with Computation").
"""

from __future__ import annotations

import pandas as pd

from tracedoc.signals.base import SignalContext, SignalUnavailable, signal
from tracedoc.signals.intervals import overlap_per_window
from tracedoc.signals.steps import averaged, complete_mask, in_complete_steps, step_windows


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


def _time_share(ctx: SignalContext, m: pd.DataFrame) -> float:
    w = step_windows(ctx)
    per = overlap_per_window(
        m["ts_us"].to_numpy(), m["end_us"].to_numpy(), w["start_us"].to_numpy(), w["end_us"].to_numpy()
    )
    return averaged(ctx, per)


@signal("share", scope="all devices")
def h2d_share(ctx: SignalContext) -> float:
    """Union of HtoD copy intervals inside the step windows / step time (0..1)."""
    return _time_share(ctx, _h2d(ctx))


@signal("ms", scope="all devices")
def h2d_ms(ctx: SignalContext) -> float:
    """HtoD copy time per step, ms: ``h2d_share * step_time_ms``."""
    return ctx.get("h2d_share") * ctx.get("step_time_ms")


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
