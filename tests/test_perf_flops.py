"""tracedoc.perf.flops: FLOPs and bytes per op from the recorded shapes.

Every expected value is written as the arithmetic that gives it (from the op's definition),
never read back from the code. Shapes marked "fixture" are copied from the events of the
fixtures named (``Input Dims``, ``Input type``, ``Concrete Inputs`` as recorded)."""

from __future__ import annotations

import gzip
import json
import math
import random
from pathlib import Path

import pytest

from tracedoc.perf.flops import OpCost, op_cost

FIXTURES = Path(__file__).resolve().parents[1] / "fixtures"
BF16, F32, F16 = "c10::BFloat16", "float", "c10::Half"


def cost(name, dims, types, concrete=None, strides=None) -> OpCost:
    c = op_cost(name, dims, types, concrete, strides)
    assert c is not None, name
    return c


# --------------------------------------------------------------------------- GEMM


def test_mm_fp16_counts_a_multiply_add_as_two_and_each_operand_once():
    c = cost("aten::mm", [[128, 256], [256, 512]], [F16, F16])
    assert c.flops == 2 * 128 * 256 * 512  # 33,554,432
    assert c.bytes == 2 * (128 * 256 + 256 * 512 + 128 * 512)  # A, B read, C written: 458,752
    assert (c.kind, c.dtype, c.m, c.n, c.k, c.batch) == ("gemm", "fp16", 128, 512, 256, 1)
    assert c.tc_aligned is True  # 128, 512, 256 all multiples of 8 (fp16)
    assert c.intensity == pytest.approx(33554432 / 458752)


def test_tc_alignment_needs_16_bytes_of_elements():
    assert cost("aten::mm", [[100, 64], [64, 64]], [F16, F16]).tc_aligned is False  # 100 % 8 != 0
    assert cost("aten::mm", [[100, 64], [64, 64]], [F32, F32]).tc_aligned is True  # fp32: multiples of 4


def test_addmm_from_the_resnet18_fixture_adds_the_bias():
    # fixture h100_resnet18_baseline: addmm [[10], [32, 512], [512, 10], [], []], float, beta "1"
    dims = [[10], [32, 512], [512, 10], [], []]
    types = [F32, F32, F32, "Scalar", "Scalar"]
    c = cost("aten::addmm", dims, types, ["", "", "", "1", "1"])
    assert c.flops == 2 * 32 * 10 * 512 + 32 * 10  # GEMM 327,680 + bias add 320
    assert c.bytes == 4 * (10 + 32 * 512 + 512 * 10 + 32 * 10)  # bias, A, B read; C written
    # beta = 0: the bias is neither read nor added
    c0 = cost("aten::addmm", dims, types, ["", "", "", "0", "1"])
    assert c0.flops == 2 * 32 * 10 * 512
    assert c0.bytes == 4 * (32 * 512 + 512 * 10 + 32 * 10)


def test_bmm_from_the_timesformer_fixture():
    # fixture h100_timesformer_inference: bmm [[37632, 8, 64], [37632, 64, 8]] bf16
    c = cost("aten::bmm", [[37632, 8, 64], [37632, 64, 8]], [BF16, BF16])
    assert c.flops == 2 * 37632 * 8 * 8 * 64
    assert c.bytes == 2 * 37632 * (8 * 64 + 64 * 8 + 8 * 8)
    assert (c.m, c.n, c.k, c.batch) == (8, 8, 64, 37632)


def test_baddbmm_adds_beta_self():
    c = cost("aten::baddbmm", [[4, 8, 16], [4, 8, 32], [4, 32, 16], [], []], [F32] * 3 + ["Scalar"] * 2)
    assert c.flops == 2 * 4 * 8 * 16 * 32 + 4 * 8 * 16
    assert c.bytes == 4 * (4 * 8 * 16 + 4 * 8 * 32 + 4 * 32 * 16 + 4 * 8 * 16)


def test_linear_flattens_leading_dims_and_reads_weight_as_out_by_in():
    # fixture h100_timesformer_inference: linear [[3136, 8, 768], [2304, 768], [2304]] bf16
    c = cost("aten::linear", [[3136, 8, 768], [2304, 768], [2304]], [BF16] * 3)
    m = 3136 * 8  # 25,088 rows
    assert c.flops == 2 * m * 2304 * 768 + m * 2304
    assert c.bytes == 2 * (m * 768 + 2304 * 768 + 2304 + m * 2304)
    assert (c.m, c.n, c.k) == (m, 2304, 768)
    # fixture mi300x_sglang_qwen3_prefill_decode: no bias (dims [], type "")
    c2 = cost("aten::linear", [[15360, 4096], [6144, 4096], []], [BF16, BF16, ""])
    assert c2.flops == 2 * 15360 * 6144 * 4096
    assert c2.bytes == 2 * (15360 * 4096 + 6144 * 4096 + 15360 * 6144)


