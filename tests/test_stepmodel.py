"""The step model (tracedoc.signals.stepmodel): the replay gives the steps back, and a fix's
saving is the replayed step before minus after. Built traces have figures worked out by hand
from the module docstring (times in µs); the real V100 pair checks the predictions."""

from __future__ import annotations

import functools
import json
import statistics
from pathlib import Path

import numpy as np
import pytest
from conftest import real_trace
from tracebuilder import TraceBuilder, dataloader_bound

import tracedoc
from tracedoc.engine import analyze_trace
from tracedoc.load import load
from tracedoc.signals import SignalContext
from tracedoc.signals import stepmodel as SM

GOLDEN = json.loads((Path(__file__).parent / "golden" / "golden_figures.json").read_text())["traces"]
V100_RATIO = 125.0 / 15.7  # NVIDIA Tesla V100 datasheet: 125 TFLOPS Tensor Core, 15.7 FP32


def ctx_of(b: TraceBuilder, tmp_path) -> SignalContext:
    return SignalContext(load(b.write(tmp_path / "t.json")))


def _gemm_step(sync: bool) -> TraceBuilder:
    b = TraceBuilder()
    b.step(1, 0, 1000)
    b.op("aten::mm", 0, 20)
    b.kernel("volta_sgemm_128x64_nn", 5, 20, 900 if sync else 100)  # launch 5..10, runs from 20
    if sync:
        b.runtime("cudaDeviceSynchronize", 30, 895)  # waits for the GEMM: returns at 925
    return b


def test_replay_gives_the_step_back_and_amp_saves_what_the_step_waited_for(tmp_path):
    c = ctx_of(_gemm_step(sync=True), tmp_path)
    # baseline: launch at 5 (c 5..10), kernel 20..920 (latency 10), sync from 30: ready 920,
    # overhead 925 - 920 = 5, so c = 925; tail 925..1000; the step is 1000
    assert SM.replay_steps_us(c)[0] == pytest.approx(1000)
    assert c.get("replay_error_ms") == pytest.approx(0.0, abs=1e-9)
    # Tensor Cores: the kernel lasts 900 / r, the sync returns at 20 + 900 / r + 5, the tail adds 75
    after = 20 + 900 / V100_RATIO + 5 + 75
    assert c.get("tensor_core_replay_saving_ms") == pytest.approx((1000 - after) / 1000)


def test_on_a_step_the_host_holds_faster_kernels_save_nothing(tmp_path):
    c = ctx_of(_gemm_step(sync=False), tmp_path)
    assert c.get("tc_eligible_non_tc_ms") == pytest.approx(0.1)  # the kernel's own time
    assert c.get("tensor_core_replay_saving_ms") == pytest.approx(0.0, abs=1e-9)  # the CPU runs to 1000


def test_dataloader_what_if_and_its_contention_range(tmp_path):
    c = ctx_of(dataloader_bound(), tmp_path)
    # per step: DataLoader 0..400, launch 410..415, kernel 450..950 (latency 35), CPU to 1000.
    # Without the DataLoader: c 10 + 5; kernel 50..550; the tail 415..1000 (585) ends at 600.
    assert c.get("dataloader_replay_saving_ms") == pytest.approx(0.4)
    # the rest of the CPU time 1.19x slower: c = (10 + 585) * f + 5, the kernel ends earlier
    f = SM.CONTENTION_MAX
    assert c.get("dataloader_replay_saving_low_ms") == pytest.approx((1000 - (595 * f + 5)) / 1000)
    assert c.get("dataloader_saving_ms") == pytest.approx(0.4)  # TD101's estimate on a GPU trace


def test_a_cpu_only_trace_has_no_replay(tmp_path):
    b = TraceBuilder()
    b.step(1, 0, 1000)
    b.op("aten::add", 0, 500)
    c = ctx_of(b, tmp_path)
    for name in ("replay_error_ms", "dataloader_replay_saving_ms", "tensor_core_replay_saving_ms"):
        value, reason = c.try_get(name)
        assert value is None and reason


@functools.cache
def report(name: str):
    return analyze_trace(load(real_trace(name)))


@pytest.mark.parametrize("name", sorted(GOLDEN))
def test_the_unchanged_replay_gives_back_every_gpu_fixtures_steps(name):
    """Within 5% of the step on every GPU fixture (v100_resnet50_workers4 is the largest: its
    step 5 holds a 40 ms host stall the schedule does not see)."""
    r = report(name)
    err = r.signals.get("replay_error_ms")
    if err is None:
        assert not load(real_trace(name)).has_gpu_activity
        return
    assert err <= 0.05 * r.signals["step_time_ms"], (err, r.signals["step_time_ms"])


