"""Rules on the op view: TD302 gemm-below-peak (tracedoc.signals.gemm) and TD204
memory-bound-elementwise (tracedoc.signals.elementwise).

Expected figures are worked out here by hand from the shapes and durations written into the
synthetic traces, or from the datasheet peaks (H100 SXM: 989.5 bf16 and 494.5 TF32 Tensor Core
TFLOP/s, 3.35 TB/s), never read back from tracedoc's own output.
"""

from __future__ import annotations

import json
from pathlib import Path

import pytest

import tracedoc
from tracedoc.signals import SignalContext, SignalUnavailable
from tracedoc.signals.gemm import BELOW_PEAK_FRACTION, REALISTIC_FRACTION

FIX = Path(__file__).resolve().parents[1] / "fixtures"
H100 = {"name": "NVIDIA H100 80GB HBM3", "totalGlobalMem": 85017493504, "computeMajor": 9, "computeMinor": 0,
        "numSms": 132}  # fmt: skip
V100 = {"name": "Tesla V100-SXM2-32GB", "totalGlobalMem": 34089730048, "computeMajor": 7, "computeMinor": 0,
        "numSms": 80}  # fmt: skip
BF16_PEAK, TF32_PEAK, BW = 989.5e12, 494.5e12, 3.35e12
STEP_US = 1000.0


def op(name, dims, types, dur_us, stream=7, kernel="k"):
    """One op launching one kernel (``dims``/``types``: the recorded Input Dims and Input type)."""
    return {"name": name, "dims": dims, "types": types, "dur": dur_us, "stream": stream, "kernel": kernel}


def build(tmp_path: Path, ops: list[dict], device: dict | None = None, name: str = "t") -> Path:
    """Two steps of :data:`STEP_US`, each running ``ops`` in order, kernels back to back."""
    ev, corr = [], 0
    for i, t0 in enumerate((0.0, 2 * STEP_US)):
        ev.append({"ph": "X", "cat": "user_annotation", "name": f"ProfilerStep#{i}", "pid": 1, "tid": 1,
                   "ts": t0, "dur": STEP_US})  # fmt: skip
        t_cpu, t_gpu = t0 + 1.0, t0 + 50.0
        for o in ops:
            corr += 1
            n = len(o["dims"])
            ev += [
                {"ph": "X", "cat": "cpu_op", "name": o["name"], "pid": 1, "tid": 1, "ts": t_cpu, "dur": 4,
                 "args": {"Input Dims": o["dims"], "Input type": o["types"],
                          "Input Strides": [[] for _ in range(n)], "Concrete Inputs": [""] * n}},
                {"ph": "X", "cat": "cuda_runtime", "name": "cudaLaunchKernel", "pid": 1, "tid": 1, "ts": t_cpu + 1,
                 "dur": 2, "args": {"correlation": corr}},
                {"ph": "X", "cat": "kernel", "name": o["kernel"], "pid": 0, "tid": o["stream"], "ts": t_gpu,
                 "dur": o["dur"], "args": {"correlation": corr, "device": 0, "stream": o["stream"]}},
            ]  # fmt: skip
            t_cpu += 5.0
            t_gpu += o["dur"] + 0.5
    doc = {"traceEvents": ev, "deviceProperties": [{"id": 0, **(device or H100)}]}
    path = tmp_path / f"{name}.pt.trace.json"
    path.write_text(json.dumps(doc))
    return path


def ctx_of(path: Path) -> SignalContext:
    return SignalContext(tracedoc.load(str(path)))


def fired(path: Path | str, code: str) -> bool:
    r = tracedoc.analyze(str(path))
    return code in {f.code for f in r.findings} | {a.code for a in r.also_true}


def skipped(path: Path | str, code: str) -> str | None:
    r = tracedoc.analyze(str(path))
    return next((s.reason for s in r.skipped if s.code == code), None)


# --------------------------------------------------------------------------- TD302 gemm-below-peak

BF = "c10::BFloat16"
# [1000, 1000] x [1000, 1000] bf16: 1000 = 8 * 125, aligned; 1001 is not
M = N = K = 1000
FLOPS = 2 * M * N * K
BYTES = 2 * (M * K + K * N + M * N)


