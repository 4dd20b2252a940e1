"""Each signal on small traces built here, with answers worked out by hand."""

from __future__ import annotations

import numpy as np
import pytest
from tracebuilder import A100, P100, TraceBuilder, dataloader_bound

import tracedoc
from tracedoc.signals import SIGNALS, SignalContext, SignalUnavailable
from tracedoc.signals.intervals import merge, overlap_per_window, subtract


def ctx_of(builder: TraceBuilder, tmp_path) -> SignalContext:
    return SignalContext(tracedoc.load(builder.write(tmp_path / "t.json")))


# ---- interval arithmetic ----------------------------------------------------------


def test_merge_and_overlap():
    s, e = merge(np.array([5.0, 0.0, 2.0, 10.0]), np.array([7.0, 3.0, 4.0, 10.0]))
    assert s.tolist() == [0.0, 5.0] and e.tolist() == [4.0, 7.0]  # empty [10,10) dropped
    got = overlap_per_window(np.array([0.0, 5.0]), np.array([4.0, 7.0]), np.array([1.0, 4.0]), np.array([4.0, 6.0]))
    assert got.tolist() == [3.0, 1.0]
    s, e = subtract(np.array([0.0]), np.array([10.0]), np.array([2.0, 6.0]), np.array([3.0, 8.0]))
    assert list(zip(s, e, strict=False)) == [(0.0, 2.0), (3.0, 6.0), (8.0, 10.0)]


# ---- steps and breakdown -------------------------------------------------------------


def test_step_count_time_and_breakdown(tmp_path):
    # per 1000 µs step: DataLoader 400, kernel 500, launch 5, cpu op 40 (35 outside the launch), idle 60
    c = ctx_of(dataloader_bound(), tmp_path)
    assert c.get("step_count") == 3
    assert c.get("step_time_ms") == pytest.approx(1.0)
    shares = {
        k: c.get(f"{k}_share") for k in ("kernel", "memcpy", "memset", "runtime", "dataloader", "cpu_exec", "other")
    }
    assert shares == pytest.approx(
        {
            "kernel": 0.5,
            "memcpy": 0.0,
            "memset": 0.0,
            "runtime": 0.005,
            "dataloader": 0.4,
            "cpu_exec": 0.035,
            "other": 0.06,
        }
    )
    assert sum(shares.values()) == pytest.approx(1.0)
    assert c.get("dataloader_ms") == pytest.approx(0.4)
    rows = c.get("step_breakdown")
    assert [r["step"] for r in rows] == [1, 2, 3]
    assert rows[0]["kernel_ms"] == pytest.approx(0.5)


def test_breakdown_priority_kernel_hides_dataloader(tmp_path):
    # a kernel that overlaps the DataLoader span counts as kernel time, not DataLoader
    b = TraceBuilder()
    b.step(1, 0, 1000)
    b.op("aten::mm", 0, 20)
    b.kernel("volta_sgemm_128x64_nn", 5, 30, 600)  # kernel 30..630
    b.dataloader(400, 400)  # 400..800: 230 µs overlapped by the kernel
    c = ctx_of(b, tmp_path)
    assert c.get("kernel_share") == pytest.approx(0.6)
    assert c.get("dataloader_share") == pytest.approx(0.17)


def test_gpu_work_trailing_cpu_extends_step_window(tmp_path):
    b = TraceBuilder()
    b.step(1, 0, 100).step(2, 100, 100)
    b.op("aten::mm", 10, 20)
    b.kernel("k1", 15, 20, 250)  # launched in step 1, runs until 270: step 1 window ends at 270
    b.op("aten::mm", 110, 20)
    b.kernel("k2", 115, 270, 100)  # step 2 window: [270, 370]
    c = ctx_of(b, tmp_path)
    from tracedoc.signals.steps import step_windows

    w = step_windows(c)
    assert w["start_us"].tolist() == [0.0, 270.0]
    assert w["end_us"].tolist() == [270.0, 370.0]
    assert c.get("step_time_ms") == pytest.approx(0.185)


