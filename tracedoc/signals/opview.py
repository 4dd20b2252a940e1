"""Op and kernel views: how well the GPU's busy time is used, op by op and kernel by kernel.

Each kernel that starts in a complete step window is attached to the op that launched it:
kernel -> its launching runtime call (:func:`tracedoc.signals.links.link_launches`, through
:func:`tracedoc.signals.steps.gpu_events`) -> the innermost enclosing ``cpu_op`` on the
launching thread (:func:`tracedoc.signals.attribution.runtime_ops`). An op call's GPU time is
the sum of its kernels' durations. Op calls are grouped by name and recorded inputs (the
``input_dims``, ``input_types``, ``concrete_inputs`` and ``input_strides`` columns of
``trace.ops``, present when the trace was recorded with ``record_shapes=True``), so that every
call in a group has the same FLOPs and bytes (:func:`tracedoc.perf.flops.op_cost`) and the same
memory layout (the same op on a transposed or channels-last input is its own row).

Achieved throughput of a group is its FLOPs (or bytes) over its GPU time:
``TFLOP/s = calls * flops / (gpu_us * 1e-6) / 1e12``; the % of peak, arithmetic intensity
(FLOP per byte) and whether the op is compute- or memory-bound come from the roofline model
(Williams, Waterman and Patterson, "Roofline: an insightful visual performance model for
multicore architectures", CACM 52(4), 2009) against the device's peak
(:func:`tracedoc.perf.peaks.match_device`, :func:`tracedoc.perf.flops.roofline`). An unknown
device leaves the roofline fields ``None`` ("peak unknown"); an op without recorded shapes,
or one no model covers, leaves its FLOPs and bytes ``None``.

A kernel's achieved throughput is known where the op calls it ran for launched that one
kernel alone: the op's cost is then the kernel's. Kernels of ops with several kernels per
call keep their time, count and occupancy (Kineto's ``est. achieved occupancy %``, the mean
over the kernel's launches where recorded) but no throughput.
"""

from __future__ import annotations

import math
from collections.abc import Iterable
from typing import Any

import numpy as np
import pandas as pd

from tracedoc.signals.base import SignalContext, SignalUnavailable, signal
from tracedoc.signals.strings import frame_names, owned_frame, sorted_codes, text_rows, texts

#: Rows of each view (largest GPU time first).
TOP_N = 15
#: The ops frame's recorded-input columns, in :func:`tracedoc.perf.flops.op_cost`'s order.
SHAPE_COLUMNS = ("input_dims", "input_types", "concrete_inputs", "input_strides")


def device_peak(ctx: SignalContext):
    """The primary device's :class:`tracedoc.perf.peaks.DevicePeak`, or None (unknown device
    or no device described)."""
    from tracedoc.perf.peaks import match_device

    def build():
        dev = ctx.trace.primary_device()
        if dev is None:
            return None
        props = {
            "compute_capability": dev.compute_capability,
            "num_sms": dev.num_sms,
            "total_memory_bytes": dev.total_memory_bytes,
            "vendor": dev.vendor,
        }
        return match_device(dev.name, props)

    return ctx.cached("device_peak", build)


def _op_calls(ctx: SignalContext) -> tuple[pd.DataFrame, pd.DataFrame, int]:
    """Kernels in the complete step windows with the op call that launched each
    (``op_pos``: row position in ``trace.ops``, -1 when none), one row per kernel, plus the
    kernels-per-op-call counts and the number of complete steps (at least 1)."""

    def build():
        from tracedoc.signals.attribution import kernel_op_pos, kernel_ops
        from tracedoc.signals.gpu import kernels_in_windows_mask
        from tracedoc.signals.steps import complete_mask, rows_of

        k = ctx.trace.kernels
        if not len(k):
            raise SignalUnavailable("the trace has no GPU kernels (a CPU-only trace)")
        ko = kernel_ops(ctx)
        keep = kernels_in_windows_mask(ctx)
        out = owned_frame(
            {
                # views of the kernels' columns where the windows keep one run of them
                "name": text_rows(ko["name"], lambda v: rows_of(v, keep)),
                "dur_us": rows_of(ko["dur_us"].to_numpy(dtype=float), keep),
                "occupancy_pct": rows_of(k["occupancy_pct"].to_numpy(dtype=float), keep),
                "op_pos": rows_of(kernel_op_pos(ctx), keep),
            }
        )
        if not len(out):
            raise SignalUnavailable("no kernel starts inside a step window")
        per_call = (
            out[out["op_pos"] >= 0]
            .groupby("op_pos")
            .agg(gpu_us=("dur_us", "sum"), n_kernels=("dur_us", "size"), kernel=("name", "first"))
        )
        n = max(int(complete_mask(ctx).sum()), 1)
        return out, per_call, n

    return ctx.cached("opview_calls", build)


