"""Kernel classes and the advice built on them: MIOpen xdlops convolutions (gtcx, wave tiles) are
matrix-core work; layout transposes are neither GEMM nor Tensor Core work; AMP is not advised
for GEMMs whose inputs are already 16-bit; "compiled" means compiled regions launch most of the
kernel time; the H2D share counts only copy time no compute kernel overlaps.

Small traces built with tests/tracebuilder.py (times in µs, answers worked out by hand), and
the real traces in fixtures/ where they show the case."""

from __future__ import annotations

from functools import cache
from pathlib import Path

import pytest
from tracebuilder import A100, V100, TraceBuilder

import tracedoc
from tracedoc.engine.rules import Finding, builtin_rules
from tracedoc.signals import SignalContext
from tracedoc.signals.attribution import (
    is_layout_transform_kernel,
    is_low_precision_gemm_kernel,
    is_tensor_core_kernel,
    kernel_ops,
)

FIXTURES = Path(__file__).resolve().parent.parent / "fixtures"
MI300X = {
    "id": 0,
    "name": "AMD Instinct MI300X",
    "totalGlobalMem": 206141652992,
    "computeMajor": 9,
    "computeMinor": 4,
    "numSms": 304,
}


def ctx_of(b: TraceBuilder, tmp_path, name: str = "t.json") -> SignalContext:
    return SignalContext(tracedoc.load(b.write(tmp_path / name)))


@cache
def fixture(name: str) -> SignalContext:
    return SignalContext(tracedoc.load(FIXTURES / name))


def rule(name: str):
    return next(r for r in builtin_rules() if r.name == name)


# ---- 1. MIOpen xdlops convolutions are matrix-core kernels ---------------------------------

GTCX_BF16 = (
    "igemm_fwd_gtcx3_nhwc_bf16_bx0_ex1_bt128x128x32_wt32x32x8_ws1x1_wr2x2_ta1x8x2x1_1x4x1x64_tb1x8x2x1_1x4x1x64_gkgs"
)
GTCX_FP16_WRW = (
    "igemm_wrw_gtcx_nhwc_fp16_bx0_ex0_bt64x32x32_wt16x16x16_ws1x1_wr2x1_ta1x4x1x2_1x8x1x32_tb1x4x1x1_1x8x1x32"
)
GTCX_FP32_BWD = (
    "igemm_bwd_gtcx_nchw_fp32_bx16_ex0_bt128x128x16_wt32x32x1_ws1x1_wr2x2_ta2x1x1x4_1x8x1x32_tb2x1x1x4_1x8x1x32"
)


@pytest.mark.parametrize("name", [GTCX_BF16, GTCX_FP16_WRW, GTCX_FP32_BWD])
def test_miopen_xdlops_convolutions_are_matrix_core_kernels(name):
    assert is_tensor_core_kernel(name)
    # the wave-tile token alone is enough (a name that lost its igemm_*_gtcx prefix)
    assert is_tensor_core_kernel(name[name.index("_wt") + 1 :])


def _miopen_conv_trace() -> TraceBuilder:
    """One 1000 µs step on an MI300X: a MIOpen NHWC convolution (transpose in, 600 µs xdlops
    igemm, transpose out) and a 200 µs elementwise add."""
    b = TraceBuilder(devices=[MI300X])
    b.step(1, 0, 1000)
    b.op("aten::miopen_convolution", 0, 60)
    b.kernel("batched_transpose_32x32_half", 5, 10, 50)
    b.kernel(GTCX_BF16, 20, 100, 600)
    b.kernel("batched_transpose_16x16_half", 40, 700, 50)
    b.op("aten::add", 100, 20)
    b.kernel("void at::native::vectorized_elementwise_kernel<4, at::native::CUDAFunctor_add<float>>", 105, 750, 200)
    return b


