"""The ledger tells the truth: host-wait only with an empty device queue, nothing true hidden,
the window checked. Real fixtures and real fixtures mutated into the case under test."""

from __future__ import annotations

import functools
import gzip
import json
from pathlib import Path

import pytest
from conftest import real_trace
from tracebuilder import TraceBuilder

import tracedoc
from tracedoc.engine import analyze_trace
from tracedoc.load import load
from tracedoc.signals import SignalContext
from tracedoc.signals.ledger import idle_ledger

FIX = Path(__file__).resolve().parent.parent / "fixtures"


@functools.cache
def report(name: str):
    return analyze_trace(load(real_trace(name)))


def names(r) -> list[str]:
    return [f.name for f in r.findings]


def also(r) -> dict[str, str]:
    return {a.name: a.overlaps for a in r.also_true}


# ---- the development traces ---------------------------------------------------------


def test_sglang_waits_on_a_dependency_outside_the_window_not_on_the_host():
    """hipStreamWaitEvent at 0.100 ms holds the kernel launched at 0.122 ms on stream 3 until
    493.366 ms; hipMemcpyWithStream blocks the CPU from 0.170 ms meanwhile. The CPU waits on
    the GPU's queue: no blocking-sync, no launch-bound, a note about the dependency."""
    r = report("mi300x_sglang_qwen3_prefill_decode.pt.trace.json.gz")
    assert "blocking-sync" not in names(r) and "blocking-sync" not in also(r)
    assert "launch-bound-gpu-idle" not in names(r)
    led = r.idle_ledger["hip:9"]
    # the kernel's queued time, 0.127 (launch end) .. 493.366 ms, less its busy neighbours: about 493.2
    assert led["dependency_wait"] == pytest.approx(493.2, abs=0.1)
    assert led["blocking_sync"] < 1.0
    assert any("dependency" in n and "hipStreamWaitEvent" in n for n in r.notes)


def test_timesformer_preprocessing_is_other_cpu_not_blocking_sync():
    """217.5 ms of video preprocessing come before any GPU work; the 126 ms D2H copy waits on a
    busy GPU. unfused-attention fires; blocking-sync does not, even as also-true."""
    r = report("h100_timesformer_inference.pt.trace.json.gz")
    assert "unfused-attention" in names(r)
    assert "blocking-sync" not in names(r) and "blocking-sync" not in also(r)
    led = r.idle_ledger["cuda:0"]
    assert led["other_cpu"] > 217.5 and led["blocking_sync"] < 1.0


@pytest.mark.parametrize(
    "name",
    ["a100_alexnet_forward.pt.trace.json.gz", "mi250_toy_train.pt.trace.json.gz", "legacy_computeproperties.json.gz"],
)
def test_syncs_of_microseconds_are_not_blocking_sync(name):
    r = report(name)
    assert "blocking-sync" not in names(r)


def test_ddp_low_memory_use_is_also_true():
    """Peak 19.4% of the device: the rule's condition holds; a larger batch amortises the launch
    slice that the launch-bound finding already claims, so it is listed as also true."""
    r = report("v100_ddp_memory_events.pt.trace.json.gz")
    assert r.signals["peak_memory_share"] == pytest.approx(0.194, abs=0.001)
    assert "low-gpu-memory-use" in names(r) or "low-gpu-memory-use" in also(r)
    a = next(a for a in r.also_true if a.name == "low-gpu-memory-use")
    assert a.overlaps.startswith("TD20") and "launch-bound" in a.overlaps
    assert "already claimed" in a.why


def test_alexnet_first_call_initialisation_is_startup_not_allocator():
    """The 6.0 s cudaFree and the stream creation inside the first aten::cudnn_convolution are
    one-off start-up, not allocator churn."""
    r = report("a100_alexnet_forward.pt.trace.json.gz")
    led = r.idle_ledger["cuda:0"]
    assert led["startup"] > 6008.692 + 732.657  # the cudaFree and cudaStreamCreateWithFlags (ms)
    assert "allocator-churn" not in names(r)


