"""The documents beside the single-trace report (issue "One road in, one document model
through, one door out"): the many-trace reports (:mod:`tracedoc.report.ranks`), the
comparison of ``tracedoc diff`` (:mod:`tracedoc.report.comparison`) and the fix-loop summary
(:mod:`tracedoc.report.fixloop`). Each is built here the way the product builds it, from
the real traces in fixtures/, and must come back equal from its JSON, with the JSON it
wrote before the documents moved."""

from __future__ import annotations

import ast
import copy
import gzip
import json
import shutil
from pathlib import Path
from typing import Any

import pytest
from conftest import FIXTURES, real_trace
from helpers import not_plain_json, through_json

from tracedoc.errors import DocumentError, TracedocError
from tracedoc.fixloop.loop import FixLoop, LoopOptions, build_summary
from tracedoc.fixloop.runner import TrialOutcome
from tracedoc.fixloop.workload import FieldSpec, WorkloadSpec
from tracedoc.pipeline import analyze
from tracedoc.ranks import analyze_inputs
from tracedoc.render.fixloop import render_markdown, render_notes, rows
from tracedoc.report.comparison import DiffResult, Row, StepTime
from tracedoc.report.fixloop import FixLoopSummary
from tracedoc.report.model import Report
from tracedoc.report.ranks import MultiRankReport, MultiTraceReport, RankEntry
from tracedoc.settings import Settings

W0 = "v100_resnet50_workers0.pt.trace.json.gz"  # DataLoader(num_workers=0): TD101
W4 = "v100_resnet50_workers4.pt.trace.json.gz"  # num_workers=4: the stall is gone
GLOO = "cpu_only_gloo.pt.trace.json.gz"  # a CPU-only gloo rank: blocking gloo:all_reduce ops
SMALL = "mi250_toy_train.pt.trace.json.gz"


def _round_trips(doc: Any) -> Any:
    """Check ``doc`` against its JSON: plain data, equal after ``from_dict``, the same JSON again."""
    d = doc.to_dict()
    assert not_plain_json(d) == []
    back = type(doc).from_dict(through_json(d))
    assert back == doc
    assert back.to_dict() == d
    return back


# ---- the many-trace reports -----------------------------------------------------------------------


def _gloo_rank(rank: int, rotate: int) -> dict:
    """The real gloo rank relabelled ``rank``, its gloo:all_reduce durations rotated by ``rotate``
    (so each collective has another rank arriving last)."""
    doc = json.loads(gzip.decompress(real_trace(GLOO).read_bytes()))
    doc["distributedInfo"]["rank"] = rank
    ops = [e for e in doc["traceEvents"] if e.get("name") == "gloo:all_reduce"]
    durs = [e["dur"] for e in ops]
    for e, d in zip(ops, durs[rotate:] + durs[:rotate], strict=True):
        e["dur"] = d
    return doc


@pytest.fixture(scope="module")
def job_dir(tmp_path_factory) -> Path:
    """Real traces as the ranks of one job: the two V100 ResNet-50 runs (ranks 0 and 1 from
    the file names), the real gloo rank twice (ranks 34 and 35 from distributedInfo), a trace
    behind a symlink to outside the folder (rank 5), a trace that fails, a file skipped."""
    root = tmp_path_factory.mktemp("docs")
    d = root / "job"
    d.mkdir()
    shutil.copy(real_trace(W0), d / "rank-0.json.gz")
    shutil.copy(real_trace(W4), d / "rank-1.json.gz")
    (d / "gloo_a.json").write_text(json.dumps(_gloo_rank(34, 0)))
    (d / "gloo_b.json").write_text(json.dumps(_gloo_rank(35, 1)))
    shutil.copy(real_trace(SMALL), root / "outside.json.gz")
    (d / "rank-5.json.gz").symlink_to(root / "outside.json.gz")
    (d / "rank-9.json").write_bytes(b'{"traceEvents": [')  # truncated: fails
    (d / "notes.txt").write_text("not a trace")  # skipped
    return d


