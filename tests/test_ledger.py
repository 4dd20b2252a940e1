"""The idle ledger: every idle µs of a step owned by one cause, on traces with hand-computed answers.

Each test's comments work the expected figures out from the definitions in
tracedoc/signals/ledger.py (times in µs; kernels launch with a 5 µs launch call unless
said otherwise, so work is queued from ``launch + 5``).
"""

from __future__ import annotations

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from tracebuilder import V100, TraceBuilder, dataloader_bound

import tracedoc
from tracedoc.engine.claims import apply_floors, grant_savings
from tracedoc.engine.rules import Finding, Fix
from tracedoc.signals import SignalContext, SignalUnavailable
from tracedoc.signals import ledger as ledger_mod
from tracedoc.signals.ledger import LEDGER_KEYS, idle_ledger
from tracedoc.signals.steps import gpu_events, launch_of, step_windows


def ctx_of(builder: TraceBuilder, tmp_path) -> SignalContext:
    return SignalContext(tracedoc.load(builder.write(tmp_path / "t.json")))


def ledger_us(c: SignalContext, device: str = "cuda:0") -> dict[str, float]:
    """The device's ledger in µs per step, zero entries dropped."""
    return {k: pytest.approx(v * 1000) for k, v in idle_ledger(c)[device].items() if v > 0}


def test_every_idle_instant_has_one_owner(tmp_path):
    b = TraceBuilder()
    b.step(1, 0, 1000)
    b.op("aten::a", 0, 20)  # contains the launch of k1: a launching op
    b.kernel("k1", 10, 100, 100)  # queued from 15, runs 100..200
    b.op("aten::b", 20, 20)
    b.kernel("k2", 30, 300, 200)  # queued from 35, runs 300..500
    b.op("aten::c", 600, 20)  # launches nothing: other CPU work
    b.kernel("k3", 650, 660, 300)  # queued from 655, runs 660..960
    c = ctx_of(b, tmp_path)
    # idle: 0..100, 200..300, 500..660, 960..1000 = 400 µs
    # 0..10 in aten::a, 10..15 in the launch call: launch_overhead 15; 650..655 launch call: +5
    # 15..100 (k1 queued), 200..300 (k2 queued), 655..660 (k3 queued), gaps >= 30 µs: other_idle 190
    # 600..620 aten::c: other_cpu 20
    # 500..600, 620..650, 960..1000: nothing on the launching thread: untraced 170
    assert ledger_us(c) == {"launch_overhead": 20, "other_idle": 190, "other_cpu": 20, "untraced": 170}
    assert c.get("gpu_busy_ms") == pytest.approx(0.6)
    assert c.get("gpu_idle_ms") == pytest.approx(0.4)
    assert c.get("gpu_idle_share") == pytest.approx(0.4)
    assert c.get("idle_host_wait_share") == pytest.approx(0.21)
    assert c.get("idle_kernel_wait_share") == pytest.approx(0.19)
    assert c.get("launch_overhead_share") == pytest.approx(0.02)
    assert c.get("kernels_per_step") == 3
    assert c.get("median_kernel_us") == pytest.approx(200)


def test_dataloader_slice_is_the_time_in_next_with_nothing_queued(tmp_path):
    c = ctx_of(dataloader_bound(), tmp_path)
    # per 1000 µs step: DataLoader 0..400; aten::conv2d 400..440 launches at 410 (call 410..415);
    # the kernel runs 450..950. 400..415 launch_overhead, 415..450 queued (hole >= 30: other_idle),
    # 950..1000 nothing on the thread (the next DataLoader starts at 1000): untraced
    assert ledger_us(c) == {"dataloader": 400, "launch_overhead": 15, "other_idle": 35, "untraced": 50}
    assert c.get("idle_dataloader_ms") == pytest.approx(0.4)


