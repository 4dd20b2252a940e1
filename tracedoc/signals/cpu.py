"""CPU-side signals: host facts from the trace metadata, and op-dispatch overhead.

**Host facts.** tracedoc's fix-loop harness (:func:`tracedoc.fixloop.harness.measure`)
records the host under the trace's top-level key ``tracedoc_host``: ``cpu_cores``
(the process's CPU affinity), ``intra_op_threads`` (``torch.get_num_threads()``),
``dataloader_workers``, ``cpu_model``, ``cpu_flags`` (``/proc/cpuinfo``),
``bf16_matrix_units`` and ``amp`` (the workload's autocast setting). A trace without
that key (any trace not recorded by the harness) makes these signals unavailable, and
the rules that need them are skipped with the reason.

**Dispatch overhead.** On the CPU, an eager PyTorch step runs op after op on the
training thread. Each op pays a fixed cost (Python, argument parsing, the dispatcher's
layers, allocation of the output) before and around its arithmetic; for tiny tensors
that fixed cost is most of the op ("overhead-bound" in H. He, *Making Deep Learning Go
Brrrr From First Principles*, 2022, where time ~ number of ops x per-op overhead). This
module measures it from the ``cpu_op`` events of the thread that runs the steps:

- an op's *self time* is its duration minus that of the ops it directly encloses on
  that thread (the profiler's "self CPU time");
- the *per-op fixed cost* ``c`` is the median self time of those ops: in an eager step
  most ops are small (views, ``aten::empty``, ``aten::t``, gradient accumulation,
  wrappers such as ``aten::linear`` around ``aten::addmm``), and their self time is
  the dispatcher's and allocator's fixed cost;
- ``cpu_dispatch_ms`` per step = ``sum over ops of min(self time, c)`` (each op's fixed
  cost; all of a small op) + the training thread's time inside the step that no op
  covers (Python and framework code between ops), outside DataLoader spans, averaged
  over the complete steps. The rest of the step is op arithmetic or DataLoader time.

The median self time is robust to the long outliers that preemption on a loaded
machine puts into a few ops; the uncovered time is not, so on a busy machine the share
mixes overhead with waiting to be scheduled. ``cpu-dispatch-overhead`` (TD502) therefore
fires on the structure (many ops per step, a small typical op) and uses this slice as
its estimated saving. These signals need a CPU-only
trace with ``ProfilerStep`` annotations; on a GPU trace the launch-bound rule
(TD201) measures the same problem from the GPU's side.
"""

from __future__ import annotations

import numpy as np
import pandas as pd

from tracedoc.signals.base import SignalContext, SignalUnavailable, signal
from tracedoc.signals.steps import complete_mask, dataloader_spans, step_windows

#: Top-level trace key written by the fix-loop harness.
HOST_KEY = "tracedoc_host"

#: Percentile of op self times taken as the per-op fixed cost (see the module docstring).
OVERHEAD_PERCENTILE = 50.0

#: ATen ops that do matrix multiplication or convolution (forward and backward) on the CPU.
MATMUL_CONV_OPS = frozenset(
    {
        "aten::mm",
        "aten::addmm",
        "aten::bmm",
        "aten::baddbmm",
        "aten::matmul",
        "aten::linear",
        "aten::_convolution",
        "aten::convolution",
        "aten::conv1d",
        "aten::conv2d",
        "aten::conv3d",
        "aten::mkldnn_convolution",
        "aten::convolution_backward",
        "aten::_scaled_dot_product_flash_attention_for_cpu",
    }
)


def host(ctx: SignalContext) -> dict:
    """The trace's ``tracedoc_host`` metadata.

    Raises:
        SignalUnavailable: the trace has none (not recorded by tracedoc's harness).
    """
    meta = ctx.trace.metadata.get(HOST_KEY)
    if not isinstance(meta, dict):
        raise SignalUnavailable(
            "the trace has no tracedoc_host metadata (core count, threads, CPU flags; "
            "recorded by tracedoc's fix-loop harness)"
        )
    return meta


