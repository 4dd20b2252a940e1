"""``report.tables`` (pandas DataFrames with unit-suffixed columns) and ``tracedoc.analyze``
on several traces (issue 23, the notebook part): a folder of ranks or of unrelated traces, a
glob or a list of paths gives the many-trace report, with the same notebook accessors as a
:class:`~tracedoc.report.model.Report` (``tables``, ``print``, ``_repr_html_``,
``_repr_markdown_``, ``plot``)."""

from __future__ import annotations

import io
import json
import re
import shutil
from pathlib import Path

import pandas as pd
import pytest
from conftest import FIXTURES
from rich.console import Console
from tracebuilder import write_comm_ranks

import tracedoc
from tracedoc.errors import TraceLoadError
from tracedoc.report.model import Report
from tracedoc.report.ranks import MultiRankReport, MultiTraceReport
from tracedoc.report.tables import COLUMNS, MULTI_COLUMNS, RANK_JOB_COLUMNS

WORKERS0 = FIXTURES / "v100_resnet50_workers0.pt.trace.json.gz"
WORKERS4 = FIXTURES / "v100_resnet50_workers4.pt.trace.json.gz"
TIMESFORMER = FIXTURES / "h100_timesformer_inference.pt.trace.json.gz"

#: A column with a number in it names its unit (tracedoc/report/tables.py's module docstring),
#: unless it is a count, an index or a ratio whose name says what it is.
UNIT = re.compile(r"(_ms|_us|_share|_pct|_per_step|_tflops|_tbps|_ms_total)$")
UNITLESS = {
    "rank",
    "step",
    "finding_rank",
    "n_findings",
    "n_ranks",
    "count",
    "index",
    "last_count",
    "kernels_per_call",
    "gflop",
    "mbytes",
    "flop_per_byte",
}


def _check_units(tables) -> None:
    for name in tables.names:
        frame = getattr(tables, name)
        for col in frame.columns:
            numeric = pd.api.types.is_numeric_dtype(frame[col]) and not pd.api.types.is_bool_dtype(frame[col])
            if numeric and len(frame):
                assert UNIT.search(col) or col in UNITLESS, f"{name}.{col} names no unit"
        # the JSON names without a unit never reach a table
        assert not {"tflops", "tbps", "pct_of_peak", "estimated_saving_ms"} & set(frame.columns), name


def _assert_same_tables(a, b) -> None:
    assert a.names == b.names
    for name in a.names:
        pd.testing.assert_frame_equal(getattr(a, name), getattr(b, name), obj=name)


@pytest.fixture(scope="module")
def report() -> Report:
    return tracedoc.analyze(str(WORKERS0))


@pytest.fixture(scope="module")
def timesformer() -> Report:
    return tracedoc.analyze(str(TIMESFORMER))


# -- one report -------------------------------------------------------------------------------


def test_findings_table_is_the_reports_findings(report):
    f = report.tables.findings
    assert list(f.columns) == list(COLUMNS["findings"])
    assert len(f) == len(report.findings) > 0
    mean_step = sum(s["step_time_ms"] for s in report.steps) / len(report.steps)
    for i, (row, finding) in enumerate(zip(f.to_dict("records"), report.findings, strict=True), 1):
        assert row["rank"] == i
        assert (row["code"], row["name"], row["severity"]) == (finding.code, finding.name, str(finding.severity))
        assert row["saving_ms"] == finding.estimated_saving_ms
        assert row["saving_share"] == pytest.approx(finding.estimated_saving_ms / mean_step)
        assert (row["fix"], row["fix_safety"], row["message"]) == (
            finding.fix.summary,
            finding.fix.safety,
            finding.message,
        )


def test_steps_idle_ledger_and_skipped_tables(report):
    t = report.tables
    assert list(t.steps["step"]) == [s["step"] for s in report.steps]
    assert list(t.steps["step_time_ms"]) == [s["step_time_ms"] for s in report.steps]
    ledger = t.idle_ledger
    assert len(ledger) == sum(len(c) for c in report.idle_ledger.values())
    row = ledger.iloc[0]
    assert row["idle_ms"] == report.idle_ledger[row["device"]][row["cause"]]
    assert list(t.skipped["code"]) == [s.code for s in report.skipped]


