"""Recorded op inputs (``record_shapes=True``): the ops frame's ``input_dims``, ``input_types``,
``input_strides`` and ``concrete_inputs`` columns (tracedoc/load/shapes.py), from both loaders.

Expected values come from the trace itself, read here with the standard library's ``json``,
never from tracedoc's own output."""

from __future__ import annotations

import gzip
import importlib
import json
import shutil
from collections import Counter

import numpy as np
import pandas as pd
import pytest
from conftest import real_trace

from tracedoc.cache import FrameCache
from tracedoc.errors import TraceLoadError
from tracedoc.load import load
from tracedoc.load.fast import Fallback, collect_columns, decode_document
from tracedoc.load.shapes import (
    DROP_SHAPE_ARG,
    SHAPE_ARGS,
    SHAPE_TEXT_MAX_CHARS,
    parse_shape_arg,
)
from tracedoc.load.source import read_trace_bytes

ENGINES = ("fast", "reference")
COLUMNS = [c for c, _ in SHAPE_ARGS]
#: Categories of the events the ops frame holds (``Operator``: the old name of ``cpu_op``).
OP_CATS = {"cpu_op", "user_annotation", "python_function", "Operator"}


def _raw_events(path) -> list[dict]:
    with gzip.open(path, "rb") as fh:
        return json.load(fh)["traceEvents"]


def _text(value) -> str:
    """Compact JSON as the standard library writes it (what the columns must hold)."""
    return json.dumps(value, separators=(",", ":"), ensure_ascii=False)


def _fast_path_taken(path) -> bool:
    try:
        collect_columns(decode_document(read_trace_bytes(path))[1])
    except Fallback:
        return False
    return True


# ---- real traces -------------------------------------------------------------------------


@pytest.mark.parametrize("engine", ENGINES)
def test_known_conv_op_has_its_recorded_inputs(engine):
    """The first ``aten::conv2d`` of an H100 ResNet-18 trace: its four recorded inputs, as the
    raw JSON holds them."""
    path = real_trace("h100_resnet18_baseline.pt.trace.json.gz")
    raw = next(
        e
        for e in _raw_events(path)
        if e.get("ph") == "X" and e.get("name") == "aten::conv2d" and "Input Dims" in (e.get("args") or {})
    )
    t = load(path, engine=engine)
    ops = t.ops
    at = np.abs(ops["ts_us"].to_numpy() + t.origin_us - raw["ts"]) < 1e-3
    row = ops[at & (ops["name"] == "aten::conv2d").to_numpy()]
    assert len(row) == 1
    row = row.iloc[0]
    for col, key in SHAPE_ARGS:
        assert parse_shape_arg(row[col]) == raw["args"][key], col
        assert row[col] == _text(raw["args"][key]), col
    dims = parse_shape_arg(row["input_dims"])
    assert len(dims[0]) == 4 and len(dims[1]) == 4  # an NCHW input and an OIHW weight


@pytest.mark.parametrize(
    "name",
    [
        "h100_resnet18_baseline.pt.trace.json.gz",
        "v100_resnet50_workers0.pt.trace.json.gz",
        "cpu_only_gloo.pt.trace.json.gz",
    ],
)
def test_every_recorded_value_is_loaded(name):
    """Each column holds, over the ops frame, exactly the multiset of values the raw trace's op
    events carry (v100: old ``Operator`` category, no strides; gloo: on user annotations too)."""
    path = real_trace(name)
    expected = {col: Counter() for col in COLUMNS}
    for e in _raw_events(path):
        if e.get("ph") != "X" or e.get("cat") not in OP_CATS:
            continue
        args = e.get("args") or {}
        for col, key in SHAPE_ARGS:
            if args.get(key) is not None:
                expected[col][_text(args[key])] += 1
    assert sum(expected["input_dims"].values()) > 0
    for engine in ENGINES:
        t = load(path, engine=engine)
        assert DROP_SHAPE_ARG not in t.dropped_events
        for col in COLUMNS:
            got = t.ops[col]
            assert isinstance(got.dtype, pd.CategoricalDtype), col
            assert Counter(got.dropna().tolist()) == expected[col], (engine, col)


