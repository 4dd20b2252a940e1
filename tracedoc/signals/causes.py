"""Evidence for the host-side causes of the idle ledger: blocking calls, the allocator,
start-up work, compiled models (whether, and how much of the kernel time) and step-time outliers.

The time each cause costs the GPU is its ledger slice (``idle_<cause>_ms``,
:mod:`tracedoc.signals.ledger`); the signals here say *what* caused it (which calls,
issued by which CPU ops, from which Python lines) so a finding can point at the code.
"""

from __future__ import annotations

import numpy as np
import pandas as pd

from tracedoc.signals.base import SignalContext, SignalUnavailable, signal
from tracedoc.signals.intervals import merge
from tracedoc.signals.ledger import BLOCKING_OPS, _runtime_classes, primary_ledger
from tracedoc.signals.steps import complete_mask, gpu_events, has_steps, in_complete_steps, step_windows
from tracedoc.signals.strings import cached_name_mask, frame_threads

#: Names that show the model was compiled with torch.compile (TorchDynamo + Inductor annotate
#: compiled regions and the graphs they call; AOTAutograd's autograd.Function is CompiledFunction).
COMPILED_MARKERS = ("Torch-Compiled Region", "CompiledFunction", "CompiledFxGraph", "## Call CompiledFxGraph")
#: Kernel names produced by Inductor's Triton code generation.
TRITON_KERNEL_PREFIXES = ("triton_poi_", "triton_per_", "triton_red_", "triton_tem_")
#: A step is an outlier when it is longer than this many times the median step
#: (issue 8's "say over 1.5x"; the same factor Nsight Systems' expert rules use for outlier ranges is not public).
OUTLIER_FACTOR = 1.5
#: Stack frames from these paths are library internals, skipped when naming the user's code.
_LIBRARY_FRAMES = ("torch/", "site-packages/", "<built-in", "threading.py", "runpy.py")


def _n_steps(ctx: SignalContext) -> int:
    return max(int(complete_mask(ctx).sum()), 1)


def _enclosing(ops: pd.DataFrame, thread: np.ndarray, key: str, ts: float, cats: tuple[str, ...]) -> pd.DataFrame:
    sel = (thread == key) & ops["cat"].isin(cats).to_numpy()
    o = ops[sel]
    inside = (o["ts_us"].to_numpy() <= ts) & (o["end_us"].to_numpy() >= ts)
    return o[inside].sort_values("dur_us")  # innermost first


def _user_frame(stack: pd.DataFrame) -> str | None:
    for name in stack["name"]:
        if not any(p in name for p in _LIBRARY_FRAMES):
            return name
    return None


@signal("table")
def top_blocking_calls(ctx: SignalContext) -> list[dict]:
    """The blocking calls (synchronisations, blocking copies, ``.item()``) inside the steps
    that cost the most time: call, the CPU op that issued it, the innermost user Python
    frame when the trace has stacks, count and ms per step."""
    t = ctx.trace
    rt, ops = t.runtime, t.ops
    cls = _runtime_classes(ctx)
    b = rt[cls["blocking"].to_numpy() & in_complete_steps(ctx, rt["ts_us"].to_numpy())]
    block_ops = ops[cached_name_mask(ctx, "ops", "blocking", lambda n: bool(BLOCKING_OPS.match(n)))]
    if not len(b) and not len(block_ops):
        raise SignalUnavailable("no blocking synchronisation or copy inside the steps")
    codes, labels = frame_threads(ctx, "ops")
    thread = labels[codes]
    rows = []
    n = _n_steps(ctx)
    for _, r in b.sort_values("dur_us", ascending=False).head(50).iterrows():
        key = f"{r['pid']}/{r['tid']}"
        enc = _enclosing(ops, thread, key, float(r["ts_us"]), ("cpu_op",))
        stack = _enclosing(ops, thread, key, float(r["ts_us"]), ("python_function",))
        op = enc["name"].iloc[-1] if len(enc) else None  # outermost op: what the user called
        rows.append({"call": r["name"], "op": op, "python": _user_frame(stack), "us": float(r["dur_us"])})
    if not rows:
        return []
    df = pd.DataFrame(rows).fillna({"op": "", "python": ""})
    g = df.groupby(["call", "op", "python"]).agg(count=("us", "size"), us=("us", "sum")).reset_index()
    g = g.sort_values("us", ascending=False).head(5)
    return [
        {
            "call": r["call"],
            "op": r["op"] or None,
            "python": r["python"] or None,
            "per_step": round(float(r["count"]) / n, 2),
            "ms_per_step": round(float(r["us"]) / 1000 / n, 3),
        }
        for _, r in g.iterrows()
    ]


