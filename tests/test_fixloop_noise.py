"""Issue 22's fix-loop part, with fake runners (no torch, no timing):

1. a baseline whose timed windows disagree gets more windows, or is marked unusable, before
   any trial is judged; every figure of the table is computable from the table; the noise
   warning covers the baseline;
2. the DataLoader workers search starts from the count the finding suggests;
3. A/B runs of a configuration with ``compile`` on warm up longer.
"""

from __future__ import annotations

import json
import re
import statistics
from pathlib import Path

import pytest
from test_fixloop_loop import CPU, DATALOADER, GPU, LAUNCH, RESNET_FIELDS, FakeRunner, finding, spec

from tracedoc.errors import DocumentError
from tracedoc.fixloop import knobs
from tracedoc.fixloop.loop import FixLoop, LoopOptions
from tracedoc.fixloop.noise import NOISY_CV, check_repeats
from tracedoc.fixloop.runner import TrialOutcome
from tracedoc.fixloop.workload import FieldSpec
from tracedoc.render.fixloop import COLUMNS, render_markdown, render_notes, render_table, rows
from tracedoc.report.fixloop import FixLoopSummary

# ---------------------------------------------------------------- 1a. check_repeats


def test_repeats_that_agree_by_their_cv():
    c = check_repeats([800.0, 810.0, 790.0])
    assert c.verdict == "agree" and c.usable and c.cv <= NOISY_CV and c.low is None


def test_issue_22_repeats_disagree_then_more_then_unusable():
    values = [73.0, 816.0, 821.0]  # issue 22's dispatch_bound baseline: CV 75 %
    assert check_repeats(values, final=False).verdict == "more"
    last = check_repeats(values, final=True)
    assert last.verdict == "disagree" and not last.usable and "above 10%" in last.reason


def test_an_outlier_among_enough_windows_still_gives_a_sure_median():
    # CV stays above 10 % (one window 10x slow), but from 8 windows the 93 % sign-test
    # interval of the median is [x_(2), x_(7)], within 10 % of it
    values = [73.0, 816.0, 821.0, 810.0, 815.0, 812.0, 818.0, 814.0]
    c = check_repeats(values, final=False)
    assert c.cv > NOISY_CV and c.verdict == "agree" and c.low == 810.0 and c.high == 818.0
    # five windows: the interval is [min, max], the outlier in it: not yet sure
    assert check_repeats(values[:5], final=False).verdict == "more"


def test_one_window_is_unchecked_and_usable():
    c = check_repeats([100.0])
    assert c.verdict == "unchecked" and c.usable and c.cv is None


# ---------------------------------------------------------------- 1. the loop and the table


class NoisyBaselineRunner(FakeRunner):
    """The baseline's profiled run gives ``profiled`` repeats; its extra measure-only runs give
    ``extra`` in turn (then its last value); A/B rounds give ``ab[side]`` per round."""

    def __init__(self, profiled, extra, ab_a, ab_b, device=CPU):
        super().__init__(lambda c: (profiled if c["num_workers"] == 0 else ab_b, [DATALOADER]), device=device)
        self.extra, self.ab_a, self.ab_b = list(extra), list(ab_a), list(ab_b)

    def measure(self, config, run_dir: Path, on_tick=None) -> TrialOutcome:
        run_dir.mkdir(parents=True, exist_ok=True)
        self.measured.append((run_dir.name, dict(config)))
        if run_dir.name.startswith("repeat-"):
            i = int(run_dir.name.split("-")[1]) - 1
            value = self.extra[min(i, len(self.extra) - 1)]
        else:
            rnd = int(run_dir.name.split("-")[1]) - 1
            side = run_dir.name.rsplit("-", 1)[1]
            values = self.ab_a if side == "A" else self.ab_b
            value = values[rnd % len(values)]
        bs = config["batch_size"]
        return TrialOutcome(
            "ok", samples_per_s=[value], step_time_ms=[1000.0 * bs / value], batch_size=bs, device=self.device
        )


def _loop(tmp_path, runner, **opts) -> tuple[dict, FixLoop]:
    loop = FixLoop(runner, spec(), tmp_path / "out", LoopOptions(n_cpus=opts.pop("n_cpus", 8), **opts))
    return loop.run(), loop


