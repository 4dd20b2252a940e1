"""The command line: exit codes, the JSON report, selection, and bad input (exit 2, one line)."""

from __future__ import annotations

import json
import subprocess
import sys

import pytest
from test_load import BAD_INPUTS
from tracebuilder import TraceBuilder, budget_rule_toml, dataloader_bound

import tracedoc
from tracedoc.engine.rules import builtin_rules


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
    assert d["schema_version"] == 2
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
    b.runtime("cudaDeviceSynchronize", 30, 895)  # the step waits for the GEMM: AMP would shorten it
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
    assert [r["code"] for r in rules] == [r.code for r in builtin_rules()]
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


# --- issue 11: options, usage errors, formats, [tool.tracedoc] ---------------------------

WORKERS0 = "fixtures/v100_resnet50_workers0.pt.trace.json.gz"


@pytest.mark.parametrize(
    "args, expected",
    [
        (["--format", "foo"], "'foo' is not one of 'text', 'json', 'markdown', 'github', 'sarif', 'html'"),
        (["--jobs", "0"], "--jobs"),
        (["--top", "0"], "--top"),
        (["--color", "blue"], "'blue' is not one of 'auto', 'always', 'never'"),
        (["--no-such-option"], "No such option: --no-such-option"),
        (["--select", "TD1O1"], "no rule matches 'TD1O1'; did you mean 'TD101'?"),
        (["--ignore", "TD101,dataloader-stal"], "did you mean 'dataloader-stall'?"),
    ],
)
def test_usage_errors_are_one_line_exit_2(dl_trace, args, expected):
    r = run("analyze", dl_trace, *args)
    assert r.returncode == 2 and r.stdout == ""
    lines = r.stderr.strip().splitlines()
    assert len(lines) == 1, r.stderr
    assert lines[0].startswith("tracedoc: error: ") and expected in lines[0], lines[0]
    assert "Value error" not in r.stderr and "Usage:" not in r.stderr and "╭" not in r.stderr


def test_missing_argument_and_unknown_command_one_line():
    for args in (["analyze"], ["no-such-command"]):
        r = run(*args)
        assert r.returncode == 2 and len(r.stderr.strip().splitlines()) == 1, r.stderr


def test_help_alias_and_exit_codes_listed():
    short, long = run("analyze", "-h"), run("analyze", "--help")
    assert short.returncode == 0 and short.stdout == long.stdout
    text = " ".join(short.stdout.split())
    assert "Exit codes: 0 no finding at or above --fail-on; 1 a finding at or above --fail-on" in text
    for opt in ("--top", "--quiet", "--output", "--color", "--strict", "github", "sarif", "html"):
        assert opt in text


def test_comma_lists_for_select_and_ignore(dl_trace):
    d = json.loads(run("analyze", dl_trace, "-f", "json", "--select", "TD101,TD202", "--exit-zero").stdout)
    assert d["rules_evaluated"] == ["TD101", "TD202"]
    d = json.loads(run("analyze", dl_trace, "-f", "json", "--ignore", "TD1, TD2", "--exit-zero").stdout)
    assert not any(c.startswith(("TD1", "TD2")) for c in d["rules_evaluated"]) and d["rules_evaluated"]


