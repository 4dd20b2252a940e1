"""Op and kernel views (tracedoc.signals.opview, ``tracedoc ops``, ``report.tables``).

Expected figures are worked out here by hand from the events, or read from the raw trace JSON
with the standard library, never from tracedoc's own output.
"""

from __future__ import annotations

import gzip
import json
from pathlib import Path

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from typer.testing import CliRunner

import tracedoc
from tracedoc.cli import app

FIX = Path(__file__).resolve().parents[1] / "fixtures"


def synthetic(tmp_path: Path, device: str | None = "NVIDIA H100 80GB HBM3", kernel_us: float = 100.0) -> Path:
    """Two steps, each one ``aten::mm`` [128,256] x [256,512] fp32 launching one kernel."""
    ev = []
    for i, t0 in enumerate((0.0, 1000.0)):
        ev += [
            {"ph": "X", "cat": "user_annotation", "name": f"ProfilerStep#{i}", "pid": 1, "tid": 1, "ts": t0, "dur": 900},
            {"ph": "X", "cat": "cpu_op", "name": "aten::mm", "pid": 1, "tid": 1, "ts": t0 + 10, "dur": 50,
             "args": {"Input Dims": [[128, 256], [256, 512]], "Input type": ["float", "float"],
                      "Input Strides": [[256, 1], [512, 1]], "Concrete Inputs": ["", ""]}},
            {"ph": "X", "cat": "cuda_runtime", "name": "cudaLaunchKernel", "pid": 1, "tid": 1, "ts": t0 + 20,
             "dur": 5, "args": {"correlation": i + 1}},
            {"ph": "X", "cat": "kernel", "name": "sgemm_128x64_nn", "pid": 0, "tid": 7, "ts": t0 + 30,
             "dur": kernel_us, "args": {"correlation": i + 1, "device": 0, "stream": 7,
                                         "est. achieved occupancy %": 40 + 10 * i}},
        ]  # fmt: skip
    doc = {"traceEvents": ev}
    if device:
        doc["deviceProperties"] = [
            {"id": 0, "name": device, "totalGlobalMem": 85017493504, "computeMajor": 9, "computeMinor": 0,
             "numSms": 132}
        ]  # fmt: skip
    path = tmp_path / "mm.pt.trace.json"
    path.write_text(json.dumps(doc))
    return path


# by hand: 2*M*N*K FLOPs; each operand and the output read or written once, 4 bytes each
FLOPS = 2 * 128 * 256 * 512  # 33,554,432
BYTES = 4 * (128 * 256 + 256 * 512 + 128 * 512)  # 917,504


def test_gemm_row_by_hand(tmp_path):
    r = tracedoc.analyze(str(synthetic(tmp_path)))
    view = r.op_view
    assert view is not None and view["peak"]["fp32"] == 67.0  # H100 SXM fp32 (datasheet)
    (row,) = view["ops"]
    assert row["op"] == "aten::mm" and row["dtype"] == "fp32" and row["kind"] == "gemm"
    assert row["calls_per_step"] == 1 and row["kernels_per_call"] == 1
    assert row["gpu_ms_per_step"] == pytest.approx(0.1)
    assert row["gflop"] == pytest.approx(FLOPS / 1e9, abs=1e-4)
    assert row["mbytes"] == pytest.approx(BYTES / 1e6, abs=1e-3)
    assert row["tflops"] == pytest.approx(FLOPS / 100e-6 / 1e12, abs=1e-3)  # 0.336
    assert row["tbps"] == pytest.approx(BYTES / 100e-6 / 1e12, abs=1e-3)  # 0.009
    assert row["intensity"] == pytest.approx(FLOPS / BYTES, abs=0.01)  # 36.57 FLOP/byte
    # fp32 matmul runs on the FP32 units (TF32 is off by default for matmul): ridge 67 / 3.35 = 20
    assert row["bound"] == "compute"
    assert row["pct_of_peak"] == pytest.approx(100 * FLOPS / 100e-6 / 67e12, abs=0.1)
    (k,) = view["kernels"]
    assert k["kernel"] == "sgemm_128x64_nn" and k["op"] == "aten::mm"
    assert k["occupancy_pct"] == pytest.approx(45.0)  # mean of 40 and 50
    assert k["tflops"] == row["tflops"]  # one kernel per call: the op's cost is the kernel's
    assert (k["pct_of_peak"], k["bound"]) == (row["pct_of_peak"], row["bound"]) == (row["pct_of_peak"], "compute")


