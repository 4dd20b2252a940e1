"""Step windows and the step-time breakdown.

Step window (as the PyTorch TensorBoard profiler plugin defined it, so its published
figures can be checked against ours): for ``ProfilerStep#N`` with CPU span
``[s_i, e_i]``, let ``g_i`` be the latest end of any kernel/memcpy/memset launched by a
runtime call that starts inside ``[s_i, e_i]`` (linked by ``correlation``). Then

    window_i = [max(s_i, end_{i-1}), max(e_i, g_i)]

so GPU work that trails the CPU is charged to the step that launched it. A trace
without step annotations gets one window over the whole trace (``has_steps`` False).

Breakdown: every µs of a window is assigned to the first busy category in the order
kernel > memcpy > memset > runtime > dataloader > cpu_exec > other (the plugin's
"Step Time Breakdown" priority). ``cpu_exec`` counts ``cpu_op`` and ``user_annotation``
events other than ``ProfilerStep#`` (``python_function`` stack events are excluded:
they cover the whole step).
"""

from __future__ import annotations

import numpy as np
import pandas as pd

from tracedoc.signals.base import SignalContext, SignalUnavailable, signal
from tracedoc.signals.intervals import covered_mask
from tracedoc.signals.strings import startswith_mask

BREAKDOWN_CATEGORIES = ("kernel", "memcpy", "memset", "runtime", "dataloader", "cpu_exec", "other")
DATALOADER_PREFIX = "enumerate(DataLoader)#"


def gpu_events(ctx: SignalContext) -> pd.DataFrame:
    """Kernels, memcpys and memsets in one frame: kind, name, device, ts_us, end_us, correlation."""

    def build() -> pd.DataFrame:
        t = ctx.trace
        parts = []
        for kind, df in (("kernel", t.kernels), ("memcpy", t.memcpys), ("memset", t.memsets)):
            if len(df):
                parts.append(
                    pd.DataFrame(
                        {
                            "kind": kind,
                            "name": df["name"],
                            "device": df["device"],
                            "ts_us": df["ts_us"],
                            "end_us": df["end_us"],
                            "correlation": df["correlation"],
                        }
                    )
                )
        if not parts:
            return pd.DataFrame({"kind": [], "name": [], "device": [], "ts_us": [], "end_us": [], "correlation": []})
        return pd.concat(parts, ignore_index=True)

    return ctx.cached("gpu_events", build)


def step_windows(ctx: SignalContext) -> pd.DataFrame:
    """One row per step window: step, cpu_start_us, cpu_end_us, start_us, end_us, dur_us.

    See the module docstring for the definition.
    """

    def build() -> pd.DataFrame:
        t = ctx.trace
        steps = t.steps
        if not len(steps):
            return pd.DataFrame(
                {
                    "step": [-1],
                    "cpu_start_us": [0.0],
                    "cpu_end_us": [t.span_us],
                    "start_us": [0.0],
                    "end_us": [t.span_us],
                    "dur_us": [t.span_us],
                }
            )
        s = steps["ts_us"].to_numpy()
        e = steps["end_us"].to_numpy()
        g = np.full(len(steps), -np.inf)
        gpu = gpu_events(ctx)
        rt = t.runtime
        if len(gpu) and len(rt):
            linked = (
                rt[["ts_us", "correlation"]].dropna().merge(gpu[["correlation", "end_us"]].dropna(), on="correlation")
            )
            if len(linked):
                ts = linked["ts_us"].to_numpy()
                idx = np.searchsorted(s, ts, side="right") - 1
                ok = (idx >= 0) & (ts <= e[np.maximum(idx, 0)])
                if ok.any():
                    np.maximum.at(g, idx[ok], linked["end_us"].to_numpy()[ok])
        start = np.empty(len(steps))
        end = np.empty(len(steps))
        prev_end = -np.inf
        for i in range(len(steps)):  # one iteration per step: a handful
            start[i] = max(s[i], prev_end)
            end[i] = max(e[i], g[i], start[i])
            prev_end = end[i]
        return pd.DataFrame(
            {
                "step": steps["step"].to_numpy(),
                "cpu_start_us": s,
                "cpu_end_us": e,
                "start_us": start,
                "end_us": end,
                "dur_us": end - start,
            }
        )

    return ctx.cached("step_windows", build)


def has_steps(ctx: SignalContext) -> bool:
    return len(ctx.trace.steps) > 0