def test_units_in_column_names(report, timesformer):
    _check_units(report.tables)
    _check_units(timesformer.tables)


def test_ops_table_of_the_timesformer_trace(timesformer):
    ops = timesformer.tables.ops
    view = timesformer.op_view["ops"]
    assert len(ops) == len(view) > 0
    assert list(ops.columns[: len(COLUMNS["ops"])]) == list(COLUMNS["ops"])
    first = ops.iloc[0]
    assert first["op"] == view[0]["op"] and first["gpu_ms_per_step"] == view[0]["gpu_ms_per_step"]
    assert first["achieved_tflops"] == view[0]["tflops"] or pd.isna(first["achieved_tflops"])
    assert first["peak_pct"] == view[0]["pct_of_peak"] or pd.isna(first["peak_pct"])
    assert len(timesformer.tables.kernels) == len(timesformer.op_view["kernels"])


def test_tables_survive_a_json_round_trip(report, timesformer):
    for r in (report, timesformer):
        back = Report.from_dict(json.loads(json.dumps(r.to_dict())))
        _assert_same_tables(back.tables, r.tables)


def test_report_plot_returns_a_figure_without_showing_it(report):
    go = pytest.importorskip("plotly.graph_objects")
    fig = report.plot()
    assert isinstance(fig, go.Figure)
    assert list(fig.data[0].x) == [str(s["step"]) for s in report.steps]


# -- several traces: the ranks of one job -----------------------------------------------------


@pytest.fixture(scope="module")
def rank_dir(tmp_path_factory):
    """Two real V100 ResNet-50 traces as ranks 0 and 1 (ranks from the file names), as
    tests/test_ranks.py builds them, a rank 2 that cannot be read and a file that is not a
    trace."""
    d = tmp_path_factory.mktemp("tables") / "job"
    d.mkdir()
    shutil.copy(WORKERS0, d / "rank-0.json.gz")
    shutil.copy(WORKERS4, d / "rank-1.json.gz")
    (d / "rank-2.json").write_text('{"traceEvents": [')
    (d / "notes.txt").write_text("not a trace")
    return d


@pytest.fixture(scope="module")
def job(rank_dir) -> MultiRankReport:
    return tracedoc.analyze(rank_dir, jobs=1)


def test_analyze_a_rank_folder_gives_the_rank_report(job, rank_dir):
    assert isinstance(job, MultiRankReport)
    assert [r.rank for r in job.ranks] == [0, 1]
    assert [Path(f.path).name for f in job.failed] == ["rank-2.json"]
    # as `tracedoc analyze FOLDER` builds it
    from tracedoc.ranks import analyze_inputs
    from tracedoc.settings import Settings

    cli = analyze_inputs([str(rank_dir)], Settings.resolve(str(rank_dir)), jobs=1)
    assert cli.summary == job.summary and cli.ranks == job.ranks


def test_ranks_table_row_is_the_document(job):
    t = job.tables
    assert t.names == (*MULTI_COLUMNS, *RANK_JOB_COLUMNS)
    ranks = t.ranks
    assert list(ranks.columns[: len(MULTI_COLUMNS["ranks"])]) == list(MULTI_COLUMNS["ranks"])
    assert str(ranks["rank"].dtype) == "Int64"  # whole ranks beside the failed trace's missing one
    assert list(ranks["rank"][:2]) == [0, 1] and list(ranks["label"]) == ["rank 0", "rank 1", "rank-2.json"]
    failed = ranks.iloc[2]
    assert pd.isna(failed["rank"]) and failed["error"] == job.failed[0].error and pd.isna(failed["step_time_ms"])
    doc = job.to_dict()
    for row, entry in zip(ranks.to_dict("records")[:2], doc["ranks"], strict=True):
        rep = entry["report"]
        assert row["path"] == entry["path"]
        assert row["step_time_ms"] == rep["signals"]["step_time_ms"]
        assert row["step_time_ms"] == pytest.approx(doc["summary"]["step_time_ms"][row["label"]], abs=1e-3)
        assert row["n_findings"] == len(rep["findings"])
        assert row["top_code"] == rep["findings"][0]["code"]
        assert row["top_saving_ms"] == rep["findings"][0]["estimated_saving_ms"]
        assert pd.isna(row["error"])