def test_linear_under_autocast_takes_the_narrow_dtype():
    # fixture h100_resnet18_amp: linear [[32, 512], [10, 512], [10]] with types bf16, float, float
    c = cost("aten::linear", [[32, 512], [10, 512], [10]], [BF16, F32, F32])
    assert c.dtype == "bf16"
    assert c.bytes == 2 * 32 * 512 + 4 * 10 * 512 + 4 * 10 + 2 * 32 * 10  # output in the input's dtype


def test_matmul_broadcasts_batch_dims_and_promotes_vectors():
    c = cost("aten::matmul", [[10, 1, 32, 64], [5, 64, 16]], [F32, F32])
    batch = 10 * 5  # (10, 1) with (5,) broadcasts to (10, 5)
    assert c.flops == 2 * batch * 32 * 16 * 64
    assert c.bytes == 4 * (10 * 32 * 64 + 5 * 64 * 16 + batch * 32 * 16)
    assert c.batch == 50
    v = cost("aten::matmul", [[64], [64, 8]], [F32, F32])  # [64] is a row [1, 64]
    assert v.flops == 2 * 1 * 8 * 64
    assert v.bytes == 4 * (64 + 64 * 8 + 8)
    # fixture h100_timesformer_inference: matmul [[3136, 12, 8, 64], [3136, 12, 64, 8]]
    t = cost("aten::matmul", [[3136, 12, 8, 64], [3136, 12, 64, 8]], [BF16, BF16])
    assert t.flops == 2 * (3136 * 12) * 8 * 8 * 64


def test_scaled_mm_fp8_writes_out_dtype():
    dims = [[64, 128], [128, 32], [], [], [], [], [], []]
    types = ["c10::Float8_e4m3fn", "c10::Float8_e4m3fn", F32, F32, "", "", "Scalar", "Scalar"]
    c = cost("aten::_scaled_mm", dims, types, ["", "", "", "", "", "", "15", "False"])
    assert c.flops == 2 * 64 * 32 * 128
    # fp8 operands 1 byte each, two fp32 scalar scales, bf16 (ScalarType 15) output
    assert c.bytes == 64 * 128 + 128 * 32 + 4 + 4 + 2 * 64 * 32
    assert c.dtype == "fp8"
    assert c.tc_aligned is True  # fp8: multiples of 16


def test_gemm_shape_mismatch_is_none():
    assert op_cost("aten::mm", [[128, 256], [255, 512]], [F16, F16]) is None
    assert op_cost("aten::bmm", [[2, 8, 64], [3, 64, 8]], [F16, F16]) is None
    assert op_cost("aten::addmm", [[7], [32, 512], [512, 10], [], []], [F32] * 3 + ["Scalar"] * 2) is None


# --------------------------------------------------------------------------- convolution

# fixture h100_resnet18_baseline, the first layer: input [32, 3, 224, 224], weight [64, 3, 7, 7],
# stride 2, padding 3: output side (224 + 2*3 - 1*(7-1) - 1) // 2 + 1 = 223 // 2 + 1 = 112.
FIRST = {
    "aten::conv2d": (
        [[32, 3, 224, 224], [64, 3, 7, 7], [], [], [], [], []],
        [F32, F32, "", "ScalarList", "ScalarList", "ScalarList", "Scalar"],
        ["", "", "", "[2, 2]", "[3, 3]", "[1, 1]", "1"],
    ),
    "aten::convolution": (
        [[32, 3, 224, 224], [64, 3, 7, 7], [], [], [], [], [], [], []],
        [F32, F32, "", "ScalarList", "ScalarList", "ScalarList", "Scalar", "ScalarList", "Scalar"],
        ["", "", "", "[2, 2]", "[3, 3]", "[1, 1]", "False", "[0, 0]", "1"],
    ),
    "aten::cudnn_convolution": (  # padding before stride in this schema
        [[32, 3, 224, 224], [64, 3, 7, 7], [], [], [], [], [], [], []],
        [F32, F32, "ScalarList", "ScalarList", "ScalarList", "Scalar", "Scalar", "Scalar", "Scalar"],
        ["", "", "[3, 3]", "[2, 2]", "[1, 1]", "1", "False", "False", "True"],
    ),
}


