"""One test per Tensor Core pattern family in tracedoc/signals/patterns.toml, with
real kernel names (positives) and CUDA-core / vector-ALU kernels that must not match.

Where the positives come from: the fixtures in fixtures/ (Hopper, Ampere, MI250, MI300X
traces), kernel names quoted in public profiles of cuBLASLt, CUTLASS 3.x, FlashAttention 3,
DeepGEMM, FBGEMM, hipBLASLt and Composable Kernel, MIOpen's kernel files, and CUTLASS's own
collective type names (MainloopSm90TmaGmmaWarpSpecialized, MainloopSm100TmaUmmaWarpSpecialized)."""

from __future__ import annotations

import pytest

from tracedoc.signals.attribution import compiled, is_tensor_core_kernel, patterns

POSITIVES = {
    "volta_turing_hmma": [
        "volta_h884gemm_64x64_ldg8_nn",
        "volta_fp16_s884cudnn_fp16_256x128_ldg8_relu_f2f_exp_small_nhwc2nchw_tn_v1",
        "turing_fp16_s1688gemm_fp16_128x128_ldg8_f2f_tn",
    ],
    "ampere_mma": [
        "ampere_bf16_s16816gemm_bf16_128x64_ldg8_f2f_stages_64x4_tn",
        "sm80_xmma_fprop_implicit_gemm_tf32f32_tf32f32_f32_nhwckrsc_nchw_tilesize128x128x16_stage4",
        "ampere_fp16_s16816gemm_fp16_64x64_sliced1x2_ldg8_f2f_nn",
    ],
    "hopper": [
        "sm90_xmma_gemm_bf16bf16_bf16f32_f32_tn_n_tilesize128x128x64_warpgroupsize1x1x1_execute_segment_k_off_kernel__5x_cublas",
        "nvjet_tst_128x256_64x4_1x2_h_bz_coopA_TNT",
        "cutlass3x_sm90_tensorop_gemm_gmma_bf16",
    ],
    "cutlass_tensorop": [
        "cutlass_80_tensorop_bf16_s16816gemm_relu_bf16_64x64_32x6_tn_align8",
        "void cutlass::Kernel<cutlass_75_tensorop_f16_s1688gemm_f16_256x128_32x2_nn_align8>(Params)",
    ],
    "wmma": ["void wmma_example_kernel<half>(half*, half*, float*)"],
    "attention": [
        "void pytorch_flash::flash_fwd_kernel<Flash_fwd_kernel_traits<128, 128, 32, 4>>",
        "fmha_cutlassF_f16_aligned_64x64_rf_sm80",
        "flash_bwd_dq_dk_dv_loop_seqk_parallel_kernel",
        # FlashAttention 3 (Hopper)
        "void cutlass::device_kernel<flash::enable_sm90_or_later<flash::FlashAttnFwdSm90<flash::Collective"
        "MainloopFwdSm90<2, cute::tuple<cute::C<1>, cute::C<1>, cute::C<1> >, cute::tuple<cute::C<128>, "
        "cute::C<176>, cute::C<128> >, 128, cutlass::bfloat16_t, float, cutlass::arch::Sm90, false",
        "flash::FlashAttnFwdSm90",
        # Triton FlashAttention on ROCm (mi300x_bert_small_inference, mi300x_torch_compile_triton)
        "attn_fwd",
        "_attn_bwd_dkdv",
        # CK-tile paged FMHA (mi300x_sglang_qwen3_prefill_decode)
        "_ZN7ck_tile6kentryILi2ENS_38FmhaBatchPrefillWithPagedKVCacheKernelINS_40BlockFmhaBatchPrefill",
        # cuDNN SDPA
        "cudnn_generated_fort_native_sdpa_sm90_flash_fprop_wgmma_f16_knob_3_64x64x64_4x1x1_kernel0_0",
    ],
    "fp8_gemm": [
        "sm89_xmma_gemm_e4m3e4m3_e4m3f32_f32_tn_n_tilesize64x64x64_stage4_warpsize2x2x1_tensor16x8x32_bias_f32_"
        "execute_kernel_trt",
        "void deep_gemm::fp8_gemm_kernel<128u, 128u, 128u, 4u, 8u, 1u, (deep_gemm::GemmType)0>",
        "_w8a8_block_fp8_matmul",
        "void cutlass::Kernel<cutlass::gemm::kernel::GemmGrouped<cutlass::gemm::threadblock::MmaMultistage",
        "f8f8bf16_rowwise_kernel",
    ],
    "camelcase_sm90_sm100": [
        "void cutlass::device_kernel<cutlass::gemm::kernel::GemmUniversal<cute::tuple<int, int, int, int>, "
        "cutlass::gemm::collective::CollectiveMma<cutlass::gemm::MainloopSm90TmaGmmaWarpSpecialized<4",
        "void cutlass::device_kernel<cutlass::gemm::collective::CollectiveMma<cutlass::gemm::"
        "MainloopSm100TmaUmmaWarpSpecialized<4, 2, 2, cute::tuple<cute::C<1>, cute::C<1>, cute::C<1> > >",
        "kernel_cutlass_kernel_flash_attncuteflash_fwd_sm100FlashAttentionForwardSm100_object_at_0",
    ],
    "blackwell": [
        "cutlass3x_sm100_bstensorop_s256x128x64gemm_block_scaled_ue4m3xf4_ue4m3_f32_bf16_bf16_256x128x256_0_tnn",
        "void tcgen05_gemm_kernel<__nv_bfloat16, 128, 256>",
        "cutlass::gemm::collective::CollectiveMma<MainloopSm100TmaUmmaWarpSpecializedBlockScaled<MxE2m1",
        "void nvfp4_gemm_kernel<cutlass::mx_float4_t<cutlass::float_e2m1_t>>",
    ],
    "amd_matrix_core": [
        # hipBLASLt/Tensile with an MFMA instruction field (mi250_toy_train, mi300x_* fixtures)
        "Cijk_Alik_Bljk_SB_Bias_AS_SAV_UserArgs_MT64x16x32_MI16x16x1_SN_LDSB0_AFC1_AFEM1_AFEM1_ASEM1_CLR1",
        "Cijk_Alik_Bljk_BBS_BH_Bias_HA_S_SAV_UserArgs_MT128x256x32_MI16x16x1_SN_LDSB1_AFC1_AFEM1_AFEM1",
        # Composable Kernel XDL (MFMA) GEMMs and CK-tile GEMMs
        "void ck::kernel_gemm_xdl_cshuffle_v3<ck::GridwiseGemm_xdl_cshuffle_v3<ck::tensor_layout::gemm::RowMajor",
        "_ZN7ck_tile6kentryILi1ENS_10GemmKernelINS_21GemmPipelineAgBgCrCompV3",
        "void rocwmma_mfma_gemm<__half, float>",
    ],
    "amd_miopen_xdlops": [
        # MIOpen's xdlops implicit-GEMM convolutions, one per direction (kernel names as the
        # files in MIOpen src/kernels/dynamic_igemm/igemm_gtc_xdlops_nhwc/{bwd,wrw}_fp16/ and
        # src/kernels/dynamic_igemm/igemm_gtc_bwd/ name them)
        "igemm_fwd_gtcx_nchw_fp32_bx0_ex1_bt128x128x16_wt32x32x2",
        "igemm_bwd_gtcx_nhwc_fp16_bx0_ex0_bt128x128x32_wt32x32x8_ws1x1_wr2x2_ta1x8x2x1_1x4x1x64_tb1x8x1x2_1x4x1x64",
        "igemm_bwd_gtcx_nchw_fp32_bx16_ex0_bt128x128x16_wt32x32x1_ws1x1_wr2x2_ta2x1x1x4_1x8x1x32_tb2x1x1x4_1x8x1x32",
        "igemm_wrw_gtcx_nhwc_fp16_bx0_ex0_bt64x32x32_wt16x16x16_ws1x1_wr2x1_ta1x4x1x2_1x8x1x32_tb1x4x1x1_1x8x1x32",
        # gfx94x generation (gtcx3), as MIOpen's ConvAsmImplicitGemmGTCDynamicFwdXdlopsNHWC names it
        "igemm_fwd_gtcx3_nhwc_bf16_bx0_ex1_bt128x128x32_wt32x32x8_ws1x1_wr2x2_ta1x8x2x1_1x4x1x64_tb1x8x2x1_1x4x1x64_gkgs",
    ],
}
NEGATIVES = [
    "volta_sgemm_128x64_nn",
    "ampere_sgemm_32x32_sliced1x4_tn",
    # CUDA-core (SIMT) fp32 GEMM on Blackwell: the sm100_ prefix alone does not make it a Tensor Core kernel
    "cutlass3x_sm100_simt_sgemm_f32_f32_f32_f32_f32_128x128x16_1x1x1_3_tnn_align1_bias_f32_relu",
    # fp8 quantisation / cast kernels: no GEMM
    "void vllm::scaled_fp8_quant_kernel<c10::BFloat16, c10::Float8_e4m3fn>",
    "void vllm::dynamic_per_token_scaled_fp8_quant_kernel<c10::BFloat16, c10::Float8_e4m3fn>",
    # eager softmax (the middle of unfused attention) and a CK-tile norm kernel
    "void at::native::(anonymous namespace)::cunn_SoftMaxForward<8, c10::BFloat16, float, c10::BFloat16>",
    "_ZN7ck_tile6kentryILi1ENS_15Layernorm2dFwdINS_26Layernorm2dFwdPipelineOnePass",
    # Tensile GEMM without an MFMA field (vector ALU), AMD elementwise and Triton kernels
    "Cijk_Ailk_Bljk_SB_MT64x64x8_SN_1LDSB0_APM1_AF0EM1_AF1EM1_AMAS3_ASE_ASGT_ASLT_ASAE01_ASCE01_ASEM1_BL1_GRVW1",
    "_ZN5aiter24add_rmsnorm_quant_kernelIDF16bDF16bLi64ELi8ELb0ELb0ELb1ELi1EEEvPT0_PT_PfS4_S4_S4_diiiiiiib",
    "triton_poi_fused__unsafe_view_mul_silu_2",
    # lower-case "sm" inside words is not a CamelCase architecture tag
    "void at::native::vectorized_elementwise_kernel<4, at::native::smooth_l1_kernel_cuda<float>>",
    "void at::native::(anonymous namespace)::masked_attn_probs_kernel<float>",
    "void cudnn::detail::dgrad_engine<float, 512, 6, 5, 3, 3, 3, false>(int)",
    "void at::native::vectorized_elementwise_kernel<4, at::native::FillFunctor<float>>",
    "cudnn_ampere_scudnn_128x64_relu_xregs_large_nn_v1",
    "void implicit_convolve_sgemm<float, float, 1024, 6, 7, 3, 3, 5, 1, false, true, true>(int)",
    # MIOpen's non-xdlops implicit GEMM (vector ALU): "gtc" without the x, no wave tile (the stem
    # of MIOpen's src/kernels/dynamic_igemm/igemm_gtc_bwd/igemm_bwd_gtc_gfx908_064x064.inc)
    "igemm_bwd_gtc_gfx908_064x064",
    # constructed: "wt" inside another word is not a wave tile
    "void hwt32x32x8_filter_kernel<float>",
    # layout transforms are neither Tensor Core nor GEMM work (MIOpen, cuDNN: see
    # [layout_transform_kernels]); the cuDNN ones are from the h100_* fixtures
    "batched_transpose_32x32_half",
    "batched_transpose_16x16_dword",
    "transpose_NCHW2NHWC",
    "transpose_NHWC2NCHW",
    "general_4d_reorder_1x256_dword_r0132",
    "void cudnn::engines_precompiled::nchwToNhwcKernel<__nv_bfloat16, __nv_bfloat16, float, false, true, "
    "(cudnnKernelDataType_t)0>(cudnn::engines_precompiled::nchw2nhwc_params_t<float>, __nv_bfloat16 const*)",
]


