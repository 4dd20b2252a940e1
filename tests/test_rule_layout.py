"""layout-transposes (TD320): an NCHW convolutional network whose convolutions cuDNN/MIOpen wrap in
NCHW <-> NHWC transposes (tracedoc/signals/layout.py, rules/TD320_layout_transposes.toml).

Real traces: the H100 ResNet-18 walkthrough (fixtures/h100_resnet18_*; docs/gpu-walkthrough.md)
fires before channels_last and is silent from it on; traces with a few transposes (TimeSformer,
the ViT, AlexNet, the V100 ResNet-50s) and CPU-only traces are silent. Synthetic traces pin the
threshold, the link to the launching convolution op and the recorded input strides.
Boundary cases of the condition alone live in the rule file's [[tests]] (tests/test_rules.py).
"""

from __future__ import annotations

import json
from functools import cache

import pytest
from conftest import real_trace
from tracebuilder import A100, TraceBuilder

import tracedoc
from tracedoc.engine.rules import Finding, Skipped, builtin_rules
from tracedoc.signals import SignalContext
from tracedoc.signals.layout import CHANNELS_LAST, NCHW, input_layout, is_conv_op

GZ = ".pt.trace.json.gz"
RULE = next(r for r in builtin_rules() if r.name == "layout-transposes")
#: rules/TD320_layout_transposes.toml: fires above this share of kernel time in the transposes
KERNEL_SHARE_THRESHOLD = 0.05


@cache
def context(name: str) -> SignalContext:
    return SignalContext(tracedoc.load(real_trace(name + GZ)))


@cache
def report(name: str):
    return tracedoc.analyze(real_trace(name + GZ))


def test_the_rule():
    assert RULE.code == "TD320"
    assert RULE.fix.knobs == ("channels_last",) and RULE.fix.safety == "safe"
    assert RULE.claims == ("busy",)
    assert "channels_last" in RULE.fix.summary and "summation order" in RULE.fix.summary
    assert "rounding" in RULE.docs["safety"] and "order" in RULE.docs["safety"]


# ---- the H100 walkthrough ------------------------------------------------------------------------


def test_fires_on_uint8_with_its_figures():
    """uint8 (bf16, batch 128, NCHW): 166 transposes per step under the 20 convolutions' forward
    (cudnn_convolution) and backward ops, 3.98 ms per step, 16.4% of kernel time; every recorded
    convolution input is NCHW. The finding's saving is the transposes' wall-clock time."""
    r = report("h100_resnet18_uint8")
    f = next(f for f in r.findings if f.code == "TD320")
    s = r.signals
    assert s["layout_transform_kernels_per_step"] == 166
    assert s["layout_transform_ms"] == pytest.approx(3.979, abs=0.005)
    assert s["layout_transform_kernel_share"] == pytest.approx(0.164, abs=0.001)
    assert s["layout_transform_step_share"] == pytest.approx(3.979 / s["step_time_ms"], abs=0.001)
    assert s["conv_channels_last_input_share"] == 0.0 and s["conv_input_layouts_per_step"] == 40
    assert f.estimated_saving_ms == pytest.approx(s["layout_transform_ms"], abs=1e-3)
    ops = {row["op"]: row for row in f.evidence["top_layout_transform_ops"]}
    assert set(ops) == {"aten::convolution_backward", "aten::cudnn_convolution"}
    assert {row["input_layout"] for row in ops.values()} == {NCHW}
    assert sum(row["kernels_per_step"] for row in ops.values()) == 166
    assert all("nchwToNhwc" in row["top_kernel"] for row in ops.values())
    assert r.findings[0].code == "TD320"  # the largest finding of a GPU-bound step


@pytest.mark.parametrize("change", ["baseline", "workers", "pinned", "amp", "batch", "uint8"])
def test_fires_on_every_nchw_trace(change):
    c = context(f"h100_resnet18_{change}")
    assert c.get("layout_transform_kernel_share") > 0.16
    assert c.get("conv_channels_last_input_share") == 0.0
    assert isinstance(RULE.evaluate(c.get), Finding)


