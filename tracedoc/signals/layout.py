"""Layout signals: how much GPU time a convolutional network spends converting its activations
between NCHW and NHWC around the convolutions.

cuDNN's Tensor Core convolutions (and MIOpen's NHWC ``igemm`` kernels) read and write NHWC
(channels last). A model whose tensors are NCHW (PyTorch's default, contiguous) gets a
transpose before such a kernel and one after it: cuDNN's ``nchwToNhwcKernel`` /
``nhwcToNchwKernel`` (``cudnn::ops::`` and ``cudnn::engines_precompiled::`` forms), MIOpen's
batched transposes and tensor reorders. The kernel class is
:func:`~tracedoc.signals.attribution.is_layout_transform_kernel` (``[layout_transform_kernels]``
of ``patterns.toml``). A layout kernel counts here when its launching op (the innermost
``cpu_op`` around its launch call, :func:`~tracedoc.signals.attribution.runtime_ops`) is a
convolution op (:data:`CONV_OP`), or when it has no linked op (the name alone decides then).

Where the trace recorded the ops' inputs (``record_shapes=True``), the convolution ops'
``Input Strides`` tell the layout (:func:`input_layout`): the first 4-D or 5-D tensor input
whose ``stride[1] == 1`` is channels last (NHWC / NDHWC), any other is NCHW; an input whose
spatial size is 1 is left out (a contiguous NCHW tensor with ``H * W == 1`` has
``stride[1] == 1`` too).

Shares are of the kernel time (sum of durations) of the primary device's kernels that start
inside the complete step windows, like the Tensor Core shares
(:mod:`tracedoc.signals.tensor_core`); the ms figure is a wall-clock union per complete step.
"""

from __future__ import annotations

import re
from functools import lru_cache

import numpy as np
import pandas as pd

from tracedoc.signals.arrays import sorted_unique
from tracedoc.signals.attribution import kernel_op_pos
from tracedoc.signals.base import SignalContext, signal
from tracedoc.signals.steps import at_rows, complete_mask
from tracedoc.signals.strings import shared_column, sorted_codes
from tracedoc.signals.tensor_core import union_ms_per_step, window_kernels

#: Convolution ops, aten names and autograd nodes (forward, backward, transposed, depthwise;
#: cuDNN, MIOpen, oneDNN): the ops under which cuDNN and MIOpen launch their layout transposes
#: (``aten::cudnn_convolution`` and ``aten::convolution_backward`` in the h100_resnet18_*
#: fixtures; ``aten::miopen_convolution`` on ROCm).
CONV_OP = re.compile(
    r"^(aten::(_?convolution\w*|conv(_transpose)?[123]d|_?cudnn_convolution\w*|miopen_(depthwise_)?convolution\w*"
    r"|mkldnn_convolution\w*|_conv_depthwise2d|_slow_conv2d\w*|slow_conv\w*)|\w*Conv\w*Backward\d*)$"
)

#: Layout names of :func:`input_layout`.
CHANNELS_LAST = "channels_last"
NCHW = "NCHW"


def is_conv_op(name: object) -> bool:
    """Whether a CPU op name is a convolution op (:data:`CONV_OP`)."""
    return isinstance(name, str) and bool(CONV_OP.match(name))


@lru_cache(maxsize=4096)
def input_layout(dims_text: object, strides_text: object) -> str | None:
    """The memory layout of an op's first 4-D or 5-D tensor input, from its recorded
    ``Input Dims`` and ``Input Strides`` (the ops frame's ``input_dims`` and ``input_strides``
    cells, :func:`tracedoc.load.shapes.parse_shape_arg`).

    Returns:
        :data:`CHANNELS_LAST` when that input's ``stride[1] == 1`` (NHWC / NDHWC in memory:
        PyTorch's ``channels_last`` and ``channels_last_3d``), :data:`NCHW` otherwise; None when
        nothing is recorded, no 4-D or 5-D input is found, or its spatial size is 1 (then a
        contiguous NCHW tensor has ``stride[1] == 1`` as well, and the layout cannot be told).
    """
    from tracedoc.load.shapes import parse_shape_arg

    dims, strides = parse_shape_arg(dims_text), parse_shape_arg(strides_text)
    if not dims or not strides:
        return None
    for d, s in zip(dims, strides, strict=False):
        if not (isinstance(d, list) and isinstance(s, list) and len(d) == len(s) and len(d) in (4, 5)):
            continue
        if not all(isinstance(x, int) for x in (*d, *s)):
            continue
        if int(np.prod(d[2:])) == 1:
            return None
        return CHANNELS_LAST if s[1] == 1 else NCHW
    return None


