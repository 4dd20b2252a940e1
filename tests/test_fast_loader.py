"""The fast loader gives exactly what the reference loader gives: frames, metadata,
signals and findings, on every real trace and on edge cases; and the same errors."""

from __future__ import annotations

import gzip
import json
import sys
from pathlib import Path

import pandas as pd
import pytest
from conftest import FIXTURES
from tracebuilder import TraceBuilder, dataloader_bound

import tracedoc
from tracedoc.engine import analyze_trace
from tracedoc.errors import TraceLoadError
from tracedoc.load import load
from tracedoc.load.fast import Fallback, collect_columns, decode_document
from tracedoc.load.shapes import SHAPE_ARGS, all_frame_columns
from tracedoc.load.source import gzip_size_hint, read_trace_bytes

REAL = sorted(p.name for p in FIXTURES.glob("*.gz"))


def assert_same_trace(a, b):
    for kind, spec in all_frame_columns().items():  # the schema plus the recorded-input columns
        fa, fb = getattr(a, kind), getattr(b, kind)
        assert list(fa.columns) == list(fb.columns) == [c for c, _ in spec], kind
        pd.testing.assert_frame_equal(fa, fb, check_exact=True, obj=kind)
        for col, dtype in spec:  # object columns hold the same Python types too
            if dtype == "object":
                assert [type(v) for v in fa[col]] == [type(v) for v in fb[col]], (kind, col)
            elif dtype == "category":  # same text, same categories in the same order, same codes
                assert fa[col].cat.categories.tolist() == fb[col].cat.categories.tolist(), (kind, col)
                assert fa[col].cat.codes.tolist() == fb[col].cat.codes.tolist(), (kind, col)
    assert a.metadata == b.metadata
    assert a.devices == b.devices
    assert (a.origin_us, a.span_us, a.n_events, a.path) == (b.origin_us, b.span_us, b.n_events, b.path)
    assert a.dropped_events == b.dropped_events


def assert_same_analysis(a, b):
    ra, rb = analyze_trace(a).to_dict(), analyze_trace(b).to_dict()
    assert json.dumps(ra, sort_keys=True, default=str) == json.dumps(rb, sort_keys=True, default=str)


def fast_path_taken(path) -> bool:
    """True when the typed msgspec path handles the file without handing over."""
    try:
        _, events = decode_document(read_trace_bytes(path))
        collect_columns(events)
    except Fallback:
        return False
    return True


# ---- every real trace ------------------------------------------------------------


@pytest.mark.parametrize("name", REAL)
def test_real_trace_identical_frames_signals_findings(name):
    path = FIXTURES / name
    fast, ref = load(path), load(path, engine="reference")
    assert_same_trace(fast, ref)
    assert_same_analysis(fast, ref)
    # the recorded-input columns are compared on real values, not only on two empty columns
    raw = read_trace_bytes(path)
    for col, key in SHAPE_ARGS:
        assert fast.ops[col].notna().any() == (f'"{key}"'.encode() in raw), (name, col)


@pytest.mark.parametrize("name", REAL)
def test_real_trace_takes_the_fast_path(name):
    assert fast_path_taken(FIXTURES / name)


# ---- synthetic edge cases ----------------------------------------------------------


