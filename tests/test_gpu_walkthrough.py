"""The ResNet-18 walkthrough recorded on an H100 (fixtures/h100_resnet18_*.pt.trace.json.gz).

Eight cumulative changes, each a trace (provenance: fixtures/PROVENANCE.md, "H100 walkthrough"):
baseline -> workers -> pinned -> amp -> batch -> uint8 -> channels_last -> compile. The analysis
runs on the CPU; these tests need no GPU.

Expected figures come from the independent stdlib derivations in tests/golden/ (never from
tracedoc's own output): ``golden_figures.json`` (``derive_golden.py``: step windows, breakdown
shares, H2D copies per step, Tensor Core kernel share, memory), ``diagnoses_figures.json``
(``derive_diagnoses.py``: optimizer kernels) and, for the exposed H2D copy time, the same
script's interval helpers run here. What a rule must say follows from those figures and the
rule's written threshold (``rules/TD1xx_*.toml``).
"""

from __future__ import annotations

import importlib.util
import json
from functools import cache
from pathlib import Path

import pytest
from conftest import FIXTURES, real_trace

import tracedoc
from tracedoc.signals import SignalContext
from tracedoc.signals.stepmodel import TENSOR_CORE_PEAK_RATIO, tensor_core_ratio

GOLDEN_DIR = Path(__file__).parent / "golden"
GOLDEN = json.loads((GOLDEN_DIR / "golden_figures.json").read_text())["traces"]
DIAG = json.loads((GOLDEN_DIR / "diagnoses_figures.json").read_text())
CHANGES = ("baseline", "workers", "pinned", "amp", "batch", "uint8", "channels_last", "compile")
RUNS = FIXTURES / "gpu_runs" / "h100_walkthrough"
#: rules/TD101_dataloader_stall.toml: fires when the DataLoader holds more than 5% of the step
DATALOADER_THRESHOLD = 0.05
#: rules/TD103_h2d_copy_share.toml: fires when exposed H2D copies hold more than 5% of the step
H2D_EXPOSED_THRESHOLD = 0.05
#: rules/TD301_no_tensor_core_use.toml: needs tensor_core_kernel_share < 0.05
TC_SHARE_MAX = 0.05


def fname(change: str) -> str:
    return f"h100_resnet18_{change}.pt.trace.json.gz"


@cache
def report(change: str):
    return tracedoc.analyze(real_trace(fname(change)))


@cache
def ctx(change: str) -> SignalContext:
    return SignalContext(tracedoc.load(real_trace(fname(change))))


def codes(change: str) -> list[str]:
    return [f.code for f in report(change).findings]


def also(change: str) -> list[str]:
    return [a.code for a in report(change).also_true]


def golden(change: str) -> dict:
    return GOLDEN[fname(change)]


@cache
def derive_golden():
    spec = importlib.util.spec_from_file_location("derive_golden", GOLDEN_DIR / "derive_golden.py")
    mod = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(mod)
    return mod


@cache
def exposed_h2d_ms(change: str) -> float:
    """Exposed H2D copy time per complete step, ms, from derive_golden.py's loader and windows:
    the union of ``Memcpy HtoD`` intervals inside the complete windows minus the kernel union
    (TD103's written definition; the trace has no communication kernels)."""
    dg = derive_golden()
    ev, _, _ = dg.load(str(real_trace(fname(change))))
    gpu_all = ev[dg.KERNEL] + ev[dg.MEMCPY] + ev[dg.MEMSET]
    by_corr: dict = {}
    for g in gpu_all:
        by_corr.setdefault(g.get("args", {}).get("correlation"), []).append(g)
    ev[dg.RUNTIME].sort(key=lambda r: r["ts"])
    win, _, _, kept = dg.tb_windows(ev["steps"], ev[dg.RUNTIME], by_corr, gpu_all)
    windows = dg.merge(win[:kept])
    h2d = dg.merge([(m["ts"], m["end"]) for m in ev[dg.MEMCPY] if "HtoD" in m["name"]])
    kernels = dg.merge([(k["ts"], k["end"]) for k in ev[dg.KERNEL]])
    inside = dg.intersect(h2d, windows)
    return (dg.total(inside) - dg.total(dg.intersect(inside, kernels))) / kept / 1000.0


def timed_step_ms(change: str) -> float:
    """Median timed step of the run (result.json: 3 repeats, profiler off), ms."""
    import statistics

    index = CHANGES.index(change)
    res = json.loads((RUNS / f"{index:02d}_{change}" / "result.json").read_text())
    return statistics.median(res["step_time_ms"])


# ---- the device ---------------------------------------------------------------------------


