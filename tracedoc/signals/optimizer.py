"""Optimizer signals: the cost of ``optimizer.zero_grad()`` and of ``optimizer.step()``.

PyTorch annotates them as ``Optimizer.zero_grad#<Class>.zero_grad`` and
``Optimizer.step#<Class>.step``. With ``set_to_none=False`` zero_grad launches one fill
(or memset) kernel per parameter tensor; with ``set_to_none=True`` (the default since
PyTorch 2.0) it launches none. ``step()`` with ``foreach=False`` launches a few kernels per
parameter (``add_``, ``mul_``, ``addcdiv_``...); with ``foreach=True`` (the default on CUDA
when every parameter is on the GPU, PyTorch >= 2.0) it launches ``multi_tensor_apply_kernel``
over chunks of the parameter list, and ``fused=True`` one fused kernel per chunk.
"""

from __future__ import annotations

import numpy as np
import pandas as pd

from tracedoc.signals.attribution import compiled
from tracedoc.signals.base import SignalContext, SignalUnavailable, signal
from tracedoc.signals.intervals import merge, overlap_per_window, subtract
from tracedoc.signals.steps import (  # noqa: F401  (STEP_PREFIX, optimizer_step_mask re-exported)
    STEP_PREFIX,
    averaged,
    complete_mask,
    gpu_events,
    in_complete_steps,
    optimizer_step_mask,
    step_windows,
)
from tracedoc.signals.strings import cached_name_mask, name_mask, thread_labels

ZERO_GRAD_PREFIX = "Optimizer.zero_grad#"


def _zero_grad_spans(ctx: SignalContext):
    ops = ctx.trace.ops
    z = ops[zero_grad_mask(ctx)]
    if not len(z):
        raise SignalUnavailable("the trace has no Optimizer.zero_grad annotations")
    return merge(z["ts_us"].to_numpy(), z["end_us"].to_numpy())


@signal("share", scope="host")
def zero_grad_share(ctx: SignalContext) -> float:
    """Time inside ``Optimizer.zero_grad#`` spans / step time (0..1)."""
    s, e = _zero_grad_spans(ctx)
    w = step_windows(ctx)
    return averaged(ctx, overlap_per_window(s, e, w["start_us"].to_numpy(), w["end_us"].to_numpy()))


@signal("ms", scope="host")
def zero_grad_ms(ctx: SignalContext) -> float:
    """Time inside ``Optimizer.zero_grad#`` spans per step, ms: ``zero_grad_share * step_time_ms``."""
    return ctx.get("zero_grad_share") * ctx.get("step_time_ms")


@signal("count", scope="host")
def zero_grad_kernels_per_step(ctx: SignalContext) -> float:
    """Kernel launches and memsets issued from inside ``Optimizer.zero_grad#`` spans, per step."""
    s, e = _zero_grad_spans(ctx)
    rt = ctx.trace.runtime
    rt = rt[rt["kind"].isin(("launch", "memset"))]
    ts = rt["ts_us"].to_numpy()
    k = np.searchsorted(s, ts, side="right") - 1
    inside = (k >= 0) & (ts <= e[np.maximum(k, 0)])
    n_steps = max(int(complete_mask(ctx).sum()), 1)
    return float((inside & in_complete_steps(ctx, ts)).sum() / n_steps)


# ---- optimizer.step(): per-parameter (single-tensor) kernels vs multi-tensor / fused ----------


def zero_grad_mask(ctx: SignalContext) -> np.ndarray:
    """Mask over ``trace.ops``: ``Optimizer.zero_grad#`` spans (computed once per trace)."""
    return cached_name_mask(ctx, "ops", "zero_grad", lambda n: n.startswith(ZERO_GRAD_PREFIX))


def optimizer_step_kernels(ctx: SignalContext) -> pd.DataFrame:
    """Kernels launched from inside ``Optimizer.step#<Class>.step`` CPU spans that fall in a
    complete step window: name, device, ts_us, end_us, dur_us, multi_tensor (bool: a
    multi-tensor-apply / fused kernel, ``[optimizer_multi_tensor_kernels]`` in patterns.toml).

    A launch is inside a span when the runtime call starts within it on the span's own
    thread (pid, tid), so kernels other threads launch meanwhile (DDP communication,
    DataLoader pinning) are not counted. The launch time decides the step it counts in.

    Raises:
        SignalUnavailable: no ``Optimizer.step#`` annotation, or no kernel launched from one.
    """

    def build() -> pd.DataFrame:
        t = ctx.trace
        ops = t.ops
        sp = ops[optimizer_step_mask(ctx)]
        if not len(sp):
            raise SignalUnavailable("the trace has no Optimizer.step annotations")
        rt = t.runtime
        rt = rt[(rt["kind"] == "launch") & rt["correlation"].notna()]
        ts = rt["ts_us"].to_numpy()
        rt_key = thread_labels(rt)
        inside = np.zeros(len(rt), dtype=bool)
        sp_key = thread_labels(sp)
        for key in dict.fromkeys(sp_key.tolist()):  # one per thread
            idx = np.flatnonzero(sp_key == key)
            s, e = merge(sp["ts_us"].to_numpy()[idx], sp["end_us"].to_numpy()[idx])
            k = np.searchsorted(s, ts, side="right") - 1
            inside |= (rt_key == key) & (k >= 0) & (ts <= e[np.maximum(k, 0)])
        inside &= in_complete_steps(ctx, ts)
        corr = rt.loc[inside, ["correlation"]].drop_duplicates()
        ker = t.kernels.merge(corr, on="correlation", how="inner")
        if not len(ker):
            raise SignalUnavailable("Optimizer.step launches no kernels inside the steps")
        out = ker[["name", "device", "ts_us", "end_us", "dur_us"]].copy()
        out["multi_tensor"] = name_mask(out["name"], compiled("optimizer_multi_tensor_kernels").search)
        return out

    return ctx.cached("optimizer_step_kernels", build)