def _ideal_us(flops: float, nbytes: float, peak: float) -> float:
    """The time of the work at the realistic fraction of the roofline (by hand)."""
    return max(flops / (REALISTIC_FRACTION * peak), nbytes / (REALISTIC_FRACTION * BW)) * 1e6


def _mm(m, n, k, dur, dtype=BF):
    return op("aten::mm", [[m, k], [k, n]], [dtype, dtype], dur)


def test_unaligned_gemm_at_the_below_peak_boundary(tmp_path):
    """1001 x 1000 x 1000 bf16 is compute-bound (intensity 333 FLOP/byte over a ridge of 295): the
    attainable rate is the bf16 peak. At exactly half of it the GEMM is not below peak; slower, it is."""
    flops = 2 * 1001 * 1000 * 1000
    at_half = flops / (BELOW_PEAK_FRACTION * BF16_PEAK) * 1e6  # 4.046 us
    quiet = ctx_of(build(tmp_path, [_mm(1001, 1000, 1000, at_half * 0.999)], name="fast"))
    assert quiet.get("gemm_below_peak_ms") == 0.0
    slow_us = at_half * 1.01
    c = ctx_of(build(tmp_path, [_mm(1001, 1000, 1000, slow_us)], name="slow"))
    (row,) = c.get("top_gemms_below_peak")
    assert row["mnk"] == "1001x1000x1000" and row["reason"] == "unaligned" and row["dtype"] == "bf16"
    assert c.get("gemm_below_peak_ms") == pytest.approx(slow_us / 1000.0, rel=1e-6)
    nbytes = 2 * (1001 * 1000 + 1000 * 1000 + 1001 * 1000)
    saving = (slow_us - _ideal_us(flops, nbytes, BF16_PEAK)) / 1000.0
    assert c.get("gemm_below_peak_saving_ms") == pytest.approx(saving, rel=1e-4)
    assert row["pct_of_peak"] == pytest.approx(100 * flops / (slow_us * 1e-6) / BF16_PEAK, abs=0.1)


def test_an_aligned_gemm_below_peak_is_not_explained_by_its_shape(tmp_path):
    c = ctx_of(build(tmp_path, [_mm(M, N, K, 200.0)]))  # 1 % of peak, but 1000 = 8 * 125
    assert c.get("gemm_below_peak_ms") == 0.0 and c.get("top_gemms_below_peak") == []


def test_small_dimension(tmp_path):
    """k = 32 is aligned (4 x 8) but under the 64-wide tile: 'small'. Memory-bound (intensity
    2*4096*4096*32 / (2*(4096*32*2 + 4096*4096)) = 29.5 FLOP/byte, under the 295 ridge): the
    attainable rate is intensity * bandwidth, and the ideal time the bytes' at 72% of 3.35 TB/s."""
    flops, nbytes = 2 * 4096 * 4096 * 32, 2 * (4096 * 32 * 2 + 4096 * 4096)
    slow = nbytes / (0.4 * BW) * 1e6  # 40 % of the bandwidth: under half the attainable rate
    c = ctx_of(build(tmp_path, [_mm(4096, 4096, 32, slow)]))
    (row,) = c.get("top_gemms_below_peak")
    assert row["reason"] == "small"
    assert row["pct_of_attainable"] == pytest.approx(40.0, abs=0.1)
    assert c.get("gemm_below_peak_saving_ms") == pytest.approx((slow - _ideal_us(flops, nbytes, BF16_PEAK)) / 1e3)


