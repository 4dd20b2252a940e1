"""Linking kernels to the CPU ops that launched them.

kernel --(args.correlation, the one join of tracedoc.signals.links)--> runtime call
--(same pid/tid, time containment)--> CPU op.
The launching op is the innermost ``cpu_op`` that contains the runtime call's start.
A kernel is a *Tensor Core* kernel when its name matches ``[tensor_core_kernels]`` and not
``[tensor_core_exclusions]``. A kernel is *Tensor-Core-eligible* when any enclosing op (innermost or outer) is a
GEMM/convolution/attention op (patterns in ``patterns.toml``), or when its own name
says it is a GEMM or a convolution. A layout transform (``[layout_transform_kernels]``: NCHW <-> NHWC
transposes, batched transposes, tensor reorders) is neither, whichever op launched it: it moves
data and multiplies nothing.
"""

from __future__ import annotations

import numpy as np
import pandas as pd

from tracedoc.signals.base import SignalContext
from tracedoc.signals.catalog import compiled, patterns  # noqa: F401  (re-exported)
from tracedoc.signals.intervals import merge
from tracedoc.signals.strings import cached_name_mask, frame_threads, owned_frame, text_at

#: How far back (in ops on the same thread) to look for the innermost enclosing op.
MAX_NESTING_SCAN = 64
#: Runtime calls :func:`runtime_ops` looks up at once (2**16: about 3 MiB of temporaries).
_CALLS_PART = 1 << 16


def is_layout_transform_kernel(name: str) -> bool:
    """Whether a kernel only changes a tensor's memory layout (an NCHW <-> NHWC transpose, a
    batched transpose, a tensor reorder): a pattern of ``[layout_transform_kernels]``
    (patterns.toml, where each family names its source) matches the name.

    Args:
        name: one kernel name.

    Returns:
        True for a layout transform; such a kernel is neither GEMM/conv work nor a Tensor Core kernel.
    """
    return bool(compiled("layout_transform_kernels").search(name))


def is_tensor_core_kernel(name: str) -> bool:
    """Whether a kernel name is a Tensor Core / matrix-core kernel: it matches a family of
    ``[tensor_core_kernels]`` and no pattern of ``[tensor_core_exclusions]`` or
    ``[layout_transform_kernels]`` (patterns.toml)."""
    return (
        bool(compiled("tensor_core_kernels").search(name))
        and not compiled("tensor_core_exclusions").search(name)
        and not is_layout_transform_kernel(name)
    )


def is_low_precision_gemm_kernel(name: str) -> bool:
    """Whether a kernel name says its inputs are 16-bit or narrower (fp16, bf16, fp8, int8): a
    pattern of ``[low_precision_gemm_inputs]`` (patterns.toml, with the naming sources) matches.

    Meant for kernels already known to be GEMM/conv work (``eligible`` in :func:`kernel_ops`);
    on other kernels the type tokens say nothing about matmul inputs.

    Args:
        name: one kernel name.

    Returns:
        True when the name carries a 16-bit-or-narrower input type; False when it carries none
        (fp32 and TF32 kernels, and names that say nothing about their type).
    """
    return bool(compiled("low_precision_gemm_inputs").search(name))


def _match(ctx: SignalContext, frame: str, table: str) -> np.ndarray:
    # over every row of ctx.trace.<frame>, tested once per distinct name (cached per context)
    return cached_name_mask(ctx, frame, table, compiled(table).search)


def _runtime_ops_frame(ops: pd.DataFrame, op_pos: np.ndarray, eligible: np.ndarray, index: pd.Index) -> pd.DataFrame:
    # the op's name read off its position (text_at: a Categorical's codes, no string per call)
    return owned_frame({"op": text_at(ops["name"], op_pos, index), "op_pos": op_pos, "eligible": eligible}, index=index)