def _edge_traces() -> dict[str, dict]:
    out: dict[str, dict] = {}
    out["basic"] = dataloader_bound().doc()
    old = TraceBuilder(old_categories=True)
    old.step(1, 0, 1000).op("aten::conv2d", 10, 50).kernel("volta_sgemm_128x64_nn", 20, 30, 100)
    old.memcpy("HtoD", "Pageable", 4096, 200, 210, 20).memset(300, 310, 5)
    out["old_categories"] = old.doc()
    ns = TraceBuilder(base=1_712_000_000_000.123)
    ns.step(1, 0.0, 100.25).op("aten::mm", 10.125, 5.5).kernel("sm90_xmma_gemm", 11.0, 12.375, 3.001)
    out["float_ns_timestamps"] = ns.doc()
    mem = dataloader_bound(n_steps=1)
    mem.memory(5, 1e9).memory(6, 3e9).memory(7, 2e9, device_type=0)
    out["memory_events"] = mem.doc()
    d = dataloader_bound(n_steps=2).doc()
    for e in d["traceEvents"]:
        if e.get("ph") == "X":
            e["pid"] = str(e["pid"]) if e["cat"] != "kernel" else "0"
            e["tid"] = str(e["tid"])
    d["traceEvents"].append(
        {
            "ph": "X",
            "cat": "cpu_op",
            "name": "aten::add",
            "pid": 100,
            "tid": "100",
            "ts": d["traceEvents"][1]["ts"] + 3,
            "dur": 2,
        }
    )  # int pid beside string pids
    out["string_pids_mixed"] = d
    d = dataloader_bound(n_steps=2).doc()
    for e in d["traceEvents"]:
        e.pop("args", None)
    out["missing_args"] = d
    d = dataloader_bound(n_steps=2).doc()
    for e in d["traceEvents"]:
        if e.get("cat") == "cpu_op":
            e["args"] = None  # "args": null reads as no args
        if e.get("cat") == "kernel":
            e.pop("dur")
    out["null_args_missing_dur"] = d
    d = dataloader_bound(n_steps=2).doc()
    for e in d["traceEvents"]:
        a = e.get("args") or {}
        if "stream" in a:
            a["stream"] = "0x0"  # ROCm writes strings here
        if "correlation" in a and e["cat"] == "cuda_runtime":
            a["correlation"] = str(a["correlation"])
        if "device" in a:
            a["device"] = "1"
    out["string_numbers_in_args"] = d
    d = dataloader_bound(n_steps=2).doc()
    d["traceEvents"] += [
        {"ph": "M", "name": "thread_name", "pid": 1, "tid": 1.5, "ts": "not a number", "args": {"name": 3}},
        {"ph": "s", "id": 7, "pid": True, "tid": 1, "ts": 5, "cat": "ac2g", "name": "launch"},
        {"ph": "X", "cat": "gpu_user_annotation", "name": "ann", "pid": 0, "tid": 7, "ts": None},
        {
            "ph": "X",
            "cat": "python_function",
            "name": "nn.Module: Foo",
            "pid": 100,
            "tid": 100,
            "ts": d["traceEvents"][1]["ts"],
            "dur": 10,
            "args": {"Python id": 3},
        },
        {
            "ph": "X",
            "cat": "cuda_sync",
            "name": "Stream Sync",
            "pid": 0,
            "tid": "stream 7",
            "ts": d["traceEvents"][1]["ts"] + 50,
            "dur": 4,
            "args": {"correlation": 1, "stream": 7, "device": 0},
        },
        {"ph": "C", "name": "GPU 0 Util", "pid": 0, "ts": 1, "args": {"GPU Utilization": 0.5}},
    ]
    out["odd_ignored_events_and_sync"] = d
    d = dataloader_bound(n_steps=2).doc()
    d["traceEvents"][2]["args"]["External id"] = True  # bool: not a number (NaN in both)
    d["traceEvents"][3]["args"]["correlation"] = [1]
    out["odd_arg_types"] = d
    amd = TraceBuilder(devices=[{"id": 0, "name": "AMD Instinct MI250X", "computeMajor": 9, "computeMinor": 0}])
    amd.step(1, 0, 100).op("aten::mm", 0, 50)
    corr = amd._launch("hipLaunchKernel", 10, 5)
    amd.events.append(
        {
            "ph": "X",
            "cat": "kernel",
            "name": "Cijk_Alik",
            "pid": 0,
            "tid": 0,
            "ts": amd.base + 20,
            "dur": 10,
            "args": {"device": 0, "stream": 0, "correlation": corr},
        }
    )
    out["hip_runtime"] = amd.doc()
    d = dataloader_bound(n_steps=2).doc()
    d["distributedInfo"] = {"rank": 3, "world_size": 8}
    d["traceName"] = "x"
    d["traceEvents"].append(
        {
            "ph": "X",
            "cat": "user_annotation",
            "name": "ProfilerStep#9\n",
            "pid": 100,
            "tid": 100,
            "ts": d["traceEvents"][1]["ts"] + 3000,
            "dur": 5,
        }
    )
    d["traceEvents"].append(
        {
            "ph": "X",
            "cat": "cpu_op",
            "name": "ProfilerStep#x",
            "pid": 100,
            "tid": 100,
            "ts": d["traceEvents"][1]["ts"] + 3001,
            "dur": 1,
        }
    )
    out["metadata_and_step_names"] = d
    d = dataloader_bound(n_steps=2).doc()
    ops = [e for e in d["traceEvents"] if e.get("cat") == "cpu_op"]
    shapes = [
        {
            "Input Dims": [[32, 3, 224, 224], [64, 3, 7, 7], [], []],
            "Input type": ["float", "c10::BFloat16", "", "Scalar"],
        },
        {"Input Dims": [[[2, 3], [4]], []], "Input Strides": [[[3, 1], [1]], []], "Concrete Inputs": ["", "[2, 2]"]},
        {"Input Dims": "[[1]]", "Input type": [1, 2], "Input Strides": [[1.5]], "Concrete Inputs": [None]},
        {"Input Dims": [[True]], "Input type": {"a": 1}, "Input Strides": [[2**70]], "Concrete Inputs": ["x" * 5000]},
        {"Input Dims": [[[[1]]]], "Input type": None, "Input Strides": [[1]] * 3000, "Concrete Inputs": 7},
    ]
    for e, extra in zip(ops, shapes * len(ops), strict=False):
        e.setdefault("args", {}).update(extra)
    out["recorded_shapes_valid_and_hostile"] = d
    out["only_memory_events"] = {
        "traceEvents": [
            {
                "ph": "i",
                "name": "[memory]",
                "pid": 1,
                "tid": 1,
                "ts": 1_700_000_000_000_000 + i,
                "args": {"Device Type": 1, "Device Id": 0, "Bytes": 512, "Total Allocated": 1024.0 * i},
            }
            for i in range(3)
        ]
    }
    return out


