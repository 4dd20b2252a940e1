"""The interval painter, the ledger's queued-segment labels and the frames that are no longer
copied (issue 24: the same results in less memory).

``paint`` is checked against a brute-force reference written from its docstring: the bounds
are those of each layer's union (its intervals sorted, empty ones dropped, overlapping or
touching ones joined), clipped to the span; each elementary segment of the sorted distinct
bounds belongs to the first layer one of whose joined spans contains it (the layer covers
every point of it), or to ``len(layers)``.
"""

from __future__ import annotations

from unittest.mock import patch

import numpy as np
from hypothesis import given, settings
from hypothesis import strategies as st

from tests.conftest import real_trace
from tests.tracebuilder import V100, TraceBuilder
from tracedoc.load import load
from tracedoc.signals import SignalContext
from tracedoc.signals.attribution import kernel_ops
from tracedoc.signals.intervals import paint
from tracedoc.signals.steps import gpu_events, primary_gpu_events
from tracedoc.signals.tensor_core import window_kernels


def _union(a, b):
    out = []
    for x, y in sorted((x, y) for x, y in zip(a, b, strict=True) if y > x):
        if out and x <= out[-1][1]:
            out[-1][1] = max(out[-1][1], y)
        else:
            out.append([x, y])
    return out


def _reference(layers, lo, hi, extra):
    bounds = {lo, hi} | {min(max(x, lo), hi) for arr in extra for x in arr}
    for a, b in layers:
        bounds |= {min(max(x, lo), hi) for span in _union(a, b) for x in span}
    grid = sorted(bounds)
    out = []
    for s, e in zip(grid[:-1], grid[1:], strict=True):
        owner = len(layers)
        for k, (a, b) in enumerate(layers):
            if any(min(max(x, lo), hi) <= s and e <= min(max(y, lo), hi) for x, y in _union(a, b)):
                owner = k
                break
        out.append(owner)
    return grid, out


_times = st.integers(min_value=-5, max_value=40).map(float)
_span = st.tuples(_times, st.integers(min_value=0, max_value=12).map(float)).map(lambda t: (t[0], t[0] + t[1]))
_layer = st.lists(_span, max_size=6).map(
    lambda spans: (np.array([s for s, _ in spans], dtype=float), np.array([e for _, e in spans], dtype=float))
)


@settings(max_examples=300, deadline=None)
@given(st.lists(_layer, min_size=1, max_size=5), st.lists(_times, max_size=4))
def test_paint_matches_brute_force(layers, extra):
    lo, hi = 0.0, 30.0
    grid, assigned = paint(layers, lo, hi, [np.array(extra, dtype=float)])
    ref_grid, ref_assigned = _reference(layers, lo, hi, [extra])
    assert grid.tolist() == ref_grid
    assert assigned.tolist() == ref_assigned
    assert grid.dtype == np.float64
    assert assigned.dtype.itemsize == 1  # five layers fit one byte (the held result, issue 24)


def test_paint_cuts_a_layer_only_at_the_bounds_of_its_union():
    # nested and touching intervals of one layer (a CPU op and its children) make no bounds
    # inside their union; the other layer's bounds still cut it
    outer = (np.array([0.0, 1.0, 2.0, 6.0, 9.0]), np.array([6.0, 2.0, 3.0, 8.0, 9.0]))  # [0,8), an empty one
    grid, assigned = paint([(np.array([4.0]), np.array([5.0])), outer], 0.0, 10.0)
    assert grid.tolist() == [0.0, 4.0, 5.0, 8.0, 10.0]
    assert assigned.tolist() == [1, 0, 1, 2]


def test_paint_int_inputs_and_empty_layers():
    grid, assigned = paint([(np.array([1, 4]), np.array([3, 6])), (np.array([]), np.array([]))], 0, 10)
    assert grid.tolist() == [0.0, 1.0, 3.0, 4.0, 6.0, 10.0]
    assert assigned.tolist() == [2, 0, 2, 0, 2]