def test_miopen_convolution_counts_as_tensor_core_time_without_its_transposes(tmp_path):
    c = ctx_of(_miopen_conv_trace(), tmp_path)
    assert c.get("has_tensor_cores") is True
    # kernel time 50 + 600 + 50 + 200 = 900 µs: the igemm is 600 of it
    assert c.get("tensor_core_kernel_share") == pytest.approx(600 / 900)
    # the two transposes run inside aten::miopen_convolution, yet are not GEMM work
    assert c.get("tc_eligible_kernel_share") == pytest.approx(600 / 900)
    assert c.get("tc_eligible_non_tc_share") == 0.0
    assert c.get("top_non_tc_eligible_kernels") == []


def test_mi300x_fixtures_have_no_miopen_convolutions():
    # recorded here so a future fixture with gtcx kernels gets a real-trace assertion: the three
    # MI300X traces run hipBLASLt GEMMs, Triton/CK attention and no convolution
    for name in (
        "mi300x_bert_small_inference.pt.trace.json.gz",
        "mi300x_sglang_qwen3_prefill_decode.pt.trace.json.gz",
        "mi300x_torch_compile_triton.pt.trace.json.gz",
    ):
        names = fixture(name).trace.kernels["name"]
        assert not names.str.contains(r"gtcx|_wt\d+x\d+x\d+", regex=True).any()


# ---- 2. layout transposes are neither GEMM nor Tensor Core work ----------------------------

LAYOUT = [
    "batched_transpose_32x32_dword",
    "batched_transpose_16x16_half",
    "transpose_NCHW2NHWC",
    "transpose_NHWC2NCHW",
    "transpose_NCHW2CNHW_V1_1D_WG_float",
    "general_4d_reorder_1x256_dword_r0132",
    "void nchwToNhwcKernel<float, float, float, true, false, (cudnnKernelDataType_t)0>(int, int, int, int, "
    "float const*, float*, float, float)",
    "void cudnn::engines_precompiled::nhwcToNchwKernel<__nv_bfloat16, __nv_bfloat16, float, true, false, "
    "(cudnnKernelDataType_t)0>(cudnn::engines_precompiled::nhwc2nchw_params_t<float>, __nv_bfloat16 const*)",
]


@pytest.mark.parametrize("name", LAYOUT)
def test_layout_transposes_are_recognised(name):
    assert is_layout_transform_kernel(name)
    assert not is_tensor_core_kernel(name)


@pytest.mark.parametrize(
    "name",
    [
        # cuDNN conv kernels name their layouts too: they stay GEMM/conv (and Tensor Core) work
        "volta_fp16_s884cudnn_fp16_256x128_ldg8_relu_f2f_exp_small_nhwc2nchw_tn_v1",
        "sm80_xmma_fprop_implicit_gemm_indexed_tf32f32_tf32f32_f32_nhwckrsc_nchw_tilesize128x128x16_stage4",
        GTCX_BF16,
    ],
)
def test_conv_kernels_naming_layouts_are_not_transposes(name):
    assert not is_layout_transform_kernel(name)
    assert is_tensor_core_kernel(name)


def test_transposes_under_a_conv_op_are_not_eligible(tmp_path):
    b = TraceBuilder([V100])
    b.step(1, 0, 1000)
    b.op("aten::cudnn_convolution", 0, 60)
    b.kernel("void nchwToNhwcKernel<float, float, float, true, false, (cudnnKernelDataType_t)0>", 5, 10, 300)
    b.kernel("volta_scudnn_128x64_relu_interior_nn_v1", 20, 400, 400)
    b.kernel("void nhwcToNchwKernel<float, float, float, true, false, (cudnnKernelDataType_t)0>", 40, 850, 100)
    c = ctx_of(b, tmp_path)
    # 800 µs of kernels; only the 400 µs scudnn kernel is convolution work
    assert c.get("tc_eligible_kernel_share") == pytest.approx(0.5)
    assert c.get("tc_eligible_non_tc_ms") == pytest.approx(0.4)
    assert [r["kernel"] for r in c.get("top_non_tc_eligible_kernels")] == ["volta_scudnn_128x64_relu_interior_nn_v1"]


