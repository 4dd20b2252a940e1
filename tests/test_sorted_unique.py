"""``sorted_unique`` is ``np.unique`` (issue 24: the same values, without numpy's hash set);
``join_chunks`` is ``np.concatenate`` (without the chunks and their join held at once)."""

from __future__ import annotations

import math

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from tracedoc.signals.arrays import join_chunks, sorted_unique


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


@settings(max_examples=200, deadline=None)
@given(
    st.lists(st.lists(st.floats(allow_nan=True, width=64), max_size=20), max_size=12),
    st.sampled_from([np.float64, np.int8]),
)
def test_join_chunks_is_concatenate_and_empties_the_list(chunks, dtype):
    arrays = [np.array(c).astype(dtype) if dtype is np.float64 else np.arange(len(c), dtype=dtype) for c in chunks]
    want = np.concatenate(arrays) if arrays else np.empty(0)
    given_list = list(arrays)
    got = join_chunks(given_list)
    assert given_list == []
    assert got.dtype == (want.dtype if arrays else np.float64)
    np.testing.assert_array_equal(got, want)


def test_join_chunks_takes_the_common_dtype_and_refuses_2d():
    got = join_chunks([np.array([1, 2], dtype=np.int8), np.array([0.5])])
    assert got.dtype == np.float64 and got.tolist() == [1.0, 2.0, 0.5]
    with pytest.raises(ValueError, match="1-D"):
        join_chunks([np.zeros((2, 2))])
