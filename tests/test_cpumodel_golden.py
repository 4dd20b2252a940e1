"""The CPU step model against an independent re-derivation.

Golden figures: ``tests/golden/cpumodel_figures.json``, written by ``tests/golden/derive_cpumodel.py``,
a stdlib-only script written from the written definition of ``tracedoc/signals/cpumodel.py`` (its
docstrings and constants, and those of ``cpu.py`` and ``steps.py`` it refers to) by a checker who did
not read its code; its readings are in ``tests/golden/README.md`` ("CPU step model"). Tolerance:
0.01 ms per figure. A trace the script does not model must be unavailable in tracedoc too.
"""

from __future__ import annotations

import functools
import gzip
import json
from pathlib import Path

import pytest

from tracedoc.load import load
from tracedoc.signals import SignalContext
from tracedoc.signals.base import SignalUnavailable
from tracedoc.signals.cpumodel import cpu_parts, cpu_replay_saving_ms

ROOT = Path(__file__).resolve().parent.parent
FIXTURES = ROOT / "fixtures"
DATA = json.loads((ROOT / "tests" / "golden" / "cpumodel_figures.json").read_text())
GOLDEN = DATA["traces"]
COMBINATIONS = [tuple(c) for c in DATA["combinations"]]
TOL_MS = 0.01
HOST_KEY = "tracedoc_host"

PARTS = {"S": "step", "D": "dataloader", "s": "serial", "A": "arithmetic", "M": "matmul"}
SIGNALS = ("cpu_model_error_ms", "cpu_serial_ms", "cpu_arithmetic_ms")


def figure_ids() -> list[str]:
    return (
        [f"part:{p}" for p in PARTS]
        + [f"signal:{s}" for s in SIGNALS]
        + [f"saving:{'+'.join(c)}" for c in COMBINATIONS]
    )


AVAILABLE = [(name, f) for name, fig in sorted(GOLDEN.items()) if fig["available"] for f in figure_ids()]
UNAVAILABLE = sorted(name for name, fig in GOLDEN.items() if not fig["available"])


@pytest.fixture(scope="module")
def variant_dir(tmp_path_factory) -> Path:
    return tmp_path_factory.mktemp("cpumodel_variants")


@functools.cache
def _ctx(name: str, variant_dir: Path) -> SignalContext:
    """Context of a golden key: a fixture path, or ``PATH#key=value`` (tracedoc_host changed)."""
    if "#" not in name:
        return SignalContext(load(FIXTURES / name))
    rel, change = name.split("#", 1)
    key, value = change.split("=", 1)
    with gzip.open(FIXTURES / rel, "rt") as f:
        doc = json.load(f)
    doc[HOST_KEY][key] = int(value)
    out = variant_dir / f"{Path(rel).name.removesuffix('.pt.trace.json.gz')}_{key}_{value}.pt.trace.json.gz"
    with gzip.open(out, "wt") as f:
        json.dump(doc, f)
    return SignalContext(load(out))


def test_every_fixture_is_covered():
    traces = sorted(str(p.relative_to(FIXTURES)) for p in FIXTURES.rglob("*.json.gz"))
    assert sorted(k for k in GOLDEN if "#" not in k) == traces
    assert any(GOLDEN[k]["available"] for k in GOLDEN)


@pytest.mark.parametrize(("name", "figure"), AVAILABLE)
def test_cpu_model_matches_the_rederivation(name, figure, variant_dir):
    fig, ctx = GOLDEN[name], _ctx(name, variant_dir)
    kind, what = figure.split(":", 1)
    if kind == "part":
        ours, theirs = getattr(cpu_parts(ctx), PARTS[what]), fig["parts_ms"][what]
    elif kind == "saving":
        ours, theirs = cpu_replay_saving_ms(ctx, what.split("+")), fig["savings_ms"][what]
    else:
        ours, reason = ctx.try_get(what)
        assert reason is None, reason
        theirs = fig[what]
    assert ours == pytest.approx(theirs, abs=TOL_MS), f"{name} {figure}: tracedoc {ours} vs script {theirs}"


@pytest.mark.parametrize("name", UNAVAILABLE)
def test_unmodelled_traces_are_unavailable_in_tracedoc(name, variant_dir):
    ctx = _ctx(name, variant_dir)
    for s in SIGNALS:
        value, reason = ctx.try_get(s)
        assert value is None and reason, (name, s, value, GOLDEN[name]["reason"])
    with pytest.raises(SignalUnavailable):
        cpu_parts(ctx)
    with pytest.raises(SignalUnavailable):
        cpu_replay_saving_ms(ctx, ["cpu_dispatch"])
