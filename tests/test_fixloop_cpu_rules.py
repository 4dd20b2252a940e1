"""The CPU signals and rules (TD501-TD503) on the recorded baselines of the CPU workloads.

Golden figures come from the stdlib count in ``fixtures/PROVENANCE.md`` (section 2:
``gzip`` + ``json``, events of the ``ProfilerStep`` thread) or from the hand-built trace
below, never from tracedoc itself.
"""

from __future__ import annotations

import gzip
import json
from pathlib import Path

import pytest
from tracebuilder import TraceBuilder

import tracedoc
from tracedoc.signals import SignalContext

FIXTURES = Path(__file__).resolve().parents[1] / "fixtures"
INPUT_BOUND = FIXTURES / "cpu_input_bound_baseline.pt.trace.json.gz"
DISPATCH_BOUND = FIXTURES / "cpu_dispatch_bound_baseline.pt.trace.json.gz"


def codes(report) -> dict[str, object]:
    return {f.code: f for f in report.findings}


def skipped(report) -> dict[str, str]:
    return {s.code: s.reason for s in report.skipped}


def variant(tmp_path: Path, src: Path, **host) -> Path:
    """A copy of a real trace with its ``tracedoc_host`` metadata changed (``None`` removes a key)."""
    doc = json.loads(gzip.decompress(src.read_bytes()))
    meta = doc["tracedoc_host"]
    for key, value in host.items():
        if value is None:
            meta.pop(key, None)
        else:
            meta[key] = value
    out = tmp_path / src.name
    out.write_bytes(gzip.compress(json.dumps(doc).encode()))
    return out


# ---------------------------------------------------------------- the recorded baselines
def test_dispatch_bound_baseline_fires_cpu_dispatch_overhead():
    r = tracedoc.analyze(DISPATCH_BOUND)
    f = codes(r)["TD502"]
    assert f.name == "cpu-dispatch-overhead"
    assert list(f.fix.knobs) == ["compile", "batch_size"]
    assert r.signals["cpu_ops_per_step"] == 7892  # PROVENANCE: stdlib count, 23,676 ops in 3 steps
    assert 0 < r.signals["cpu_op_overhead_us"] < 20
    assert 0 < f.estimated_saving_ms == pytest.approx(r.signals["cpu_dispatch_ms"], abs=0.01)
    assert f.estimated_saving_ms < r.signals["step_time_ms"]
    assert "TD101" in skipped(r)  # no DataLoader in that workload
    assert "TD501" not in codes(r)  # 2 intra-op threads, 0 workers, 2 cores (PROVENANCE metadata)
    assert r.signals["cpu_oversubscription_ratio"] == 1.0


def test_input_bound_baseline_fires_dataloader_stall_not_dispatch():
    r = tracedoc.analyze(INPUT_BOUND)
    stall = codes(r)["TD101"]
    assert stall.name == "dataloader-stall"
    assert r.signals["dataloader_share"] > 0.05  # PROVENANCE: stdlib 19.1 % of the step
    assert r.signals["dataloader_ms"] == pytest.approx(135.38, abs=0.5)  # PROVENANCE: stdlib 135.38 ms/step
    assert "TD502" not in codes(r)
    assert r.signals["cpu_ops_per_step"] == 265  # PROVENANCE: stdlib count
    assert r.signals["cpu_cores"] == 2 and r.signals["intra_op_threads"] == 2 and r.signals["dataloader_workers"] == 0
    assert "TD501" not in codes(r)


def test_dataloader_saving_on_the_cpu_leaves_the_decoding_a_core(tmp_path):
    """TD101 on a CPU-only trace: the decoding moved to a worker may still need a core.

    The slice, by hand from the PROVENANCE figures (stdlib): S = 708.9 ms, D = 135.38 ms,
    C = S - D = 573.52 ms on T = 2 threads, c = 2 cores: S' = max(573.52, (135.38 + 2 *
    573.52) / 2) = 641.21 ms, so the slice is 708.9 - 641.21 = 67.69 ms. The estimate is the
    CPU step model's range: at the high end the loading is waiting and leaves the step (the
    stall, 135.38 ms); at the low end the worker takes one of the two cores, the training
    process keeps one thread, and its arithmetic doubles (573.52 - s against the 135.38 ms the
    worker removes), so the low end is 0.
    """
    r = tracedoc.analyze(INPUT_BOUND)
    assert r.signals["dataloader_saving_ms"] == pytest.approx(67.69, abs=0.3)
    stall = codes(r)["TD101"]
    assert stall.estimated_saving_ms == pytest.approx(135.38, abs=0.5)
    assert stall.replayed_low_ms == pytest.approx(0.0, abs=1e-6)
    assert stall.slice_saving_ms == pytest.approx(67.69, abs=0.3)
    # with 8 cores the worker's core is free and the threads stay: the whole stall leaves the
    # step at both ends (low: P' = max(C = 573.52, D = 135.38, work / 8) = C)
    r = tracedoc.analyze(variant(tmp_path, INPUT_BOUND, cpu_cores=8))
    assert r.signals["dataloader_saving_ms"] == pytest.approx(135.38, abs=0.5)
    assert codes(r)["TD101"].replayed_low_ms == pytest.approx(135.38, abs=0.5)
    # one thread: the slice S' = max(573.52, (135.38 + 573.52) / 2 = 354.45) = 573.52, the
    # stall again; the low end keeps T' = T = 1, so the same
    r = tracedoc.analyze(variant(tmp_path, INPUT_BOUND, intra_op_threads=1))
    assert r.signals["dataloader_saving_ms"] == pytest.approx(135.38, abs=0.5)
    assert codes(r)["TD101"].replayed_low_ms == pytest.approx(135.38, abs=0.5)
    # loading already in workers (the time is waiting), or no host facts: the stall itself
    for host in ({"dataloader_workers": 1}, {"cpu_cores": None}):
        r = tracedoc.analyze(variant(tmp_path, INPUT_BOUND, **host))
        assert r.signals["dataloader_saving_ms"] == pytest.approx(r.signals["dataloader_ms"], abs=1e-9), host