def _host_int(ctx: SignalContext, key: str, minimum: int) -> int:
    value = host(ctx).get(key)
    if isinstance(value, bool) or not isinstance(value, int) or value < minimum:
        raise SignalUnavailable(f"tracedoc_host.{key} is missing or not an integer >= {minimum}")
    return value


@signal("count")
def cpu_cores(ctx: SignalContext) -> int:
    """CPUs the training process could run on (``tracedoc_host.cpu_cores``: its affinity mask)."""
    return _host_int(ctx, "cpu_cores", 1)


@signal("count")
def intra_op_threads(ctx: SignalContext) -> int:
    """PyTorch intra-op threads of the training process (``tracedoc_host.intra_op_threads``,
    ``torch.get_num_threads()``; the pool includes the calling thread)."""
    return _host_int(ctx, "intra_op_threads", 1)


@signal("count")
def dataloader_workers(ctx: SignalContext) -> int:
    """DataLoader worker processes (``tracedoc_host.dataloader_workers``; 0: loading in the main process)."""
    return _host_int(ctx, "dataloader_workers", 0)


@signal("ratio")
def cpu_oversubscription_ratio(ctx: SignalContext) -> float:
    """Busy threads per core: ``(intra_op_threads + dataloader_workers) / cpu_cores``.

    Each DataLoader worker decodes and augments on one thread (PyTorch sets a worker's
    intra-op threads to 1), and the training process keeps ``intra_op_threads`` busy in
    every op; above 1.0 they time-share the cores.
    """
    return (intra_op_threads(ctx) + dataloader_workers(ctx)) / cpu_cores(ctx)


@signal("ms", scope="steps")
def dataloader_saving_ms(ctx: SignalContext) -> float:
    """What moving the DataLoader's work into worker processes can save per step, ms.

    * A trace with GPU activity: ``dataloader_ms``, the upper bound (the engine grants it
      from the idle ledger's DataLoader slice, then replaces it with the step model's replay,
      :func:`tracedoc.signals.stepmodel.dataloader_replay_saving_ms`, where the model runs).
    * A CPU-only trace without ``tracedoc_host`` core and thread counts, or one whose loader
      already has workers (its DataLoader time is waiting, not work): ``dataloader_ms``.
      The stall leaves the step and the rest stays (an upper bound).
    * A CPU-only trace with ``dataloader_workers == 0``: the decoding moves to a worker but
      still needs a core. With ``S = step_time_ms``, ``D = dataloader_ms`` (one core's work
      in the main process), the rest ``C = S - D`` run on ``T = intra_op_threads`` threads
      and ``c = cpu_cores``, the step after the fix is estimated as
      ``S' = max(C, (D + C * min(T, c)) / c)``: no shorter than the training thread's own
      work, nor than the step's core time spread over every core (Graham's lower bound
      on a schedule, max(total work / processors, longest chain); R. L. Graham, "Bounds on
      multiprocessing timing anomalies", SIAM J. Appl. Math. 17(2), 1969), taking the
      intra-op threads as busy through ``C``. The saving is ``S - S'`` (>= 0). Measured on
      ``workloads/input_bound.py`` (2 cores, 2026-11-22): estimated 26.9 and 28.0 ms, A/B
      rounds measured 29.9 and 26.9 ms; the stall alone (``dataloader_ms``) was 53.7 and
      56.0 ms. Time the loader spends waiting rather than computing (a storage read) needs
      no core, so there the estimate is low.

    Raises:
        SignalUnavailable: ``dataloader_ms`` is unavailable.
    """
    d = float(ctx.get("dataloader_ms"))
    if ctx.trace.has_gpu_activity:
        return d
    try:
        cores, threads, workers = cpu_cores(ctx), intra_op_threads(ctx), dataloader_workers(ctx)
    except SignalUnavailable:
        return d
    if workers > 0:
        return d
    step = float(ctx.get("step_time_ms"))
    rest = max(step - d, 0.0)
    after = max(rest, (d + rest * min(threads, cores)) / cores)
    return max(step - after, 0.0)