def test_real_cudnn_layout_kernels_are_not_eligible():
    ko = kernel_ops(fixture("v100_resnet50_workers0.pt.trace.json.gz"))
    layout = ko[ko["name"].str.contains("nchwToNhwcKernel|nhwcToNchwKernel", regex=True)]
    assert len(layout) == 18  # 12 + 6 in the trace, launched by cudnn_convolution
    assert layout["op_eligible"].all()  # a convolution op launched them...
    assert layout["layout"].all() and not layout["eligible"].any() and not layout["tensor_core"].any()
    # ... and on the H100 ViT they were most of the "eligible, not on Tensor Cores" time
    h100 = fixture("h100_vit_nsfw_inference.pt.trace.json.gz")
    assert h100.get("tc_eligible_non_tc_share") < 0.005
    assert not any(is_layout_transform_kernel(r["kernel"]) for r in h100.get("top_non_tc_eligible_kernels"))


# ---- 3. AMP is not advised for GEMMs that are already 16-bit ---------------------------------

BF16_GEMV = (
    "std::enable_if<!(false), void>::type internal::gemvx::kernel<int, int, __nv_bfloat16, __nv_bfloat16, "
    "__nv_bfloat16, float, false, true, true, false, 7, false, cublasGemvParamsEx<int, "
    "cublasGemvTensorStridedBatched<__nv_bfloat16 const>, cublasGemvTensorStridedBatched<__nv_bfloat16 const>, "
    "cublasGemvTensorStridedBatched<__nv_bfloat16>, float> >"
)
FP32_GEMV = BF16_GEMV.replace("__nv_bfloat16", "float")


@pytest.mark.parametrize(
    "name",
    [
        BF16_GEMV,  # fixtures/h100_timesformer_inference: a bf16 GEMV on the CUDA cores
        "ampere_bf16_s16816gemm_bf16_128x64_ldg8_f2f_stages_64x4_tn",
        "sm90_xmma_gemm_bf16bf16_bf16f32_f32_tn_n_tilesize128x128x64_warpgroupsize1x1x1_execute_segment_k_off_kernel__5x_cublas",
        "turing_fp16_s1688gemm_fp16_128x128_ldg8_f2f_tn",
        "volta_h884gemm_64x64_ldg8_nn",
        "ampere_h16816gemm_128x128_ldg8_stages_32x5_nn",
        "maxwell_hgemm_256x128_nn",
        "void cutlass::Kernel<cutlass_75_tensorop_f16_s1688gemm_f16_256x128_32x2_nn_align8>(Params)",
        "void gemmSN_TN_kernel<c10::Half, 128, 16, 2, 4, 8, 9, false>",
        "void ck::kernel_gemm_xdl_cshuffle_v3<ck::half_t, ck::half_t, float>",
        "Cijk_Alik_Bljk_BBS_BH_Bias_HA_S_SAV_UserArgs_MT128x256x32_MI16x16x1_SN_LDSB1",  # mi300x_sglang
        "Cijk_Alik_Bljk_B_BS_BH_Bias_HA_S_SAV_UserArgs_MT16x16x128_MI16x16x1_SN_LDSB0",  # mi300x_bert
        "Cijk_Ailk_Bljk_HB_MT64x64x16_MI32x32x8x1_SN",
        GTCX_BF16,
        GTCX_FP16_WRW,
        "_ZN7ck_tile6kentryILi2ENS_38FmhaBatchPrefillWithPagedKVCacheKernelINS_40BlockFmhaBatchPrefill"
        "PipelineQRKSVSAsyncINS_36BlockFmhaBatchPrefillPipelineProblemIDF16bDF16bDF16bffDF16bhfDF16b",
        "_ZN2at6native13gemv_kernelIN3c104HalfEEEvv",  # mangled c10::Half
        "void pytorch_flash::flash_fwd_kernel<Flash_fwd_kernel_traits<128, 128, 32, 4>>",
        "sm89_xmma_gemm_e4m3e4m3_e4m3f32_f32_tn_n_tilesize64x64x64_stage4",
    ],
)
def test_low_precision_gemm_names(name):
    assert is_low_precision_gemm_kernel(name)


