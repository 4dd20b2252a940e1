"""`tracedoc diff`: the real V100 before/after pair (figures from the independent golden
script), findings resolved/new/changed on hand-built reports, the idle-ledger comparison,
the regression gate, trial directories, and bad input (exit 2, one line)."""

from __future__ import annotations

import copy
import gzip
import json
import os
import shutil
import statistics
import subprocess
import sys
from pathlib import Path

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from tracedoc.diff import (
    DiffInputError,
    compare_reports,
    diff,
    load_side,
    predicted_vs_measured,
)
from tracedoc.render.comparison import MarkdownDiffRenderer

ROOT = Path(__file__).resolve().parents[1]
FIXTURES = ROOT / "fixtures"
W0 = FIXTURES / "v100_resnet50_workers0.pt.trace.json.gz"
W4 = FIXTURES / "v100_resnet50_workers4.pt.trace.json.gz"
# Independent figures: tests/golden/derive_golden.py (stdlib only, never imports tracedoc).
GOLDEN = json.loads((ROOT / "tests" / "golden" / "golden_figures.json").read_text())["traces"]
G0 = GOLDEN[W0.name]
G4 = GOLDEN[W4.name]
_LEDGERS = json.loads((ROOT / "tests" / "golden" / "ledger_figures.json").read_text())["traces"]
LEDGER0 = _LEDGERS[W0.name]["devices"]["cuda:0"]["mean_ms"]
REPLAY0 = json.loads((ROOT / "tests" / "golden" / "replay_figures.json").read_text())["traces"][W0.name]["signals"]
LEDGER4 = _LEDGERS[W4.name]["devices"]["cuda:0"]["mean_ms"]
#: The calibration gate of issue 10: the predicted saving of the resolved finding stays
#: within 25% of the measured change on the real pair.
CALIBRATION_TOLERANCE = 0.25


def run(*args):
    return subprocess.run(
        [sys.executable, "-m", "tracedoc", *map(str, args)], capture_output=True, text=True, timeout=300
    )


@pytest.fixture(scope="module")
def pair_json():
    r = run("diff", W0, W4, "--format", "json")
    assert r.returncode == 0, r.stderr
    return json.loads(r.stdout)


# --------------------------------------------------------------------------- real pair


def test_real_pair_step_times_match_the_independent_golden_figures(pair_json):
    st = pair_json["step_time_ms"]
    assert pair_json["schema_version"] == 1
    assert st["before"] == pytest.approx(G0["mean_step_ms_tb"], abs=1e-3)  # 177.5922
    assert st["after"] == pytest.approx(G4["mean_step_ms_tb"], abs=1e-3)  # 141.068
    assert st["change_ms"] == pytest.approx(G4["mean_step_ms_tb"] - G0["mean_step_ms_tb"], abs=2e-3)
    assert st["median_before"] == pytest.approx(statistics.median(G0["tb_window_ms"]), abs=1e-3)
    assert st["median_after"] == pytest.approx(statistics.median(G4["tb_window_ms"]), abs=1e-3)
    b, a = G0["tb_window_ms"], G4["tb_window_ms"]  # Welch standard error of the change: 10.81 ms
    se = (statistics.variance(b) / len(b) + statistics.variance(a) / len(a)) ** 0.5
    assert st["change_se_ms"] == pytest.approx(se, abs=2e-3)
    rows = {r["name"]: r for r in pair_json["breakdown_ms"]}
    for cat in ("kernel", "memcpy", "runtime", "dataloader", "cpu_exec", "other"):
        assert rows[cat]["before_ms"] == pytest.approx(G0["breakdown_ms_per_step"][cat], abs=0.01), cat
        assert rows[cat]["after_ms"] == pytest.approx(G4["breakdown_ms_per_step"][cat], abs=0.01), cat
    # the breakdown changes add up to the step-time change
    assert sum(r["change_ms"] for r in pair_json["breakdown_ms"]) == pytest.approx(st["change_ms"], abs=0.01)