def test_queued_work_owns_the_idle_while_the_cpu_blocks_and_the_refill_after_it(tmp_path):
    b = TraceBuilder()
    b.step(1, 0, 1000)
    b.kernel("A", 0, 10, 90)  # queued 5..10, runs 10..100
    b.kernel("B", 50, 350, 50)  # queued from 55, runs 350..400 (held back)
    b.runtime("cudaStreamSynchronize", 100, 200)  # the CPU blocks 100..300
    b.op("aten::add", 300, 200)
    b.kernel("C", 480, 500, 100)  # launched inside aten::add, queued 485..500, runs 500..600
    c = ctx_of(b, tmp_path)
    # idle 0..10: 0..5 launch call (launch_overhead), 5..10 queued in a 10 µs hole (kernel_wait)
    # 100..350: B is queued: the GPU does not wait on the host, whatever the CPU does: the hole
    #   100..350 is 250 µs -> other_idle 250 (the sync waits on the GPU's queue, not the reverse)
    # 400..480: nothing queued; refill after the sync (aten::add, from 300, launches C: no other
    #   work starts before the launch at 480) -> blocking_sync 80
    # 480..485: launch call -> launch_overhead 5; 485..500 queued, hole 100 µs -> other_idle 15
    # 600..1000: nothing on the thread -> untraced 400
    assert ledger_us(c) == {
        "launch_overhead": 10,
        "kernel_wait": 5,
        "blocking_sync": 80,
        "other_idle": 265,
        "untraced": 400,
    }


def test_refill_ends_where_the_cpu_turns_to_other_work_and_without_a_next_launch(tmp_path):
    b = TraceBuilder()
    b.step(1, 0, 1000)
    b.kernel("A", 0, 10, 90)  # runs 10..100
    b.runtime("cudaDeviceSynchronize", 50, 60)  # blocks 50..110, the GPU drains at 100
    b.op("aten::add", 120, 30)  # launches B: part of the refill
    b.kernel("B", 130, 140, 10)  # runs 140..150
    b.runtime("cudaStreamSynchronize", 150, 10)  # 150..160, nothing queued
    b.op("log_metrics", 200, 100)  # work that launches nothing: the refill ends at 200
    b.kernel("C", 400, 410, 90)  # runs 410..500
    b.runtime("cudaDeviceSynchronize", 500, 20)  # 500..520: no launch follows -> no refill
    c = ctx_of(b, tmp_path)
    # 0..5 launch, 5..10 kernel_wait 5
    # 100..110 inside the sync, nothing queued -> blocking_sync 10; 110..120 refill -> 10
    # 120..130 in aten::add before its launch: refill (it launches, so it is no other work) -> 10
    # the refill ends at the next launch (130): 130..135 launch call -> launch_overhead 5;
    # 135..140 queued, hole 40 µs -> other_idle 5
    # 150..160 sync -> blocking_sync 10; 160..200 refill -> 40; 200..300 log_metrics -> other_cpu 100
    # 300..400 untraced 100; 400..405 launch 5; 405..410 queued (hole 260 µs) other_idle 5
    # 500..520 sync with nothing queued -> blocking_sync 20; 520..1000: no refill, untraced 480
    assert ledger_us(c) == {
        "launch_overhead": 15,
        "kernel_wait": 5,
        "blocking_sync": 100,
        "other_idle": 10,
        "other_cpu": 100,
        "untraced": 580,
    }
    rows = c.get("top_blocking_calls")
    assert rows[0]["call"] == "cudaDeviceSynchronize"


