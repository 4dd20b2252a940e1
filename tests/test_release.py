"""The engine's release of cached intermediates between its phases (issue 24).

A release drops values that are pure functions of the trace, so a report with the releases is
the report without them: the first test holds the engine to that on real traces.
"""

from __future__ import annotations

from unittest.mock import patch

import numpy as np
import pytest

from tests.conftest import real_trace
from tracedoc.engine import analyze_trace
from tracedoc.load import load
from tracedoc.signals import SignalContext
from tracedoc.signals.base import RELEASE_MIN_BYTES, held_bytes

# GPU training traces (ledger, replays, critical path), an AMD serving trace and a CPU-only one
TRACES = [
    "v100_resnet50_workers0.pt.trace.json.gz",
    "h100_resnet18_baseline.pt.trace.json.gz",
    "mi300x_sglang_qwen3_prefill_decode.pt.trace.json.gz",
    "cpu_only_gloo.pt.trace.json.gz",
]


def _report(trace, release: bool) -> dict:
    if release:
        return analyze_trace(trace).to_dict()
    with patch.object(SignalContext, "release", lambda self, *a, **k: 0):
        return analyze_trace(trace).to_dict()


@pytest.mark.parametrize("name", TRACES)
def test_a_report_with_releases_is_the_report_without(name):
    trace = load(real_trace(name), cache=None)
    assert _report(trace, True) == _report(trace, False)


def test_the_engine_releases_the_schedule_and_the_rules_intermediates():
    """After an analysis the step model's schedule, the ledger's paint and the op view's calls
    are no longer held; the small per-device ledger is."""
    trace = load(real_trace("h100_resnet18_baseline.pt.trace.json.gz"), cache=None)
    seen: list[SignalContext] = []
    init = SignalContext.__init__

    def keep(self, *a, **k):
        init(self, *a, **k)
        seen.append(self)

    released: list[int] = []
    real_release = SignalContext.release

    def count(self, *a, **k):
        released.append(real_release(self, *a, **k))
        return released[-1]

    with patch.object(SignalContext, "__init__", keep), patch.object(SignalContext, "release", count):
        analyze_trace(trace)
    (ctx,) = seen
    # the ledger's paint after the window checks; before the model's build, after each of its
    # three stages (the GPU events' flags, the schedule, the anchor order), after the model's
    # signals
    assert len(released) == 6 and released[0] > 0 and released[1] > 0 and released[5] > 0
    big = {k for k, v in ctx._cache.items() if held_bytes(v) >= RELEASE_MIN_BYTES}
    assert "stepmodel_schedule" not in ctx._cache
    assert not any(k.startswith("ledger_paint_") for k in big)
    assert "ledger_ms_0" in ctx._cache or any(k.startswith("ledger_ms_") for k in ctx._cache)


def test_the_schedule_is_built_without_what_the_flags_were_built_from():
    """build_model releases the kernels' launching ops and attention classes, read for the GPU
    events' flags, before the schedule's build: held under it, they were its peak (issue 24)."""
    import tracedoc.signals.stepmodel as sm

    trace = load(real_trace("h100_resnet18_baseline.pt.trace.json.gz"), cache=None)
    ctx = SignalContext(trace)
    held_at_build: list[set[str]] = []
    schedule = sm._schedule

    def spy(c):
        held_at_build.append(set(c._cache))
        return schedule(c)

    # every intermediate counts as large: on a trace this small, some are below the floor
    with patch.object(sm, "_schedule", spy), patch("tracedoc.signals.base.RELEASE_MIN_BYTES", 1):
        assert sm.build_model(ctx)
    assert "stepmodel_event_flags" in held_at_build[0]
    assert not {"kernel_ops", "attention_kernels"} & held_at_build[0]
    # the schedule holds the flags' arrays themselves, not copies
    sch, flags = ctx._cache["stepmodel_schedule"], ctx._cache["stepmodel_event_flags"]
    assert sch.ev_tc_slow is flags.tc_slow and sch.ev_attention is flags.attention