def test_real_pair_findings_resolved_new_changed(pair_json):
    assert [r["name"] for r in pair_json["resolved"]] == ["dataloader-stall"]
    # after the fix the step is host-bound; the 40 ms blocking pageable copy of step 5 is claimed
    # by pageable-h2d-copy (on workers0 its idle slice is below the floor)
    assert [r["name"] for r in pair_json["new"]] == ["launch-bound-gpu-idle"]
    # replayed savings: single-tensor-optimizer 15.1 -> 2.9 ms (with workers the step ends on the GPU
    # after optimizer.step, so its host time is mostly hidden); no-tensor-core-use ranked before, also
    # true after (2.8 -> 1.4 ms: the host holds both steps); pageable-h2d-copy 1.9 -> 3.2 ms;
    # zero-grad-kernels 6.0 -> 6.5 ms and memory-bound-elementwise 7.0 -> 7.0 ms persist (under the
    # change threshold: the kernels are the same job's)
    assert [r["name"] for r in pair_json["changed"]] == [
        "single-tensor-optimizer",
        "no-tensor-core-use",
        "pageable-h2d-copy",
    ]
    assert [r["name"] for r in pair_json["persisting"]] == ["memory-bound-elementwise", "zero-grad-kernels"]
    # the two stalled steps of the after trace (5: a 40 ms blocking copy, 9: a CPU stall)
    after = {o["step"]: o for o in pair_json["outlier_steps"]["after"]}
    assert set(after) == {5, 9}
    assert after[5]["top_category"] == "runtime" and after[9]["top_category"] == "cpu_exec"
    assert pair_json["outlier_steps"]["before"] == []


def test_real_pair_predicted_vs_measured_calibration(pair_json):
    """Issue 10, item 4: dataloader-stall's prediction on workers0 -> workers4.

    Measured = the step-time change. Golden: mean 177.5922 -> 141.068 (36.52 ms), median
    step 177.443 -> 126.682 (50.76 ms). The prediction is the step model's replay (58.85 ms, its
    range's low end 50.00 ms; golden: tests/golden/replay_figures.json, derive_replay.py) with the
    idle ledger's DataLoader slice beside it (58.73 ms, tests/golden/ledger_figures.json); it is
    within 25% of the median-step change, and the median lies in the range; on the mean it is 1.61x,
    which the rule's docs state (two stalled steps, see test_real_pair_findings_resolved_new_changed).
    """
    r = pair_json["resolved"][0]
    measured_mean = G0["mean_step_ms_tb"] - G4["mean_step_ms_tb"]
    measured_median = statistics.median(G0["tb_window_ms"]) - statistics.median(G4["tb_window_ms"])
    assert r["predicted_saving_ms"] == pytest.approx(REPLAY0["dataloader_replay_saving_ms"], abs=1e-2)
    assert r["predicted_low_ms"] == pytest.approx(REPLAY0["dataloader_replay_saving_low_ms"], abs=1e-2)
    assert r["predicted_slice_ms"] == pytest.approx(LEDGER0["dataloader"], abs=1e-2)
    assert r["predicted_low_ms"] <= measured_median <= r["predicted_saving_ms"] and r["meets_range"] is True
    assert r["measured_saving_ms"] == pytest.approx(measured_mean, abs=2e-3)
    assert r["measured_saving_median_ms"] == pytest.approx(measured_median, abs=2e-3)
    assert r["ratio"] == pytest.approx(r["predicted_saving_ms"] / measured_mean, rel=1e-3)
    assert abs(r["error_median"]) <= CALIBRATION_TOLERANCE, r
    # what the rule predicts to leave the step did leave it: the DataLoader category
    dl = next(x for x in pair_json["breakdown_ms"] if x["name"] == "dataloader")
    assert -dl["change_ms"] == pytest.approx(r["predicted_saving_ms"], rel=CALIBRATION_TOLERANCE)


