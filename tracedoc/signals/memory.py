"""Device memory signals from ``[memory]`` instant events (``profile_memory=True``).

Only events with ``Device Type`` 1 (CUDA) on the primary device that carry
``Total Allocated`` (PyTorch >= 1.10) are used; older traces carry only per-event
deltas with an unknown starting level, so the peak cannot be known from them.
"""

from __future__ import annotations

from tracedoc.signals.base import SignalContext, SignalUnavailable, signal

CUDA_DEVICE_TYPE = 1


def _allocated(ctx: SignalContext):
    mem = ctx.trace.memory
    dev = ctx.device
    m = mem[(mem["device_type"] == CUDA_DEVICE_TYPE) & mem["total_allocated_bytes"].notna()]
    if dev is not None and (m["device_id"] == dev.id).any():
        m = m[m["device_id"] == dev.id]
    if not len(m):
        raise SignalUnavailable(
            "the trace has no GPU [memory] events with 'Total Allocated' (record with profile_memory=True)"
        )
    return m


@signal("bytes")
def peak_memory_bytes(ctx: SignalContext) -> float:
    """Peak ``Total Allocated`` bytes on the primary GPU over the trace."""
    return float(_allocated(ctx)["total_allocated_bytes"].max())


@signal("bytes")
def device_memory_bytes(ctx: SignalContext) -> float:
    """The primary GPU's memory (``totalGlobalMem``), bytes."""
    dev = ctx.device
    if dev is None or not dev.total_memory_bytes:
        raise SignalUnavailable("the trace has no device properties with totalGlobalMem")
    return float(dev.total_memory_bytes)


@signal("share")
def peak_memory_share(ctx: SignalContext) -> float:
    """``peak_memory_bytes / device_memory_bytes`` (0..1)."""
    return ctx.get("peak_memory_bytes") / ctx.get("device_memory_bytes")
