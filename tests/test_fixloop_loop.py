"""Fix-loop decisions with a fake runner: no torch, no subprocess, fast."""

from __future__ import annotations

import itertools
import json
from pathlib import Path
from typing import Any, Callable

import pytest

from tracedoc.fixloop.loop import FixLoop, LoopOptions
from tracedoc.fixloop.runner import TrialOutcome
from tracedoc.fixloop.workload import FieldSpec, WorkloadError, WorkloadSpec
from tracedoc.report.model import Finding, Report

RESNET_FIELDS = [
    FieldSpec("batch_size", "int", 32),
    FieldSpec("num_workers", "int", 0),
    FieldSpec("pin_memory", "bool", False),
    FieldSpec("non_blocking", "bool", False),
    FieldSpec("input_dtype", "str", "float32", ("float32", "uint8")),
    FieldSpec("set_to_none", "bool", False),
    FieldSpec("amp", "str", "off", ("off", "bf16", "fp16")),
    FieldSpec("compile", "bool", False),
    FieldSpec("channels_last", "bool", False),
    FieldSpec("device", "str", "auto"),
    FieldSpec("timed_steps", "int", 20),
]


def spec(fields=RESNET_FIELDS, knobs=None) -> WorkloadSpec:
    return WorkloadSpec(path="fake.py", fields={f.name: f for f in fields}, knobs=knobs or {})


def finding(
    name: str, knobs: list[str], saving: float | None = 10.0, code: str = "TD100", safety: str = "safe"
) -> dict:
    return {
        "code": code,
        "name": name,
        "severity": "warning",
        "message": name,
        "estimated_saving_ms": saving,
        "evidence": {},
        "fix": {"summary": "", "safety": safety, "knobs": knobs},
    }


def report_of(findings: list[dict], signals: dict | None = None) -> Report:
    """The Report a trial's analysis gives: these findings (in the JSON form) and signals."""
    return Report(
        trace={},
        signals=dict(signals or {}),
        signals_unavailable={},
        units={},
        steps=[],
        findings=[Finding.from_dict({"saving_basis": "", **f}) for f in findings],
        skipped=[],
    )


DATALOADER = finding("dataloader-stall", ["num_workers"], 40.0, "TD101")
PAGEABLE = finding("pageable-h2d-copy", ["pin_memory", "non_blocking"], 8.0, "TD102")
TENSOR_CORES = finding("no-tensor-core-use", ["amp"], 30.0, "TD105", "unsafe")
LOW_MEMORY = finding("low-gpu-memory-use", ["batch_size"], 20.0, "TD106", "unsafe")
LAUNCH = finding("launch-bound-gpu-idle", ["compile", "batch_size"], 25.0, "TD104")

CPU = {"type": "cpu", "name": "fake cpu", "bf16_supported": False}
GPU = {"type": "cuda", "name": "fake gpu", "bf16_supported": True}


