"""Memory of the analysis beyond the loaded frames (issue 24).

Two things kept the analysis of a large trace far above its frames:

* pandas 3 turns a column of Python strings into its Arrow-backed ``str`` dtype, so every
  derived frame with a name column copied each row's text into Arrow's memory pool (67 MiB
  at its peak on the 301 MB tiled trace; analysis peak 405 -> 349 MiB once the derived frames
  kept ``object`` columns, :func:`tracedoc.signals.strings.texts`);
* the step model's replay read its arrays through Python lists, one float object per element
  (160 MiB more on the 1 M-event trace); it reads them through memoryviews now.
"""

from __future__ import annotations

import json
import subprocess
import sys
import tracemalloc

import numpy as np
import pandas as pd

from tests.conftest import real_trace
from tracedoc.load import load
from tracedoc.signals import SignalContext
from tracedoc.signals.stepmodel import BASELINE, _anchor_order, _replay, _schedule
from tracedoc.signals.strings import texts

_ARROW_PEAK = r"""
import json, sys
from tracedoc.engine import analyze_trace
from tracedoc.load import load
try:
    import pyarrow as pa
except ImportError:  # pandas keeps strings as objects without pyarrow
    pa = None
report = analyze_trace(load(sys.argv[1], cache=None))
peak = pa.default_memory_pool().max_memory() if pa is not None else 0
print(json.dumps({"findings": len(report.findings), "arrow_peak": peak}))
"""


def test_texts_is_an_object_column_of_the_same_strings():
    values = np.array(["volta_sgemm_128x64_nn", None, "volta_sgemm_128x64_nn"], dtype=object)
    s = texts(values, index=pd.Index([4, 7, 9]))
    assert s.dtype == object
    assert s.index.tolist() == [4, 7, 9]
    assert s.iloc[0] is values[0]  # the trace's own string, not a copy
    assert s.isna().tolist() == [False, True, False]


def test_analysis_keeps_names_out_of_arrow_memory():
    # a whole analysis of a real V100 training trace (3,800 kernels) in a fresh process, so the
    # pool's peak is this analysis's alone; with the derived frames' names inferred as Arrow
    # strings the pool peaked at 7.6 MB here (code of 9396e7c), with object columns at 0.12 MB
    path = real_trace("v100_resnet50_workers0.pt.trace.json.gz")
    out = subprocess.run(
        [sys.executable, "-c", _ARROW_PEAK, str(path)], capture_output=True, text=True, timeout=300, check=True
    )
    got = json.loads(out.stdout)
    assert got["findings"] > 0
    assert got["arrow_peak"] < 1 << 20


def test_replay_needs_no_object_per_event():
    # traced allocations of one replay, after the schedule is built: arrays of 8 bytes per event
    # and anchor; the list-based loop allocated about 300 bytes per element
    ctx = SignalContext(load(real_trace("v100_resnet50_workers0.pt.trace.json.gz"), cache=None))
    sch = _schedule(ctx)
    _anchor_order(ctx)
    _replay(ctx, BASELINE, True)  # imports and one-off caches out of the way
    elements = sch.ev_rows.size + sch.a_ts.size
    assert elements > 10_000
    # traced: 119 bytes per element with every anchor's gap shares held at once (code of
    # 2234a73), 77 with one window's at a time, 57 once the schedule's arrays are read where the
    # transformation leaves them and a single region's union is not merged again
    for trace_path, limit in ((False, 64), (True, 70)):
        tracemalloc.start()
        try:
            _replay(ctx, BASELINE, trace_path)
            peak = tracemalloc.get_traced_memory()[1]
        finally:
            tracemalloc.stop()
        assert peak / elements < limit, (trace_path, peak / elements)


