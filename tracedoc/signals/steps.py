"""Step windows and the step-time breakdown.

Step window (as the PyTorch TensorBoard profiler plugin defined it, so its published
figures can be checked against ours): for ``ProfilerStep#N`` with CPU span
``[s_i, e_i]``, let ``g_i`` be the latest end of any kernel/memcpy/memset launched by a
runtime call that starts inside ``[s_i, e_i]`` (linked by ``correlation``). Then

    window_i = [max(s_i, end_{i-1}), max(e_i, g_i)]

so GPU work that trails the CPU is charged to the step that launched it. A trace
without step annotations gets its iterations from repeated ``Optimizer.step#``
annotations (:func:`inferred_iterations`), else one window over the whole trace
(``has_steps`` False).

Breakdown: every µs of a window is assigned to the first busy category in the order
kernel > communication > memcpy > memset > runtime > dataloader > cpu_exec > other (the
plugin's "Step Time Breakdown" priority, with communication kept apart from compute
kernels as Holistic Trace Analysis does: a communication kernel that overlaps a compute
kernel counts as kernel time, the exposed rest as communication; CPU-side collectives
such as gloo's count as communication below runtime calls). ``cpu_exec`` counts ``cpu_op`` and ``user_annotation``
events other than ``ProfilerStep#`` (``python_function`` stack events are excluded:
they cover the whole step).
"""

from __future__ import annotations

import numpy as np
import pandas as pd

from tracedoc.signals.base import SignalContext, SignalUnavailable, signal
from tracedoc.signals.intervals import paint_per_window
from tracedoc.signals.strings import cached_name_mask, frame_names, frame_threads, owned_frame, texts, thread_labels

BREAKDOWN_CATEGORIES = ("kernel", "communication", "memcpy", "memset", "runtime", "dataloader", "cpu_exec", "other")
DATALOADER_PREFIX = "enumerate(DataLoader)#"
#: The annotation of ``optimizer.step()`` (``Optimizer.step#<Class>.step``).
STEP_PREFIX = "Optimizer.step#"


#: The values of :func:`gpu_events`' ``kind`` column, in the order of its rows and its codes.
GPU_KINDS = ("kernel", "memcpy", "memset")


def gpu_events(ctx: SignalContext) -> pd.DataFrame:
    """Kernels, memcpys and memsets in one frame (in that order), each with its launching
    runtime call.

    Columns: kind (a ``Categorical`` of :data:`GPU_KINDS`), name, device, stream, ts_us,
    end_us, correlation, comm (bool: a communication kernel, :mod:`tracedoc.signals.comm`),
    rt_pos (int32: row position in ``trace.runtime`` of the launching call, -1 when unlinked).
    The launching call's start, end and thread are read through :func:`launch_of`. Links come
    from :func:`tracedoc.signals.links.link_launches`, the one (pid, correlation) join.

    A trace whose GPU events are all of one kind (kernels only, as in a trace recorded without
    copies) shares that frame's columns instead of copying them. Held for the whole
    analysis, the frame was 89 bytes per GPU event on 1 M small events; the copies, the
    launch columns (now derived from ``rt_pos`` where they are read) and the object ``kind``
    made 83 of them (issue 24).
    """

    def build() -> pd.DataFrame:
        from tracedoc.signals.catalog import comm_kernel_mask
        from tracedoc.signals.links import link_launches

        t = ctx.trace
        present = [(kind, df) for kind, df in zip(GPU_KINDS, (t.kernels, t.memcpys, t.memsets), strict=True) if len(df)]
        kinds = pd.Index(GPU_KINDS, dtype=object)
        if not present:
            g = pd.DataFrame(
                {
                    c: pd.Series(dtype=object if c == "name" else float)
                    for c in ("name", "device", "stream", "ts_us", "end_us", "correlation")
                }
            )
            g.insert(0, "kind", pd.Categorical.from_codes(np.zeros(0, dtype=np.int8), categories=kinds))
        else:
            # each column concatenated once and taken as it is (owned_frame): a frame per kind,
            # then their concatenation, copied every column twice before keeping one; one kind's
            # columns are the trace frame's own Series (pandas tracks the sharing) (issue 24)
            def joined(c: str):
                if len(present) == 1:
                    return present[0][1][c]
                return np.concatenate([df[c].to_numpy() for _, df in present])

            code = np.concatenate([np.full(len(df), GPU_KINDS.index(kind), dtype=np.int8) for kind, df in present])
            g = owned_frame(
                {
                    "kind": pd.Categorical.from_codes(code, categories=kinds),
                    # an object column, as in the trace's frames (texts())
                    "name": joined("name") if len(present) == 1 else texts(joined("name")),
                    "device": joined("device"),
                    "stream": joined("stream"),
                    "ts_us": joined("ts_us"),
                    "end_us": joined("end_us"),
                    "correlation": joined("correlation"),
                }
            )
        rt = t.runtime
        pos = link_launches(
            g["correlation"].to_numpy(dtype=float),
            g["ts_us"].to_numpy(dtype=float),
            g["device"].to_numpy(),
            rt["correlation"].to_numpy(dtype=float),
            rt["ts_us"].to_numpy(dtype=float),
            rt["pid"].to_numpy(dtype=object),
        )
        # the communication test runs once per distinct kernel name (the kernels come first in g)
        kcodes, knames = frame_names(ctx, "kernels")
        comm = np.zeros(len(g), dtype=bool)
        if len(kcodes):
            comm[: len(kcodes)] = comm_kernel_mask(texts(knames))[kcodes]
        g["comm"] = comm
        # positions in trace.runtime: int32 unless that frame has 2**31 rows (issue 24)
        g["rt_pos"] = np.asarray(pos, dtype=np.int32 if len(rt) < 2**31 else np.int64)
        return g

    return ctx.cached("gpu_events", build)