@pytest.fixture(scope="module")
def multi_rank(job_dir) -> MultiRankReport:
    rep = analyze_inputs([str(job_dir)], jobs=1, ranks=True, follow_symlinks=True)
    assert isinstance(rep, MultiRankReport)
    return rep


@pytest.fixture(scope="module")
def multi_trace(job_dir) -> MultiTraceReport:
    rep = analyze_inputs([str(job_dir)], jobs=1, ranks=False, follow_symlinks=True)
    assert isinstance(rep, MultiTraceReport)
    return rep


def test_multi_rank_report_of_real_traces_round_trips(multi_rank):
    mr = multi_rank
    # the document is whole: every part of it is exercised
    assert [r.rank for r in mr.ranks] == [0, 1, 5, 34, 35]
    assert all(type(r) is RankEntry and isinstance(r.report, Report) for r in mr.ranks)
    assert [Path(f.path).name for f in mr.failed] == ["rank-9.json"] and "invalid JSON" in mr.failed[0].error
    assert [Path(p).name for p, _ in mr.skipped] == ["notes.txt"] and len(mr.followed) == 1
    c = mr.summary["collectives"]
    assert c is not None and c["source"] == "gloo ops" and c["n_ranks"] == 2 and c["worst"]
    assert mr.summary["slowest_rank"] is not None and mr.summary["findings"]
    back = _round_trips(mr)
    assert [r.label for r in back.ranks] == ["rank 0", "rank 1", "rank 5", "rank 34", "rank 35"]
    assert len(back.findings) == len(mr.findings) > 0
    assert MultiRankReport.KIND == "ranks" and "KIND" not in back.to_dict()


def test_multi_trace_report_of_real_traces_round_trips(multi_trace):
    mt = multi_trace
    assert len(mt.traces) == 5 and all(r.rank is None and r.report is not None for r in mt.traces)
    assert len(mt.failed) == 1 and len(mt.skipped) == 1 and len(mt.followed) == 1
    back = _round_trips(mt)
    assert [r.path for r in back.traces] == [r.path for r in mt.traces]
    assert MultiTraceReport.KIND == "traces"


def test_many_trace_json_is_the_documented_schema(multi_rank, multi_trace):
    """The key sets (and order) of ``tracedoc analyze DIR -f json``, as before the move."""
    tail = ["failed", "skipped", "followed_symlinks", "run"]
    d = multi_rank.to_dict()
    assert list(d) == ["schema_version", "kind", "tool", "directory", "ranks", "summary", *tail]
    assert (d["schema_version"], d["kind"], set(d["tool"])) == (2, "multi-rank", {"name", "version"})
    assert all(list(r) == ["rank", "rank_source", "path", "report"] for r in d["ranks"])
    assert all(r["report"]["schema_version"] == 2 for r in d["ranks"])
    s = d["summary"]
    assert set(s) - {"exposed_comm_ms"} == {
        "n_ranks",
        "step_time_ms",
        "median_step_time_ms",
        "slowest_rank",
        "slowest_step_time_ms",
        "slowest_lag_ms",
        "slowest_lag_pct",
        "findings",
        "collectives",
        "straggler",
    }
    assert all(set(f) == {"code", "name", "severity", "ranks", "n_ranks", "scope"} for f in s["findings"])
    assert set(s["collectives"]) == {
        "source",
        "n_ranks",
        "n_matched",
        "straggler",
        "straggler_lag_ms_total",
        "straggler_lag_ms_per_step",
        "straggler_last_share",
        "last_count",
        "caused_wait_ms",
        "kinds",
        "per_step",
        "worst",
    }
    assert [set(f) for f in d["failed"]] == [{"path", "error"}] and [set(x) for x in d["skipped"]] == [
        {"path", "reason"}
    ]
    assert set(d["run"]) == {"executor", "workers", "seconds"}
    t = multi_trace.to_dict()
    assert list(t) == ["schema_version", "kind", "tool", "inputs", "traces", *tail] and t["kind"] == "multi-trace"
    assert all(list(x) == ["path", "report"] for x in t["traces"])