def test_real_pair_own_slice_and_where_the_step_change_went(pair_json):
    """Issue 10, item 4: the rule's own slice (the idle ledger's DataLoader cause) fell as
    predicted, and the mean step fell less because other parts of the step grew.

    Golden (tests/golden/ledger_figures.json, derive_ledger.py, stdlib only): DataLoader
    slice 58.7335 -> 1.183 ms per step; every part's change comes from the same file
    ("busy" is the device's busy time).
    """
    r = pair_json["resolved"][0]
    assert r["slice"] == "idle:dataloader"
    fell = LEDGER0["dataloader"] - LEDGER4["dataloader"]
    assert r["measured_slice_saving_ms"] == pytest.approx(fell, abs=1e-2)
    assert abs(r["error_slice"]) <= CALIBRATION_TOLERANCE, r
    parts = {p["name"]: p["change_ms"] for p in pair_json["step_change_parts"]}
    for name, change in parts.items():
        key = "busy" if name == "gpu_busy" else name
        assert change == pytest.approx(LEDGER4[key] - LEDGER0[key], abs=1e-2), name
    # the parts are the whole step: they add up to the mean step's change
    assert sum(parts.values()) == pytest.approx(pair_json["step_time_ms"]["change_ms"], abs=1e-2)
    # what the rest of the step gained, and the parts that grew, largest first
    assert r["offset_ms"] == pytest.approx(fell - r["measured_saving_ms"], abs=1e-2)
    grew = [p["name"] for p in r["offset_by"]]
    assert grew[:3] == ["launch_overhead", "pageable_h2d", "untraced"]
    assert "dataloader" not in grew
    assert all(p["change_ms"] >= 0.5 for p in r["offset_by"])


def test_real_pair_text_and_markdown_show_predicted_vs_measured():
    r = run("diff", W0, W4)
    assert r.returncode == 0, r.stderr
    out = " ".join(r.stdout.split())
    assert "dataloader-sta" in out and "(50.0-58.9;" in out and "slice 58.7)" in out and "36.5" in out and "50.8" in out
    assert "177.6 ms -> 141.1 ms" in out
    m = run("diff", W0, W4, "--format", "markdown")
    assert m.returncode == 0, m.stderr
    assert (
        "| TD101 `dataloader-stall` | 58.9 (50.0-58.9; slice 58.7) | 57.5 | 1.02 | 36.5 | 1.61 | 50.8 | 1.16 |"
        in m.stdout
    )
    assert "its slice (idle:dataloader) fell 57.5 ms of the 58.9 predicted" in m.stdout
    assert "the rest of the step grew 21.0 ms (launch_overhead +8.9, pageable_h2d +6.1" in m.stdout
    assert "the rest of the step grew 21.0 ms (launch_overhead +8.9, pageable_h2d +6.1" in out


# ------------------------------------------------------------------- hand-built reports


def finding(code, name, saving, severity="warning"):
    return {
        "code": code,
        "name": name,
        "severity": severity,
        "message": f"{name} fired",
        "estimated_saving_ms": saving,
        "saving_basis": "test",
        "evidence": {},
        "fix": {"summary": "x", "safety": "safe", "knobs": []},
    }


def report(step_ms, findings, steps=None, shares=None, ledger=None):
    steps = steps if steps is not None else [step_ms] * 3
    signals = {"step_time_ms": step_ms, "step_count": len(steps)}
    signals.update({f"{k}_share": v for k, v in (shares or {}).items()})
    d = {
        "schema_version": 1,
        "tool": {"name": "tracedoc", "version": "test"},
        "trace": {"path": "t.json", "device": {"name": "GPU"}, "n_steps": len(steps)},
        "signals": signals,
        "signals_unavailable": {},
        "units": {},
        "steps": [
            {"step": i, "step_time_ms": t, "kernel_ms": t / 2, "dataloader_ms": t / 2} for i, t in enumerate(steps)
        ],
        "findings": findings,
        "skipped": [],
        "rules_evaluated": [],
    }
    if ledger is not None:
        d["idle_ledger"] = ledger
    return d