def layout_kernels(ctx: SignalContext) -> pd.DataFrame:
    """The primary device's kernels in the complete steps (rows of
    :func:`~tracedoc.signals.tensor_core.window_kernels`) with three more columns: ``op_pos``
    (row position of the launching op in ``trace.ops``, -1 when none), ``conv`` (the launching op
    is a convolution op) and ``around_conv`` (a layout transform launched by a convolution op or by
    no linked op: the kernels the layout signals count). Cached per context.

    Raises:
        SignalUnavailable: no kernel time inside the step windows.
    """
    ko = window_kernels(ctx)

    def build() -> pd.DataFrame:
        out = ko.copy(deep=False)  # new columns only: the shared ones are never written
        # window_kernels keeps kernel_ops' index: row positions in trace.kernels
        shared_column(out, "op_pos", at_rows(kernel_op_pos(ctx), ko.index))
        # one test per distinct op name, through the column's codes (-1: no op): the names as an
        # object array and a list of every kernel's test were 20 MiB of the layout signals'
        # transient on 4 M small events (issue 24)
        codes, names = sorted_codes(out["op"])
        per_name = np.fromiter((is_conv_op(n) for n in names), dtype=bool, count=len(names))
        no_op = codes < 0
        conv = np.zeros(len(codes), dtype=bool)
        conv[~no_op] = per_name[codes[~no_op]]
        out["conv"] = conv
        out["around_conv"] = out["layout"].to_numpy() & (conv | no_op)
        return out

    return ctx.cached("layout_kernels", build)


def _n_steps(ctx: SignalContext) -> int:
    return max(int(complete_mask(ctx).sum()), 1)


def _op_layouts(ctx: SignalContext, op_pos: np.ndarray) -> np.ndarray:
    """The input layout (:func:`input_layout`) of each ``trace.ops`` row in ``op_pos`` (None: -1,
    not recorded, or not to be told)."""
    ops = ctx.trace.ops
    out = np.full(len(op_pos), None, dtype=object)
    if "input_strides" not in ops.columns or "input_dims" not in ops.columns:
        return out
    ok = op_pos >= 0
    dims = ops["input_dims"].to_numpy(dtype=object)[op_pos[ok]]
    strides = ops["input_strides"].to_numpy(dtype=object)[op_pos[ok]]
    out[ok] = [
        input_layout(d if isinstance(d, str) else None, s if isinstance(s, str) else None)
        for d, s in zip(dims, strides, strict=True)
    ]
    return out


def _conv_layouts(ctx: SignalContext) -> np.ndarray:
    """The input layout of each distinct convolution op that launched a kernel of the primary
    device in the complete steps (None where not known), cached per context."""

    def build() -> np.ndarray:
        lk = layout_kernels(ctx)
        pos = sorted_unique(lk.loc[lk["conv"] & (lk["op_pos"] >= 0), "op_pos"].to_numpy())
        return _op_layouts(ctx, pos)

    return ctx.cached("conv_layouts", build)


@signal("ms")
def layout_transform_ms(ctx: SignalContext) -> float:
    """Wall-clock time of the layout transforms around convolutions (NCHW <-> NHWC transposes:
    cuDNN ``nchwToNhwcKernel``/``nhwcToNchwKernel``, MIOpen batched transposes; launched by a
    convolution op or by no linked op), ms per complete step: the union (merged intervals) of those
    kernels on the primary device, clipped to the complete step windows. 0.0 when there are none.

    Raises:
        SignalUnavailable: no kernel time inside the step windows (a CPU-only trace among them).
    """
    lk = layout_kernels(ctx)
    m = lk["around_conv"].to_numpy()
    return union_ms_per_step(ctx, lk["ts_us"].to_numpy()[m], lk["end_us"].to_numpy()[m])