def test_work_queued_behind_a_stream_wait_is_dependency_wait_never_host_wait(tmp_path):
    b = TraceBuilder()
    b.step(1, 0, 2000)
    b.runtime("cudaStreamWaitEvent", 100, 10)  # no event record before it: producer outside the window
    b.kernel("consumer", 120, 1500, 100, stream=3)  # queued 125..1500 on stream 3
    b.runtime("cudaMemcpy", 200, 1300)  # the CPU blocks 200..1500 waiting for it
    b.kernel("next", 1600, 1610, 100)  # runs 1610..1710
    c = ctx_of(b, tmp_path)
    # 0..100 untraced; 100..110 stream wait (a runtime call: other_cpu 10); 110..120 untraced
    # 120..125 launch call 5; 125..1500 queued dependent event, hole 1500 µs -> dependency_wait 1375
    # 1600..1605 launch 5 (the refill after cudaMemcpy ends at 1600, when nothing was refilled yet:
    #   1500..1600 is busy 1500..1600); 1605..1610 queued, hole 10 µs -> kernel_wait 5; 1710..2000 untraced
    led = ledger_us(c)
    assert led["dependency_wait"] == pytest.approx(1375)
    assert "blocking_sync" not in led
    waits = ledger_mod.dependency_waits(c)
    assert len(waits) == 1 and waits["stream"].iloc[0] == 3 and waits["stream_source"].iloc[0] == "inferred"
    assert waits["producer"].iloc[0] == -1


@pytest.mark.parametrize("engine", ["fast", "reference"])
@pytest.mark.parametrize("in_window", [True, False])
def test_a_recorded_producer_is_used_where_kineto_writes_it(tmp_path, engine, in_window):
    """Newer Kineto writes ``wait_on_cuda_event_record_corr_id`` on the Stream Wait Event: the
    producer is the event-record call with that correlation id, or outside the window."""
    b = TraceBuilder()
    b.step(1, 0, 2000)
    b.runtime("cudaEventRecord", 5, 2)  # the last record before the wait: what inference picks
    b.runtime("cudaEventRecord", 20, 5)
    record_corr = b._corr if in_window else 424242
    b.runtime("cudaStreamWaitEvent", 30, 5)
    b.events.append(
        {
            "ph": "X",
            "cat": "cuda_sync",
            "name": "Stream Wait Event",
            "pid": 0,
            "tid": "stream 9",
            "ts": b.base + 40,
            "dur": 1,
            "args": {
                "device": 0,
                "stream": 9,
                "correlation": b._corr,
                "wait_on_cuda_event_record_corr_id": record_corr,
            },
        }
    )
    b.kernel("consumer", 50, 1200, 100, stream=9)
    c = SignalContext(tracedoc.load(b.write(tmp_path / "t.json"), engine=engine))
    waits = ledger_mod.dependency_waits(c)
    assert waits["producer_source"].tolist() == ["recorded"]
    rt = c.trace.runtime
    if in_window:
        assert rt["correlation"].iloc[int(waits["producer"].iloc[0])] == record_corr
        assert rt["ts_us"].iloc[int(waits["producer"].iloc[0])] == pytest.approx(20)
    else:
        assert waits["producer"].tolist() == [-1]


def test_recorded_stream_wait_and_an_inferred_producer(tmp_path):
    b = TraceBuilder()
    b.step(1, 0, 2000)
    b.kernel("producer", 0, 10, 1000, stream=7)  # runs 10..1010 on stream 7
    b.runtime("cudaEventRecord", 20, 5)
    corr = b._corr + 1
    b.runtime("cudaStreamWaitEvent", 30, 5)
    b.events.append(
        {
            "ph": "X",
            "cat": "cuda_sync",
            "name": "Stream Wait Event",
            "pid": 0,
            "tid": "stream 9",
            "ts": b.base + 40,
            "dur": 1,
            "args": {"device": 0, "stream": 9, "correlation": corr},
        }
    )
    b.kernel("other", 40, 45, 5, stream=7)  # the next launch is on stream 7, but the sync event names 9
    b.kernel("consumer", 50, 1200, 100, stream=9)  # held back until 1200
    c = ctx_of(b, tmp_path)
    waits = ledger_mod.dependency_waits(c)
    assert waits["stream"].tolist() == [9] and waits["stream_source"].tolist() == ["recorded"]
    (rec,) = [i for i, n in enumerate(c.trace.runtime["name"]) if n == "cudaEventRecord"]
    assert waits["producer"].tolist() == [rec]
    # 1010..1200: the consumer is queued behind its wait -> dependency_wait 190
    assert ledger_us(c)["dependency_wait"] == pytest.approx(190)


