"""The step model of a CPU-only trace: the training thread's step split into parts, and each
CPU fix replayed on them.

On a CPU-only trace every part of the step runs on the host, so the critical path is the
training thread itself (the thread that runs the ``ProfilerStep`` annotations), with
intra-op parallelism inside its ops. What a fix saves depends on how that thread's time
divides, and on how many cores the host gives the training process and the DataLoader
workers (``tracedoc_host`` metadata, recorded by the fix-loop harness:
:func:`tracedoc.signals.cpu.cpu_cores`, :func:`~tracedoc.signals.cpu.intra_op_threads`,
:func:`~tracedoc.signals.cpu.dataloader_workers`).

**The parts**, per complete step ``k`` (ms), from the ops of
:func:`tracedoc.signals.cpu.training_ops`:

* ``S_k``: the step window's length;
* ``D_k``: DataLoader time, the length of the step window covered by the union of the
  ``enumerate(DataLoader)#...__next__`` spans of every thread
  (:func:`~tracedoc.signals.steps.dataloader_spans`; with ``dataloader_workers == 0`` this is
  the decoding and augmentation itself, one core's work);
* ``s_k`` (*serial*): the step's dispatch slice, as :func:`~tracedoc.signals.cpu.cpu_dispatch_ms`
  defines it per step: each op's fixed cost ``min(self time, cpu_op_overhead_us)`` plus the
  step's time that no top-level op and no DataLoader span covers (clamped at 0). Python,
  the dispatcher and the allocator run on the training thread alone;
* ``M_k``: matmul and convolution time (:data:`tracedoc.signals.cpu.MATMUL_CONV_OPS`, outermost
  occurrence only: :func:`tracedoc.signals.cpu.outermost_matmul_ops`), capped at ``A_k``;
* ``A_k = max(0, S_k - D_k - s_k)``: op arithmetic, of which ``M_k`` is matmul/conv. ``A_k``
  runs on the ``T`` intra-op threads.

So ``S_k = D_k + s_k + A_k`` (the unchanged model gives the observed step back, up to the
clamps; :func:`cpu_model_error_ms` measures it). The replay uses the means ``S, D, s, A, M``
over the complete steps: DataLoader workers pipeline batches across steps, so a step after
a loader fix is a throughput, not one step's chain.

**Fixes** (:data:`CPU_FIXES`, named like the GPU fixes of :mod:`tracedoc.signals.stepmodel`
where they are the same fix), applied together by taking each part's change:

* ``cpu_dispatch`` (``torch.compile``: the ops fuse into generated kernels): ``s' = 0``;
* ``cpu_bf16`` (bf16 autocast): ``M' = M * BF16_MATMUL_FACTOR`` when the trace ran in fp32
  (``tracedoc_host.amp == "off"``; a trace without the key is not known to be fp32 and saves
  nothing). Whether the CPU has bf16 units is the rule's condition (TD503), not the model's;
* ``dataloader`` / ``dataloader_low`` (batches built in ``W'`` worker processes, loading in
  the main process before: ``dataloader_workers == 0``). The trace cannot tell how much of
  ``D`` is work that needs a core (decoding, augmenting) and how much is waiting (a storage
  read), so the fix is a range between the two:

  - ``dataloader`` (the high end): ``D`` is waiting. Workers hide it and take no core, the
    training process keeps its threads, and the loader leaves the step:
    ``P' = s' + A'``.
  - ``dataloader_low`` (the low end): ``D`` is one core's work per batch. Each worker builds a
    batch in ``D`` on a core of its own; with ``c`` cores and ``T`` intra-op threads the
    training process keeps ``T' = max(1, min(T, c - W'))`` threads so that the workers get
    their cores (the ``cpu-oversubscription`` fix, TD501, applied with it: oversubscribed
    OpenMP intra-op threads wait at every barrier for a descheduled sibling, and on this
    project's 2-core machine one worker beside two threads ran at 0.95x, TD501's docs; the
    fix-loop sets ``num_threads`` with ``num_workers``,
    :func:`tracedoc.fixloop.knobs.thread_companion`). Its arithmetic is spread over ``T'``
    instead of ``T`` threads with perfect scaling, the most it can slow:
    ``P' = max(s' + A' * T / T', D / W', (s' + A' * T + D) / c)``: the training thread's
    chain (Amdahl's law with the serial part ``s'``: G. M. Amdahl, "Validity of the single
    processor approach to achieving large scale computing capabilities", AFIPS 1967), the
    workers' period, and Graham's bound of the total core time over the cores (R. L.
    Graham, "Bounds on multiprocessing timing anomalies", SIAM J. Appl. Math. 17(2), 1969).
    ``W'`` runs over ``1 .. max(1, c - 1)`` and the smallest ``P'`` is taken (the first on a
    tie). On one core the low end gains nothing: ``P' >= s' + A' + D``.

  ``A' = (A - M) + M'`` is the arithmetic after the other fixes.
* Without the loader fix the loading stays inline: ``P' = D + s' + A'`` with
  ``A' = (A - M) + M'``.

The saving is ``S_model - P'`` with ``S_model = D + s + A``, at least 0. A trace whose loader
already has workers (its DataLoader time is waiting on them, not work) is not modelled: the
signals are unavailable and the rules keep their closed-form estimates.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from tracedoc.signals.base import SignalContext, SignalUnavailable, signal
from tracedoc.signals.cpu import (
    cpu_cores,
    cpu_op_overhead_us,
    dataloader_workers,
    host,
    intra_op_threads,
    outermost_matmul_ops,
    training_ops,
)
from tracedoc.signals.intervals import overlap_per_window
from tracedoc.signals.steps import complete_mask, dataloader_spans, step_windows

#: Share of fp32 matmul/conv time bf16 keeps: TD503's estimate (bf16 halves it; AMX tiles
#: often do better, memory-bound shapes less).
BF16_MATMUL_FACTOR = 0.5

#: The CPU fixes rules may declare (``[fix] replay``), each with its text for the saving basis.
CPU_FIXES: dict[str, str] = {
    "dataloader": "the DataLoader time hidden by workers that need no core (loading that waits: the high end)",
    "dataloader_low": "the batches built in DataLoader workers on cores of their own, the training process "
    "keeping the cores they leave it and its arithmetic spread over fewer threads (the low end)",
    "cpu_dispatch": "the dispatch slice removed (ops fused into compiled kernels)",
    "cpu_bf16": f"fp32 matmul/conv time kept at {BF16_MATMUL_FACTOR} (bf16 autocast)",
}


@dataclass(frozen=True)
class CpuParts:
    """The mean parts of a CPU step (module docstring), ms, and the host's counts.

    Attributes:
        step, dataloader, serial, arithmetic, matmul: ``S, D, s, A, M`` (ms per step).
        cores, threads: ``c, T``.
        fp32: the matmuls ran in fp32 (``tracedoc_host.amp == "off"``).
    """

    step: float
    dataloader: float
    serial: float
    arithmetic: float
    matmul: float
    cores: int
    threads: int
    fp32: bool


def _per_step(ctx: SignalContext) -> tuple[np.ndarray, ...]:
    """``(S, D, s, M)`` per complete step, µs (module docstring)."""
    ops = training_ops(ctx)
    w = step_windows(ctx)
    m = complete_mask(ctx)
    ws, we = w["start_us"].to_numpy()[m], w["end_us"].to_numpy()[m]
    n = len(ws)
    k = ops["step_idx"].to_numpy()
    fixed = np.bincount(k, weights=np.minimum(ops["self_us"].to_numpy(), cpu_op_overhead_us(ctx)), minlength=n)
    top = ops["top"].to_numpy()
    covered = np.bincount(k[top], weights=ops["dur_us"].to_numpy()[top], minlength=n)
    spans = dataloader_spans(ctx)
    dl = overlap_per_window(spans["ts_us"].to_numpy(), spans["end_us"].to_numpy(), ws, we)
    step = we - ws
    serial = fixed + np.maximum(step - dl - covered, 0.0)
    mm = outermost_matmul_ops(ctx)
    matmul = np.bincount(mm["step_idx"].to_numpy(), weights=mm["dur_us"].to_numpy(), minlength=n)
    return step, dl, np.minimum(serial, step - dl), matmul


def cpu_parts(ctx: SignalContext) -> CpuParts:
    """The mean parts of the complete steps of a CPU-only trace (module docstring).

    Raises:
        SignalUnavailable: a trace with GPU activity, no ProfilerStep on the training thread,
            no ``tracedoc_host`` core and thread counts, or a loader that already has workers.
    """

    def build() -> CpuParts:
        cores, threads = cpu_cores(ctx), intra_op_threads(ctx)
        if dataloader_workers(ctx) > 0:
            raise SignalUnavailable(
                "the DataLoader already has workers: its time in the trace is waiting on them, not work "
                "the model can place"
            )
        step, dl, serial, matmul = _per_step(ctx)
        arith = np.maximum(step - dl - serial, 0.0)
        matmul = np.minimum(matmul, arith)
        return CpuParts(
            step=float(step.mean()) / 1000.0,
            dataloader=float(dl.mean()) / 1000.0,
            serial=float(serial.mean()) / 1000.0,
            arithmetic=float(arith.mean()) / 1000.0,
            matmul=float(matmul.mean()) / 1000.0,
            cores=cores,
            threads=threads,
            fp32=host(ctx).get("amp") == "off",
        )

    return ctx.cached("cpu_model_parts", build)


def _loader_step(p: CpuParts, serial: float, arith: float, low: bool) -> float:
    """``P'`` of the loader fix (module docstring), ms: the high end, or the best worker
    count's step at the low end."""
    if not low:
        return serial + arith
    best = float("inf")
    work = serial + arith * p.threads + p.dataloader
    for workers in range(1, max(1, p.cores - 1) + 1):
        threads = max(1, min(p.threads, p.cores - workers))
        chain = serial + arith * p.threads / threads
        best = min(best, max(chain, p.dataloader / workers, work / p.cores))
    return best


