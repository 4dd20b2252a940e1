"""``sorted_unique`` is ``np.unique`` (issue 24: the same values, without numpy's hash set)."""

from __future__ import annotations

import math

import numpy as np
from hypothesis import given, settings
from hypothesis import strategies as st

from tracedoc.signals.arrays import sorted_unique


@settings(max_examples=300, deadline=None)
@given(st.lists(st.integers(-(2**31), 2**31 - 1), max_size=80), st.sampled_from([np.int32, np.int64]))
def test_integers(values, dtype):
    a = np.array(values, dtype=dtype)
    got = sorted_unique(a)
    assert got.dtype == a.dtype
    assert got.tolist() == np.unique(a).tolist()


@settings(max_examples=300, deadline=None)
@given(st.lists(st.one_of(st.floats(allow_nan=False), st.just(math.nan)), max_size=80))
def test_floats_count_every_nan_as_one_value(values):
    a = np.array(values, dtype=float)
    got, want = sorted_unique(a), np.unique(a)
    assert got.size == want.size
    np.testing.assert_array_equal(got, want)  # NaN equals NaN here
    assert np.isnan(got).sum() == (1 if np.isnan(a).any() else 0)


def test_any_shape_is_flattened():
    assert sorted_unique(np.array([[3, 1], [3, 2]])).tolist() == [1, 2, 3]
