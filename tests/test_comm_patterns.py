"""Each communication pattern family matches real names from its source, and compute kernels do not."""

from __future__ import annotations

import pandas as pd
import pytest

from tracedoc.signals.attribution import patterns
from tracedoc.signals.comm import comm_kernel_mask, comm_op_mask

KERNEL_POSITIVES = {
    "nccl_rccl": [
        "ncclKernel_AllReduce_RING_LL_Sum_float(ncclWorkElem)",
        "ncclDevKernel_AllGather_RING_LL(ncclDevKernelArgsStorage<4096ul>)",
        "ncclDevKernel_SendRecv(ncclDevKernelArgsStorage<4096ul>)",
    ],
    "symmetric_memory": [
        "void c10d::symmetric_memory::one_shot_all_reduce_kernel<float, 16, 8>(...)",
        "void c10d::symmetric_memory::multimem_all_reduce_kernel<...>",
        "void vllm::cross_device_reduce_1stage<__nv_bfloat16, 8>(...)",
    ],
    "deepep_nvshmem": ["void deep_ep::intranode::dispatch<8, 768>(...)", "nvshmemi_transfer_rma_nbi"],
}
NEGATIVES = [
    "volta_sgemm_128x64_nn",
    "void at::native::vectorized_elementwise_kernel<4, ...>",
    "sm90_xmma_gemm_bf16bf16_bf16f32",
    "Memcpy HtoD (Pageable -> Device)",
    "cunn_SoftMaxForward",
]


def test_every_family_has_positives():
    assert set(KERNEL_POSITIVES) == set(patterns()["communication_kernels"])


@pytest.mark.parametrize("family", sorted(KERNEL_POSITIVES))
def test_comm_kernel_family(family):
    assert comm_kernel_mask(pd.Series(KERNEL_POSITIVES[family])).all()


def test_compute_kernels_are_not_communication():
    assert not comm_kernel_mask(pd.Series(NEGATIVES)).any()


def test_comm_ops():
    pos = [
        "gloo:all_reduce",
        "gloo:broadcast",
        "c10d::allreduce_",
        "record_param_comms",
        "nccl:all_reduce",
        "_c10d_functional::all_gather_into_tensor",
    ]
    neg = [
        "aten::mm",
        "ProfilerStep#3",
        "Optimizer.step#SGD.step",
        "aten::copy_",
        "enumerate(DataLoader)#_SingleProcessDataLoaderIter.__next__",
    ]
    assert comm_op_mask(pd.Series(pos)).all()
    assert not comm_op_mask(pd.Series(neg)).any()