def test_kernel_categories_are_shared_strings_not_text_arrays():
    """The categorised kernels' ``category`` column holds the four category strings themselves.
    Choosing among the texts with np.where made fixed-width unicode arrays, three at once, and
    a new string per kernel: on this trace (8,772 kernels in its windows) the build peaked at
    245 bytes a kernel and held 91 (code of f603027); choosing by index, 62 and 25. Held as a
    one-byte ``Categorical`` of the four, with the names as codes (``text_rows``): 25 and 3
    (8.8 held at 075b7dc)."""
    from tracedoc.signals.attribution import kernel_ops
    from tracedoc.signals.gpu import KERNEL_CATEGORIES, _categorised_kernels, kernels_in_windows_mask

    ctx = SignalContext(load(real_trace("v100_resnet50_workers0.pt.trace.json.gz"), cache=None))
    kernel_ops(ctx), kernels_in_windows_mask(ctx)  # what it reads, built before the measurement
    tracemalloc.start()
    try:
        df, _ = _categorised_kernels(ctx)
        held, peak = tracemalloc.get_traced_memory()
    finally:
        tracemalloc.stop()
    n = len(df)
    assert n == 8772
    assert peak / n < 120 and held / n < 5, (peak / n, held / n)
    assert df["category"].array.codes.dtype == np.int8
    by_text = {c: c for c in KERNEL_CATEGORIES}
    assert all(v is by_text[v] for v in df["category"].tolist())


def test_frames_are_built_from_the_sink_not_beside_it():
    """``build_trace`` empties the loader's columns as it makes each frame. Holding every column
    and every frame at once made the load's peak on this trace 2.3x the decoded columns (code of
    2234a73); consuming them, 1.4x (1 M small events: the load's RSS peak in process 336 -> 249 MiB)."""
    import gzip

    from tracedoc.load.build import build_trace
    from tracedoc.load.fast import collect_columns, decode_document

    path = real_trace("v100_resnet50_workers0.pt.trace.json.gz")
    doc, events = decode_document(gzip.open(path).read())
    tracemalloc.start()
    try:
        sink = collect_columns(events)
        del events
        tracemalloc.reset_peak()
        columns = tracemalloc.get_traced_memory()[0]
        trace = build_trace(sink, doc, str(path))
        peak = tracemalloc.get_traced_memory()[1]
    finally:
        tracemalloc.stop()
    assert len(trace.kernels) == 8772 and len(trace.ops) > 10_000
    assert all(not cols for cols in sink.cols.values())  # every column handed over
    assert peak / columns < 1.7, peak / columns


def test_keep_rows_is_a_view_for_one_run_and_a_copy_otherwise():
    from hypothesis import given, settings
    from hypothesis import strategies as st

    from tracedoc.signals.steps import keep_rows

    df = pd.DataFrame(
        {"ts_us": np.arange(12, dtype=float), "name": texts([f"k{i % 3}" for i in range(12)])},
        index=pd.RangeIndex(100, 112),
    )

    @settings(max_examples=200, deadline=None)
    @given(st.lists(st.booleans(), min_size=12, max_size=12))
    def same_rows(bits):
        mask = np.array(bits)
        pd.testing.assert_frame_equal(keep_rows(df, mask), df[mask])

    same_rows()
    run = np.zeros(12, dtype=bool)
    run[3:9] = True
    view = keep_rows(df, run)
    assert np.shares_memory(view["ts_us"].to_numpy(), df["ts_us"].to_numpy())  # no copy
    assert view.index.tolist() == list(range(103, 109))
    run[5] = False  # two runs: a copy
    assert not np.shares_memory(keep_rows(df, run)["ts_us"].to_numpy(), df["ts_us"].to_numpy())
    assert keep_rows(df, np.ones(12, dtype=bool)) is df