def launch_of(ctx: SignalContext, g: pd.DataFrame, what: str) -> np.ndarray:
    """Per row of ``g`` (:func:`gpu_events` or rows of it), shape ``(len(g),)``: the launching
    runtime call's start (``what="ts_us"``) or end (``"end_us"``) in µs, NaN where the event is
    unlinked; or its thread (``"thread"``), the ``"pid/tid"`` label of
    :func:`tracedoc.signals.strings.frame_threads`, None where unlinked.

    Derived from ``rt_pos`` where it is read rather than held as three columns of every GPU
    event for the whole analysis (24 bytes per GPU event, issue 24).

    Raises:
        ValueError: ``what`` is none of the three.
    """
    if what not in ("ts_us", "end_us", "thread"):
        raise ValueError(f"launch_of: unknown field {what!r}")
    pos = g["rt_pos"].to_numpy()
    linked = pos >= 0
    rt = ctx.trace.runtime
    if not len(rt) or not linked.any():
        return np.full(len(g), None, dtype=object) if what == "thread" else np.full(len(g), np.nan)
    safe = np.where(linked, pos, 0)
    if what == "thread":
        codes, labels = frame_threads(ctx, "runtime")
        return np.where(linked, labels[codes[safe]], None)
    return np.where(linked, rt[what].to_numpy(dtype=float)[safe], np.nan)


def step_spans(ctx: SignalContext) -> pd.DataFrame:
    """The ``ProfilerStep#N`` CPU spans of one step thread: step, ts_us, end_us (sorted).

    A trace merged from several processes or threads can carry each step more than once;
    counting every copy would double the step count and halve every per-step figure. The
    step thread is the (pid, tid) with the most ``ProfilerStep#`` annotations (ties: the
    one whose first step starts earliest), and a step number that repeats on it keeps its
    first span.
    """

    def build() -> pd.DataFrame:
        steps = ctx.trace.steps
        ops = ctx.trace.ops
        if not len(steps):
            return inferred_iterations(ctx)
        marks = ops[profiler_step_mask(ctx)]
        if len(marks):
            key = thread_labels(marks)
            counts = pd.Series(key).value_counts()
            top = counts[counts == counts.max()].index
            first = pd.Series(marks["ts_us"].to_numpy(), index=key).groupby(level=0).min()
            chosen = first[first.index.isin(top)].idxmin()
            on_thread = set(np.round(marks["ts_us"].to_numpy()[key == chosen], 6))
            steps = steps[np.isin(np.round(steps["ts_us"].to_numpy(), 6), list(on_thread))]
        steps = steps.sort_values("ts_us", kind="stable").drop_duplicates("step", keep="first")
        return pd.DataFrame(
            {"step": steps["step"].to_numpy(), "ts_us": steps["ts_us"].to_numpy(), "end_us": steps["end_us"].to_numpy()}
        )

    return ctx.cached("step_spans", build)


