"""Memory-bound elementwise, norm and softmax ops, and what fusing their chains would save.

Built on the op view (:mod:`tracedoc.signals.opview`): each kernel in a complete step window is
attached to the op call that launched it, and each op call's FLOPs and bytes come from its
recorded shapes (:func:`tracedoc.perf.flops.op_cost`). A *candidate* op call is one of kind
``elementwise``, ``norm`` or ``softmax`` that is memory-bound: its intensity (FLOP per byte) is
below the device's ridge point (fp32 vector peak over memory bandwidth; Williams, Waterman and
Patterson, "Roofline", CACM 2009). With no known peak the kinds alone decide: these models count
at most 8 FLOPs per element against at least 2 bytes read and 2 written per element, 2 FLOP/byte,
under the lowest ridge in ``tracedoc/perf/peaks.toml`` (A100 SXM 80GB: 19.5 / 2.039 = 9.6).
Softmax kernels that :mod:`tracedoc.signals.attention` counts as eager attention are left out:
TD310 (unfused-attention) owns them, and its fix removes them.

Chains. The trace records no tensor identities, so chains are read from launch order: on one
stream and in one step window, consecutive kernels of candidate op calls form a chain while each
op call reads a tensor of as many elements as the previous op call writes (its output: the
broadcast of its tensor inputs' shapes). Any other kernel between them ends the chain. Two
tensors of as many elements are not always the same tensor: two consecutive copies are never
linked (:data:`COPY_OPS`), nor is a write-only op (``fill_``, ``zero_``) the reading end of a
link. A fused kernel (``torch.compile``) reads each chain's external inputs and writes its final
output once; the intermediate tensor between two linked op calls is neither written nor read
back. Model:

    unfused_bytes = sum of each op call's bytes (op_cost: each input read once, output written once)
    fused_bytes   = unfused_bytes - sum over links of 2 * intermediate bytes
    saving        = chain GPU time * (1 - fused_bytes / unfused_bytes)

It assumes the ops run at the same bandwidth fused as unfused, and that an intermediate is used
by the next op only (a tensor also read later, a residual, must still be written: an upper
bound there). Per complete step.
"""

from __future__ import annotations

import math

import numpy as np

from tracedoc.signals.arrays import sorted_unique
from tracedoc.signals.base import SignalContext, SignalUnavailable, signal

#: Op kinds (:attr:`tracedoc.perf.flops.OpCost.kind`) that fusion compilers fuse into one
#: kernel (Inductor's pointwise, reduction-per-row norm and softmax templates).
FUSIBLE_KINDS = ("elementwise", "norm", "softmax")
#: Ops that write their output without reading a tensor (``fill_``, ``zero_``: ``op_cost`` counts
#: the write only): never the reading end of a link.
WRITE_ONLY_OPS = frozenset({"fill_", "zero_", "fill", "zeros_like", "ones_like", "full_like"})
#: Copies (layout or dtype changes). A copy that reads the copy just made is pointless code, so two
#: consecutive copies of as many elements are taken to move different tensors (``q``, ``k``, ``v``
#: made contiguous one after another), not a chain.
COPY_OPS = frozenset({"copy_", "clone", "_to_copy", "contiguous"})
#: Rows of :func:`top_elementwise_chains`.
TOP_N = 10


def _out_elems(dims, types) -> tuple[int | None, list[tuple[int, int]]]:
    """Elements of an op's output (the broadcast of its tensor inputs) and each tensor input's
    (elements, bytes per element)."""
    from tracedoc.perf.flops import DTYPE_BYTES, dtype_name

    shapes, ins = [], []
    for d, t in zip(dims or [], types or [], strict=False):
        name = dtype_name(t)
        if name is None or not isinstance(d, list) or not d or not all(isinstance(x, int) and x >= 0 for x in d):
            continue
        shapes.append(d)
        ins.append((math.prod(d), DTYPE_BYTES.get(name, 0)))
    if not shapes:
        return None, ins
    rank = max(len(s) for s in shapes)
    out = 1
    for i in range(1, rank + 1):
        sizes = {s[-i] for s in shapes if len(s) >= i} - {1}
        out *= max(sizes) if sizes else 1
    return out, ins


#: Why :func:`_calls` has nothing to measure.
NO_CANDIDATES = "no elementwise, norm or softmax op with recorded shapes (record_shapes=True)"