@pytest.mark.parametrize("name", sorted(FIRST))
def test_resnet18_first_conv(name):
    c = cost(name, *FIRST[name])
    out = 32 * 64 * 112 * 112
    assert c.flops == 2 * out * 3 * 7 * 7  # 2 * C*R*S multiply-adds per output element
    assert c.bytes == 4 * (32 * 3 * 224 * 224 + 64 * 3 * 7 * 7 + out)
    assert (c.kind, c.dtype) == ("conv", "fp32")
    assert (c.m, c.n, c.k, c.batch) == (32 * 112 * 112, 64, 3 * 7 * 7, 1)  # implicit GEMM N*P*Q x K x C*R*S


def test_conv_without_geometry_is_unknown():
    # fixture v100_resnet50_workers0 (PyTorch 1.x, no Concrete Inputs)
    dims, types, _ = FIRST["aten::conv2d"]
    assert op_cost("aten::conv2d", dims, [F32, F32, "", "GenericList", "GenericList", "GenericList", "Int"]) is None


def test_depthwise_conv_groups():
    dims = [[8, 32, 16, 16], [32, 1, 3, 3], [], [], [], [], []]
    types = [F16, F16, "", "ScalarList", "ScalarList", "ScalarList", "Scalar"]
    c = cost("aten::conv2d", dims, types, ["", "", "", "[1]", "[1]", "[1]", "32"])
    assert c.flops == 2 * 8 * 32 * 16 * 16 * 1 * 9  # output 16x16 (pad 1), 1*3*3 MACs each
    assert c.bytes == 2 * (8 * 32 * 16 * 16 + 32 * 9 + 8 * 32 * 16 * 16)
    assert (c.m, c.n, c.k, c.batch) == (8 * 16 * 16, 1, 9, 32)
    # a groups value that does not divide the channels is garbage
    assert op_cost("aten::conv2d", dims, types, ["", "", "", "[1]", "[1]", "[1]", "3"]) is None


def test_transposed_conv():
    # x [1, 4, 5, 5], weight [C_in=4, C_out=2, 3, 3], stride 2, padding 1, output_padding 1:
    # output side (5-1)*2 - 2*1 + 1*(3-1) + 1 + 1 = 10; MACs = numel(x) * C_out*R*S
    dims = [[1, 4, 5, 5], [4, 2, 3, 3], [], [], [], [], [], [], []]
    types = [F32, F32, "", "ScalarList", "ScalarList", "ScalarList", "Scalar", "ScalarList", "Scalar"]
    c = cost("aten::convolution", dims, types, ["", "", "", "[2, 2]", "[1, 1]", "[1, 1]", "True", "[1, 1]", "1"])
    assert c.flops == 2 * (1 * 4 * 5 * 5) * (2 * 3 * 3)
    assert c.bytes == 4 * (100 + 4 * 2 * 9 + 1 * 2 * 10 * 10)


# fixture h100_resnet18_baseline: convolution_backward of a 3x3, 512-channel layer
BWD_DIMS = [[32, 512, 7, 7], [32, 512, 7, 7], [512, 512, 3, 3], [], [], [], [], [], [], [], []]
BWD_TYPES = [F32, F32, F32, "ScalarList", "ScalarList", "ScalarList", "ScalarList", "Scalar", "ScalarList"]
BWD_TYPES += ["Scalar", "ScalarList"]


def _bwd_concrete(mask: str) -> list[str]:
    return ["", "", "", "[0]", "[1, 1]", "[1, 1]", "[1, 1]", "False", "[0, 0]", "1", mask]


def test_convolution_backward_respects_output_mask():
    fwd = 2 * (32 * 512 * 7 * 7) * (512 * 3 * 3)  # the forward conv's FLOPs
    go = x = 32 * 512 * 7 * 7
    w = 512 * 512 * 3 * 3
    both = cost("aten::convolution_backward", BWD_DIMS, BWD_TYPES, _bwd_concrete("[True, True, False]"))
    assert both.flops == 2 * fwd  # grad input + grad weight
    assert both.bytes == 4 * (go + (w + x) + (x + w))  # read grad_out; gi: read w, write gi; gw: read x, write gw
    weight_only = cost("aten::convolution_backward", BWD_DIMS, BWD_TYPES, _bwd_concrete("[False, True, False]"))
    assert weight_only.flops == fwd
    assert weight_only.bytes == 4 * (go + x + w)
    all3 = cost("aten::convolution_backward", BWD_DIMS, BWD_TYPES, _bwd_concrete("[True, True, True]"))
    assert all3.flops == 2 * fwd + go  # grad bias: one add per grad_output element
    assert all3.bytes == both.bytes + 4 * 512
    assert (all3.m, all3.n, all3.k) == (32 * 7 * 7, 512, 512 * 9)