EDGE = _edge_traces()


@pytest.mark.parametrize("case", sorted(EDGE))
def test_edge_case_identical(tmp_path, case):
    p = tmp_path / f"{case}.json"
    p.write_bytes(json.dumps(EDGE[case]).encode())
    fast, ref = load(p), load(p, engine="reference")
    assert_same_trace(fast, ref)
    assert_same_analysis(fast, ref)


@pytest.mark.parametrize(
    "case",
    [
        "basic",
        "old_categories",
        "float_ns_timestamps",
        "memory_events",
        "string_pids_mixed",
        "missing_args",
        "string_numbers_in_args",
        "hip_runtime",
        "metadata_and_step_names",
        "only_memory_events",
        "recorded_shapes_valid_and_hostile",
    ],
)
def test_edge_cases_need_no_handover(tmp_path, case):
    p = tmp_path / f"{case}.json"
    p.write_bytes(json.dumps(EDGE[case]).encode())
    assert fast_path_taken(p)


def test_engine_argument(tmp_path):
    p = dataloader_bound().write(tmp_path / "t.json")
    with pytest.raises(ValueError, match="engine"):
        load(p, engine="nope")
    assert len(tracedoc.load(p, engine="reference").kernels) == 3


# ---- bad input: the same one-line error from both engines --------------------------