def step_windows(ctx: SignalContext) -> pd.DataFrame:
    """One row per step window: step, cpu_start_us, cpu_end_us, start_us, end_us, dur_us.

    See the module docstring for the definition. GPU work that was launched before the
    first step (by earlier, unprofiled iterations) and still runs when it begins is not the
    first step's: the first window starts after the last such event that ends before the
    first step's own GPU work starts (the TensorBoard plugin's rule).
    """

    def build() -> pd.DataFrame:
        t = ctx.trace
        steps = step_spans(ctx)
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
        first_dev = np.inf
        gpu = gpu_events(ctx)
        prev_end = -np.inf
        if len(gpu):
            lts = launch_of(ctx, gpu, "ts_us")
            idx = np.searchsorted(s, lts, side="right") - 1
            ok = (idx >= 0) & (lts <= e[np.maximum(idx, 0)])
            if ok.any():
                np.maximum.at(g, idx[ok], gpu["end_us"].to_numpy()[ok])
                in_first = ok & (idx == 0)
                if in_first.any():
                    first_dev = gpu["ts_us"].to_numpy()[in_first].min()
                    spill = ~ok & (gpu["end_us"].to_numpy() < first_dev)
                    if spill.any():
                        prev_end = gpu["end_us"].to_numpy()[spill].max()
        start = np.empty(len(steps))
        end = np.empty(len(steps))
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


#: Fewest ``Optimizer.step#`` annotations on one thread from which iterations are inferred
#: (three give two whole iterations between their ends).
MIN_INFERRED_MARKS = 3


def inferred_iterations(ctx: SignalContext) -> pd.DataFrame:
    """Iterations of a trace without ``ProfilerStep#N``: step, ts_us, end_us (may be empty).

    When one thread carries at least :data:`MIN_INFERRED_MARKS` ``Optimizer.step#...``
    annotations, each iteration runs from the end of one optimizer step to the end of the
    next (a training iteration ends with its optimizer step), numbered 1, 2, ...; the time
    before the first end and after the last is in no iteration. The thread is the one with
    the most such annotations (ties: the earliest first one). Otherwise empty: the trace is
    one window. :func:`iterations_source` says which was done, for the report's note.
    """
    empty = pd.DataFrame({"step": [], "ts_us": [], "end_us": []})
    ops = ctx.trace.ops
    mask = optimizer_step_mask(ctx) if len(ops) else np.zeros(0, dtype=bool)
    if int(mask.sum()) < MIN_INFERRED_MARKS:
        return empty
    codes, labels = frame_threads(ctx, "ops")
    marks = pd.DataFrame(
        {"thread": codes[mask], "ts": ops["ts_us"].to_numpy()[mask], "end": ops["end_us"].to_numpy()[mask]}
    )
    per = marks.groupby("thread").agg(n=("ts", "size"), first=("ts", "min"))
    per = per[per["n"] == per["n"].max()].sort_values("first")
    if int(per["n"].iloc[0]) < MIN_INFERRED_MARKS:
        return empty
    ends = np.sort(marks.loc[marks["thread"] == per.index[0], "end"].to_numpy(dtype=float))
    return pd.DataFrame({"step": np.arange(1, ends.size), "ts_us": ends[:-1], "end_us": ends[1:]})


def iterations_source(ctx: SignalContext) -> str:
    """``"ProfilerStep"``, ``"Optimizer.step"`` (iterations inferred, :func:`inferred_iterations`)
    or ``"none"`` (one window over the whole trace)."""
    if len(ctx.trace.steps):
        return "ProfilerStep"
    return "Optimizer.step" if len(step_spans(ctx)) else "none"


def has_steps(ctx: SignalContext) -> bool:
    """Whether the trace has iterations: ``ProfilerStep#N`` annotations, or iterations
    inferred from repeated ``Optimizer.step#`` annotations (:func:`inferred_iterations`)."""
    return len(step_spans(ctx)) > 0