@signal("count", scope="host")
def blocking_calls_per_step(ctx: SignalContext) -> float:
    """Blocking runtime calls (synchronisations, blocking copies) per complete step."""
    rt = ctx.trace.runtime
    cls = _runtime_classes(ctx)
    inside = in_complete_steps(ctx, rt["ts_us"].to_numpy())
    return float((cls["blocking"].to_numpy() & inside).sum()) / _n_steps(ctx)


@signal("share")
def blocking_sync_idle_share(ctx: SignalContext) -> float:
    """The ledger's ``blocking_sync`` slice over the step time (0..1)."""
    return primary_ledger(ctx)["blocking_sync"] / ctx.get("step_time_ms")


@signal("count", scope="host")
def allocator_calls_per_step(ctx: SignalContext) -> float:
    """cudaMalloc/cudaFree (and HIP equivalents) calls per complete step.

    Unavailable without ``ProfilerStep`` annotations: churn means allocations repeated
    every step, which a trace without steps cannot show (a single window is warm-up as
    likely as steady state).
    """
    if not has_steps(ctx):
        raise SignalUnavailable("the trace has no ProfilerStep annotations (allocator churn is repeated per step)")
    rt = ctx.trace.runtime
    cls = _runtime_classes(ctx)
    inside = in_complete_steps(ctx, rt["ts_us"].to_numpy())
    return float((cls["allocator"].to_numpy() & inside).sum()) / _n_steps(ctx)


@signal("ms", scope="host")
def allocator_ms(ctx: SignalContext) -> float:
    """CPU time per step inside cudaMalloc/cudaFree (HIP equivalents) calls, ms (whether or not the GPU idled)."""
    rt = ctx.trace.runtime
    cls = _runtime_classes(ctx)
    m = cls["allocator"].to_numpy() & in_complete_steps(ctx, rt["ts_us"].to_numpy())
    return float(rt["dur_us"].to_numpy()[m].sum()) / 1000 / _n_steps(ctx)


@signal("share")
def startup_share(ctx: SignalContext) -> float:
    """The ledger's ``startup`` slice over the step time (0..1): how much of the profiled
    window is one-off start-up work rather than steady state."""
    return primary_ledger(ctx)["startup"] / ctx.get("step_time_ms")


@signal("ratio", scope="steps")
def first_step_ratio(ctx: SignalContext) -> float:
    """First complete step's length over the median of the other complete steps.

    Unavailable with fewer than 3 complete steps (a median of one is no baseline).
    """
    w = step_windows(ctx)
    d = w["dur_us"].to_numpy()[complete_mask(ctx)]
    if not has_steps(ctx) or d.size < 3:
        raise SignalUnavailable("fewer than 3 complete steps")
    med = float(np.median(d[1:]))
    if med <= 0:
        raise SignalUnavailable("the steps have zero length")
    return float(d[0] / med)


@signal("ms", scope="steps")
def warmup_ms(ctx: SignalContext) -> float:
    """One-off start-up time per step, ms: the larger of the ledger's ``startup`` slice and the
    first step's excess over the median step (spread over the steps), when that step is
    more than 1.5x the median. The two measure the same warm-up, so they are not added."""
    startup = primary_ledger(ctx)["startup"] if ctx.trace.has_gpu_activity else 0.0
    ratio, _ = ctx.try_get("first_step_ratio")
    excess = 0.0
    if ratio is not None and ratio > OUTLIER_FACTOR:
        w = step_windows(ctx)
        d = w["dur_us"].to_numpy()[complete_mask(ctx)]
        excess = float(d[0] - np.median(d[1:])) / 1000 / d.size
    return max(startup, excess)


@signal("table", scope="host")
def top_startup_calls(ctx: SignalContext) -> list[dict]:
    """The longest start-up runtime calls (context creation, module loads, slow first launches)."""
    rt = ctx.trace.runtime
    cls = _runtime_classes(ctx)
    s = rt[cls["startup"].to_numpy()]
    if not len(s):
        raise SignalUnavailable("no start-up runtime calls")
    s = s.sort_values("dur_us", ascending=False).head(5)
    return [{"call": r["name"], "ms": round(float(r["dur_us"]) / 1000, 3)} for _, r in s.iterrows()]