def _text(value: Any) -> str | None:
    if value is None or (isinstance(value, float) and math.isnan(value)):
        return None
    return str(value)


def _group_costs(ctx: SignalContext) -> pd.DataFrame:
    """One row per (op name, recorded inputs) group, largest GPU time first: the name and
    :data:`SHAPE_COLUMNS` texts (``""`` when not recorded), calls, gpu_us, kernels, flops and
    bytes per call (NaN when unknown), kind, dtype, ``cost`` (the
    :class:`~tracedoc.perf.flops.OpCost`, or None) and ``gid`` (the group's number in
    :func:`_call_groups`)."""
    return _groups(ctx)[0]


def _call_groups(ctx: SignalContext) -> pd.Series:
    """For each op call of :func:`_op_calls` (index: its row position in ``trace.ops``), the
    ``gid`` of its group in :func:`_group_costs`."""
    return _groups(ctx)[1]


def call_gids(ctx: SignalContext, calls: np.ndarray) -> np.ndarray:
    """The ``gid`` (:func:`_call_groups`) of each op call of ``calls`` (row positions in
    ``trace.ops``, each a call of :func:`_op_calls`; shape ``(len(calls),)``, NaN for a call
    the groups leave out). A binary search in the calls' sorted index, not ``Series.loc``: that
    built the index's hash table (about 10 MiB on 1 M small events, issue 24) and kept it with
    the cached groups.

    Raises:
        KeyError: a position in ``calls`` is not a call of :func:`_op_calls`.
    """
    s = _call_groups(ctx)
    idx = s.index.to_numpy()  # the groupby's sorted op positions
    calls = np.asarray(calls)
    at = np.searchsorted(idx, calls)
    if calls.size and ((at >= idx.size).any() or (idx[np.minimum(at, idx.size - 1)] != calls).any()):
        raise KeyError("an op position that is not a call of the op view")
    return s.to_numpy()[at]


def _groups(ctx: SignalContext) -> tuple[pd.DataFrame, pd.Series]:
    def build() -> tuple[pd.DataFrame, pd.Series]:
        from tracedoc.load.shapes import parse_shape_arg
        from tracedoc.perf.flops import op_cost

        _, per_call, _ = _op_calls(ctx)
        ops = ctx.trace.ops
        pos = per_call.index.to_numpy()
        idx = per_call.index
        if (frame_names(ctx, "ops")[0][pos] < 0).any():  # an op without a name: pandas' groupby leaves it out
            g, gid = _groups_by_text(ops, per_call)
        else:
            # each call's group from integer codes of its key, numbered in order of first
            # appearance as the groupby on the texts numbered them (issue 24: that groupby's
            # object keys were a 65 MiB transient on 1 M small events, this is about 20), a
            # column's codes at a time (all five at once: 13 MiB of that)
            keys = (
                frame_names(ctx, "ops")[0][pos] if c is None else _text_key_codes(ops.get(c), pos)
                for c in (None, *SHAPE_COLUMNS)
            )
            gid = first_appearance_ids(keys)
            del keys
            first = pos[_first_rows(gid)]
            head = {"name": text_rows(ops["name"], lambda v: v[first], pd.RangeIndex(first.size))}
            for c in SHAPE_COLUMNS:
                head[c] = texts(_input_texts(ops.get(c), first))
            sums = pd.DataFrame(
                {"gpu_us": per_call["gpu_us"].to_numpy(), "n_kernels": per_call["n_kernels"].to_numpy()}
            )
            # the same rows summed in the same order as the groupby on the texts: the same floats
            agg = sums.groupby(gid, sort=True).agg(
                calls=("gpu_us", "size"), gpu_us=("gpu_us", "sum"), kernels=("n_kernels", "sum")
            )
            g = owned_frame(head).assign(**{c: agg[c].to_numpy() for c in ("calls", "gpu_us", "kernels")})
            gid = pd.Series(gid, index=idx)
        costs = []
        for r in g.itertuples(index=False):
            args = [parse_shape_arg(getattr(r, c)) if getattr(r, c) else None for c in SHAPE_COLUMNS]
            costs.append(op_cost(r.name, args[0], args[1], args[2], args[3]) if args[0] is not None else None)
        g = g.assign(
            flops=[c.flops if c else np.nan for c in costs],
            bytes=[c.bytes if c else np.nan for c in costs],
            kind=[c.kind if c else None for c in costs],
            dtype=[c.dtype if c else None for c in costs],
            cost=costs,
            gid=np.arange(len(g)),
        )
        return g.sort_values("gpu_us", ascending=False, kind="stable"), gid

    return ctx.cached("opview_groups", build)