def test_unknown_device_leaves_the_roofline_empty(tmp_path):
    r = tracedoc.analyze(str(synthetic(tmp_path, device="Mystery Accelerator 9000")))
    (row,) = r.op_view["ops"]
    assert r.op_view["peak"] is None
    assert row["tflops"] == pytest.approx(FLOPS / 100e-6 / 1e12, abs=1e-3)  # achieved still known
    assert row["pct_of_peak"] is None and row["bound"] is None


def test_cpu_only_trace_has_no_op_view():
    assert tracedoc.analyze(str(FIX / "cpu_only_gloo.pt.trace.json.gz")).op_view is None


def _raw(name: str) -> dict:
    with gzip.open(FIX / name, "rt") as f:
        return json.load(f)


def test_timesformer_softmax_against_the_raw_events():
    """The eager attention's softmax: its bytes from the recorded dims, its time from the kernels."""
    r = tracedoc.analyze(str(FIX / "h100_timesformer_inference.pt.trace.json.gz"))
    row = next(o for o in r.op_view["ops"] if o["op"] == "aten::_softmax")
    assert json.loads(row["input_dims"])[0] == [8, 12, 3137, 3137]
    raw = _raw("h100_timesformer_inference.pt.trace.json.gz")["traceEvents"]
    n = 8 * 12 * 3137 * 3137
    assert row["mbytes"] == pytest.approx(2 * n * 2 / 1e6, rel=1e-4)  # bf16 in, bf16 out
    # the softmax kernels of that size, per step: the 3137-wide rows run the longest by far
    steps = [e for e in raw if e.get("cat") == "user_annotation" and str(e.get("name")).startswith("ProfilerStep#")]
    durs = sorted((e["dur"] for e in raw if e.get("cat") == "kernel" and "softmax" in e["name"].lower()), reverse=True)
    calls = round(row["calls_per_step"] * len(steps))
    assert row["gpu_ms_per_step"] == pytest.approx(sum(durs[:calls]) / 1000.0 / len(steps), rel=0.01)
    assert row["bound"] == "memory" and row["dtype"] == "bf16"


def test_resnet18_conv_backward_flops_by_hand():
    """layer1's 3x3 64->64 convolution at 56x56, batch 32: 56*56*64*64*9 multiply-adds per image
    forward; backward (input and weight gradients) twice that."""
    r = tracedoc.analyze(str(FIX / "h100_resnet18_baseline.pt.trace.json.gz"))
    rows = [o for o in r.op_view["ops"] if o["op"] == "aten::convolution_backward" and o["calls_per_step"] == 4]
    macs = 56 * 56 * 64 * 64 * 9 * 32
    assert any(o["gflop"] == pytest.approx(2 * 2 * macs / 1e9, rel=1e-3) for o in rows)


def test_tables_and_json_round_trip(tmp_path):
    r = tracedoc.analyze(str(synthetic(tmp_path)))
    ops = r.tables.ops
    assert list(ops.columns[:4]) == ["op", "input_dims", "dtype", "kind"]
    assert ops.loc[0, "achieved_tflops"] == r.op_view["ops"][0]["tflops"]
    back = tracedoc.Report.from_dict(json.loads(json.dumps(r.to_dict())))
    assert back.op_view == r.op_view
    assert r.tables.findings.columns[0] == "rank"