def dataloader_mask(ctx: SignalContext) -> np.ndarray:
    """Mask over ``trace.ops``: ``enumerate(DataLoader)#...__next__`` spans (the one definition)."""
    return cached_name_mask(ctx, "ops", "dataloader", lambda n: n.startswith(DATALOADER_PREFIX))


def comm_op_rows(ctx: SignalContext) -> np.ndarray:
    """Mask over ``trace.ops``: CPU spans of collective communication (``communication_ops`` patterns)."""
    from tracedoc.signals.catalog import compiled

    pattern = compiled("communication_ops")
    return cached_name_mask(ctx, "ops", "comm", lambda n: bool(pattern.search(n)))


def optimizer_step_mask(ctx: SignalContext) -> np.ndarray:
    """Mask over ``trace.ops``: ``Optimizer.step#`` spans (computed once per trace)."""
    return cached_name_mask(ctx, "ops", "opt_step", lambda n: n.startswith(STEP_PREFIX))


def profiler_step_mask(ctx: SignalContext) -> np.ndarray:
    """Mask over ``trace.ops``: ``ProfilerStep#N`` annotations (they cover the whole step)."""
    return cached_name_mask(ctx, "ops", "profiler_step", lambda n: n.startswith("ProfilerStep#"))


def dataloader_spans(ctx: SignalContext) -> pd.DataFrame:
    """CPU spans of ``enumerate(DataLoader)#...__next__``."""
    return ctx.trace.ops[dataloader_mask(ctx)]


def rows_of(values: np.ndarray, mask: np.ndarray) -> np.ndarray:
    """``values[mask]`` for a boolean ``mask`` of the same length, but a view of ``values`` (no
    copy) when the mask keeps every row or one contiguous run of them: the kernels of the step
    windows usually are one (:func:`keep_rows`). Callers must not write into the result."""
    run = _one_run(mask)
    return values[run[0] : run[1]] if run is not None else values[mask]


def at_rows(values: np.ndarray, index: pd.Index) -> np.ndarray:
    """``values[index]`` for an index of row positions into ``values``, but a view (no copy)
    when ``index`` is a ``RangeIndex`` of step 1, as :func:`keep_rows` leaves one contiguous
    run of a frame's rows. Callers must not write into the result."""
    if isinstance(index, pd.RangeIndex) and index.step == 1:
        return values[index.start : index.stop]
    return values[index.to_numpy()]


def _one_run(mask: np.ndarray) -> tuple[int, int] | None:
    """``(a, b)`` when the True entries of ``mask`` are exactly ``a..b-1`` (all of them, or one
    contiguous run; ``(0, 0)`` for none), else None."""
    kept = np.flatnonzero(mask)
    if not kept.size:
        return 0, 0
    if kept[-1] - kept[0] + 1 == kept.size:
        return int(kept[0]), int(kept[-1]) + 1
    return None


def keep_rows(df: pd.DataFrame, mask: np.ndarray) -> pd.DataFrame:
    """``df[mask]`` (the same rows, index labels and columns), but no copy where none is needed:
    ``df`` itself when the boolean ``mask`` (shape ``(len(df),)``) keeps every row, and a row
    slice (``df.iloc[a:b]``, a view of ``df``'s columns) when it keeps one contiguous run. The
    step windows' kernels of a trace in time order are such a run: on 1 M small events the
    copy was 19 MiB of the analysis's held memory (issue 24). Callers must not modify the frame
    they get."""
    if mask.all():
        return df
    run = _one_run(mask)
    if run is not None and run[1] > run[0]:
        return df.iloc[run[0] : run[1]]
    return df[mask]


def primary_gpu_events(ctx: SignalContext) -> pd.DataFrame:
    """:func:`gpu_events` of the primary device (the one with the most kernel time).

    Every GPU-side signal covers this one device unless its doc says otherwise (the
    ledger covers each device); a trace whose events name no described device keeps all.
    """

    def build() -> pd.DataFrame:
        g = gpu_events(ctx)
        dev = ctx.device
        if dev is not None and (on := (g["device"] == dev.id).to_numpy()).any():
            g = keep_rows(g, on)  # one device (the usual case): the frame itself
        return g

    return ctx.cached("primary_gpu_events", build)