def test_pageable_copy_and_its_stream_sync_are_their_own_slice(tmp_path):
    b = TraceBuilder()
    b.step(1, 0, 1000)
    b.op("aten::copy_", 100, 200)
    b.memcpy("HtoD", "Pageable", 4096, 110, 120, 10)  # call 110..115, copy 120..130
    b.runtime("cudaStreamSynchronize", 140, 60)  # 140..200: inside the same aten::copy_
    b.kernel("K", 400, 410, 100)  # runs 410..510
    c = ctx_of(b, tmp_path)
    # 100..110 in aten::copy_ (a launching op): launch_overhead 10; 110..115 the copy call
    # (blocking: pageable) -> pageable_h2d 5; 115..120 queued: kernel_wait 5; 130..140 in copy_
    # before the sync: the refill after the copy call -> pageable_h2d 10; 140..200 the sync of the
    # same copy -> pageable_h2d 60; 200..300 refill after it (copy_ ends at 300; nothing else starts
    # before the launch at 400) -> pageable_h2d 100 ... until 400: 200 in all after the sync
    led = ledger_us(c)
    assert "blocking_sync" not in led
    assert led["pageable_h2d"] == pytest.approx(5 + 10 + 60 + 200)
    assert c.get("idle_pageable_h2d_ms") == pytest.approx(0.275)


@pytest.mark.parametrize("process_start", [True, False])
def test_allocator_call_in_the_first_call_of_an_op_is_startup(tmp_path, process_start):
    """In a trace that records the process's start (a context-creation call before any GPU
    work), the first call of an op does lazy initialisation; in a trace that begins in
    steady state, the same allocation is the allocator's."""
    b = TraceBuilder()
    b.step(1, 0, 3000)
    if process_start:
        b.runtime("cuInit", 0, 20)  # start-up by name, before the first GPU event
    b.kernel("warm", 40, 45, 10)  # GPU work has started
    for i, t0 in enumerate((100, 1100)):
        b.op("aten::cudnn_convolution", t0, 900)
        b.runtime("cudaMalloc", t0 + 50, 500)  # the first call's is lazy initialisation
        b.kernel(f"conv{i}", t0 + 800, t0 + 810, 50)
    c = ctx_of(b, tmp_path)
    led = ledger_us(c)
    assert led.get("allocator") == pytest.approx(500 if process_start else 1000)
    assert led.get("startup", 0) == pytest.approx(520 if process_start else 0)


def test_allocator_communication_and_zero_grad_slices(tmp_path):
    b = TraceBuilder()
    b.step(1, 0, 1000)
    b.kernel("X", 0, 10, 90)  # runs 10..100
    b.runtime("cudaMalloc", 100, 200)
    b.op("c10d::allreduce_", 300, 200)
    b.op("Optimizer.zero_grad#SGD.zero_grad", 500, 200, cat="user_annotation")
    b.kernel("Y", 800, 900, 100)  # runs 900..1000
    c = ctx_of(b, tmp_path)
    # 0..5 launch, 5..10 kernel_wait; 100..300 allocator; 300..500 communication; 500..700 zero_grad;
    # 700..800 untraced; 800..805 launch; 805..900 queued in a 800 µs hole (other_idle)
    assert ledger_us(c) == {
        "launch_overhead": 10,
        "kernel_wait": 5,
        "allocator": 200,
        "communication": 200,
        "zero_grad": 200,
        "untraced": 100,
        "other_idle": 95,
    }
    assert c.get("idle_allocator_ms") == pytest.approx(0.2)
    assert c.get("cpu_comm_ms") == pytest.approx(0.2)