def test_ops_command_fits_80_columns_and_escapes(tmp_path):
    res = CliRunner().invoke(
        app, ["ops", str(FIX / "h100_timesformer_inference.pt.trace.json.gz")], env={"COLUMNS": "80"}
    )
    assert res.exit_code == 0, res.output
    lines = res.output.splitlines()
    assert max(len(x.rstrip()) for x in lines) <= 80
    assert any(x.startswith("_softmax ") for x in lines)
    js = CliRunner().invoke(app, ["ops", str(synthetic(tmp_path)), "-f", "json"])
    assert json.loads(js.output)["ops"][0]["op"] == "aten::mm"


def test_html_has_the_roofline_and_op_table(tmp_path):
    pytest.importorskip("plotly")
    from tracedoc.render import render

    page = render(tracedoc.analyze(str(synthetic(tmp_path))), "html")
    assert 'id="roofline"' in page and "Op view" in page and "aten::mm" in page
    fig = json.loads(page.split('id="roofline-figure">', 1)[1].split("</script>", 1)[0])
    (point,) = [t for t in fig["data"] if t.get("mode") == "markers"]
    assert point["x"] == [pytest.approx(FLOPS / BYTES, abs=0.01)]
    roofs = [t for t in fig["data"] if t.get("mode") == "lines"]
    assert any(max(t["y"]) == 67.0 for t in roofs)  # the fp32 roof at the H100's 67 TFLOP/s
    cpu = render(tracedoc.analyze(str(FIX / "cpu_only_gloo.pt.trace.json.gz")), "html")
    assert 'id="roofline"' not in cpu


def test_kernel_view_names_the_op_with_the_most_time_first_by_name_on_a_tie(tmp_path):
    """One kernel name launched from three ops (by hand: ``aten::zz`` 2 x 30 µs = 60, ``aten::bb``
    50, ``aten::aa`` 60): the op with the most time, and on the tie at 60 the op whose name sorts
    first (``aten::aa``), as grouping the strings by (kernel, op) gives. A kernel whose launch
    lies in no op has no op."""
    ev = [{"ph": "X", "cat": "user_annotation", "name": "ProfilerStep#0", "pid": 1, "tid": 1, "ts": 0, "dur": 2000}]
    calls = [("aten::zz", 30), ("aten::bb", 50), ("aten::zz", 30), ("aten::aa", 60), (None, 500)]
    for i, (op, us) in enumerate(calls):
        t0 = 10 + 300 * i
        if op is not None:
            ev.append({"ph": "X", "cat": "cpu_op", "name": op, "pid": 1, "tid": 1, "ts": t0, "dur": 20})
        kernel = "lonely_kernel" if op is None else "shared_kernel"
        ev += [
            {"ph": "X", "cat": "cuda_runtime", "name": "cudaLaunchKernel", "pid": 1, "tid": 1, "ts": t0 + 5,
             "dur": 5, "args": {"correlation": i + 1}},
            {"ph": "X", "cat": "kernel", "name": kernel, "pid": 0, "tid": 7, "ts": t0 + 50, "dur": us,
             "args": {"correlation": i + 1, "device": 0, "stream": 7}},
        ]  # fmt: skip
    path = tmp_path / "ops.pt.trace.json"
    path.write_text(json.dumps({"traceEvents": ev}))
    rows = {k["kernel"]: k for k in tracedoc.analyze(str(path)).op_view["kernels"]}
    assert rows["shared_kernel"]["op"] == "aten::aa"
    assert rows["shared_kernel"]["count_per_step"] == 4
    assert rows["lonely_kernel"]["op"] is None