@pytest.mark.parametrize("engine", ENGINES)
def test_trace_without_shapes_gives_all_null_columns(engine):
    t = load(real_trace("a100_alexnet_forward.pt.trace.json.gz"), engine=engine)
    assert len(t.ops) > 0
    for col in COLUMNS:
        s = t.ops[col]
        assert isinstance(s.dtype, pd.CategoricalDtype) and s.isna().all() and len(s.cat.categories) == 0
    assert DROP_SHAPE_ARG not in t.dropped_events


def test_columns_cost_a_byte_per_op_without_shapes_and_two_with():
    """Dictionary-encoded: int8 codes (one byte per op and column) on a trace without shapes,
    int16 when a column has hundreds of distinct values."""
    bare = load(real_trace("a100_alexnet_forward.pt.trace.json.gz")).ops
    assert sum(bare[c].memory_usage(index=False, deep=True) for c in COLUMNS) <= 4 * len(bare) + 4 * 256
    shaped = load(real_trace("h100_resnet18_baseline.pt.trace.json.gz")).ops
    for c in COLUMNS:
        assert shaped[c].cat.codes.dtype.itemsize <= 2
        assert len(shaped[c].cat.categories) < len(shaped) / 10  # values repeat every step


# ---- hostile values ----------------------------------------------------------------------

_OK = [
    ("Input Dims", [[32, 3, 224, 224], [64, 3, 7, 7], [], []]),
    ("Input Dims", [[[2, 3], [4]], []]),  # a tensor list
    ("Input Dims", [[-1, 9223372036854775807, -9223372036854775808]]),
    ("Input type", ["float", "c10::BFloat16", "", "Scalar"]),
    ("Input Strides", [[150528, 50176, 224, 1], []]),
    ("Concrete Inputs", ["", "[2, 2]", "False", "1", 'é \u4e2d \\ " \n']),
    ("Input Dims", []),
    ("Concrete Inputs", ["x" * (SHAPE_TEXT_MAX_CHARS - 4)]),  # '["' + x... + '"]': exactly at the cap
]
_BAD = [
    ("Input Dims", "[[1, 2]]"),  # a string that looks like a list
    ("Input Dims", 3),
    ("Input Dims", {"a": [1]}),
    ("Input Dims", True),
    ("Input Dims", [1, 2]),  # ints where lists belong
    ("Input Dims", [[1.5]]),
    ("Input Dims", [[True]]),
    ("Input Dims", [[None]]),
    ("Input Dims", [["1"]]),
    ("Input Dims", [[[[1]]]]),  # nested one level too deep
    ("Input Dims", [[2**63]]),  # beyond int64
    ("Input Dims", [[2**70]]),  # beyond 64 bits: orjson reads a float, msgspec an int
    ("Input Dims", [[1]] * 100_000),  # a huge list
    ("Input Dims", [[0] * 3000]),  # one huge shape
    ("Input type", [1, 2]),
    ("Input type", ["float", None]),
    ("Input type", [["float"]]),
    ("Input Strides", [[1.0e300]]),
    ("Concrete Inputs", "False"),
    ("Concrete Inputs", ["x" * (SHAPE_TEXT_MAX_CHARS - 3)]),  # one character over the cap
    ("Concrete Inputs", [{"k": "v"}]),
    ("Concrete Inputs", ["NaN", "Infinity", 0]),
]


def _nested(depth: int):
    v: list = [1]
    for _ in range(depth):
        v = [v]
    return v


def _trace(values: list[tuple[str, object]], tmp_path, name="t.json"):
    """One cpu_op per ``(args key, value)``, 10 µs apart, plus a kernel-free annotation."""
    evs = [
        {
            "ph": "X",
            "cat": "cpu_op",
            "name": f"op{i}",
            "pid": 1,
            "tid": 1,
            "ts": 1000 + 10 * i,
            "dur": 5,
            "args": {k: v},
        }
        for i, (k, v) in enumerate(values)
    ]
    evs.append({"ph": "X", "cat": "user_annotation", "name": "ann", "pid": 1, "tid": 1, "ts": 999, "dur": 1})
    p = tmp_path / name
    p.write_text(json.dumps({"traceEvents": evs}))
    return p