def test_slow_call_before_any_gpu_work_is_startup(tmp_path):
    b = TraceBuilder()
    b.step(1, 0, 10000)
    b.kernel("first", 100, 6110, 90, launch_dur=6000)  # a 6 ms first launch (module load)
    b.kernel("second", 6300, 6310, 90)
    c = ctx_of(b, tmp_path)
    # 0..100 untraced; 100..6100 inside the slow call before any GPU work: startup 6000;
    # 6100..6110 queued (hole 6110 µs): other_idle; 6200..6300 untraced; 6300..6305 launch;
    # 6305..6310 queued (hole 110 µs): other_idle; 6400..10000 untraced
    assert ledger_us(c) == {"startup": 6000, "other_idle": 15, "untraced": 3800, "launch_overhead": 5}
    assert c.get("warmup_ms") == pytest.approx(6.0)
    assert c.get("startup_share") == pytest.approx(0.6)


def test_each_device_has_its_own_ledger_summing_to_its_idle_time(tmp_path):
    b = TraceBuilder(devices=[V100, {**V100, "id": 1}])
    b.step(1, 0, 1000)
    b.kernel("big", 0, 5, 495, device=0)  # device 0 busy 5..500
    b.kernel("small", 500, 505, 95, device=1)  # device 1 busy 505..600
    c = ctx_of(b, tmp_path)
    led = idle_ledger(c)
    assert list(led) == ["cuda:0", "cuda:1"]  # the primary device (most kernel time) first
    assert sum(led["cuda:0"].values()) == pytest.approx((1000 - 495) / 1000)
    assert sum(led["cuda:1"].values()) == pytest.approx((1000 - 95) / 1000)
    assert set(led["cuda:0"]) == set(LEDGER_KEYS)
    # single-device signals cover the primary device
    assert c.get("gpu_busy_share") == pytest.approx(0.495)
    assert c.get("kernel_share") == pytest.approx(0.495)


def test_duplicate_step_annotations_are_collapsed_to_one_step_thread(tmp_path):
    b = TraceBuilder()
    for n, t0 in ((1, 0), (2, 1000)):
        b.step(n, t0, 1000)
        b.op(f"ProfilerStep#{n}", t0 + 1, 998, cat="user_annotation", tid=200)  # a merged trace's copy
        b.kernel("k", t0 + 10, t0 + 20, 500)
    c = ctx_of(b, tmp_path)
    assert c.get("step_count") == 2
    assert c.get("step_time_ms") == pytest.approx(1.0)


def test_gpu_work_launched_before_the_first_step_is_not_charged_to_it(tmp_path):
    b = TraceBuilder()
    b.kernel("earlier", 0, 10, 290)  # launched before any step, runs 10..300
    b.step(1, 100, 900)
    b.kernel("own", 150, 400, 400)  # the step's own work starts at 400
    c = ctx_of(b, tmp_path)
    w = step_windows(c)
    assert w["start_us"].iat[0] == pytest.approx(300)  # the plugin's rule: after the spill-in work
    assert c.get("step_time_ms") == pytest.approx(0.7)


def test_repeated_correlation_ids_link_to_the_process_driving_the_device(tmp_path):
    b = TraceBuilder(devices=[V100, {**V100, "id": 1}])
    b.step(1, 0, 1000)
    for pid, device, t0 in ((100, 0, 0), (200, 1, 300)):
        b.pid = b.tid = pid
        b.kernel("own", t0 + 10, t0 + 20, 50, device=device)  # unique ids: teach who drives which device
        b.kernel("dup", t0 + 100, t0 + 400, 50, device=device, corr=7)  # the same id in both processes
    c = ctx_of(b, tmp_path)
    g = gpu_events(c)
    dup = g[g["name"] == "dup"].sort_values("device")
    assert launch_of(c, dup, "thread").tolist() == ["100/100", "200/200"]