def test_v100_pair_dataloader_replay_meets_the_measured_median_step_change():
    """workers0 -> workers4 (num_workers 0 -> 4). Measured, golden_figures.json (the plugin's
    windows): the median step fell 177.443 -> 126.682 ms (50.76 ms). The replay's range (1.19x
    contention, then none) holds it, and its high end is within 25%."""
    w0, w4 = GOLDEN["v100_resnet50_workers0.pt.trace.json.gz"], GOLDEN["v100_resnet50_workers4.pt.trace.json.gz"]
    measured = statistics.median(w0["tb_window_ms"]) - statistics.median(w4["tb_window_ms"])
    assert measured == pytest.approx(50.76, abs=0.01)
    r = report("v100_resnet50_workers0.pt.trace.json.gz")
    low, high = r.signals["dataloader_replay_saving_low_ms"], r.signals["dataloader_replay_saving_ms"]
    assert low <= measured <= high
    assert abs(high - measured) / measured <= 0.25
    first = r.findings[0]
    assert first.name == "dataloader-stall" and abs(first.estimated_saving_ms - measured) / measured <= 0.25


@pytest.mark.parametrize("name", ["v100_resnet50_workers0.pt.trace.json.gz", "v100_resnet50_workers4.pt.trace.json.gz"])
def test_tensor_cores_save_little_on_host_held_steps(name):
    """The review's finding: no-tensor-core-use claimed about 33 ms on both V100 ResNet-50 traces,
    where the main thread holds the step. Replayed, it is under 5% of the step, and never first."""
    r = report(name)
    assert r.signals["tensor_core_replay_saving_ms"] < 0.05 * r.signals["step_time_ms"]
    assert r.signals["tc_eligible_non_tc_ms"] > 60  # the kernels themselves are long
    assert r.findings[0].name != "no-tensor-core-use"
    if "workers4" in name:
        assert r.findings[0].name in ("launch-bound-gpu-idle", "single-tensor-optimizer", "zero-grad-kernels")


def test_analyze_api_reports_the_replay_in_the_evidence(tmp_path):
    r = tracedoc.analyze(_gemm_step(sync=True).write(tmp_path / "t.json"), select=["TD301"])
    (f,) = r.findings
    assert f.evidence["tensor_core_replay_saving_ms"] == pytest.approx(f.estimated_saving_ms, abs=1e-3)
    assert f.evidence["tc_eligible_non_tc_ms"] == pytest.approx(0.9)


# ---------------------------------------------------------------- fixes as replays, the critical path
def _optimizer_step() -> TraceBuilder:
    """A host-bound step: a GEMM launched at 5, then optimizer.step() holds the CPU 100..700 and
    launches one kernel at 600; the CPU runs to 1000."""
    b = TraceBuilder()
    b.step(1, 0, 1000)
    b.op("aten::mm", 0, 20)
    b.kernel("volta_sgemm_128x64_nn", 5, 20, 100)  # launch 5..10, runs 20..120
    b.op("Optimizer.step#SGD.step", 100, 600, cat="user_annotation")
    b.kernel("elementwise_kernel", 600, 620, 20)  # launch 600..605, runs 620..640
    return b


def test_foreach_replay_removes_the_optimizer_host_time_on_a_host_bound_step(tmp_path):
    c = ctx_of(_optimizer_step(), tmp_path)
    assert SM.replay_steps_us(c)[0] == pytest.approx(1000)
    # inside Optimizer.step [100, 700): 500 of the gap before the launch at 600, the launch's
    # 5 and 95 of the tail keep FOREACH_HOST_FACTOR; the GPU work ends long before the CPU
    f = SM.FOREACH_HOST_FACTOR
    assert SM.replay_saving_ms(c, ["foreach"]) == pytest.approx(600 * (1 - f) / 1000)
    # the GPU is idle most of the step: faster kernels save nothing
    assert SM.replay_saving_ms(c, ["tensor_cores"]) == pytest.approx(0.0, abs=1e-9)