def test_many_trace_documents_refuse_other_versions_and_kinds(multi_rank, multi_trace):
    d, t = through_json(multi_rank.to_dict()), through_json(multi_trace.to_dict())
    for cls, doc in ((MultiRankReport, d), (MultiTraceReport, t)):
        for bad in ({k: v for k, v in doc.items() if k != "schema_version"}, {**doc, "schema_version": 3}):
            with pytest.raises(DocumentError, match="schema_version") as e:
                cls.from_dict(bad)
            assert isinstance(e.value, TracedocError) and "\n" not in str(e.value)
        for bad_version in ("2", True, 2.0, None):
            with pytest.raises(TracedocError):
                cls.from_dict({**doc, "schema_version": bad_version})
        with pytest.raises(DocumentError, match="not an object"):
            cls.from_dict([doc])
    with pytest.raises(DocumentError, match="kind 'multi-trace'"):
        MultiRankReport.from_dict(t)
    with pytest.raises(DocumentError, match="kind 'multi-rank'"):
        MultiTraceReport.from_dict(d)
    with pytest.raises(DocumentError, match="missing 'summary'"):
        MultiRankReport.from_dict({k: v for k, v in d.items() if k != "summary"})
    broken = copy.deepcopy(d)
    broken["ranks"][0]["report"]["schema_version"] = 1
    with pytest.raises(TracedocError, match="schema_version 1") as e:
        MultiRankReport.from_dict(broken)
    assert "\n" not in str(e.value)


def test_a_rank_result_given_to_a_document_becomes_its_entry():
    """Code that builds a MultiRankReport from the workers' RankResults (collective timings
    as numpy arrays, worker timings) gets a document that holds only what its JSON holds."""
    from tracedoc.load import load
    from tracedoc.ranks.job import RankResult, extract_collectives
    from tracedoc.ranks.summary import summarize

    report, collectives = analyze(real_trace(GLOO), Settings()), extract_collectives(load(real_trace(GLOO)))
    results = [
        RankResult(f"r{i}.json", i, "file name", 2, report, collectives, seconds=1.5, cpu_seconds=1.0) for i in range(2)
    ]
    mr = MultiRankReport(directory="job", ranks=results, summary=summarize(results))
    assert mr.summary["collectives"]["n_matched"] > 0
    assert all(type(r) is RankEntry and not hasattr(r, "collectives") for r in mr.ranks)
    _round_trips(mr)


# ---- the comparison ------------------------------------------------------------------------------


STEP_TIME_KEYS = [
    "before",
    "after",
    "change_ms",
    "change_pct",
    "change_se_ms",
    "median_before",
    "median_after",
    "median_change_ms",
    "change_pct_unrounded",  # added with the document (additive: schema_version 1 kept)
]


@pytest.fixture(scope="module")
def saved_pair(tmp_path_factory) -> tuple[Path, Path]:
    """The two V100 runs analyzed and saved as ``tracedoc analyze -f json`` reports."""
    d = tmp_path_factory.mktemp("saved")
    out = []
    for name in (W0, W4):
        p = d / (name.split(".")[0] + ".json")
        p.write_text(json.dumps(analyze(real_trace(name), Settings()).to_dict()))
        out.append(p)
    return out[0], out[1]


@pytest.fixture(scope="module")
def trace_diff() -> DiffResult:
    from tracedoc.diff import diff

    return diff(real_trace(W0), real_trace(W4))


def _check_comparison(r: DiffResult) -> DiffResult:
    assert [x["code"] for x in r.resolved] == ["TD101"]  # the DataLoader stall is gone
    assert r.breakdown and r.idle_ledger and r.step_change_parts and r.step_time.change_ms < 0
    assert all(type(x) is Row for x in r.breakdown)
    back = _round_trips(r)
    for pct in (-100.0, 0.0, r.step_time.change_pct_unrounded, r.step_time.change_pct_unrounded - 1e-9, 5.0):
        assert back.regressed(pct) == r.regressed(pct)
    assert DiffResult.KIND == "comparison"
    return back