@signal("bool")
def cpu_bf16_matrix_units(ctx: SignalContext) -> bool:
    """The CPU has bf16 matrix or dot-product units: ``amx_bf16`` or ``avx512_bf16`` in
    ``tracedoc_host.cpu_flags`` (Intel Sapphire Rapids / Cooper Lake and later)."""
    flags = host(ctx).get("cpu_flags")
    if not isinstance(flags, list):
        raise SignalUnavailable("tracedoc_host.cpu_flags is missing (CPU flags unknown)")
    return "amx_bf16" in flags or "avx512_bf16" in flags


def training_ops(ctx: SignalContext) -> pd.DataFrame:
    """``cpu_op`` events of the thread that runs the ProfilerStep annotations, inside complete
    steps and outside DataLoader spans, with columns ``step_idx``, ``leaf`` and ``self_us`` added."""

    def build() -> pd.DataFrame:
        t = ctx.trace
        if t.has_gpu_activity:
            raise SignalUnavailable(
                "the trace has GPU activity; dispatch overhead is read from CPU-only traces "
                "(launch-bound-gpu-idle covers GPUs)"
            )
        if not len(t.steps):
            raise SignalUnavailable("the trace has no ProfilerStep annotations")
        ops = t.ops
        steps_src = ops[ops["name"].str.startswith("ProfilerStep#")]
        if not len(steps_src):
            raise SignalUnavailable("the ProfilerStep annotations have no thread")
        tid = steps_src["tid"].mode().iloc[0]
        sel = ops[(ops["tid"] == tid) & (ops["cat"] == "cpu_op")]
        sel = sel.sort_values(["ts_us", "dur_us"], ascending=[True, False], kind="stable").reset_index(drop=True)
        ts = sel["ts_us"].to_numpy()
        end = sel["end_us"].to_numpy()
        # on one thread ops nest: an op has a child iff the next op (by start) starts before it ends
        nxt = np.append(ts[1:], np.inf)
        leaf = ~(nxt < end)
        self_us = sel["dur_us"].to_numpy().copy()
        stack: list[int] = []
        for i in range(len(sel)):  # direct parent of each op: the innermost open op that encloses it
            while stack and ts[i] >= end[stack[-1]]:
                stack.pop()
            if stack:
                self_us[stack[-1]] -= min(end[i], end[stack[-1]]) - ts[i]
            stack.append(i)
        self_us = np.clip(self_us, 0, None)
        w = step_windows(ctx)
        m = complete_mask(ctx)
        ws, we = w["start_us"].to_numpy()[m], w["end_us"].to_numpy()[m]
        idx = np.searchsorted(ws, ts, side="right") - 1
        inside = (idx >= 0) & (ts < we[np.maximum(idx, 0)])
        dl = dataloader_spans(ctx)
        in_dl = np.zeros(len(sel), dtype=bool)
        if len(dl):
            d = dl[dl["tid"] == tid].sort_values("ts_us")
            ds, de = d["ts_us"].to_numpy(), d["end_us"].to_numpy()
            j = np.searchsorted(ds, ts, side="right") - 1
            in_dl = (j >= 0) & (ts < de[np.maximum(j, 0)])
        top = np.ones(len(sel), dtype=bool)  # not enclosed by another op (for the uncovered time)
        top[1:] = ts[1:] >= np.maximum.accumulate(end)[:-1]
        out = sel.assign(leaf=leaf, step_idx=idx, self_us=self_us, top=top)[inside & ~in_dl]
        if not len(out):
            raise SignalUnavailable("no CPU ops on the training thread inside the steps")
        return out

    return ctx.cached("cpu_training_ops", build)


def _dataloader_us_in_steps(ctx: SignalContext) -> float:
    w = step_windows(ctx)
    m = complete_mask(ctx)
    ws, we = w["start_us"].to_numpy()[m], w["end_us"].to_numpy()[m]
    total = 0.0
    dl = dataloader_spans(ctx)
    for s, e in zip(dl["ts_us"].to_numpy(), dl["end_us"].to_numpy(), strict=True):
        total += float(np.clip(np.minimum(we, e) - np.maximum(ws, s), 0, None).sum())
    return total