@signal("bool", scope="trace")
def torch_compiled(ctx: SignalContext) -> bool:
    """Whether the model runs compiled (torch.compile): the trace has Dynamo/AOTAutograd regions
    (``Torch-Compiled Region``, ``CompiledFunction``, ``CompiledFxGraph``) or Inductor's Triton
    kernels (``triton_poi_``/``triton_per_``/``triton_red_``/``triton_tem_``)."""
    if cached_name_mask(ctx, "ops", "compiled_region", _is_compiled_region).any():
        return True
    return bool(cached_name_mask(ctx, "kernels", "triton", _is_inductor_triton_kernel).any())


def _is_compiled_region(name: str) -> bool:
    return any(m in name for m in COMPILED_MARKERS)


def _is_inductor_triton_kernel(name: str) -> bool:
    return name.startswith(TRITON_KERNEL_PREFIXES)


def compiled_launch_mask(ctx: SignalContext) -> np.ndarray:
    """Boolean mask over ``trace.runtime``: the runtime call starts inside a compiled region on its
    own thread (same pid/tid, ``op.ts_us <= call.ts_us <= op.end_us``).

    A compiled region is any op, annotation or Python-function span of ``trace.ops`` whose name
    contains a :data:`COMPILED_MARKERS` entry: Dynamo's ``Torch-Compiled Region``, AOTAutograd's
    ``CompiledFunction`` (forward, on the calling thread) and ``CompiledFunctionBackward`` (on the
    autograd engine's thread), Inductor's ``## Call CompiledFxGraph ...`` annotation. Containment
    is the same test :func:`tracedoc.signals.attribution.runtime_ops` uses for enclosing ops.

    Returns:
        ``bool`` array of ``len(trace.runtime)`` (all False without compiled regions).
    """

    def build() -> np.ndarray:
        t = ctx.trace
        rt = t.runtime
        out = np.zeros(len(rt), dtype=bool)
        marker = cached_name_mask(ctx, "ops", "compiled_region", _is_compiled_region)
        if not len(rt) or not marker.any():
            return out
        rt_codes, rt_labels = frame_threads(ctx, "runtime")
        op_codes, op_labels = frame_threads(ctx, "ops")
        op_code_of = {lab: i for i, lab in enumerate(op_labels)}
        o_ts, o_end = t.ops["ts_us"].to_numpy(dtype=float), t.ops["end_us"].to_numpy(dtype=float)
        r_ts = rt["ts_us"].to_numpy(dtype=float)
        for rc, key in enumerate(rt_labels):
            oc = op_code_of.get(key)
            if oc is None:
                continue
            sel = marker & (op_codes == oc)
            if not sel.any():
                continue
            s, e = merge(o_ts[sel], o_end[sel])
            if not s.size:
                continue
            r_idx = np.flatnonzero(rt_codes == rc)
            x = r_ts[r_idx]
            k = np.searchsorted(s, x, side="right") - 1
            out[r_idx] = (k >= 0) & (x <= e[np.maximum(k, 0)])
        return out

    return ctx.cached("compiled_launch_mask", build)