def test_every_family_has_cases():
    assert set(patterns()["tensor_core_kernels"]) == set(POSITIVES)


@pytest.mark.parametrize("family", sorted(POSITIVES))
def test_family_matches_its_kernels(family):
    import re

    fam = re.compile("|".join(f"(?:{p})" for p in patterns()["tensor_core_kernels"][family]), re.I)
    for name in POSITIVES[family]:
        assert fam.search(name), f"{family} misses {name}"


@pytest.mark.parametrize("name", NEGATIVES)
def test_cuda_core_kernels_do_not_match(name):
    assert not is_tensor_core_kernel(name)


@pytest.mark.parametrize("family", sorted(POSITIVES))
def test_positives_are_tensor_core_kernels(family):
    # the exclusions (SIMT, sgemm) never remove a real Tensor Core kernel
    for name in POSITIVES[family]:
        assert is_tensor_core_kernel(name), name


def test_every_family_cites_a_source():
    # each family of [tensor_core_kernels] has a comment block right above it in patterns.toml
    from importlib import resources

    lines = resources.files("tracedoc.signals").joinpath("patterns.toml").read_text().splitlines()
    start = lines.index("[tensor_core_kernels]")
    end = next(i for i in range(start + 1, len(lines)) if lines[i].startswith("["))
    for i in range(start + 1, end):
        line = lines[i]
        if "=" in line and not line.startswith("#"):
            j = i - 1
            while j > start and not lines[j].startswith("#"):
                j -= 1
            assert j > start, f"{line.split('=')[0].strip()} has no source comment"


