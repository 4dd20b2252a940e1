"""Loader: formats, category drift, device properties, rebasing, and bad input."""

from __future__ import annotations

import gzip
import json

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from tracebuilder import BASE_US, TraceBuilder, dataloader_bound

import tracedoc
from tracedoc.errors import TraceLoadError


def test_json_and_gzip_load_the_same(tmp_path):
    b = dataloader_bound()
    plain = tracedoc.load(b.write(tmp_path / "t.json"))
    gz = tracedoc.load(b.write(tmp_path / "t.json.gz", gz=True))
    for name in ("ops", "runtime", "kernels", "steps"):
        assert getattr(plain, name).equals(getattr(gz, name))


def test_gzip_detected_by_magic_not_name(tmp_path):
    path = dataloader_bound().write(tmp_path / "looks_plain.json", gz=True)
    assert len(tracedoc.load(path).kernels) == 3


def test_timestamps_rebased_to_trace_start(tmp_path):
    t = tracedoc.load(dataloader_bound().write(tmp_path / "t.json"))
    assert t.origin_us == BASE_US
    assert t.steps["ts_us"].tolist() == [0.0, 1000.0, 2000.0]
    assert t.steps["step"].tolist() == [1, 2, 3]
    assert t.span_us == 3000.0


def test_float_ns_timestamps_keep_sub_us_precision(tmp_path):
    b = TraceBuilder(base=1_712_000_000_000.0)  # float µs with ns digits, as in newer traces
    b.step(1, 0.0, 100.25)
    b.op("aten::mm", 10.125, 5.5)
    t = tracedoc.load(b.write(tmp_path / "t.json"))
    row = t.ops[t.ops["name"] == "aten::mm"].iloc[0]
    assert row["ts_us"] == pytest.approx(10.125, abs=1e-3)
    assert row["end_us"] == pytest.approx(15.625, abs=1e-3)


def test_old_categories_normalised(tmp_path):
    new = tracedoc.load(dataloader_bound().write(tmp_path / "new.json"))
    b = dataloader_bound()
    b.old = True
    old_b = TraceBuilder(old_categories=True)
    old_b.events = []
    for i in range(3):
        t0 = i * 1000.0
        old_b.step(i + 1, t0, 1000.0)
        old_b.dataloader(t0, 400.0)
        old_b.op("aten::conv2d", t0 + 400, 40.0)
        old_b.kernel("volta_scudnn_128x64_relu_medium_nn_v1", t0 + 410, t0 + 450, 500.0)
    old = tracedoc.load(old_b.write(tmp_path / "old.json"))
    assert set(old.ops["cat"]) == {"cpu_op"}  # 'Operator' -> cpu_op
    assert len(old.kernels) == len(new.kernels) == 3
    assert old.runtime["cat"].unique().tolist() == ["cuda_runtime"]
    assert old.steps["step"].tolist() == [1, 2, 3]


def test_string_pids_missing_args_and_extra_keys(tmp_path):
    doc = {
        "traceEvents": [
            {"ph": "X", "cat": "cpu_op", "name": "aten::add", "pid": "worker-1", "tid": "7", "ts": 5, "dur": 2},
            {"ph": "X", "cat": "cpu_op", "name": "aten::mul", "pid": 3, "tid": 7, "ts": 1, "dur": 1, "args": {}},
            {"ph": "f", "id": 3, "pid": 1, "tid": 1, "ts": 3},  # flow: ignored
        ],
        "someVendorKey": {"x": 1},
    }
    p = tmp_path / "t.json"
    p.write_text(json.dumps(doc))
    t = tracedoc.load(p)
    assert t.ops["pid"].tolist() == ["worker-1", "3"]
    assert np.isnan(t.ops["external_id"]).all()
    assert t.ops["ts_us"].tolist() == [4.0, 0.0]
    assert t.devices == []
    assert t.metadata["someVendorKey"] == {"x": 1}