def test_legacy_cudnn_convolution_backward_without_concrete_inputs():
    # fixture v100_resnet50_workers0: cudnn_convolution_backward(self, grad_output, weight, ...)
    dims = [[32, 512, 7, 7], [32, 2048, 7, 7], [2048, 512, 1, 1], [], [], [], [], [], [], [], []]
    types = [F32, F32, F32, "GenericList", "GenericList", "GenericList", "Int", "Bool", "Bool", "Bool", "GenericList"]
    c = cost("aten::cudnn_convolution_backward", dims, types)
    fwd = 2 * (32 * 2048 * 7 * 7) * 512
    assert c.flops == 2 * fwd
    # its halves need the size their schema takes as a list: absent here, so unknown
    half = [[], [32, 2048, 7, 7], [2048, 512, 1, 1], [], [], [], [], [], [], []]
    half_types = ["GenericList", F32, F32, "GenericList", "GenericList", "GenericList", "Int", "Bool", "Bool", "Bool"]
    assert op_cost("aten::cudnn_convolution_backward_input", half, half_types) is None
    known = ["[32, 512, 7, 7]", "", "", "[0, 0]", "[1, 1]", "[1, 1]", "1", "False", "False", "True"]
    ci = cost("aten::cudnn_convolution_backward_input", half, half_types, known)
    assert ci.flops == fwd
    assert ci.bytes == 4 * (32 * 2048 * 49 + 2048 * 512 + 32 * 512 * 49)


def test_resnet18_conv_flops_match_the_published_count():
    """torchvision lists ResNet-18 at 1.81 GFLOPS per 224x224 image, counting multiply-adds
    (fvcore's convention; https://pytorch.org/vision/stable/models/generated/torchvision.models.resnet18.html),
    i.e. about 3.63e9 FLOPs with a multiply-add as two; the fully connected layer is 0.5 MMAC."""
    events = json.load(gzip.open(FIXTURES / "h100_resnet18_baseline.pt.trace.json.gz"))["traceEvents"]
    convs = [e["args"] for e in events if e.get("name") == "aten::cudnn_convolution"]
    steps = sum(1 for a in convs if a["Input Dims"][1] == [64, 3, 7, 7])
    total = 0.0
    for a in convs:
        c = cost("aten::cudnn_convolution", a["Input Dims"], a["Input type"], a["Concrete Inputs"])
        assert c.flops == 2 * c.m * c.n * c.k * c.batch  # the implicit GEMM accounts for every FLOP
        total += c.flops
    per_image = total / steps / 32  # batch 32
    assert per_image == pytest.approx(2 * 1.81e9, rel=0.01)


# --------------------------------------------------------------------------- attention

QKV_TYPES = [BF16, BF16, BF16]


def sdpa(q, k, v, causal="False"):
    dims = [q, k, v, [], [], [], [], []]
    types = [*QKV_TYPES, "", "Scalar", "Scalar", "", "Scalar"]
    return op_cost("aten::scaled_dot_product_attention", dims, types, ["", "", "", "", "0.", causal, "", "False"])


def test_sdpa_from_the_vit_fixture():
    # fixture h100_vit_nsfw_inference: q, k, v [4, 12, 197, 64] bf16, not causal
    c = sdpa([4, 12, 197, 64], [4, 12, 197, 64], [4, 12, 197, 64])
    bh = 4 * 12
    assert c.flops == 2 * bh * 197 * 197 * 64 + 2 * bh * 197 * 197 * 64  # Q K^T, then P V
    assert c.bytes == 2 * 4 * (bh * 197 * 64)  # q, k, v read, out written, 2 bytes each
    assert (c.kind, c.dtype, c.m) == ("attention", "bf16", None)


def test_flash_attention_forward_reads_batch_seq_heads_dim():
    # fixture h100_vit_nsfw_inference: _flash_attention_forward q [4, 197, 12, 64]
    dims = [[4, 197, 12, 64]] * 3 + [[]] * 12
    types = [*QKV_TYPES, "", "", "Scalar", "Scalar", "Scalar", "Scalar", "Scalar", "Scalar", "", "", "", ""]
    concrete = ["", "", "", "", "", "197", "197", "0.", "False", "False", "0.125", "", "", "", ""]
    c = cost("aten::_flash_attention_forward", dims, types, concrete)
    assert c.flops == 4 * (4 * 12) * 197 * 197 * 64
    causal = cost("aten::_flash_attention_forward", dims, types, concrete[:8] + ["True"] + concrete[9:])
    assert causal.flops == c.flops / 2  # equal lengths: exactly half, FlashAttention's convention
    varlen = [[788, 12, 64]] * 3 + [[5], [5]] + [[]] * 10
    assert op_cost("aten::_flash_attention_forward", varlen, [*QKV_TYPES, "long int", "long int", *types[5:]]) is None