def test_owned_frame_and_consumed_columns_are_not_copied():
    from tracedoc.load.shapes import frame_columns
    from tracedoc.signals.strings import owned_frame
    from tracedoc.trace import frame_from_columns

    ts = np.arange(5, dtype=float)
    frame = owned_frame({"ts_us": ts, "name": texts(["a", "b", "a", None, "c"])})
    assert np.shares_memory(frame["ts_us"].to_numpy(), ts)
    assert frame["name"].dtype == object and frame["name"].iloc[3] is None

    def columns() -> dict:
        out = {}
        for c, t in frame_columns("kernels"):
            if t in ("object", "category"):
                out[c] = np.array(["k"] * 4, dtype=object)
            else:  # an id column ("int") given in the int32 it takes (tracedoc.trace.id_array)
                out[c] = np.arange(4).astype(np.int32 if t == "int" else t)
        return out

    given = columns()
    kept = dict(given)
    consumed = frame_from_columns("kernels", given, consume=True)
    assert not given  # every column taken
    assert np.shares_memory(consumed["ts_us"].to_numpy(), kept["ts_us"])
    assert np.shares_memory(consumed["device"].to_numpy(), kept["device"])
    assert consumed["device"].dtype == np.int32
    given = columns()
    copied = frame_from_columns("kernels", given)
    assert given and not np.shares_memory(copied["ts_us"].to_numpy(), given["ts_us"])
    pd.testing.assert_frame_equal(consumed, copied)


def test_gpu_events_build_once_and_hold_no_launch_columns():
    """:func:`gpu_events` concatenates each column of the kernels, memcpys and memsets once: a
    frame per kind and then their ``pd.concat`` peaked at 293 bytes per GPU event on this trace
    (code of 2234a73), 217 at fe5ed70, 155 now. The frame is held for the whole analysis: the
    launching call's start, end and thread are derived from ``rt_pos`` where they are read
    (:func:`launch_of`), ``kind`` is a one-byte ``Categorical`` and ``rt_pos`` int32; it held
    150 bytes per GPU event on fe5ed70 and 60 now (tracemalloc, after the build)."""
    from tracedoc.signals.steps import gpu_events
    from tracedoc.signals.strings import frame_names, frame_threads

    ctx = SignalContext(load(real_trace("v100_resnet50_workers0.pt.trace.json.gz"), cache=None))
    frame_names(ctx, "kernels"), frame_threads(ctx, "runtime")  # what it reads, built first
    tracemalloc.start()
    try:
        g = gpu_events(ctx)
        held, peak = tracemalloc.get_traced_memory()
    finally:
        tracemalloc.stop()
    assert len(g) == 9096
    assert peak / len(g) < 185, peak / len(g)
    assert set(g["kind"].astype(str)) == {"kernel", "memcpy", "memset"}
    assert g["kind"].cat.codes.dtype == np.int8 and g["rt_pos"].dtype == np.int32
    assert not {"launch_ts_us", "launch_end_us", "launch_thread"} & set(g.columns)
    assert held / len(g) < 80, held / len(g)


def test_gpu_events_of_one_kind_share_the_trace_frame():
    """Kernels alone: the frame's columns are the kernels frame's own, not copies."""
    from tracedoc.signals.steps import gpu_events

    trace = load(real_trace("v100_resnet50_workers0.pt.trace.json.gz"), cache=None)
    trace.memcpys, trace.memsets = trace.memcpys.iloc[:0], trace.memsets.iloc[:0]
    g = gpu_events(SignalContext(trace))
    assert len(g) == len(trace.kernels) > 0
    for c in ("name", "device", "stream", "ts_us", "end_us", "correlation"):
        assert np.shares_memory(_stored(g[c]), _stored(trace.kernels[c])), c
        assert g[c].tolist() == trace.kernels[c].tolist()
    assert (g["kind"] == "kernel").all()


def _stored(column: pd.Series) -> np.ndarray:
    """The array a column keeps its rows in: a ``Categorical``'s codes, else its values."""
    return column.array.codes if isinstance(column.dtype, pd.CategoricalDtype) else column.to_numpy()