_EV = '{"ph": "X", "cat": "cpu_op", "name": "a", "ts": 1, "dur": 1}'
BAD = {
    "truncated_gzip": gzip.compress(json.dumps(dataloader_bound().doc()).encode())[:200],
    "corrupt_gzip": b"\x1f\x8b" + b"\x00" * 40,
    "invalid_json": b'{"traceEvents": [',
    "bare_nan": b'{"traceEvents": [{"ph": "X", "cat": "cpu_op", "name": "a", "ts": NaN, "dur": 1}]}',
    "bare_infinity": b'{"traceEvents": [{"ph": "X", "cat": "cpu_op", "name": "a", "ts": 1, "dur": Infinity}]}',
    "control_char": b'{"traceEvents": [{"ph": "X", "cat": "cpu_op", "name": "a\x01", "ts": 1, "dur": 1}]}',
    "trailing_garbage": ('{"traceEvents": [' + _EV + "]} x").encode(),
    "empty_file": b"",
    "whitespace_only": b" \n\t ",
    "json_array": b'[{"ph": "X"}]',
    "string_top_level": b'"trace"',
    "number_top_level": b"42",
    "no_trace_events": b'{"name": "not a trace"}',
    "trace_events_object": b'{"traceEvents": {"a": 1}}',
    "trace_events_null": b'{"traceEvents": null}',
    "event_not_object": b'{"traceEvents": [1, 2]}',
    "second_event_not_object": ('{"traceEvents": [' + _EV + ', "x"]}').encode(),
    "ts_string": b'{"traceEvents": [{"ph": "X", "cat": "cpu_op", "name": "a", "ts": "12", "dur": 1}]}',
    "ts_missing": b'{"traceEvents": [{"ph": "X", "cat": "kernel", "name": "a", "dur": 1}]}',
    "ts_null_memory": b'{"traceEvents": [{"ph": "i", "name": "[memory]", "ts": null}]}',
    "ts_bool": b'{"traceEvents": [{"ph": "X", "cat": "cpu_op", "name": "a", "ts": true, "dur": 1}]}',
    "dur_array": b'{"traceEvents": [{"ph": "X", "cat": "kernel", "name": "k", "ts": 1, "dur": [1]}]}',
    "dur_null": b'{"traceEvents": [{"ph": "X", "cat": "kernel", "name": "k", "ts": 1, "dur": null}]}',
    "name_number": b'{"traceEvents": [{"ph": "X", "cat": "cpu_op", "name": 5, "ts": 1, "dur": 1}]}',
    "name_missing": b'{"traceEvents": [{"ph": "X", "cat": "cuda_runtime", "ts": 1, "dur": 1}]}',
    "cat_number": b'{"traceEvents": [{"ph": "X", "cat": 7, "name": "a", "ts": 1, "dur": 1}]}',
    "args_string": b'{"traceEvents": [{"ph": "X", "cat": "cpu_op", "name": "a", "ts": 1, "dur": 1, "args": "x"}]}',
    "args_list_memory": b'{"traceEvents": [{"ph": "i", "name": "[memory]", "ts": 1, "args": [1]}]}',
    "empty_trace": b'{"traceEvents": []}',
    "foreign_trace": b'{"traceEvents": [{"ph": "X", "cat": "blink", "name": "Paint", "ts": 1, "dur": 3}]}',
    "lone_surrogate": b'{"traceEvents": [{"ph": "X", "cat": "cpu_op", "name": "\\ud800", "ts": 1, "dur": 1}]}',
}


@pytest.mark.parametrize("case", sorted(BAD))
def test_bad_input_same_error_both_engines(tmp_path, case):
    p = tmp_path / f"{case}.json"
    p.write_bytes(BAD[case])
    errors = []
    for engine in ("fast", "reference"):
        with pytest.raises(TraceLoadError) as ei:
            load(p, engine=engine)
        errors.append(str(ei.value))
    assert errors[0] == errors[1]
    assert str(p) in errors[0] and "\n" not in errors[0]


def test_missing_file_and_directory(tmp_path):
    for engine in ("fast", "reference"):
        with pytest.raises(TraceLoadError, match="no such file"):
            load(tmp_path / "nope.json", engine=engine)
        with pytest.raises(TraceLoadError, match="directory"):
            load(tmp_path, engine=engine)