def test_findings_steps_and_ledger_tables_have_a_rank_column(job):
    t = job.tables
    f = t.findings
    assert list(f.columns) == list(MULTI_COLUMNS["findings"])
    assert len(f) == len(job.findings)
    for entry in job.ranks:
        mine = f[f["rank"] == entry.rank]
        assert list(mine["code"]) == [x.code for x in entry.report.findings]
        assert list(mine["finding_rank"]) == list(range(1, len(entry.report.findings) + 1))
        assert list(mine["saving_ms"]) == [x.estimated_saving_ms for x in entry.report.findings]
        assert (mine["path"] == entry.path).all()
        assert len(t.steps[t.steps["rank"] == entry.rank]) == len(entry.report.steps)
        assert len(t.idle_ledger[t.idle_ledger["rank"] == entry.rank]) == sum(
            len(c) for c in entry.report.idle_ledger.values()
        )
    assert list(t.steps.columns[:5]) == ["rank", "label", "path", "step", "step_time_ms"]
    assert list(t.idle_ledger.columns) == list(MULTI_COLUMNS["idle_ledger"])
    _check_units(t)


def test_cross_rank_tables(job):
    t = job.tables
    assert t.rank_findings.to_dict("records") == job.summary["findings"]
    # no collectives in these traces: the tables are empty, with their columns
    assert job.summary["collectives"] is None
    for name in ("collectives", "collective_steps", "straggler"):
        frame = getattr(t, name)
        assert frame.empty and list(frame.columns) == list(RANK_JOB_COLUMNS[name])


def test_rank_report_tables_survive_a_json_round_trip(job):
    back = MultiRankReport.from_dict(json.loads(json.dumps(job.to_dict())))
    _assert_same_tables(back.tables, job.tables)


def test_rank_report_notebook_forms(job):
    r = repr(job)
    assert "\n" not in r and r.startswith("<MultiRankReport ") and len(r) < 250
    buf = io.StringIO()
    job.print(Console(file=buf, width=80, color_system=None))
    text = buf.getvalue()
    assert "rank 0" in text and "rank 1" in text
    quiet = io.StringIO()
    job.print(Console(file=quiet, width=80, color_system=None), quiet=True)
    assert len(quiet.getvalue().strip().splitlines()) == 1
    html, md = job._repr_html_(), job._repr_markdown_()
    from tracedoc.render import render

    assert html == render(job, "fragment")  # the document imports no renderer: one registry
    assert "<script" not in html and "Cross-rank summary" in html
    assert md.startswith("# tracedoc multi-rank report")
    for f in job.findings:
        assert f.code in html and f.code in md


def test_rank_report_plot_is_step_time_per_rank(job):
    go = pytest.importorskip("plotly.graph_objects")
    fig = job.plot()
    assert isinstance(fig, go.Figure)
    assert list(fig.data[0].x) == ["rank 0", "rank 1"]
    assert list(fig.data[0].y) == [r.report.signals["step_time_ms"] for r in job.ranks]
    assert fig.layout.title.text == "Step time per rank"


def test_collective_and_straggler_tables(tmp_path):
    """tests/test_ranks.py's hand-counted job: rank 2 arrives last and costs the others 0.2 ms."""
    write_comm_ranks(tmp_path)
    mr = tracedoc.analyze(tmp_path, jobs=1)
    assert isinstance(mr, MultiRankReport)
    c = mr.summary["collectives"]
    t = mr.tables
    assert t.collectives.to_dict("records") == c["kinds"]
    assert set(t.collectives["kind"]) == {"AllReduce", "AllGather"}
    assert t.collective_steps.to_dict("records") == c["per_step"]
    s = t.straggler.set_index("label")
    assert s.loc["rank 2", "is_straggler"] and not s.loc["rank 0", "is_straggler"]
    assert s["caused_wait_ms_total"].to_dict() == {"rank 0": 0.05, "rank 1": 0.0, "rank 2": 0.2}
    assert s["last_count"].to_dict() == c["last_count"]