@pytest.mark.parametrize(
    "name",
    [
        FP32_GEMV,
        "volta_sgemm_128x64_nn",
        "ampere_sgemm_32x32_sliced1x4_tn",
        "sm80_xmma_fprop_implicit_gemm_indexed_tf32f32_tf32f32_f32_nhwckrsc_nchw_tilesize128x128x16_stage4",
        "cutlass_80_tensorop_s1688tf32gemm_256x128_16x3_nn_align4",
        "Cijk_Alik_Bljk_SB_Bias_AS_SAV_UserArgs_MT64x16x32_MI16x16x1_SN_LDSB0",  # mi250_toy_train: fp32
        "Cijk_Ailk_Bljk_SB_MT64x64x8_SN_1LDSB0_APM1",
        GTCX_FP32_BWD,
        "void implicit_convolve_sgemm<float, float, 1024, 6, 7, 3, 3, 5, 1, false, true, true>(int)",
        "cudnn_infer_volta_scudnn_winograd_128x128_ldg1_ldg4_relu_tile148t_nt_v1",
        # tile sizes and words that contain the letters, not a type
        "ampere_scudnn_128x64_relu_interior_nn_v1_tilesize16x16x16",
        "void halfway_reduce_kernel<float>",
        "attn_fwd",  # ROCm Triton attention: the name states no type
    ],
)
def test_fp32_or_untyped_gemm_names(name):
    assert not is_low_precision_gemm_kernel(name)


def _gemv_trace(kernel: str) -> TraceBuilder:
    """Three 1000 µs steps on an A100: an 800 µs GEMV from aten::mm (no Tensor Cores) and a
    100 µs elementwise kernel, like LLM decoding at batch 1."""
    b = TraceBuilder([A100])
    for i in range(3):
        t0 = i * 1000
        b.step(i + 1, t0, 1000)
        b.op("aten::mm", t0, 30)
        b.kernel(kernel, t0 + 5, t0 + 40, 800)
        b.op("aten::add", t0 + 40, 20)
        b.kernel("void at::native::vectorized_elementwise_kernel<4, CUDAFunctor_add<float>>", t0 + 45, t0 + 850, 100)
    return b


def test_amp_is_not_advised_when_gemm_inputs_are_already_bf16(tmp_path):
    td301 = rule("no-tensor-core-use")
    bf16 = ctx_of(_gemv_trace(BF16_GEMV), tmp_path, "bf16.json")
    fp32 = ctx_of(_gemv_trace(FP32_GEMV), tmp_path, "fp32.json")
    for c in (bf16, fp32):  # the same kernel classes otherwise: no Tensor Cores, 8/9 of the time GEMM
        assert c.get("tensor_core_kernel_share") == 0.0
        assert c.get("tc_eligible_non_tc_share") == pytest.approx(800 / 900)
    assert bf16.get("tc_eligible_low_precision_share") == 1.0
    assert fp32.get("tc_eligible_low_precision_share") == 0.0
    assert td301.evaluate(bf16.get) is None
    fired = td301.evaluate(fp32.get)
    assert isinstance(fired, Finding) and "autocast" in fired.fix.summary


def test_tc_eligible_low_precision_share_counts_time_not_kernels(tmp_path):
    b = TraceBuilder([A100])
    b.step(1, 0, 1000)
    b.op("aten::mm", 0, 20)
    b.kernel("ampere_bf16_s16816gemm_bf16_128x64_ldg8_f2f_stages_64x4_tn", 5, 30, 100)
    b.op("aten::mm", 200, 20)
    b.kernel("ampere_sgemm_128x64_nn", 205, 230, 300)
    b.op("aten::relu", 600, 20)  # not GEMM work: in neither sum
    b.kernel("void at::native::vectorized_elementwise_kernel<4, c10::BFloat16>", 605, 630, 300)
    c = ctx_of(b, tmp_path)
    assert c.get("tc_eligible_low_precision_share") == pytest.approx(100 / 400)


