"""Units of the fix-loop: the noise rule, the knob table and searches, --set typing."""

from __future__ import annotations

import pytest

from tracedoc.fixloop import knobs
from tracedoc.fixloop.noise import cv, decide, median_interval
from tracedoc.fixloop.workload import FieldSpec, WorkloadError, WorkloadSpec


def test_sign_test_interval():
    # coverage 1 - 2 * P(Bin(n, 1/2) <= k - 1), by hand: n=5: 1 - 2/32; n=8: 1 - 2*9/256; n=10: 1 - 2*11/1024
    assert median_interval(4) is None
    assert median_interval(5) == (1, pytest.approx(0.9375))
    assert median_interval(8) == (2, pytest.approx(1 - 18 / 256))
    assert median_interval(10) == (2, pytest.approx(1 - 22 / 1024))
    assert cv([5.0]) == 0 and cv([90, 110]) == pytest.approx(14.142135 / 100)


def test_noise_rule():
    d = decide([100] * 5, [110] * 5)
    assert d.keep and d.verdict == "keep" and d.ratio_low == d.ratio_high == pytest.approx(1.1)
    assert d.gain == 10 and d.confidence == pytest.approx(0.9375) and d.floor == pytest.approx(1.02)
    # one round of five below the floor: the interval [min, max] reaches below 1.02
    d = decide([100] * 5, [110, 111, 109, 101, 112], final=False)
    assert d.verdict == "undecided" and not d.keep and "straddles" in d.reason
    assert decide([100] * 5, [110, 111, 109, 101, 112]).verdict == "inconclusive"
    assert decide([100] * 5, [95, 99, 101, 97, 96]).verdict == "revert"  # high end 1.01 < 1.02
    assert decide([100] * 5, [101.9] * 5).verdict == "revert"  # below the 2 % floor
    assert decide([100] * 5, [104] * 5, min_gain=0.05).verdict == "revert"
    # paired: a load change that hits both sides of a round alike does not hide the gain
    d = decide([100, 50, 100, 60, 100], [120, 61, 121, 71, 119])
    assert d.keep and d.incumbent_cv > 0.25 and d.noisy
    assert decide([100] * 4, [200] * 4, final=False).verdict == "undecided"  # too few rounds
    with pytest.raises(ValueError):
        decide([], [])
    with pytest.raises(ValueError):
        decide([1, 2], [1])


def test_worker_values():
    assert knobs.worker_values(1) == [1]
    assert knobs.worker_values(2) == [1, 2]
    assert knobs.worker_values(6) == [1, 2, 4, 6]
    assert knobs.worker_values(8) == [1, 2, 4, 8]


def test_propose_value():
    cpu = {"type": "cpu"}
    gpu = {"type": "cuda", "bf16_supported": True}
    t = knobs.KNOB_TABLE
    assert knobs.propose_value(t["num_workers"], 0, cpu, 4, False) == 1
    assert knobs.propose_value(t["num_workers"], 2, cpu, 4, False) == 4
    assert knobs.propose_value(t["num_workers"], 4, cpu, 4, False) is None
    assert knobs.propose_value(t["num_workers"], 1, cpu, 4, True) is None  # search stopped
    assert knobs.propose_value(t["batch_size"], 32, gpu, 4, False) == 64
    assert knobs.propose_value(t["batch_size"], knobs.MAX_BATCH_SIZE, gpu, 4, False) is None
    assert knobs.propose_value(t["pin_memory"], False, gpu, 4, False) is True
    assert knobs.propose_value(t["pin_memory"], True, gpu, 4, False) is None  # already at target
    assert knobs.propose_value(t["amp"], "off", gpu, 4, False) == "bf16"
    assert knobs.propose_value(t["amp"], "off", {"type": "cuda", "bf16_supported": False}, 4, False) == "fp16"
    assert knobs.propose_value(t["input_dtype"], "float32", gpu, 4, False) == "uint8"
    # intra-op threads: cores minus the DataLoader workers, at least 1; 0 means the default (= cores)
    assert knobs.propose_value(t["num_threads"], 0, cpu, 2, False, config={"num_workers": 1}) == 1
    assert knobs.propose_value(t["num_threads"], 0, cpu, 2, False, config={"num_workers": 0}) is None
    assert knobs.propose_value(t["num_threads"], 1, cpu, 2, False, config={"num_workers": 2}) is None
    assert knobs.propose_value(t["num_threads"], 0, cpu, 8, False, config={"num_workers": 2}) == 6
    # amp on the CPU only where the CPU has bf16 matrix units
    assert t["amp"].applies_to("cpu", {"bf16_supported": True}) and not t["amp"].applies_to("cpu", {})