@pytest.mark.parametrize(
    "name,eligible",
    [
        ("Cijk_Ailk_Bljk_SB_MT64x64x8_SN_1LDSB0_APM1", True),  # Tensile GEMM on the vector ALUs
        ("igemm_fwd_gtcx_nchw_fp32_bx0_ex1_bt128x128x16_wt32x32x2", True),  # MIOpen convolution
        ("void at::native::vectorized_elementwise_kernel<4, at::native::FillFunctor<float>>", False),
    ],
)
def test_amd_gemm_kernels_are_eligible(name, eligible):
    assert bool(compiled("tensor_core_eligible_kernels").search(name)) is eligible


@pytest.mark.parametrize("pattern", patterns()["tensor_core_kernels"]["amd_miopen_xdlops"])
def test_each_miopen_xdlops_pattern_matches_on_its_own(pattern):
    # both the gtcx name and the wave-tile token recognise the MIOpen positives by themselves
    import re

    one = re.compile(pattern, re.I)
    assert all(one.search(name) for name in POSITIVES["amd_miopen_xdlops"]), pattern


@pytest.mark.parametrize(
    "op,eligible",
    [
        ("aten::mm", True),
        ("aten::addmm", True),
        ("aten::linear", True),
        ("aten::bmm", True),
        ("aten::cudnn_convolution", True),
        ("aten::convolution_backward", True),
        ("aten::_convolution", True),
        ("aten::scaled_dot_product_attention", True),
        ("MmBackward0", True),
        ("ConvolutionBackward0", True),
        ("CudnnConvolutionBackward", True),
        ("aten::add_", False),
        ("aten::relu", False),
        ("aten::fill_", False),
        ("aten::mm_backward_something", False),
        ("aten::copy_", False),
    ],
)
def test_eligible_ops(op, eligible):
    assert bool(compiled("tensor_core_eligible_ops").search(op)) is eligible