def test_paint_keeps_one_nan_bound_like_unique():
    # a NaN end (an event with no end) becomes one grid point after every number, as
    # np.unique(equal_nan=True) made it (the painter before issue 24 gave the same), so its span
    # runs to the end of [lo, hi)
    grid, assigned = paint([(np.array([2.0, 5.0]), np.array([np.nan, 7.0]))], 0.0, 10.0)
    assert grid[:-1].tolist() == [0.0, 2.0, 5.0, 7.0, 10.0] and np.isnan(grid[-1])
    assert assigned.tolist() == [1, 0, 0, 0, 0]


def _two_device_trace(tmp_path, outside: bool, second: bool = True):
    b = TraceBuilder(devices=[V100, dict(V100, id=1)] if second else [V100])
    for n in range(3):
        t0 = 1000.0 * n
        b.step(n, t0, 1000.0)
        b.kernel("ampere_sgemm_64x64_nn", t0 + 10, t0 + 20, 500.0, device=0)
        if second:
            b.kernel("ampere_sgemm_64x64_nn", t0 + 30, t0 + 40, 100.0, device=1)
    if outside:  # a kernel after the last step: not in any window
        b.kernel("ampere_sgemm_64x64_nn", 3100.0, 3110.0, 50.0, device=0)
    return load(b.write(tmp_path / f"t{int(outside)}.json"))


def test_primary_gpu_events_is_a_copy_only_when_it_filters(tmp_path):
    ctx = SignalContext(load(real_trace("v100_resnet50_workers0.pt.trace.json.gz")))  # one device: the frame itself
    assert primary_gpu_events(ctx) is gpu_events(ctx)
    ctx = SignalContext(_two_device_trace(tmp_path, outside=False))
    prim, g = primary_gpu_events(ctx), gpu_events(ctx)
    assert prim is not g
    assert set(prim["device"]) == {0} and len(prim) == (g["device"] == 0).sum() == 3


def test_window_kernels_is_a_copy_only_when_it_filters(tmp_path):
    ctx = SignalContext(_two_device_trace(tmp_path, outside=False, second=False))
    assert window_kernels(ctx) is kernel_ops(ctx)  # every kernel in a complete step: no copy
    ctx = SignalContext(_two_device_trace(tmp_path, outside=True))
    wk = window_kernels(ctx)
    assert wk is not kernel_ops(ctx)
    assert len(wk) == 3 and set(wk["device"]) == {0}  # the other device and the late kernel left out


def _windows(gaps_and_lengths) -> tuple[np.ndarray, np.ndarray]:
    """Sorted, disjoint windows from -10 on (touching and empty ones included): each
    ``(gap, length)`` starts ``abs(gap) % 7`` after the previous one's end."""
    spans, t = [], -10.0
    for gap, length in gaps_and_lengths:
        t += abs(gap) % 7
        spans.append((t, t + length))
        t += length
    return np.array([a for a, _ in spans], dtype=float), np.array([b for _, b in spans], dtype=float)


@settings(max_examples=200, deadline=None)
@given(
    st.lists(_layer, min_size=1, max_size=4),
    st.lists(st.tuples(_times, st.integers(min_value=0, max_value=9).map(float)), max_size=6),
    st.integers(min_value=1, max_value=5),
)
def test_per_window_in_chunks_sums_as_one_pass(layers, windows, chunk):
    """Summed a few windows at a time, the figures are those of one pass over the whole grid,
    to the last bit (each (window, label) adds the same segments in the same order), for any
    chunk size, empty and touching windows included."""
    import tracedoc.signals.intervals as iv

    ws, we = _windows(windows)
    lo, hi = -10.0, max(60.0, float(we[-1]) if len(we) else -10.0)
    grid, assigned = paint(layers, lo, hi, [ws, we])
    whole = iv._per_window_run(grid, assigned, len(layers) + 1, ws, we) if len(ws) else np.zeros((0, len(layers) + 1))
    with patch.object(iv, "PER_WINDOW_CHUNK", chunk):
        got = iv.per_window(grid, assigned, len(layers) + 1, ws, we)
    assert got.shape == whole.shape
    assert got.tobytes() == whole.tobytes()