def test_causal_attention_with_unequal_lengths_counts_the_kept_pairs():
    q, kv = [1, 2, 4, 32], [1, 2, 6, 32]
    # top-left (SDPA's is_causal): query i sees keys 0..i: 1+2+3+4 = 10 of the 4*6 = 24 pairs
    c = sdpa(q, kv, kv, causal="True")
    assert c.flops == 2 * 2 * 10 * (32 + 32)
    # bottom-right (FlashAttention >= 2.1): query i sees keys 0..i+2: 3+4+5+6 = 18 pairs
    dims = [[1, 4, 2, 32], [1, 6, 2, 32], [1, 6, 2, 32]] + [[]] * 12
    types = [*QKV_TYPES] + ["", "", "Scalar", "Scalar", "Scalar", "Scalar", "Scalar", "Scalar", "", "", "", ""]
    concrete = ["", "", "", "", "", "4", "6", "0.", "True", "False", "0.1", "", "", "", ""]
    f = cost("aten::_flash_attention_forward", dims, types, concrete)
    assert f.flops == 2 * 2 * 18 * (32 + 32)
    # more queries than keys, top-left: queries 0..3 see 1..4 keys, queries 4, 5 see all 4: 10 + 8
    c2 = sdpa([1, 2, 6, 32], [1, 2, 4, 32], [1, 2, 4, 32], causal="True")
    assert c2.flops == 2 * 2 * 18 * (32 + 32)


def test_grouped_query_attention_counts_query_heads():
    c = sdpa([1, 8, 16, 64], [1, 2, 16, 64], [1, 2, 16, 64])
    assert c.flops == 2 * 8 * 16 * 16 * (64 + 64)
    assert c.bytes == 2 * (8 * 16 * 64 + 2 * 2 * 16 * 64 + 8 * 16 * 64)


def test_attention_backward_is_two_and_a_half_forwards():
    q = [2, 4, 128, 64]
    dims = [q, q, q, q, q, [2, 4, 128], [], [], [], [], [], [], [], [], []]
    types = [BF16] * 5 + [F32] + ["", "", "Scalar", "Scalar", "Scalar", "Scalar", "", "", "Scalar"]
    concrete = [""] * 8 + ["128", "128", "0.", "True", "", "", "0.125"]
    c = cost("aten::_scaled_dot_product_flash_attention_backward", dims, types, concrete)
    fwd = 2 * 8 * 128 * 128 * (64 + 64) / 2  # causal, equal lengths: half
    assert c.flops == 2.5 * fwd  # FlashAttention-2's 5 GEMMs backward vs 2 forward
    t = 2 * 2 * 4 * 128 * 64  # bytes of one [2, 4, 128, 64] bf16 tensor
    lse = 4 * 2 * 4 * 128  # the recorded logsumexp input, fp32
    assert c.bytes == (t + 3 * t + t + lse) + 3 * t  # read grad_out, q, k, v, out, lse; write dq, dk, dv


# --------------------------------------------------------------------------- norms, softmax


def test_batch_norm_under_autocast_from_the_fixture():
    # fixture h100_resnet18_amp: batch_norm x [32, 64, 112, 112] bf16, weight/bias/running stats float
    dims = [[32, 64, 112, 112], [64], [64], [64], [64], [], [], [], []]
    types = [BF16, F32, F32, F32, F32, "Scalar", "Scalar", "Scalar", "Scalar"]
    c = cost("aten::batch_norm", dims, types, ["", "", "", "", "", "True", "0.1", "1e-05", "True"])
    n = 32 * 64 * 112 * 112
    assert c.flops == 8 * n  # mean 1, variance 3, normalise 2, affine 2 per element
    # x read, y written (bf16); 4 fp32 vectors read; running stats updated + saved mean/invstd written
    assert c.bytes == 2 * n + 2 * n + 4 * 4 * 64 + 4 * 4 * 64
    assert (c.kind, c.dtype) == ("norm", "bf16")
    ev = cost("aten::batch_norm", dims, types, ["", "", "", "", "", "False", "0.1", "1e-05", "True"])
    assert ev.flops == 2 * n  # inference: one scale and shift per element
    assert ev.bytes == 2 * n + 2 * n + 4 * 4 * 64


def test_layer_norm_from_the_timesformer_fixture():
    dims = [[3136, 8, 768], [], [768], [768], [], []]
    types = [BF16, "ScalarList", BF16, BF16, "Scalar", "Scalar"]
    c = cost("aten::layer_norm", dims, types, ["", "[768]", "", "", "1e-06", "True"])
    n, rows = 3136 * 8 * 768, 3136 * 8
    assert c.flops == 8 * n
    assert c.bytes == 2 * n + 2 * 768 * 2 + 2 * n + 2 * rows * 4  # x, weight, bias; y; fp32 mean, rstd