def dataloader_spans(ctx: SignalContext) -> pd.DataFrame:
    """CPU spans of ``enumerate(DataLoader)#...__next__``."""
    ops = ctx.trace.ops
    return ctx.cached("dataloader_spans", lambda: ops[startswith_mask(ops["name"], DATALOADER_PREFIX)])


def breakdown_us(ctx: SignalContext) -> pd.DataFrame:
    """Per step window, µs assigned to each breakdown category (columns BREAKDOWN_CATEGORIES)."""

    def build() -> pd.DataFrame:
        t = ctx.trace
        w = step_windows(ctx)
        ws, we = w["start_us"].to_numpy(), w["end_us"].to_numpy()
        ops = t.ops
        cpu = ops[(ops["cat"].isin(("cpu_op", "user_annotation"))) & ~startswith_mask(ops["name"], "ProfilerStep#")]
        dl = dataloader_spans(ctx)
        layers = [
            (t.kernels["ts_us"].to_numpy(), t.kernels["end_us"].to_numpy()),
            (t.memcpys["ts_us"].to_numpy(), t.memcpys["end_us"].to_numpy()),
            (t.memsets["ts_us"].to_numpy(), t.memsets["end_us"].to_numpy()),
            (t.runtime["ts_us"].to_numpy(), t.runtime["end_us"].to_numpy()),
            (dl["ts_us"].to_numpy(), dl["end_us"].to_numpy()),
            (cpu["ts_us"].to_numpy(), cpu["end_us"].to_numpy()),
        ]
        lo, hi = ws.min(), we.max()
        bounds = [ws, we]
        for a, b in layers:
            bounds.append(np.clip(a, lo, hi))
            bounds.append(np.clip(b, lo, hi))
        grid = np.unique(np.concatenate(bounds))
        seg_len = np.diff(grid)
        assigned = np.full(seg_len.size, len(layers), dtype=np.int64)  # default: "other"
        for k in range(len(layers) - 1, -1, -1):  # lowest priority first, higher overwrite
            a, b = layers[k]
            mask = covered_mask(np.clip(a, lo, hi), np.clip(b, lo, hi), grid)
            assigned[mask] = k
        step_idx = np.searchsorted(ws, grid[:-1], side="right") - 1
        inside = (step_idx >= 0) & (grid[:-1] < we[np.maximum(step_idx, 0)])
        out = np.zeros((len(w), len(BREAKDOWN_CATEGORIES)))
        np.add.at(out, (step_idx[inside], assigned[inside]), seg_len[inside])
        df = pd.DataFrame(out, columns=list(BREAKDOWN_CATEGORIES))
        df.insert(0, "step", w["step"].to_numpy())
        return df

    return ctx.cached("breakdown_us", build)


def gpu_events_per_step(ctx: SignalContext) -> np.ndarray:
    """Number of GPU events launched by runtime calls inside each step's CPU span."""

    def build() -> np.ndarray:
        t = ctx.trace
        w = step_windows(ctx)
        n = np.zeros(len(w), dtype=np.int64)
        gpu = gpu_events(ctx)
        if not has_steps(ctx) or not len(gpu) or not len(t.runtime):
            return n
        linked = t.runtime[["ts_us", "correlation"]].dropna().merge(gpu[["correlation"]].dropna(), on="correlation")
        s, e = w["cpu_start_us"].to_numpy(), w["cpu_end_us"].to_numpy()
        ts = linked["ts_us"].to_numpy()
        idx = np.searchsorted(s, ts, side="right") - 1
        ok = (idx >= 0) & (ts <= e[np.maximum(idx, 0)])
        np.add.at(n, idx[ok], 1)
        return n

    return ctx.cached("gpu_events_per_step", build)


def complete_mask(ctx: SignalContext) -> np.ndarray:
    """Which step windows count in averages.

    Every step, except at the tail (the TensorBoard plugin's rule for a last step cut
    off by the end of profiling): trailing steps that launched no GPU work are dropped
    when earlier steps did, then the last step is dropped when it launched fewer than
    80% of the GPU events of the step before it. A single step is always kept.
    """

    def build() -> np.ndarray:
        w = step_windows(ctx)
        keep = np.ones(len(w), dtype=bool)
        n = gpu_events_per_step(ctx)
        if len(w) < 2 or n.sum() == 0:
            return keep
        last = len(w) - 1
        while last > 0 and n[last] == 0:
            keep[last] = False
            last -= 1
        if last > 0 and 0.8 * n[last - 1] > n[last]:
            keep[last] = False
        return keep

    return ctx.cached("complete_mask", build)