def test_fp32_matmul_where_tf32_exists(tmp_path):
    """fp32 1000^3 on an H100 (cc 9.0): measured against the TF32 peak, reason 'fp32' (1000 is a
    multiple of 4: aligned for fp32). On a V100 (cc 7.0, no TF32) the shape explains nothing."""
    dur = FLOPS / 60e12 * 1e6  # 60 TFLOP/s: the CUDA cores' rate, 12 % of TF32
    c = ctx_of(build(tmp_path, [_mm(M, N, K, dur, "float")]))
    (row,) = c.get("top_gemms_below_peak")
    assert row["reason"] == "fp32" and row["dtype"] == "fp32"
    assert row["pct_of_peak"] == pytest.approx(100 * 60e12 / TF32_PEAK, abs=0.1)
    fp32_bytes = 4 * (M * K + K * N + M * N)
    assert c.get("gemm_below_peak_saving_ms") == pytest.approx((dur - _ideal_us(FLOPS, fp32_bytes, TF32_PEAK)) / 1e3)
    v = ctx_of(build(tmp_path, [_mm(M, N, K, dur * 5, "float")], device=V100, name="v100"))
    assert v.get("gemm_below_peak_ms") == 0.0


def test_gemm_share_fires_above_five_percent_of_the_step(tmp_path):
    # an unaligned GEMM far below peak, 60 us then 40 us of a 1000 us step: 6 % and 4 %
    fires = build(tmp_path, [_mm(1001, 1000, 1000, 60.0)], name="fires")
    quiet = build(tmp_path, [_mm(1001, 1000, 1000, 40.0)], name="quiet")
    assert ctx_of(fires).get("gemm_below_peak_share") == pytest.approx(0.06, rel=0.02)
    assert fired(fires, "TD302") and not fired(quiet, "TD302")


def test_gemm_unknown_device_skips(tmp_path):
    path = build(tmp_path, [_mm(1001, 1000, 1000, 60.0)], device={**H100, "name": "Mystery Accelerator 9000"})
    assert "peak is unknown" in skipped(path, "TD302")


def test_gemm_fires_on_the_first_resnet_convolution():
    """ResNet-18 at batch 128 in bf16: the 7x7 stem convolution over 3 input channels has the
    implicit GEMM m = 128*112*112, n = 64, k = 3*7*7 = 147 (not a multiple of 8)."""
    path = FIX / "h100_resnet18_batch.pt.trace.json.gz"
    c = SignalContext(tracedoc.load(str(path)))
    rows = c.get("top_gemms_below_peak")
    stem = next(r for r in rows if r["op"] == "aten::cudnn_convolution")
    assert stem["mnk"] == f"{128 * 112 * 112}x64x147" and stem["reason"] == "unaligned" and stem["dtype"] == "bf16"
    assert stem["pct_of_peak"] < 10
    assert c.get("gemm_below_peak_share") > 0.05
    assert fired(path, "TD302")


@pytest.mark.parametrize(
    "name",
    [
        "h100_resnet18_baseline.pt.trace.json.gz",  # the same stem convolution: 1.2 % of a 54 ms step
        # eager attention's 3137-wide bmm is below peak but TD310's; the rest is aligned and at 72-76 %
        "h100_timesformer_inference.pt.trace.json.gz",
    ],
)
def test_gemm_quiet_on_real_traces(name):
    assert not fired(FIX / name, "TD302")


@pytest.mark.parametrize(
    "name,why",
    [
        ("cpu_only_gloo.pt.trace.json.gz", "no GPU kernels"),
        ("a100_alexnet_forward.pt.trace.json.gz", "recorded shapes"),
        # PyTorch 1.x: no Concrete Inputs, so the convolutions (most of the GEMM time) have no model
        ("v100_resnet50_workers0.pt.trace.json.gz", "no cost model"),
    ],
)
def test_gemm_skips_without_shapes(name, why):
    assert why in skipped(FIX / name, "TD302")


# --------------------------------------------------------------------------- TD204 memory-bound-elementwise

X = [64, 1024, 1024]  # 2**26 elements
E = 64 * 1024 * 1024


def _add(dur, stream=7):
    return op("aten::add", [X, X, []], [BF, BF, "Scalar"], dur, stream)


def _relu(dur, stream=7):
    return op("aten::relu", [X], [BF], dur, stream)


def _mm_break():
    return _mm(M, N, K, 5.0)