def test_savings_are_granted_from_disjoint_pools_and_never_exceed_the_step():
    values = {"step_time_ms": 50.0, "idle_launch_overhead_ms": 10.0, "idle_other_cpu_ms": 2.0, "gpu_busy_ms": 30.0}

    def get(name):
        if name not in values:
            raise SignalUnavailable("n/a")
        return values[name]

    def finding(code, saving, claims):
        return Finding(code, code.lower(), "warning", "", saving, "", {}, Fix("", "safe"), claims=claims)

    a = finding("A1", 8.0, ("idle:launch_overhead",))
    b = finding("B1", 6.0, ("idle:launch_overhead", "idle:other_cpu"))
    k = finding("K1", 40.0, ("busy",))
    s = finding("S1", 30.0, ("step",))
    grant_savings([a, b, k, s], get)
    assert k.estimated_saving_ms == 30.0 and k.uncapped_saving_ms == 40.0  # the busy pool is 30
    assert s.estimated_saving_ms == 20.0  # what is left of the 50 ms step
    assert a.estimated_saving_ms == 0.0 and b.estimated_saving_ms == 0.0  # nothing left of the step
    assert sum(f.estimated_saving_ms for f in (a, b, k, s)) <= 50.0

    a2, b2 = (
        finding("A2", 8.0, ("idle:launch_overhead",)),
        finding("B2", 6.0, ("idle:launch_overhead", "idle:other_cpu")),
    )
    grant_savings([a2, b2], get)
    assert a2.estimated_saving_ms == 8.0
    assert b2.estimated_saving_ms == 4.0 and b2.uncapped_saving_ms == 6.0  # 2 of launch overhead + 2 of other_cpu


def test_floors_drop_findings_worth_nothing():
    def finding(saving):
        return Finding("X1", "x", "warning", "", saving, "", {}, Fix("", "safe"))

    kept, below = apply_floors([finding(0.99), finding(1.0), finding(None)], 100.0, 0.05, 0.01)
    assert [f.estimated_saving_ms for f in kept] == [1.0, None]
    assert [f.estimated_saving_ms for f in below] == [0.99]
    kept, below = apply_floors([finding(0.04), finding(0.06)], 1.0, 0.05, 0.01)  # absolute floor wins
    assert [f.estimated_saving_ms for f in kept] == [0.06]


def test_a_tiny_synthetic_step_reports_no_finding(tmp_path):
    b = TraceBuilder()
    b.step(1, 0, 0.3)
    b.kernel("k", 0.0, 0.1, 0.1, launch_dur=0.05)
    r = tracedoc.analyze(b.write(tmp_path / "t.json"))
    assert r.findings == []


def launch_bound(compiled: bool) -> TraceBuilder:
    """Short kernels each waiting for its own launch: launch overhead dominates."""
    b = TraceBuilder()
    b.step(1, 0, 2000)
    if compiled:
        b.op("Torch-Compiled Region: 0/0", 0, 2000, cat="user_annotation")
    for i in range(100):
        t0 = i * 20
        b.op("aten::add", t0, 15)
        b.kernel("vectorized_elementwise_kernel", t0 + 5, t0 + 12, 3)
    return b


def test_a_compiled_model_gets_cuda_graphs_not_torch_compile(tmp_path):
    eager = tracedoc.analyze(launch_bound(False).write(tmp_path / "eager.json"))
    compiled = tracedoc.analyze(launch_bound(True).write(tmp_path / "compiled.json"))
    assert "launch-bound-gpu-idle" in [f.name for f in eager.findings]
    names = [f.name for f in compiled.findings]
    assert "launch-bound-compiled" in names and "launch-bound-gpu-idle" not in names
    fix = next(f.fix for f in compiled.findings if f.name == "launch-bound-compiled")
    assert "reduce-overhead" in fix.summary


def test_gpu_signals_unavailable_without_kernels(tmp_path):
    b = TraceBuilder(devices=[])
    b.step(1, 0, 100).op("aten::add", 10, 10)
    c = ctx_of(b, tmp_path)
    for name in ("gpu_busy_share", "gpu_idle_ms", "idle_launch_overhead_ms", "launch_overhead_share"):
        with pytest.raises(SignalUnavailable):
            c.get(name)
    assert idle_ledger(c) == {}