def replayed_step_ms(p: CpuParts, names: list[str] | tuple[str, ...]) -> float:
    """The step after the named fixes of :data:`CPU_FIXES` applied together, ms (module
    docstring). ``dataloader`` and ``dataloader_low`` together take the low end.

    Raises:
        KeyError: a name that is not a CPU fix.
    """
    for n in names:
        CPU_FIXES[n]  # noqa: B018 - a KeyError names the unknown fix
    serial = 0.0 if "cpu_dispatch" in names else p.serial
    matmul = p.matmul * (BF16_MATMUL_FACTOR if "cpu_bf16" in names and p.fp32 else 1.0)
    arith = p.arithmetic - p.matmul + matmul
    if "dataloader" in names or "dataloader_low" in names:
        return _loader_step(p, serial, arith, low="dataloader_low" in names)
    return p.dataloader + serial + arith


def cpu_replay_saving_ms(ctx: SignalContext, names: list[str] | tuple[str, ...]) -> float:
    """What the named CPU fixes save together per step, ms (>= 0; never a sum of savings).

    Raises:
        SignalUnavailable: :func:`cpu_parts` cannot model the trace.
        KeyError: a name that is not a CPU fix.
    """
    p = cpu_parts(ctx)
    base = p.dataloader + p.serial + p.arithmetic
    return max(base - replayed_step_ms(p, names), 0.0)


@signal("ms", scope="steps")
def cpu_model_error_ms(ctx: SignalContext) -> float:
    """How far the unchanged CPU model is from the observed step: ``|S - (D + s + A)|`` on the
    means, ms (0 unless the clamps of the module docstring bit).

    Raises:
        SignalUnavailable: :func:`cpu_parts` cannot model the trace.
    """
    p = cpu_parts(ctx)
    return abs(p.step - (p.dataloader + p.serial + p.arithmetic))


@signal("ms", scope="steps")
def cpu_serial_ms(ctx: SignalContext) -> float:
    """``s``: the training thread's serial time per step (dispatch and Python), ms (module docstring).

    Raises:
        SignalUnavailable: :func:`cpu_parts` cannot model the trace.
    """
    return cpu_parts(ctx).serial


@signal("ms", scope="steps")
def cpu_arithmetic_ms(ctx: SignalContext) -> float:
    """``A``: op arithmetic per step on the intra-op threads, ms (module docstring).

    Raises:
        SignalUnavailable: :func:`cpu_parts` cannot model the trace.
    """
    return cpu_parts(ctx).arithmetic