def test_quiet_top_output_and_color(tmp_path):
    q = run("analyze", WORKERS0, "-q")
    assert q.returncode == 1
    r = tracedoc.analyze(WORKERS0)
    sev = [f.severity for f in r.findings]
    total = r.recoverable["ms"]  # the replay of every fix together (tests/test_render.py recomputes it)
    step = r.signals["step_time_ms"]
    # dataloader-stall, optimizer, fusable elementwise chains (TD204, 7.0 ms), zero_grad, then
    # no-tensor-core-use and pinned memory: replayed, AMP saves 2.8 ms of a step the host holds
    # (tracedoc.signals.stepmodel). Severity follows the saving's share of the step
    # (tracedoc.engine.claims.impact_severity): 33% error, 1.1-8.5% warning
    assert sev == ["error", "warning", "warning", "warning", "warning", "warning"]
    assert [f.base_severity for f in r.findings] == ["error", "info", "info", "info", "warning", "warning"]
    assert [f.code for f in r.findings] == ["TD101", "TD210", "TD204", "TD202", "TD301", "TD102"]
    assert q.stdout == (
        f"6 findings (1 error, 5 warnings); ~{total:.1f} ms of a {step:.1f} ms step ({total / step:.0%}) recoverable"
        " (fixes replayed together; 1 finding not replayed)\n"  # TD204's saving is its own estimate
    )
    out = tmp_path / "r.txt"
    r = run("analyze", WORKERS0, "--top", "2", "-o", out, "--color", "never")
    assert r.returncode == 1 and r.stdout == ""
    text = out.read_text(encoding="utf-8")
    assert "#2 warning TD210" in text and "#3 " not in text and "4 more findings not shown (--top 2)" in text
    assert "\x1b[" not in text and text.rstrip().endswith("recoverable")
    coloured = run("analyze", WORKERS0, "--top", "1", "--color", "always").stdout
    assert "\x1b[" in coloured
    bad = run("analyze", WORKERS0, "-o", tmp_path / "no" / "such" / "dir" / "r.txt")
    assert bad.returncode == 2 and len(bad.stderr.strip().splitlines()) == 1 and "cannot write" in bad.stderr


def test_no_color_env_and_pipe_give_glyph_bar():
    env = {**__import__("os").environ, "NO_COLOR": "1", "COLUMNS": "80"}
    r = subprocess.run(
        [sys.executable, "-m", "tracedoc", "analyze", WORKERS0, "--color", "always"],
        capture_output=True,
        text=True,
        env=env,
        timeout=120,
    )
    plain = subprocess.run(
        [sys.executable, "-m", "tracedoc", "analyze", WORKERS0], capture_output=True, text=True, env=env, timeout=120
    )
    assert "D DataLoader 33.4%" in plain.stdout and "\x1b[" not in plain.stdout
    assert all(len(ln) <= 80 for ln in plain.stdout.splitlines())
    assert r.returncode == 1


def test_github_and_sarif_formats_from_the_cli(tmp_path):
    gh = run("analyze", WORKERS0, "-f", "github")
    assert gh.returncode == 1
    assert gh.stdout.splitlines()[0].startswith(f"::error file={WORKERS0},title=TD101 dataloader-stall")
    out = tmp_path / "r.sarif"
    s = run("analyze", WORKERS0, "-f", "sarif", "-o", out)
    assert s.returncode == 1 and s.stdout == ""
    assert json.loads(out.read_text())["version"] == "2.1.0"


def test_strict_fails_on_a_skipped_rule(dl_trace):
    # the synthetic trace has no memory events: TD401 is skipped
    assert run("analyze", dl_trace, "--select", "TD401", "-q").returncode == 0
    r = run("analyze", dl_trace, "--select", "TD401", "-q", "--strict")
    assert r.returncode == 1
    assert r.stderr.strip() == "tracedoc: strict: incomplete analysis, 1 selected rule skipped: TD401"
    # --exit-zero forgives findings, not an incomplete analysis
    assert run("analyze", dl_trace, "-q", "--strict", "--exit-zero").returncode == 1
    assert run("analyze", dl_trace, "-q", "--strict", "--select", "TD101", "--exit-zero").returncode == 0


def write_pyproject(d, body: str):
    (d / "pyproject.toml").write_text(body)