# ---- gzip: streamed into one buffer ---------------------------------------------------


def test_gzip_size_hint_and_stream(tmp_path):
    raw = json.dumps(dataloader_bound().doc()).encode()
    p = tmp_path / "t.json.gz"
    p.write_bytes(gzip.compress(raw))
    assert gzip_size_hint(p) == len(raw)
    data = read_trace_bytes(p)
    assert bytes(data) == raw


def test_gzip_multi_member_grows_past_the_hint(tmp_path, monkeypatch):
    import importlib

    source = importlib.import_module("tracedoc.load.source")  # tracedoc.load is also a function name

    monkeypatch.setattr(source, "_CHUNK", 64)  # force many reads and buffer growth
    raw = json.dumps(dataloader_bound(n_steps=20).doc()).encode()
    half = len(raw) // 2
    p = tmp_path / "multi.json.gz"
    p.write_bytes(gzip.compress(raw[:half]) + gzip.compress(raw[half:]))  # trailer holds only the 2nd size
    assert gzip_size_hint(p) < len(raw)
    assert bytes(read_trace_bytes(p)) == raw
    assert_same_trace(load(p), load(p, engine="reference"))


# ---- progress display: only on a terminal, never for JSON or in CI ------------------------


class _Tty:
    def isatty(self):
        return True


def test_progress_only_on_terminal_not_json_not_ci(monkeypatch):
    from tracedoc.progress import wanted

    monkeypatch.delenv("CI", raising=False)
    monkeypatch.delenv("TRACEDOC_NO_PROGRESS", raising=False)
    assert wanted(False, _Tty())
    assert not wanted(True, _Tty())
    assert not wanted(False, sys.stdout if not sys.stdout.isatty() else open("/dev/null"))
    monkeypatch.setenv("CI", "true")
    assert not wanted(False, _Tty())


def test_progress_callback_receives_stages(tmp_path):
    p = dataloader_bound().write(tmp_path / "t.json.gz", gz=True)
    seen: list[str] = []
    load(p, progress=seen.append)
    assert seen[0] == "reading" and any("decoding" in s for s in seen) and any("columns" in s for s in seen)


# ---- the benchmark's trace builder keeps ids unique ----------------------------------------


def test_make_trace_repeats_with_unique_ids(tmp_path):
    sys.path.insert(0, str(Path(__file__).resolve().parent.parent / "benchmarks"))
    from make_trace import build

    src = dataloader_bound(n_steps=3).write(tmp_path / "src.json.gz", gz=True)
    n = build(str(src), 4, str(tmp_path / "x4.json"))
    one, four = load(src), load(tmp_path / "x4.json")
    assert four.n_events == n == 1 + 4 * (one.n_events - 1)  # the metadata event is written once
    assert len(four.kernels) == 4 * len(one.kernels)
    assert four.runtime["correlation"].is_unique and four.kernels["correlation"].is_unique
    assert four.steps["step"].is_unique and four.steps["ts_us"].is_monotonic_increasing
    assert four.span_us > 4 * one.span_us


# ---- parallel decoding (forked workers over cuts of the events array) ----------------------


@pytest.fixture
def small_parallel(monkeypatch):
    """Let the parallel decoder kick in on small files."""
    import importlib

    fast = importlib.import_module("tracedoc.load.fast")
    monkeypatch.setattr(fast, "PARALLEL_MIN_BYTES", 64)
    return fast


