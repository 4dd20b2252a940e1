"""Attention signals: how much kernel time eager (unfused) attention takes.

Eager attention computes ``softmax(Q K^T / sqrt(d)) V`` as separate kernels: a batched
matmul (``aten::bmm``/``aten::baddbmm``), a softmax, and a second batched matmul, and it
writes the full ``seq x seq`` score matrix to memory in between. Fused attention
(FlashAttention, memory-efficient attention, cuDNN SDPA, CK/aiter FMHA, Triton
``attn_fwd``) does it in one kernel. Classes come from ``patterns.toml``:

* softmax kernel: launched by a softmax op (``[attention_softmax].ops``) or named after
  softmax (``[attention_softmax].kernels``), and not a fused attention kernel;
* batched-matmul kernel: launched by ``aten::bmm``/``aten::baddbmm`` (or their backward);
* fused attention kernel: named like one (``[tensor_core_kernels].attention``) or launched
  by a fused attention op (``[attention_fused_ops]``).

All shares are of the kernel time (sum of durations) of the primary device's kernels that
start inside the complete step windows, like the Tensor Core shares; the ms figure is a
wall-clock union per step.
"""

from __future__ import annotations

import re
from functools import cache

import numpy as np
import pandas as pd

from tracedoc.signals.attribution import patterns
from tracedoc.signals.base import SignalContext, SignalUnavailable, signal
from tracedoc.signals.steps import complete_mask
from tracedoc.signals.strings import cached_name_mask
from tracedoc.signals.tensor_core import _window_kernels, union_ms_per_step


@cache
def _family(table: str, family: str) -> re.Pattern[str]:
    return re.compile("|".join(f"(?:{p})" for p in patterns()[table][family]), re.IGNORECASE)


def _kernel_mask(ctx: SignalContext, rows: np.ndarray, table: str, family: str) -> np.ndarray:
    # kernel_ops rows are trace.kernels rows: the mask over trace.kernels, cached per distinct name
    mask = cached_name_mask(ctx, "kernels", f"attention_{table}_{family}", _family(table, family).search)
    return mask[rows]


def _op_mask(op_codes: np.ndarray, op_names: np.ndarray, table: str, family: str) -> np.ndarray:
    # the launching op names, factorised once by the caller: one test per distinct op
    test = _family(table, family).search
    per_op = np.fromiter((bool(test(n)) for n in op_names), dtype=bool, count=len(op_names))
    return per_op[op_codes] if len(op_codes) else np.zeros(0, dtype=bool)


def attention_kernels(ctx: SignalContext) -> pd.DataFrame:
    """The step kernels of the primary device (see :func:`tensor_core._window_kernels`) with
    boolean columns ``softmax``, ``batched_matmul`` and ``fused_attention``.

    Raises:
        SignalUnavailable: no kernel time inside the step windows.
    """

    def build() -> pd.DataFrame:
        ko = _window_kernels(ctx).copy()
        rows = ko.index.to_numpy()
        op_codes, op_names = pd.factorize(ko["op"].fillna("").to_numpy(dtype=object), sort=False)
        fused = _kernel_mask(ctx, rows, "tensor_core_kernels", "attention") | _op_mask(
            op_codes, op_names, "attention_fused_ops", "ops"
        )
        softmax = (
            _op_mask(op_codes, op_names, "attention_softmax", "ops")
            | _kernel_mask(ctx, rows, "attention_softmax", "kernels")
        ) & ~fused
        bmm = _op_mask(op_codes, op_names, "attention_batched_matmul", "ops") & ~fused & ~softmax
        ko["softmax"], ko["batched_matmul"], ko["fused_attention"] = softmax, bmm, fused
        return ko

    return ctx.cached("attention_kernels", build)


def _eager_mask(ko: pd.DataFrame) -> np.ndarray:
    # bmm alone is not attention (it is any batched matmul): both parts must be present.
    if not (ko["softmax"].any() and ko["batched_matmul"].any()):
        return np.zeros(len(ko), dtype=bool)
    return (ko["softmax"] | ko["batched_matmul"]).to_numpy()


def _share(ko: pd.DataFrame, mask: np.ndarray) -> float:
    return float(ko.loc[mask, "dur_us"].sum() / ko["dur_us"].sum())


@signal("share")
def softmax_kernel_share(ctx: SignalContext) -> float:
    """Kernel time of softmax kernels (not inside fused attention) / all kernel time (0..1)."""
    ko = attention_kernels(ctx)
    return _share(ko, ko["softmax"].to_numpy())


@signal("share")
def eager_attention_kernel_share(ctx: SignalContext) -> float:
    """Kernel time of eager attention (softmax plus batched-matmul kernels) / all kernel time (0..1).

    0.0 unless the steps hold both softmax and batched-matmul kernels.
    """
    ko = attention_kernels(ctx)
    return _share(ko, _eager_mask(ko))


@signal("share")
def fused_attention_kernel_share(ctx: SignalContext) -> float:
    """Kernel time of fused attention kernels (flash, memory-efficient, cuDNN SDPA, FMHA) / all kernel time."""
    ko = attention_kernels(ctx)
    return _share(ko, ko["fused_attention"].to_numpy())


@signal("ms")
def eager_attention_ms(ctx: SignalContext) -> float:
    """Wall-clock time of the eager attention kernels, ms per step: the union (merged
    intervals) of the softmax and batched-matmul kernels on the primary device inside the
    complete step windows (overlapping streams count once)."""
    ko = attention_kernels(ctx)
    m = _eager_mask(ko)
    return union_ms_per_step(ctx, ko["ts_us"].to_numpy()[m], ko["end_us"].to_numpy()[m])


@signal("table")
def top_eager_attention_kernels(ctx: SignalContext) -> list[dict]:
    """The eager attention kernels with the most time: kernel, op, part (softmax | bmm),
    ms per step, count per step (at most 5)."""
    ko = attention_kernels(ctx)
    m = _eager_mask(ko)
    if not m.any():
        raise SignalUnavailable("no eager attention kernels (softmax plus batched matmul) in the steps")
    k = ko[m]
    n = max(int(complete_mask(ctx).sum()), 1)
    g = k.groupby("name", sort=False).agg(
        ms=("dur_us", "sum"), count=("dur_us", "size"), op=("op", "first"), softmax=("softmax", "first")
    )
    g = g.sort_values("ms", ascending=False, kind="stable").head(5)
    return [
        {
            "kernel": name,
            "op": r.op if isinstance(r.op, str) else None,
            "part": "softmax" if r.softmax else "bmm",
            "ms_per_step": round(r.ms / 1000 / n, 3),
            "count_per_step": round(float(r["count"]) / n, 1),
        }
        for name, r in g.iterrows()
    ]
