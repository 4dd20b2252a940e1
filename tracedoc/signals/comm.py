"""Communication classification: which kernels and CPU spans are collective communication.

Name patterns are data (``patterns.toml``, tables ``communication_kernels`` and
``communication_ops``, each family with its source). Used by the step-time breakdown,
the idle ledger, ``exposed-communication`` and the cross-rank collective comparison.
"""

from __future__ import annotations

from tracedoc.signals.base import SignalContext, SignalUnavailable, signal  # noqa: E402
from tracedoc.signals.catalog import comm_kernel_mask, comm_op_mask  # noqa: F401  (re-exported)
from tracedoc.signals.intervals import merge, overlap_per_window, subtract  # noqa: E402
from tracedoc.signals.steps import (  # noqa: E402
    averaged,
    comm_ops,
    complete_mask,
    primary_gpu_events,
    step_windows,
)


def _per_step_ms(ctx: SignalContext, starts, ends) -> float:
    w = step_windows(ctx)
    per = overlap_per_window(starts, ends, w["start_us"].to_numpy(), w["end_us"].to_numpy())
    return averaged(ctx, per) * ctx.get("step_time_ms")


def _comm_kernels(ctx: SignalContext):
    g = primary_gpu_events(ctx)
    c = g[g["comm"].to_numpy(dtype=bool)]
    if not len(c):
        raise SignalUnavailable("the trace has no communication kernels (NCCL/RCCL, symmetric-memory, DeepEP)")
    k = g[(g["kind"] == "kernel").to_numpy() & ~g["comm"].to_numpy(dtype=bool)]
    return c, k


@signal("ms")
def comm_kernel_ms(ctx: SignalContext) -> float:
    """Wall-clock time per step with a communication kernel running on the primary device
    (union over streams), ms."""
    c, _ = _comm_kernels(ctx)
    return _per_step_ms(ctx, c["ts_us"].to_numpy(float), c["end_us"].to_numpy(float))


@signal("ms")
def exposed_comm_kernel_ms(ctx: SignalContext) -> float:
    """Communication-kernel time per step with no compute kernel running on the primary device, ms.

    Holistic Trace Analysis's comm/comp overlap: overlap = |comm ∩ compute| / |comm|; the
    exposed part is |comm| - |comm ∩ compute| (union intervals, any stream).
    """
    c, k = _comm_kernels(ctx)
    s, e = subtract(
        c["ts_us"].to_numpy(float), c["end_us"].to_numpy(float), k["ts_us"].to_numpy(float), k["end_us"].to_numpy(float)
    )
    return _per_step_ms(ctx, s, e)


@signal("share")
def comm_overlap_share(ctx: SignalContext) -> float:
    """Share of communication-kernel time overlapped by compute kernels (HTA's comm/comp overlap), 0..1."""
    total = ctx.get("comm_kernel_ms")
    if total <= 0:
        raise SignalUnavailable("no communication-kernel time inside the steps")
    return 1.0 - ctx.get("exposed_comm_kernel_ms") / total


@signal("ms", scope="host")
def cpu_comm_ms(ctx: SignalContext) -> float:
    """Time per step the step waits on CPU-side collectives, ms.

    With GPU activity: the idle ledger's ``communication`` slice (primary GPU idle while a
    launching thread is inside a ``gloo:*``/``c10d::*`` span). On a CPU-only trace: the
    union of those spans. Unavailable when the trace has no such spans.
    """
    ops = comm_ops(ctx)
    if not len(ops):
        raise SignalUnavailable("the trace has no CPU communication spans (gloo:*, c10d::*, record_param_comms)")
    if ctx.trace.has_gpu_activity:
        return ctx.get("idle_communication_ms")
    s, e = merge(ops["ts_us"].to_numpy(float), ops["end_us"].to_numpy(float))
    return _per_step_ms(ctx, s, e)


@signal("ms")
def exposed_comm_ms(ctx: SignalContext) -> float:
    """Communication the step waits on, ms per step: exposed communication kernels (GPU busy
    with no compute) plus CPU-side collective waits (``cpu_comm_ms``). The two are disjoint:
    one is GPU-busy time, the other GPU-idle (or CPU-only) time."""
    kern, why_k = ctx.try_get("exposed_comm_kernel_ms")
    cpu, why_c = ctx.try_get("cpu_comm_ms")
    if kern is None and cpu is None:
        raise SignalUnavailable(f"{why_k}; {why_c}")
    return float((kern or 0.0) + (cpu or 0.0))


@signal("share")
def exposed_comm_share(ctx: SignalContext) -> float:
    """``exposed_comm_ms / step_time_ms`` (0..1)."""
    return ctx.get("exposed_comm_ms") / ctx.get("step_time_ms")


@signal("count")
def collectives_per_step(ctx: SignalContext) -> float:
    """Communication kernels (else CPU collective spans) per complete step."""
    n = max(int(complete_mask(ctx).sum()), 1)
    try:
        c, _ = _comm_kernels(ctx)
        return len(c) / n
    except SignalUnavailable:
        return len(comm_ops(ctx)) / n
