"""The idle ledger: every idle µs of a step owned by one cause, on traces with hand-computed answers.

Each test's comments work the expected figures out from the definitions in
tracedoc/signals/ledger.py (times in µs; kernels launch with a 5 µs launch call unless
said otherwise, so work is queued from ``launch + 5``).
"""

from __future__ import annotations

import pytest
from tracebuilder import V100, TraceBuilder, dataloader_bound

import tracedoc
from tracedoc.engine.claims import apply_floors, grant_savings
from tracedoc.engine.rules import Finding, Fix
from tracedoc.signals import SignalContext, SignalUnavailable
from tracedoc.signals.ledger import LEDGER_KEYS, idle_ledger
from tracedoc.signals.steps import gpu_events, step_windows


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


def test_blocking_call_owns_the_idle_even_with_work_queued_and_the_refill_after_it(tmp_path):
    b = TraceBuilder()
    b.step(1, 0, 1000)
    b.kernel("A", 0, 10, 90)  # queued 5..10, runs 10..100
    b.kernel("B", 50, 350, 50)  # queued from 55, runs 350..400 (held back)
    b.runtime("cudaStreamSynchronize", 100, 200)  # the CPU blocks 100..300
    b.op("aten::add", 300, 200)
    b.kernel("C", 480, 500, 100)  # launched inside aten::add, queued 485..500, runs 500..600
    c = ctx_of(b, tmp_path)
    # idle 0..10: 0..5 launch call (launch_overhead), 5..10 queued in a 10 µs hole (kernel_wait)
    # 100..300: inside the sync -> blocking_sync 200, although B is queued
    # 300..350: B queued, hole 100..350 is 250 µs -> other_idle 50
    # 400..480: refill after the sync (until the next launch at 480) -> blocking_sync 80
    # 480..485: launch call -> launch_overhead 5; 485..500 queued, hole 100 µs -> other_idle 15
    # 600..1000: nothing on the thread -> untraced 400
    assert ledger_us(c) == {
        "launch_overhead": 10,
        "kernel_wait": 5,
        "blocking_sync": 280,
        "other_idle": 65,
        "untraced": 400,
    }
    rows = c.get("top_blocking_calls")
    assert rows[0]["call"] == "cudaStreamSynchronize" and rows[0]["ms_per_step"] == pytest.approx(0.2)


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
    assert dup["launch_thread"].tolist() == ["100/100", "200/200"]


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