def _n_steps(ctx: SignalContext) -> int:
    return max(int(complete_mask(ctx).sum()), 1)


@signal("count")
def optimizer_kernels_per_step(ctx: SignalContext) -> float:
    """Kernels launched from inside ``Optimizer.step#`` spans, per complete step."""
    return len(optimizer_step_kernels(ctx)) / _n_steps(ctx)


@signal("count")
def optimizer_single_tensor_kernels_per_step(ctx: SignalContext) -> float:
    """Optimizer-step kernels that are not multi-tensor-apply / fused (one parameter per
    launch: ``aten::add_``, ``mul_``, ``addcdiv_``... kernels), per complete step."""
    k = optimizer_step_kernels(ctx)
    return float((~k["multi_tensor"]).sum() / _n_steps(ctx))


@signal("share")
def optimizer_multi_tensor_share(ctx: SignalContext) -> float:
    """Share of the optimizer-step kernel launches that are multi-tensor-apply or fused
    kernels (0..1, by count): about 1 with ``foreach=True`` / ``fused=True``, 0 with the
    single-tensor ``for p in params`` loop."""
    k = optimizer_step_kernels(ctx)
    return float(k["multi_tensor"].mean())


@signal("ms")
def optimizer_step_ms(ctx: SignalContext) -> float:
    """CPU time inside ``Optimizer.step#`` spans per complete step, ms (union, clipped to the windows)."""
    ops = ctx.trace.ops
    sp = ops[optimizer_step_mask(ctx)]
    if not len(sp):
        raise SignalUnavailable("the trace has no Optimizer.step annotations")
    w = step_windows(ctx)
    m = complete_mask(ctx)
    per = overlap_per_window(
        sp["ts_us"].to_numpy(), sp["end_us"].to_numpy(), w["start_us"].to_numpy()[m], w["end_us"].to_numpy()[m]
    )
    return float(per.sum() / 1000.0 / _n_steps(ctx))


#: Share of a single-tensor optimizer step's host time that foreach removes, measured on the same
#: model and GPU (ResNet-50, SGD with momentum, V100): 18.83 ms per step single-tensor
#: (fixtures/v100_resnet50_workers0) against 0.93 ms with foreach (fixtures/v100_resnet50_ddp_gpu_bound).
FOREACH_HOST_REDUCTION = 1 - 0.934 / 18.831


@signal("ms", scope="host")
def optimizer_foreach_saving_ms(ctx: SignalContext) -> float:
    """Host time per step a multi-tensor (foreach) optimizer would remove, ms:
    ``optimizer_step_ms x (1 - optimizer_multi_tensor_share) x FOREACH_HOST_REDUCTION`` (0.95, measured
    on two V100 ResNet-50 traces, single-tensor vs foreach). On a host-bound step that host time is on
    the critical path; the engine grants it only from GPU idle slices the rule claims."""
    return ctx.get("optimizer_step_ms") * (1 - ctx.get("optimizer_multi_tensor_share")) * FOREACH_HOST_REDUCTION


@signal("ms")
def optimizer_single_tensor_kernel_ms(ctx: SignalContext) -> float:
    """Wall-clock time of the single-tensor optimizer kernels, ms per step: the union (merged
    intervals) of those kernels on the primary device, clipped to the complete step windows."""
    k = optimizer_step_kernels(ctx)
    m = ~k["multi_tensor"].to_numpy()
    dev = ctx.device
    if dev is not None and (k["device"] == dev.id).any():
        m &= (k["device"] == dev.id).to_numpy()
    w = step_windows(ctx)
    cm = complete_mask(ctx)
    per = overlap_per_window(
        k["ts_us"].to_numpy()[m], k["end_us"].to_numpy()[m], w["start_us"].to_numpy()[cm], w["end_us"].to_numpy()[cm]
    )
    return float(per.sum() / 1000.0 / _n_steps(ctx))


@signal("ms")
def optimizer_step_gpu_idle_ms(ctx: SignalContext) -> float:
    """GPU idle time while the CPU is inside ``Optimizer.step#`` spans, ms per complete step:
    the spans minus the union of the primary device's kernels, memcpys and memsets.

    With a single-tensor optimizer this is mostly the CPU launching one small kernel per
    parameter while the GPU waits. Evidence only: the idle ledger's launch-overhead slice owns
    this time.
    """
    ops = ctx.trace.ops
    sp = ops[optimizer_step_mask(ctx)]
    if not len(sp):
        raise SignalUnavailable("the trace has no Optimizer.step annotations")
    g = gpu_events(ctx)
    dev = ctx.device
    if dev is not None and (g["device"] == dev.id).any():
        g = g[g["device"] == dev.id]
    s, e = subtract(sp["ts_us"].to_numpy(), sp["end_us"].to_numpy(), g["ts_us"].to_numpy(), g["end_us"].to_numpy())
    w = step_windows(ctx)
    m = complete_mask(ctx)
    per = overlap_per_window(s, e, w["start_us"].to_numpy()[m], w["end_us"].to_numpy()[m])
    return float(per.sum() / 1000.0 / _n_steps(ctx))
