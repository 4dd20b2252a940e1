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
  by a fused attention op (``[attention_fused_ops]``);
* score-scaling kernel: launched by ``aten::mul``/``aten::div`` (or ``mul_``/``div_``), not one of
  the above, whose first input has the recorded dims of the first input of a softmax op that
  launched a softmax kernel in the steps (``scores * scale`` on the ``seq x seq`` scores; needs
  ``record_shapes=True``).

*Eager attention* (the shares and ms below) is the softmax plus batched-matmul kernels, counted only
when both are present. What a fused kernel replaces (:func:`replaced_by_fused_mask`, the step
model's ``eager_attention`` class) is eager attention plus the score-scaling kernels.

**What a fused kernel takes** (:func:`fused_attention_factor`). Its FLOPs are those of the two
products it computes, ``Q K^T`` and ``P V``: ``4 * B * H * Lq * Lk * D`` per attention, which is the
sum of the batched matmuls' FLOPs (``2 * b * m * n * k`` each, ``b = B * H``, plus ``b * m * n`` for
``baddbmm`` unless ``beta = 0``: :func:`tracedoc.perf.flops.op_cost` on the recorded ``input_dims``), summed over the ``aten::bmm``/``aten::baddbmm``
calls that launched eager attention kernels in the complete steps (each call once). A causal mask
in eager attention is an elementwise op the trace does not name as such, so the count is never
halved: the fused time is the non-causal one, an upper bound (the saving a lower bound). Its time
is those FLOPs at :data:`FLASH_ATTENTION_PEAK_SHARE` of the primary device's dense 16-bit Tensor
Core peak for the matmuls' dtype (fp16 or bf16; :func:`tracedoc.signals.opview.device_peak`), and
the factor is that time over the summed time of the kernels it replaces (at most 1). Without
shapes, with a batched matmul no cost model covers, with fp32 (or other non-16-bit) matmuls (the
flash kernels take fp16/bf16 only) or without the device's peak, the factor is the step model's
fallback :data:`FUSED_ATTENTION_FACTOR`, and
:func:`fused_attention_model` says so.

All shares are of the kernel time (sum of durations) of the primary device's kernels that
start inside the complete step windows, like the Tensor Core shares; the ms figure is a
wall-clock union per step.
"""

from __future__ import annotations

import re
from functools import cache

import numpy as np
import pandas as pd

from tracedoc.signals.arrays import sorted_unique
from tracedoc.signals.attribution import kernel_op_pos, patterns
from tracedoc.signals.base import SignalContext, SignalUnavailable, signal
from tracedoc.signals.steps import at_rows, complete_mask
from tracedoc.signals.strings import cached_name_mask, shared_column, sorted_codes
from tracedoc.signals.tensor_core import _window_kernels, union_ms_per_step

#: Share of the device's dense 16-bit Tensor Core peak a fused attention kernel achieves forward:
#: 35%, what FlashAttention-2 (PyTorch's flash SDPA backend) reaches on an H100 (Shah et al.,
#: "FlashAttention-3: Fast and Accurate Attention with Asynchrony and Low-precision", 2024,
#: abstract: "FlashAttention-2 ... achieving only 35% utilization on the H100 GPU"). Conservative
#: elsewhere: FlashAttention-2 reaches 50-73% of the A100's peak forward (Dao, "FlashAttention-2:
#: Faster Attention with Better Parallelism and Work Partitioning", 2023, section 4.1) and
#: FlashAttention-3 about 75% of the H100's (the same FlashAttention-3 abstract).
FLASH_ATTENTION_PEAK_SHARE = 0.35
#: Share of the replaced kernels' time a fused kernel keeps where its FLOPs or the device's peak
#: are unknown (the fallback of :func:`fused_attention_factor`; re-exported by
#: :mod:`tracedoc.signals.stepmodel`): FlashAttention (Dao et al., "FlashAttention: Fast and
#: Memory-Efficient Exact Attention with IO-Awareness", NeurIPS 2022) measures 2-4x over PyTorch's
#: standard attention on an A100; 2x, the low end.
FUSED_ATTENTION_FACTOR = 0.5
#: Ops that scale the attention scores (``scores * scale`` or ``scores / sqrt(d)``).
SCALE_OPS = re.compile(r"^aten::(?:mul|div)_?$")
#: The 16-bit dtypes a flash attention kernel takes (:attr:`tracedoc.perf.flops.OpCost.dtype`).
FLASH_DTYPES = ("fp16", "bf16")


@cache
def _family(table: str, family: str) -> re.Pattern[str]:
    return re.compile("|".join(f"(?:{p})" for p in patterns()[table][family]), re.IGNORECASE)


def _kernel_mask(ctx: SignalContext, rows: np.ndarray, table: str, family: str) -> np.ndarray:
    # kernel_ops rows are trace.kernels rows: the mask over trace.kernels, cached per distinct name
    mask = cached_name_mask(ctx, "kernels", f"attention_{table}_{family}", _family(table, family).search)
    return mask[rows]


def _op_codes(ops: pd.Series) -> tuple[np.ndarray, np.ndarray]:
    """``(codes, names)`` of the launching ops' names (shapes ``(n,)`` and ``(distinct,)``), a
    missing name as ``""`` (added last): :func:`tracedoc.signals.strings.sorted_codes`, a
    ``Categorical`` column's own codes and categories. The factorisation of every kernel's name
    as an ``object`` array was an 18 MiB transient on 1 M small events, the step model's
    build's peak (issue 24)."""
    codes, names = sorted_codes(ops)
    if (codes < 0).any():
        names = np.append(names, "")
        codes = np.where(codes < 0, names.size - 1, codes)
    return codes, names