@settings(max_examples=300, deadline=None)
@given(
    st.lists(_layer, min_size=1, max_size=4),
    st.lists(st.tuples(_times, st.integers(min_value=0, max_value=9).map(float)), min_size=1, max_size=6),
    st.integers(min_value=1, max_value=12),
    st.booleans(),
)
def test_paint_per_window_in_groups_is_the_whole_paint_to_the_bit(layers, windows, group, nan):
    """Painted a group of windows at a time (groups of 1 to 12 bounds, so a group is often one
    window, and intervals cross the groups' edges), the per-window sums are those of one paint
    of the whole span, to the last bit; a layer with a NaN bound takes the whole paint."""
    import tracedoc.signals.intervals as iv

    ws, we = _windows(windows)
    if nan:
        layers = [*layers, (np.array([1.0, np.nan]), np.array([3.0, 5.0]))]
    to_label = np.arange(len(layers) + 1, dtype=np.int8)[::-1].copy()  # any map of layers to labels
    grid, assigned = paint(layers, ws.min(), we.max(), [ws, we])
    whole = iv.per_window(grid, to_label[assigned], len(layers) + 1, ws, we)
    with patch.object(iv, "PAINT_GROUP_BOUNDS", group):
        got = iv.paint_per_window(layers, to_label, len(layers) + 1, ws, we)
    assert got.shape == whole.shape
    assert got.tobytes() == whole.tobytes()


def test_paint_holds_one_array_of_the_grid_not_three():
    """Two layers of 200,000 disjoint intervals each. Each layer's coverage was counted in two
    int64 arrays of the whole grid and the distinct bounds copied out of the sorted buffer:
    29 bytes per bound at the peak (code of 2234a73). An int8 count for a layer's union and the
    buffer compacted in place: 19."""
    import tracemalloc

    a = np.arange(200_000, dtype=float) * 10.0
    layers = [(a, a + 4.0), (a + 5.0, a + 8.0)]
    hi = float(a[-1]) + 10.0
    paint(layers, 0.0, hi)  # one-off allocations out of the way
    tracemalloc.start()
    try:
        grid, assigned = paint(layers, 0.0, hi)
        peak = tracemalloc.get_traced_memory()[1]
    finally:
        tracemalloc.stop()
    assert grid.size == 800_001 and assigned[:4].tolist() == [0, 2, 1, 2]
    assert peak / grid.size < 24, peak / grid.size


def test_disjoint_coverage_equals_the_general_count():
    from tracedoc.signals.intervals import _covered, _covered_disjoint

    m = 12
    disjoint = (np.array([0, 2, 2, 5, 11]), np.array([2, 2, 4, 9, 11]))  # touching, empty
    overlapping = (np.array([0, 1, 6]), np.array([3, 5, 8]))  # not a union: the general count
    for starts, ends in (disjoint, overlapping):
        assert _covered_disjoint(starts, ends, m).tolist() == _covered(starts, ends, m).tolist()
    assert _covered_disjoint(*disjoint, m).tolist() == [True] * 4 + [False] + [True] * 4 + [False] * 2


def test_is_union_is_true_exactly_when_merge_changes_nothing():
    from tracedoc.signals.intervals import is_union, merge

    cases = [
        ([0.0, 5.0, 9.0], [4.0, 8.0, 9.5]),  # a union
        ([0.0, 4.0], [4.0, 6.0]),  # touching: merge joins them
        ([0.0, 1.0], [5.0, 2.0]),  # nested
        ([3.0, 0.0], [4.0, 1.0]),  # out of order
        ([0.0, 2.0], [1.0, 2.0]),  # an empty one
        ([], []),
    ]
    for a, b in cases:
        a, b = np.array(a), np.array(b)
        ms, me = merge(a, b)
        unchanged = ms.tolist() == a.tolist() and me.tolist() == b.tolist()
        assert is_union(a, b) == unchanged, (a, b)


def _cells_to_runs(cells):
    runs = []
    for c in sorted(cells):
        if runs and runs[-1][1] == c:
            runs[-1][1] = c + 1
        else:
            runs.append([c, c + 1])
    return [(float(a), float(b)) for a, b in runs]