@signal("share")
def layout_transform_kernel_share(ctx: SignalContext) -> float:
    """Kernel time (sum of durations) of the layout transforms around convolutions
    (:func:`layout_transform_ms`'s kernels) / all kernel time of the primary device in the
    complete steps (0..1).

    Raises:
        SignalUnavailable: no kernel time inside the step windows.
    """
    lk = layout_kernels(ctx)
    return float(lk.loc[lk["around_conv"], "dur_us"].sum() / lk["dur_us"].sum())


@signal("share", scope="steps")
def layout_transform_step_share(ctx: SignalContext) -> float:
    """:func:`layout_transform_ms` / the mean complete step (``step_time_ms``), 0..1.

    Raises:
        SignalUnavailable: no kernel time inside the step windows.
    """
    step = float(ctx.get("step_time_ms"))
    return layout_transform_ms(ctx) / step if step > 0 else 0.0


@signal("count")
def layout_transform_kernels_per_step(ctx: SignalContext) -> float:
    """Number of layout transforms around convolutions (:func:`layout_transform_ms`'s kernels)
    per complete step.

    Raises:
        SignalUnavailable: no kernel time inside the step windows.
    """
    return float(layout_kernels(ctx)["around_conv"].sum() / _n_steps(ctx))


@signal("count")
def conv_input_layouts_per_step(ctx: SignalContext) -> float:
    """Convolution ops per complete step whose input layout the trace records: distinct
    convolution ops that launched a kernel of the primary device in the complete steps, with
    ``Input Dims`` and ``Input Strides`` recorded and a 4-D or 5-D input of spatial size above 1
    (:func:`input_layout`). 0.0 for a trace recorded without ``record_shapes``.

    Raises:
        SignalUnavailable: no kernel time inside the step windows.
    """
    lay = _conv_layouts(ctx)
    return float(sum(x is not None for x in lay) / _n_steps(ctx))


@signal("share")
def conv_channels_last_input_share(ctx: SignalContext) -> float:
    """Share (0..1) of the convolution ops with a recorded input layout
    (:func:`conv_input_layouts_per_step`'s ops) whose input is channels last (``stride[1] == 1``,
    :func:`input_layout`). 0.0 when no convolution's layout is recorded (nothing says the model is
    channels last; ``conv_input_layouts_per_step`` is then 0).

    Raises:
        SignalUnavailable: no kernel time inside the step windows.
    """
    lay = [x for x in _conv_layouts(ctx) if x is not None]
    return float(sum(x == CHANNELS_LAST for x in lay) / len(lay)) if lay else 0.0


@signal("table")
def top_layout_transform_ops(ctx: SignalContext) -> list[dict]:
    """The launching ops of the layout transforms around convolutions, most time first (at most 5):
    op, its input layout (``NCHW``, ``channels_last``, ``mixed``, or ``not recorded``), layout
    kernels per step, their summed time in ms per step, and the kernel with the most time.

    Raises:
        SignalUnavailable: no kernel time inside the step windows.
    """
    lk = layout_kernels(ctx)
    lk = lk[lk["around_conv"]]
    if not len(lk):
        return []
    n = _n_steps(ctx)
    lay = _op_layouts(ctx, lk["op_pos"].to_numpy())
    df = pd.DataFrame(
        {
            "op": lk["op"].astype(object).where(lk["op"].notna(), "(no linked op)").to_numpy(dtype=object),
            "layout": lay,
            "name": lk["name"].to_numpy(dtype=object),
            "dur": lk["dur_us"].to_numpy(),
        }
    )
    rows = []
    for op, g in df.groupby("op", sort=False):
        known = {x for x in g["layout"] if x is not None}
        layout = "not recorded" if not known else (known.pop() if len(known) == 1 else "mixed")
        top = g.groupby("name")["dur"].sum().sort_values(ascending=False, kind="stable")
        rows.append(
            {
                "op": op,
                "input_layout": layout,
                "kernels_per_step": round(len(g) / n, 1),
                "ms_per_step": round(float(g["dur"].sum()) / 1000 / n, 3),
                "top_kernel": top.index[0],
            }
        )
    return sorted(rows, key=lambda r: -r["ms_per_step"])[:5]