def test_disagreeing_baseline_gets_more_windows_before_any_trial(tmp_path):
    runner = NoisyBaselineRunner([73.0, 816.0, 821.0], [810.0, 815.0, 812.0, 818.0, 814.0], [50.0], [60.0])
    summary, _ = _loop(tmp_path, runner, max_trials=1)
    names = [n for n, _ in runner.measured]
    # the extra baseline windows come first, before the first A/B round of trial 1
    assert names[:5] == [f"repeat-{i:02d}" for i in range(1, 6)] and names[5] == "ab-01-A"
    base = summary["trials"][0]
    rc = base["repeats_check"]
    assert rc["verdict"] == "agree" and rc["usable"] and rc["n"] == 8
    assert rc["extra"]["samples_per_s"] == [810.0, 815.0, 812.0, 818.0, 814.0]
    assert base["samples_per_s"] == pytest.approx(statistics.median([73, 816, 821, 810, 815, 812, 818, 814]))
    assert base["profiled_run"]["samples_per_s"] == [73.0, 816.0, 821.0]  # the profiled run's own, kept
    # (c) the noise warning covers the baseline's own windows
    w = [x for x in summary["warnings"] if x.startswith("trial 0 (baseline): the machine was too noisy")]
    assert len(w) == 1 and "CV 75" in w[0] and "median of all" in w[0]


def test_baseline_that_never_agrees_is_unusable_and_not_shown(tmp_path):
    # issue 22: baseline [73, 816, 821]; the machine stays noisy; trial 1's B median is 339 ms
    # while its own incumbent, in the same rounds, was slower still
    bs = 32
    a = [1000.0 * bs / ms for ms in (593.4, 600.0, 580.0, 610.0, 590.0)]
    b = [x * 1.75 for x in a]
    runner = NoisyBaselineRunner([73.0, 816.0, 821.0], [73.0, 816.0], a, b)
    summary, _ = _loop(tmp_path, runner, max_trials=1, max_rounds=5)
    rc = summary["trials"][0]["repeats_check"]
    assert rc["verdict"] == "disagree" and rc["usable"] is False and len(rc["extra"]["samples_per_s"]) == 5
    assert summary["trials"][1]["status"] == "kept"  # judged on its own A/B rounds
    table = rows(summary)
    assert table[0][2] == "-" and table[0][3] == "-"  # no figure that the windows contradict
    assert any("unusable" in w for w in summary["warnings"])
    # trial 1 was kept: its speedup, and its samples/s said to be of its own rounds
    assert "Final: 1.75x the baseline (the product of the kept B/A; trial 1, 94.4 samples/s in its own A/B" in (
        render_markdown(summary)
    )
    # the loop's command prints the notes: the warning is among them
    assert any(n.startswith("warning: trial 0 (baseline)") for n in render_notes(summary))


def test_unusable_baseline_as_final_shows_no_throughput(tmp_path):
    runner = NoisyBaselineRunner([73.0, 816.0, 821.0], [73.0, 816.0], [100.0], [90.0])
    summary, _ = _loop(tmp_path, runner, max_trials=1, max_rounds=5)
    assert summary["final"]["trial"] == 0
    assert "Final: the baseline, - samples/s (changes: none kept)" in render_markdown(summary)


def _cells(row: list[str]) -> dict[str, str]:
    return dict(zip(COLUMNS, row, strict=True))


def test_every_speedup_is_computable_from_the_table(tmp_path):
    """(b): a trial's speedup is its incumbent row's speedup times its B/A; its measured ms is
    its A step minus its B step, all shown in the same table."""

    def behave(c):
        w = c["num_workers"]
        return {0: [100.0, 104.0, 96.0], 1: [130.0, 125.0, 136.0, 128.0, 133.0], 2: [120.0, 126.0, 118.0]}[w], [
            DATALOADER
        ]

    runner = FakeRunner(behave, device=GPU)
    loop = FixLoop(runner, spec(), tmp_path / "out", LoopOptions(n_cpus=2, max_trials=2))
    summary = loop.run()
    table = [_cells(r) for r in rows(summary)]
    assert [t["status"] for t in summary["trials"]] == ["baseline", "kept", "reverted"]
    speed = 1.0
    for t, row in zip(summary["trials"][1:], table[1:], strict=True):
        ratio = float(row["B/A"])
        assert float(row["speedup"].rstrip("x")) == pytest.approx(speed * ratio, abs=0.006)
        b_ms, a_ms = re.fullmatch(r"([\d.]+) \(A ([\d.]+)\)", row["step ms"]).groups()
        assert float(row["measured ms"]) == pytest.approx(float(a_ms) - float(b_ms), abs=0.11)
        if t["status"] == "kept":
            speed *= ratio
    assert table[0]["B/A"] == "-" and table[0]["speedup"] == "1.00x"
    md = render_markdown(summary)
    assert "| # | change | step ms | samples/s | CV | B/A | speedup |" in md and "(A " in md
    # the terminal table stacks the incumbent's figure under the candidate's
    from rich.console import Console

    console = Console(width=80, record=True)
    console.print(render_table(summary, width=80))
    text = console.export_text()
    assert re.search(r"A [\d.]+\s+A \d+%\s+\u00d7\d\.\d{3}", text) and "(\u00d7B/A)" in text