@signal("share")
def compiled_kernel_share(ctx: SignalContext) -> float:
    """Share of compute-kernel time launched from compiled (torch.compile) regions, 0..1.

    Kernels: the primary device's kernels that start inside the complete step windows
    (:func:`tracedoc.signals.tensor_core.window_kernels`), communication kernels (NCCL/RCCL, ...)
    left out of both sums: they are launched by the communication library, not by the model's
    code, and their time is mostly waiting for peers. A kernel is *compiled* when its launching
    runtime call (the one ``args.correlation`` join, :func:`tracedoc.signals.links.link_launches`)
    starts inside a compiled region on the launching thread (:func:`compiled_launch_mask`), or
    when it is one of Inductor's Triton kernels (``triton_poi_``/``triton_per_``/``triton_red_``/
    ``triton_tem_``: only Inductor-generated code launches them). Share = summed durations (µs) of
    compiled kernels / summed durations of all of them.

    Any Dynamo marker makes ``torch_compiled`` true; this share says how much of the GPU work the
    compiled regions actually launch (a model whose optimizer step, data movement or most layers
    run eagerly has a low share). ``launch-bound-compiled`` needs it above 0.5 (most kernel time).

    Raises:
        SignalUnavailable: no kernel time inside the step windows, or only communication kernels.
    """
    from tracedoc.signals.tensor_core import window_kernels

    ko = window_kernels(ctx)
    k = ctx.trace.kernels
    pos = gpu_events(ctx)["rt_pos"].to_numpy()[: len(k)]  # gpu_events lists the kernels first
    linked = pos >= 0
    launched = np.zeros(len(k), dtype=bool)
    launched[linked] = compiled_launch_mask(ctx)[pos[linked]]
    compiled = launched | cached_name_mask(ctx, "kernels", "triton", _is_inductor_triton_kernel)
    comm = gpu_events(ctx)["comm"].to_numpy(dtype=bool)[: len(k)]
    rows = ko.index.to_numpy()
    keep = ~comm[rows]
    dur = ko["dur_us"].to_numpy(dtype=float)[keep]
    total = float(dur.sum())
    if total <= 0:
        raise SignalUnavailable("no compute-kernel time inside the step windows")
    return float(dur[compiled[rows][keep]].sum() / total)


@signal("ratio", scope="steps")
def max_step_ratio(ctx: SignalContext) -> float:
    """Longest complete step over the median complete step (the first step excluded, since
    ``warmup-in-profile`` owns it). Unavailable with fewer than 4 complete steps."""
    w = step_windows(ctx)
    d = w["dur_us"].to_numpy()[complete_mask(ctx)]
    if not has_steps(ctx) or d.size < 4:
        raise SignalUnavailable("fewer than 4 complete steps")
    rest = d[1:]
    med = float(np.median(rest))
    if med <= 0:
        raise SignalUnavailable("the steps have zero length")
    return float(rest.max() / med)


@signal("ms", scope="steps")
def outlier_excess_ms(ctx: SignalContext) -> float:
    """Per step, ms: the time the outlier steps (over 1.5x the median, first step excluded)
    spend beyond the median step, spread over all complete steps."""
    ratio = ctx.get("max_step_ratio")  # raises with too few steps
    w = step_windows(ctx)
    d = w["dur_us"].to_numpy()[complete_mask(ctx)]
    rest = d[1:]
    med = float(np.median(rest))
    if ratio <= OUTLIER_FACTOR:
        return 0.0
    return float(np.clip(rest - med, 0, None)[rest > OUTLIER_FACTOR * med].sum()) / 1000 / d.size


@signal("table")
def outlier_step_ledger(ctx: SignalContext) -> list[dict]:
    """How the slowest step's time differs from the median step: per ledger cause (and busy),
    ms in the outlier step, ms in the median step, and the difference."""
    from tracedoc.signals.ledger import LEDGER_KEYS, device_ledger_us, ledger_devices

    ctx.get("max_step_ratio")
    w = step_windows(ctx)
    m = complete_mask(ctx)
    idx = np.flatnonzero(m)[1:]
    d = w["dur_us"].to_numpy()[idx]
    slow = idx[int(np.argmax(d))]
    med_i = idx[int(np.argsort(d)[len(d) // 2])]
    rows = [{"part": "step", "outlier_ms": d.max() / 1000, "median_ms": float(w["dur_us"].iat[med_i]) / 1000}]
    if ctx.trace.has_gpu_activity:
        arr = device_ledger_us(ctx, ledger_devices(ctx)[0])
        for j, k in enumerate((*LEDGER_KEYS, "busy")):
            rows.append({"part": k, "outlier_ms": arr[slow, j] / 1000, "median_ms": arr[med_i, j] / 1000})
            if k == "busy":
                break
    out = []
    for r in rows:
        diff = r["outlier_ms"] - r["median_ms"]
        if r["part"] == "step" or abs(diff) >= 0.01:
            out.append(
                {
                    "part": r["part"],
                    "outlier_ms": round(r["outlier_ms"], 3),
                    "median_ms": round(r["median_ms"], 3),
                    "diff_ms": round(diff, 3),
                }
            )
    step_row, rest = out[0], sorted(out[1:], key=lambda r: -abs(r["diff_ms"]))
    return [step_row] + rest[:6]