def cpu_exec_mask(ctx: SignalContext) -> np.ndarray:
    """Mask over ``trace.ops``: the rows of :func:`cpu_exec_ops` (cached)."""
    ops = ctx.trace.ops
    return ctx.cached(
        "cpu_exec_mask",
        lambda: ops["cat"].isin(("cpu_op", "user_annotation")).to_numpy() & ~profiler_step_mask(ctx),
    )


def cpu_exec_ops(ctx: SignalContext) -> pd.DataFrame:
    """CPU ops and annotations that count as CPU execution: ``cpu_op`` and ``user_annotation``
    events other than ``ProfilerStep#`` (``python_function`` stack events cover the whole step)."""
    return ctx.cached("cpu_exec_ops", lambda: ctx.trace.ops[cpu_exec_mask(ctx)])


def comm_ops(ctx: SignalContext) -> pd.DataFrame:
    """CPU spans of collective communication (``gloo:*``, ``c10d::*``, ``record_param_comms``, ...)."""
    return ctx.trace.ops[comm_op_rows(ctx)]


def breakdown_us(ctx: SignalContext) -> pd.DataFrame:
    """Per step window, µs assigned to each breakdown category (columns BREAKDOWN_CATEGORIES).

    GPU layers are the primary device's (:func:`primary_gpu_events`). ``communication``
    is collective-communication kernels not overlapped by a compute kernel, then CPU
    communication spans (gloo) with the GPU idle and no runtime call.
    """

    def build() -> pd.DataFrame:
        t = ctx.trace
        w = step_windows(ctx)
        ws, we = w["start_us"].to_numpy(), w["end_us"].to_numpy()
        g = primary_gpu_events(ctx)
        comm = g["comm"].to_numpy(dtype=bool)
        kind = g["kind"].cat.codes.to_numpy()  # GPU_KINDS' codes: no string per row
        gs, ge = g["ts_us"].to_numpy(dtype=float), g["end_us"].to_numpy(dtype=float)
        dl, cops = dataloader_spans(ctx), comm_ops(ctx)
        cpu = cpu_exec_mask(ctx)  # the two columns only, not a filtered copy of the ops frame
        o_ts, o_end = t.ops["ts_us"].to_numpy(), t.ops["end_us"].to_numpy()
        cat = {c: i for i, c in enumerate(BREAKDOWN_CATEGORIES)}
        compute = (kind == GPU_KINDS.index("kernel")) & ~comm
        layers = [  # (starts, ends, category) in priority order; views where a mask keeps one run
            (rows_of(gs, compute), rows_of(ge, compute), cat["kernel"]),
            (gs[comm], ge[comm], cat["communication"]),
            (gs[kind == GPU_KINDS.index("memcpy")], ge[kind == GPU_KINDS.index("memcpy")], cat["memcpy"]),
            (gs[kind == GPU_KINDS.index("memset")], ge[kind == GPU_KINDS.index("memset")], cat["memset"]),
            (t.runtime["ts_us"].to_numpy(), t.runtime["end_us"].to_numpy(), cat["runtime"]),
            (cops["ts_us"].to_numpy(), cops["end_us"].to_numpy(), cat["communication"]),
            (dl["ts_us"].to_numpy(), dl["end_us"].to_numpy(), cat["dataloader"]),
            (rows_of(o_ts, cpu), rows_of(o_end, cpu), cat["cpu_exec"]),
        ]
        del compute
        to_cat = np.array([c for _, _, c in layers] + [cat["other"]], dtype=np.int8)
        out = paint_per_window([(a, b) for a, b, _ in layers], to_cat, len(BREAKDOWN_CATEGORIES), ws, we)
        df = pd.DataFrame(out, columns=list(BREAKDOWN_CATEGORIES))
        df.insert(0, "step", w["step"].to_numpy())
        return df

    return ctx.cached("breakdown_us", build)


