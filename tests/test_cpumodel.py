"""The CPU step model (tracedoc.signals.cpumodel): a CPU step's parts and each CPU fix replayed
on them. Figures are worked out by hand from the module docstring (times in µs); the real
calibration pairs check the predictions in tests/test_calibration.py."""

from __future__ import annotations

from pathlib import Path

import pytest
from tracebuilder import TraceBuilder

import tracedoc
from tracedoc.fixloop.knobs import thread_companion
from tracedoc.load import load
from tracedoc.signals import SignalContext
from tracedoc.signals.cpumodel import cpu_parts, cpu_replay_saving_ms, replayed_step_ms
from tracedoc.signals.stepmodel import replay_saving_ms

FLAGS = ["avx2", "avx512f"]


def cpu_trace(tmp_path: Path, cores: int = 2, threads: int = 2, workers: int = 0, amp: str = "off") -> Path:
    """Three identical 1000 µs steps on one thread, no GPU. Per step: DataLoader 0-400; conv
    400-700 (300, matmul/conv); add 700-800 (100); ten 2 µs views at 810, 820, ... 900; the
    rest (180 µs) covered by no op. Every op is top-level, so its self time is its duration."""
    b = TraceBuilder(devices=[])
    for k in range(3):
        t0 = 1000.0 * k
        b.step(k + 1, t0, 1000)
        b.dataloader(t0, 400)
        b.op("aten::conv2d", t0 + 400, 300)
        b.op("aten::add", t0 + 700, 100)
        for i in range(10):
            b.op("aten::view", t0 + 810 + 10 * i, 2)
    doc = b.doc()
    doc["tracedoc_host"] = {
        "cpu_cores": cores,
        "intra_op_threads": threads,
        "dataloader_workers": workers,
        "amp": amp,
        "cpu_flags": FLAGS,
    }
    import json

    out = tmp_path / f"cpu_{cores}_{threads}_{workers}_{amp}.json"
    out.write_text(json.dumps(doc))
    return out


def ctx(path: Path) -> SignalContext:
    return SignalContext(load(path))


def test_the_parts_of_a_step_by_hand(tmp_path):
    # 12 ops per step: self times 300, 100 and ten of 2 -> the median fixed cost is 2 µs.
    # s = 12 x 2 (fixed costs) + 180 (uncovered) = 204; A = 1000 - 400 - 204 = 396; M = 300.
    p = cpu_parts(ctx(cpu_trace(tmp_path)))
    assert (p.step, p.dataloader, p.serial, p.arithmetic, p.matmul) == pytest.approx((1.0, 0.4, 0.204, 0.396, 0.3))
    c = ctx(cpu_trace(tmp_path))
    assert c.get("cpu_model_error_ms") == pytest.approx(0.0, abs=1e-9)
    assert c.get("cpu_serial_ms") == pytest.approx(0.204)
    assert c.get("cpu_dispatch_ms") == pytest.approx(0.204)  # the same slice, over all steps


def test_two_cores_the_worker_takes_a_thread_from_the_step(tmp_path):
    # High end: the loading is waiting and leaves the step: P' = s + A = 600, saving 400 µs.
    # Low end, c = 2, T = 2: one worker on a core of its own leaves T' = 1; chain = 204 +
    # 396 x 2 = 996, the worker's period 400, Graham (204 + 792 + 400) / 2 = 698: saving 4 µs.
    c = ctx(cpu_trace(tmp_path))
    assert c.get("dataloader_replay_saving_ms") == pytest.approx(0.4)
    assert c.get("dataloader_replay_saving_low_ms") == pytest.approx(0.004)


def test_four_cores_the_worker_has_its_own_core(tmp_path):
    # c = 4, T = 2: one worker leaves T' = 2; chain 600, worker 400, Graham 1396 / 4: the whole
    # DataLoader time leaves the step at the low end too.
    c = ctx(cpu_trace(tmp_path, cores=4))
    assert c.get("dataloader_replay_saving_ms") == pytest.approx(0.4)
    assert c.get("dataloader_replay_saving_low_ms") == pytest.approx(0.4)