def test_names_and_threads_codes_are_the_frames_own_or_int32():
    """The names and (pid, tid) codes of the trace's frames are held for the whole analysis
    (issue 24). Names: the name column's own codes (one or two bytes a row, a view of the
    frame, no copy); an ``object`` name column (a hand-built trace) is factorised into int32
    codes. Threads: int32, half of pandas' int64. Both give the rows' values back."""
    from tracedoc.signals.strings import frame_names, frame_threads

    trace = load(real_trace("v100_resnet50_workers0.pt.trace.json.gz"), cache=None)
    ctx = SignalContext(trace)
    for frame in ("ops", "runtime", "kernels"):
        codes, uniques = frame_names(ctx, frame)
        names = getattr(trace, frame)["name"]
        assert codes.dtype.itemsize <= 2 and np.shares_memory(codes, _stored(names))
        assert uniques[codes].tolist() == names.tolist()
        if frame == "kernels":  # a kernel has a device and stream, no thread
            continue
        codes, labels = frame_threads(ctx, frame)
        df = getattr(trace, frame)
        assert codes.dtype == np.int32
        assert labels[codes].tolist() == (df["pid"].astype(str) + "/" + df["tid"].astype(str)).tolist()
    hand = SignalContext(trace)
    trace.kernels = trace.kernels.assign(name=trace.kernels["name"].astype(object))
    codes, uniques = frame_names(hand, "kernels")
    assert codes.dtype == np.int32 and uniques[codes].tolist() == trace.kernels["name"].tolist()


def test_kernel_op_positions_are_built_once_and_shared():
    """The op view, the layout and the attention signals read one int32 array of each kernel's
    launching op (:func:`kernel_op_pos`), as views where their kernels are one run, instead of
    an int64 copy each; its values are the launching call's op (:func:`runtime_ops`)."""
    from tracedoc.signals.attention import attention_kernels
    from tracedoc.signals.attribution import kernel_op_pos, runtime_ops
    from tracedoc.signals.layout import layout_kernels
    from tracedoc.signals.opview import _op_calls
    from tracedoc.signals.steps import gpu_events

    ctx = SignalContext(load(real_trace("v100_resnet50_workers0.pt.trace.json.gz"), cache=None))
    pos = kernel_op_pos(ctx)
    n = len(ctx.trace.kernels)
    rt_pos, ro = gpu_events(ctx)["rt_pos"].to_numpy()[:n], runtime_ops(ctx)["op_pos"].to_numpy()
    assert pos.dtype == np.int32 and ro.dtype == np.int32
    assert pos.tolist() == [int(ro[p]) if p >= 0 else -1 for p in rt_pos.tolist()]
    assert (pos >= 0).sum() > n // 2
    for got in (attention_kernels(ctx)["op_pos"], layout_kernels(ctx)["op_pos"], _op_calls(ctx)[0]["op_pos"]):
        assert np.shares_memory(got.to_numpy(), pos)


def test_schedule_streams_and_anchor_order_are_int32_where_they_fit():
    """The schedule's ``ev_stream`` (``stream * 1024 + device``) and the anchor order's
    ``by_step`` are held for the whole analysis: int32 when every value fits, and the same
    values; an array that does not fit keeps its type."""
    from tracedoc.signals.steps import gpu_events
    from tracedoc.trace import id_array

    ctx = SignalContext(load(real_trace("v100_resnet50_workers0.pt.trace.json.gz"), cache=None))
    sch, order = _schedule(ctx), _anchor_order(ctx)
    g = gpu_events(ctx)
    assert sch.ev_stream.dtype == np.int32 and order.by_step.dtype == np.int32
    assert sch.ev_stream.tolist() == (g["stream"] * 1024 + g["device"]).tolist()
    assert sorted(order.by_step.tolist()) == list(range(sch.a_ts.size))
    big = np.array([0, 2**31], dtype=np.int64)
    assert id_array(big).dtype == np.int64 and id_array(big).tolist() == [0, 2**31]
    assert id_array(np.array([-(2**31), 2**31 - 1])).dtype == np.int32