def test_pyproject_config_select_fail_on_and_thresholds(tmp_path):
    proj = tmp_path / "proj"
    (proj / "traces" / "run1").mkdir(parents=True)
    trace = dataloader_bound().write(proj / "traces" / "run1" / "dl.json")  # DataLoader 40% of the step
    write_pyproject(proj, '[tool.tracedoc]\nselect = ["TD101"]\nfail-on = "error"\n')
    d = json.loads(run("analyze", trace, "-f", "json", cwd=tmp_path).stdout)  # found upward from the trace
    assert d["rules_evaluated"] == ["TD101"] and [f["code"] for f in d["findings"]] == ["TD101"]
    # the command line wins over the file
    d = json.loads(run("analyze", trace, "-f", "json", "--select", "TD202", "--exit-zero", cwd=tmp_path).stdout)
    assert d["rules_evaluated"] == ["TD202"]
    # threshold override: TD101 fires above 5% by its file; 0.5 > 40% keeps it quiet, 0.3 does not
    write_pyproject(
        proj, '[tool.tracedoc]\nselect = ["TD101"]\n[tool.tracedoc.thresholds]\nTD101 = { dataloader_share = 0.5 }\n'
    )
    r = run("analyze", trace, "-f", "json", cwd=tmp_path)
    assert r.returncode == 0 and json.loads(r.stdout)["findings"] == []
    write_pyproject(
        proj, '[tool.tracedoc]\nselect = ["TD101"]\nthresholds = { dataloader-stall = { dataloader_share = 0.3 } }\n'
    )
    assert run("analyze", trace, "-q", cwd=tmp_path).returncode == 1
    # from the CWD when the trace's folders have none
    elsewhere = tmp_path / "elsewhere"
    elsewhere.mkdir()
    trace2 = dataloader_bound().write(elsewhere / "dl.json")
    assert json.loads(run("analyze", trace2, "-f", "json", cwd=proj).stdout)["rules_evaluated"] == ["TD101"]


@pytest.mark.parametrize(
    "body, expected",
    [
        ('[tool.tracedoc]\nselec = ["TD101"]\n', "unknown [tool.tracedoc] key 'selec'"),
        ('[tool.tracedoc]\nfail-on = "fatal"\n', "fail-on must be one of info, warning, error"),
        ("[tool.tracedoc.thresholds]\nTD101 = { step_time_ms = 1 }\n", "step_time_ms is not compared with a number"),
        ("[tool.tracedoc.thresholds]\nTD999 = { x = 1 }\n", "names no rule 'TD999'"),
        ("[tool.tracedoc\n", "pyproject.toml"),
    ],
)
def test_bad_pyproject_config_is_one_line_exit_2(tmp_path, body, expected):
    write_pyproject(tmp_path, body)
    trace = dataloader_bound().write(tmp_path / "dl.json")
    r = run("analyze", trace, cwd=tmp_path)
    assert r.returncode == 2 and len(r.stderr.strip().splitlines()) == 1, r.stderr
    assert expected in r.stderr and str(tmp_path / "pyproject.toml") in r.stderr


def test_pyproject_extra_rules_relative_to_the_file(tmp_path):
    (tmp_path / "ci").mkdir()
    (tmp_path / "ci" / "budget.toml").write_text(budget_rule_toml(0.5))  # the trace's step is 1 ms
    write_pyproject(tmp_path, '[tool.tracedoc]\nrules = ["ci"]\nselect = ["CI1"]\n')
    trace = dataloader_bound().write(tmp_path / "dl.json")
    d = json.loads(run("analyze", trace, "-f", "json", "--exit-zero", cwd="/").stdout)
    assert [f["code"] for f in d["findings"]] == ["CI1"]


def test_same_format_names_across_commands():
    for cmd in ("rules", "signals"):
        assert json.loads(run(cmd, "-f", "json").stdout)
        assert run(cmd, "-f", "markdown").stdout.startswith("| ")
        r = run(cmd, "-f", "html")
        assert r.returncode == 2 and "not available here (text, json or markdown)" in r.stderr


def test_rule_command_keeps_code_lines_whole():
    env = {**__import__("os").environ, "COLUMNS": "60"}
    r = subprocess.run(
        [sys.executable, "-m", "tracedoc", "rule", "TD101"], capture_output=True, text=True, env=env, timeout=60
    )
    assert "loader = DataLoader(dataset, batch_size=32, shuffle=True)          # num_workers=0" in r.stdout
    assert "                    num_workers=4, persistent_workers=True)" in r.stdout