def _n_steps(ctx: SignalContext) -> int:
    return int(complete_mask(ctx).sum())


@signal("us")
def cpu_op_overhead_us(ctx: SignalContext) -> float:
    """Per-op fixed cost: the median self time of the CPU ops on the training thread (µs)."""
    ops = training_ops(ctx)
    return float(np.percentile(ops["self_us"].to_numpy(), OVERHEAD_PERCENTILE))


@signal("count")
def cpu_ops_per_step(ctx: SignalContext) -> float:
    """CPU ops (all nesting levels) per step on the training thread, outside DataLoader spans."""
    return float(len(training_ops(ctx)) / _n_steps(ctx))


@signal("ms")
def cpu_dispatch_ms(ctx: SignalContext) -> float:
    """Training-thread time per step spent dispatching ops rather than computing (module docstring):
    ``sum over ops of min(self time, cpu_op_overhead_us)`` + step time covered by no op and no
    DataLoader span, in ms."""
    ops = training_ops(ctx)
    c = cpu_op_overhead_us(ctx)
    fixed_us = float(np.minimum(ops["self_us"].to_numpy(), c).sum())
    w = step_windows(ctx)
    m = complete_mask(ctx)
    step_us = float(w["dur_us"].to_numpy()[m].sum())
    covered_us = float(ops.loc[ops["top"], "dur_us"].sum())
    uncovered_us = max(0.0, step_us - _dataloader_us_in_steps(ctx) - covered_us)
    return (fixed_us + uncovered_us) / _n_steps(ctx) / 1000.0


def _share_of_step(ctx: SignalContext, ms: float) -> float:
    """``ms`` per step as a share of the mean complete step (``step_time_ms``), capped at 1.

    Raises:
        SignalUnavailable: the step windows have zero length.
    """
    step_ms = ctx.get("step_time_ms")
    if step_ms <= 0:
        raise SignalUnavailable("the step windows have zero length")
    return min(1.0, ms / step_ms)


@signal("share")
def cpu_dispatch_share(ctx: SignalContext) -> float:
    """``cpu_dispatch_ms`` as a share of the step time (0..1)."""
    return _share_of_step(ctx, cpu_dispatch_ms(ctx))


@signal("ms")
def cpu_fp32_matmul_ms(ctx: SignalContext) -> float:
    """Per step, training-thread time in fp32 matmul/conv ops (:data:`MATMUL_CONV_OPS`, outermost
    occurrence only), in ms. fp32 is read from ``tracedoc_host.amp == "off"`` (no autocast);
    0 when the workload ran under autocast."""
    amp = host(ctx).get("amp")
    if not isinstance(amp, str):
        raise SignalUnavailable("tracedoc_host.amp is missing (the precision of the matmuls is unknown)")
    if amp != "off":
        return 0.0
    return float(outermost_matmul_ops(ctx)["dur_us"].sum()) / _n_steps(ctx) / 1000.0


def outermost_matmul_ops(ctx: SignalContext) -> pd.DataFrame:
    """The :func:`training_ops` in :data:`MATMUL_CONV_OPS` that no earlier matmul/conv op
    encloses (an ``aten::linear`` counts once, not again for its ``aten::addmm``), by start.

    Raises:
        SignalUnavailable: :func:`training_ops` is unavailable.
    """
    ops = training_ops(ctx)
    mm = ops[ops["name"].isin(MATMUL_CONV_OPS)].sort_values("ts_us")
    ts, end = mm["ts_us"].to_numpy(), mm["end_us"].to_numpy()
    outermost = np.ones(len(mm), dtype=bool)
    outermost[1:] = ts[1:] >= np.maximum.accumulate(end)[:-1]  # not inside an earlier one
    return mm[outermost]


@signal("share")
def cpu_fp32_matmul_share(ctx: SignalContext) -> float:
    """``cpu_fp32_matmul_ms`` as a share of the step time (0..1)."""
    return _share_of_step(ctx, cpu_fp32_matmul_ms(ctx))