def test_critical_path_of_a_host_bound_step(tmp_path):
    c = ctx_of(_optimizer_step(), tmp_path)
    cp = SM.critical_path_ms(c)
    # by hand (module docstring): the CPU end's tail [605, 1000) is 95 optimizer + 300 other; the
    # second launch contributes 595 (its call 5, then [10, 600): 500 optimizer, 10 in aten::mm, 80
    # other); the first 10 (its call 5 and [0, 5) inside aten::mm, a launching op)
    assert cp["optimizer_step"] == pytest.approx(0.595)
    assert cp["launch_overhead"] == pytest.approx(0.025)
    assert cp["other_cpu"] == pytest.approx(0.380)
    assert sum(cp.values()) == pytest.approx(1.0)
    assert c.get("critical_path_host_share") == pytest.approx(1.0)
    assert c.get("critical_path_optimizer_step_ms") == pytest.approx(0.595)


def test_critical_path_of_a_device_bound_step_runs_through_the_kernel(tmp_path):
    c = ctx_of(_gemm_step(sync=True), tmp_path)
    cp = SM.critical_path_ms(c)
    # tail [925, 1000) 75 other CPU; the sync's wait 5 after the kernel; the kernel 900 and its
    # latency 10; the launch 10 (call 5, [0, 5) inside aten::mm)
    assert cp["other_cpu"] == pytest.approx(0.075)
    assert cp["sync"] == pytest.approx(0.005)
    assert cp["compute"] == pytest.approx(0.900)
    assert cp["gpu_wait"] == pytest.approx(0.010)
    assert cp["launch_overhead"] == pytest.approx(0.010)
    assert c.get("critical_path_device_share") == pytest.approx(0.910)
    # the sync removed: the CPU no longer waits; the step ends with the kernel at 920
    assert SM.replay_saving_ms(c, ["no_sync"]) == pytest.approx(0.080)


def _overlapped_comm(dependency: bool) -> TraceBuilder:
    """An all-reduce 20..1520 on stream 7; a GEMM on stream 9 launched at 20 runs 1520..1620,
    after it, through an event record (12) and a stream wait (15) when ``dependency``."""
    b = TraceBuilder()
    b.step(1, 0, 1000)
    b.op("record_param_comms", 0, 12)
    b.kernel("ncclKernel_AllReduce_RING_LL_Sum_float", 5, 20, 1500, stream=7)
    if dependency:
        b.runtime("cudaEventRecord", 12, 2)
        b.runtime("cudaStreamWaitEvent", 15, 2)
    b.op("aten::mm", 18, 10)
    b.kernel("volta_sgemm_128x64_nn", 20, 1520, 100, stream=9)
    return b


def test_the_stream_wait_is_an_edge_so_overlapping_the_all_reduce_frees_the_gemm(tmp_path):
    c = ctx_of(_overlapped_comm(dependency=True), tmp_path)
    assert SM.replay_steps_us(c)[0] == pytest.approx(1620)
    # the all-reduce takes no time: the GEMM starts once launched (25) and ends at 125; the CPU
    # runs to 1000
    assert SM.replay_saving_ms(c, ["overlap_communication"]) == pytest.approx(0.620)
    cp = SM.critical_path_ms(c)
    assert cp["communication"] == pytest.approx(1.500) and cp["compute"] == pytest.approx(0.100)
    # without the wait the schedule cannot tell why the GEMM started at 1520: it keeps that as latency
    (tmp_path / "nodep").mkdir()
    c2 = ctx_of(_overlapped_comm(dependency=False), tmp_path / "nodep")
    assert SM.replay_saving_ms(c2, ["overlap_communication"]) == pytest.approx(0.0, abs=1e-9)


def test_kernels_of_a_cuda_graph_launch_are_on_the_path(tmp_path):
    """HTA's gap (HolisticTraceAnalysis#290): kernels launched through cudaGraphLaunch get no
    launch edge there. Here they link by correlation like any launch."""
    b = TraceBuilder()
    b.step(1, 0, 100)
    corr = b._launch("cudaGraphLaunch", 5, 10)
    for k, start in enumerate((30, 130, 230)):
        b.events.append(
            {
                "ph": "X",
                "cat": "kernel",
                "name": f"graph_kernel_{k}",
                "pid": 0,
                "tid": "stream 7",
                "ts": b.base + start,
                "dur": 100,
                "args": {"device": 0, "stream": 7, "correlation": corr},
            }
        )
    c = ctx_of(b, tmp_path)
    assert SM.replay_steps_us(c)[0] == pytest.approx(330)
    cp = SM.critical_path_ms(c)
    # the three kernels 300, the first one's latency 15 (30 - 15), the launch 15 (call 10, 5 before it)
    assert cp["compute"] == pytest.approx(0.300) and cp["gpu_wait"] == pytest.approx(0.015)
    assert cp["launch_overhead"] == pytest.approx(0.010) and cp["other_cpu"] == pytest.approx(0.005)