def test_elementwise_candidates_are_tested_without_a_python_int_per_kernel():
    """The elementwise chains' candidate test is one ``np.isin`` over the kernels' op positions,
    not a list of every position as a Python int: the build's traced peak was 146 bytes per
    kernel on this trace at fe5ed70 and is 121 now (82 -> 54 on 1 M small events)."""
    from tracedoc.signals.elementwise import _calls
    from tracedoc.signals.opview import _call_groups, _group_costs, _op_calls

    ctx = SignalContext(load(real_trace("v100_resnet50_workers0.pt.trace.json.gz"), cache=None))
    kern = _op_calls(ctx)[0]
    _group_costs(ctx), _call_groups(ctx)  # what it reads, built first
    from tracedoc.signals.attention import attention_kernels

    attention_kernels(ctx)
    tracemalloc.start()
    try:
        c = _calls(ctx)
        peak = tracemalloc.get_traced_memory()[1]
    finally:
        tracemalloc.stop()
    op_pos, info = kern["op_pos"].to_numpy(), c["info"]
    assert len(info) > 1000
    want = np.array([int(p) in info for p in op_pos], dtype=bool)
    assert (c["op_pos"] >= 0).tolist() == want.tolist()
    assert peak / len(kern) < 135, peak / len(kern)


def test_text_columns_of_the_frames_take_a_byte_or_two_a_row():
    """The loaders' text columns (name, cat, kind, pid, tid) are ``Categorical``s with sorted
    categories, from both loaders alike: the ops and runtime frames take under 48 bytes a row
    (four float64 columns and the codes), where ``object`` columns took 8 bytes a row each
    (68 and 72 bytes a row at 075b7dc)."""
    path = real_trace("v100_resnet50_workers0.pt.trace.json.gz")
    fast, ref = load(path, cache=None), load(path, cache=None, engine="reference")
    for frame, cols in (("ops", ("name", "cat", "pid", "tid")), ("runtime", ("name", "cat", "kind", "pid", "tid"))):
        df = getattr(fast, frame)
        for c in cols:
            assert isinstance(df[c].dtype, pd.CategoricalDtype), (frame, c)
            cats = df[c].cat.categories.tolist()
            assert cats == sorted(set(df[c].tolist())), (frame, c)
            assert df[c].cat.codes.dtype.itemsize <= 2
        per_row = df.memory_usage(deep=False, index=False).sum() / len(df)
        assert per_row < 48, (frame, per_row)
        pd.testing.assert_frame_equal(df, getattr(ref, frame))


def test_text_rows_keeps_a_categorical_as_codes_and_thread_labels_read_either_dtype():
    """A derived frame's text column taken from a ``Categorical`` stays one (codes taken, the
    same categories), equal row for row to the ``object`` take; ``thread_labels`` gives the
    same ``"pid/tid"`` keys for ``Categorical`` and ``object`` thread columns."""
    from tracedoc.signals.strings import text_rows, thread_labels
    from tracedoc.trace import text_categorical

    names = ["b", "a", "c", "a", "b", "c", "a"]
    cat, obj = pd.Series(text_categorical(names)), pd.Series(names, dtype=object)
    keep = np.array([True, False, True, True, False, False, True])
    pos = np.array([6, 0, 2])
    for take in (lambda v: v[keep], lambda v: v[pos]):
        got = text_rows(cat, take, pd.RangeIndex(int(take(np.arange(7)).size)))
        assert got.dtype == cat.dtype and got.array.codes.dtype == np.int8
        assert got.tolist() == text_rows(obj, take).tolist() == take(np.array(names, dtype=object)).tolist()
        assert text_rows(obj, take).dtype == object
    pid, tid = ["1", "1", "2", "1"], ["7", "8", "7", "7"]
    as_cat = pd.DataFrame({"pid": text_categorical(pid), "tid": text_categorical(tid)})
    as_obj = pd.DataFrame({"pid": pd.Series(pid, dtype=object), "tid": pd.Series(tid, dtype=object)})
    want = ["1/7", "1/8", "2/7", "1/7"]
    assert thread_labels(as_cat).tolist() == thread_labels(as_obj).tolist() == want