def _calls(ctx: SignalContext):
    """Per kernel of the op view (in trace order): stream, start, duration and the candidate op
    call it belongs to (-1 when none), plus per op position its (bytes, out_elems, inputs,
    label).

    Raises:
        SignalUnavailable: no kernels in the op view, or no candidate op call
            (:data:`NO_CANDIDATES`).
    """
    from tracedoc.load.shapes import parse_shape_arg
    from tracedoc.perf.flops import op_cost
    from tracedoc.signals.gpu import kernels_in_windows_mask
    from tracedoc.signals.opview import SHAPE_COLUMNS, _group_costs, _op_calls, call_gids, device_peak

    kern, _, n = _op_calls(ctx)
    keep = kernels_in_windows_mask(ctx)
    k = ctx.trace.kernels
    rows = np.flatnonzero(keep)
    op_pos = kern["op_pos"].to_numpy().copy()
    # eager attention's softmax belongs to TD310
    try:
        from tracedoc.signals.attention import _eager_mask, attention_kernels

        ak = attention_kernels(ctx)
        eager = ak.index.to_numpy()[_eager_mask(ak)]
        op_pos[np.isin(rows, eager)] = -1
    except SignalUnavailable:
        pass
    peak = device_peak(ctx)
    # one candidate per op-view group (name and recorded inputs), then each call takes its group's
    by_gid = {
        r.gid: _candidate((r.name, *(getattr(r, c) for c in SHAPE_COLUMNS)), parse_shape_arg, op_cost, peak)
        for r in _group_costs(ctx).itertuples(index=False)
    }
    calls = sorted_unique(op_pos[op_pos >= 0])
    gids = call_gids(ctx, calls)
    info: dict[int, tuple] = {int(p): by_gid[g] for p, g in zip(calls, gids, strict=True) if by_gid[g] is not None}
    if not info:  # before the per-kernel arrays below are built for nothing (issue 24)
        raise SignalUnavailable(NO_CANDIDATES)
    # a test per kernel row, vectorised: a list of every row's position as a Python int was 13 MiB
    # on 1 M small events (issue 24)
    cand = np.isin(op_pos, np.fromiter(info, dtype=np.int64, count=len(info)))
    from tracedoc.signals.steps import step_windows

    ts = k["ts_us"].to_numpy(dtype=float)[rows]
    step = np.searchsorted(step_windows(ctx)["start_us"].to_numpy(dtype=float), ts, side="right")
    return {
        "step": step,
        "stream": k["stream"].to_numpy()[rows],
        "ts": ts,
        "dur": kern["dur_us"].to_numpy(dtype=float),
        "op_pos": np.where(cand, op_pos, -1),
        "info": info,
        "n": n,
    }


def _candidate(key, parse, op_cost, peak) -> tuple | None:
    """(bytes, output elements, inputs, op name) of a memory-bound fusible op, else None."""
    args = [parse(v) if v else None for v in key[1:]]
    if args[0] is None:
        return None
    cost = op_cost(key[0], *args)
    if cost is None or cost.kind not in FUSIBLE_KINDS or not (cost.bytes > 0):
        return None
    if peak is not None:
        p, bw = peak.peak_tflops(cost.dtype, False), peak.mem_tbs
        if p and bw and cost.flops / cost.bytes >= p / bw:
            return None  # compute-bound on this device
    out, ins = _out_elems(args[0], args[1])
    name = key[0][6:] if key[0].startswith("aten::") else key[0]
    if name in WRITE_ONLY_OPS:
        ins = []
    return (float(cost.bytes), out, ins, name)