@pytest.mark.skipif(not sys.platform.startswith("linux"), reason="parallel decoding forks (Linux only)")
@pytest.mark.parametrize("workers", [2, 3, 5])
def test_parallel_decoding_identical(tmp_path, small_parallel, workers):
    names = REAL[:] or []
    paths = [FIXTURES / n for n in names if n.startswith(("v100_resnet50_ddp", "mi250", "a100"))]
    cases = ("basic", "memory_events", "string_pids_mixed", "metadata_and_step_names", "hip_runtime")
    for case in (*cases, "recorded_shapes_valid_and_hostile"):
        p = tmp_path / f"{case}.json"
        p.write_text(json.dumps(EDGE[case], indent=1))
        paths.append(p)
    for p in paths:
        data = read_trace_bytes(p)
        assert small_parallel.parallel_parts(data, workers) == workers
        if p.parent == FIXTURES:  # large enough for every part to hold events: no handover
            holder = [data]
            small_parallel.parse_parallel(holder, workers)
            assert holder[0] is None  # released once decoded
        assert_same_trace(load(p, workers=workers), load(p, engine="reference"))


@pytest.mark.skipif(not sys.platform.startswith("linux"), reason="parallel decoding forks (Linux only)")
def test_parallel_bad_cut_hands_over_and_leaves_bytes_intact(tmp_path, small_parallel):
    b = dataloader_bound(n_steps=2)
    b.op("x}, {" * 4000, 10, 1)  # a name full of cut-like text, right in the middle of the file
    b.op("aten::add", 20, 1)
    p = b.write(tmp_path / "t.json")
    data = read_trace_bytes(p)
    before = bytes(data)
    cut = small_parallel.split_points(data, 2)[0]
    assert b"x}, {x" in before[cut[0] - 3 : cut[1] + 3]  # the cut falls inside the string
    holder = [data]
    with pytest.raises(Fallback):
        small_parallel.parse_parallel(holder, 2)
    assert holder[0] is data and bytes(data) == before  # this process's part failed: buffer kept
    assert_same_trace(load(p, workers=2), load(p, engine="reference"))


@pytest.mark.parametrize("where", [1, -1])
def test_parallel_errors_match_reference(tmp_path, small_parallel, where):
    d = dataloader_bound(n_steps=3).doc()
    d["traceEvents"][where]["ts"] = "late"  # a bad kept event in the first / the last part
    p = tmp_path / "bad.json"
    p.write_text(json.dumps(d))
    msgs = []
    for kw in ({"workers": 2}, {"engine": "reference"}):
        with pytest.raises(TraceLoadError) as ei:
            load(p, **kw)
        msgs.append(str(ei.value))
    assert msgs[0] == msgs[1] and "'ts' is a string" in msgs[0]


def test_memory_mapped_empty_and_blank_files(tmp_path, small_parallel):
    for name, data, msg in (("e.json", b"", "empty file"), ("b.json", b" \n ", "empty file")):
        p = tmp_path / name
        p.write_bytes(data)
        with pytest.raises(TraceLoadError, match=msg):
            load(p)


# ---- streaming (a regular file decoded part by part, issue 24) ---------------------------------


def _stream_paths(tmp_path) -> list:
    paths = [FIXTURES / n for n in REAL if n.startswith(("v100_resnet50_ddp", "mi250", "a100", "h100_resnet18_base"))]
    for case in ("basic", "memory_events", "string_pids_mixed", "metadata_and_step_names", "hip_runtime"):
        p = tmp_path / f"{case}.json"
        p.write_text(json.dumps(EDGE[case], indent=1))
        paths.append(p)
    p = tmp_path / "shapes.json"  # recorded inputs in some parts only
    p.write_text(json.dumps(EDGE["recorded_shapes_valid_and_hostile"], indent=1))
    paths.append(p)
    return paths