@pytest.mark.parametrize("name", sorted(GOLDEN))
def test_the_critical_path_adds_up_to_the_replayed_step(name):
    t = load(real_trace(name))
    if not t.has_gpu_activity:
        return
    c = SignalContext(t)
    base = SM.replay_steps_us(c)
    m = SM.complete_mask(c) & ~np.isnan(base)
    assert sum(SM.critical_path_ms(c).values()) == pytest.approx(base[m].mean() / 1000, rel=1e-6)
    host, dev = c.get("critical_path_host_share"), c.get("critical_path_device_share")
    assert host + dev == pytest.approx(1.0)


@pytest.mark.parametrize("name", sorted(GOLDEN))
def test_the_headline_is_the_combined_replay_never_a_sum(name):
    r = report(name)
    if r.recoverable is None:
        assert not any(f.replayed_saving_ms is not None for f in r.findings)
        return
    from tracedoc.render.report import recoverable_ms

    fixes = [f.fix.replay for f in r.findings if f.replayed_saving_ms is not None]
    combined = SM.replay_saving_ms(SignalContext(load(real_trace(name))), fixes)
    assert recoverable_ms(r) == pytest.approx(combined, abs=1e-3)
    assert r.recoverable["findings"] == [f.code for f in r.findings if f.replayed_saving_ms is not None]


def test_combining_fixes_keeps_the_smaller_factor_and_the_larger_ratio():
    a = SM.WhatIf(cpu_scale=(("dataloader", 0.0), ("optimizer_step", 0.5)), tensor_core_ratio=2.0)
    b = SM.WhatIf(cpu_scale=(("optimizer_step", 0.1),), cpu_factor=1.19, no_wait=frozenset({"sync"}))
    both = a.combine(b)
    assert dict(both.cpu_scale) == {"dataloader": 0.0, "optimizer_step": 0.1}
    assert both.cpu_factor == 1.19 and both.tensor_core_ratio == 2.0 and both.no_wait == {"sync"}
    with pytest.raises(ValueError, match="unknown what-if"):
        SM.WhatIf(cpu_scale=(("nowhere", 0.0),))


def test_overlapping_launch_calls_of_two_threads_count_their_shared_time_once(tmp_path):
    """Two launching threads merged into one CPU timeline: a call on thread 2 (60..160) overlaps
    the call on thread 1 (10..110); only its part after 110 is CPU time the step adds."""
    b = TraceBuilder()
    b.step(1, 0, 300)
    b.kernel("volta_sgemm_128x64_nn", 10, 120, 10, launch_dur=100)  # thread 1: call 10..110
    b.tid = 2
    b.kernel("volta_sgemm_128x64_nn", 60, 170, 10, launch_dur=100)  # thread 2: call 60..160
    c = ctx_of(b, tmp_path)
    # c: 10 + 100 = 110, then 50 more (110..160); kernels 120..130 and 170..180 (latency 10 each);
    # the tail 160..300: the replayed step is the observed 300 (counting the overlap twice: 350)
    assert SM.replay_steps_us(c)[0] == pytest.approx(300)
    assert c.get("replay_error_ms") == pytest.approx(0.0, abs=1e-9)


def test_gap_shares_in_chunks_are_the_shares_of_one_pass(monkeypatch):
    """The critical path's per-anchor gap shares are elementwise, so measuring the anchors a
    few at a time (to bound the temporaries, issue 24) gives the same floats, to the bit."""
    ctx = SignalContext(load(real_trace("v100_resnet50_workers0.pt.trace.json.gz"), cache=None))
    sch, order = SM._schedule(ctx), SM._anchor_order(ctx)
    a, b = order.prev, order.prev + order.gap_obs
    whole = SM._GapShares(sch)(a, b)
    assert a.size > 1000 and whole.shape == (a.size, len(SM._GAP_CAUSES)) and whole.any()
    monkeypatch.setattr(SM, "_SHARES_CHUNK", 7)
    assert SM._GapShares(sch)(a, b).tobytes() == whole.tobytes()