# ---- blocking calls that wait on queued work, built from a real fixture ----------------------


def _is_cpu_span(e: dict) -> bool:
    return str(e.get("cat")).lower() in ("cpu_op", "operator", "user_annotation", "python_function")


def _mutated(tmp_path: Path, with_wait: bool, delay_us: float = 50_000.0) -> Path:
    """v100_resnet50_workers4 with, in its third step, one kernel held back ``delay_us`` behind a
    dependency while the CPU blocks in a cudaStreamSynchronize for it: every event from the
    kernel's launch end on moves later by ``delay_us``; the sync covers the wait. With
    ``with_wait`` a cudaStreamWaitEvent precedes the launch (the dependency is visible)."""
    doc = json.loads(gzip.decompress((FIX / "v100_resnet50_workers4.pt.trace.json.gz").read_bytes()))
    ev = doc["traceEvents"]
    steps = sorted((e for e in ev if str(e.get("name", "")).startswith("ProfilerStep#")), key=lambda e: e["ts"])
    step = steps[2]
    kernels = [
        e
        for e in ev
        if str(e.get("cat")).lower() == "kernel"
        and step["ts"] + step["dur"] * 0.3 < e["ts"] < step["ts"] + step["dur"] * 0.7
    ]
    k = min(kernels, key=lambda e: e["ts"])
    corr = k["args"]["correlation"]
    launch = next(
        e
        for e in ev
        if str(e.get("cat")).lower() in ("cuda_runtime", "runtime") and (e.get("args") or {}).get("correlation") == corr
    )
    t_cut = launch["ts"] + launch["dur"]
    for e in ev:
        if e.get("ph") == "X" and e is not step and e["ts"] >= t_cut:
            e["ts"] += delay_us
        elif e.get("ph") == "X" and e["ts"] < t_cut < e["ts"] + e.get("dur", 0) and _is_cpu_span(e):
            e["dur"] += delay_us  # enclosing CPU spans (the step, its ops) stretch over the wait
        elif e.get("ph") in ("i", "I") and e["ts"] >= t_cut:
            e["ts"] += delay_us
    sync = dict(launch, name="cudaStreamSynchronize", ts=t_cut, dur=delay_us, args={"correlation": 10**9})
    ev.append(sync)
    if with_wait:
        ev.append(dict(launch, name="cudaStreamWaitEvent", ts=launch["ts"] - 2, dur=1, args={"correlation": 10**9 + 1}))
    out = tmp_path / f"held_{with_wait}.json.gz"
    out.write_bytes(gzip.compress(json.dumps(doc).encode()))
    return out


@pytest.mark.parametrize("with_wait", [True, False])
def test_blocking_sync_never_fires_where_the_blocking_call_waits_on_queued_work(tmp_path, with_wait):
    base = report("v100_resnet50_workers4.pt.trace.json.gz")
    r = analyze_trace(load(_mutated(tmp_path, with_wait)))
    n_steps = r.signals["step_count"]
    held_ms = 50.0 / n_steps  # the 50 ms hold, per complete step
    led, base_led = r.idle_ledger["cuda:0"], base.idle_ledger["cuda:0"]
    assert "blocking-sync" not in names(r) and "blocking-sync" not in also(r)
    assert led["blocking_sync"] == pytest.approx(base_led["blocking_sync"], abs=0.05)
    queued_cause = "dependency_wait" if with_wait else "other_idle"
    assert led[queued_cause] - base_led[queued_cause] == pytest.approx(held_ms, abs=0.1)


# ---- also true: code, name, overlap or floor, and why --------------------------------------