def test_comparison_of_two_real_traces_round_trips(trace_diff):
    back = _check_comparison(trace_diff)
    assert back.before["kind"] == back.after["kind"] == "trace"


def test_comparison_of_saved_reports_and_trial_directories_round_trips(saved_pair, trace_diff, tmp_path):
    from tracedoc.diff import diff

    saved = diff(*saved_pair)
    _check_comparison(saved)
    assert saved.before["kind"] == "report"
    # the same figures as from the traces (the analysis is the same): only the sides differ
    a, b = saved.to_dict(), trace_diff.to_dict()
    for side in ("before", "after"):
        a.pop(side), b.pop(side)
    assert a == b
    # fix-loop trial directories: their analysis.json
    trials = []
    for i, p in enumerate(saved_pair):
        t = tmp_path / f"trial-{i:02d}"
        t.mkdir()
        shutil.copy(p, t / "analysis.json")
        trials.append(t)
    from_trials = diff(*trials)
    assert from_trials.before["kind"] == "trial"
    _check_comparison(from_trials)


def test_comparison_json_is_the_documented_schema(trace_diff):
    d = trace_diff.to_dict()
    assert list(d) == [
        "schema_version",
        "before",
        "after",
        "step_time_ms",
        "breakdown_ms",
        "idle_ledger_ms",
        "resolved",
        "new",
        "changed",
        "persisting",
        "outlier_steps",
        "step_change_parts",
    ]
    assert d["schema_version"] == 1
    assert set(d["before"]) == set(d["after"]) == {"path", "kind", "device", "step_count"}
    assert list(d["step_time_ms"]) == STEP_TIME_KEYS
    rows_ = d["breakdown_ms"] + d["step_change_parts"] + [r for rs in d["idle_ledger_ms"].values() for r in rs]
    assert rows_ and all(list(r) == ["name", "before_ms", "after_ms", "change_ms"] for r in rows_)
    assert {
        "code",
        "name",
        "severity",
        "status",
        "predicted_saving_ms",
        "measured_saving_ms",
        "ratio",
        "error",
        "measured_saving_median_ms",
        "ratio_median",
        "error_median",
        "saving_basis",
        "estimated_saving_after_ms",
        "slice",
        "slice_before_ms",
        "slice_after_ms",
        "measured_slice_saving_ms",
        "ratio_slice",
        "error_slice",
        "offset_ms",
        "offset_by",
    } <= set(d["resolved"][0])
    assert set(d["outlier_steps"]) == {"before", "after"}
    for group in ("changed", "persisting"):
        assert all(
            set(x)
            == {"code", "name", "severity_before", "severity_after", "saving_before_ms", "saving_after_ms"}
            | {"message_after"}
            for x in d[group]
        )


def test_comparison_figures_are_rounded_once_from_the_unrounded_ones():
    """The document holds what the JSON shows: rounded figures, each change computed before
    rounding (1.0004 - 0.0006 is 0.9998, shown 1.0; the rounded sides would give 0.999)."""
    st = StepTime.measured(0.0006, 1.0004, 2.0, 2.5, None)
    assert (st.before, st.after, st.change_ms, st.median_change_ms) == (0.001, 1.0, 1.0, 0.5)
    assert st.change_pct == round(100 * 0.9998 / 0.0006, 2) and st.change_pct_unrounded == 100.0 * (
        (1.0004 - 0.0006) / 0.0006
    )
    assert Row.measured("kernel", 0.0006, 1.0004) == Row("kernel", 0.001, 1.0, 1.0)
    assert StepTime.measured(None, 3.0, None, None).to_dict() == dict.fromkeys(STEP_TIME_KEYS) | {"after": 3.0}
    # a hair slower is a regression over 0 %, though the rounded change_pct is 0.0
    r = DiffResult({}, {}, StepTime.measured(100.0, 100.000001, None, None), [])
    assert r.step_time.change_pct == 0.0 and r.regressed(0.0)
    assert DiffResult.from_dict(through_json(r.to_dict())).regressed(0.0)