def test_tc_eligible_low_precision_share_is_zero_without_gemm_work(tmp_path):
    b = TraceBuilder([A100])
    b.step(1, 0, 1000)
    b.op("aten::add", 0, 20)
    b.kernel("void at::native::vectorized_elementwise_kernel<4, c10::BFloat16>", 5, 30, 300)
    assert ctx_of(b, tmp_path).get("tc_eligible_low_precision_share") == 0.0


@pytest.mark.parametrize(
    "name,share",
    [
        ("h100_timesformer_inference.pt.trace.json.gz", 1.0),  # bf16 cutlass/cuBLAS GEMMs, bf16 GEMV
        ("h100_vit_nsfw_inference.pt.trace.json.gz", 1.0),
        ("mi300x_sglang_qwen3_prefill_decode.pt.trace.json.gz", 1.0),  # hipBLASLt BBS GEMMs, CK FMHA
        ("v100_resnet50_workers0.pt.trace.json.gz", 0.0),  # fp32 (sgemm, scudnn)
        ("v100_ddp_memory_events.pt.trace.json.gz", 0.0),
        ("mi250_toy_train.pt.trace.json.gz", 0.0),  # Tensile SB: fp32 on MFMA
    ],
)
def test_tc_eligible_low_precision_share_on_real_traces(name, share):
    assert fixture(name).get("tc_eligible_low_precision_share") == pytest.approx(share)


# ---- 4. "compiled" means compiled regions launch most of the kernel time ---------------------


def _launch_bound(region: str | None = None, region_kernels: int = 0, n: int = 100) -> TraceBuilder:
    """``n`` 3 µs kernels, each launched 5 µs into its own 15 µs op, 20 µs apart: launch-bound.
    With ``region``, a compiled-region span covers the first ``region_kernels`` launches."""
    b = TraceBuilder()
    b.step(1, 0, 20 * n)
    if region:
        b.op(region, 0, 20 * region_kernels - 2)
    for i in range(n):
        t0 = i * 20
        b.op("aten::add", t0, 15)
        b.kernel("vectorized_elementwise_kernel", t0 + 5, t0 + 12, 3)
    return b


def test_compiled_kernel_share_from_the_launching_region(tmp_path):
    c = ctx_of(_launch_bound("CompiledFunction", region_kernels=20), tmp_path)
    assert c.get("torch_compiled") is True
    assert c.get("compiled_kernel_share") == pytest.approx(0.2)
    assert ctx_of(_launch_bound(), tmp_path, "eager.json").get("compiled_kernel_share") == 0.0


def test_a_partly_compiled_model_gets_the_eager_advice(tmp_path):
    # one compiled block (a fifth of the kernels) among eager ops: any Dynamo marker used to
    # make this "launch-bound-compiled"; most launches are eager, so torch.compile still applies
    r = tracedoc.analyze(_launch_bound("Torch-Compiled Region: 0/0", region_kernels=20).write(tmp_path / "p.json"))
    names = [f.name for f in r.findings]
    assert "launch-bound-gpu-idle" in names and "launch-bound-compiled" not in names
    r = tracedoc.analyze(_launch_bound("Torch-Compiled Region: 0/0", region_kernels=80).write(tmp_path / "m.json"))
    names = [f.name for f in r.findings]
    assert "launch-bound-compiled" in names and "launch-bound-gpu-idle" not in names
    assert r.signals["compiled_kernel_share"] == pytest.approx(0.8)


def test_compiled_backward_on_the_autograd_thread(tmp_path):
    b = TraceBuilder()
    b.step(1, 0, 1000)
    b.op("CompiledFunctionBackward", 0, 500, tid=200)  # the autograd engine's thread
    b.tid = 200
    b.op("aten::mm", 10, 20, tid=200)
    b.kernel("volta_sgemm_128x64_nn", 15, 40, 300)  # launched inside the region: compiled
    b.tid = 100
    b.op("aten::add", 20, 20)
    b.kernel("vectorized_elementwise_kernel", 25, 400, 100)  # same time, main thread, no region
    c = ctx_of(b, tmp_path)
    assert c.get("compiled_kernel_share") == pytest.approx(300 / 400)


