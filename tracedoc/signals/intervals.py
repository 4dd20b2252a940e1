"""Vectorised interval arithmetic on half-open intervals ``[start, end)`` in µs.

Everything here is numpy, O(n log n), with no Python loop over events, so it scales
to traces of millions of events.
"""

from __future__ import annotations

from typing import Any, Iterator

import numpy as np


def merge(starts: np.ndarray, ends: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """Union of intervals as sorted, disjoint ``(starts, ends)`` arrays.

    Intervals with ``end <= start`` are dropped. Touching intervals are merged.
    """
    s = np.asarray(starts, dtype=np.float64)
    e = np.asarray(ends, dtype=np.float64)
    keep = e > s
    if not keep.all():
        s, e = s[keep], e[keep]
    del keep
    if s.size == 0:
        return s.copy(), e.copy()
    # intervals that come sorted by start (the usual case: one thread's calls, a union) need no
    # sort, and each temporary goes once used: merges of the schedule's 0.7 M spans on 1 M small
    # events made its build's peak (issue 24)
    if not (s[1:] >= s[:-1]).all():
        order = np.argsort(s, kind="stable")
        s, e = s[order], e[order]
        del order
    run_max = np.maximum.accumulate(e)
    # a new merged block starts where the start exceeds every earlier end
    new_block = np.empty(s.size, dtype=bool)
    new_block[0] = True
    np.greater(s[1:], run_max[:-1], out=new_block[1:])
    del run_max
    idx = np.flatnonzero(new_block)
    del new_block
    block_ends = np.maximum.reduceat(e, idx)
    return s[idx], block_ends


def covered_mask(starts: np.ndarray, ends: np.ndarray, grid: np.ndarray) -> np.ndarray:
    """For sorted boundaries ``grid`` (length m), whether each elementary segment
    ``[grid[j], grid[j+1])`` (m-1 of them) lies inside at least one interval.

    Requires every interval boundary to be in ``grid`` (segments never straddle one).
    """
    if len(starts) == 0:
        return np.zeros(max(len(grid) - 1, 0), dtype=bool)
    m = len(grid)
    # n_started[j] = #{s <= grid[j]}. As grid is sorted, s <= grid[j] exactly when
    # j >= searchsorted(grid, s, "left"); so count each s at that index and take the
    # running sum. Same integers as searching every grid point among the sorted starts,
    # but with len(starts) binary searches instead of len(grid) (NaN lands at m: never counted).
    return _covered(np.searchsorted(grid, starts, side="left"), np.searchsorted(grid, ends, side="left"), m)


def _covered(start_pos: np.ndarray, end_pos: np.ndarray, m: int) -> np.ndarray:
    # open intervals at segment j = #{start_pos <= j} - #{end_pos <= j}: one running sum of the
    # difference of the two counts (integers, so the same as two running sums subtracted)
    # in place: two int64 arrays of m + 1 live at once, not three (issue 24: a layer's m is the
    # whole grid, 2 M bounds on 1 M small events)
    delta = np.bincount(start_pos, minlength=m + 1)
    delta -= np.bincount(end_pos, minlength=m + 1)
    np.cumsum(delta, out=delta)
    return delta[: max(m - 1, 0)] > 0


def _covered_disjoint(start_pos: np.ndarray, end_pos: np.ndarray, m: int) -> np.ndarray:
    """:func:`_covered` for the grid positions of sorted, disjoint intervals (a layer's union:
    :func:`_union`), in one int8 array of m + 1: once the intervals made empty by the clipping
    are dropped, the starts rise strictly, so do the ends, and a start meets at most the end
    before it (the two cancel), so the running sum is 0 or 1. The general count held two int64
    arrays of the whole grid, 16 times as much (32 MiB at the step breakdown's peak on 1 M small
    events, issue 24). Positions that break that shape take :func:`_covered`."""
    keep = start_pos < end_pos
    s, e = start_pos[keep], end_pos[keep]
    if s.size > 1 and not (s[1:] >= e[:-1]).all():
        return _covered(start_pos, end_pos, m)
    delta = np.zeros(m + 1, dtype=np.int8)
    delta[s] = 1
    delta[e] -= 1  # an end meets no start but the next one's, and then the two cancel
    np.cumsum(delta, out=delta)
    return delta[: max(m - 1, 0)] > 0


def overlap_per_window(starts: np.ndarray, ends: np.ndarray, win_start: np.ndarray, win_end: np.ndarray) -> np.ndarray:
    """Length (µs) of the union of the intervals that falls inside each window.

    Windows must be sorted and disjoint. Returns an array of ``len(win_start)``.
    """
    ms, me = merge(starts, ends)
    out = np.zeros(len(win_start), dtype=np.float64)
    if ms.size == 0 or len(win_start) == 0:
        return out
    # cumulative covered length up to time t, evaluated at window edges
    cum = np.concatenate([[0.0], np.cumsum(me - ms)])

    def covered_until(t: np.ndarray) -> np.ndarray:
        k = np.searchsorted(ms, t, side="right")  # blocks starting at or before t
        full = cum[np.maximum(k - 1, 0)]
        partial = np.where(k > 0, np.minimum(t, me[np.maximum(k - 1, 0)]) - ms[np.maximum(k - 1, 0)], 0.0)
        return np.where(k > 0, full + partial, 0.0)

    return covered_until(np.asarray(win_end, float)) - covered_until(np.asarray(win_start, float))


def subtract(
    a_starts: np.ndarray, a_ends: np.ndarray, b_starts: np.ndarray, b_ends: np.ndarray
) -> tuple[np.ndarray, np.ndarray]:
    """Set difference ``union(a) - union(b)`` as sorted disjoint intervals (the form
    :func:`merge` returns: empty ones dropped, touching ones joined).

    Each interval of ``union(a)`` is cut by the gaps of ``union(b)`` (its complement: gap ``j``
    is ``[be[j - 1], bs[j])``, with ``-inf`` and ``+inf`` at the two ends) that it overlaps:
    every bound is one of the inputs' own, nothing is computed, and the pieces are already in
    merged form (the gaps of a union neither overlap nor touch, nor do the intervals of
    ``union(a)``). O((n_a + n_b) log). An input that is already a union (:func:`is_union`) is
    read as it is, and the pieces are written into the result :data:`_SUBTRACT_PART` at a time,
    so the transient is the result and a part's indices: the schedule's CPU regions (0.7 M spans
    on 1 M small events) made the step model's schedule build peak at this function (issue 24).
    """
    as_, ae = _as_union(a_starts, a_ends)
    bs, be = _as_union(b_starts, b_ends)
    if as_.size == 0 or bs.size == 0:
        return as_, ae
    nb = bs.size
    first = np.searchsorted(bs, as_, side="right")  # the first gap ending after the start
    stop = np.searchsorted(be, ae, side="left") + 1  # one past the last gap starting before the end
    counts = np.maximum(stop - first, 0)
    ends_at = np.cumsum(counts)  # pieces of a's intervals up to and including each
    total = int(ends_at[-1])
    out_s, out_e = np.empty(total), np.empty(total)
    for p0 in range(0, total, _SUBTRACT_PART):
        flat = np.arange(p0, min(p0 + _SUBTRACT_PART, total))
        owner = np.searchsorted(ends_at, flat, side="right")  # the interval of a each piece cuts
        gap = flat - (ends_at[owner] - counts[owner]) + first[owner]
        del flat
        gs = np.where(gap > 0, be[np.maximum(gap - 1, 0)], -np.inf)
        np.maximum(gs, as_[owner], out=out_s[p0 : p0 + gap.size])
        ge = np.where(gap < nb, bs[np.minimum(gap, nb - 1)], np.inf)
        np.minimum(ge, ae[owner], out=out_e[p0 : p0 + gap.size])
        del gs, ge, gap, owner
    keep = out_e > out_s  # every piece is non-empty (gap and interval overlap); kept as a guard
    if not keep.all():
        return out_s[keep], out_e[keep]
    return out_s, out_e


def union_of(
    a_starts: np.ndarray, a_ends: np.ndarray, b_starts: np.ndarray, b_ends: np.ndarray
) -> tuple[np.ndarray, np.ndarray]:
    """``merge`` of the intervals of ``a`` and ``b`` together (the same arrays), without sorting
    every one of them: ``b``'s intervals that lie inside one span of ``union(a)`` add nothing and
    are dropped first, so where ``b`` nests in ``a`` (launch calls inside the ops that make them)
    the result is ``union(a)`` itself, and only ``b``'s other intervals are merged into it. On
    1 M small events, merging the concatenation (its sort, its running maximum) was the step
    model's schedule build's peak (issue 24)."""
    us, ue = _as_union(a_starts, a_ends)
    bs = np.asarray(b_starts, dtype=np.float64)
    be = np.asarray(b_ends, dtype=np.float64)
    if us.size and bs.size:
        k = np.searchsorted(us, bs, side="right") - 1
        inside = (k >= 0) & (be <= ue[np.maximum(k, 0)]) & (bs >= us[np.maximum(k, 0)])
        del k
        if inside.any():
            bs, be = bs[~inside], be[~inside]
    if not bs.size:
        return us, ue
    return merge(np.concatenate([us, bs]), np.concatenate([ue, be]))


#: Pieces :func:`subtract` writes at once.
_SUBTRACT_PART = 1 << 16


def _as_union(starts: np.ndarray, ends: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """``merge(starts, ends)``, but the arrays as they are (float64, no copy) when they are a
    union already (:func:`is_union`): ``merge`` would return the same values."""
    s = np.asarray(starts, dtype=np.float64)
    e = np.asarray(ends, dtype=np.float64)
    if s.size and is_union(s, e):
        return s, e
    return merge(s, e)


def paint(
    layers: list[tuple[np.ndarray, np.ndarray]], lo: float, hi: float, extra_bounds: list[np.ndarray] | None = None
) -> tuple[np.ndarray, np.ndarray]:
    """Cut ``[lo, hi)`` into elementary segments and give each the first layer that covers it.

    Args:
        layers: ``(starts, ends)`` interval arrays in priority order (first wins).
        lo, hi: the span to cover, µs.
        extra_bounds: more boundaries to cut at (e.g. step windows), clipped to the span.

    Returns:
        ``(grid, assigned)``: sorted boundaries (length m, float64) and, for each of the m-1
        segments ``[grid[j], grid[j+1])``, the index of the first layer covering it, or
        ``len(layers)`` when none does (the smallest integer type that holds ``len(layers)``).
        Vectorised: O(n log n) for the grid, then O(n_k log m) per layer.

    Each layer is painted as the union of its intervals (:func:`_union`): a layer covers a
    segment when any of its intervals does, so the bounds inside that union cut nothing the
    layer's priority can see (every bound of another layer is still in the grid), and the
    segments they would split get the same layer. Nested CPU ops are the common case: on a
    1 M-event H100 training trace the CPU-work layer's 376,350 ops are 67,350 disjoint spans,
    and the step breakdown's grid has 0.58 M bounds instead of 1.2 M (issue 24). The sums per
    window can differ from painting every bound in the last bits (segments are added whole
    rather than in pieces).

    Memory: every bound is clipped into one preallocated float64 buffer that is sorted in
    place, and each layer's bounds are found in the grid by binary search one layer at a
    time, so the transient is about 9 bytes per bound plus one layer's positions (issue 24:
    ``np.unique(..., return_inverse=True)`` over all bounds held the bounds, their clipped
    copies, the sort permutation and the inverse, about 40 bytes per bound).
    """
    unions = [_union(a, b) for a, b in layers]
    layers = [(a, b) for a, b, _ in unions]
    disjoint = [d for _, _, d in unions]  # a layer's coverage takes the int8 count
    del unions
    extra = [np.asarray(arr, dtype=np.float64) for arr in extra_bounds or []]
    n = 2 + sum(a.size for a in extra) + sum(2 * np.asarray(a).size for a, _ in layers)
    buf = np.empty(n, dtype=np.float64)
    buf[0], buf[1] = lo, hi
    i = 2
    for arr in extra + [np.asarray(x, dtype=np.float64) for ab in layers for x in ab]:
        np.clip(arr, lo, hi, out=buf[i : i + arr.size])
        i += arr.size
    buf.sort()
    # distinct values, NaN kept once at the end as np.unique keeps it (NaN sorts last)
    keep = np.empty(n, dtype=bool)
    keep[0] = True
    np.not_equal(buf[1:], buf[:-1], out=keep[1:])
    if np.isnan(buf[-1]):
        nan = np.isnan(buf)
        keep[nan] = False
        keep[int(np.argmax(nan))] = True
        del nan
    # compacted in place a part at a time, then the buffer cut to the distinct bounds: a second
    # array of them beside the buffer was the step breakdown's peak on 1 M small events once the
    # layers' coverage took one byte per bound (issue 24)
    m = 0
    for at in range(0, n, _COMPACT_PART):
        part = buf[at : at + _COMPACT_PART][keep[at : at + _COMPACT_PART]]
        buf[m : m + part.size] = part  # m <= at: never past what is still to be read
        m += part.size
    del keep, part
    buf.resize(m, refcheck=False)  # no view of buf is left
    grid = buf
    assigned = np.full(max(m - 1, 0), len(layers), dtype=np.min_scalar_type(len(layers)))
    for k in range(len(layers) - 1, -1, -1):  # lowest priority first, higher ones overwrite
        a, b = layers[k]
        if not np.asarray(a).size:
            continue  # an empty layer covers nothing
        starts = np.searchsorted(grid, np.clip(np.asarray(a, dtype=np.float64), lo, hi))
        ends = np.searchsorted(grid, np.clip(np.asarray(b, dtype=np.float64), lo, hi))
        assigned[(_covered_disjoint if disjoint[k] else _covered)(starts, ends, m)] = k
    return grid, assigned


#: Bounds :func:`paint` moves at once while it drops the repeated ones.
_COMPACT_PART = 1 << 16


def _union(starts: Any, ends: Any) -> tuple[np.ndarray, np.ndarray, bool]:
    """One :func:`paint` layer as float64 ``(starts, ends)`` covering the same points: its
    :func:`merge` (sorted, disjoint, touching intervals joined, empty ones dropped), and True.
    The arrays are returned as given when that is what they are already (every interval
    non-empty, each starting after the previous one ends), and when they hold a NaN (whose
    painting :func:`paint` keeps as it was: a NaN bound sorts last); the flag is then False:
    such a layer is not sorted and disjoint, so its coverage takes the general count."""
    a = np.asarray(starts, dtype=np.float64)
    b = np.asarray(ends, dtype=np.float64)
    if np.isnan(a).any() or np.isnan(b).any():
        return a, b, False
    if is_union(a, b):
        return a, b, True
    return (*merge(a, b), True)


def is_union(starts: np.ndarray, ends: np.ndarray) -> bool:
    """Whether ``[starts, ends)`` (float64, shape ``(n,)``) is already its own :func:`merge`:
    every interval non-empty, each starting after the previous one ends. ``merge`` of such
    intervals returns them unchanged, so a caller may skip it (and its temporaries)."""
    return bool((ends > starts).all() and (starts[1:] > ends[:-1]).all())


def per_window(
    grid: np.ndarray, labels: np.ndarray, n_labels: int, win_start: np.ndarray, win_end: np.ndarray
) -> np.ndarray:
    """Sum segment lengths per (window, label): array of shape ``(len(win_start), n_labels)``, µs.

    ``grid``/``labels`` come from :func:`paint` (labels may be remapped); windows must be
    sorted and disjoint, and their edges must be grid points.

    Memory: the windows are summed in chunks of consecutive windows that hold about
    :data:`PER_WINDOW_CHUNK` segments between them (a window with more is a chunk of its own),
    so the transient is some 60 bytes per segment of one chunk, not of the whole grid (issue
    24: over the 2 M segments of the step breakdown of 1 M small events, 63 MiB, the analysis's
    peak). A window's segments are one run of the grid, so a chunk adds each (window, label)'s
    segments in the same order as one pass over the whole grid: the same floats.
    """
    nw = len(win_start)
    out = np.zeros((nw, n_labels))
    if nw == 0 or grid.size < 2:
        return out
    seg_starts = grid[:-1]
    first = np.searchsorted(seg_starts, win_start, side="left")  # window k's first segment
    last = np.searchsorted(seg_starts, win_end, side="left")  # ... and one past its last
    n_seg = np.maximum(last - first, 0)
    before = np.concatenate([[0], np.cumsum(n_seg)])  # segments of the windows before k
    k0 = 0
    while k0 < nw:
        # the windows k0..k1-1 hold at most PER_WINDOW_CHUNK segments (at least one window)
        k1 = max(int(np.searchsorted(before, before[k0] + PER_WINDOW_CHUNK, side="right")) - 1, k0 + 1)
        a = int(first[k0])
        b = max(int(last[k1 - 1]), a)
        if b > a:
            out[k0:k1] = _per_window_run(grid[a : b + 1], labels[a:b], n_labels, win_start[k0:k1], win_end[k0:k1])
        k0 = k1
    return out


def paint_per_window(
    layers: list[tuple[np.ndarray, np.ndarray]],
    to_label: np.ndarray,
    n_labels: int,
    win_start: np.ndarray,
    win_end: np.ndarray,
) -> np.ndarray:
    """``per_window(grid, to_label[assigned], n_labels, win_start, win_end)`` of
    ``paint(layers, win_start.min(), win_end.max(), [win_start, win_end])`` (shape
    ``(len(win_start), n_labels)``, µs; ``to_label`` maps a layer's index, and ``len(layers)``
    for none, to its label), painted a group of consecutive windows at a time.

    Each group holds about :data:`PAINT_GROUP_BOUNDS` bounds of the layers' unions, and is
    painted over its own span ``[win_start[k0], win_end[k1 - 1])`` from the intervals of each
    union that overlap it (a slice: the unions are sorted). Its grid inside that span is the
    whole paint's (every bound inside it, clipped ones land on its window edges), every segment
    gets the same layer, and each window's segments are added in the same order: the same
    floats. The transient is one group's grid and labels, not the whole trace's (issue 24: the
    step breakdown's paint of 2 M bounds on 1 M small events was one of the analysis's peaks).
    Windows must be sorted and disjoint (as :func:`per_window` requires); a layer holding a NaN
    (not a union) takes the one whole paint.
    """
    nw = len(win_start)
    out = np.zeros((nw, n_labels))
    if nw == 0:
        return out
    unions = [_union(a, b) for a, b in layers]
    if not all(d for _, _, d in unions):
        grid, assigned = paint(layers, win_start.min(), win_end.max(), [win_start, win_end])
        return per_window(grid, to_label[assigned], n_labels, win_start, win_end)
    for k0, k1, part in window_groups([(a, b) for a, b, _ in unions], win_start, win_end):
        ws, we = win_start[k0:k1], win_end[k0:k1]
        grid, assigned = paint(part, float(ws[0]), float(we[-1]), [ws, we])
        out[k0:k1] = per_window(grid, to_label[assigned], n_labels, ws, we)
        del grid, assigned, part
    return out


def window_groups(
    unions: list[tuple[np.ndarray, np.ndarray]], win_start: np.ndarray, win_end: np.ndarray
) -> Iterator[tuple[int, int, list[tuple[np.ndarray, np.ndarray]]]]:
    """``(k0, k1, part)`` for consecutive groups of the windows ``k0..k1-1`` (together all of
    them, in order), each with about :data:`PAINT_GROUP_BOUNDS` bounds of ``unions`` (sorted,
    disjoint ``(starts, ends)`` layers, :func:`merge`'s form); ``part`` holds, per layer, the
    slice of its intervals that overlap the group's span ``[win_start[k0], win_end[k1 - 1])``
    (views, no copy). Painting ``part`` over that span (:func:`paint`) gives the whole paint's
    segments inside it: every bound inside is there, clipped ones land on its window edges, and
    a segment is covered by the same layers. Windows must be sorted and disjoint."""
    nw = len(win_start)
    # bounds per window: 2 per union interval overlapping it (an upper bound, enough to group)
    weight = np.full(nw, 2.0)
    for a, b in unions:
        weight += 2.0 * (np.searchsorted(a, win_end, side="left") - np.searchsorted(b, win_start, side="right"))
    reach = np.cumsum(weight)
    k0 = 0
    while k0 < nw:
        base = reach[k0 - 1] if k0 else 0.0
        k1 = max(int(np.searchsorted(reach, base + PAINT_GROUP_BOUNDS, side="right")), k0 + 1)
        lo, hi = float(win_start[k0]), float(win_end[k1 - 1])
        part = []
        for a, b in unions:
            i0 = int(np.searchsorted(b, lo, side="right"))  # the first interval ending after lo
            i1 = int(np.searchsorted(a, hi, side="left"))  # one past the last starting before hi
            part.append((a[i0:i1], b[i0:i1]) if i1 > i0 else (a[:0], b[:0]))
        yield k0, k1, part
        k0 = k1


#: Bounds :func:`paint_per_window` paints at once (2**18: a few MiB of grid and labels).
PAINT_GROUP_BOUNDS = 1 << 18


#: Segments :func:`per_window` sums at once (2**18: about 15 MiB of transients).
PER_WINDOW_CHUNK = 1 << 18


def _per_window_run(
    grid: np.ndarray, labels: np.ndarray, n_labels: int, win_start: np.ndarray, win_end: np.ndarray
) -> np.ndarray:
    """:func:`per_window` over one run of the grid that holds every segment of these windows."""
    seg_len = np.diff(grid)
    # step_idx[j] = #{windows starting at or before grid[j]} - 1 (the last such window): count each
    # window start at its grid index and take the running sum, instead of a binary search per segment
    first_seg = np.searchsorted(grid[:-1], win_start, side="left")
    step_idx = np.cumsum(np.bincount(first_seg, minlength=grid.size)[: grid.size - 1]) - 1
    inside = (step_idx >= 0) & (grid[:-1] < win_end[np.maximum(step_idx, 0)])
    # one weighted count over the flat (window, label) index: it adds the segments in the same
    # order as np.add.at, so the sums are the same floats, without add.at's per-element overhead
    flat = step_idx[inside] * n_labels + labels[inside]
    out = np.bincount(flat, weights=seg_len[inside], minlength=len(win_start) * n_labels)
    return out.reshape(len(win_start), n_labels)


def covered_before(starts: np.ndarray, ends: np.ndarray) -> np.ndarray:
    """Covered length (µs) before each of the sorted, disjoint intervals ``[starts, ends)``:
    shape ``(n + 1,)``, 0 first and the total last (the prefix sums :func:`covered_length` reads)."""
    return np.concatenate([[0.0], np.cumsum(ends - starts)])


def covered_length(
    starts: np.ndarray, ends: np.ndarray, a: np.ndarray, b: np.ndarray, before: np.ndarray | None = None
) -> np.ndarray:
    """Length (µs) of the sorted, disjoint intervals ``[starts, ends)`` (as :func:`merge`
    returns them) that falls inside each ``[a_i, b_i)``; vectorised over ``a`` and ``b``,
    O((n + m) log n), or O(m log n) given ``before`` (:func:`covered_before` of the same
    intervals: a caller that asks about the same intervals many times computes it once).
    Zero where ``b <= a``."""
    a = np.asarray(a, dtype=np.float64)
    b = np.asarray(b, dtype=np.float64)
    if not len(starts):
        return np.zeros(a.shape)
    if before is None:
        before = covered_before(starts, ends)
    return np.maximum(covered_upto(starts, ends, before, b) - covered_upto(starts, ends, before, a), 0.0)


def covered_upto(starts: np.ndarray, ends: np.ndarray, before: np.ndarray, x: np.ndarray) -> np.ndarray:
    """Length (µs) of the sorted, disjoint intervals ``[starts, ends)`` (non-empty) that lies
    before each ``x`` (the covered length of ``(-inf, x)``), shape of ``x``; ``before`` is
    :func:`covered_before` of the same intervals. O(m log n) for m points."""
    k = np.searchsorted(starts, x, side="right")  # intervals starting at or before x
    last = np.maximum(k - 1, 0)
    part = np.clip(np.minimum(x, ends[last]) - starts[last], 0.0, None)
    return np.where(k > 0, before[last] + part, 0.0)