def gpu_events_per_step(ctx: SignalContext) -> np.ndarray:
    """Number of GPU events launched by runtime calls inside each step's CPU span."""

    def build() -> np.ndarray:
        w = step_windows(ctx)
        n = np.zeros(len(w), dtype=np.int64)
        gpu = gpu_events(ctx)
        if not has_steps(ctx) or not len(gpu):
            return n
        s, e = w["cpu_start_us"].to_numpy(), w["cpu_end_us"].to_numpy()
        ts = launch_of(ctx, gpu, "ts_us")
        idx = np.searchsorted(s, ts, side="right") - 1
        ok = (idx >= 0) & (ts <= e[np.maximum(idx, 0)])
        np.add.at(n, idx[ok], 1)
        return n

    return ctx.cached("gpu_events_per_step", build)


def steps_past_window_end(ctx: SignalContext) -> np.ndarray:
    """Mask over :func:`step_windows`: the window ends after the trace's ``Record Window End``
    instant (``Trace.record_window_end_us``), so the profiler stopped while the step still ran.
    All False when the trace has no such instant."""
    w = step_windows(ctx)
    end = ctx.trace.record_window_end_us
    if end is None or not has_steps(ctx):
        return np.zeros(len(w), dtype=bool)
    return w["end_us"].to_numpy() > end


def complete_mask(ctx: SignalContext) -> np.ndarray:
    """Which step windows count in averages.

    Every step, except at the tail (the TensorBoard plugin's rule for a last step cut
    off by the end of profiling): trailing steps that launched no GPU work are dropped
    when earlier steps did, then the last step is dropped when it launched fewer than
    80% of the GPU events of the step before it. A single step is always kept.
    Besides, a step whose window ends after the trace's ``Record Window End`` instant
    (:func:`steps_past_window_end`) is dropped: part of it was not recorded.
    """

    def build() -> np.ndarray:
        w = step_windows(ctx)
        keep = ~steps_past_window_end(ctx)
        if not keep.any():
            keep[:] = True  # nothing else to average: keep them, the report's note says why
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


@signal("count", scope="trace")
def step_count(ctx: SignalContext) -> int:
    """Number of complete ``ProfilerStep#N`` steps averaged over (0 when the trace has none)."""
    return int(complete_mask(ctx).sum()) if has_steps(ctx) else 0


@signal("ms", scope="trace")
def step_time_ms(ctx: SignalContext) -> float:
    """Mean step-window length over complete steps, ms. Whole trace span when there are no steps."""
    w = step_windows(ctx)
    return float(w["dur_us"].to_numpy()[complete_mask(ctx)].mean() / 1000.0)


def _share(category: str):
    def f(ctx: SignalContext) -> float:
        return averaged(ctx, breakdown_us(ctx)[category].to_numpy())

    return f


@signal("share", scope="steps")
def kernel_share(ctx: SignalContext) -> float:
    """Share of step time whose top-priority activity is a compute kernel on the primary device
    (breakdown, 0..1; communication kernels are ``communication_share``)."""
    return _share("kernel")(ctx)


@signal("share", scope="steps")
def communication_share(ctx: SignalContext) -> float:
    """Share of step time in collective communication with no compute kernel running: exposed
    communication kernels, then CPU collectives (gloo) with the GPU idle (breakdown, 0..1)."""
    return _share("communication")(ctx)


@signal("share", scope="steps")
def memcpy_share(ctx: SignalContext) -> float:
    """Share of step time in GPU memcpy with no kernel running (breakdown, 0..1)."""
    return _share("memcpy")(ctx)


@signal("share", scope="steps")
def memset_share(ctx: SignalContext) -> float:
    """Share of step time in GPU memset with no kernel or memcpy running (breakdown, 0..1)."""
    return _share("memset")(ctx)


@signal("share", scope="steps")
def runtime_share(ctx: SignalContext) -> float:
    """Share of step time in CUDA/HIP runtime calls with the GPU idle (breakdown, 0..1)."""
    return _share("runtime")(ctx)


@signal("share", scope="steps")
def dataloader_share(ctx: SignalContext) -> float:
    """Share of step time spent in DataLoader ``__next__`` with the GPU idle and no runtime call
    (breakdown, 0..1; the TensorBoard plugin's "DataLoader" figure).

    Unavailable when the trace has no ``enumerate(DataLoader)#`` spans. Without steps it is the
    share of the one whole-trace window, like every other breakdown share.
    """
    if not len(dataloader_spans(ctx)):
        raise SignalUnavailable("the trace has no DataLoader spans (enumerate(DataLoader)#...__next__)")
    return _share("dataloader")(ctx)


