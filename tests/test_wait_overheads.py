"""The schedule's blocking-anchor overheads, precomputed (issue 24), against the loop they replace.

The replay's loop used to carry ``ready_obs``, the running maximum of the observed ends of the
events met so far, and compute each blocking anchor's ``o = max(te - max(ts, ready_obs), 0.0)``
as it reached the anchor. ``_wait_overheads`` computes the same values up front; the reference
below is that loop, written out in plain Python from the module docstring.
"""

from __future__ import annotations

import math

import numpy as np
from hypothesis import given, settings
from hypothesis import strategies as st

from tracedoc.signals.stepmodel import _wait_overheads


def _loop(a_ts, a_end, a_step, blocking, ev_ptr, ev_end, ready0):
    """The old loop: windows in order, each window's anchors in index order, events then wait."""
    out = []
    obs_ready = ready0
    steps = sorted({int(k) for k in a_step if k >= 0})
    for k in steps:
        for i in range(len(a_ts)):
            if a_step[i] != k:
                continue
            for j in range(ev_ptr[i], ev_ptr[i + 1]):
                if ev_end[j] > obs_ready:
                    obs_ready = float(ev_end[j])
            if blocking[i]:
                out.append(max(float(a_end[i]) - max(float(a_ts[i]), obs_ready), 0.0))
    return out


@st.composite
def _schedules(draw):
    na = draw(st.integers(0, 30))
    ts = np.array(draw(st.lists(st.floats(0, 1000), min_size=na, max_size=na)))
    dur = np.array(draw(st.lists(st.floats(0, 50), min_size=na, max_size=na)))
    a_step = np.array(draw(st.lists(st.integers(-1, 3), min_size=na, max_size=na)), dtype=np.int32)
    blocking = np.array(draw(st.lists(st.booleans(), min_size=na, max_size=na)), dtype=bool)
    counts = draw(st.lists(st.integers(0, 3), min_size=na, max_size=na))
    ev_ptr = np.concatenate([[0], np.cumsum(counts, dtype=np.int64)]).astype(np.int32)
    ends = draw(
        st.lists(
            st.one_of(st.floats(0, 1100), st.just(math.nan)),
            min_size=int(ev_ptr[-1]),
            max_size=int(ev_ptr[-1]),
        )
    )
    return ts, ts + dur, a_step, blocking, ev_ptr, np.array(ends, dtype=float), draw(st.floats(0, 500))


@settings(max_examples=300, deadline=None)
@given(_schedules())
def test_the_same_floats_as_the_loop(case):
    a_ts, a_end, a_step, blocking, ev_ptr, ev_end, ready0 = case
    by_step = np.argsort(a_step, kind="stable")  # the schedule's replay order
    got = _wait_overheads(a_ts, a_end, a_step, by_step, blocking, ev_ptr, ev_end, ready0)
    want = _loop(a_ts, a_end, a_step, blocking, ev_ptr, ev_end, ready0)
    assert got.dtype == np.float64
    assert got.tolist() == want


def test_a_wait_after_the_work_is_its_own_time_only():
    # anchor 0 launches work ending at 40; the sync (anchor 1) runs 10..50: 10 µs after the work
    a_ts, a_end = np.array([0.0, 10.0]), np.array([5.0, 50.0])
    got = _wait_overheads(
        a_ts,
        a_end,
        np.array([0, 0]),
        np.array([0, 1]),
        np.array([False, True]),
        np.array([0, 1, 1]),
        np.array([40.0]),
        0.0,
    )
    assert got.tolist() == [10.0]