@pytest.mark.parametrize("change", ["channels_last", "compile"])
def test_silent_once_the_model_is_channels_last(change):
    """Two transposes per step remain (0.08 ms, under 1% of kernel time), around the 3-channel stem
    convolution, whose input is channels_last: neither the share nor the strides would fire."""
    c = context(f"h100_resnet18_{change}")
    assert c.get("conv_channels_last_input_share") == 1.0
    assert c.get("layout_transform_kernels_per_step") == 2
    assert c.get("layout_transform_kernel_share") < 0.01
    assert RULE.evaluate(c.get) is None
    r = report(f"h100_resnet18_{change}")
    assert "TD320" not in [f.code for f in r.findings] + [a.code for a in r.also_true]


@pytest.mark.parametrize(
    "name,most",
    [
        ("h100_timesformer_inference", 0.005),  # a transformer: the patch-embedding convolution only
        ("h100_vit_nsfw_inference", 0.02),
        ("a100_alexnet_forward", 0.03),
        ("v100_resnet50_workers0", 0.002),
        ("mi300x_bert_small_inference", 0.0),
    ],
)
def test_silent_where_transposes_are_few(name, most):
    c = context(name)
    assert c.get("layout_transform_kernel_share") <= most < KERNEL_SHARE_THRESHOLD
    assert RULE.evaluate(c.get) is None


@pytest.mark.parametrize("name", ["cpu_only_gloo", "cpu_resnet18_baseline_img32"])
def test_skipped_on_cpu_only_traces(name):
    out = RULE.evaluate(context(name).get)
    assert isinstance(out, Skipped) and "CPU-only" in out.reason


# ---- input layouts from recorded strides ---------------------------------------------------------


@pytest.mark.parametrize(
    "dims,strides,expect",
    [
        ("[[128,64,56,56],[64,64,3,3],[]]", "[[200704,3136,56,1],[576,9,3,1],[]]", NCHW),
        ("[[128,64,56,56],[64,64,3,3],[]]", "[[200704,1,3584,64],[576,1,192,64],[]]", CHANNELS_LAST),
        # convolution_backward: grad_output first
        ("[[128,64,56,56],[128,64,56,56]]", "[[200704,1,3584,64],[200704,1,3584,64]]", CHANNELS_LAST),
        ("[[8,1,32,32]]", "[[1024,1,32,1]]", CHANNELS_LAST),  # C == 1: still told apart
        ("[[8,1,32,32]]", "[[1024,1024,32,1]]", NCHW),
        ("[[8,512,1,1]]", "[[512,1,1,1]]", None),  # H * W == 1: NCHW has stride[1] == 1 too
        ("[[2,16,4,8,8]]", "[[4096,1,1024,128,16]]", CHANNELS_LAST),  # channels_last_3d
        ("[[2,16,64]]", "[[1024,64,1]]", None),  # conv1d: no channels_last form
        ("[[],[128,64,56,56]]", "[[],[200704,3136,56,1]]", NCHW),  # the first 4-D input
        (None, "[[200704,3136,56,1]]", None),
        ("[[128,64,56,56]]", None, None),
    ],
)
def test_input_layout(dims, strides, expect):
    assert input_layout(dims, strides) == expect


@pytest.mark.parametrize(
    "name,conv",
    [
        ("aten::cudnn_convolution", True),
        ("aten::convolution_backward", True),
        ("aten::miopen_convolution", True),
        ("aten::conv2d", True),
        ("ConvolutionBackward0", True),
        ("aten::copy_", False),
        ("aten::mm", False),
        (None, False),
    ],
)
def test_conv_ops(name, conv):
    assert is_conv_op(name) == conv


# ---- synthetic traces: the threshold and the links -----------------------------------------------

NCHW_IN = ("[[32,64,56,56],[64,64,3,3],[]]", "[[200704,3136,56,1],[576,9,3,1],[]]")
NHWC_IN = ("[[32,64,56,56],[64,64,3,3],[]]", "[[200704,1,3584,64],[576,1,192,64],[]]")
TRANSPOSE = (
    "void cudnn::engines_precompiled::nchwToNhwcKernel<float, float, float, false, true, (cudnnKernelDataType_t)0>"
)
CONV = "sm80_xmma_fprop_implicit_gemm_tf32f32_tf32f32_f32_nhwckrsc_nhwc_tilesize128x128x16"