def test_walk_measures_each_window_s_shares_as_one_pass_would():
    """The critical path's walk measures the gap shares of one window's anchors at a time, and
    of a stray anchor of another window alone (issue 24): the same floats as every anchor in one
    pass, to the bit, and so the same path."""
    ctx = SignalContext(load(real_trace("v100_resnet50_workers0.pt.trace.json.gz"), cache=None))
    sch, order = SM._schedule(ctx), SM._anchor_order(ctx)
    whole = SM._GapShares(sch)(order.prev, order.prev + order.gap_obs)
    rest = np.maximum(1.0 - whole.sum(axis=1), 0.0)
    w = SM.step_windows(ctx)
    walk = SM._Walk(sch, order, order.t_from, w["cpu_end_us"].to_numpy(), sch.ev_dur)
    windows = 0
    for k in range(len(w)):
        sel = order.by_step[order.bounds[k] : order.bounds[k + 1]]
        if not sel.size:
            continue
        windows += 1
        shares, rests, rows = walk._window_shares(k)
        assert bytes(shares) == whole[sel].tobytes() and bytes(rests) == rest[sel].tobytes()
        assert [rows[i] for i in sel.tolist()] == list(range(sel.size))  # each anchor's row
    assert windows > 5
    one = int(order.by_step[order.bounds[3]])
    shares, rests = walk._shares(np.array([one]))
    assert bytes(shares) == whole[one].tobytes() and rests[0] == rest[one]


def test_removed_of_one_union_is_the_general_build_to_the_bit(monkeypatch):
    """``_Removed`` of a single region that is a union lays out its bounds and rates directly
    (issue 24): the same arrays, to the bit, as the sort-and-search build of any regions; and
    removed whole (factor 0), its covered length: the same figures, to the bit."""
    from hypothesis import given, settings
    from hypothesis import strategies as st

    from tracedoc.signals.intervals import merge

    @settings(max_examples=200, deadline=None)
    @given(
        st.lists(st.tuples(st.floats(0, 1e6), st.floats(0.001, 1e3)), min_size=1, max_size=30),
        st.sampled_from([0.0, 0.25, 0.9]),
    )
    def same(spans, scale):
        a, b = merge(np.array([x for x, _ in spans]), np.array([x + d for x, d in spans]))
        regions = {"r": (a, b)}
        fast = SM._Removed(regions, (("r", scale),))
        with monkeypatch.context() as m:
            m.setattr(SM, "is_union", lambda *_: False)
            general = SM._Removed(regions, (("r", scale),))
        if scale == 0.0:  # removed whole: the covered length read off the region's prefix sums
            assert fast.whole is not None and general.whole is None
        else:
            for name in ("bp", "rate", "cum"):
                assert getattr(fast, name).tobytes() == getattr(general, name).tobytes(), name
        x = np.linspace(-1.0, 1.1e6, 50)
        assert fast(x[:-1], x[1:]).tobytes() == general(x[:-1], x[1:]).tobytes()

    same()


def test_removed_time_in_parts_is_the_one_pass_figure(monkeypatch):
    """``_Removed`` measures its intervals a part at a time (issue 24); elementwise, so the same
    floats, to the bit, whatever the part's size."""
    ctx = SignalContext(load(real_trace("v100_resnet50_workers0.pt.trace.json.gz"), cache=None))
    sch, order = SM._schedule(ctx), SM._anchor_order(ctx)
    removed = SM._Removed(sch.regions, (("launching_ops", 0.0), ("dataloader", 0.5)))
    a, b = order.prev, order.prev + order.gap_obs
    whole = removed(a, b)
    assert a.size > 1000 and whole.any()
    # the upper bound given as a length: the same sums, a part at a time
    assert removed(a, length=order.gap_obs).tobytes() == whole.tobytes()
    monkeypatch.setattr(SM, "_SHARES_CHUNK", 7)
    assert removed(a, b).tobytes() == whole.tobytes()
    assert removed(a, length=order.gap_obs).tobytes() == whole.tobytes()
    for bad in ({}, {"b": b, "length": order.gap_obs}):
        with pytest.raises(TypeError):
            removed(a, **bad)
    # and the same as both ends measured whole: removed(-inf, max(a, b)) - removed(-inf, a)
    monkeypatch.setattr(SM, "_SHARES_CHUNK", a.size)
    assert (removed._upto(np.maximum(b, a)) - removed._upto(a)).tobytes() == whole.tobytes()