def test_a_two_op_chain_by_hand(tmp_path):
    """add (reads 2 bf16 tensors, writes 1: 6 bytes per element) then relu (reads 1, writes 1: 4):
    unfused 10 bytes per element; fused, add's output is neither written nor read: 4 of them go.
    saving = time * 4 / 10."""
    c = ctx_of(build(tmp_path, [_add(120.0), _relu(80.0)]))
    assert c.get("memory_bound_elementwise_ms") == pytest.approx(0.2)
    assert c.get("elementwise_fusion_saving_ms") == pytest.approx(0.2 * 4 / 10)
    (row,) = c.get("top_elementwise_chains")
    assert row["ops"] == "add > relu" and row["chains_per_step"] == 1
    assert row["unfused_mb"] == pytest.approx(10 * E / 1e6, abs=1e-3)
    assert row["fused_mb"] == pytest.approx(6 * E / 1e6, abs=1e-3)


def test_chains_break_on_other_kernels_streams_and_copies(tmp_path):
    assert ctx_of(build(tmp_path, [_add(120.0), _mm_break(), _relu(80.0)], name="a")).get(
        "elementwise_fusion_saving_ms"
    ) == pytest.approx(0.0)
    assert ctx_of(build(tmp_path, [_add(120.0), _relu(80.0, stream=8)], name="b")).get(
        "elementwise_fusion_saving_ms"
    ) == pytest.approx(0.0)
    copies = [op("aten::copy_", [X, X, []], [BF, BF, "Scalar"], 50.0) for _ in range(2)]
    c = ctx_of(build(tmp_path, copies, name="c"))
    assert c.get("memory_bound_elementwise_ms") == pytest.approx(0.1)
    assert c.get("elementwise_fusion_saving_ms") == pytest.approx(0.0)


def test_elementwise_boundaries(tmp_path):
    """Share strictly above 10 % of the 1000 us step and saving strictly above 2 % of it: the chain's
    saving is 0.4 of its time, so 101 us of chain (10.1 %, 4.04 %) fires; a 99 us chain does not
    (9.9 %), nor 200 us of unlinked ops (20 %, saving 0)."""
    fires = build(tmp_path, [_add(61.0), _relu(40.0)], name="fires")
    assert fired(fires, "TD204")
    assert not fired(build(tmp_path, [_add(59.0), _relu(40.0)], name="share"), "TD204")
    assert not fired(build(tmp_path, [_add(100.0), _mm_break(), _relu(100.0)], name="nochain"), "TD204")


def test_elementwise_fires_on_resnet_training():
    """ResNet-18 training at batch 128: ReLU backward feeding BatchNorm backward, BatchNorm into
    ReLU, the residual add into ReLU."""
    path = FIX / "h100_resnet18_batch.pt.trace.json.gz"
    c = SignalContext(tracedoc.load(str(path)))
    ops = {r["ops"] for r in c.get("top_elementwise_chains")}
    assert {"threshold_backward > native_batch_norm_backward", "native_batch_norm > clamp_min_"} <= ops
    assert c.get("memory_bound_elementwise_share") > 0.1
    assert fired(path, "TD204")
    assert fired(FIX / "v100_resnet50_workers4.pt.trace.json.gz", "TD204")  # elementwise ops do carry shapes


@pytest.mark.parametrize(
    "name",
    [
        "h100_resnet18_compile.pt.trace.json.gz",  # compiled: Triton kernels, 1.6 % left eager
        "h100_timesformer_inference.pt.trace.json.gz",  # eager softmax is TD310's; the rest 7 %
        "h100_resnet18_baseline.pt.trace.json.gz",  # 5.6 % of a 54 ms step
    ],
)
def test_elementwise_quiet_on_real_traces(name):
    assert not fired(FIX / name, "TD204")


@pytest.mark.parametrize("name", ["cpu_only_gloo.pt.trace.json.gz", "a100_alexnet_forward.pt.trace.json.gz"])
def test_elementwise_skips_without_kernels_or_shapes(name):
    assert skipped(FIX / name, "TD204")


def test_signals_unavailable_on_a_cpu_trace():
    c = SignalContext(tracedoc.load(str(FIX / "cpu_only_gloo.pt.trace.json.gz")))
    for s in ("gemm_below_peak_ms", "memory_bound_elementwise_ms"):
        with pytest.raises(SignalUnavailable):
            c.get(s)
