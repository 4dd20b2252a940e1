"""Workload signals: what kind of job the trace records (training or inference) and what the
device can run (bf16), so a rule's fix can fit the job.

A rule's ``[fix] detail`` replaces its ``summary`` only when every signal the detail names has a
value (:mod:`tracedoc.engine.rules`). The signals here that are unavailable by design
(``training_step_ms`` on an inference trace, ``bf16_peak_ratio`` on a GPU without bf16 Tensor
Cores) are what makes advice conditional: a rule's summary gives the advice that holds anyway,
its detail the advice for a training job, or a bf16 device.

Training is told from the CPU operators, as PyTorch's profiler records them: the autograd
engine's backward nodes (``autograd::engine::evaluate_function: ...Backward0``, the nodes
``ConvolutionBackward0``, ``CompiledFunctionBackward``), ATen backward kernels
(``aten::convolution_backward``, ``aten::native_batch_norm_backward``) and the optimizer's
``Optimizer.step#<Class>.step`` annotation. An inference job (``torch.no_grad()``,
``torch.inference_mode()``, a serving engine) records none of them.
"""

from __future__ import annotations

import re

import numpy as np

from tracedoc.signals.base import SignalContext, SignalUnavailable, signal
from tracedoc.signals.steps import optimizer_step_mask
from tracedoc.signals.strings import cached_name_mask

#: CPU operator names that only a backward pass records (see the module docstring).
BACKWARD_OP = re.compile(r"^autograd::engine::evaluate_function|Backward\d*$|_backward(?:_|$)")

#: Compute capability from which an NVIDIA GPU runs bf16 on its Tensor Cores: 8.0 (Ampere, A100).
#: Volta (7.0, V100) and Turing (7.5, T4) Tensor Cores take fp16 only (NVIDIA CUDA C++
#: Programming Guide, "Warp Matrix Functions", element types by architecture). AMD Instinct GPUs
#: with matrix cores (MI100 gfx908, MI200 gfx90a, MI300 gfx94x) all have bf16 MFMA instructions
#: (AMD CDNA, CDNA 2 and CDNA 3 ISA references).
BF16_MIN_CC = (8, 0)


def backward_op_mask(ctx: SignalContext) -> np.ndarray:
    """Mask over ``trace.ops``: operators only a backward pass records (:data:`BACKWARD_OP`)."""
    return cached_name_mask(ctx, "ops", "backward", lambda n: bool(BACKWARD_OP.search(n)))


@signal("bool", scope="trace")
def is_training(ctx: SignalContext) -> bool:
    """Whether the trace records a training job: true when any CPU operator is a backward-pass
    operator (:data:`BACKWARD_OP`: autograd engine nodes, ``*Backward0``, ``aten::*_backward``) or an
    ``Optimizer.step#`` annotation; false when the trace has CPU operators and none of them is
    (a forward-only job: inference, serving, evaluation).

    Raises:
        SignalUnavailable: the trace has no CPU operators (recorded without
            ``ProfilerActivity.CPU``), so a backward pass could not be seen.
    """
    if not len(ctx.trace.ops):
        raise SignalUnavailable("the trace has no CPU operators, so a backward pass cannot be seen")
    return bool(backward_op_mask(ctx).any() or optimizer_step_mask(ctx).any())


@signal("ms", scope="steps")
def training_step_ms(ctx: SignalContext) -> float:
    """The step time (``step_time_ms``) of a training job, ms; unavailable on any other.

    For rules' fix details: a detail that names it (learning-rate scaling, logging the loss every
    N steps, loss scaling) is shown only on a training trace, its rule's summary on an inference
    trace.

    Raises:
        SignalUnavailable: ``is_training`` is false (no backward pass and no optimizer step: an
            inference trace) or unknown.
    """
    if not ctx.get("is_training"):
        raise SignalUnavailable("no backward pass and no optimizer step in the trace: an inference (forward-only) job")
    return ctx.get("step_time_ms")


@signal("bool")
def bf16_capable(ctx: SignalContext) -> bool:
    """Whether the primary GPU runs bf16 on its Tensor Cores (matrix cores): NVIDIA compute
    capability >= 8.0 (:data:`BF16_MIN_CC`, Ampere and later; Volta and Turing have fp16 Tensor
    Cores only), AMD with matrix cores (``has_tensor_cores``: MI100, MI200, MI300 and later).

    Raises:
        SignalUnavailable: no device properties, another vendor, or an AMD device whose
            generation cannot be told (as ``has_tensor_cores``).
    """
    has = ctx.get("has_tensor_cores")
    dev = ctx.device
    if dev.vendor == "AMD":
        return bool(has)
    return tuple(dev.compute_capability) >= BF16_MIN_CC


@signal("ratio")
def bf16_peak_ratio(ctx: SignalContext) -> float:
    """The primary GPU's 16-bit Tensor Core (matrix core) to FP32 peak ratio, on a GPU that runs
    bf16 on them (``bf16_capable``); the step model's ratio
    (:data:`tracedoc.signals.stepmodel.TENSOR_CORE_PEAK_RATIO`, vendor datasheets).

    For rules' fix details: a detail that names it (AMP in bf16) is shown only on a bf16 device;
    elsewhere (a V100, a T4) the rule's summary advises fp16 with loss scaling.

    Raises:
        SignalUnavailable: the GPU has no bf16 Tensor Cores (NVIDIA compute capability below
            8.0), or ``bf16_capable`` is unknown.
    """
    if not ctx.get("bf16_capable"):
        dev = ctx.device
        cc = ".".join(map(str, dev.compute_capability)) if dev.compute_capability else "unknown"
        raise SignalUnavailable(f"{dev.full_name} (compute capability {cc}) has no bf16 Tensor Cores")
    from tracedoc.signals.stepmodel import tensor_core_ratio

    return float(tensor_core_ratio(ctx))