def _groups_by_text(ops: pd.DataFrame, per_call: pd.DataFrame) -> tuple[pd.DataFrame, pd.Series]:
    """:func:`_groups`' groups by a groupby on the key texts (a trace with an op without a
    name: the groupby leaves those calls out, their ``gid`` NaN)."""
    pos = per_call.index.to_numpy()
    idx = per_call.index
    cols = {"name": text_rows(ops["name"], lambda v: v[pos], idx)}
    for c in SHAPE_COLUMNS:
        cols[c] = texts(_input_texts(ops.get(c), pos), idx)
    keyed = owned_frame(cols, index=idx).assign(
        gpu_us=per_call["gpu_us"].to_numpy(), n_kernels=per_call["n_kernels"].to_numpy()
    )
    by_key = keyed.groupby(["name", *SHAPE_COLUMNS], sort=False)
    gid = by_key.ngroup()  # numbered in order of first appearance, as the groups below
    g = by_key.agg(calls=("gpu_us", "size"), gpu_us=("gpu_us", "sum"), kernels=("n_kernels", "sum")).reset_index()
    return g, gid


def _text_key_codes(column: pd.Series | None, pos: np.ndarray) -> np.ndarray:
    """int64 codes of ``column``'s texts at the rows ``pos`` (shape ``(len(pos),)``), equal where
    the texts are, a missing value the same as ``""`` (:func:`_groups`' key); zeros for no
    column. A ``Categorical``'s own codes, else a factorisation of the texts."""
    if column is None:
        return np.zeros(len(pos), dtype=np.int64)
    if isinstance(column.dtype, pd.CategoricalDtype):
        codes = column.array.codes[pos].astype(np.int64)
        empty = int(column.cat.categories.get_indexer([""])[0])  # -1 when "" is no category
        if empty >= 0:
            codes[codes < 0] = empty
        return codes
    return pd.factorize(_input_texts(column, pos), sort=False)[0].astype(np.int64)


def _input_texts(column: pd.Series | None, rows: np.ndarray) -> np.ndarray:
    """The recorded-input texts of :func:`_groups`' key at the row positions ``rows`` (an
    ``object`` array, shape ``(len(rows),)``): ``""`` where none was recorded or there is no
    column. Only those rows are read (a ``Categorical`` takes its codes there first)."""
    out = np.empty(len(rows), dtype=object)
    if column is None:
        out[:] = ""
    else:
        out[:] = [_text(v) or "" for v in column.take(rows).to_numpy(dtype=object)]
    return out