def _cell(t, i: int, key: str):
    col = {k: c for c, k in SHAPE_ARGS}[key]
    v = t.ops.loc[t.ops["name"] == f"op{i}", col].iloc[0]
    return None if pd.isna(v) else v


@pytest.mark.parametrize("engine", ENGINES)
def test_valid_values_are_kept_exactly(tmp_path, engine):
    t = load(_trace(_OK, tmp_path), engine=engine)
    for i, (key, value) in enumerate(_OK):
        assert _cell(t, i, key) == _text(value), (key, value)
        assert parse_shape_arg(_cell(t, i, key)) == value
    assert DROP_SHAPE_ARG not in t.dropped_events


@pytest.mark.parametrize("engine", ENGINES)
def test_hostile_values_are_dropped_and_counted(tmp_path, engine):
    values = [*_BAD, ("Input Dims", _nested(30)), ("Input Dims", _nested(400))]
    p = _trace(values, tmp_path)
    if engine == "fast":
        assert _fast_path_taken(p)  # handled by the fast engine itself, not handed over
    t = load(p, engine=engine)
    assert len(t.ops) == len(values) + 1  # every op kept
    for i, (key, value) in enumerate(values):
        assert _cell(t, i, key) is None, (key, str(value)[:80])
    assert t.dropped_events == {DROP_SHAPE_ARG: len(values)}


def test_null_and_absent_are_missing_but_not_counted(tmp_path):
    p = _trace([("Input Dims", None), ("Something else", [[1]])], tmp_path)
    for engine in ENGINES:
        t = load(p, engine=engine)
        assert t.ops[COLUMNS].isna().all().all()
        assert t.dropped_events == {}


@pytest.mark.parametrize(
    "body",
    [
        b"[[1, NaN]]",  # bare NaN: not JSON
        b"[[1], Infinity]",
        b'["\xff\xfe"]',  # not UTF-8
        b"[[" + b"9" * 400 + b"]]",  # overflows a double
    ],
)
def test_invalid_json_in_a_shape_is_the_one_line_error(tmp_path, body):
    p = tmp_path / "bad.json"
    p.write_bytes(
        b'{"traceEvents": [{"ph": "X", "cat": "cpu_op", "name": "a", "ts": 1, "dur": 1, "args": {"Input Dims": '
        + body
        + b"}}]}"
    )
    messages = []
    for engine in ENGINES:
        with pytest.raises(TraceLoadError) as ei:
            load(p, engine=engine)
        messages.append(str(ei.value))
    assert messages[0] == messages[1] and "\n" not in messages[0]


def test_escaped_keys_are_read_by_both_engines(tmp_path):
    """A key written with JSON escapes is the same key: the fast engine's scan for the keys
    (:func:`tracedoc.load.fast.may_hold_shapes`) must not skip it."""
    p = tmp_path / "esc.json"
    p.write_bytes(
        b'{"traceEvents": [{"ph": "X", "cat": "cpu_op", "name": "a", "ts": 1, "dur": 1, '
        b'"args": {"\\u0049nput Dims": [[4, 4]], "Concrete Input\\u0073": ["1"]}}]}'
    )
    for engine in ENGINES:
        t = load(p, engine=engine)
        assert t.ops["input_dims"].tolist() == ["[[4,4]]"] and t.ops["concrete_inputs"].tolist() == ['["1"]']


