"""The command line: exit codes, the JSON report, selection, and bad input (exit 2, one line)."""

from __future__ import annotations

import json
import subprocess
import sys

import pytest
from test_load import BAD_INPUTS
from tracebuilder import TraceBuilder, budget_rule_toml, dataloader_bound


def run(*args, cwd=None):
    return subprocess.run(
        [sys.executable, "-m", "tracedoc", *map(str, args)], capture_output=True, text=True, cwd=cwd, timeout=120
    )


@pytest.fixture
def dl_trace(tmp_path):
    return dataloader_bound().write(tmp_path / "dl.json")


def test_json_report_fields_and_exit_1(dl_trace):
    r = run("analyze", dl_trace, "--format", "json")
    assert r.returncode == 1, r.stderr
    d = json.loads(r.stdout)
    assert d["schema_version"] == 1
    assert {"trace", "signals", "findings", "skipped", "units", "steps"} <= set(d)
    f = d["findings"][0]
    assert {"code", "name", "severity", "message", "estimated_saving_ms", "evidence", "fix"} <= set(f)
    assert f["name"] == "dataloader-stall" and f["fix"]["safety"] == "safe"
    assert d["signals"]["dataloader_share"] == pytest.approx(0.4)
    assert d["trace"]["n_steps"] == 3
    assert {"code", "name", "reason"} <= set(d["skipped"][0])
    assert r.stderr == ""


def test_fail_on_levels_and_exit_zero(dl_trace):
    # the trace's findings: dataloader-stall (error) and launch-bound? no; check by level
    d = json.loads(run("analyze", dl_trace, "-f", "json", "--exit-zero").stdout)
    severities = {f["severity"] for f in d["findings"]}
    assert "error" in severities
    assert run("analyze", dl_trace, "-f", "json", "--fail-on", "error").returncode == 1
    assert run("analyze", dl_trace, "-f", "json", "--exit-zero").returncode == 0
    only_info = run("analyze", dl_trace, "-f", "json", "--ignore", "TD101", "--fail-on", "error")
    assert only_info.returncode == 0, json.loads(only_info.stdout)["findings"]


def test_select_ignore(dl_trace):
    d = json.loads(run("analyze", dl_trace, "-f", "json", "--select", "dataloader-stall").stdout)
    assert [f["code"] for f in d["findings"]] == ["TD101"] and d["rules_evaluated"] == ["TD101"]
    d = json.loads(run("analyze", dl_trace, "-f", "json", "--ignore", "TD1", "--exit-zero").stdout)
    assert all(not c.startswith("TD1") for c in d["rules_evaluated"])
    r = run("analyze", dl_trace, "--select", "TD999")
    assert r.returncode == 2 and "no rule matches" in r.stderr


def test_clean_trace_exits_0(tmp_path):
    b = TraceBuilder()
    for i in range(3):  # GPU-bound: one long kernel per step, launched ahead
        t0 = i * 1000.0
        b.step(i + 1, t0, 1000)
        b.op("aten::add", t0, 10)
        b.kernel("vectorized_elementwise_kernel", t0 + 2, t0 + 5, 990)
    r = run("analyze", b.write(tmp_path / "clean.json"))
    assert r.returncode == 0, r.stdout
    assert "No findings" in r.stdout


def test_text_report_shows_breakdown_finding_and_fix(dl_trace):
    r = run("analyze", dl_trace)
    assert r.returncode == 1
    for text in ("step-time breakdown", "DataLoader 40.0%", "TD101 dataloader-stall", "fix [safe]", "num_workers"):
        assert text in r.stdout


def test_markdown_report(dl_trace):
    r = run("analyze", dl_trace, "-f", "markdown", "--exit-zero")
    assert r.stdout.startswith("# tracedoc report") and "TD101" in r.stdout


def test_kernel_names_are_escaped_for_rich(tmp_path):
    b = TraceBuilder()
    b.step(1, 0, 1000)
    b.op("aten::mm", 0, 20)
    b.kernel("[bold red]volta_sgemm[/]_128x64_nn", 5, 20, 900)
    r = run("analyze", b.write(tmp_path / "t.json"), "--select", "TD301")
    assert r.returncode == 1, r.stderr
    assert "[bold red]volta_sgemm[/]_128x64_nn" in r.stdout


@pytest.mark.parametrize("case", sorted(BAD_INPUTS))
def test_bad_input_exit_2_one_line(tmp_path, case):
    make, expected = BAD_INPUTS[case]
    p = tmp_path / f"{case}.json"
    p.write_bytes(make())
    r = run("analyze", p, "--format", "json")
    assert r.returncode == 2
    assert r.stdout == ""
    lines = r.stderr.strip().splitlines()
    assert len(lines) == 1, r.stderr
    assert lines[0].startswith(f"tracedoc: error: {p}: ") and expected in lines[0]
    assert "Traceback" not in r.stderr


def test_missing_file_exit_2(tmp_path):
    r = run("analyze", tmp_path / "missing.json.gz")
    assert r.returncode == 2 and len(r.stderr.strip().splitlines()) == 1 and "no such file" in r.stderr


def test_rules_and_rule_commands():
    r = run("rules")
    assert r.returncode == 0
    for name in (
        "dataloader-stall",
        "pageable-h2d-copy",
        "h2d-copy-share",
        "launch-bound-gpu-idle",
        "no-tensor-core-use",
        "low-gpu-memory-use",
    ):
        assert name in r.stdout
    rules = json.loads(run("rules", "--format", "json").stdout)
    assert len(rules) == 10  # TD101-TD401 and the CPU rules TD501-TD503
    for key in ("TD301", "no-tensor-core-use"):
        r = run("rule", key)
        assert r.returncode == 0
        for section in ("What it detects", "Why it matters", "Example", "Fix", "Fix safety", "unsafe"):
            assert section in r.stdout
    r = run("rule", "nope")
    assert r.returncode == 2 and "no rule" in r.stderr


def test_version_and_signals():
    assert run("--version").stdout.startswith("tracedoc ")
    r = run("signals")
    assert r.returncode == 0 and "gpu_busy_share" in r.stdout


def test_user_rule_as_ci_budget(dl_trace, tmp_path):
    rules = tmp_path / "ci_rules"
    rules.mkdir()
    (rules / "budget.toml").write_text(budget_rule_toml(0.5))
    r = run("analyze", dl_trace, "-f", "json", "--rules", rules, "--select", "CI1", "--fail-on", "error")
    assert r.returncode == 1, r.stderr
    f = json.loads(r.stdout)["findings"]
    assert [x["code"] for x in f] == ["CI1"] and f[0]["message"] == "step time 1.0 ms exceeds the 0.5 ms budget"
    (rules / "budget.toml").write_text(budget_rule_toml(5))
    assert run("analyze", dl_trace, "-f", "json", "--rules", rules, "--select", "CI1").returncode == 0
    (rules / "broken.toml").write_text('code = "CI2"\nname = "broken"\n')
    r = run("analyze", dl_trace, "--rules", rules)
    assert r.returncode == 2 and "broken.toml" in r.stderr and len(r.stderr.strip().splitlines()) == 1


def test_cli_start_does_not_import_pandas():
    # the fast loader forks its decode workers before pandas is imported (the import then
    # overlaps their work): keep `import tracedoc` and the CLI module free of pandas
    code = "import sys, tracedoc, tracedoc.cli; print('pandas' in sys.modules)"
    r = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=60)
    assert r.stdout.strip() == "False", r.stderr