@pytest.mark.parametrize("change", CHANGES)
def test_device_is_matched_as_an_h100(change):
    """deviceProperties name the H100; the step model takes the H100's Tensor Core / FP32 peak
    ratio (989.4 / 67, NVIDIA H100 datasheet), not the table's smallest (the unknown-device value)."""
    r = report(change)
    assert any("H100" in (d.get("name") or "") for d in r.trace["devices"])
    h100 = dict(TENSOR_CORE_PEAK_RATIO)["H100"]
    assert tensor_core_ratio(ctx(change)) == pytest.approx(h100)
    assert h100 != min(v for _, v in TENSOR_CORE_PEAK_RATIO)
    # memory share of the 85,017,493,504-byte device, as the derivation reads it
    assert r.signals["peak_memory_share"] == pytest.approx(golden(change)["memory"]["peak_share"], abs=1e-4)


# ---- step by step: what each change removed ----------------------------------------------------


def test_baseline_top_finding_is_the_dataloader_stall():
    g = golden("baseline")
    assert g["dataloader_share"] > 0.6  # the derivation: the DataLoader holds 63.7% of the step
    top = report("baseline").findings[0]
    assert top.code == "TD101" and top.name == "dataloader-stall"
    assert top.fix.knobs == ("num_workers",)
    assert report("baseline").signals["dataloader_share"] == pytest.approx(g["dataloader_share"], abs=1e-4)


def test_workers_demote_the_dataloader_stall():
    """With 8 workers the DataLoader share falls from 63.7% to 8.5% (derivation). 8.5% is still above
    TD101's 5% threshold, so the finding stays, no longer first and worth a fifteenth of before;
    with pinned memory (0.3%) it is gone."""
    g0, g1, g2 = golden("baseline"), golden("workers"), golden("pinned")
    assert g1["dataloader_share"] < g0["dataloader_share"] / 5
    assert (g1["dataloader_share"] > DATALOADER_THRESHOLD) == ("TD101" in codes("workers"))
    assert codes("workers")[0] != "TD101"
    before = next(f for f in report("baseline").findings if f.code == "TD101").estimated_saving_ms
    after = next(f for f in report("workers").findings if f.code == "TD101").estimated_saving_ms
    assert after < before / 10
    assert g2["dataloader_share"] < DATALOADER_THRESHOLD
    for change in CHANGES[2:]:
        assert golden(change)["dataloader_share"] < DATALOADER_THRESHOLD
        assert "TD101" not in codes(change) + also(change), change


@pytest.mark.parametrize("change", CHANGES)
def test_pageable_copies_vanish_after_pinned(change):
    """Two pageable H2D copies per step until ``pin_memory``, none after (derivation's count); TD102
    fires exactly where there are any."""
    pageable = sum(golden(change)["h2d_per_step"]["pageable"]) / len(golden(change)["complete_steps"])
    assert pageable == (2 if change in ("baseline", "workers") else 0)
    assert report(change).signals["pageable_h2d_count"] == pytest.approx(pageable)
    assert ("TD102" in codes(change)) == (pageable > 0)


def test_batch_quadruples_the_copy_and_uint8_quarters_it():
    """Batch 32 -> 128 copies 4x the float32 bytes; uint8 then copies a quarter (derivation)."""
    b = {c: golden(c)["h2d_per_step"]["bytes"][0] for c in ("amp", "batch", "uint8")}
    assert b["batch"] == 4 * b["amp"] == 77_071_360
    assert b["uint8"] == pytest.approx(b["batch"] / 4, rel=1e-4)
    for c in ("amp", "batch", "uint8"):
        assert report(c).signals["h2d_bytes_per_step"] == pytest.approx(b[c])


@pytest.mark.parametrize("change", CHANGES)
def test_h2d_copy_share_follows_the_exposed_copy_time(change):
    """TD103 fires where the exposed copy time (re-derived with derive_golden.py's helpers) is
    above 5% of the step: on workers (pageable copies, 2.9 ms of 26.9) and batch (77 MB per step),
    not after uint8."""
    exposed = exposed_h2d_ms(change)
    step = golden(change)["mean_step_ms_tb"]
    s = report(change).signals
    assert s["h2d_exposed_ms"] == pytest.approx(exposed, abs=2e-3)
    assert ("TD103" in codes(change) + also(change)) == (exposed / step > H2D_EXPOSED_THRESHOLD)
    if change == "batch":
        f = next(f for f in report(change).findings if f.code == "TD103")
        assert f.fix.knobs == ("input_dtype",)
        assert f.estimated_saving_ms == pytest.approx(0.75 * exposed, abs=2e-3)  # rule: a quarter of the bytes
    if change in ("uint8", "channels_last", "compile"):
        assert "TD103" not in codes(change)


