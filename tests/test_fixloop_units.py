"""Units of the fix-loop: the noise rule, the knob table and searches, --set typing."""

from __future__ import annotations

import pytest

from tracedoc.fixloop import knobs
from tracedoc.fixloop.noise import decide, spread
from tracedoc.fixloop.workload import FieldSpec, WorkloadError, WorkloadSpec


def test_noise_rule():
    d = decide([100, 100, 100], [110, 110, 110])
    assert d.keep and d.gain == 10 and d.noise == 0 and d.threshold == pytest.approx(2.0)
    assert "2% floor" in d.reason
    d = decide([90, 100, 110], [106, 108, 130])  # +8 but the candidate's spread is 24
    assert not d.keep and d.noise == 24 and d.threshold == 24 and "noise" in d.reason
    assert decide([100], [101.9]).keep is False  # below 2 %
    assert decide([100], [102.1]).keep is True
    assert decide([100, 100], [104, 104], min_gain=0.05).keep is False
    assert decide([100, 102], [106, 106], k=2).keep is True and decide([100, 102], [105, 105], k=2).keep is False
    assert spread([3.0]) == 0 and spread([1, 5, 3]) == 4
    with pytest.raises(ValueError):
        decide([], [1])


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