@settings(max_examples=200, deadline=None)
@given(st.lists(st.tuples(st.integers(-1, 3), st.integers(0, 2), st.integers(-1, 40_000)), max_size=60))
def test_first_appearance_ids_are_pandas_ngroup_without_sort(rows):
    """Group ids from integer key columns (missing -1 included, a span past 2**15) are pandas'
    ``groupby(sort=False).ngroup()``, and each group's first row is its first appearance."""
    import numpy as np
    import pandas as pd

    from tracedoc.signals.opview import _first_rows, first_appearance_ids

    cols = [np.array([r[i] for r in rows], dtype=np.int64) for i in range(3)]
    gid = first_appearance_ids(cols)
    # read from a generator (a column at a time), a constant column between: the same ids
    with_constant = [cols[0], np.full(len(rows), 7, dtype=np.int64), cols[1], cols[2]]
    assert first_appearance_ids(c for c in with_constant).tolist() == gid.tolist()
    want = pd.DataFrame({"a": cols[0], "b": cols[1], "c": cols[2]}).groupby(["a", "b", "c"], sort=False).ngroup()
    assert gid.tolist() == want.tolist()
    firsts = [] if not rows else [int(np.flatnonzero(gid == g)[0]) for g in range(int(gid.max()) + 1)]
    assert _first_rows(gid).tolist() == firsts


@pytest.mark.parametrize("name", ["v100_resnet50_workers0.pt.trace.json.gz", "mi250_toy_train.pt.trace.json.gz"])
def test_op_groups_from_codes_equal_the_groupby_on_texts(name):
    """The op view's (name, recorded inputs) groups built from integer codes are those of the
    groupby on the key texts it replaced (issue 24): the same rows, columns and floats, and
    the same group of every call, on traces with recorded inputs; the recorded-input texts stay
    ``object`` (the groupby's keys came back as pandas' ``str`` dtype, Arrow's memory where
    pyarrow is installed)."""
    import pandas as pd

    from tests.conftest import real_trace
    from tracedoc.load import load
    from tracedoc.signals import SignalContext
    from tracedoc.signals.opview import SHAPE_COLUMNS, _groups, _groups_by_text, _op_calls

    ctx = SignalContext(load(real_trace(name), cache=None))
    g, gid = _groups(ctx)
    ops = ctx.trace.ops
    assert ops["input_dims"].notna().any()
    want, want_gid = _groups_by_text(ops, _op_calls(ctx)[1])
    pd.testing.assert_series_equal(gid, want_gid, check_names=False)
    cols = list(want.columns)
    got = g.sort_values("gid")[cols].reset_index(drop=True)
    for c in SHAPE_COLUMNS:  # the groupby gave its keys back as pandas' str dtype: now object
        assert got[c].dtype == object
        want[c] = want[c].astype(object)
    pd.testing.assert_frame_equal(got, want, check_exact=True)
    assert len(want) > 10
    # a call's group by a binary search (call_gids) is the Series' own label lookup
    from tracedoc.signals.opview import call_gids

    calls = gid.index.to_numpy()[::3]
    assert call_gids(ctx, calls).tolist() == gid.loc[calls].tolist()
    import numpy as np

    every = gid.index.to_numpy()
    not_calls = np.setdiff1d(np.arange(every.max() + 2), every)  # between the calls, and past the last
    for pos in (not_calls[:1], not_calls[-1:]):
        with pytest.raises(KeyError):
            call_gids(ctx, pos)


def test_text_key_codes_count_a_missing_input_as_the_empty_text():
    """A call's recorded-input key: missing and ``""`` are one key (the op view shows both as
    not recorded), whether ``""`` is among a ``Categorical``'s categories or not, and an
    ``object`` column gives the same partition."""
    import numpy as np
    import pandas as pd

    from tracedoc.signals.opview import _text_key_codes
    from tracedoc.trace import text_categorical

    for values in (["[1]", "", None, "[2]", "[1]", None], ["[1]", None, "[2]", "[1]", None]):
        pos = np.arange(len(values))
        want = pd.factorize(np.array([v or "" for v in values], dtype=object))[0]
        for column in (pd.Series(text_categorical(values)), pd.Series(values, dtype=object)):
            got = _text_key_codes(column, pos)
            assert got.dtype == np.int64
            assert pd.factorize(got)[0].tolist() == want.tolist(), (values, column.dtype)
    assert _text_key_codes(None, np.arange(3)).tolist() == [0, 0, 0]