def test_device_properties_and_compute_properties(tmp_path):
    b = dataloader_bound()
    t = tracedoc.load(b.write(tmp_path / "t.json"))
    d = t.devices[0]
    assert (d.name, d.total_memory_bytes, d.compute_capability, d.num_sms, d.vendor) == (
        "Tesla V100-SXM2-32GB",
        34089730048,
        (7, 0),
        80,
        "NVIDIA",
    )
    doc = b.doc()
    doc["computeProperties"] = [
        {
            "id": 0,
            "name": "Tesla V100-DGXS-32GB",
            "totalGlobalMem": 34084028416,
            "major": 7,
            "minor": 0,
            "multiProcessorCount": 80,
        }
    ]
    del doc["deviceProperties"]
    p = tmp_path / "legacy.json"
    p.write_text(json.dumps(doc))
    d = tracedoc.load(p).devices[0]
    assert (d.compute_capability, d.num_sms, d.total_memory_bytes) == ((7, 0), 80, 34084028416)


def test_hip_runtime_marks_amd(tmp_path):
    b = TraceBuilder(
        devices=[
            {
                "id": 0,
                "name": "AMD Instinct MI250X",
                "totalGlobalMem": 68702699520,
                "computeMajor": 9,
                "computeMinor": 0,
            }
        ]
    )
    b.step(1, 0, 100)
    b.op("aten::mm", 0, 50)
    corr = b._launch("hipLaunchKernel", 10, 5)
    b.events.append(
        {
            "ph": "X",
            "cat": "kernel",
            "name": "Cijk_Alik_Bljk_MFMA",
            "pid": 0,
            "tid": 0,
            "ts": b.base + 20,
            "dur": 10,
            "args": {"device": 0, "stream": 0, "correlation": corr},
        }
    )
    t = tracedoc.load(b.write(tmp_path / "t.json"))
    assert t.devices[0].vendor == "AMD"
    assert t.runtime["kind"].tolist() == ["launch"]


def test_memcpy_kinds_and_memory_events(tmp_path):
    b = dataloader_bound(n_steps=1)
    b.memcpy("HtoD", "Pageable", 4096, 100, 110, 20)
    b.memcpy("HtoD", "Pinned", 8192, 130, 140, 10)
    b.memory(5, 1e9).memory(6, 3e9).memory(7, 2e9, device_type=0)
    t = tracedoc.load(b.write(tmp_path / "t.json"))
    assert t.memcpys[["copy_kind", "src_memory", "dst_memory"]].values.tolist() == [
        ["HtoD", "Pageable", "Device"],
        ["HtoD", "Pinned", "Device"],
    ]
    assert t.memcpys["bytes"].tolist() == [4096, 8192]
    assert t.memory["total_allocated_bytes"].tolist() == [1e9, 3e9, 2e9]
    assert t.memory["device_type"].tolist() == [1, 1, 0]


# ---- bad input: one line naming the file and the problem --------------------------


def _write(tmp_path, name, data: bytes):
    p = tmp_path / name
    p.write_bytes(data)
    return p