def test_launching_op_names_are_codes_of_the_ops_names():
    """``runtime_ops`` and ``kernel_ops`` hold each row's launching op name as a ``Categorical``
    of the ops frame's own categories (a code a row, no string pointer; issue 24): equal to the
    ops' name at ``op_pos`` and missing where there is none. ``text_at`` of an ``object`` column
    gives the same strings and None."""
    from tracedoc.signals.attribution import kernel_op_pos, kernel_ops, runtime_ops
    from tracedoc.signals.strings import text_at

    ctx = SignalContext(load(real_trace("v100_resnet50_workers0.pt.trace.json.gz"), cache=None))
    names, missing = ctx.trace.ops["name"], 0
    for frame, pos in (
        (runtime_ops(ctx), runtime_ops(ctx)["op_pos"].to_numpy()),
        (kernel_ops(ctx), kernel_op_pos(ctx)),
    ):
        op = frame["op"]
        assert op.dtype == names.dtype and op.array.codes.itemsize <= 2
        assert (pos >= 0).any()
        missing += int((pos < 0).sum())
        want = [names.iloc[p] if p >= 0 else None for p in pos.tolist()]
        assert [v if isinstance(v, str) else None for v in op.tolist()] == want
    assert missing  # runtime calls outside any op: the missing rows are checked too
    obj = pd.Series(["x", "y", "z"], dtype=object)
    got = text_at(obj, np.array([2, -1, 0]), pd.RangeIndex(3))
    assert got.dtype == object and got.tolist() == ["z", None, "x"]
    empty = pd.Series(pd.Categorical([], categories=pd.Index([], dtype=object)))
    assert text_at(empty, np.array([-1, -1])).isna().all()


def test_a_shared_result_that_is_unavailable_is_built_once():
    """``SignalContext.cached`` keeps a build's ``SignalUnavailable`` (its reason) and raises it
    anew, without running the build again: the elementwise chains of a trace without recorded
    shapes were built by each of their signals (issue 24). Each raise is a fresh exception,
    with no traceback into the build (whose frames hold its arrays); other errors are not
    kept."""
    import pytest

    from tracedoc.signals.base import SignalUnavailable

    ctx = SignalContext(load(real_trace("v100_resnet50_workers0.pt.trace.json.gz"), cache=None))
    calls = []

    def unavailable():
        calls.append(1)
        big = np.ones(1000)  # noqa: F841  (a local the first traceback holds)
        raise SignalUnavailable("nothing to build here")

    raised = []
    for _ in range(3):
        with pytest.raises(SignalUnavailable, match="nothing to build here") as ei:
            ctx.cached("t_unavailable", unavailable)
        raised.append(ei.value)
    assert len(calls) == 1

    def frames(exc):
        tb, names = exc.__traceback__, []
        while tb is not None:
            names.append(tb.tb_frame.f_code.co_name)
            tb = tb.tb_next
        return names

    assert "unavailable" in frames(raised[0])
    assert raised[1] is not raised[2] and "unavailable" not in frames(raised[1]) + frames(raised[2])

    def broken():
        calls.append(2)
        raise ValueError("a bug")

    for _ in range(2):
        with pytest.raises(ValueError):
            ctx.cached("t_broken", broken)
    assert calls.count(2) == 2


def test_kernels_in_the_windows_are_a_view_when_they_are_one_run():
    """``kernels_per_step`` and ``median_kernel_us`` read the kernels in the complete windows
    as rows of the kernels frame (``keep_rows``): a view where the windows keep one run of them
    (a copy of the frame on 1 M small events was 23 MiB), the same rows either way."""
    import pandas as pd

    from tracedoc.signals.gpu import _kernels_in_windows, kernels_in_windows_mask
    from tracedoc.signals.steps import _one_run

    # one run short of the first kernel; two runs (a copy)
    for name, one_run in (
        ("h100_resnet18_amp.pt.trace.json.gz", True),
        ("h100_resnet18_batch.pt.trace.json.gz", False),
    ):
        ctx = SignalContext(load(real_trace(name), cache=None))
        mask = kernels_in_windows_mask(ctx)
        got, k = _kernels_in_windows(ctx), ctx.trace.kernels
        assert (_one_run(mask) is not None) == one_run and 0 < mask.sum() < len(k)
        assert np.shares_memory(got["ts_us"].to_numpy(), k["ts_us"].to_numpy()) == one_run
        pd.testing.assert_frame_equal(got, k[mask])
        assert ctx.get("kernels_per_step") == mask.sum() / max(int(ctx.get("step_count")), 1)