# ---------------------------------------------------------------- 2. workers from the suggestion


def test_suggested_value_from_evidence_or_its_formula():
    assert knobs.suggested_value("num_workers", {"dataloader_workers_suggested": 3.0}) == 3
    # TD101's evidence on the H100 run: 51.6 ms of DataLoader in a 73.0 ms step -> 3 keep up, +1
    assert knobs.suggested_value("num_workers", {"dataloader_ms": 51.571491, "step_time_ms": 72.980928}) == 4
    assert knobs.suggested_value("num_workers", {}) is None
    assert knobs.suggested_value("num_workers", {"dataloader_workers_suggested": True}) is None
    assert knobs.suggested_value("compile", {"dataloader_workers_suggested": 3}) is None


@pytest.mark.parametrize(
    "device,n_cpus,current,suggested,expected",
    [
        (GPU, 16, 0, 3, 4),  # the smallest searched value >= 3
        (GPU, 16, 0, 4, 4),
        (GPU, 16, 0, 40, 16),  # never above the CPU count
        (GPU, 16, 4, 3, 8),  # already there: the search goes on upward
        (GPU, 16, 0, None, 1),  # no suggestion: 1, 2, 4, ...
        (GPU, 16, 0, 1, 1),
        (CPU, 16, 0, 3, 4),
        (CPU, 2, 0, 4, 1),  # a CPU run keeps a core for training: at most n_cpus - 1
        (CPU, 6, 0, 5, 4),  # 5 is no searched value and 6 is above the cap: the largest below it
    ],
)
def test_workers_search_starts_from_the_suggestion(device, n_cpus, current, suggested, expected):
    knob = knobs.KNOB_TABLE["num_workers"]
    got = knobs.propose_value(knob, current, device, n_cpus, exhausted=False, suggested=suggested)
    assert got == expected


def test_loop_tries_the_suggested_worker_count_first_then_goes_up(tmp_path):
    td101 = {**DATALOADER, "evidence": {"dataloader_ms": 51.571491, "step_time_ms": 72.980928}}

    def behave(c):
        return {0: [100.0], 4: [160.0], 8: [150.0]}[c["num_workers"]], [td101]

    runner = FakeRunner(behave, device=GPU)
    summary = FixLoop(runner, spec(), tmp_path / "out", LoopOptions(n_cpus=16, max_trials=3)).run()
    changes = [t["change"] for t in summary["trials"][1:]]
    assert changes == ["num_workers: 0 -> 4", "num_workers: 4 -> 8"]
    assert [t["status"] for t in summary["trials"][1:]] == ["kept", "reverted"]


# ---------------------------------------------------------------- 3. warm-up of compile's A/B runs

FIELDS_WITH_WARMUP = [*RESNET_FIELDS, FieldSpec("warmup_steps", "int", 5)]


def test_compile_ab_runs_warm_up_longer_on_both_sides(tmp_path):
    def behave(c):
        return ([200.0] if c["compile"] else [100.0]), [LAUNCH]

    runner = FakeRunner(behave, device=GPU)
    summary = FixLoop(runner, spec(FIELDS_WITH_WARMUP), tmp_path / "out", LoopOptions(n_cpus=8, max_trials=1)).run()
    trial = summary["trials"][1]
    assert trial["change"] == "compile: false -> true" and trial["status"] == "kept"
    ab = [cfg for name, cfg in runner.measured if name.startswith("ab-")]
    assert ab and {cfg["warmup_steps"] for cfg in ab} == {knobs.WARMUP_STEPS["compile"]}
    assert {cfg["compile"] for cfg in ab} == {False, True}  # the incumbent gets the same warm-up
    assert trial["config"]["warmup_steps"] == 5 and trial["ab"]["warmup_steps"] == 20
    assert summary["final"]["config"]["warmup_steps"] == 5  # the kept configuration is unchanged
    assert runner.configs[1]["warmup_steps"] == 5  # the profiled run too


