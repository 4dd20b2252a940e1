"""Intermediates no longer held for the whole analysis, or built in parts (issue 24): the
name masks, the Tensor Core kernel saving without the step model's schedule, the ledger painted
a group of windows at a time. Each against the whole computation it replaces."""

from __future__ import annotations

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