def with_parts(d, busy, **idle):
    """A hand-built report with the primary device's busy time and idle causes as signals, and
    its idle ledger."""
    causes = ("dataloader", "blocking_sync", "launch_overhead", "kernel_wait", "other_idle")
    d["signals"]["gpu_busy_ms"] = busy
    d["signals"].update({f"idle_{k}_ms": idle.get(k, 0.0) for k in causes})
    d["idle_ledger"] = {"cuda:0": {k: idle.get(k, 0.0) for k in causes}}
    return d


def test_slice_that_did_not_fall_is_told_apart_from_one_that_was_offset():
    stall = finding("TD101", "dataloader-stall", 40.0) | {"claims": ["idle:dataloader"]}
    before = with_parts(report(100.0, [stall]), 50.0, dataloader=40.0, launch_overhead=10.0)
    # the fix removed its slice, but launch overhead grew 20 ms: the step fell 20, not 40
    offset = with_parts(report(80.0, []), 50.0, dataloader=0.0, launch_overhead=30.0)
    r = compare_reports(before, offset).to_dict()["resolved"][0]
    assert r["measured_slice_saving_ms"] == 40.0 and r["ratio_slice"] == 1.0
    assert r["measured_saving_ms"] == 20.0 and r["ratio"] == 2.0
    assert r["offset_ms"] == 20.0 and r["offset_by"] == [{"name": "launch_overhead", "change_ms": 20.0}]
    # the rule stopped firing, but its slice only fell 10 ms: the prediction was wrong
    missed = with_parts(report(90.0, []), 50.0, dataloader=30.0, launch_overhead=10.0)
    r = compare_reports(before, missed).to_dict()["resolved"][0]
    assert r["measured_slice_saving_ms"] == 10.0 and r["error_slice"] == 3.0
    assert r["offset_ms"] == 0.0 and r["offset_by"] == []
    # no GPU ledger (a CPU-only pair) or no claims: no slice, no parts, no sentence
    plain = compare_reports(report(100.0, [finding("TD101", "dataloader-stall", 40.0)]), report(80.0, []))
    d = plain.to_dict()
    assert d["step_change_parts"] == [] and d["resolved"][0]["slice"] is None
    assert d["resolved"][0]["offset_ms"] is None and d["resolved"][0]["offset_by"] == []
    assert "its slice (" not in MarkdownDiffRenderer().render(plain)


def test_resolved_new_changed_and_persisting_matched_by_code():
    before = report(
        100.0,
        [
            finding("TD101", "dataloader-stall", 40.0, "error"),
            finding("TD102", "pageable-h2d-copy", 2.0),
            finding("TD202", "zero-grad-kernels", 6.0, "info"),
            finding("TD301", "no-tensor-core-use", 30.0),
        ],
    )
    after = report(
        70.0,
        [
            finding("TD102", "pageable-h2d-copy", 2.1),  # +0.1 ms: same
            finding("TD202", "zero-grad-kernels", 6.0, "warning"),  # severity moved
            finding("TD301", "no-tensor-core-use", 20.0),  # saving moved 10 ms
            finding("TD201", "launch-bound-gpu-idle", 12.0),
        ],
    )
    d = compare_reports(before, after).to_dict()
    assert [r["code"] for r in d["resolved"]] == ["TD101"]
    r = d["resolved"][0]
    assert (r["predicted_saving_ms"], r["measured_saving_ms"]) == (40.0, 30.0)
    assert r["ratio"] == pytest.approx(40 / 30, abs=1e-4) and r["error"] == pytest.approx(1 / 3, abs=1e-4)
    assert [x["code"] for x in d["new"]] == ["TD201"]
    assert {x["code"] for x in d["changed"]} == {"TD202", "TD301"}
    assert [x["code"] for x in d["persisting"]] == ["TD102"]
    assert d["step_time_ms"]["change_pct"] == pytest.approx(-30.0)


def test_ratio_is_none_when_the_step_did_not_change():
    before = report(100.0, [finding("TD101", "dataloader-stall", 40.0)])
    after = report(100.0, [])
    (r,) = predicted_vs_measured(before, after)
    assert r["status"] == "resolved" and r["measured_saving_ms"] == 0.0 and r["ratio"] is None and r["error"] is None