def test_other_ab_runs_keep_their_warm_up(tmp_path):
    def behave(c):
        return ([130.0] if c["num_workers"] else [100.0]), [DATALOADER]

    runner = FakeRunner(behave, device=GPU)
    summary = FixLoop(runner, spec(FIELDS_WITH_WARMUP), tmp_path / "out", LoopOptions(n_cpus=8, max_trials=1)).run()
    assert {cfg["warmup_steps"] for name, cfg in runner.measured} == {5}
    assert "warmup_steps" not in summary["trials"][1]["ab"]


def test_after_compile_is_kept_later_trials_warm_up_too(tmp_path):
    def behave(c):
        fs = [LAUNCH] if not c["compile"] else [finding("zero-grad", ["set_to_none"], 5.0, "TD202")]
        return ([200.0 + 50 * c["set_to_none"]] if c["compile"] else [100.0]), fs

    runner = FakeRunner(behave, device=GPU)
    summary = FixLoop(runner, spec(FIELDS_WITH_WARMUP), tmp_path / "out", LoopOptions(n_cpus=8, max_trials=2)).run()
    assert [t["change"] for t in summary["trials"][1:]] == ["compile: false -> true", "set_to_none: false -> true"]
    second = [cfg for name, cfg in runner.measured if cfg["set_to_none"] or cfg["compile"]]
    assert {cfg["warmup_steps"] for cfg in second} == {20}


def test_warmup_for():
    assert knobs.warmup_for([{"compile": False}, {"compile": True}], 5) == 20
    assert knobs.warmup_for([{"compile": False}], 5) == 5
    assert knobs.warmup_for([{"compile": True}], 50) == 50


# ---------------------------------------------------------------- schema 5, and 4 still read


def test_schema_5_round_trips_and_schema_4_is_still_read(tmp_path):
    runner = NoisyBaselineRunner([73.0, 816.0, 821.0], [810.0, 815.0, 812.0, 818.0, 814.0], [50.0], [60.0])
    summary, loop = _loop(tmp_path, runner, max_trials=1)
    assert summary["schema_version"] == 5
    back = FixLoopSummary.from_dict(json.loads(json.dumps(summary)))
    assert back == loop.summary
    old = json.loads(json.dumps(summary))
    old["schema_version"] = 4
    for t in old["trials"]:
        t.pop("repeats_check", None)
    doc = FixLoopSummary.from_dict(old)
    assert doc.to_dict()["schema_version"] == 5 and rows(doc)[0][3] != "-"
    render_markdown(doc)
    with pytest.raises(DocumentError, match="schema_version"):
        FixLoopSummary.from_dict({**old, "schema_version": 3})


def test_progress_lines_show_both_sides_and_an_unusable_baseline(tmp_path):
    import io

    from rich.console import Console

    from tracedoc.fixloop.command import RichProgress

    bs = 32
    a = [1000.0 * bs / ms for ms in (593.4, 600.0, 580.0, 610.0, 590.0)]
    runner = NoisyBaselineRunner([73.0, 816.0, 821.0], [73.0, 816.0], a, [x * 1.75 for x in a])
    buf = io.StringIO()
    progress = RichProgress(Console(file=buf, width=400, color_system=None))
    loop = FixLoop(runner, spec(), tmp_path / "out", LoopOptions(n_cpus=8, max_trials=1, max_rounds=5), progress)
    loop.run()
    text = buf.getvalue()
    assert "-> baseline: its timed windows disagree, no figure shown" in text
    assert re.search(r"-> kept: [\d.]+ samples/s, 339\.1 ms/step \(A [\d.]+ samples/s, 593\.4 ms/step", text)
    assert "B/A 1.750, 1.75x baseline" in text