def _op_mask(op_codes: np.ndarray, op_names: np.ndarray, table: str, family: str) -> np.ndarray:
    # the launching op names, factorised once by the caller: one test per distinct op
    test = _family(table, family).search
    per_op = np.fromiter((bool(test(n)) for n in op_names), dtype=bool, count=len(op_names))
    return per_op[op_codes] if len(op_codes) else np.zeros(0, dtype=bool)


def _first_dims(text: object) -> tuple | None:
    """The first argument's recorded dims of an ``input_dims`` text, as a tuple (None: unknown)."""
    from tracedoc.load.shapes import parse_shape_arg

    if not isinstance(text, str) or not text:
        return None
    dims = parse_shape_arg(text)
    if not isinstance(dims, (list, tuple)) or not dims or not isinstance(dims[0], (list, tuple)) or not dims[0]:
        return None
    return _frozen(dims[0])


def _frozen(value: object) -> object:
    """``value`` with every list in it a tuple, so that it can be a set's member: a first
    argument recorded as a list of tensors is a list of lists (``[[2, 3], [2, 3]]``)."""
    if isinstance(value, (list, tuple)):
        return tuple(_frozen(v) for v in value)
    return value


def attention_kernels(ctx: SignalContext) -> pd.DataFrame:
    """The step kernels of the primary device (see :func:`tensor_core._window_kernels`) with
    boolean columns ``softmax``, ``batched_matmul``, ``fused_attention`` and ``scale`` (module
    docstring), and ``op_pos``, the launching op's row position in ``trace.ops`` (-1: none).

    Raises:
        SignalUnavailable: no kernel time inside the step windows.
    """

    def build() -> pd.DataFrame:
        # a shallow copy: only new columns are set on it, the shared ones are never written
        ko = _window_kernels(ctx).copy(deep=False)
        rows = ko.index.to_numpy()
        op_codes, op_names = _op_codes(ko["op"])
        fused = _kernel_mask(ctx, rows, "tensor_core_kernels", "attention") | _op_mask(
            op_codes, op_names, "attention_fused_ops", "ops"
        )
        softmax = (
            _op_mask(op_codes, op_names, "attention_softmax", "ops")
            | _kernel_mask(ctx, rows, "attention_softmax", "kernels")
        ) & ~fused
        bmm = _op_mask(op_codes, op_names, "attention_batched_matmul", "ops") & ~fused & ~softmax
        ko["softmax"], ko["batched_matmul"], ko["fused_attention"] = softmax, bmm, fused
        shared_column(ko, "op_pos", at_rows(kernel_op_pos(ctx), ko.index))
        ko["scale"] = _scale_mask(ctx, ko, softmax | bmm | fused)
        return ko

    return ctx.cached("attention_kernels", build)