def first_appearance_ids(keys: Iterable[np.ndarray]) -> np.ndarray:
    """Group ids (int64, shape ``(n,)``) of the rows of the integer key columns ``keys`` (each
    shape ``(n,)``; any iterable, read a column at a time, so a generator holds one column at
    once): rows with equal codes in every column share an id, and ids are numbered in order of
    first appearance (pandas' ``groupby(..., sort=False).ngroup()``). One column at a time: the
    ids so far times the column's span plus its code (below 2**62 for fewer than 2**31 rows and
    codes), factorised in row order; a column with one code leaves the ids as they are."""
    gid = None
    for k in keys:
        if gid is None:
            gid = np.zeros(len(k), dtype=np.int64)
        if not gid.size:
            break
        k = np.asarray(k, dtype=np.int64)
        lo, hi = int(k.min()), int(k.max())
        if lo == hi:
            continue
        gid *= hi - lo + 1
        gid += k
        gid -= lo
        gid = pd.factorize(gid, sort=False)[0].astype(np.int64, copy=False)
    return gid if gid is not None else np.zeros(0, dtype=np.int64)


def _first_rows(gid: np.ndarray) -> np.ndarray:
    """The row of each group's first appearance (shape ``(gid.max() + 1,)``), for ids numbered
    in order of first appearance (:func:`first_appearance_ids`): the rows whose id exceeds every
    id before them."""
    if not gid.size:
        return np.zeros(0, dtype=np.int64)
    seen = np.maximum.accumulate(gid)
    new = np.empty(gid.size, dtype=bool)
    new[0] = True
    np.greater(gid[1:], seen[:-1], out=new[1:])
    return np.flatnonzero(new)


def _roofline_fields(ctx: SignalContext, flops: float, nbytes: float, kind: str | None, dtype, seconds: float) -> dict:
    """Achieved TFLOP/s and TB/s, % of peak, FLOP/byte and bound of one cost over ``seconds``."""
    from tracedoc.perf.flops import OpCost, roofline

    empty = {"tflops": None, "tbps": None, "pct_of_peak": None, "intensity": None, "bound": None}
    if not (seconds > 0) or (math.isnan(flops) and math.isnan(nbytes)):
        return empty
    cost = OpCost(
        flops=0.0 if math.isnan(flops) else float(flops),
        bytes=0.0 if math.isnan(nbytes) else float(nbytes),
        kind=kind or "other",
        dtype=dtype or "float",
    )
    r = roofline(cost, seconds, device_peak(ctx))
    return {
        "tflops": _round(r.achieved_tflops, 3),
        "tbps": _round(r.achieved_tbps, 3),
        "pct_of_peak": _round(r.pct_of_peak, 1),
        "intensity": _round(r.intensity, 2),
        "bound": r.bound,
    }


def _round(x: float | None, nd: int) -> float | None:
    return None if x is None or (isinstance(x, float) and math.isnan(x)) else round(float(x), nd)


@signal("table", scope="steps")
def op_view(ctx: SignalContext) -> list[dict]:
    """The :data:`TOP_N` ops by GPU time per complete step, with their roofline (module docstring).

    Rows, largest first: ``{"op", "input_dims"`` (recorded dims text or None), ``"dtype",
    "kind", "calls_per_step", "kernels_per_call", "gpu_ms_per_step", "mean_us"`` (GPU time per
    call), ``"gflop"`` and ``"mbytes"`` (per call; None without a model), ``"tflops", "tbps",
    "pct_of_peak", "intensity"`` (FLOP/byte), ``"bound"`` (``"compute"``/``"memory"``; None
    when the peak is unknown)``}``.

    Raises:
        SignalUnavailable: no kernels, or none starts in a complete step window.
    """
    _, _, n = _op_calls(ctx)
    g = _group_costs(ctx).head(TOP_N)
    rows = []
    for r in g.itertuples(index=False):
        per_call_s = float(r.gpu_us) / r.calls * 1e-6
        rows.append(
            {
                "op": str(r.name),
                "input_dims": r.input_dims or None,
                "dtype": r.dtype if isinstance(r.dtype, str) else None,
                "kind": r.kind if isinstance(r.kind, str) else None,
                "calls_per_step": round(r.calls / n, 2),
                "kernels_per_call": round(r.kernels / r.calls, 2),
                "gpu_ms_per_step": round(float(r.gpu_us) / 1000.0 / n, 3),
                "mean_us": round(float(r.gpu_us) / r.calls, 2),
                "gflop": _round(r.flops / 1e9, 4),
                "mbytes": _round(r.bytes / 1e6, 3),
                **_roofline_fields(ctx, r.flops, r.bytes, r.kind, r.dtype, per_call_s),
            }
        )
    return rows