# -- several traces: unrelated ones -----------------------------------------------------------


@pytest.fixture(scope="module")
def unrelated_dir(tmp_path_factory):
    d = tmp_path_factory.mktemp("tables") / "mixed"
    d.mkdir()
    shutil.copy(TIMESFORMER, d / TIMESFORMER.name)
    shutil.copy(WORKERS0, d / WORKERS0.name)
    (d / "broken.json").write_text("{not json")
    return d


def test_analyze_a_folder_of_unrelated_traces(unrelated_dir, capsys):
    mt = tracedoc.analyze(str(unrelated_dir), jobs=1)
    assert isinstance(mt, MultiTraceReport)
    assert capsys.readouterr().err == ""  # nothing printed: the failed trace is in the document
    t = mt.tables
    assert t.names == tuple(MULTI_COLUMNS)
    with pytest.raises(AttributeError):
        t.collectives  # noqa: B018 -- a rank job's table only
    ranks = t.ranks
    assert ranks["rank"].isna().all()
    ok = ranks[ranks["error"].isna()]
    assert list(ok["path"]) == [e.path for e in mt.traces]
    assert list(ok["label"]) == [e.label for e in mt.traces]
    failed = ranks[ranks["error"].notna()]
    assert list(failed["label"]) == ["broken.json"] and failed.iloc[0]["n_findings"] == 0
    row = ok[ok["label"] == TIMESFORMER.name].iloc[0]
    doc = next(e for e in mt.to_dict()["traces"] if e["path"] == row["path"])["report"]
    assert row["step_time_ms"] == doc["signals"]["step_time_ms"]
    assert row["top_code"] == doc["findings"][0]["code"]
    assert row["top_saving_ms"] == doc["findings"][0]["estimated_saving_ms"]
    f = t.findings
    assert list(f[f["label"] == TIMESFORMER.name]["code"]) == [x["code"] for x in doc["findings"]]
    assert len(t.ops[t.ops["label"] == TIMESFORMER.name]) == len(doc["op_view"]["ops"])
    _check_units(t)
    back = MultiTraceReport.from_dict(json.loads(json.dumps(mt.to_dict())))
    _assert_same_tables(back.tables, t)


def test_unrelated_traces_notebook_forms_and_plot(unrelated_dir):
    mt = tracedoc.analyze(unrelated_dir, jobs=1)
    assert repr(mt).startswith("<MultiTraceReport ") and "\n" not in repr(mt)
    html = mt._repr_html_()
    from tracedoc.render import render

    assert html == render(mt, "fragment")
    assert TIMESFORMER.name in html and "broken.json" in html
    assert mt._repr_markdown_()
    go = pytest.importorskip("plotly.graph_objects")
    fig = mt.plot()
    assert isinstance(fig, go.Figure) and fig.layout.title.text == "Step time per trace"
    assert sorted(fig.data[0].x) == sorted([WORKERS0.name, TIMESFORMER.name])


def test_a_list_of_paths_and_a_glob(unrelated_dir):
    paths = [unrelated_dir / TIMESFORMER.name, str(unrelated_dir / WORKERS0.name)]
    listed = tracedoc.analyze(paths, jobs=1)
    assert isinstance(listed, MultiTraceReport) and len(listed.traces) == 2
    globbed = tracedoc.analyze(str(unrelated_dir / "*.gz"), jobs=1)
    assert isinstance(globbed, MultiTraceReport)
    assert sorted(e.path for e in globbed.traces) == sorted(e.path for e in listed.traces)
    # one file, alone or in a list, keeps its Report
    assert isinstance(tracedoc.analyze([paths[1]]), Report)
    assert isinstance(tracedoc.analyze(unrelated_dir / WORKERS0.name), Report)


def test_bad_inputs_are_short_errors(tmp_path):
    with pytest.raises(TypeError) as e:
        tracedoc.analyze([1, 2])
    assert str(e.value) == "analyze() takes a trace path or a tracedoc.Trace, not list"
    with pytest.raises(TypeError):
        tracedoc.analyze([])
    with pytest.raises(TraceLoadError):
        tracedoc.analyze(tmp_path)  # an empty folder: nothing to analyze