def _scale_mask(ctx: SignalContext, ko: pd.DataFrame, taken: np.ndarray) -> np.ndarray:
    """Score-scaling kernels (module docstring): by launching op name and the scores' dims."""
    ops = ctx.trace.ops
    out = np.zeros(len(ko), dtype=bool)
    if "input_dims" not in ops.columns or not len(ops):
        return out
    dims = ops["input_dims"].to_numpy(dtype=object)
    op_pos = ko["op_pos"].to_numpy()
    soft = sorted_unique(op_pos[ko["softmax"].to_numpy() & (op_pos >= 0)])
    scores = {d for d in (_first_dims(dims[p]) for p in soft.tolist()) if d is not None}
    if not scores:
        return out
    names = ko["op"].astype(object).fillna("").to_numpy(dtype=object)
    cand = np.flatnonzero(
        ~taken & (op_pos >= 0) & np.fromiter((bool(SCALE_OPS.match(n)) for n in names), bool, len(ko))
    )
    for i in cand.tolist():
        out[i] = _first_dims(dims[op_pos[i]]) in scores
    return out


def _eager_mask(ko: pd.DataFrame) -> np.ndarray:
    # bmm alone is not attention (it is any batched matmul): both parts must be present.
    if not (ko["softmax"].any() and ko["batched_matmul"].any()):
        return np.zeros(len(ko), dtype=bool)
    return (ko["softmax"] | ko["batched_matmul"]).to_numpy()


def replaced_by_fused_mask(ko: pd.DataFrame) -> np.ndarray:
    """The kernels a fused attention kernel replaces (module docstring): eager attention (both
    parts present) and the score-scaling kernels; none without eager attention."""
    eager = _eager_mask(ko)
    if not eager.any():
        return eager
    return eager | ko["scale"].to_numpy()


def _fused_model(ctx: SignalContext) -> dict:
    """The fused attention estimate (module docstring): FLOPs and times over the complete steps."""

    def build() -> dict:
        ko = attention_kernels(ctx)
        m = replaced_by_fused_mask(ko)
        replaced_us = float(ko.loc[m, "dur_us"].sum())
        out = {"factor": FUSED_ATTENTION_FACTOR, "replaced_us": replaced_us, "flops": None, "dtype": None}
        out.update(peak_tflops=None, fused_us=None, basis=None)
        if not m.any() or replaced_us <= 0:
            out["basis"] = "no eager attention kernels: the fallback factor (unused)"
            return out
        reason = _flops_and_dtype(ctx, ko, m, out)
        if reason is None:
            from tracedoc.signals.opview import device_peak

            peak = device_peak(ctx)
            p16 = peak.peak_tflops(out["dtype"], True) if peak is not None else None
            if not p16:
                reason = "the device's peak is unknown (not in tracedoc/perf/peaks.toml)"
            else:
                out["peak_tflops"] = p16
                out["fused_us"] = out["flops"] / (FLASH_ATTENTION_PEAK_SHARE * p16 * 1e12) * 1e6
                out["factor"] = min(out["fused_us"] / replaced_us, 1.0)
                out["basis"] = (
                    f"FLOPs of QK^T and PV at {FLASH_ATTENTION_PEAK_SHARE:.0%} of the {out['dtype']} "
                    f"Tensor Core peak ({p16:g} TFLOP/s)"
                )
                return out
        out["basis"] = f"fallback factor {FUSED_ATTENTION_FACTOR} (FlashAttention's 2x, the low end): {reason}"
        return out

    return ctx.cached("fused_attention_model", build)