@signal("table", scope="steps")
def kernel_view(ctx: SignalContext) -> list[dict]:
    """The :data:`TOP_N` kernels by GPU time per complete step, with occupancy and, where known,
    achieved throughput (module docstring).

    Rows, largest first: ``{"kernel", "op"`` (the launching op most of its time ran for),
    ``"count_per_step", "gpu_ms_per_step", "mean_us", "occupancy_pct"`` (mean where recorded,
    else None), ``"tflops", "tbps", "pct_of_peak", "intensity", "bound"}`` (None unless the
    kernel ran alone for its op calls and the op has a cost model).

    Raises:
        SignalUnavailable: no kernels, or none starts in a complete step window.
    """
    kern, per_call, n = _op_calls(ctx)
    groups = _group_costs(ctx).sort_values("gid")
    # the op's cost per call, summed per kernel, over the calls that launched that kernel alone
    single = per_call[per_call["n_kernels"] == 1]
    gid = call_gids(ctx, single.index.to_numpy())
    fl, by = groups["flops"].to_numpy(dtype=float)[gid], groups["bytes"].to_numpy(dtype=float)[gid]
    known = ~(np.isnan(fl) & np.isnan(by))
    attributed = (
        pd.DataFrame(
            {
                "kernel": texts(single["kernel"].to_numpy(dtype=object)[known]),
                "flops": np.nan_to_num(fl[known]),
                "bytes": np.nan_to_num(by[known]),
                "us": single["gpu_us"].to_numpy(dtype=float)[known],
                "kind": texts(groups["kind"].to_numpy(dtype=object)[gid][known]),
                "dtype": texts(groups["dtype"].to_numpy(dtype=object)[gid][known]),
            }
        )
        .groupby("kernel", sort=False)
        .agg(
            flops=("flops", "sum"),
            bytes=("bytes", "sum"),
            us=("us", "sum"),
            kind=("kind", "first"),
            dtype=("dtype", "first"),
        )
    )
    g = (
        kern.groupby("name", sort=False)
        .agg(us=("dur_us", "sum"), count=("dur_us", "size"), occ=("occupancy_pct", "mean"))
        .sort_values("us", ascending=False, kind="stable")
        .head(TOP_N)
    )
    # each listed kernel's time per launching op, grouped on the sorted codes of the op names, one
    # kernel name at a time (the groups, their order and their sums as grouping the strings by
    # (kernel, op); a string per kernel for its op, then a groupby of every kernel on two keys,
    # was the analysis's peak on 1 M small events, issue 24)
    k_code, k_names = sorted_codes(kern["name"])
    o_code, o_names = sorted_codes(ctx.trace.ops["name"])
    op_pos, dur = kern["op_pos"].to_numpy(), kern["dur_us"].to_numpy()
    code_of = {name: i for i, name in enumerate(k_names.tolist())}

    def main_op(name: str) -> str | None:
        """The op the kernel ``name`` ran the most time for (None: never launched from an op)."""
        rows = np.flatnonzero((k_code == code_of[name]) & (op_pos >= 0))
        ops = o_code[op_pos[rows]]
        named = ops >= 0  # a missing op name is no group, as with strings
        if not named.any():
            return None
        return str(o_names[pd.Series(dur[rows][named]).groupby(ops[named]).sum().idxmax()])

    rows = []
    for name, r in g.iterrows():
        if name in attributed.index:
            a = attributed.loc[name]  # by key: a Series' .dtype is its own, not the column's
            roof = _roofline_fields(ctx, a["flops"], a["bytes"], a["kind"], a["dtype"], a["us"] * 1e-6)
        else:
            roof = _roofline_fields(ctx, np.nan, np.nan, None, None, 0.0)
        op = main_op(name)
        rows.append(
            {
                "kernel": str(name),
                "op": op,
                "count_per_step": round(float(r["count"]) / n, 1),
                "gpu_ms_per_step": round(float(r.us) / 1000.0 / n, 3),
                "mean_us": round(float(r.us) / float(r["count"]), 2),
                "occupancy_pct": _round(r.occ, 1),
                **roof,
            }
        )
    return rows