def test_layer_norm_backward_with_mask():
    dims = [[2, 4, 8], [2, 4, 8], [], [2, 4, 1], [2, 4, 1], [8], [8], []]
    types = [F32, F32, "ScalarList", F32, F32, F32, F32, "ScalarList"]
    concrete = ["", "", "[8]", "", "", "", "", "[True, True, True]"]
    c = cost("aten::native_layer_norm_backward", dims, types, concrete)
    assert c.flops == (9 + 2 + 1) * 64  # grad input, grad weight, grad bias per element
    assert c.bytes == 4 * (64 + 64 + 8 + 8 + 8 + 8) + 4 * 64 + 2 * 4 * 8  # reads; gi; gw, gb
    only_x = cost("aten::native_layer_norm_backward", dims, types, concrete[:7] + ["[True, False, False]"])
    assert only_x.flops == 9 * 64
    assert only_x.bytes == 4 * (64 + 64 + 8 + 8 + 8 + 8) + 4 * 64


def test_rms_norm():
    c = cost("aten::rms_norm", [[4, 16], [], [16], []], [BF16, "ScalarList", BF16, "Scalar"], ["", "[16]", "", ""])
    assert c.flops == 4 * 64  # square, add, scale, gain
    assert c.bytes == 2 * 64 + 2 * 16 + 2 * 64


def test_softmax_and_log_softmax():
    # fixture h100_timesformer_inference: softmax [3136, 12, 8, 8] bf16, dim -1
    n = 3136 * 12 * 8 * 8
    c = cost("aten::softmax", [[3136, 12, 8, 8], [], []], [BF16, "Scalar", ""], ["", "-1", ""])
    assert c.flops == 5 * n  # max, subtract, exp, sum, divide
    assert c.bytes == 2 * n + 2 * n
    half = cost("aten::_softmax", [[16, 32], [], []], [F16, "Scalar", "Scalar"], ["", "-1", "True"])
    assert half.bytes == 2 * 512 + 4 * 512  # half_to_float: fp32 output
    # fixture h100_resnet18_baseline: _log_softmax_backward_data [[32, 10], [32, 10]], input_dtype 6 (float)
    b = cost("aten::_log_softmax_backward_data", [[32, 10], [32, 10], [], []], [F32, F32, "Scalar", "Scalar"])
    assert b.flops == 4 * 320
    assert b.bytes == 4 * 320 * 3  # grad_output, output read; grad_input written


# --------------------------------------------------------------------------- elementwise, reductions


def test_broadcast_add_from_the_timesformer_fixture():
    c = cost("aten::add", [[128, 197, 768], [1, 197, 768], []], [BF16, BF16, "Scalar"], ["", "", "1"])
    out = 128 * 197 * 768
    assert c.flops == out
    assert c.bytes == 2 * (out + 197 * 768 + out)  # each input once (the small one once), output once
    alpha = cost("aten::add", [[8], [8], []], [F32, F32, "Scalar"], ["", "", "2"])
    assert alpha.flops == 2 * 8  # alpha != 1: a multiply-add


def test_expanded_input_counts_stored_elements():
    # fixture h100_resnet18_baseline: div [[32, 512, 7, 7], []], strides [[512, 1, 0, 0], []]
    c = cost("aten::div", [[32, 512, 7, 7], []], [F32, "Scalar"], ["", "49"], [[512, 1, 0, 0], []])
    assert c.bytes == 4 * (32 * 512) + 4 * (32 * 512 * 7 * 7)  # read the 16,384 stored, write all 802,816
    assert c.flops == 32 * 512 * 7 * 7


def test_copy_fill_cast_and_inplace():
    cp = cost("aten::copy_", [[2, 3], [2, 3], []], [BF16, F32, "Scalar"], ["", "", "False"])
    assert (cp.flops, cp.bytes) == (0, 4 * 6 + 2 * 6)  # read fp32 src, write bf16 self
    fill = cost("aten::fill_", [[64, 3, 7, 7], []], [F32, "Scalar"], ["", "0"])
    assert fill.bytes == 4 * 64 * 3 * 7 * 7  # written, never read
    cast = cost("aten::_to_copy", [[10, 10], [], [], [], [], [], []], [F32, "Scalar", "", "", "", "Scalar", ""])
    assert cast.bytes == 4 * 100 + 4 * 100  # no dtype recorded: same dtype
    cast = cost(
        "aten::_to_copy", [[10, 10], [], [], [], [], [], []], [F32, "Scalar", "", "", "", "Scalar", ""], ["", "15"]
    )
    assert cast.bytes == 4 * 100 + 2 * 100  # ScalarType 15 = bfloat16
    relu = cost("aten::relu_", [[32, 64]], [F16])
    assert (relu.flops, relu.bytes) == (32 * 64, 2 * 2 * 32 * 64)  # in place: read and write self
    assert op_cost("aten::add_", [[3], [2, 3], []], [F32, F32, "Scalar"]) is None  # self cannot hold the result