def test_predicted_vs_measured_for_the_fix_loop_selects_by_name_or_code():
    before = report(100.0, [finding("TD101", "dataloader-stall", 40.0), finding("TD301", "no-tensor-core-use", 30.0)])
    after = report(80.0, [finding("TD301", "no-tensor-core-use", 29.0)], steps=[79.0, 80.0, 95.0])
    rows = predicted_vs_measured(before, after, names=["dataloader-stall"])
    assert [r["code"] for r in rows] == ["TD101"]
    assert rows[0]["measured_saving_ms"] == 20.0 and rows[0]["measured_saving_median_ms"] == 20.0
    rows = predicted_vs_measured(before, after, names=["TD301"])
    assert rows[0]["status"] == "persisting" and rows[0]["estimated_saving_after_ms"] == 29.0
    assert len(predicted_vs_measured(before, after)) == 2


def test_predicted_vs_measured_takes_report_objects():
    import tracedoc

    b = tracedoc.analyze(FIXTURES / "legacy_computeproperties.json.gz")
    rows = predicted_vs_measured(b, b)
    assert [r["code"] for r in rows] == [f.code for f in b.findings]
    assert all(r["status"] == "persisting" and r["measured_saving_ms"] == 0.0 for r in rows)


def test_median_step_ignores_a_stalled_step_the_mean_does_not():
    before = report(100.0, [finding("TD101", "dataloader-stall", 40.0)], steps=[100.0, 100.0, 100.0])
    after = report(80.0, [], steps=[60.0, 60.0, 120.0])
    d = compare_reports(before, after).to_dict()
    assert d["resolved"][0]["measured_saving_ms"] == 20.0
    assert d["resolved"][0]["measured_saving_median_ms"] == 40.0
    assert [o["step"] for o in d["outlier_steps"]["after"]] == [2]


def test_breakdown_rows_are_share_times_step_time():
    before = report(100.0, [], shares={"kernel": 0.5, "dataloader": 0.4, "other": 0.1})
    after = report(60.0, [], shares={"kernel": 0.8, "dataloader": 0.05, "other": 0.15})
    rows = {r["name"]: r for r in compare_reports(before, after).to_dict()["breakdown_ms"]}
    assert rows["kernel"] == {"name": "kernel", "before_ms": 50.0, "after_ms": 48.0, "change_ms": -2.0}
    assert rows["dataloader"]["change_ms"] == pytest.approx(-37.0)
    assert "memcpy" not in rows  # neither report has it


def test_idle_ledger_change_per_cause_when_both_reports_have_one():
    lb = {"cuda:0": {"dataloader": 40.0, "launch_overhead": 5.0, "other_idle": 1.0}}
    la = {"cuda:0": {"dataloader": 1.0, "launch_overhead": 9.0, "blocking_sync": 2.0}}
    d = compare_reports(report(100.0, [], ledger=lb), report(70.0, [], ledger=la)).to_dict()
    rows = {r["name"]: r for r in d["idle_ledger_ms"]["cuda:0"]}
    assert rows["dataloader"]["change_ms"] == -39.0
    assert rows["launch_overhead"]["change_ms"] == 4.0
    assert rows["other_idle"]["after_ms"] is None and rows["blocking_sync"]["before_ms"] is None
    # one side without a ledger: no ledger section, and no error
    assert compare_reports(report(100.0, [], ledger=lb), report(70.0, [])).to_dict()["idle_ledger_ms"] == {}


def test_ledger_in_text_and_markdown(tmp_path):
    lb = {"cuda:0": {"dataloader": 40.0}}
    la = {"cuda:0": {"dataloader": 1.5}}
    b = tmp_path / "b.json"
    a = tmp_path / "a.json"
    b.write_text(json.dumps(report(100.0, [], ledger=lb)))
    a.write_text(json.dumps(report(70.0, [], ledger=la)))
    m = run("diff", b, a, "--format", "markdown")
    assert m.returncode == 0, m.stderr
    assert "GPU idle ledger, cuda:0" in m.stdout and "| dataloader | 40.0 | 1.5 | -38.5 |" in m.stdout
    t = run("diff", b, a)
    assert "GPU idle ledger, cuda:0" in t.stdout and "-38.5" in t.stdout