def test_inductor_triton_kernels_and_communication(tmp_path):
    b = TraceBuilder()
    b.step(1, 0, 1000)
    b.op("aten::add", 0, 20)
    b.kernel("triton_poi_fused_add_mul_0", 5, 30, 300)  # Inductor's code launched it
    b.op("aten::mm", 100, 20)
    b.kernel("volta_sgemm_128x64_nn", 105, 400, 100)
    # a long all-reduce: communication kernels are in neither sum
    b.kernel("ncclDevKernel_AllReduce_Sum_f32_RING_LL", 200, 500, 400, stream=20)
    c = ctx_of(b, tmp_path)
    assert c.get("compiled_kernel_share") == pytest.approx(300 / 400)


def _vllm_decode(compiled: bool) -> TraceBuilder:
    """A vLLM decode step at batch 1: ~100 tiny kernels (RMSNorm, GEMV, rotary, SiLU) each
    launched by its own op from vLLM's Python model runner; ``enforce_eager=True`` has no
    compiled region, vLLM's default (torch.compile) runs the model in one."""
    kernels = [
        ("_C::rms_norm", "void vllm::rms_norm_kernel<c10::BFloat16, 8>(c10::BFloat16*, c10::BFloat16 const*)"),
        ("aten::mm", BF16_GEMV),
        ("_C::rotary_embedding", "void vllm::rotary_embedding_kernel<c10::BFloat16, true>(long const*)"),
        ("_C::silu_and_mul", "void vllm::act_and_mul_kernel<c10::BFloat16, &vllm::silu_kernel<c10::BFloat16>>"),
    ]
    b = TraceBuilder([A100])
    b.step(1, 0, 2000)
    b.op("vllm/v1/worker/gpu_model_runner.py(1520): execute_model", 0, 2000, cat="python_function")
    if compiled:
        b.op("Torch-Compiled Region: 0/0", 0, 2000)
    for i in range(100):
        t0 = i * 20
        op, kernel = kernels[i % len(kernels)]
        b.op(op, t0, 15)
        b.kernel(kernel, t0 + 5, t0 + 12, 3)
    return b


def test_eager_vllm_gets_launch_bound_gpu_idle_with_cuda_graph_advice(tmp_path):
    r = tracedoc.analyze(_vllm_decode(compiled=False).write(tmp_path / "vllm_eager.json"))
    assert r.signals["compiled_kernel_share"] == 0.0
    names = [f.name for f in r.findings]
    assert "launch-bound-gpu-idle" in names and "launch-bound-compiled" not in names
    fix = next(f.fix for f in r.findings if f.name == "launch-bound-gpu-idle")
    assert "enforce_eager" in fix.summary and "CUDA graphs" in fix.summary
    assert "torch.compile" in fix.summary  # the existing advice stays
    # vLLM's compiled default still launch-bound: CUDA graphs advice for compiled models
    r = tracedoc.analyze(_vllm_decode(compiled=True).write(tmp_path / "vllm_compiled.json"))
    names = [f.name for f in r.findings]
    assert "launch-bound-compiled" in names and "launch-bound-gpu-idle" not in names


def test_v100_ddp_memory_events_is_mostly_compiled():
    """The trace's forward runs in AOTAutograd's CompiledFunction (about 61 ms per step) and its
    backward in CompiledFunctionBackward on the autograd thread (about 229 ms); what launches
    outside them is the SGD step's 808 aten::add_ kernels and zero_grad's 405 fill_ kernels per
    step: 12.4 of 124.1 ms of compute-kernel time (NCCL kernels left out)."""
    c = fixture("v100_ddp_memory_events.pt.trace.json.gz")
    assert c.get("compiled_kernel_share") == pytest.approx(111.7514 / 124.1032, abs=1e-4)
    assert c.get("compiled_kernel_share") > 0.5
    names = {f.name for f in tracedoc.analyze(FIXTURES / "v100_ddp_memory_events.pt.trace.json.gz").findings}
    assert "launch-bound-compiled" in names and "launch-bound-gpu-idle" not in names