def test_also_true_in_json_text_and_never_failing_the_run(tmp_path):
    b = TraceBuilder()
    for i in range(3):
        t0 = i * 10_000
        b.step(i + 1, t0, 10_000)
        b.dataloader(t0, 3_000)  # dataloader-stall: 30% of the step
        b.op("aten::relu", t0 + 3_000, 100)
        b.kernel("relu_kernel", t0 + 3_050, t0 + 3_100, 6_000)
    b.memory(10, 1e9)  # 1 GB peak of a 32 GB device: low-gpu-memory-use's condition holds
    path = b.write(tmp_path / "t.json")
    r = tracedoc.analyze(path)
    a = also(r)
    assert "low-gpu-memory-use" in a  # nothing to amortise: 0 ms, below the floor
    assert a["low-gpu-memory-use"] == "below floor"
    d = r.to_dict()
    assert d["schema_version"] == 2 and "below_floor" not in d
    entry = next(x for x in d["also_true"] if x["name"] == "low-gpu-memory-use")
    assert set(entry) == {"code", "name", "overlaps", "why", "estimated_saving_ms", "uncapped_saving_ms"}
    assert entry["why"]
    import subprocess
    import sys

    txt = subprocess.run(
        [sys.executable, "-m", "tracedoc", "analyze", str(path), "--fail-on", "info"],
        capture_output=True,
        text=True,
        timeout=120,
        env={"COLUMNS": "200", "PATH": "/usr/bin:/bin"},
    )
    assert "Also true" in txt.stdout and "TD401 low-gpu-memory-use" in txt.stdout
    # --fail-on counts the ranked findings only: dataloader-stall (a warning) fails the run
    assert txt.returncode == 1
    only_also = subprocess.run(
        [sys.executable, "-m", "tracedoc", "analyze", str(path), "--fail-on", "info", "--ignore", "TD101"],
        capture_output=True,
        text=True,
        timeout=120,
        env={"COLUMNS": "200", "PATH": "/usr/bin:/bin"},
    )
    assert "low-gpu-memory-use" in only_also.stdout and only_also.returncode == 0, only_also.stdout


def test_every_also_true_skipped_and_suppressed_entry_says_why():
    for p in sorted(FIX.glob("*.gz")):
        r = report(p.name)
        for a in r.also_true:
            assert a.why.strip() and a.overlaps.strip(), (p.name, a)
        for s in r.skipped:
            assert s.reason.strip(), (p.name, s)


def test_inferred_iterations_from_optimizer_steps(tmp_path):
    """No ProfilerStep: three Optimizer.step annotations give two iterations, and a note says so."""
    b = TraceBuilder()
    for i in range(3):
        t0 = i * 1_000
        b.op("aten::conv2d", t0, 50)
        b.kernel("k", t0 + 10, t0 + 100, 300)
        b.op("Optimizer.step#SGD.step", t0 + 500, 100, cat="user_annotation")
    r = tracedoc.analyze(b.write(tmp_path / "t.json"))
    assert [s["step"] for s in r.steps] == [1, 2]
    assert r.signals["step_time_ms"] == pytest.approx(1.0)
    assert any("inferred from repeated Optimizer.step" in n for n in r.notes)


# ---- the end of recorded activity: Kineto's Record Window End instant -----------------------


def _with_window_end(b: TraceBuilder, ts: float) -> TraceBuilder:
    b.events.append({"ph": "i", "s": "g", "name": "Record Window End", "pid": "", "tid": "", "ts": b.base + ts})
    return b


@pytest.mark.parametrize("engine", ["fast", "reference"])
def test_both_loaders_keep_the_window_end(tmp_path, engine):
    b = _with_window_end(TraceBuilder(), 900)
    b.step(1, 0, 500)
    b.kernel("k", 10, 20, 100)
    b.events.append({"ph": "i", "name": "Record Window End", "ts": "late"})  # not a number: ignored
    t = load(b.write(tmp_path / "t.json"), engine=engine)
    assert t.record_window_end_us == pytest.approx(900)
    assert load(real_trace("mi300x_sglang_qwen3_prefill_decode.pt.trace.json.gz")).record_window_end_us is None
    # the real V100 trace: the instant 107.754 ms after its last event (raw ts 1623142624633484)
    w0 = load(real_trace("v100_resnet50_workers0.pt.trace.json.gz"), engine=engine)
    assert w0.record_window_end_us - w0.span_us == pytest.approx(107_754.0 - 9.0, abs=20.0)