def _flops_and_dtype(ctx: SignalContext, ko: pd.DataFrame, m: np.ndarray, out: dict) -> str | None:
    """Sum the batched matmuls' FLOPs into ``out`` (and their dtype); a reason when they cannot be."""
    from tracedoc.load.shapes import parse_shape_arg
    from tracedoc.perf.flops import op_cost

    ops = ctx.trace.ops
    if "input_dims" not in ops.columns:
        return "no recorded shapes (record_shapes=False)"
    pos = sorted_unique(ko["op_pos"].to_numpy()[m & ko["batched_matmul"].to_numpy()])
    if not pos.size or (pos < 0).any():
        return "a batched-matmul kernel without its launching op"
    cols = ("input_dims", "input_types", "concrete_inputs", "input_strides")  # op_cost's argument order
    flops, dtypes = 0.0, set()
    for p in pos.tolist():
        args = [
            parse_shape_arg(ops[c].iat[p]) if c in ops.columns and isinstance(ops[c].iat[p], str) else None
            for c in cols
        ]
        cost = op_cost(str(ops["name"].iat[p]), *args) if args[0] is not None else None
        if cost is None or not cost.flops > 0:
            return f"no recorded shapes or cost model for {ops['name'].iat[p]}"
        flops += float(cost.flops)
        dtypes.add(cost.dtype)
    if len(dtypes) != 1 or next(iter(dtypes)) not in FLASH_DTYPES:
        return f"batched matmuls in {', '.join(sorted(map(str, dtypes)))}: flash attention takes fp16/bf16 only"
    out["flops"], out["dtype"] = flops, next(iter(dtypes))
    return None


@signal("share")
def fused_attention_factor(ctx: SignalContext) -> float:
    """The share (0..1) of the replaced kernels' time (eager attention plus score scaling,
    :func:`replaced_by_fused_mask`) a fused attention kernel takes: its FLOPs over
    :data:`FLASH_ATTENTION_PEAK_SHARE` of the device's 16-bit Tensor Core peak, over that time (module
    docstring), at most 1; :data:`FUSED_ATTENTION_FACTOR` where shapes, a
    cost model, a 16-bit dtype or the peak are missing. The step model's ``fused_attention`` fix
    keeps this share of each replaced kernel.

    Raises:
        SignalUnavailable: no kernel time inside the step windows.
    """
    return float(_fused_model(ctx)["factor"])


@signal("ms", scope="steps")
def fused_attention_kernel_saving_ms(ctx: SignalContext) -> float:
    """The kernel time the ``fused_attention`` fix removes, ms per complete step: the summed
    duration of the replaced kernels (:func:`replaced_by_fused_mask`, complete steps) times
    ``1 - fused_attention_factor``, over the number of complete steps. The slice beside the
    replayed saving: what fusing saves if every such kernel were on the critical path.

    Raises:
        SignalUnavailable: no kernel time inside the step windows.
    """
    mdl = _fused_model(ctx)
    n = max(int(complete_mask(ctx).sum()), 1)
    return mdl["replaced_us"] * (1.0 - mdl["factor"]) / n / 1000.0


@signal("table", scope="steps")
def fused_attention_model(ctx: SignalContext) -> list[dict]:
    """How the fused attention kernel's time was estimated (module docstring), one row: ``basis``
    (the FLOP model with its peak share and peak, or the fallback and why), ``gflop_per_step``,
    ``peak_tflops``, ``fused_ms_per_step`` (None on the fallback), ``replaced_ms_per_step`` (the
    summed time of the kernels it replaces) and ``factor`` (:func:`fused_attention_factor`).

    Raises:
        SignalUnavailable: no eager attention kernels in the steps.
    """
    mdl = _fused_model(ctx)
    if mdl["replaced_us"] <= 0:
        raise SignalUnavailable("no eager attention kernels (softmax plus batched matmul) in the steps")
    n = max(int(complete_mask(ctx).sum()), 1)
    return [
        {
            "basis": mdl["basis"],
            "gflop_per_step": None if mdl["flops"] is None else round(mdl["flops"] / 1e9 / n, 1),
            "peak_tflops": mdl["peak_tflops"],
            "fused_ms_per_step": None if mdl["fused_us"] is None else round(mdl["fused_us"] / 1000.0 / n, 3),
            "replaced_ms_per_step": round(mdl["replaced_us"] / 1000.0 / n, 3),
            "factor": round(float(mdl["factor"]), 4),
        }
    ]


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