def test_compiled_share_on_other_real_traces():
    assert fixture("mi300x_torch_compile_triton.pt.trace.json.gz").get("compiled_kernel_share") == 1.0
    assert fixture("v100_resnet50_workers4.pt.trace.json.gz").get("compiled_kernel_share") == 0.0


# ---- 5. H2D copy share: only copy time no compute kernel overlaps ------------------------------


def _copy_trace(overlap: tuple[float, float] | None, kernel: str = "volta_sgemm_128x64_nn", device: int = 0):
    """Steps of 1000 µs on two V100s; per step a 200 µs HtoD copy at 100..300 on device 0 and a
    400 µs kernel at 500..900 on device 0; ``overlap`` adds a kernel over (start, end)."""
    b = TraceBuilder([V100, {**V100, "id": 1}])
    for i in range(2):
        t0 = i * 1000
        b.step(i + 1, t0, 1000)
        b.op("aten::copy_", t0, 20)
        b.memcpy("HtoD", "Pinned", 38_000_000, t0 + 5, t0 + 100, 200)
        b.op("aten::mm", t0 + 20, 20)
        b.kernel("volta_sgemm_128x128_nn", t0 + 25, t0 + 500, 400, stream=8)
        if overlap is not None:
            b.op("aten::mm", t0 + 40, 20)
            b.kernel(kernel, t0 + 45, t0 + overlap[0], overlap[1] - overlap[0], stream=9, device=device)
    return b


@pytest.mark.parametrize(
    "overlap,kernel,device,exposed",
    [
        (None, "volta_sgemm_128x64_nn", 0, 0.20),  # nothing runs beside the copy
        ((50, 350), "volta_sgemm_128x64_nn", 0, 0.0),  # a kernel on another stream hides all of it
        ((200, 250), "volta_sgemm_128x64_nn", 0, 0.15),  # 50 of 200 µs hidden
        ((50, 350), "ncclDevKernel_AllReduce_Sum_f32_RING_LL", 0, 0.20),  # communication is not compute
        ((50, 350), "volta_sgemm_128x64_nn", 1, 0.20),  # a kernel on the other GPU hides nothing here
    ],
    ids=["alone", "hidden", "partly", "nccl", "other-gpu"],
)
def test_h2d_exposed_share(tmp_path, overlap, kernel, device, exposed):
    c = ctx_of(_copy_trace(overlap, kernel, device), tmp_path)
    assert c.get("h2d_share") == pytest.approx(0.20)  # all copy time, as before
    assert c.get("h2d_exposed_share") == pytest.approx(exposed)
    assert c.get("h2d_exposed_ms") == pytest.approx(exposed * 1.0)


def test_h2d_copy_share_fires_only_on_exposed_copy_time(tmp_path):
    td103 = rule("h2d-copy-share")
    alone = ctx_of(_copy_trace(None), tmp_path, "alone.json")
    fired = td103.evaluate(alone.get)
    assert isinstance(fired, Finding)
    assert fired.estimated_saving_ms == pytest.approx(0.2 * 0.75, abs=1e-3)  # 3/4 of 0.2 ms exposed per step (rounded)
    partly = ctx_of(_copy_trace((200, 250)), tmp_path, "partly.json")
    assert td103.evaluate(partly.get).estimated_saving_ms == pytest.approx(0.15 * 0.75, abs=1e-3)
    # 20% of the step copying, all of it behind a kernel: no finding
    hidden = ctx_of(_copy_trace((50, 350)), tmp_path, "hidden.json")
    assert hidden.get("h2d_share") > 0.05
    assert td103.evaluate(hidden.get) is None


def test_h2d_exposed_share_on_real_traces():
    # no recorded trace overlaps its input copies with compute: exposed = all copy time
    for name in ("v100_resnet50_workers4.pt.trace.json.gz", "v100_resnet50_workers0.pt.trace.json.gz"):
        c = fixture(name)
        assert c.get("h2d_exposed_share") == pytest.approx(c.get("h2d_share"))
        assert c.get("h2d_exposed_share") < 0.05  # TD103 stays quiet on both