def test_traces_without_the_keys_are_decoded_without_the_fields():
    """The memory promise: no recorded-input field is decoded (32 bytes per event) for a trace
    that has no such key, even when a kernel name holds ``Input`` (CatArrInputTensorMetadata)."""
    may_hold_shapes = importlib.import_module("tracedoc.load.fast").may_hold_shapes
    for name in ("a100_alexnet_forward.pt.trace.json.gz", "v100_resnet50_ddp_gpu_bound.pt.trace.json.gz"):
        data = read_trace_bytes(real_trace(name))
        assert not may_hold_shapes(data), name
    assert b"Input" in read_trace_bytes(real_trace("v100_resnet50_ddp_gpu_bound.pt.trace.json.gz"))
    assert may_hold_shapes(read_trace_bytes(real_trace("h100_resnet18_baseline.pt.trace.json.gz")))
    assert may_hold_shapes(b'{"a": "\\u0041"}')  # an escape anywhere: a key might be written so


def test_parallel_decoding_counts_drops_of_every_part(tmp_path, monkeypatch):
    fast = importlib.import_module("tracedoc.load.fast")  # tracedoc.load is also the function

    monkeypatch.setattr(fast, "PARALLEL_MIN_BYTES", 64)
    values = (_OK + _BAD) * 20
    p = _trace(values, tmp_path)
    _, cols = fast.parse_parallel([read_trace_bytes(p)], 3)  # no handover: every part decoded apart
    assert cols.shape_args_dropped == 20 * len(_BAD)
    ref = load(p, engine="reference")
    par = load(p, workers=3)
    assert ref.dropped_events == par.dropped_events == {DROP_SHAPE_ARG: 20 * len(_BAD)}
    for col in COLUMNS:
        pd.testing.assert_series_equal(ref.ops[col], par.ops[col])


# ---- the frame cache -----------------------------------------------------------------------


@pytest.mark.parametrize("name", ["mi250_toy_train.pt.trace.json.gz", "a100_alexnet_forward.pt.trace.json.gz"])
def test_cache_round_trip_keeps_the_columns(tmp_path, name):
    p = tmp_path / name
    shutil.copy(real_trace(name), p)
    cache = FrameCache(tmp_path / "cache", min_bytes=0)
    fresh = load(p, cache=cache)
    assert cache.last == "miss"
    hit = load(p, cache=cache)
    assert cache.last == "hit"
    for col in COLUMNS:
        pd.testing.assert_series_equal(fresh.ops[col], hit.ops[col], check_exact=True)
        assert hit.ops[col].cat.categories.tolist() == fresh.ops[col].cat.categories.tolist()
        assert hit.ops[col].cat.codes.dtype == fresh.ops[col].cat.codes.dtype
    assert hit.ops["input_dims"].notna().any() == ("mi250" in name)


def test_cache_round_trip_keeps_drop_counts(tmp_path):
    p = _trace(_OK + _BAD, tmp_path)
    cache = FrameCache(tmp_path / "cache", min_bytes=0)
    fresh = load(p, cache=cache)
    hit = load(p, cache=cache)
    assert cache.last == "hit"
    assert hit.dropped_events == fresh.dropped_events == {DROP_SHAPE_ARG: len(_BAD)}
    assert hit.ops[COLUMNS].equals(fresh.ops[COLUMNS])


def test_cache_key_covers_the_recorded_input_columns(tmp_path, monkeypatch):
    """An entry written without these columns (an older tracedoc) is stale, never read."""
    shapes = importlib.import_module("tracedoc.load.shapes")

    p = _trace(_OK, tmp_path)
    cache = FrameCache(tmp_path / "cache", min_bytes=0)
    with_cols = cache.key(p)
    monkeypatch.setattr(shapes, "SHAPE_COLUMNS", [])
    assert cache.key(p)["schema"] != with_cols["schema"]


# ---- parse_shape_arg ---------------------------------------------------------------------


def test_parse_shape_arg():
    assert parse_shape_arg("[[32,3,224,224],[]]") == [[32, 3, 224, 224], []]
    assert parse_shape_arg('["float",""]') == ["float", ""]
    for missing in (None, float("nan"), np.nan, pd.NA, "", 3, "not json", '{"a":1}', "7"):
        assert parse_shape_arg(missing) is None
    a = parse_shape_arg("[[1,2]]")
    a[0].append(3)  # the caller's own list: the cache is not changed
    assert parse_shape_arg("[[1,2]]") == [[1, 2]]