def test_truncated_last_step_excluded(tmp_path):
    b = TraceBuilder()
    for i in range(3):
        t0 = i * 100.0
        b.step(i + 1, t0, 100)
        b.op("aten::add", t0, 50)
        n = 10 if i < 2 else 3  # the last step launched 3 of 10 kernels: cut off
        for k in range(n):
            b.kernel("elementwise_kernel", t0 + 2 + k * 4, t0 + 3 + k * 4, 2, launch_dur=2)
    c = ctx_of(b, tmp_path)
    assert c.get("step_count") == 2
    assert c.get("kernels_per_step") == 10


def test_no_steps_uses_whole_trace(tmp_path):
    b = TraceBuilder()
    b.op("aten::mm", 0, 20)
    b.kernel("volta_sgemm_128x64_nn", 5, 20, 80)  # trace spans 0..100
    c = ctx_of(b, tmp_path)
    assert c.get("step_count") == 0
    assert c.get("step_time_ms") == pytest.approx(0.1)
    assert c.get("gpu_busy_share") == pytest.approx(0.8)
    with pytest.raises(SignalUnavailable):
        c.get("dataloader_share")


# ---- GPU busy and idle --------------------------------------------------------------------


def test_h2d_signals(tmp_path):
    b = TraceBuilder()
    for i in range(2):
        t0 = i * 1000.0
        b.step(i + 1, t0, 1000)
        b.op("aten::copy_", t0, 200)
        b.memcpy("HtoD", "Pageable", 1_000_000, t0 + 10, t0 + 20, 100)
        b.memcpy("HtoD", "Pinned", 4_000, t0 + 150, t0 + 160, 20)
        b.memcpy("DtoH", "Device", 8, t0 + 190, t0 + 195, 1, dst="Pageable")
    c = ctx_of(b, tmp_path)
    assert c.get("h2d_count_per_step") == 2
    assert c.get("h2d_bytes_per_step") == 1_004_000
    assert c.get("pageable_h2d_count") == 1
    assert c.get("pageable_h2d_bytes_per_step") == 1_000_000
    assert c.get("h2d_share") == pytest.approx(0.12)
    assert c.get("pageable_h2d_share") == pytest.approx(0.10)
    assert c.get("pageable_h2d_ms") == pytest.approx(0.1)
    top = c.get("top_h2d_copies")
    assert top[0]["bytes"] == 1_000_000 and top[0]["per_step"] == 1


# ---- Tensor Cores -----------------------------------------------------------------------


def _tc_trace(kernel_names, device=None):
    b = TraceBuilder(devices=[device] if device else None)
    b.step(1, 0, 10_000)
    t = 0.0
    for op, kname, dur in kernel_names:
        b.op(op, t, 30)
        b.kernel(kname, t + 5, t + 40, dur)
        t += 1000
    return b


def test_tensor_core_shares(tmp_path):
    b = _tc_trace(
        [
            ("aten::mm", "volta_sgemm_128x64_nn", 300),  # eligible, not TC
            ("aten::cudnn_convolution", "volta_h884cudnn_256x128_ldg8_relu", 200),  # TC
            ("aten::add_", "vectorized_elementwise_kernel", 500),  # not eligible
        ]
    )
    c = ctx_of(b, tmp_path)
    assert c.get("has_tensor_cores") is True
    assert c.get("tensor_core_kernel_share") == pytest.approx(0.2)
    assert c.get("tc_eligible_kernel_share") == pytest.approx(0.5)
    assert c.get("tc_eligible_non_tc_share") == pytest.approx(0.3)
    assert c.get("tc_eligible_non_tc_ms") == pytest.approx(0.3)
    top = c.get("top_non_tc_eligible_kernels")
    assert top[0]["kernel"] == "volta_sgemm_128x64_nn" and top[0]["op"] == "aten::mm"