@pytest.mark.parametrize("workers", [1, 2])
def test_streamed_parts_identical(tmp_path, monkeypatch, workers):
    from tracedoc.load import fast
    from tracedoc.load.source import iter_trace_blocks

    for p in _stream_paths(tmp_path):
        size = len(read_trace_bytes(p))
        part = max(64, size // 12)  # about a dozen parts per trace
        monkeypatch.setattr(fast, "STREAM_PART_BYTES", part)
        sizes = [len(doc) for doc, _, _ in fast.stream_parts(iter_trace_blocks(p))]
        assert len(sizes) > 1, p.name
        # a part is its target, the rest of the event it ends in, and the brackets: never the trace
        assert max(sizes) < part + 64 * 1024 and sum(sizes) < size + 32 * len(sizes), p.name
        fast.load_stream(iter_trace_blocks(p), workers)  # no handover: every part proven and typed
        assert_same_trace(load(p, workers=workers), load(p, engine="reference"))


def test_stream_part_holding_cut_like_text_hands_over(tmp_path, monkeypatch):
    from tracedoc.load import fast
    from tracedoc.load.source import iter_trace_blocks

    b = dataloader_bound(n_steps=2)
    b.op("x}, {" * 4000, 10, 1)  # the last cut-like text of a part falls inside this string
    b.op("aten::add", 20, 1)
    p = b.write(tmp_path / "t.json")
    monkeypatch.setattr(fast, "STREAM_PART_BYTES", 4096)
    with pytest.raises(Fallback):
        fast.load_stream(iter_trace_blocks(p), 1)
    for workers in (1, 2):
        assert_same_trace(load(p, workers=workers), load(p, engine="reference"))


@pytest.mark.parametrize("where", [1, -1])
def test_streamed_errors_match_reference(tmp_path, monkeypatch, where):
    from tracedoc.load import fast

    monkeypatch.setattr(fast, "STREAM_PART_BYTES", 2048)
    d = dataloader_bound(n_steps=3).doc()
    d["traceEvents"][where]["ts"] = "late"  # a bad kept event in the first / the last part
    p = tmp_path / "bad.json"
    p.write_text(json.dumps(d))
    msgs = []
    for kw in ({"workers": 2}, {"workers": 1}, {"engine": "reference"}):
        with pytest.raises(TraceLoadError) as ei:
            load(p, **kw)
        msgs.append(str(ei.value))
    assert msgs[0] == msgs[1] == msgs[2] and "'ts' is a string" in msgs[0]


def test_stream_records_the_bytes_read_for_the_cache(tmp_path, monkeypatch):
    import hashlib

    from tracedoc.load import fast
    from tracedoc.load.source import record_reads

    monkeypatch.setattr(fast, "STREAM_PART_BYTES", 2048)
    for gz in (False, True):
        p = dataloader_bound(n_steps=3).write(tmp_path / ("t.json.gz" if gz else "t.json"), gz=gz)
        with record_reads() as reads:
            load(p, workers=2)
        assert len(reads) == 1 and reads[0].sha256 == hashlib.sha256(p.read_bytes()).hexdigest()


# ---- the signal speed-ups give the same numbers as the code they replaced ------------------


def test_covered_mask_same_as_binary_search_per_grid_point():
    import numpy as np

    from tracedoc.signals.intervals import covered_mask

    def original(starts, ends, grid):
        left = grid[:-1]
        return (
            np.searchsorted(np.sort(starts), left, side="right") - np.searchsorted(np.sort(ends), left, side="right")
        ) > 0

    rng = np.random.default_rng(0)
    for trial in range(400):
        n = int(rng.integers(1, 60))
        s = np.round(rng.uniform(0, 100, n), int(rng.integers(0, 3)))
        e = s + np.round(rng.uniform(-5, 20, n), 1)
        if trial % 3 == 0:
            s[0] = np.nan
        grid = np.unique(np.concatenate([s, e, rng.uniform(0, 120, int(rng.integers(0, 30)))]))
        grid = grid[~np.isnan(grid)]
        if trial % 5 == 0:  # boundaries not all in the grid
            grid = np.unique(np.round(rng.uniform(0, 120, 40), 0))
        if len(grid) >= 2:
            assert (covered_mask(s, e, grid) == original(s, e, grid)).all()


def test_name_masks_same_as_pandas_str():
    from tracedoc.signals.strings import name_mask, startswith_mask

    names = pd.Series(
        ["ProfilerStep#1", "aten::mm", "ProfilerStep#x", "", "enumerate(DataLoader)#a", "aten::mm"] * 3, dtype=object
    )
    for prefix in ("ProfilerStep#", "aten", "", "enumerate(DataLoader)#"):
        assert (startswith_mask(names, prefix) == names.str.startswith(prefix).to_numpy(bool)).all()
    assert name_mask(names, lambda n: "mm" in n).tolist() == ["mm" in n for n in names]


@pytest.mark.skipif(not sys.platform.startswith("linux"), reason="parallel decoding is Linux only")
def test_stream_worker_is_a_fresh_interpreter_without_pandas(tmp_path, monkeypatch):
    # a fork would map every page of the parent (pandas included: 144 MiB on the tiled trace);
    # the worker is a new interpreter that imports the decoder only (issue 24)
    from tracedoc.load import fast

    w = fast._Worker()
    try:
        assert w.proc.args[0] == sys.executable
        part = json.dumps(dataloader_bound(n_steps=2).doc()).encode()
        w.send(part, True, True)
        doc, cols = w.receive()
        assert cols.n_events == fast.decode_part(part, True, True)[1].n_events > 0
        with open(f"/proc/{w.pid}/maps") as fh:
            maps = fh.read()
        assert "pandas" not in maps and "msgspec" in maps
    finally:
        w.close()
    assert w.proc.returncode == 0


def test_stream_worker_that_cannot_start_leaves_the_decoding_here(tmp_path, monkeypatch):
    import subprocess

    from tracedoc.load import fast

    def refuse(*a, **k):
        raise OSError("no interpreter")

    monkeypatch.setattr(subprocess, "Popen", refuse)
    monkeypatch.setattr(fast, "STREAM_PART_BYTES", 2048)
    p = dataloader_bound(n_steps=6).write(tmp_path / "t.json")
    assert_same_trace(load(p, workers=2), load(p, engine="reference"))


def test_packed_parts_take_the_narrowest_codes_and_unpack_to_the_same_columns():
    """A part's string columns are packed with int8, int16 or int32 codes by their distinct
    count (128 and 32,768 the edges), its zero ``end_us`` by its length alone, and unpacking
    gives every column back value for value (issue 24: the parts held at the end of a streamed
    decode)."""
    import numpy as np

    from tracedoc.load import fast

    def obj(values):
        out = np.empty(len(values), dtype=object)
        out[:] = values
        return out

    n = 70_000
    cols = fast.ArrayColumns()
    cols.cols["ops"] = {
        "few": obj([f"a{i % 128}" for i in range(n)]),
        "some": obj([f"b{i % 129}" for i in range(n)]),
        "many": obj([f"c{i % 32_768}" for i in range(n)]),
        "more": obj([f"d{i % 32_769}" for i in range(n)]),
        "none": np.broadcast_to(fast._NONE, (n,)),
        "end_us": np.zeros(n),
        "ts_us": np.arange(n, dtype=float),
    }
    cols.cols["steps"] = {"end_us": np.array([0.0, 2.5])}  # not all zeros: kept as it is
    want = {k: {c: np.array(v, copy=True) for c, v in f.items()} for k, f in cols.cols.items()}
    packed = fast._pack(cols).cols
    assert [packed["ops"][c].codes.dtype for c in ("few", "some", "many", "more")] == [
        np.int8,
        np.int16,
        np.int16,
        np.int32,
    ]
    assert isinstance(packed["ops"]["end_us"], fast._Zeros) and len(packed["ops"]["end_us"]) == n
    assert isinstance(packed["steps"]["end_us"], np.ndarray)
    got = fast._unpack(fast._pack(fast._unpack(cols))).cols  # packed twice over: the same again
    for kind, frame in want.items():
        for c, v in frame.items():
            assert got[kind][c].dtype == v.dtype and got[kind][c].tolist() == v.tolist(), (kind, c)