def test_one_core_a_computing_worker_saves_nothing(tmp_path):
    c = ctx(cpu_trace(tmp_path, cores=1, threads=1))  # low end: P' >= all the work on one core = S
    assert c.get("dataloader_replay_saving_low_ms") == pytest.approx(0.0, abs=1e-9)
    assert c.get("dataloader_replay_saving_ms") == pytest.approx(0.4)  # a waiting loader still hides


def test_dispatch_and_bf16_and_all_together(tmp_path):
    c = ctx(cpu_trace(tmp_path))
    assert cpu_replay_saving_ms(c, ["cpu_dispatch"]) == pytest.approx(0.204)  # s' = 0
    assert cpu_replay_saving_ms(c, ["cpu_bf16"]) == pytest.approx(0.15)  # M' = 150
    # all three, high end: A' = 96 + 150 = 246, P' = 0 + 246: saving 754 µs, less than the sum
    together = replay_saving_ms(c, ["dataloader", "cpu_dispatch", "cpu_bf16"])
    assert together == pytest.approx(0.754)
    # low end: chain 0 + 246 x 2 = 492, worker 400, Graham (492 + 400) / 2 = 446: P' = 492, a
    # saving of 508 µs where the three alone save 4 + 204 + 150 = 358: fixes interact, never a sum
    p = cpu_parts(c)
    assert replayed_step_ms(p, ["dataloader_low", "cpu_dispatch", "cpu_bf16"]) == pytest.approx(0.492)
    assert replay_saving_ms(c, ["dataloader_low", "cpu_dispatch", "cpu_bf16"]) == pytest.approx(0.508)


def test_bf16_saves_nothing_under_autocast(tmp_path):
    c = ctx(cpu_trace(tmp_path, amp="bf16"))
    assert cpu_replay_saving_ms(c, ["cpu_bf16"]) == pytest.approx(0.0, abs=1e-9)


def test_a_loader_with_workers_is_not_modelled(tmp_path):
    c = ctx(cpu_trace(tmp_path, workers=1))
    value, reason = c.try_get("dataloader_replay_saving_ms")
    assert value is None and "already has workers" in reason
    with pytest.raises(Exception, match="does not replay"):
        replay_saving_ms(ctx(cpu_trace(tmp_path)), ["no_sync"])  # a GPU fix on a CPU trace


def test_the_finding_carries_the_replay_and_its_range(tmp_path):
    # four cores: TD101's replay is the whole DataLoader time at both ends, the slice beside it
    r = tracedoc.analyze(cpu_trace(tmp_path, cores=4))
    f = next(f for f in r.findings if f.code == "TD101")
    assert f.replayed_saving_ms == pytest.approx(0.4) and f.estimated_saving_ms == pytest.approx(0.4)
    assert f.replayed_low_ms == pytest.approx(0.4)
    assert f.slice_saving_ms is not None
    assert "CPU step model" in f.saving_basis
    # the headline is every replayed fix together, never more than the step
    assert r.recoverable is not None and r.recoverable["basis"] == "replay"
    assert r.recoverable["ms"] <= r.signals["step_time_ms"]


@pytest.mark.parametrize(
    ("threads", "value", "cpus", "expected"),
    [
        (0, 1, 2, ("num_threads", 0, 1)),  # default threads (one per CPU) + 1 worker > 2 CPUs
        (0, 2, 8, ("num_threads", 0, 6)),
        (0, 2, 2, ("num_threads", 0, 1)),  # at least one thread
        (1, 1, 2, None),  # already fits
        (4, 2, 8, None),
    ],
)
def test_the_fix_loop_gives_the_workers_their_cores(threads, value, cpus, expected):
    fields = {"num_workers": int, "num_threads": int}
    got = thread_companion("num_workers", value, {"num_threads": threads}, cpus, "cpu", fields)
    assert got == expected


def test_no_thread_change_on_a_gpu_or_without_the_field():
    assert thread_companion("num_workers", 1, {}, 2, "cuda", {"num_threads": int}) is None
    assert thread_companion("num_workers", 1, {}, 2, "cpu", {"num_workers": int}) is None
    assert thread_companion("batch_size", 64, {}, 2, "cpu", {"num_threads": int}) is None