@signal("ms", scope="steps")
def dataloader_ms(ctx: SignalContext) -> float:
    """DataLoader time per step with the GPU idle, ms: ``dataloader_share * step_time_ms``."""
    return ctx.get("dataloader_share") * ctx.get("step_time_ms")


@signal("ms", scope="steps")
def dataloader_compute_ms(ctx: SignalContext) -> float:
    """The rest of the step, the work one batch feeds, ms: ``step_time_ms - dataloader_ms``.

    Raises:
        SignalUnavailable: no DataLoader time, or no other work in the step.
    """
    dl, step = ctx.get("dataloader_ms"), ctx.get("step_time_ms")
    if not dl > 0 or not step - dl > 0:
        raise SignalUnavailable("no DataLoader time, or nothing else in the step")
    return step - dl


@signal("count", scope="steps")
def dataloader_workers_keep_up(ctx: SignalContext) -> float:
    """DataLoader worker processes that keep pace with the loop once loading is hidden:
    ``ceil(dataloader_ms / dataloader_compute_ms)``. ``N`` workers build ``N`` batches per
    ``dataloader_ms`` and the loop takes one per ``dataloader_compute_ms`` (the throughput
    balance the PyTorch DataLoader docs describe in words)."""
    import math

    return float(math.ceil(ctx.get("dataloader_ms") / ctx.get("dataloader_compute_ms")))


@signal("count", scope="steps")
def dataloader_workers_suggested(ctx: SignalContext) -> float:
    """The ``num_workers`` TD101's fix names: :func:`dataloader_workers_keep_up` plus one to
    absorb jitter between batches."""
    return ctx.get("dataloader_workers_keep_up") + 1.0


@signal("share", scope="steps")
def cpu_exec_share(ctx: SignalContext) -> float:
    """Share of step time in CPU ops with no GPU activity, runtime call or DataLoader (breakdown)."""
    return _share("cpu_exec")(ctx)


@signal("share", scope="steps")
def other_share(ctx: SignalContext) -> float:
    """Share of step time with none of the breakdown's activities (breakdown, 0..1)."""
    return _share("other")(ctx)


@signal("table", scope="steps")
def step_breakdown(ctx: SignalContext) -> list[dict]:
    """Per step: step number, window ms, and ms in each breakdown category."""
    b = breakdown_us(ctx)
    w = step_windows(ctx)
    # columns as arrays once: a DataFrame column lookup per cell cost ~0.2 ms each
    steps, dur = b["step"].to_numpy(), w["dur_us"].to_numpy()
    cols = {c: b[c].to_numpy() for c in BREAKDOWN_CATEGORIES}
    rows = []
    for i in range(len(b)):
        row = {"step": int(steps[i]), "step_time_ms": round(float(dur[i]) / 1000, 4)}
        for c in BREAKDOWN_CATEGORIES:
            row[f"{c}_ms"] = round(float(cols[c][i]) / 1000, 4)
        rows.append(row)
    return rows


def launch_before_start(ctx: SignalContext) -> tuple[int, int, float] | None:
    """GPU events that start before the runtime call that launched them: impossible on one
    clock, so a sign that the trace's CPU and GPU timelines are offset.

    Args:
        ctx: a :class:`tracedoc.signals.base.SignalContext`.

    Returns:
        ``(early, linked, median_early_us)``: how many linked kernels/copies/memsets start more
        than :data:`CLOCK_SKEW_TOLERANCE_US` before their launch call starts, how many GPU
        events are linked at all, and the median of those gaps (µs); None when no GPU event is
        linked to a launch.
    """
    from tracedoc.signals.links import CLOCK_SKEW_TOLERANCE_US

    g = gpu_events(ctx)
    linked = g[g["rt_pos"] >= 0]
    if not len(linked):
        return None
    gap = launch_of(ctx, linked, "ts_us") - linked["ts_us"].to_numpy(dtype=float)
    early = gap[gap > CLOCK_SKEW_TOLERANCE_US]
    return int(early.size), int(len(linked)), float(np.median(early)) if early.size else 0.0