BAD_INPUTS = {
    "truncated_gzip": (lambda: gzip.compress(json.dumps(dataloader_bound().doc()).encode())[:200], "truncated gzip"),
    "corrupt_gzip": (lambda: b"\x1f\x8b" + b"\x00" * 40, "gzip"),
    "invalid_json": (lambda: b'{"traceEvents": [', "invalid JSON"),
    "bare_nan": (
        lambda: b'{"traceEvents": [{"ph": "X", "cat": "cpu_op", "name": "a", "ts": NaN, "dur": 1}]}',
        "invalid JSON",
    ),
    "bare_inf": (
        lambda: b'{"traceEvents": [{"ph": "X", "cat": "cpu_op", "name": "a", "ts": 1, "dur": Infinity}]}',
        "invalid JSON",
    ),
    "empty_file": (lambda: b"", "empty file"),
    "whitespace_only": (lambda: b"  \n", "empty file"),
    "json_array": (lambda: b'[{"ph": "X"}]', "JSON array"),
    "no_trace_events": (lambda: b'{"name": "not a trace", "version": 3}', "no 'traceEvents'"),
    "trace_events_not_list": (lambda: b'{"traceEvents": {"a": 1}}', "'traceEvents' is a object, expected a list"),
    "event_not_object": (lambda: b'{"traceEvents": [1, 2]}', "event #0 is a number"),
    "ts_wrong_type": (
        lambda: b'{"traceEvents": [{"ph": "X", "cat": "cpu_op", "name": "a", "ts": "12", "dur": 1}]}',
        "'ts' is a string",
    ),
    "dur_wrong_type": (
        lambda: b'{"traceEvents": [{"ph": "X", "cat": "kernel", "name": "k", "ts": 1, "dur": [1]}]}',
        "'dur' is a array",
    ),
    "name_wrong_type": (
        lambda: b'{"traceEvents": [{"ph": "X", "cat": "cpu_op", "name": 5, "ts": 1, "dur": 1}]}',
        "'name' is a number",
    ),
    "args_wrong_type": (
        lambda: b'{"traceEvents": [{"ph": "X", "cat": "cpu_op", "name": "a", "ts": 1, "dur": 1, "args": "x"}]}',
        "'args' is a string",
    ),
    "empty_trace": (lambda: b'{"traceEvents": []}', "trace has no events"),
    "foreign_trace": (
        lambda: b'{"traceEvents": [{"ph": "X", "cat": "blink", "name": "Paint", "ts": 1, "dur": 3}]}',
        "none from the PyTorch profiler",
    ),
    "number_top_level": (lambda: b"42", "top level is a JSON int"),
}


@pytest.mark.parametrize("case", sorted(BAD_INPUTS))
def test_bad_input_one_line_error(tmp_path, case):
    make, expected = BAD_INPUTS[case]
    p = _write(tmp_path, f"{case}.json", make())
    with pytest.raises(TraceLoadError) as ei:
        tracedoc.load(p)
    msg = str(ei.value)
    assert "\n" not in msg
    assert msg.startswith(str(p) + ": ")
    assert expected in msg


def test_missing_file_and_directory(tmp_path):
    with pytest.raises(TraceLoadError, match="no such file"):
        tracedoc.load(tmp_path / "nope.json")
    with pytest.raises(TraceLoadError, match="directory"):
        tracedoc.load(tmp_path)


@settings(max_examples=200, deadline=None)
@given(
    st.lists(st.one_of(st.none(), st.sampled_from("abcdefg")), max_size=40),
    st.lists(st.booleans(), max_size=40),
    st.integers(1, 7),
)
def test_without_unused_categories_is_pandas_remove_unused_categories(values, keep, chunk):
    """The load's category pruning (issue 24: no sort of every column's codes) gives what
    pandas' ``remove_unused_categories`` gives on any rows kept of any column, in chunks of any
    size, and the column itself when every category is used."""
    import pandas as pd

    from tracedoc.load.build import without_unused_categories
    from tracedoc.trace import text_categorical

    col = pd.Series(text_categorical(values))
    assert without_unused_categories(col, chunk) is col  # built from the values: all used
    mask = np.array([keep[i] if i < len(keep) else True for i in range(len(values))], dtype=bool)
    kept = col[mask].reset_index(drop=True) if len(values) else col
    got, want = without_unused_categories(kept, chunk), kept.cat.remove_unused_categories()
    pd.testing.assert_series_equal(got, want)
    assert got.cat.categories.tolist() == want.cat.categories.tolist()
    assert got.array.codes.dtype == want.array.codes.dtype


def test_dropped_rows_take_their_categories_with_them(tmp_path):
    """An op dropped at load (a negative duration) leaves no category behind: its name is in
    no frame's categories, in both loaders alike, and every other name is."""
    from tracedoc.load import load

    b = TraceBuilder()
    b.op("aten::kept", 0.0, 5.0).op("aten::dropped", 10.0, -1.0).op("aten::also_kept", 20.0, 5.0)
    p = b.write(tmp_path / "t.json")
    for trace in (load(p, cache=None), load(p, cache=None, engine="reference")):
        cats = trace.ops["name"].cat.categories.tolist()
        assert "aten::dropped" not in cats and {"aten::kept", "aten::also_kept"} <= set(cats)
        assert sum(trace.dropped_events.values()) == 1