def in_complete_steps(ctx: SignalContext, ts_us: np.ndarray) -> np.ndarray:
    """Boolean mask: each timestamp falls inside a complete step window ``[start, end)``."""
    w = step_windows(ctx)
    m = complete_mask(ctx)
    ws, we = w["start_us"].to_numpy()[m], w["end_us"].to_numpy()[m]
    ts = np.asarray(ts_us, dtype=np.float64)
    idx = np.searchsorted(ws, ts, side="right") - 1
    return (idx >= 0) & (ts < we[np.maximum(idx, 0)])


def averaged(ctx: SignalContext, per_step_us: np.ndarray) -> float:
    """Sum over complete steps of ``per_step_us`` divided by their total window time (a share)."""
    w = step_windows(ctx)
    m = complete_mask(ctx)
    total = w["dur_us"].to_numpy()[m].sum()
    if total <= 0:
        raise SignalUnavailable("the step windows have zero length")
    return float(np.asarray(per_step_us)[m].sum() / total)


@signal("count")
def step_count(ctx: SignalContext) -> int:
    """Number of complete ``ProfilerStep#N`` steps averaged over (0 when the trace has none)."""
    return int(complete_mask(ctx).sum()) if has_steps(ctx) else 0


@signal("ms")
def step_time_ms(ctx: SignalContext) -> float:
    """Mean step-window length over complete steps, ms. Whole trace span when there are no steps."""
    w = step_windows(ctx)
    return float(w["dur_us"].to_numpy()[complete_mask(ctx)].mean() / 1000.0)


def _share(category: str):
    def f(ctx: SignalContext) -> float:
        return averaged(ctx, breakdown_us(ctx)[category].to_numpy())

    return f


@signal("share")
def kernel_share(ctx: SignalContext) -> float:
    """Share of step time whose top-priority activity is a GPU kernel (breakdown, 0..1)."""
    return _share("kernel")(ctx)


@signal("share")
def memcpy_share(ctx: SignalContext) -> float:
    """Share of step time in GPU memcpy with no kernel running (breakdown, 0..1)."""
    return _share("memcpy")(ctx)


@signal("share")
def memset_share(ctx: SignalContext) -> float:
    """Share of step time in GPU memset with no kernel or memcpy running (breakdown, 0..1)."""
    return _share("memset")(ctx)


@signal("share")
def runtime_share(ctx: SignalContext) -> float:
    """Share of step time in CUDA/HIP runtime calls with the GPU idle (breakdown, 0..1)."""
    return _share("runtime")(ctx)


@signal("share")
def dataloader_share(ctx: SignalContext) -> float:
    """Share of step time spent in DataLoader ``__next__`` with the GPU idle and no runtime call
    (breakdown, 0..1; the TensorBoard plugin's "DataLoader" figure).

    Unavailable when the trace has no ``enumerate(DataLoader)#`` spans or no steps.
    """
    if not len(dataloader_spans(ctx)):
        raise SignalUnavailable("the trace has no DataLoader spans (enumerate(DataLoader)#...__next__)")
    if not has_steps(ctx):
        raise SignalUnavailable("the trace has no ProfilerStep annotations")
    return _share("dataloader")(ctx)


@signal("ms")
def dataloader_ms(ctx: SignalContext) -> float:
    """DataLoader time per step with the GPU idle, ms: ``dataloader_share * step_time_ms``."""
    return ctx.get("dataloader_share") * ctx.get("step_time_ms")


@signal("share")
def cpu_exec_share(ctx: SignalContext) -> float:
    """Share of step time in CPU ops with no GPU activity, runtime call or DataLoader (breakdown)."""
    return _share("cpu_exec")(ctx)


@signal("share")
def other_share(ctx: SignalContext) -> float:
    """Share of step time with none of the breakdown's activities (breakdown, 0..1)."""
    return _share("other")(ctx)


@signal("table")
def step_breakdown(ctx: SignalContext) -> list[dict]:
    """Per step: step number, window ms, and ms in each breakdown category."""
    b = breakdown_us(ctx)
    w = step_windows(ctx)
    rows = []
    for i in range(len(b)):
        row = {"step": int(b["step"].iat[i]), "step_time_ms": round(float(w["dur_us"].iat[i]) / 1000, 4)}
        for c in BREAKDOWN_CATEGORIES:
            row[f"{c}_ms"] = round(float(b[c].iat[i]) / 1000, 4)
        rows.append(row)
    return rows