# ------------------------------------------------------------------ regression gate


@pytest.mark.parametrize(
    "after_ms,flag,code",
    [(110.0, "5", 1), (110.0, "15", 0), (104.0, "5", 0), (90.0, "0", 0), (100.5, "0", 1), (130.0, None, 0)],
)
def test_fail_on_regression_exit_codes(tmp_path, after_ms, flag, code):
    b = tmp_path / "before.json"
    a = tmp_path / "after.json"
    b.write_text(json.dumps(report(100.0, [])))
    a.write_text(json.dumps(report(after_ms, [])))
    args = ["diff", b, a, "--format", "json"] + (["--fail-on-regression", flag] if flag is not None else [])
    r = run(*args)
    assert r.returncode == code, r.stderr
    assert json.loads(r.stdout)["step_time_ms"]["change_pct"] == pytest.approx(after_ms - 100.0)


def test_diff_formats_are_text_json_markdown(tmp_path):
    """The names `analyze` uses; a format diff has no renderer for is a one-line usage error, not text."""
    b = tmp_path / "before.json"
    b.write_text(json.dumps(report(100.0, [])))
    assert run("diff", b, b, "--format", "text").returncode == 0
    r = run("diff", b, b, "--format", "sarif")
    assert (
        r.returncode == 2
        and r.stdout == ""
        and "--format sarif is not available here (text, json or markdown)" in r.stderr
    )


# ------------------------------------------------------------------ trial directories


def test_trial_directories_analysis_json_or_trace(tmp_path):
    t0, t1 = tmp_path / "trial-00", tmp_path / "trial-01"
    t0.mkdir()
    t1.mkdir()
    shutil.copy(W0, t0 / "trace.pt.trace.json.gz")  # analyzed from the trace
    shutil.copy(W4, t1 / "trace.pt.trace.json.gz")
    import tracedoc

    (t1 / "analysis.json").write_text(json.dumps(tracedoc.analyze(W4).to_dict()))  # read, not re-analyzed
    assert load_side(t0).kind == "trial" and load_side(t1).kind == "trial"
    d = diff(t0, t1).to_dict()
    assert d["before"]["kind"] == d["after"]["kind"] == "trial"
    assert d["step_time_ms"]["before"] == pytest.approx(G0["mean_step_ms_tb"], abs=1e-3)
    assert d["step_time_ms"]["after"] == pytest.approx(G4["mean_step_ms_tb"], abs=1e-3)
    assert [r["name"] for r in d["resolved"]] == ["dataloader-stall"]
    # analysis.json wins over the trace: a doctored analysis shows through
    doctored = json.loads((t1 / "analysis.json").read_text())
    doctored["signals"]["step_time_ms"] = 100.0
    (t1 / "analysis.json").write_text(json.dumps(doctored))
    assert diff(t0, t1).to_dict()["step_time_ms"]["after"] == 100.0


def test_saved_report_and_trace_sides_mix(tmp_path):
    r = run("analyze", W4, "--format", "json")
    saved = tmp_path / "after.json"
    saved.write_text(r.stdout)
    assert load_side(saved).kind == "report"
    d = diff(W0, saved).to_dict()
    assert d["before"]["kind"] == "trace" and d["after"]["kind"] == "report"
    assert d["step_time_ms"]["after"] == pytest.approx(G4["mean_step_ms_tb"], abs=1e-3)


# ------------------------------------------------------------------------ bad input