def test_a_step_past_the_window_end_is_left_out_and_said(tmp_path):
    b = _with_window_end(TraceBuilder(), 2_500)
    for i in range(3):
        t0 = i * 1_000
        b.step(i + 1, t0, 1_000)
        b.op("aten::relu", t0, 50)
        b.kernel("relu_kernel", t0 + 10, t0 + 100, 300 if i < 2 else 900)  # step 3's kernel ends at 3000
    r = tracedoc.analyze(b.write(tmp_path / "t.json"))
    assert any("Step 3 runs past the end of recorded activity" in n for n in r.notes), r.notes
    assert r.signals["step_count"] == 2 and r.signals["step_time_ms"] == pytest.approx(1.0)


def test_the_refill_stops_at_the_end_of_recorded_activity(tmp_path):
    b = _with_window_end(TraceBuilder(), 700)
    b.step(1, 0, 1_000)
    b.kernel("A", 0, 10, 90)  # runs 10..100
    b.runtime("cudaDeviceSynchronize", 50, 60)  # 50..110
    b.kernel("B", 900, 905, 50)  # a later launch: without the window end the refill runs to 900
    c = SignalContext(load(b.write(tmp_path / "t.json")))
    led = {k: v * 1000 for k, v in idle_ledger(c)["cuda:0"].items() if v > 0}
    # 100..110 in the sync, 110..700 refill (the end of recorded activity), 700..900 untraced
    assert led["blocking_sync"] == pytest.approx(600)


# ---- the host-bound diagnosis (issue "A model of the step", item 3) ---------------------------


def test_timesformer_host_bound_diagnosis_names_the_preprocessing():
    """h100_timesformer_inference: 217.5 ms of video preprocessing before any GPU work. The
    finding says the host holds the step and names the preprocessing frames from the stacks."""
    r = report("h100_timesformer_inference.pt.trace.json.gz")
    f = next(f for f in r.findings if f.name == "host-bound-cpu-work")
    assert r.findings[0] is f and f.estimated_saving_ms > 217.5
    rows = f.evidence["host_bound_frames"]
    assert rows[0]["role"] == "dominant" and "preprocess" in rows[0]["frame"] and rows[0]["share"] >= 0.5
    assert any("read_video" in x["frame"] for x in rows[1:])


def test_host_bound_frames_without_stacks_name_the_cpu_ops(tmp_path):
    b = TraceBuilder()
    for i in range(2):
        t0 = i * 1000
        b.step(i + 1, t0, 1000)
        b.op("my_preprocess", t0, 600, cat="user_annotation")  # launches nothing: the GPU waits
        b.op("aten::relu", t0 + 600, 20)
        b.kernel("relu_kernel", t0 + 605, t0 + 620, 300)
    r = tracedoc.analyze(b.write(tmp_path / "t.json"))
    f = next(f for f in r.findings if f.name == "host-bound-cpu-work")
    # 0..600 in my_preprocess with nothing queued: 600 µs of the 1000 µs step (the slice); the replay
    # removes that CPU time and the step's CPU tail too, so it saves at least the slice, at most the step
    assert f.slice_saving_ms == pytest.approx(0.6)
    assert 0.6 <= f.replayed_saving_ms == f.estimated_saving_ms < 1.0
    top = f.evidence["host_bound_frames"][0]
    assert top["frame"] == "my_preprocess" and top["ms_per_step"] == pytest.approx(0.6) and top["share"] == 1.0


def test_the_dependency_note_names_the_api_never_the_traces_text(tmp_path):
    b = TraceBuilder()
    b.step(1, 0, 2000)
    b.runtime("cudaStreamWaitEvent\x1b]0;pwned\x07::error::x", 100, 10)  # still a stream wait by name
    b.kernel("consumer", 120, 1500, 100, stream=3)  # held back 125..1500: 69% of the step
    r = tracedoc.analyze(b.write(tmp_path / "t.json"))
    (note,) = [n for n in r.notes if "stream wait" in n]
    assert "(cudaStreamWaitEvent at 0.100 ms)" in note
    assert "\x1b" not in note and "::error" not in note and "pwned" not in note