def test_knob_table_safety_and_devices():
    t = knobs.KNOB_TABLE
    assert {k for k, v in t.items() if v.safety == "unsafe"} == {"batch_size", "amp"}
    assert {k for k, v in t.items() if not v.applies_to("cpu")} == {"pin_memory", "non_blocking", "input_dtype", "amp"}
    assert all(v.applies_to("cuda") for v in t.values())
    assert knobs.allowed("safe", False) and not knobs.allowed("unsafe", False) and knobs.allowed("unsafe", True)
    assert not knobs.allowed("display-only", True)


def test_workload_knobs_override_table():
    k = knobs.resolve_knob("batch_size", "int", {"batch_size": {"safety": "safe"}}, None)
    assert k.safety == "safe" and k.search == "double"
    k = knobs.resolve_knob("amp", "str", {"amp": {"devices": ["cuda", "cpu"]}}, None)
    assert k.applies_to("cpu") and k.safety == "unsafe"
    k = knobs.resolve_knob("mode", "str", {"mode": {"values": ["a", "b", "c"]}}, "safe")
    assert k.search == "values" and knobs.propose_value(k, "a", {}, 1, False) == "b"
    assert knobs.propose_value(k, "c", {}, 1, False) is None
    assert knobs.resolve_knob("mode", "str", {}, "safe") is None
    assert knobs.resolve_knob("n", "int", {}, None).safety == "unsafe"


def test_field_coercion_and_sets():
    spec = WorkloadSpec(
        "w.py",
        {
            "batch_size": FieldSpec("batch_size", "int", 32),
            "pin_memory": FieldSpec("pin_memory", "bool", False),
            "lr": FieldSpec("lr", "float", 0.1),
            "amp": FieldSpec("amp", "str", "off", ("off", "bf16", "fp16")),
        },
    )
    cfg = spec.apply_sets(spec.defaults(), ["batch_size=64", "pin_memory=True", "lr=1e-3", "amp=bf16"])
    assert cfg == {"batch_size": 64, "pin_memory": True, "lr": 0.001, "amp": "bf16"}
    for bad, msg in [
        ("batch_size", "expected KNOB=VALUE"),
        ("batch_size=x", "integer"),
        ("pin_memory=maybe", "true/false"),
        ("amp=fp8", "one of off, bf16, fp16"),
        ("nope=1", "no 'nope'"),
        ("=3", "expected KNOB=VALUE"),
    ]:
        with pytest.raises(WorkloadError, match=msg):
            spec.apply_sets({}, [bad])
    assert WorkloadSpec.from_dict(spec.to_dict()) == spec


def test_command_module_imports_nothing_heavy():
    import subprocess
    import sys

    code = "import sys, tracedoc.fixloop.command; print('torch' in sys.modules, 'pandas' in sys.modules)"
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True).stdout
    assert out.split()[0] == "False"


def test_predicted_vs_measured_uses_the_one_error_convention():
    """(predicted - measured) / measured, as tracedoc diff; the prediction in the timed base
    (rescaled by the incumbent's timed / profiled step) when the profiled step is known."""
    from tracedoc.fixloop.summary import predicted_vs_measured

    # incumbent 100 ms/step (batch 32), candidate 80 ms (batch 32): measured 20 ms; predicted 30
    r = predicted_vs_measured(30.0, 100.0, 32, 80.0, 32)
    assert r["measured_saving_ms"] == pytest.approx(20.0) and r["error"] == pytest.approx(0.5)
    # the profiled step was 200 ms: the 30 ms read off the trace is 15 ms of the timed step
    r = predicted_vs_measured(30.0, 100.0, 32, 80.0, 32, incumbent_profiled_step_ms=200.0)
    assert r["predicted_saving_timed_ms"] == pytest.approx(15.0) and r["error"] == pytest.approx(-0.25)
    assert predicted_vs_measured(30.0, 100.0, 32, 100.0, 32)["error"] is None  # nothing measured