def test_the_launch_call_patterns_the_definition_states_are_the_loaders():
    """The ledger's docstring names launch calls by LAUNCH_CALL_PATTERNS; the loader classifies
    runtime calls with its own table: they must be the same patterns, in the same order."""
    from tracedoc.load import categories
    from tracedoc.signals.ledger import LAUNCH_CALL_PATTERNS

    loader = [p.pattern for label, p in categories._RUNTIME_CLASSES if label in ("launch", "memcpy", "memset")]
    assert loader == list(LAUNCH_CALL_PATTERNS)


def test_launch_of_reads_the_launching_call_of_each_gpu_event(tmp_path):
    """:func:`launch_of` against the runtime frame read row by row: the call at ``rt_pos``, and
    NaN or None where an event has no launching call."""
    b = TraceBuilder()
    b.step(1, 0, 1000)
    b.kernel("k1", 10, 20, 50).memcpy("HtoD", "Pinned", 1024, 100, 110, 30).kernel("k2", 200, 210, 40, launch_dur=7.0)
    b.events.append(  # a kernel whose correlation no runtime call carries
        {**b.events[-1], "ts": b.base + 600, "args": {**b.events[-1]["args"], "correlation": 999}}
    )
    c = ctx_of(b, tmp_path)
    g, rt = gpu_events(c), c.trace.runtime
    pos = g["rt_pos"].tolist()
    assert sorted(p >= 0 for p in pos) == [False, True, True, True]
    for field, col in (("ts_us", "ts_us"), ("end_us", "end_us")):
        got = launch_of(c, g, field)
        want = [rt[col].iloc[p] if p >= 0 else None for p in pos]
        assert [None if x != x else x for x in got] == want  # NaN is the one value unequal to itself
    want = [f"{rt['pid'].iloc[p]}/{rt['tid'].iloc[p]}" if p >= 0 else None for p in pos]
    assert launch_of(c, g, "thread").tolist() == want
    with pytest.raises(ValueError, match="unknown field"):
        launch_of(c, g, "dur_us")


@settings(max_examples=200, deadline=None)
@given(
    st.lists(st.integers(0, 3), min_size=1, max_size=40),
    st.lists(st.integers(1, 5), min_size=41, max_size=41),
    st.sets(st.integers(0, 41)),
)
def test_merging_one_owners_segments_keeps_every_owners_time(owners, lengths, kept):
    """:func:`ledger._merge_same_owner` against the grid it merges: every original segment's
    middle lies in a merged segment of the same owner, each owner's total time is the same,
    the bounds asked for stay, and any other bound left separates two owners."""

    grid = np.concatenate([[0.0], np.cumsum(lengths[: len(owners)], dtype=float)])
    labels = np.array(owners, dtype=np.int8)
    keep_at = np.array(sorted(k for k in kept if k < grid.size), dtype=float)
    keep_at = grid[keep_at.astype(int)] if keep_at.size else keep_at
    g2, l2 = ledger_mod._merge_same_owner(grid, labels, np.concatenate([keep_at, [grid[-1] + 9.0]]))
    assert g2[0] == grid[0] and g2[-1] == grid[-1] and l2.size == g2.size - 1
    assert set(keep_at.tolist()) <= set(g2.tolist())
    mid = (grid[:-1] + grid[1:]) / 2
    assert (l2[np.searchsorted(g2, mid, side="right") - 1] == labels).all()
    for o in set(owners):
        assert np.diff(g2)[l2 == o].sum() == pytest.approx(np.diff(grid)[labels == o].sum())
    inner = np.flatnonzero(l2[1:] == l2[:-1]) + 1  # bounds between two segments of one owner
    assert set(g2[inner].tolist()) <= set(keep_at.tolist())
    if not keep_at.size:
        assert not inner.size