def test_type_promotion():
    mixed = cost("aten::add", [[4], [4], []], [F16, BF16, "Scalar"])
    assert mixed.bytes == 2 * 4 + 2 * 4 + 4 * 4  # fp16 + bf16 -> fp32
    # a 0-dim double does not widen a bf16 tensor (same category); fixture h100_timesformer_inference
    mul = cost("aten::mul", [[3136, 12, 8, 8], []], [BF16, "double"])
    n = 3136 * 12 * 8 * 8
    assert mul.bytes == 2 * n + 8 + 2 * n
    assert cost("aten::eq", [[4], [4]], [F32, F32]).bytes == 4 * 4 * 2 + 1 * 4  # bool output


def test_reductions():
    # fixture h100_resnet18_baseline: mean [32, 512, 7, 7], dim [-1, -2], keepdim True
    m = cost(
        "aten::mean", [[32, 512, 7, 7], [], [], []], [F32, "ScalarList", "Scalar", ""], ["", "[-1, -2]", "True", ""]
    )
    assert m.flops == 32 * 512 * 7 * 7
    assert m.bytes == 4 * (32 * 512 * 49 + 32 * 512)
    # fixture mi300x_sglang_qwen3_prefill_decode: argmax [15, 151936] dim -1 -> 15 int64 indices
    a = cost("aten::argmax", [[15, 151936], [], []], [F32, "Scalar", "Scalar"], ["", "-1", "False"])
    assert a.bytes == 4 * 15 * 151936 + 8 * 15
    whole = cost("aten::sum", [[6, 7]], [F32])
    assert whole.bytes == 4 * 42 + 4
    mx = cost("aten::max", [[4, 5], [], []], [F32, "Scalar", "Scalar"], ["", "1", "False"])
    assert mx.bytes == 4 * 20 + 4 * 4 + 8 * 4  # max.dim: values and int64 indices
    assert op_cost("aten::max", [[4], [4]], [F32, F32]) is None  # max(self, other) is elementwise
    # fixture v100_resnet50_workers0: no Concrete Inputs, so the reduced dims are unknown
    assert op_cost("aten::mean", [[32, 2048, 7, 7], [], [], []], [F32, "GenericList", "Bool", ""]) is None


# --------------------------------------------------------------------------- untrusted input

HOSTILE = [
    ("aten::mm", None, None),
    ("aten::mm", "[[1, 2], [2, 3]]", [F32, F32]),
    ("aten::mm", [[1, 2], [2, 3]], "float"),
    ("aten::mm", [[-1, 2], [2, 3]], [F32, F32]),
    ("aten::mm", [[2**60, 2], [2, 3]], [F32, F32]),
    ("aten::mm", [[2**30, 2**30], [2**30, 2]], [F32, F32]),  # numel 2**60 over the cap
    ("aten::mm", [[1, 2], [2, 3]], [F32]),  # ragged: two dims, one type
    ("aten::mm", [[1, 2], [2, 3], [4]], [F32, F32]),
    ("aten::mm", [[1, 2.0], [2, 3]], [F32, F32]),
    ("aten::mm", [[1, True], [2, 3]], [F32, F32]),
    ("aten::mm", [[1, [2]], [2, 3]], [F32, F32]),
    ("aten::mm", [[1, 2], [2, 3]], [F32, 7]),
    ("aten::mm", [[1, 2], None], [F32, F32]),
    ("aten::mm", [[1, 2], [2, 3]], ["not a dtype", F32]),
    ("aten::mm", [[1, 2, 3], [2, 3]], [F32, F32]),
    ("aten::conv2d", [[1, 3, 8, 8], [4, 3, 9, 9], [], [], [], [], []], [F32, F32, "", "a", "b", "c", "d"]),
    ("aten::scaled_dot_product_attention", [[1, 2, 3], [1, 2], [1]], [BF16, BF16, BF16]),
    ("aten::softmax", [[]], ["TensorList"]),
    ("aten::_foreach_add_", [[], [], []], ["TensorList", "TensorList", "Scalar"]),
    ("vllm::unified_attention", [[1, 2]], [BF16]),
    ("aten::not_an_op", [[1, 2]], [F32]),
    (None, [[1, 2], [2, 3]], [F32, F32]),
    (42, [[1, 2], [2, 3]], [F32, F32]),
]