def _bad_cases(tmp_path):
    good = tmp_path / "good.json"
    good.write_text(json.dumps(report(100.0, [])))
    cases = {}
    cases["missing"] = (tmp_path / "nope.json", "no such file")
    empty_dir = tmp_path / "emptydir"
    empty_dir.mkdir()
    cases["not_a_trial_dir"] = (empty_dir, "not a fix-loop trial")
    fifo = tmp_path / "fifo"
    os.mkfifo(fifo)
    cases["fifo"] = (fifo, "not a regular file")
    trunc = tmp_path / "trunc.json.gz"
    trunc.write_bytes(gzip.compress(W0.read_bytes())[:300])
    cases["truncated_gzip_trace"] = (trunc, "gzip")
    bad_json = tmp_path / "bad_report.json"
    bad_json.write_text('{"schema_version": 1, "signals": {')
    cases["invalid_json_report"] = (bad_json, "invalid JSON report")
    r = report(100.0, [])
    r["findings"] = {"a": 1}
    wrong = tmp_path / "wrong_types.json"
    wrong.write_text(json.dumps(r))
    cases["findings_not_list"] = (wrong, "'findings'")
    r = report(100.0, [finding("TD1", "x", "lots")])
    s = tmp_path / "saving_str.json"
    s.write_text(json.dumps(r))
    cases["saving_not_number"] = (s, "estimated_saving_ms")
    r = report(100.0, [])
    r["schema_version"] = 99
    v = tmp_path / "version.json"
    v.write_text(json.dumps(r))
    cases["schema_version"] = (v, "schema_version")
    m = tmp_path / "multi.json"
    m.write_text(json.dumps({"schema_version": 1, "ranks": []}))
    cases["multi_rank"] = (m, "multi-rank")
    foreign = tmp_path / "foreign.json"
    foreign.write_text(json.dumps({"traceEvents": [{"ph": "X", "name": "a", "ts": 1, "dur": 1, "cat": "x"}]}))
    cases["foreign_trace"] = (foreign, "foreign.json")
    return good, cases


def test_bad_input_one_line_exit_2(tmp_path):
    good, cases = _bad_cases(tmp_path)
    for name, (path, expected) in cases.items():
        for args in ((path, good), (good, path)):
            r = run("diff", *args)
            assert r.returncode == 2, (name, r.stdout, r.stderr)
            assert r.stdout == "", name
            err = r.stderr.strip()
            assert "\n" not in err and "Traceback" not in err, (name, err)
            assert err.startswith("tracedoc: error: "), (name, err)
            assert str(path) in err and expected in err, (name, err)


def test_load_side_raises_typed_errors(tmp_path):
    with pytest.raises(DiffInputError, match="no such file"):
        load_side(tmp_path / "missing")
    bad = copy.deepcopy(report(1.0, []))
    bad["steps"] = [{"step": 1}]
    p = tmp_path / "r.json"
    p.write_text(json.dumps(bad))
    with pytest.raises(DiffInputError, match="step #0"):
        load_side(p)


def test_gzipped_and_key_sorted_reports_are_read_as_reports(tmp_path):
    r = report(100.0, [finding(f"X{i}", f"rule-{i}", 1.0) for i in range(400)])
    for f in r["findings"]:
        f["message"] = "m" * 200  # the findings list outgrows the sniffed head
    sorted_plain = tmp_path / "sorted.json"
    sorted_plain.write_text(json.dumps(r, sort_keys=True))
    assert json.dumps(r, sort_keys=True).index('"schema_version"') > 64 << 10
    gz = tmp_path / "report.json.gz"
    gz.write_bytes(gzip.compress(json.dumps(r).encode()))
    for p in (sorted_plain, gz):
        side = load_side(p)
        assert side.kind == "report" and len(side.report.findings) == 400


def test_oversized_report_is_refused_before_parsing(tmp_path, monkeypatch):
    import tracedoc.diff as d

    p = tmp_path / "big.json"
    p.write_text(json.dumps(report(100.0, [finding("TD1", "x", 1.0)])))
    monkeypatch.setattr(d, "MAX_REPORT_BYTES", 200)
    with pytest.raises(DiffInputError, match="200-byte limit"):
        load_side(p)