def test_the_window_checks_run_before_the_step_model_is_built():
    """The engine's window checks run first: after the rules, their transients sat on the step
    model's schedule and replays, the analysis's peak on 4 M small events (issue 24)."""
    import tracedoc.signals.stepmodel as sm

    trace = load(real_trace("h100_resnet18_baseline.pt.trace.json.gz"), cache=None)
    held: list[set[str]] = []
    build = sm.build_model

    def spy(ctx):
        held.append(set(ctx._cache))
        return build(ctx)

    with patch.object(sm, "build_model", spy):
        analyze_trace(trace)
    assert len(held) == 1 and "window_checks" in held[0]


def test_the_rules_run_without_the_ledgers_paint():
    """The window checks read the primary device's ledger; its paint (the largest intermediate
    then, 34 MiB of 4 M small events) is released before the rules, which read the cached
    per-step ledger (issue 24). The report is the same (test_a_report_with_releases_...)."""
    import tracedoc.engine as engine

    trace = load(real_trace("h100_resnet18_baseline.pt.trace.json.gz"), cache=None)
    held: list[set[str]] = []
    run = engine.run_rules

    def spy(ctx, rules):
        held.append(set(ctx._cache))
        return run(ctx, rules)

    with patch.object(engine, "run_rules", spy):
        analyze_trace(trace)
    (keys,) = held
    assert "ledger_ms_0" in keys and "window_checks" in keys
    assert not any(k.startswith("ledger_paint_") for k in keys)


def test_release_keeps_small_values_and_those_it_is_told_to():
    trace = load(real_trace("v100_resnet50_workers0.pt.trace.json.gz"), cache=None)
    ctx = SignalContext(trace)
    big = np.zeros(RELEASE_MIN_BYTES // 8)
    ctx.cached("big", lambda: (big, {"x": big[:10]}))  # a view of the same base counts once
    ctx.cached("kept_big", lambda: np.ones(RELEASE_MIN_BYTES))
    ctx.cached("small", lambda: np.ones(RELEASE_MIN_BYTES // 16))
    assert held_bytes(ctx._cache["big"]) == big.nbytes
    assert ctx.release(keep=lambda key: key.startswith("kept_")) == big.nbytes
    assert set(ctx._cache) == {"kept_big", "small"}
    # a released value is built again when asked for
    assert ctx.cached("big", lambda: "rebuilt") == "rebuilt"


def test_held_bytes_counts_frames_and_categorical_codes_not_their_strings():
    import pandas as pd

    df = pd.DataFrame({"t": np.arange(1000, dtype=np.float64), "name": pd.Categorical(["a", "b"] * 500)})
    assert held_bytes(df) == 1000 * 8 + df["name"].array.codes.nbytes
    assert held_bytes(("text", 3, None)) == 0


def test_release_does_not_count_the_trace_columns_an_intermediate_views():
    trace = load(real_trace("h100_resnet18_baseline.pt.trace.json.gz"), cache=None)
    ctx = SignalContext(trace)
    n = len(trace.kernels)
    ctx.cached("view", lambda: (trace.kernels["ts_us"].to_numpy(), trace.kernels["name"]))
    ctx.cached("copy", lambda: trace.kernels["ts_us"].to_numpy().copy())
    assert ctx.release(min_bytes=1) == n * 8  # the copy's bytes; dropping the view frees nothing
    assert set(ctx._cache) == {"view"}


def test_a_failing_model_build_ends_a_signal_not_the_analysis():
    """The engine builds the step model outside any signal (before its release): a bug an odd
    trace reaches there must end the replays' signals with their reason, as it did inside them."""
    import tracedoc.signals.stepmodel as sm

    trace = load(real_trace("h100_resnet18_baseline.pt.trace.json.gz"), cache=None)

    def broken(ctx):
        raise TypeError("unhashable type: 'list'")

    with patch.object(sm, "_anchor_order", broken):
        report = analyze_trace(trace)
    assert "internal error" in report.signals_unavailable["replay_error_ms"]
    assert report.findings


def test_first_dims_of_a_list_of_tensors_can_be_a_set_member():
    from tracedoc.signals.attention import _first_dims

    dims = _first_dims("[[[2, 3], [2, 3]], []]")
    assert {dims} and dims == ((2, 3), (2, 3))