class FakeRunner:
    """Calls ``behave(config) -> (samples_per_s repeats | status str, findings)`` for each trial.

    ``run`` (the profiled run) returns all the repeats; ``measure`` (one A/B sample) returns
    the next repeat of that configuration, cycling, so a list of 5 values gives the 5 rounds.
    """

    def __init__(self, behave: Callable[[dict], tuple[Any, list[dict]]], device=CPU, interrupt_at: int | None = None):
        self.behave = behave
        self.device = device
        self.configs: list[dict] = []
        self.measured: list[tuple[str, dict]] = []
        self.counts: dict[str, int] = {}
        self.interrupt_at = interrupt_at

    def measure(self, config, run_dir: Path, on_tick=None) -> TrialOutcome:
        run_dir.mkdir(parents=True, exist_ok=True)
        self.measured.append((run_dir.name, dict(config)))
        result, _ = self.behave(config)
        if isinstance(result, str):
            return TrialOutcome(result, error=f"fake {result}", dir=str(run_dir))
        key = json.dumps(config, sort_keys=True)
        i = self.counts.get(key, 0)
        self.counts[key] = i + 1
        value = result[i % len(result)]
        bs = config["batch_size"]
        return TrialOutcome(
            "ok", samples_per_s=[value], step_time_ms=[1000.0 * bs / value], batch_size=bs, device=self.device
        )

    def describe(self) -> WorkloadSpec:
        return spec()

    def run(self, config, trial_dir: Path, on_tick=None) -> TrialOutcome:
        trial_dir.mkdir(parents=True, exist_ok=True)
        self.configs.append(dict(config))
        if self.interrupt_at is not None and len(self.configs) - 1 == self.interrupt_at:
            raise KeyboardInterrupt
        if on_tick:
            on_tick(0.1)
        result, findings = self.behave(config)
        if isinstance(result, str):
            return TrialOutcome(result, error=f"fake {result}", dir=str(trial_dir))
        bs = config["batch_size"]
        return TrialOutcome(
            "ok",
            samples_per_s=list(result),
            step_time_ms=[1000.0 * bs / s for s in result],
            batch_size=bs,
            device=self.device,
            # the trial's own analysis: its findings and the step time its trace shows
            analysis=report_of(findings, {"step_time_ms": 1000.0 * bs / sorted(result)[len(result) // 2]}),
            dir=str(trial_dir),
        )


def run_loop(tmp_path, behave, hw=CPU, fields=RESNET_FIELDS, knobs=None, **opts) -> tuple[dict, FakeRunner]:
    """Run the loop on a fake runner; ``hw`` is the device the fake trials report."""
    runner = FakeRunner(behave, device=hw, interrupt_at=opts.pop("interrupt_at", None))
    runner.spec_fields = fields
    options = LoopOptions(n_cpus=opts.pop("n_cpus", 8), **opts)
    loop = FixLoop(runner, spec(fields, knobs), tmp_path / "out", options)
    return loop.run(), runner


def statuses(summary) -> list[str]:
    return [t["status"] for t in summary["trials"]]


def written(tmp_path) -> dict:
    return json.loads((tmp_path / "out" / "summary.json").read_text())


# ------------------------------------------------------------------ keep / revert / noise
def test_keep_when_gain_exceeds_noise(tmp_path):
    def behave(c):
        if c["num_workers"] == 0:
            return [100, 101, 99], [DATALOADER]
        return [150, 151, 149], []  # the stall is gone

    summary, runner = run_loop(tmp_path, behave)
    assert statuses(summary) == ["baseline", "kept"]
    assert summary["final"]["config"]["num_workers"] == 1
    assert summary["final"]["samples_per_s"] == 150
    assert summary["trials"][1]["change"] == "num_workers: 0 -> 1"
    assert summary["trials"][1]["predicted_saving_ms"] == 40.0
    # 320 ms/step -> 213.3 ms/step at batch 32
    assert summary["trials"][1]["measured_saving_ms"] == pytest.approx(320 - 1000 * 32 / 150)
    assert summary["trials"][1]["speedup"] == pytest.approx(1.5)
    # tracedoc diff's figures between the two trials' analyses (the same code as `tracedoc diff`)
    td = summary["trials"][1]["trace_diff"]
    assert td["name"] == "dataloader-stall" and td["status"] == "resolved"
    assert td["predicted_saving_ms"] == 40.0
    assert td["measured_saving_ms"] == pytest.approx(1000 * 32 / 100 - 1000 * 32 / 150, abs=0.01)
    assert summary["trials"][0]["trace_diff"] is None  # the baseline has nothing to compare with
    assert summary["stop_reason"] == "no applicable finding left"
    assert json.loads((tmp_path / "out" / "final_config.json").read_text())["num_workers"] == 1


def test_profiled_step_off_the_timed_step_is_warned(tmp_path):
    """A trace whose steps are much longer than the timed ones (profiler overhead on many tiny
    ops: 50.1 ms profiled against 31.7 ms timed on workloads/dispatch_bound.py) is flagged,
    with both figures; a trace within 1.3x is not."""

    def behave(c):
        return ([100, 101, 99] if c["num_workers"] == 0 else [150, 151, 149]), [DATALOADER]

    class Inflated(FakeRunner):
        def run(self, config, trial_dir, on_tick=None):
            out = super().run(config, trial_dir, on_tick)
            if config["num_workers"] == 1:  # the candidate's trace: 1.6x its timed step
                out.analysis.signals["step_time_ms"] *= 1.6
            return out

    runner = Inflated(behave)
    summary = FixLoop(runner, spec(), tmp_path / "out", LoopOptions(n_cpus=8)).run()
    base, trial = summary["trials"][0], summary["trials"][1]
    assert base["profiled_step_ms"] == pytest.approx(base["step_time_ms"])  # the fake's trace agrees
    assert trial["profiled_step_ms"] == pytest.approx(1.6 * 1000 * 32 / 150)
    warned = [w for w in summary["warnings"] if "profiled steps" in w]
    assert len(warned) == 1 and warned[0].startswith("trial 1:") and "1.60x the timed step (213.3 ms)" in warned[0]
    # the incumbent's trace agrees with its timed step: the prediction needs no rescaling
    assert trial["predicted_saving_timed_ms"] == pytest.approx(40.0)


def test_prediction_is_rescaled_to_the_timed_step(tmp_path):
    """The baseline's trace shows a step twice its timed one: TD101's 40 ms (read off that
    trace) is 20 ms in the time base of the A/B rounds."""

    def behave(c):
        return ([100, 101, 99] if c["num_workers"] == 0 else [150, 151, 149]), [DATALOADER]

    class Inflated(FakeRunner):
        def run(self, config, trial_dir, on_tick=None):
            out = super().run(config, trial_dir, on_tick)
            if config["num_workers"] == 0:
                out.analysis.signals["step_time_ms"] *= 2.0
            return out

    summary = FixLoop(Inflated(behave), spec(), tmp_path / "out", LoopOptions(n_cpus=8)).run()
    trial = summary["trials"][1]
    assert trial["predicted_saving_ms"] == 40.0
    # 40 ms * (A's median timed step 320 ms) / (the baseline's profiled step 640 ms)
    assert trial["predicted_saving_timed_ms"] == pytest.approx(20.0)
    assert any(w.startswith("trial 0:") and "2.00x the timed step" in w for w in summary["warnings"])


def test_revert_when_slower(tmp_path):
    def behave(c):
        return ([100, 100, 100] if c["num_workers"] == 0 else [90, 91, 89]), [DATALOADER]

    summary, runner = run_loop(tmp_path, behave)
    assert statuses(summary) == ["baseline", "reverted"]
    assert summary["final"]["config"]["num_workers"] == 0
    assert summary["trials"][1]["measured_saving_ms"] < 0
    # the workers search stops once a step does not help
    assert [c["num_workers"] for c in runner.configs] == [0, 1]


def test_gain_inside_noise_is_remeasured_then_inconclusive(tmp_path):
    # +5 % median gain, but the paired ratios straddle the 2 % floor: more rounds, then inconclusive
    def behave(c):
        return ([100, 110, 90, 100, 105] if c["num_workers"] == 0 else [95, 120, 100, 104, 100]), [DATALOADER]

    summary, runner = run_loop(tmp_path, behave, max_rounds=7)
    assert statuses(summary) == ["baseline", "inconclusive"]
    trial = summary["trials"][1]
    assert trial["decision"]["verdict"] == "inconclusive" and not trial["decision"]["keep"]
    assert trial["decision"]["rounds"] == 7 == trial["ab"]["rounds"]  # re-measured up to the bound
    assert len(runner.measured) == 14
    assert summary["final"]["config"]["num_workers"] == 0
    assert any("inconclusive" in w for w in summary["warnings"])
    assert any("too noisy" in w for w in summary["warnings"])  # CV of the sides above 10 %


def test_ab_rounds_alternate_and_pair(tmp_path):
    def behave(c):
        return ([100] if c["num_workers"] == 0 else [130]), [DATALOADER]

    summary, runner = run_loop(tmp_path, behave, max_trials=1)
    order = [name for name, _ in runner.measured]
    assert order[:4] == ["ab-01-A", "ab-01-B", "ab-02-B", "ab-02-A"]
    assert len(order) == 10  # 5 rounds of A and B
    assert {name[-1]: cfg["num_workers"] for name, cfg in runner.measured} == {"A": 0, "B": 1}
    ab = summary["trials"][1]["ab"]
    assert ab["incumbent"]["samples_per_s"] == [100] * 5 and ab["candidate"]["samples_per_s"] == [130] * 5
    assert ab["incumbent"]["cv"] == 0 and summary["trials"][1]["decision"]["ratio_median"] == pytest.approx(1.3)


def test_workers_come_with_the_threads_they_leave_on_the_cpu(tmp_path):
    # workers alone would fight the intra-op threads for the 2 CPUs: one trial sets both
    fields = RESNET_FIELDS + [FieldSpec("num_threads", "int", 0)]

    def behave(c):
        if c["num_workers"] == 0:
            return [100], [DATALOADER]
        return ([137], []) if c["num_threads"] == 1 else ([95], [DATALOADER])

    summary, runner = run_loop(tmp_path, behave, fields=fields, n_cpus=2)
    assert statuses(summary) == ["baseline", "kept"]
    t = summary["trials"][1]
    assert t["change"] == "num_workers: 0 -> 1 + num_threads: 0 -> 1"
    assert t["extra_changes"] == {"num_threads": [0, 1]} and t["followup_finding"] is None
    assert summary["final"]["config"]["num_workers"] == 1 and summary["final"]["config"]["num_threads"] == 1
    assert summary["final"]["speedup"] == pytest.approx(1.37)
    # with CPUs to spare the threads stay (1 worker + 8 default threads > 8: 7 threads)
    summary, _ = run_loop(tmp_path / "eight", behave, fields=fields, n_cpus=8)
    assert summary["trials"][1]["change"] == "num_workers: 0 -> 1 + num_threads: 0 -> 7"


def test_followup_with_the_fix_the_candidate_trace_shows(tmp_path):
    # workers (with their threads) do not help until the fix only the candidate's trace shows
    zero = finding("zero-grad-kernels", ["set_to_none"], 20.0, "TD202")
    fields = RESNET_FIELDS + [FieldSpec("num_threads", "int", 0)]

    def behave(c):
        if c["num_workers"] == 0:
            return [100], [DATALOADER]
        if not c["set_to_none"]:
            return [95], [DATALOADER, zero]
        return [137], []

    summary, runner = run_loop(tmp_path, behave, fields=fields, n_cpus=2)
    assert statuses(summary) == ["baseline", "reverted", "kept"]
    t = summary["trials"][2]
    assert t["change"] == "num_workers: 0 -> 1 + num_threads: 0 -> 1 + set_to_none: false -> true"
    assert t["extra_changes"] == {"num_threads": [0, 1], "set_to_none": [False, True]}
    assert t["followup_finding"]["code"] == "TD202"
    assert summary["final"]["config"]["set_to_none"] is True and summary["final"]["config"]["num_threads"] == 1
    assert summary["final"]["speedup"] == pytest.approx(1.37)


def test_gain_below_min_gain_floor_is_reverted(tmp_path):
    # identical repeats (spread 0), +1 %: below the 2 % floor
    def behave(c):
        return ([100, 100, 100] if c["num_workers"] == 0 else [101, 101, 101]), [DATALOADER]

    summary, _ = run_loop(tmp_path, behave)
    assert statuses(summary) == ["baseline", "reverted"]


# ------------------------------------------------------------------ failures
@pytest.mark.parametrize("failure", ["crashed", "oom", "timeout"])
def test_failed_trial_is_reverted_and_loop_goes_on(tmp_path, failure):
    def behave(c):
        if c["num_workers"] == 1:
            return failure, []
        if c["set_to_none"]:
            return [120, 120, 120], []
        return [100, 100, 100], [DATALOADER, finding("zero-grad", ["set_to_none"], 5.0, "TD107")]

    summary, runner = run_loop(tmp_path, behave)
    assert statuses(summary) == ["baseline", failure, "kept"]
    assert summary["trials"][1]["error"] == f"fake {failure}"
    assert summary["trials"][1]["samples_per_s"] is None
    # the failed change is not in the next configuration
    assert runner.configs[2]["num_workers"] == 0 and runner.configs[2]["set_to_none"] is True
    assert summary["final"]["config"] == runner.configs[2]


def test_failed_baseline_stops(tmp_path):
    summary, _ = run_loop(tmp_path, lambda c: ("crashed", []))
    assert statuses(summary) == ["crashed"]
    assert summary["final"] is None
    assert summary["stop_reason"].startswith("baseline crashed")
    assert written(tmp_path)["trials"][0]["status"] == "crashed"
    assert not (tmp_path / "out" / "final_config.json").exists()


def test_ctrl_c_mid_loop_still_writes_summary(tmp_path):
    def behave(c):
        if c["num_workers"] == 0:
            return [100, 100, 100], [DATALOADER]
        return [150, 150, 150], [DATALOADER]

    summary, runner = run_loop(tmp_path, behave, interrupt_at=2)
    assert summary["interrupted"] is True
    assert statuses(summary) == ["baseline", "kept", "interrupted"]
    assert summary["stop_reason"] == "interrupted (Ctrl-C)"
    on_disk = written(tmp_path)
    assert on_disk["interrupted"] is True
    assert on_disk["final"]["config"]["num_workers"] == 1  # the best so far is not lost
    assert (tmp_path / "out" / "summary.md").exists()


def test_summary_written_after_every_trial(tmp_path):
    seen = []

    def behave(c):
        p = tmp_path / "out" / "summary.json"
        seen.append(len(json.loads(p.read_text())["trials"]) if p.exists() else 0)
        return [100 + 20 * c["num_workers"]] * 3, [DATALOADER]

    run_loop(tmp_path, behave, n_cpus=4)
    assert [k for k, _ in itertools.groupby(seen)] == [0, 1, 2, 3]  # (behave also runs for each A/B round)


# ------------------------------------------------------------------ choosing
def test_unsafe_knob_needs_unsafe_fixes(tmp_path):
    def behave(c):
        return [100, 100, 100], [TENSOR_CORES, LOW_MEMORY]

    summary, runner = run_loop(tmp_path, behave, hw=GPU)
    assert statuses(summary) == ["baseline"]
    reasons = {s["knob"]: s["reason"] for s in summary["skipped"]}
    assert "needs --unsafe-fixes" in reasons["amp"] and "needs --unsafe-fixes" in reasons["batch_size"]

    def behave2(c):
        return [100 * (1 + (c["amp"] != "off")), 100, 100], [TENSOR_CORES]

    summary, runner = run_loop(tmp_path, behave2, hw=GPU, unsafe_fixes=True)
    assert runner.configs[1]["amp"] == "bf16"  # bf16 where the GPU supports it


def test_amp_falls_back_to_fp16_without_bf16(tmp_path):
    old_gpu = dict(GPU, bf16_supported=False)
    summary, runner = run_loop(tmp_path, lambda c: ([100] * 3, [TENSOR_CORES]), hw=old_gpu, unsafe_fixes=True)
    assert runner.configs[1]["amp"] == "fp16"


def test_cpu_not_applicable_knobs_are_reported_not_tried(tmp_path):
    def behave(c):
        return [100, 100, 100], [finding("h2d-copy-share", ["input_dtype"], 50.0, "TD103"), PAGEABLE, TENSOR_CORES]

    summary, runner = run_loop(tmp_path, behave, hw=CPU, unsafe_fixes=True)
    assert statuses(summary) == ["baseline"]
    assert len(runner.configs) == 1
    na = {n["knob"] for n in summary["not_applicable"]}
    assert {"pin_memory", "non_blocking", "input_dtype", "amp"} <= na
    assert "num_workers" not in na and "compile" not in na
    reasons = {s["knob"]: s["reason"] for s in summary["skipped"]}
    for knob in ("pin_memory", "non_blocking", "input_dtype", "amp"):
        assert reasons[knob].startswith("not applicable on cpu")


def test_top_finding_first_then_next_knob(tmp_path):
    # pageable copy ranks above the stall here; pin_memory first, then non_blocking
    def behave(c):
        return [100 + 10 * c["pin_memory"] + 10 * c["non_blocking"]] * 3, [
            finding("pageable-h2d-copy", ["pin_memory", "non_blocking"], 50.0),
            DATALOADER,
        ]

    summary, runner = run_loop(tmp_path, behave, hw=GPU, max_trials=2)
    assert [t["change"] for t in summary["trials"]] == [
        "baseline",
        "pin_memory: false -> true",
        "non_blocking: false -> true",
    ]
    assert statuses(summary) == ["baseline", "kept", "kept"]
    assert summary["stop_reason"] == "trial budget spent (2 trials)"


def test_unknown_rule_and_missing_knob_are_skipped_with_a_note(tmp_path):
    fields = [f for f in RESNET_FIELDS if f.name != "num_workers"]

    def behave(c):
        return [100] * 3, [
            finding("made-up-rule", ["flux_capacitor"], 99.0, "TD999"),
            DATALOADER,
            finding("no-fix", [], 70.0, "TD998"),
        ]

    summary, _ = run_loop(tmp_path, behave, fields=fields)
    assert statuses(summary) == ["baseline"]
    knobs = {s["knob"]: s["reason"] for s in summary["skipped"]}
    assert knobs["flux_capacitor"] == "the workload's Config has no such knob"
    assert knobs["num_workers"] == "the workload's Config has no such knob"


def test_any_config_knob_can_drive_the_loop(tmp_path):
    # a knob outside the built-in table: a bool field is set to True; safety from the rule
    fields = RESNET_FIELDS + [FieldSpec("fused_optimizer", "bool", False), FieldSpec("accum", "str", "a", ("a", "b"))]

    def behave(c):
        return [100 + 50 * c["fused_optimizer"]] * 3, [
            finding("slow-optimizer", ["fused_optimizer"], 30.0, "TD200"),
            finding("str-knob", ["accum"], 10.0, "TD201"),
        ]

    summary, runner = run_loop(tmp_path, behave, fields=fields)
    assert statuses(summary) == ["baseline", "kept"]
    assert summary["final"]["config"]["fused_optimizer"] is True
    assert any(s["knob"] == "accum" and "KNOBS" in s["reason"] for s in summary["skipped"])

    # declared values in the workload's KNOBS make a str knob searchable
    summary, runner = run_loop(
        tmp_path, behave, fields=fields, knobs={"accum": {"safety": "safe", "values": ["a", "b"]}}
    )
    assert runner.configs[-1]["accum"] == "b"


def test_unsafe_rule_safety_applies_to_unknown_knob(tmp_path):
    fields = RESNET_FIELDS + [FieldSpec("tf32", "bool", False)]
    summary, runner = run_loop(
        tmp_path, lambda c: ([100] * 3, [finding("x", ["tf32"], 5.0, "TD300", "unsafe")]), fields=fields
    )
    assert len(runner.configs) == 1


# ------------------------------------------------------------------ searched values
def test_workers_searched_up_to_cpu_count_while_helping(tmp_path):
    def behave(c):
        w = c["num_workers"]
        return [100 * (1 + w)] * 3, [DATALOADER]  # keeps helping

    summary, runner = run_loop(tmp_path, behave, n_cpus=6, max_trials=10)
    assert [c["num_workers"] for c in runner.configs] == [0, 1, 2, 4, 6]
    assert summary["stop_reason"] == "no applicable finding left"
    assert any("nothing left to try from 6" in s["reason"] for s in summary["skipped"])


def test_workers_search_stops_when_it_stops_helping(tmp_path):
    speeds = {0: 100, 1: 150, 2: 200, 4: 199}

    def behave(c):
        return [speeds[c["num_workers"]]] * 3, [DATALOADER]

    summary, runner = run_loop(tmp_path, behave, n_cpus=16)
    assert [c["num_workers"] for c in runner.configs] == [0, 1, 2, 4]
    assert statuses(summary) == ["baseline", "kept", "kept", "reverted"]
    assert summary["final"]["config"]["num_workers"] == 2


def test_batch_size_doubled_until_oom(tmp_path):
    def behave(c):
        bs = c["batch_size"]
        if bs > 128:
            return "oom", []
        return [10.0 * bs] * 3, [LOW_MEMORY]

    summary, runner = run_loop(tmp_path, behave, hw=GPU, unsafe_fixes=True, max_trials=10)
    assert [c["batch_size"] for c in runner.configs] == [32, 64, 128, 256]
    assert statuses(summary) == ["baseline", "kept", "kept", "oom"]
    assert summary["final"]["config"]["batch_size"] == 128
    # per-sample comparison: 100 ms/step at 32 (320 samples/s); at 64, 640 samples/s is
    # 100 ms/step, i.e. 50 ms per 32 samples: 50 ms saved
    assert summary["trials"][1]["measured_saving_ms"] == pytest.approx(50.0)


def test_trial_budget(tmp_path):
    summary, runner = run_loop(
        tmp_path, lambda c: ([100 * (1 + c["num_workers"])] * 3, [DATALOADER]), n_cpus=64, max_trials=3
    )
    assert len(runner.configs) == 4  # baseline + 3
    assert summary["stop_reason"] == "trial budget spent (3 trials)"


def test_max_trials_zero_runs_only_the_baseline(tmp_path):
    summary, runner = run_loop(tmp_path, lambda c: ([100] * 3, [DATALOADER]), max_trials=0)
    assert statuses(summary) == ["baseline"]


def test_findings_ranked_by_saving_none_last(tmp_path):
    def behave(c):
        return [100 + 20 * c["set_to_none"] + 20 * c["compile"]] * 3, [
            finding("a", ["set_to_none"], None, "TD1"),
            finding("b", ["compile"], 3.0, "TD2"),
        ]

    summary, runner = run_loop(tmp_path, behave, max_trials=1)
    assert runner.configs[1]["compile"] is True


def test_set_and_device_options(tmp_path):
    summary, runner = run_loop(
        tmp_path, lambda c: ([100] * 3, []), sets=["batch_size=8", "pin_memory=yes"], device="cpu"
    )
    assert runner.configs[0]["batch_size"] == 8 and runner.configs[0]["pin_memory"] is True
    assert runner.configs[0]["device"] == "cpu"
    with pytest.raises(WorkloadError, match="bad --set"):
        run_loop(tmp_path, lambda c: ([100] * 3, []), sets=["batch_size=big"])
    with pytest.raises(WorkloadError, match="no 'nope'"):
        run_loop(tmp_path, lambda c: ([100] * 3, []), sets=["nope=1"])


def test_markdown_summary_has_the_table(tmp_path):
    run_loop(tmp_path, lambda c: ([100 + 50 * c["num_workers"]] * 3, [DATALOADER]), n_cpus=2)
    md = (tmp_path / "out" / "summary.md").read_text()
    assert "| # | change | step ms | samples/s | CV | B/A | speedup | status | predicted ms | measured ms |" in md
    assert "| 1 | num_workers: 0 -> 1 |" in md
    assert "## Keep rule" in md


def test_amp_on_a_cpu_with_bf16_units_only(tmp_path):
    cpu_bf16 = dict(CPU, bf16_supported=True)
    td503 = finding("cpu-fp32-matmul-bf16-capable", ["amp"], 15.0, "TD503", "unsafe")
    summary, runner = run_loop(tmp_path, lambda c: ([100] * 3, [td503]), hw=cpu_bf16, unsafe_fixes=True)
    assert runner.configs[1]["amp"] == "bf16"
    assert "amp" not in {n["knob"] for n in summary["not_applicable"]}
    summary, runner = run_loop(tmp_path, lambda c: ([100] * 3, [td503]), hw=CPU, unsafe_fixes=True)
    assert len(runner.configs) == 1 and "amp" in {n["knob"] for n in summary["not_applicable"]}


def test_interrupted_ab_round_keeps_its_elapsed_time_and_strict_json(tmp_path):
    class SlowInterrupt(FakeRunner):
        def measure(self, config, run_dir, on_tick=None):
            if len(self.measured) == 3:
                import time

                time.sleep(0.3)
                raise KeyboardInterrupt
            return super().measure(config, run_dir, on_tick)

    def behave(c):
        return [100.0] if c["num_workers"] == 0 else [120.0], [DATALOADER | {"estimated_saving_ms": float("nan")}]

    runner = SlowInterrupt(behave)
    loop = FixLoop(runner, spec(), tmp_path / "out", LoopOptions(n_cpus=2))
    summary = loop.run()
    assert statuses(summary) == ["baseline", "interrupted"]
    assert summary["trials"][1]["elapsed_s"] >= 0.3  # not 0.0
    text = (tmp_path / "out" / "summary.json").read_text()
    assert "NaN" not in text and json.loads(text)["trials"][1]["predicted_saving_ms"] is None


def test_one_trial_budget_is_said_in_the_singular(tmp_path):
    def behave(c):
        return [100 + 10 * c["pin_memory"]] * 3, [finding("pageable-h2d-copy", ["pin_memory"], 50.0)]

    summary, _ = run_loop(tmp_path, behave, hw=GPU, max_trials=1)
    assert summary["stop_reason"] == "trial budget spent (1 trial)"