def test_names_from_the_input_are_not_rich_markup(tmp_path):
    b = tmp_path / "b.json"
    a = tmp_path / "a.json"
    b.write_text(json.dumps(report(100.0, [finding("TD9", "[bold red]x[/]", 5.0)])))
    a.write_text(json.dumps(report(90.0, [finding("TD8", "[link=http://x]y[/link]", 5.0)])))
    r = run("diff", b, a)
    assert r.returncode == 0, r.stderr
    assert "[bold red]x[/]" in r.stdout and "[link=http://x]y[/link]" in r.stdout


def test_identical_inputs_resolve_nothing():
    r = report(100.0, [finding("TD101", "dataloader-stall", 40.0), finding("TD301", "no-tensor-core-use", 30.0)])
    d = compare_reports(r, copy.deepcopy(r)).to_dict()
    assert d["resolved"] == d["new"] == d["changed"] == []
    assert [x["code"] for x in d["persisting"]] == ["TD101", "TD301"]
    assert d["step_time_ms"]["change_ms"] == 0.0 and d["step_time_ms"]["change_pct"] == 0.0


def test_readme_calibration_table_matches_the_diff(pair_json):
    """The README's table is the diff's own output (keeps the README true)."""
    r = pair_json["resolved"][0]
    st = pair_json["step_time_ms"]
    row = (
        f"| TD101 `dataloader-stall` | {r['predicted_saving_ms']:.1f} ms (range {r['predicted_low_ms']:.1f}-"
        f"{r['predicted_saving_ms']:.1f}; slice {r['predicted_slice_ms']:.1f}) | {r['measured_slice_saving_ms']:.1f} ms "
        f"({r['slice_before_ms']:.1f} -> {r['slice_after_ms']:.1f}) | {r['ratio_slice']:.2f} "
        f"| {r['measured_saving_ms']:.1f} "
        f"± {r['measured_saving_se_ms']:.1f} ms "
        f"({st['before']:.1f} -> {st['after']:.1f}) | {r['ratio']:.2f} | {r['measured_saving_median_ms']:.1f} ms "
        f"({st['median_before']:.1f} -> {st['median_after']:.1f}) | {r['ratio_median']:.2f} |"
    )
    header = (
        "| finding | predicted (replayed) | its slice fell (idle:dataloader) | ratio | measured, mean step | ratio |"
    )
    for doc in (ROOT / "README.md", ROOT / "docs" / "diff.md"):
        text = doc.read_text()
        assert row in text and header in text, doc


_codes = st.sampled_from(["TD101", "TD102", "TD201", "TD202", "TD301", "TD401"])
_finding = st.builds(
    lambda code, saving, sev: finding(code, code.lower(), saving, sev),
    _codes,
    st.one_of(st.none(), st.floats(0, 500, allow_nan=False)),
    st.sampled_from(["info", "warning", "error"]),
)
_findings = st.lists(_finding, max_size=6, unique_by=lambda f: f["code"])


@settings(max_examples=150, deadline=None)
@given(_findings, _findings, st.floats(1, 1000), st.floats(1, 1000))
def test_every_finding_lands_in_exactly_one_group(fb, fa, tb, ta):
    d = compare_reports(report(tb, fb), report(ta, fa)).to_dict()
    before_codes, after_codes = {f["code"] for f in fb}, {f["code"] for f in fa}
    groups = {g: [x["code"] for x in d[g]] for g in ("resolved", "new", "changed", "persisting")}
    assert sorted(groups["resolved"]) == sorted(before_codes - after_codes)
    assert sorted(groups["new"]) == sorted(after_codes - before_codes)
    assert sorted(groups["changed"] + groups["persisting"]) == sorted(before_codes & after_codes)
    for r in d["resolved"]:
        assert r["measured_saving_ms"] == pytest.approx(tb - ta, abs=2e-3)
        if r["predicted_saving_ms"] is not None and abs(tb - ta) > 1e-3:
            assert r["ratio"] == pytest.approx(r["predicted_saving_ms"] / (tb - ta), rel=1e-2, abs=1e-3)
    assert compare_reports(report(tb, fb), report(ta, fa)).regressed(0.0) == (ta > tb * (1 + 1e-12))