def test_eligibility_from_outer_op(tmp_path):
    # a kernel launched by aten::fill_ inside aten::linear counts as eligible; inside aten::relu it does not
    b = TraceBuilder()
    b.step(1, 0, 1000)
    b.op("aten::linear", 0, 100).op("aten::fill_", 10, 20)
    b.kernel("fill_kernel", 15, 110, 100)
    b.op("aten::relu", 300, 100).op("aten::fill_", 310, 20)
    b.kernel("fill_kernel", 315, 410, 100)
    c = ctx_of(b, tmp_path)
    assert c.get("tc_eligible_kernel_share") == pytest.approx(0.5)
    assert c.get("top_non_tc_eligible_kernels")[0]["op"] == "aten::fill_"  # innermost launching op


def test_has_tensor_cores_by_compute_capability(tmp_path):
    assert ctx_of(_tc_trace([("aten::mm", "sgemm", 10)], device=P100), tmp_path).get("has_tensor_cores") is False
    assert ctx_of(_tc_trace([("aten::mm", "sgemm", 10)], device=A100), tmp_path).get("has_tensor_cores") is True


# ---- optimizer.zero_grad ---------------------------------------------------------------


def test_zero_grad_signals(tmp_path):
    b = TraceBuilder()
    for i in range(2):
        t0 = i * 1000.0
        b.step(i + 1, t0, 1000)
        b.op("Optimizer.zero_grad#SGD.zero_grad", t0 + 100, 50, cat="user_annotation")
        for k in range(3):
            b.op("aten::fill_", t0 + 105 + k * 10, 8)
            b.kernel("fill_kernel", t0 + 106 + k * 10, t0 + 110 + k * 10, 2)
        b.op("aten::add_", t0 + 300, 10)
        b.kernel("add_kernel", t0 + 301, t0 + 310, 500)
    c = ctx_of(b, tmp_path)
    assert c.get("zero_grad_kernels_per_step") == 3
    assert c.get("zero_grad_share") == pytest.approx(0.05)
    assert c.get("zero_grad_ms") == pytest.approx(0.05)
    with pytest.raises(SignalUnavailable, match="zero_grad"):
        ctx_of(dataloader_bound(), tmp_path).get("zero_grad_ms")


# ---- memory ------------------------------------------------------------------------------


def test_peak_memory_share(tmp_path):
    b = dataloader_bound(n_steps=1)
    b.memory(1, 2e9).memory(2, 6.8e9).memory(3, 1e9)
    b.memory(4, 30e9, device_type=0)  # host memory: ignored
    c = ctx_of(b, tmp_path)
    assert c.get("peak_memory_bytes") == 6.8e9
    assert c.get("device_memory_bytes") == 34089730048
    assert c.get("peak_memory_share") == pytest.approx(6.8e9 / 34089730048)


def test_peak_memory_unavailable_without_total_allocated(tmp_path):
    c = ctx_of(dataloader_bound(n_steps=1), tmp_path)
    with pytest.raises(SignalUnavailable, match="profile_memory"):
        c.get("peak_memory_share")


def test_every_signal_is_documented():
    for name, sig in SIGNALS.items():
        assert sig.doc, f"{name} has no docstring"
        suffix_units = {"_ms": "ms", "_us": "us", "_share": "share", "_bytes": "bytes"}
        for suffix, unit in suffix_units.items():
            if name.endswith(suffix):
                assert sig.unit == unit, name


def test_covered_length_of_disjoint_intervals_inside_each_window():
    from tracedoc.signals.intervals import covered_length

    s, e = np.array([0.0, 10.0, 30.0]), np.array([5.0, 20.0, 40.0])
    a = np.array([0.0, 3.0, 12.0, 20.0, 0.0, 50.0, 7.0])
    b = np.array([40.0, 15.0, 35.0, 30.0, 0.0, 60.0, 6.0])
    # whole; 3..5 + 10..15; 12..20 + 30..35; none inside 20..30; empty; past the end; b < a
    assert covered_length(s, e, a, b).tolist() == [25.0, 7.0, 13.0, 0.0, 0.0, 0.0, 0.0]
    assert covered_length(np.array([]), np.array([]), a, b).tolist() == [0.0] * 7