@pytest.mark.parametrize(("name", "dims", "types"), HOSTILE)
def test_hostile_input_is_none(name, dims, types):
    assert op_cost(name, dims, types) is None


def test_hostile_concrete_inputs_are_none_or_ignored():
    dims, types, _ = FIRST["aten::conv2d"]
    for bad in (["", "", "", "[2, x]", "[3, 3]", "[1, 1]", "1"], ["", "", "", "[0, 0]", "[3, 3]", "[1, 1]", "1"]):
        assert op_cost("aten::conv2d", dims, types, bad) is None  # stride 0 or unreadable
    assert op_cost("aten::conv2d", dims, types, ["", "", "", "[2, 2]", "[3, 3]", "[1, 1]", "-4"]) is None
    assert op_cost("aten::conv2d", dims, types, "not a list") is None  # geometry unknown
    # garbage strides are ignored (the full size is counted), never an error
    c = op_cost("aten::relu", [[4, 4]], [F32], None, [["x", None]])
    assert c is not None and c.bytes == 4 * 16 * 2


def test_random_garbage_never_raises():
    rng = random.Random(20261127)
    atoms = [0, 1, -1, 7, 2**62, 1.5, True, None, "", "x", "[1, 2]", [], [1], [[1]], {}, F32, BF16, "Scalar"]

    def junk(depth=0):
        if depth > 2 or rng.random() < 0.4:
            return rng.choice(atoms)
        return [junk(depth + 1) for _ in range(rng.randint(0, 5))]

    names = ["aten::mm", "aten::addmm", "aten::matmul", "aten::conv2d", "aten::convolution_backward", "aten::linear"]
    names += ["aten::scaled_dot_product_attention", "aten::_flash_attention_backward", "aten::layer_norm"]
    names += ["aten::native_batch_norm_backward", "aten::softmax", "aten::add_", "aten::copy_", "aten::mean"]
    for _ in range(3000):
        c = op_cost(rng.choice(names), junk(), junk(), junk(), junk())
        assert c is None or (math.isfinite(c.flops) and math.isfinite(c.bytes))


def test_every_fixture_op_is_finite_or_none():
    """Every op of every fixture: a cost with finite, non-negative numbers, or None."""
    modelled = 0
    for path in sorted(FIXTURES.glob("*.json.gz")):
        for e in json.load(gzip.open(path)).get("traceEvents", []):
            a = e.get("args") or {}
            if "Input Dims" not in a:
                continue
            c = op_cost(
                e.get("name"), a["Input Dims"], a.get("Input type"), a.get("Concrete Inputs"), a.get("Input Strides")
            )
            if c is not None:
                modelled += 1
                assert math.isfinite(c.flops) and c.flops >= 0 and math.isfinite(c.bytes) and c.bytes >= 0
    assert modelled > 30000  # the fixtures hold about 34,000 modelled op events


def test_agrees_with_torch_flop_counter():
    """An independent count: ``torch.utils.flop_counter`` (the same multiply-add = 2 convention)."""
    torch = pytest.importorskip("torch")
    from torch.utils.flop_counter import FlopCounterMode

    def torch_flops(fn):
        with FlopCounterMode(display=False) as mode:
            fn()
        return mode.get_total_flops()

    x = torch.randn(4, 3, 32, 32, requires_grad=True)
    w = torch.randn(8, 3, 5, 5, requires_grad=True)
    conv = cost(
        "aten::conv2d",
        [[4, 3, 32, 32], [8, 3, 5, 5], [], [], [], [], []],
        [F32, F32, "", "ScalarList", "ScalarList", "ScalarList", "Scalar"],
        ["", "", "", "[2, 2]", "[1, 1]", "[1, 1]", "1"],
    )
    assert conv.flops == torch_flops(lambda: torch.nn.functional.conv2d(x, w, stride=2, padding=1))
    y = torch.nn.functional.conv2d(x, w, stride=2, padding=1)
    assert 2 * conv.flops == torch_flops(lambda: y.sum().backward())  # grad input + grad weight
    q, k, v = torch.randn(2, 4, 16, 32), torch.randn(2, 4, 24, 32), torch.randn(2, 4, 24, 48)
    att = sdpa([2, 4, 16, 32], [2, 4, 24, 32], [2, 4, 24, 48])
    assert att.flops == torch_flops(lambda: torch.nn.functional.scaled_dot_product_attention(q, k, v))
    a, b = torch.randn(3, 64, 32), torch.randn(3, 32, 16)
    assert cost("aten::bmm", [[3, 64, 32], [3, 32, 16]], [F32, F32]).flops == torch_flops(lambda: torch.bmm(a, b))
