"""Device memory signals from ``[memory]`` instant events (``profile_memory=True``).

Only events of an accelerator ``Device Type`` on the primary device that carry
``Total Allocated`` (PyTorch >= 1.10) are used; older traces carry only per-event
deltas with an unknown starting level, so the peak cannot be known from them.
``Device Type`` is PyTorch's ``c10::DeviceType`` (c10/core/DeviceType.h): 0 CPU,
1 CUDA, 6 HIP (ROCm builds record their GPU allocations as HIP), 19 MTIA.
"""

from __future__ import annotations

from tracedoc.signals.base import SignalContext, SignalUnavailable, signal

CUDA_DEVICE_TYPE = 1
HIP_DEVICE_TYPE = 6
MTIA_DEVICE_TYPE = 19
#: ``c10::DeviceType`` values whose ``[memory]`` events are device (not host) memory.
DEVICE_MEMORY_TYPES = (CUDA_DEVICE_TYPE, HIP_DEVICE_TYPE, MTIA_DEVICE_TYPE)


def _allocated(ctx: SignalContext):
    mem = ctx.trace.memory
    dev = ctx.device
    m = mem[mem["device_type"].isin(DEVICE_MEMORY_TYPES) & mem["total_allocated_bytes"].notna()]
    if dev is not None and (m["device_id"] == dev.id).any():
        m = m[m["device_id"] == dev.id]
    if not len(m):
        raise SignalUnavailable(
            "the trace has no GPU [memory] events with 'Total Allocated' (record with profile_memory=True)"
        )
    return m


@signal("bytes")
def peak_memory_bytes(ctx: SignalContext) -> float:
    """Peak ``Total Allocated`` bytes on the primary GPU over the trace (CUDA, HIP or MTIA
    ``[memory]`` events).

    Raises:
        SignalUnavailable: no device ``[memory]`` event carries ``Total Allocated``.
    """
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