def test_a_comparison_written_before_the_unrounded_change_still_reads(trace_diff):
    d = through_json(trace_diff.to_dict())
    del d["step_time_ms"]["change_pct_unrounded"]
    old = DiffResult.from_dict(d)
    assert old.step_time.change_pct_unrounded is None
    assert old.regressed(-100.0) and not old.regressed(old.step_time.change_pct)


def test_comparison_refuses_other_versions(trace_diff):
    d = through_json(trace_diff.to_dict())
    for bad in (
        {k: v for k, v in d.items() if k != "schema_version"},
        {**d, "schema_version": 2},
        {**d, "schema_version": "1"},
    ):
        with pytest.raises(DocumentError) as e:
            DiffResult.from_dict(bad)
        assert isinstance(e.value, TracedocError) and "\n" not in str(e.value) and "schema_version" in str(e.value)
    with pytest.raises(DocumentError, match="missing 'step_time_ms'"):
        DiffResult.from_dict({k: v for k, v in d.items() if k != "step_time_ms"})
    with pytest.raises(DocumentError, match="not an object"):
        DiffResult.from_dict("comparison")


def test_prediction_error_is_predicted_minus_measured_over_measured(trace_diff):
    r = trace_diff.resolved[0]
    for err, meas in (("error", "measured_saving_ms"), ("error_median", "measured_saving_median_ms")):
        assert r[err] == pytest.approx((r["predicted_saving_ms"] - r[meas]) / r[meas], abs=2e-4)
    assert r["ratio"] == pytest.approx(r["predicted_saving_ms"] / r["measured_saving_ms"], abs=2e-4)


# ---- the fix-loop summary ------------------------------------------------------------------------


FIELDS = [
    FieldSpec("batch_size", "int", 32),
    FieldSpec("num_workers", "int", 0),
    FieldSpec("set_to_none", "bool", False),
    FieldSpec("device", "str", "auto"),
]
SPEC = WorkloadSpec(path="resnet.py", fields={f.name: f for f in FIELDS}, knobs={})
CPU = {"type": "cpu", "name": "fake cpu", "bf16_supported": False}


class RealAnalysisRunner:
    """A workload whose trials profile as the real V100 runs: ``num_workers=0`` gives the
    workers0 trace's analysis, more workers the workers4 one's; its timed steps are that
    trace's mean step, within 1% from round to round. ``crash`` fails the baseline."""

    def __init__(self, analyses: dict[int, dict], crash: bool = False) -> None:
        self.analyses = analyses
        self.crash = crash
        self.counts: dict[str, int] = {}

    def describe(self) -> WorkloadSpec:
        return SPEC

    def _analysis(self, config) -> dict:
        return self.analyses[0 if config["num_workers"] == 0 else 4]

    def run(self, config, trial_dir: Path, on_tick=None) -> TrialOutcome:
        trial_dir.mkdir(parents=True, exist_ok=True)
        if self.crash:
            return TrialOutcome("crashed", error="the workload exploded", dir=str(trial_dir))
        step = self._analysis(config)["signals"]["step_time_ms"]
        steps = [step * f for f in (0.99, 1.0, 1.01)]
        bs = config["batch_size"]
        return TrialOutcome(
            "ok",
            samples_per_s=[1000.0 * bs / s for s in steps],
            step_time_ms=steps,
            batch_size=bs,
            device=CPU,
            analysis=copy.deepcopy(self._analysis(config)),
            dir=str(trial_dir),
        )

    def measure(self, config, run_dir: Path, on_tick=None) -> TrialOutcome:
        run_dir.mkdir(parents=True, exist_ok=True)
        key = json.dumps(config, sort_keys=True)
        i = self.counts[key] = self.counts.get(key, -1) + 1
        step = self._analysis(config)["signals"]["step_time_ms"] * (1.0 + 0.01 * (i % 3 - 1))
        bs = config["batch_size"]
        return TrialOutcome("ok", samples_per_s=[1000.0 * bs / step], step_time_ms=[step], batch_size=bs, device=CPU)