@pytest.mark.parametrize("change", CHANGES)
def test_tensor_cores_in_use_so_no_amp_advice(change):
    """The fp32 runs already spend 34% of kernel time in Tensor Core kernels (cuDNN's TF32
    ``sm90_xmma_*_tf32f32_*`` convolutions on the H100; derivation), above TD301's 5%, so
    no-tensor-core-use never fires: nothing predicted the amp change."""
    assert golden(change)["kernels"]["tensor_core_time_share"] > TC_SHARE_MAX
    assert "TD301" not in codes(change) + also(change)


def test_batch_moves_the_step_onto_the_gpu():
    """At batch 128 the GPU is busy 91% of the step (derivation; 24% at batch 32 with amp), and
    the launch-bound finding whose fix names the batch size is gone."""
    assert golden("amp")["gpu_busy_share"] < 0.3 < 0.9 < golden("batch")["gpu_busy_share"]
    f = next(f for f in report("amp").findings if f.code == "TD201")
    assert "batch_size" in f.fix.knobs
    assert "TD201" not in codes("batch")
    assert report("batch").signals["gpu_busy_share"] == pytest.approx(golden("batch")["gpu_busy_share"], abs=1e-4)


def test_compile_is_recognised():
    """The compiled run is told apart: launch-bound-compiled (TD203, CUDA graphs) instead of
    launch-bound-gpu-idle (TD201, "use torch.compile")."""
    assert report("compile").signals["torch_compiled"] is True
    assert report("channels_last").signals["torch_compiled"] is False
    assert "TD203" in codes("compile") and "TD201" not in codes("compile")
    assert "TD201" in codes("channels_last")


@pytest.mark.parametrize("change", CHANGES)
def test_optimizer_is_foreach(change):
    """SGD on CUDA runs foreach: every optimizer kernel is multi-tensor (derive_diagnoses.py), so
    single-tensor-optimizer stays silent. The derivation counts a kernel in the window that holds
    its launch; a window holding none is absent from its per-step figures (counted 0 here)."""
    per = DIAG["optimizer"][f"h100_resnet18_{change}"]
    steps = [str(n) for n in golden(change)["complete_steps"]]
    kernels = sum(per.get(s, {}).get("kernels", 0) for s in steps) / len(steps)
    multi = sum(per.get(s, {}).get("multi_tensor_kernels", 0) for s in steps) / len(steps)
    s = report(change).signals
    assert s["optimizer_kernels_per_step"] == pytest.approx(kernels)
    assert s["optimizer_multi_tensor_share"] == pytest.approx(multi / kernels)
    assert "TD210" not in codes(change)


def test_timed_run_and_trace_disagree_where_the_profile_caught_warmup():
    """channels_last: the profiled steps (64.6, 44.3, 25.8 ms by the derivation's windows) are far
    from the timed median (18.4 ms, result.json); warmup-in-profile says so on that trace only."""
    w = golden("channels_last")["tb_window_ms"]
    assert max(w) > 2 * timed_step_ms("channels_last")
    assert "TD701" in codes("channels_last")
    for change in CHANGES:
        if change != "channels_last":
            assert "TD701" not in codes(change), change


# ---- the calibration rows (benchmarks/calibration.py) -----------------------------------------


def test_calibration_shows_the_misses_and_measures_per_sample():
    """Each change against the run before it: amp, which no finding advised, is a miss (not
    dropped); channels_last is layout-transposes' (TD320) since that rule exists; the batch change is measured per sample from result.json (timed
    step before - after * 32 / 128); workers is predicted within 25% of both measured changes."""
    spec = importlib.util.spec_from_file_location(
        "calibration", Path(__file__).parents[1] / "benchmarks" / "calibration.py"
    )
    cal = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(cal)
    rows = {r["change"]: r for r in cal.measure_walkthrough()}
    assert list(rows) == list(CHANGES[1:])
    assert {c for c, r in rows.items() if r["status"] == "miss"} == {"amp"}
    assert rows["channels_last"]["fix"] == "TD320"
    assert rows["amp"]["predicted_ms"] is None and rows["amp"]["measured_timed_ms"] is not None
    b = rows["batch"]
    assert b["per_sample"] and b["fix"] == "TD201"
    assert b["measured_timed_ms"] == pytest.approx(timed_step_ms("amp") - timed_step_ms("batch") * 32 / 128)
    w = rows["workers"]
    assert w["fix"] == "TD101" and w["predicted_ms"] == report("baseline").findings[0].estimated_saving_ms
    assert w["measured_timed_ms"] == pytest.approx(timed_step_ms("baseline") - timed_step_ms("workers"))
    assert abs(w["error_profiled"]) <= 0.25 and abs(w["error_timed"]) <= 0.25