def _conv_trace(transpose_us: float, conv_us: float, inputs=NCHW_IN, op: str = "aten::cudnn_convolution"):
    """Two 2,000 µs steps; in each, one op launches a transpose and a convolution kernel of the given
    lengths (the op's recorded inputs are ``inputs``: (Input Dims, Input Strides), or None)."""
    b = TraceBuilder([A100])
    for i in range(2):
        t0 = i * 2000
        b.step(i + 1, t0, 2000)
        b.op(op, t0 + 10, 50)
        if inputs is not None:
            b.events[-1]["args"].update({"Input Dims": json.loads(inputs[0]), "Input Strides": json.loads(inputs[1])})
        b.kernel(TRANSPOSE, t0 + 15, t0 + 100, transpose_us)
        b.kernel(CONV, t0 + 30, t0 + 100 + transpose_us, conv_us)
    return b


def _ctx(tmp_path, b: TraceBuilder) -> SignalContext:
    tmp_path.mkdir(parents=True, exist_ok=True)
    return SignalContext(tracedoc.load(b.write(tmp_path / "t.json")))


def test_threshold_is_strict(tmp_path):
    """50 µs of transposes in 1,000 µs of kernel time is 5.0%: silent; 51 in 1,000 is 5.1%: fires,
    with the transposes' time per step as the saving."""
    at = _ctx(tmp_path / "at", _conv_trace(50, 950))
    assert at.get("layout_transform_kernel_share") == pytest.approx(KERNEL_SHARE_THRESHOLD)
    assert RULE.evaluate(at.get) is None
    above = _ctx(tmp_path / "above", _conv_trace(51, 949))
    assert above.get("layout_transform_kernel_share") == pytest.approx(0.051)
    f = RULE.evaluate(above.get)
    assert isinstance(f, Finding) and f.estimated_saving_ms == pytest.approx(0.051)
    assert above.get("layout_transform_kernels_per_step") == 1
    assert above.get("layout_transform_step_share") == pytest.approx(0.051 / above.get("step_time_ms"))


def test_channels_last_inputs_keep_it_silent(tmp_path):
    c = _ctx(tmp_path, _conv_trace(200, 800, inputs=NHWC_IN))
    assert c.get("layout_transform_kernel_share") == pytest.approx(0.2)
    assert c.get("conv_channels_last_input_share") == 1.0
    assert RULE.evaluate(c.get) is None
    assert c.get("top_layout_transform_ops")[0]["input_layout"] == CHANNELS_LAST


def test_without_recorded_strides_the_transposes_decide(tmp_path):
    c = _ctx(tmp_path, _conv_trace(200, 800, inputs=None))
    assert c.get("conv_input_layouts_per_step") == 0 and c.get("conv_channels_last_input_share") == 0.0
    assert isinstance(RULE.evaluate(c.get), Finding)
    row = c.get("top_layout_transform_ops")[0]
    assert row["op"] == "aten::cudnn_convolution" and row["input_layout"] == "not recorded"
    assert row["kernels_per_step"] == 1 and row["ms_per_step"] == pytest.approx(0.2)


def test_transposes_of_other_ops_do_not_count(tmp_path):
    """A transpose launched by a non-convolution op is not a convolution's layout conversion."""
    c = _ctx(tmp_path, _conv_trace(200, 800, op="aten::copy_"))
    assert c.get("layout_transform_kernels_per_step") == 0 and c.get("layout_transform_ms") == 0.0
    assert RULE.evaluate(c.get) is None


@pytest.mark.parametrize(
    "name", ["h100_resnet18_baseline.pt.trace.json.gz", "h100_resnet18_channels_last.pt.trace.json.gz"]
)
def test_layout_kernels_conv_columns_follow_each_kernel_s_op_name(name):
    """``conv`` and ``around_conv`` are read through the op column's codes (issue 24): per kernel,
    the same as testing its launching op's name as a string."""
    from tracedoc.load import load
    from tracedoc.signals.layout import layout_kernels

    lk = layout_kernels(SignalContext(load(real_trace(name), cache=None)))
    ops = lk["op"].astype(object).tolist()
    conv = [isinstance(o, str) and is_conv_op(o) for o in ops]
    around = [bool(t) and (c or not isinstance(o, str)) for t, c, o in zip(lk["layout"], conv, ops, strict=True)]
    assert lk["conv"].tolist() == conv and any(conv) and not all(conv)
    assert lk["around_conv"].tolist() == around and any(around)
