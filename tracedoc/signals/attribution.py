"""Linking kernels to the CPU ops that launched them.

kernel --(args.correlation, the one join of tracedoc.signals.links)--> runtime call
--(same pid/tid, time containment)--> CPU op.
The launching op is the innermost ``cpu_op`` that contains the runtime call's start.
A kernel is a *Tensor Core* kernel when its name matches ``[tensor_core_kernels]`` and not
``[tensor_core_exclusions]``. A kernel is *Tensor-Core-eligible* when any enclosing op (innermost or outer) is a
GEMM/convolution/attention op (patterns in ``patterns.toml``), or when its own name
says it is a GEMM or a convolution.
"""

from __future__ import annotations

import re
from functools import cache, lru_cache
from importlib import resources

import numpy as np
import pandas as pd
import tomllib

from tracedoc.signals.base import SignalContext
from tracedoc.signals.intervals import merge
from tracedoc.signals.strings import name_mask

#: How far back (in ops on the same thread) to look for the innermost enclosing op.
MAX_NESTING_SCAN = 64


@lru_cache(maxsize=1)
def patterns() -> dict[str, dict[str, list[str]]]:
    """The pattern tables of ``patterns.toml`` (family -> list of regexes)."""
    text = resources.files("tracedoc.signals").joinpath("patterns.toml").read_text()
    return tomllib.loads(text)


@cache
def compiled(table: str) -> re.Pattern[str]:
    """One case-insensitive regex matching any pattern of a table of ``patterns.toml``."""
    pats = [p for fam in patterns()[table].values() for p in fam]
    return re.compile("|".join(f"(?:{p})" for p in pats), re.IGNORECASE)


def is_tensor_core_kernel(name: str) -> bool:
    """Whether a kernel name is a Tensor Core / matrix-core kernel: it matches a family of
    ``[tensor_core_kernels]`` and no pattern of ``[tensor_core_exclusions]`` (patterns.toml)."""
    return bool(compiled("tensor_core_kernels").search(name)) and not compiled("tensor_core_exclusions").search(name)


def _match(names: pd.Series, table: str) -> np.ndarray:
    return name_mask(names, compiled(table).search)


def runtime_ops(ctx: SignalContext) -> pd.DataFrame:
    """For each runtime call (index aligned with ``trace.runtime``): ``op`` (innermost
    enclosing cpu_op name or None) and ``eligible`` (an enclosing op is TC-eligible)."""

    def build() -> pd.DataFrame:
        t = ctx.trace
        rt = t.runtime
        op_name = np.full(len(rt), None, dtype=object)
        eligible = np.zeros(len(rt), dtype=bool)
        ops = t.ops[t.ops["cat"] == "cpu_op"]
        if not len(rt) or not len(ops):
            return pd.DataFrame({"op": op_name, "eligible": eligible}, index=rt.index)
        ops_elig = _match(ops["name"], "tensor_core_eligible_ops")
        rt_key = rt["pid"] + "/" + rt["tid"]
        op_key = ops["pid"] + "/" + ops["tid"]
        for key, r_idx in rt.groupby(rt_key).indices.items():
            sel = (op_key == key).to_numpy()
            if not sel.any():
                continue
            o = ops[sel]
            order = np.lexsort((-o["dur_us"].to_numpy(), o["ts_us"].to_numpy()))
            ots = o["ts_us"].to_numpy()[order]
            oend = o["end_us"].to_numpy()[order]
            onames = o["name"].to_numpy()[order]
            rts = rt["ts_us"].to_numpy()[r_idx]
            j = np.searchsorted(ots, rts, side="right") - 1
            found = np.full(rts.size, -1)
            pending = np.flatnonzero(j >= 0)  # calls still looking for their enclosing op
            for back in range(MAX_NESTING_SCAN):
                cand = j[pending] - back
                pending, cand = pending[cand >= 0], cand[cand >= 0]
                if not pending.size:
                    break
                hit = oend[cand] >= rts[pending]
                found[pending[hit]] = cand[hit]
                pending = pending[~hit]
            op_name[r_idx[found >= 0]] = onames[found[found >= 0]]
            es, ee = merge(o["ts_us"].to_numpy()[ops_elig[sel]], o["end_us"].to_numpy()[ops_elig[sel]])
            if es.size:
                k = np.searchsorted(es, rts, side="right") - 1
                eligible[r_idx] = (k >= 0) & (rts <= ee[np.maximum(k, 0)])
        return pd.DataFrame({"op": op_name, "eligible": eligible}, index=rt.index)

    return ctx.cached("runtime_ops", build)


def kernel_ops(ctx: SignalContext) -> pd.DataFrame:
    """Kernels with their launching op: name, device, ts_us, dur_us, end_us, op, tensor_core, eligible."""

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
        out["op"] = np.where(linked, ro["op"].to_numpy()[safe], None) if len(ro) else None
        out["op_eligible"] = (linked & ro["eligible"].to_numpy()[safe]) if len(ro) else False
        out["tensor_core"] = name_mask(out["name"], is_tensor_core_kernel)
        out["eligible"] = (
            out["op_eligible"].to_numpy()
            | out["tensor_core"].to_numpy()
            | _match(out["name"], "tensor_core_eligible_kernels")
        )
        return out

    return ctx.cached("kernel_ops", build)