@pytest.fixture(scope="module")
def analyses(saved_pair) -> dict[int, dict]:
    return {0: json.loads(saved_pair[0].read_text()), 4: json.loads(saved_pair[1].read_text())}


def _loop(tmp_path: Path, analyses, **kw) -> FixLoop:
    loop = FixLoop(
        RealAnalysisRunner(analyses, crash=kw.pop("crash", False)),
        SPEC,
        tmp_path / "out",
        LoopOptions(n_cpus=8, max_trials=2, max_rounds=5),
    )
    returned = loop.run()
    assert isinstance(loop.summary, FixLoopSummary) and returned == loop.summary.to_dict()
    return loop


def test_fixloop_summary_of_a_loop_on_real_analyses_round_trips(tmp_path, analyses):
    loop = _loop(tmp_path, analyses)
    s = loop.summary
    assert [t["status"] for t in s.trials][:2] == ["baseline", "kept"] and s.final["changes"]
    assert s.trials[1]["trace_diff"]["code"] == "TD101" and s.trials[1]["ab"]["rounds"]
    back = _round_trips(s)
    # summary.json is the document's to_dict(), exactly; summary.md its Markdown
    out = tmp_path / "out"
    assert json.loads((out / "summary.json").read_text()) == s.to_dict()
    assert FixLoopSummary.from_dict(json.loads((out / "summary.json").read_text())) == s
    assert (out / "summary.md").read_text() == render_markdown(back) == render_markdown(s.to_dict())
    assert rows(back) == rows(s.to_dict()) and render_notes(back) == render_notes(s.to_dict())
    assert FixLoopSummary.KIND == "fixloop"
    # build_summary again: the same document but for the clock
    again = build_summary(loop)
    assert type(again) is FixLoopSummary and again.trials == s.trials and again.final == s.final


def test_fixloop_summary_of_a_failed_baseline_round_trips(tmp_path, analyses):
    s = _loop(tmp_path, analyses, crash=True).summary
    assert s.final is None and s.baseline["status"] == "crashed" and s.stop_reason.startswith("baseline crashed")
    _round_trips(s)
    assert "No result" in render_markdown(s)


def test_fixloop_summary_json_is_the_documented_schema(tmp_path, analyses):
    d = _loop(tmp_path, analyses).summary.to_dict()
    assert list(d) == [
        "schema_version",
        "tool",
        "workload",
        "out_dir",
        "device",
        "options",
        "noise_rule",
        "baseline",
        "final",
        "trials",
        "not_applicable",
        "skipped",
        "warnings",
        "stop_reason",
        "interrupted",
        "signal",
        "started_at",
        "wall_s",
    ]
    assert d["schema_version"] == 5 and d["tool"]["name"] == "tracedoc" and d["tool"]["command"] == "fix-loop"
    assert set(d["options"]) == {
        "max_trials",
        "unsafe_fixes",
        "device",
        "sets",
        "min_gain",
        "ab_rounds",
        "max_rounds",
        "n_cpus",
    }
    assert set(d["baseline"]) == {"config", "samples_per_s", "step_time_ms", "status"}
    assert set(d["final"]) == {"config", "samples_per_s", "step_time_ms", "speedup", "trial", "changes"}
    trial = d["trials"][1]
    assert {
        "index",
        "change",
        "status",
        "samples_per_s",
        "step_time_ms",
        "speedup",
        "predicted_saving_ms",
        "measured_saving_ms",
        "decision",
        "error",
        "ab",
        "prediction_error",
        "trace_diff",
        "profiled_step_ms",
        "predicted_saving_timed_ms",
    } <= set(trial)
    assert "prediction_ratio" not in trial  # replaced in schema 3