def runtime_ops(ctx: SignalContext) -> pd.DataFrame:
    """For each runtime call (index aligned with ``trace.runtime``): ``op`` (innermost
    enclosing cpu_op name or None), ``op_pos`` (that op's row position in ``trace.ops``, -1
    when none) and ``eligible`` (an enclosing op is TC-eligible).

    The innermost enclosing op of a call is, among the ``cpu_op`` events of the same pid/tid
    with ``op.ts <= call.ts <= op.end``, the one with the latest ``ts`` (on a tie, the
    shortest), searched at most :data:`MAX_NESTING_SCAN` ops back."""

    def build() -> pd.DataFrame:
        t = ctx.trace
        rt = t.runtime
        op_pos = np.full(len(rt), -1, dtype=np.int32 if len(t.ops) < 2**31 else np.int64)  # issue 24
        eligible = np.zeros(len(rt), dtype=bool)
        cpu = (t.ops["cat"] == "cpu_op").to_numpy()
        if not len(rt) or not cpu.any():
            return _runtime_ops_frame(t.ops, op_pos, eligible, rt.index)
        # integer (pid, tid) codes per row instead of "pid/tid" strings built and compared per row
        rt_codes, rt_labels = frame_threads(ctx, "runtime")
        op_codes, op_labels = frame_threads(ctx, "ops")
        op_code_of = {lab: i for i, lab in enumerate(op_labels)}
        o_ts_all, o_end_all = t.ops["ts_us"].to_numpy(), t.ops["end_us"].to_numpy()
        o_dur_all = t.ops["dur_us"].to_numpy()
        elig_all = _match(ctx, "ops", "tensor_core_eligible_ops")
        rt_ts = rt["ts_us"].to_numpy()
        for rc, key in enumerate(rt_labels):
            oc = op_code_of.get(key)
            if oc is None:
                continue
            sel = np.flatnonzero(cpu & (op_codes == oc)).astype(op_pos.dtype)
            if not sel.size:
                continue
            # the thread's ops by start, the longest first on a tie; their rows, start and end
            sel = sel[np.lexsort((-o_dur_all[sel], o_ts_all[sel]))]
            ots, oend = o_ts_all[sel], o_end_all[sel]
            el = elig_all[sel]
            es, ee = merge(ots[el], oend[el])  # a union: the same whatever the order of its parts
            del el
            r_idx = np.flatnonzero(rt_codes == rc)
            # the calls a part at a time: the search's arrays for every call of a thread at once
            # were a 36 MiB transient on 1 M small events, the step model's build's peak (issue 24)
            for lo in range(0, r_idx.size, _CALLS_PART):
                part = r_idx[lo : lo + _CALLS_PART]
                rts = rt_ts[part]
                j = np.searchsorted(ots, rts, side="right") - 1
                found = np.full(rts.size, -1, dtype=op_pos.dtype)
                pending = np.flatnonzero(j >= 0)  # calls still looking for their enclosing op
                for back in range(MAX_NESTING_SCAN):
                    cand = j[pending] - back
                    pending, cand = pending[cand >= 0], cand[cand >= 0]
                    if not pending.size:
                        break
                    hit = oend[cand] >= rts[pending]
                    found[pending[hit]] = cand[hit]
                    pending = pending[~hit]
                op_pos[part[found >= 0]] = sel[found[found >= 0]]
                if es.size:
                    k = np.searchsorted(es, rts, side="right") - 1
                    eligible[part] = (k >= 0) & (rts <= ee[np.maximum(k, 0)])
        return _runtime_ops_frame(t.ops, op_pos, eligible, rt.index)

    return ctx.cached("runtime_ops", build)


def kernel_op_pos(ctx: SignalContext) -> np.ndarray:
    """For each row of ``trace.kernels``, shape ``(len(trace.kernels),)``: the row position in
    ``trace.ops`` of the op that launched it (:func:`runtime_ops` of its launching call), -1
    when it has no linked call or the call no enclosing op. Built once per context and shared:
    the op view, the layout and the attention signals each held their own int64 copy (7.5 MiB
    on 1 M small events, issue 24); they take views of it where their kernels are one run."""

    def build() -> np.ndarray:
        from tracedoc.signals.steps import gpu_events

        n = len(ctx.trace.kernels)
        rt_pos = gpu_events(ctx)["rt_pos"].to_numpy()[:n]  # the kernels come first in gpu_events
        ro = runtime_ops(ctx)["op_pos"].to_numpy()
        if not len(ro):
            return np.full(n, -1, dtype=np.int32)
        return np.where(rt_pos >= 0, ro[np.maximum(rt_pos, 0)], -1).astype(ro.dtype, copy=False)

    return ctx.cached("kernel_op_pos", build)


def kernel_ops(ctx: SignalContext) -> pd.DataFrame:
    """Kernels with their launching op, one row per row of ``trace.kernels`` (in order).

    Columns: name, device, ts_us, dur_us, end_us (µs), correlation, op (innermost launching
    ``cpu_op`` or None), op_eligible (an enclosing op is GEMM/conv/attention), layout (a layout
    transform, :func:`is_layout_transform_kernel`), tensor_core (:func:`is_tensor_core_kernel`),
    eligible (GEMM/conv/attention work: op_eligible, a Tensor Core kernel or a GEMM/conv kernel
    name, and not a layout transform), low_precision (eligible and
    :func:`is_low_precision_gemm_kernel`).
    """

    def build() -> pd.DataFrame:
        from tracedoc.signals.steps import gpu_events

        k = ctx.trace.kernels
        ro = runtime_ops(ctx)
        # the launching runtime call of each kernel, through the one (pid, correlation) join;
        # gpu_events lists the kernels first, in trace.kernels order
        pos = gpu_events(ctx)["rt_pos"].to_numpy()[: len(k)]
        linked = pos >= 0
        safe = np.where(linked, pos, 0)
        out = k[["name", "device", "ts_us", "dur_us", "end_us", "correlation"]].reset_index(drop=True)
        out["op"] = text_at(ctx.trace.ops["name"], kernel_op_pos(ctx))  # ro's op of the launching call
        out["op_eligible"] = (linked & ro["eligible"].to_numpy()[safe]) if len(ro) else False
        # out's rows are trace.kernels' rows, in order: the masks over trace.kernels apply
        layout = cached_name_mask(ctx, "kernels", "layout_transform", is_layout_transform_kernel)
        out["layout"] = layout
        out["tensor_core"] = cached_name_mask(ctx, "kernels", "tensor_core", is_tensor_core_kernel)
        out["eligible"] = (
            out["op_eligible"].to_numpy()
            | out["tensor_core"].to_numpy()
            | _match(ctx, "kernels", "tensor_core_eligible_kernels")
        ) & ~layout
        low = cached_name_mask(ctx, "kernels", "low_precision_gemm", is_low_precision_gemm_kernel)
        out["low_precision"] = out["eligible"].to_numpy() & low
        return out

    return ctx.cached("kernel_ops", build)