def test_oversubscription_fires_when_workers_join_the_threads(tmp_path):
    # the same real trace, as if recorded with one DataLoader worker (2 threads + 1 worker on 2 cores)
    r = tracedoc.analyze(variant(tmp_path, INPUT_BOUND, dataloader_workers=1))
    f = codes(r)["TD501"]
    assert f.name == "cpu-oversubscription"
    assert r.signals["cpu_oversubscription_ratio"] == pytest.approx(1.5)
    assert "2 intra-op threads and 1 DataLoader workers share 2 cores" in f.message
    # time-sliced 1.5 ways: up to a third of the step (well above the 1% floor, so the fix-loop sees it)
    assert f.estimated_saving_ms == pytest.approx(r.signals["step_time_ms"] / 3, rel=1e-3)
    # variant: 1 thread + 1 worker fits the 2 cores
    r = tracedoc.analyze(variant(tmp_path, INPUT_BOUND, dataloader_workers=1, intra_op_threads=1))
    assert "TD501" not in codes(r) and "TD501" not in skipped(r)


def test_bf16_rule_needs_the_cpu_flags_and_the_precision(tmp_path):
    # on this machine's CPU (no AMX / AVX-512 BF16) the rule passes
    r = tracedoc.analyze(variant(tmp_path, INPUT_BOUND, amp="off"))
    assert "TD503" not in codes(r) and "TD503" not in skipped(r)
    assert r.signals["cpu_fp32_matmul_share"] > 0.2  # the convolutions
    # the same trace with amx_bf16 among the flags: bf16 autocast is offered (unsafe)
    doc = json.loads(gzip.decompress(INPUT_BOUND.read_bytes()))
    flags = doc["tracedoc_host"]["cpu_flags"] + ["amx_bf16"]
    r = tracedoc.analyze(variant(tmp_path, INPUT_BOUND, amp="off", cpu_flags=flags))
    f = codes(r)["TD503"]
    assert f.fix.safety == "unsafe"
    assert f.estimated_saving_ms == pytest.approx(r.signals["cpu_fp32_matmul_ms"] / 2, abs=0.01)
    # under autocast already: nothing fp32 to convert
    r = tracedoc.analyze(variant(tmp_path, INPUT_BOUND, amp="bf16", cpu_flags=flags))
    assert "TD503" not in codes(r)
    # without the precision in the metadata: skipped with the reason
    r = tracedoc.analyze(variant(tmp_path, INPUT_BOUND, amp=None, cpu_flags=flags))
    assert "precision of the matmuls is unknown" in skipped(r)["TD503"]


def test_traces_without_host_metadata_skip_with_the_reason():
    r = tracedoc.analyze(FIXTURES / "cpu_resnet18_baseline_img32.pt.trace.json.gz")
    reasons = skipped(r)
    for code in ("TD501", "TD503"):
        assert "no tracedoc_host metadata" in reasons[code]
    r = tracedoc.analyze(FIXTURES / "v100_resnet50_workers0.pt.trace.json.gz")
    assert "GPU activity" in skipped(r)["TD502"]


# ---------------------------------------------------------------- the dispatch slice by hand
def test_dispatch_slice_by_hand():
    # one 1000 us step; op A (0-400) encloses B (100-300); five 2 us ops at 500-550
    b = TraceBuilder(devices=[])
    b.step(1, 0, 1000)
    b.op("aten::linear", 0, 400).op("aten::addmm", 100, 200)
    for i in range(5):
        b.op("aten::view", 500 + 10 * i, 2)
    ctx = SignalContext(_load(b))
    # self times: A 200, B 200, views 2 each -> median c = 2 us
    assert ctx.get("cpu_op_overhead_us") == pytest.approx(2.0)
    assert ctx.get("cpu_ops_per_step") == 7
    # fixed cost: 7 ops x min(self, 2) = 14 us; uncovered: 1000 - 400 - 5 x 2 = 590 us -> 604 us
    assert ctx.get("cpu_dispatch_ms") == pytest.approx(0.604)
    assert ctx.get("cpu_dispatch_share") == pytest.approx(0.604)


def _load(builder: TraceBuilder):
    import tempfile

    with tempfile.TemporaryDirectory() as d:
        return tracedoc.load(builder.write(Path(d) / "t.json"))


def test_resnet18_cpu_training_is_not_dispatch_bound():
    # compute-bound convolutions: 1,772 ops per step (PROVENANCE fixture) stay under TD502's 3000
    r = tracedoc.analyze(FIXTURES / "cpu_resnet18_baseline_img32.pt.trace.json.gz")
    assert r.signals["cpu_ops_per_step"] == 1772
    assert "TD502" not in codes(r) and "TD502" not in skipped(r)