def test_a_failed_extra_baseline_window_ends_the_check(tmp_path):
    class Failing(NoisyBaselineRunner):
        def measure(self, config, run_dir: Path, on_tick=None) -> TrialOutcome:
            if run_dir.name == "repeat-02":
                run_dir.mkdir(parents=True, exist_ok=True)
                self.measured.append((run_dir.name, dict(config)))
                return TrialOutcome("crashed", error="fake crash", dir=str(run_dir))
            return super().measure(config, run_dir, on_tick)

    runner = Failing([73.0, 816.0, 821.0], [816.0], [100.0], [130.0])
    summary, _ = _loop(tmp_path, runner, max_trials=1)
    rc = summary["trials"][0]["repeats_check"]
    assert rc["verdict"] == "disagree" and rc["extra"]["samples_per_s"] == [816.0]
    assert rc["reason"].endswith("extra run 2: crashed: fake crash")
    assert [n for n, _ in runner.measured][:3] == ["repeat-01", "repeat-02", "ab-01-A"]
    assert summary["trials"][1]["status"] == "kept"


H100_RUN = Path(__file__).resolve().parents[1] / "fixtures" / "gpu_runs" / "h100_fixloop" / "summary.json"


@pytest.mark.skipif(not H100_RUN.exists(), reason="the H100 run of issue 22 is not in this checkout")
def test_h100_compile_trial_is_flagged_as_measured_cold():
    """Issue 22's H100 run: trial 2 (compile) measured 0.25x because its A/B windows still held
    the compilation; its own profiled run, timed later in the process, did not."""
    from types import SimpleNamespace

    from tracedoc.fixloop.loop import COLD_AB_FACTOR, TrialRecord, _cold_ab, warnings

    trials = json.loads(H100_RUN.read_text())["trials"]
    records = [TrialRecord(**t) for t in trials]
    assert _cold_ab(records[1], records[0]) is None  # num_workers: 1.12, a real loss
    q = _cold_ab(records[2], records[0])
    assert q == pytest.approx(0.329, abs=0.001) and q < COLD_AB_FACTOR
    loop = SimpleNamespace(records=records, disk_full=None, freed_logs=0)
    cold = [w for w in warnings(loop) if "may still be in the A/B timed windows" in w]
    assert len(cold) == 1 and cold[0].startswith("trial 2: its A/B runs measured the candidate at 0.33x")
    # and the suggestion the loop now starts the workers search from, on that run's TD101
    evidence = {"dataloader_ms": 51.571491, "step_time_ms": 72.980928}
    knob = knobs.KNOB_TABLE["num_workers"]
    dev = {"type": "cuda"}
    assert knobs.propose_value(knob, 0, dev, 16, False, suggested=knobs.suggested_value("num_workers", evidence)) == 4


H100_RUN_2 = Path(__file__).resolve().parents[1] / "fixtures" / "gpu_runs" / "h100_fixloop_2" / "summary.json"


def test_second_h100_run_keeps_the_workers_it_measured():
    """The second H100 run (fixtures/gpu_runs/h100_fixloop_2): the workers search started at the
    TD101 suggestion (0 -> 4) and kept it. The decision is recomputed here from the recorded A/B
    rounds by hand: the five paired ratios B/A, their median, and the sign-test interval of
    order statistics (1, 5), whose confidence is 1 - 2 * 0.5**5 = 0.9375."""
    from tracedoc.fixloop.noise import decide

    trial = json.loads(H100_RUN_2.read_text())["trials"][1]
    assert (trial["knob"], trial["old_value"], trial["new_value"]) == ("num_workers", 0, 4)
    a = trial["ab"]["incumbent"]["samples_per_s"]
    b = trial["ab"]["candidate"]["samples_per_s"]
    ratios = sorted(y / x for x, y in zip(a, b, strict=True))
    assert len(ratios) == 5
    # by hand: 1035.3/374.5, 1167.6/422.3, 1062.3/452.0, 986.3/366.8, 1120.5/416.1
    assert [round(r, 3) for r in ratios] == [2.351, 2.689, 2.693, 2.765, 2.765]
    d = decide(a, b)
    assert d.keep and d.verdict == "keep" and trial["status"] == "kept"
    assert d.ratio_median == pytest.approx(ratios[2])
    assert (d.ratio_low, d.ratio_high) == pytest.approx((ratios[0], ratios[4]))
    assert d.confidence == pytest.approx(1 - 2 * 0.5**5)
    assert trial["decision"]["ratio_median"] == pytest.approx(d.ratio_median)