@settings(max_examples=300, deadline=None)
@given(_layer, _layer)
def test_subtract_is_the_set_difference_in_merged_form(a, b):
    """Integer bounds: each unit cell [t, t + 1) is in ``union(a) - union(b)`` or not, and the
    runs of such cells are the difference in merged form (empty intervals dropped, touching
    ones joined)."""
    from tracedoc.signals.intervals import subtract

    def cells(layer):
        return {t for x, y in zip(*layer, strict=True) for t in range(int(x), int(y))}

    s, e = subtract(*a, *b)
    assert list(zip(s.tolist(), e.tolist(), strict=True)) == _cells_to_runs(cells(a) - cells(b))
    assert s.dtype == np.float64 and e.dtype == np.float64


@settings(max_examples=200, deadline=None)
@given(_layer, _layer, _layer, st.integers(1, 3))
def test_subtract_in_parts_and_region_by_region_gives_the_same_arrays(a, b, c, part):
    """The pieces written a few at a time (``_SUBTRACT_PART`` of 1 to 3, so parts end inside an
    interval of ``a``) are the pieces written at once; and ``a`` less ``b`` then less ``c`` is
    ``a`` less their union, array for array (the step model's ``other_cpu`` region subtracts its
    regions in turn)."""
    from tracedoc.signals import intervals

    whole = intervals.subtract(*a, *b)
    saved = intervals._SUBTRACT_PART
    intervals._SUBTRACT_PART = part
    try:
        parts = intervals.subtract(*a, *b)
    finally:
        intervals._SUBTRACT_PART = saved
    assert [x.tolist() for x in parts] == [x.tolist() for x in whole]
    both = (np.concatenate([b[0], c[0]]), np.concatenate([b[1], c[1]]))
    in_turn = intervals.subtract(*intervals.subtract(*a, *b), *c)
    assert [x.tolist() for x in in_turn] == [x.tolist() for x in intervals.subtract(*a, *both)]


@settings(max_examples=300, deadline=None)
@given(_layer, _layer, st.booleans())
def test_union_of_is_the_merge_of_both(a, b, nest):
    """``union_of(a, b)`` is ``merge`` of the two concatenated, array for array, whether ``b``'s
    intervals lie inside ``a``'s spans (then dropped unmerged: ``nest`` keeps only those) or not."""
    from tracedoc.signals.intervals import merge, union_of

    if nest and a[0].size:
        k = np.searchsorted(a[0], b[0], side="right") - 1
        ok = (k >= 0) & (b[1] <= a[1][np.maximum(k, 0)])
        b = (b[0][ok], b[1][ok])
    got = union_of(*a, *b)
    want = merge(np.concatenate([a[0], b[0]]), np.concatenate([a[1], b[1]]))
    assert [x.tolist() for x in got] == [x.tolist() for x in want]
    assert got[0].dtype == np.float64 and got[1].dtype == np.float64


@settings(max_examples=300, deadline=None)
@given(_layer, st.lists(st.tuples(_times, _times), min_size=1, max_size=8))
def test_a_region_removed_whole_reads_its_covered_length_with_the_same_floats(layer, queries):
    """The step model's ``removed(a, b)`` for one union region at factor 0 (its covered length in
    ``[a, b)``, from the region's prefix sums) equals, float for float, the breakpoint form the
    general case builds (the same region listed twice takes that path), and the region's own
    covered length."""
    from tracedoc.signals.intervals import covered_length, merge
    from tracedoc.signals.stepmodel import _Removed

    region = merge(*layer)
    regions = {"r": region}
    whole = _Removed(regions, (("r", 0.0),))
    general = _Removed(regions, (("r", 0.0), ("r", 0.0)))
    a = np.array([min(x, y) + 0.5 for x, y in queries])
    b = np.array([max(x, y) + 0.25 for x, y in queries])
    assert (whole.whole is not None) == bool(region[0].size)
    assert whole(a, b).tolist() == general(a, b).tolist()
    if region[0].size:
        assert whole(a, b).tolist() == covered_length(*region, a, b).tolist()


def test_rows_of_is_a_view_for_one_run():
    from tracedoc.signals.steps import rows_of

    values = np.arange(10, dtype=float)
    for mask in (np.ones(10, bool), np.zeros(10, bool), np.arange(10) >= 4, (np.arange(10) % 3) == 0):
        got = rows_of(values, mask)
        assert got.tolist() == values[mask].tolist()
        one_run = mask.any() and np.ptp(np.flatnonzero(mask)) + 1 == mask.sum()
        assert np.shares_memory(got, values) == bool(one_run)
