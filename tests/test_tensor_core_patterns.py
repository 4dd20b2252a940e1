"""One test per Tensor Core pattern family in tracedoc/signals/patterns.toml, with
real kernel names (positives) and fp32 CUDA-core kernels that must not match."""

from __future__ import annotations

import pytest

from tracedoc.signals.attribution import compiled, patterns

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
    ],
}
NEGATIVES = [
    "volta_sgemm_128x64_nn",
    "ampere_sgemm_32x32_sliced1x4_tn",
    "void cudnn::detail::dgrad_engine<float, 512, 6, 5, 3, 3, 3, false>(int)",
    "void at::native::vectorized_elementwise_kernel<4, at::native::FillFunctor<float>>",
    "cudnn_ampere_scudnn_128x64_relu_xregs_large_nn_v1",
    "void implicit_convolve_sgemm<float, float, 1024, 6, 7, 3, 3, 5, 1, false, true, true>(int)",
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
    assert not compiled("tensor_core_kernels").search(name)


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