def test_fixloop_prediction_error_uses_the_one_convention(tmp_path, analyses):
    t = _loop(tmp_path, analyses).summary.trials[1]
    pred = t["predicted_saving_timed_ms"] if t["predicted_saving_timed_ms"] is not None else t["predicted_saving_ms"]
    assert t["prediction_error"] == pytest.approx((pred - t["measured_saving_ms"]) / t["measured_saving_ms"])
    td = t["trace_diff"]  # tracedoc diff's row between the two trials' analyses: the same convention
    assert td["error"] == pytest.approx(
        (td["predicted_saving_ms"] - td["measured_saving_ms"]) / td["measured_saving_ms"], abs=2e-4
    )


def test_fixloop_summary_refuses_other_versions(tmp_path, analyses):
    d = through_json(_loop(tmp_path, analyses).summary.to_dict())
    for bad in (
        {k: v for k, v in d.items() if k != "schema_version"},
        {**d, "schema_version": 2},
        {**d, "schema_version": None},
    ):
        with pytest.raises(DocumentError) as e:
            FixLoopSummary.from_dict(bad)
        assert isinstance(e.value, TracedocError) and "\n" not in str(e.value) and "schema_version" in str(e.value)
    with pytest.raises(DocumentError, match="missing 'trials'"):
        FixLoopSummary.from_dict({k: v for k, v in d.items() if k != "trials"})


# ---- where the documents sit ---------------------------------------------------------------------


def test_the_old_names_are_the_documents():
    import tracedoc.diff as diff_mod
    import tracedoc.fixloop.summary as fs
    import tracedoc.ranks as ranks_pkg
    import tracedoc.ranks.summary as rs
    import tracedoc.report.comparison as comparison
    import tracedoc.report.fixloop as fixloop_doc
    import tracedoc.report.ranks as ranks_doc

    assert rs.MultiRankReport is ranks_pkg.MultiRankReport is ranks_doc.MultiRankReport
    assert rs.MultiTraceReport is ranks_doc.MultiTraceReport
    assert diff_mod.DiffResult is comparison.DiffResult and diff_mod.StepTime is comparison.StepTime
    assert diff_mod.Row is comparison.Row and diff_mod.SCHEMA_VERSION == comparison.SCHEMA_VERSION == 1
    assert fs.SCHEMA_VERSION == fixloop_doc.SCHEMA_VERSION == 5 and fs.FixLoopSummary is FixLoopSummary


@pytest.mark.parametrize("name", ["ranks", "comparison", "fixloop"])
def test_document_modules_import_nothing_above_them(name):
    """A document module imports the report model, text, errors and the version, never the
    code that computes it (imports under ``if TYPE_CHECKING:`` aside)."""
    path = Path(__file__).resolve().parents[1] / "tracedoc" / "report" / f"{name}.py"
    tree = ast.parse(path.read_text(encoding="utf-8"))
    skip = {
        id(x)
        for n in ast.walk(tree)
        if isinstance(n, ast.If) and "TYPE_CHECKING" in ast.unparse(n.test)
        for m in n.body
        for x in ast.walk(m)
    }
    mods = set()
    for n in ast.walk(tree):
        if id(n) in skip:
            continue
        if isinstance(n, ast.ImportFrom):
            mods.add(n.module or "")
        elif isinstance(n, ast.Import):
            mods.update(a.name for a in n.names)
    ours = {m for m in mods if m.startswith("tracedoc")}
    allowed = {
        "tracedoc.report.header",
        "tracedoc.report.model",
        "tracedoc.report.ranks",
        "tracedoc.text",
        "tracedoc.errors",
        "tracedoc._version",
    }
    assert ours <= allowed, ours - allowed


def test_fixture_traces_are_there():
    for name in (W0, W4, GLOO, SMALL):
        assert (FIXTURES / name).exists()
