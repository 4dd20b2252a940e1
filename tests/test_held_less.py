"""Intermediates no longer held for the whole analysis, or built in parts (issue 24): the
name masks, the Tensor Core kernel saving without the step model's schedule, the ledger painted
a group of windows at a time. Each against the whole computation it replaces."""

from __future__ import annotations

from unittest.mock import patch

import numpy as np
import pytest

from tests.conftest import real_trace
from tracedoc.load import load
from tracedoc.signals import SignalContext

TRACES = [
    "v100_resnet50_workers0.pt.trace.json.gz",
    "h100_resnet18_baseline.pt.trace.json.gz",
    "mi300x_sglang_qwen3_prefill_decode.pt.trace.json.gz",
]


def test_name_masks_hold_one_answer_per_name_and_give_a_new_array():
    from tracedoc.signals.strings import cached_name_mask, frame_names

    trace = load(real_trace("v100_resnet50_workers0.pt.trace.json.gz"), cache=None)
    ctx = SignalContext(trace)
    first = cached_name_mask(ctx, "kernels", "sgemm", lambda n: "sgemm" in n)
    codes, uniques = frame_names(ctx, "kernels")
    assert first.tolist() == ["sgemm" in str(uniques[c]) for c in codes]
    assert first.any() and not first.all()
    assert ctx._cache["mask_kernels_sgemm"].shape == (len(uniques),)  # per name, not per row
    first[:] = False  # a caller's own array: the next call is not changed by it
    assert cached_name_mask(ctx, "kernels", "sgemm", lambda n: False).any()


@pytest.mark.parametrize("name", TRACES)
def test_tensor_core_kernel_saving_is_the_schedule_sum_without_the_schedule(name):
    """The signal, computed from the kernels' launches, against the formula its docstring gives
    evaluated on the step model's schedule (the signal's code at b499623): the same float."""
    from tracedoc.signals.stepmodel import (
        _schedule,
        complete_mask,
        tensor_core_kernel_saving_ms,
        tensor_core_ratio,
        tf32_tensor_core_ratio,
    )

    ctx = SignalContext(load(real_trace(name), cache=None))
    sch = _schedule(ctx)
    complete = complete_mask(ctx)
    a_ok = (sch.a_step >= 0) & complete[np.maximum(sch.a_step, 0)]
    rows = sch.ev_rows[np.repeat(a_ok, np.diff(sch.ev_ptr))]
    r, r32 = tensor_core_ratio(ctx), tf32_tensor_core_ratio(ctx)
    want = float(sch.ev_dur[rows][sch.ev_tc_slow[rows]].sum()) * (1.0 - 1.0 / r)
    want += float(sch.ev_dur[rows][sch.ev_tf32[rows]].sum()) * (1.0 - 1.0 / r32)
    want = want / int(complete.sum()) / 1000.0
    fresh = SignalContext(ctx.trace)
    assert tensor_core_kernel_saving_ms(fresh) == want
    assert "stepmodel_schedule" not in fresh._cache


@pytest.mark.parametrize(
    "name", [*TRACES[:2], "mi250_toy_train.pt.trace.json.gz", "v100_resnet50_ddp_gpu_bound.pt.trace.json.gz"]
)
def test_the_ledger_painted_in_window_groups_is_the_whole_paint_inside_the_windows(name):
    """Groups of 64 bounds (every trace here is cut into many) against one group of every
    window (the whole paint of the windows' span): the per-window ledger and every cause's idle
    segments, to the bit."""
    import tracedoc.signals.intervals as iv
    from tracedoc.signals.ledger import LEDGER_KEYS, device_ledger_us, idle_segments, ledger_devices

    trace = load(real_trace(name), cache=None)

    groups = []
    real_groups = iv.window_groups

    def counted(*a):
        for g in real_groups(*a):
            groups.append(g[:2])
            yield g

    def ledger(group: int):
        ctx = SignalContext(trace)
        groups.clear()
        with patch.object(iv, "PAINT_GROUP_BOUNDS", group), patch("tracedoc.signals.ledger.window_groups", counted):
            out = []
            for d in ledger_devices(ctx):
                out.append(device_ledger_us(ctx, d).tobytes())
                for cause in LEDGER_KEYS:
                    s, e = idle_segments(ctx, d, cause)
                    out.append((s.tobytes(), e.tobytes()))
            return [len(groups), *out]

    parts, whole = ledger(64), ledger(1 << 62)
    assert parts[0] > 1 and whole[0] == 1
    assert parts[1:] == whole[1:]


@pytest.mark.parametrize("name", TRACES)
def test_runtime_ops_looked_up_in_parts_is_the_one_lookup(name):
    import tracedoc.signals.attribution as at

    trace = load(real_trace(name), cache=None)
    whole = at.runtime_ops(SignalContext(trace))
    with patch.object(at, "_CALLS_PART", 7):
        parts = at.runtime_ops(SignalContext(trace))
    assert (whole["op_pos"] >= 0).any()
    assert parts["op_pos"].to_numpy().tobytes() == whole["op_pos"].to_numpy().tobytes()
    assert parts["eligible"].to_numpy().tobytes() == whole["eligible"].to_numpy().tobytes()
    assert parts["op"].astype(object).fillna("").tolist() == whole["op"].astype(object).fillna("").tolist()


def test_op_codes_of_a_categorical_name_the_missing_as_the_factorisation_does():
    import pandas as pd

    from tracedoc.signals.attention import _op_codes

    values = ["aten::bmm", None, "aten::softmax", "aten::bmm", None]
    for column in (pd.Series(pd.Categorical(values)), pd.Series(values, dtype=object)):
        codes, names = _op_codes(column)
        assert [names[c] for c in codes] == ["aten::bmm", "", "aten::softmax", "aten::bmm", ""]
    codes, names = _op_codes(pd.Series(pd.Categorical(["a", "b"])))
    assert "" not in names.tolist() and codes.tolist() == [0, 1]
