"""Optimizer signals: the cost of ``optimizer.zero_grad()``.

PyTorch annotates it as ``Optimizer.zero_grad#<Class>.zero_grad``. With
``set_to_none=False`` it launches one fill (or memset) kernel per parameter tensor;
with ``set_to_none=True`` (the default since PyTorch 2.0) it launches none.
"""

from __future__ import annotations

import numpy as np

from tracedoc.signals.base import SignalContext, SignalUnavailable, signal
from tracedoc.signals.intervals import merge, overlap_per_window
from tracedoc.signals.steps import averaged, complete_mask, in_complete_steps, step_windows
from tracedoc.signals.strings import startswith_mask

ZERO_GRAD_PREFIX = "Optimizer.zero_grad#"


def _zero_grad_spans(ctx: SignalContext):
    ops = ctx.trace.ops
    z = ctx.cached("zero_grad_ops", lambda: ops[startswith_mask(ops["name"], ZERO_GRAD_PREFIX)])
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
