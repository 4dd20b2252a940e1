"""The step model against an independent re-derivation.

Golden figures: ``tests/golden/replay_figures.json``, written by ``tests/golden/derive_replay.py``,
a stdlib-only script written from the step model's docstring alone (``tracedoc/signals/stepmodel.py``)
by a checker who did not read its code; its readings are in ``tests/golden/README.md`` ("Step
replay"). Tolerance: 0.1 ms per step window and per signal (issue "A model of the step").
"""

from __future__ import annotations

import functools
import gzip
import json
import math
from pathlib import Path

import pytest

from tracedoc.load import load
from tracedoc.signals import SignalContext
from tracedoc.signals.stepmodel import FIXES, critical_path_ms, fix_whatif, replay_saving_ms, replay_steps_us

ROOT = Path(__file__).resolve().parent.parent
GOLDEN = json.loads((ROOT / "tests" / "golden" / "replay_figures.json").read_text())["traces"]
TOL_US = 100.0  # 0.1 ms
SIGNALS = (
    "replay_error_ms",
    "dataloader_replay_saving_ms",
    "dataloader_replay_saving_low_ms",
    "tensor_core_replay_saving_ms",
    "tensor_core_kernel_saving_ms",
    "critical_path_host_share",
    "critical_path_device_share",
)
KEYS = ("baseline", "combined", *FIXES)


@functools.cache
def ctx(name: str) -> SignalContext:
    return SignalContext(load(ROOT / "fixtures" / name))


@functools.cache
def recorded_cores(name: str) -> int | None:
    """``tracedoc_host.cpu_cores`` of a fixture (stdlib read), None where the trace has no such metadata."""
    with gzip.open(ROOT / "fixtures" / name, "rt") as f:
        doc = json.load(f)
    host = doc.get("tracedoc_host") if isinstance(doc, dict) else None
    return (host or {}).get("cpu_cores")


def golden_key(name: str, key: str) -> str:
    """The derivation's figure to compare with ``key``. The derivation implements the low end's
    contention for a trace without host metadata only (f = CONTENTION_MAX, README S12); the H100
    walkthrough traces record ``cpu_cores`` 16, where the docstring's ``f = max(1, 2 / c)`` is 1 and
    the low end is the high end's what-if: compare it with the derivation's ``dataloader``."""
    cores = recorded_cores(name)
    if key == "dataloader_low" and cores is not None and cores >= 2:
        return "dataloader"
    return key


def test_every_gpu_fixture_has_figures():
    gpu = sorted(p.name for p in (ROOT / "fixtures").glob("*.gz") if load(p).has_gpu_activity)
    assert sorted(GOLDEN) == gpu and len(gpu) == 20  # 12 from other projects + the 8 H100 walkthrough recordings


@pytest.mark.parametrize("name", sorted(GOLDEN))
@pytest.mark.parametrize("key", KEYS)
def test_replayed_step_windows_match_the_rederivation(name, key):
    fig = GOLDEN[name]
    names = fig["fix_names"][key]
    ours = replay_steps_us(ctx(name), fix_whatif(ctx(name), names))
    theirs = fig["per_step_us"][golden_key(name, key)]
    assert len(ours) == len(theirs)
    for k, (a, b) in enumerate(zip(ours.tolist(), theirs, strict=True)):
        if b is None:
            assert math.isnan(a), (k, a)
        else:
            assert a == pytest.approx(b, abs=TOL_US), (key, k)
    if key != "baseline":
        assert replay_saving_ms(ctx(name), names) == pytest.approx(
            fig["signals"]["saving_ms"][golden_key(name, key)], abs=0.1
        )


@pytest.mark.parametrize("name", sorted(GOLDEN))
def test_signals_and_critical_path_match_the_rederivation(name):
    c = ctx(name)
    for s in SIGNALS:
        theirs_s = s
        if s == "dataloader_replay_saving_low_ms" and golden_key(name, "dataloader_low") == "dataloader":
            theirs_s = "dataloader_replay_saving_ms"  # the low end is the high end with 16 cores (golden_key)
        assert c.get(s) == pytest.approx(GOLDEN[name]["signals"][theirs_s], abs=0.1 if s.endswith("_ms") else 1e-3), s
    theirs = GOLDEN[name]["signals"]["critical_path_ms"]
    ours = critical_path_ms(c)
    assert set(ours) == set(theirs)
    for cause, v in theirs.items():
        assert ours[cause] == pytest.approx(v, abs=0.1), cause