def _chains(ctx: SignalContext) -> dict:
    """Candidate GPU time and the chains (module docstring), per complete step."""

    def build():
        c = _calls(ctx)
        n, info = c["n"], c["info"]
        total_us = float(c["dur"][c["op_pos"] >= 0].sum())
        patterns: dict[str, list[float]] = {}
        saving_us = 0.0
        order = np.lexsort((c["ts"], c["step"], c["stream"]))
        stream, op_pos, dur = c["stream"][order], c["op_pos"][order], c["dur"][order]
        # a chain stays in one stream and one step window
        lane = list(zip(stream.tolist(), c["step"][order].tolist(), strict=True))
        chain: list[int] = []  # op positions of the open chain
        chain_us = 0.0

        def close():
            nonlocal saving_us
            if len(chain) > 1:
                unfused = sum(info[p][0] for p in chain)
                saved = sum(_link_bytes(info[a], info[b]) for a, b in zip(chain, chain[1:], strict=False))
                saved = min(saved, unfused)
                s = chain_us * saved / unfused
                saving_us += s
                acc = patterns.setdefault(" > ".join(info[p][3] for p in chain), [0, 0.0, 0.0, 0.0, 0.0])
                acc[0] += 1
                acc[1] += chain_us
                acc[2] += unfused
                acc[3] += unfused - saved
                acc[4] += s

        prev_stream = None
        for i in range(len(order)):
            p, s = int(op_pos[i]), lane[i]
            if p < 0 or s != prev_stream:
                close()
                chain, chain_us = [], 0.0
            prev_stream = s
            if p < 0:
                continue
            if chain and chain[-1] == p:
                chain_us += float(dur[i])  # another kernel of the same op call
                continue
            if chain and _link_bytes(info[chain[-1]], info[p]) == 0:
                close()
                chain, chain_us = [], 0.0
            chain.append(p)
            chain_us += float(dur[i])
        close()
        return {"total_ms": total_us / 1000.0 / n, "saving_ms": saving_us / 1000.0 / n, "patterns": patterns, "n": n}

    return ctx.cached("elementwise_chains", build)


def _link_bytes(a: tuple, b: tuple) -> float:
    """Bytes not moved when ``b`` reads ``a``'s output in a fused kernel: written once by ``a`` and
    read once by ``b`` (the input of ``b`` with as many elements as ``a`` writes); 0: no link
    (also between two copies, :data:`COPY_OPS`, and into a write-only op, :data:`WRITE_ONLY_OPS`)."""
    out = a[1]
    if out is None or (a[3] in COPY_OPS and b[3] in COPY_OPS):
        return 0.0
    for elems, size in b[2]:
        if elems == out:
            return 2.0 * elems * size
    return 0.0


@signal("ms", scope="steps")
def memory_bound_elementwise_ms(ctx: SignalContext) -> float:
    """GPU time per complete step of the kernels of memory-bound elementwise, norm and softmax op
    calls (module docstring; eager attention's softmax left out).

    Raises:
        SignalUnavailable: no kernels, or no such op with recorded shapes.
    """
    return float(_chains(ctx)["total_ms"])


@signal("share", scope="steps")
def memory_bound_elementwise_share(ctx: SignalContext) -> float:
    """``memory_bound_elementwise_ms / step_time_ms`` (0..1)."""
    step = ctx.get("step_time_ms")
    if not step or not (step > 0):
        raise SignalUnavailable("no step time")
    return min(float(ctx.get("memory_bound_elementwise_ms")) / float(step), 1.0)


@signal("ms", scope="steps")
def elementwise_fusion_saving_ms(ctx: SignalContext) -> float:
    """Per complete step, the time fusing each chain of memory-bound op calls would save if the
    fused kernel ran at the same bandwidth: ``sum over chains of chain time * (1 - fused_bytes /
    unfused_bytes)``, fused bytes leaving out each intermediate tensor's write and read (module
    docstring)."""
    return float(_chains(ctx)["saving_ms"])


@signal("table", scope="steps")
def top_elementwise_chains(ctx: SignalContext) -> list[dict]:
    """The :data:`TOP_N` chain patterns by saving: ``{"ops"`` (op names, ``a > b > c``),
    ``"chains_per_step", "gpu_ms", "unfused_mb", "fused_mb", "saving_ms"}`` (per step)."""
    ch = _chains(ctx)
    n = ch["n"]
    rows = [
        {
            "ops": ops,
            "chains_per_step": round(a[0] / n, 2),
            "gpu_ms": round(a[1] / 1000.0 / n, 3),
            "unfused_mb": round(a[2] / 1e6 / n, 3),
            "fused_mb": round(a[3] / 1e6 / n, 3),
            "saving_ms": round(a[4] / 1000.0 / n, 3),
        }
        for ops, a in ch["patterns"].items()
    ]
    rows.sort(key=lambda r: -r["saving_ms"])
    return rows[:TOP_N]
