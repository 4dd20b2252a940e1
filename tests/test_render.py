"""Reports people read: the terminal at 80 and 200 columns (with and without colour),
Markdown with evidence, GitHub annotations and SARIF 2.1.0 (validated against the
official schema in fixtures/)."""

from __future__ import annotations

import io
import json
import re

import jsonschema
import pytest
from conftest import FIXTURES, real_trace
from helpers import terminal_console
from rich.console import Console

import tracedoc
from tracedoc.engine.rules import Finding, Fix, Skipped, builtin_rules
from tracedoc.render.github import GithubRenderer, escape_data, escape_property
from tracedoc.render.report import (
    ORDER_NOTE,
    ConsoleRenderer,
    MarkdownRenderer,
    device_label,
    middle_ellipsis,
    plural,
    short_name,
    summary_line,
)
from tracedoc.render.sarif import SarifRenderer
from tracedoc.report.model import Report

WORKERS0 = "v100_resnet50_workers0.pt.trace.json.gz"


def combined_replay_ms(report: Report) -> float:
    """The step model's saving of every replayed finding's fix together, recomputed from the model."""
    from tracedoc.load import load
    from tracedoc.signals import SignalContext
    from tracedoc.signals.stepmodel import replay_saving_ms

    fixes = [f.fix.replay for f in report.findings if f.fix.replay]
    return replay_saving_ms(SignalContext(load(report.trace["path"])), fixes)


def golden_dataloader_replay_ms() -> float:
    from pathlib import Path

    figures = json.loads((Path(__file__).parent / "golden" / "replay_figures.json").read_text())
    return figures["traces"][WORKERS0]["signals"]["dataloader_replay_saving_ms"]


@pytest.fixture(scope="module")
def w0() -> Report:
    return tracedoc.analyze(real_trace(WORKERS0))


def render(report: Report, width: int, colour: bool, **kw) -> list[str]:
    console, buf = terminal_console(width, colour)
    ConsoleRenderer(console, **kw).render(report)
    text = re.sub(r"\x1b\[[0-9;]*m", "", buf.getvalue())
    return text.splitlines()


def strip_border(line: str) -> str:
    return line.strip().strip("│").strip()


def words(text: str) -> list[str]:
    return [w for w in text.split() if w]


@pytest.mark.parametrize("colour", [False, True], ids=["no-colour", "colour"])
@pytest.mark.parametrize("width", [80, 200])
def test_terminal_fits_and_never_splits_a_word(w0, width, colour):
    lines = render(w0, width, colour)
    assert all(len(ln) <= width for ln in lines), max(lines, key=len)
    inner = [strip_border(ln) for ln in lines]
    # every word of the messages, evidence and fixes appears whole on one line: a word
    # split across two lines (mid-identifier wrap) would be found on none
    for f in w0.findings:
        for text in (f.message, f.fix.summary, f"{f.code} {f.name}"):
            for w in words(text):
                assert any(w in ln for ln in inner), (width, w)
        for k in f.evidence:
            assert any(k in ln for ln in inner), (width, k)
    # legend entries are never split: label and number on one line
    for label, pct in (("kernel", "55.5%"), ("DataLoader", "33.4%"), ("CPU exec", "7.7%")):
        assert any(f"{label} {pct}" in ln for ln in lines), (width, label)
    # the report says how findings are ordered, and ends with the summary line
    assert any(ORDER_NOTE in ln for ln in lines)
    last = [ln for ln in lines if ln.strip()][-1]
    assert last == summary_line(w0, width)
    # the summary counts the findings by severity and gives the step model's replay of all their fixes
    # together (worked out here from the model, not by the renderer): not their sum, since fixes
    # interact (with the DataLoader gone the step is device-bound, and AMP saves more)
    sev = [f.severity for f in w0.findings]
    total = combined_replay_ms(w0)
    assert 0 < total <= w0.signals["step_time_ms"]
    expected = f"{len(sev)} findings ({sev.count('error')} error, {sev.count('warning')} warning"
    assert last.startswith(expected), last
    assert f"~{total:.1f} ms" in last


def test_terminal_table_names_middle_ellipsis_at_80(w0):
    lines = render(w0, 80, False)
    rows = [ln for ln in lines if "│" in ln and "┃" not in ln and "13.46" in ln]
    assert len(rows) == 1  # the top kernel of TD301's table: one line, not wrapped
    row = strip_border(rows[0])
    kernel_cell = row.split("│")[0].strip()
    # the full name shortened in the middle: both ends kept
    td301 = next(f for f in w0.findings if f.code == "TD301")
    full = short_name(td301.evidence["top_non_tc_eligible_kernels"][0]["kernel"], 200)
    assert "…" in kernel_cell and len(kernel_cell) < len(full)
    head, tail = kernel_cell.split("…", 1)
    assert full.startswith(head) and full.endswith(tail)
    # at 200 columns the same name fits whole
    assert any(full in ln for ln in render(w0, 200, False))


def test_bar_without_colour_gives_each_segment_its_own_glyph(w0):
    lines = render(w0, 80, False)
    bar = next(ln for ln in lines if ln.startswith("  ") and set(ln.strip()) <= set("█▓▒░Dc·") and ln.strip())
    counts = {g: bar.count(g) for g in set(bar.strip())}
    # kernel 55.5%, DataLoader 33.4%, CPU exec 7.7% of a 50-cell bar (cumulative rounding)
    assert counts["█"] == 28 and counts["D"] == 17 and counts["c"] == 4, counts
    assert len(bar.strip()) == 50
    legend = " ".join(ln for ln in lines if "kernel 55.5%" in ln or "DataLoader 33.4%" in ln)
    assert "█ kernel 55.5%" in legend and "D DataLoader 33.4%" in legend
    # with colour the segments are coloured blocks instead
    coloured = render(w0, 80, True)
    assert any(set(ln.strip()) == {"█"} and len(ln.strip()) == 50 for ln in coloured)


def test_top_and_quiet(w0):
    lines = render(w0, 80, False, top=1)
    assert sum("#1 error TD101" in ln for ln in lines) == 1
    assert not any("#2 " in ln for ln in lines)
    assert any(f"{len(w0.findings) - 1} more findings not shown (--top 1)" in ln for ln in lines)
    assert [ln for ln in lines if ln.strip()][-1] == summary_line(w0, 80)  # still counts them all
    assert render(w0, 200, False, quiet=True) == [summary_line(w0)]


def synthetic(findings, skipped=(), step_time=100.0) -> Report:
    return Report(
        trace={
            "path": "t.json",
            "n_events": 10,
            "span_ms": 1.0,
            "has_steps": True,
            "n_steps": 1,
            "rank": None,
            "device": {"name": "AMD Radeon Graphics", "vendor": "AMD", "total_memory_bytes": 2**30},
            "devices": [],
        },
        signals={"step_time_ms": step_time, "step_count": 1},
        signals_unavailable={},
        units={},
        steps=[],
        findings=list(findings),
        skipped=list(skipped),
    )


def finding(code="TD999", severity="warning", saving=1.0, evidence=None, msg="m"):
    return Finding(code, "some-rule", severity, msg, saving, "", evidence or {}, Fix("do it", "safe"))


def test_long_kernel_name_in_a_table_stays_on_one_line_at_80():
    long = "void " + "very_long_kernel_name_" * 12 + "<float, 128>(float const*, float*)"
    rows = [{"kernel": long, "op": "aten::" + "x" * 90, "ms_per_step": 1.5, "count_per_step": 3}]
    r = synthetic([finding(evidence={"top_kernels": rows})])
    lines = render(r, 80, False)
    assert all(len(ln) <= 80 for ln in lines)
    row = next(ln for ln in lines if "1.5" in ln and "│" in ln)
    cells = [c.strip() for c in strip_border(row).split("│")]
    assert cells[0].startswith("very_long_ke") and cells[0].endswith("_name_<…>(…)") and "…" in cells[0][:-6]
    assert cells[1].startswith("aten::xx") and "…" in cells[1]


def test_summary_line_counts_and_plurals():
    r = synthetic([finding(severity="error", saving=30.0), finding(saving=20.0), finding(severity="info", saving=None)])
    assert summary_line(r) == "3 findings (1 error, 1 warning, 1 info); ~50.0 ms of a 100.0 ms step (50%) recoverable"
    assert summary_line(synthetic([finding(saving=None)])) == "1 finding (1 warning)"
    assert summary_line(synthetic([])) == "No findings"
    # savings never claim more than the step
    assert "~100.0 ms of a 100.0 ms step (100%)" in summary_line(synthetic([finding(saving=80), finding(saving=70)]))
    assert (plural(1, "trace"), plural(2, "trace"), plural(0, "trace")) == ("1 trace", "2 traces", "0 traces")


def test_middle_ellipsis_and_device_label():
    assert middle_ellipsis("abcdefghij", 10) == "abcdefghij"
    assert middle_ellipsis("abcdefghij", 7) == "abc…hij"
    assert middle_ellipsis("abcdefghij", 6) == "abc…ij" and len(middle_ellipsis("x" * 500, 33)) == 33
    assert device_label({"name": "AMD Radeon Graphics", "vendor": "AMD", "total_memory_bytes": None}) == (
        "AMD Radeon Graphics"
    )
    assert device_label({"name": "AMD AMD Radeon Graphics", "vendor": "AMD", "total_memory_bytes": 2**31}) == (
        "AMD Radeon Graphics (2.00 GiB)"
    )
    skipped = Skipped("TD301", "no-tensor-core-use", "this trace ran on AMD AMD Radeon Graphics")
    text = "\n".join(render(synthetic([], skipped=[skipped]), 80, False))
    assert "AMD AMD" not in text and "AMD Radeon Graphics" in text


def test_td101_fix_names_a_concrete_num_workers(w0):
    f = w0.findings[0]
    assert f.code == "TD101"
    # by hand from the finding's evidence: dataloader 59.26 ms of a 177.6 ms step leaves
    # 118.3 ms of other work; ceil(59.26 / 118.3) = 1 worker keeps up, +1 for jitter = 2
    dl, step = f.evidence["dataloader_ms"], f.evidence["step_time_ms"]
    assert (dl, step) == (pytest.approx(59.26, abs=0.01), pytest.approx(177.6, abs=0.1))
    assert "num_workers=2" in f.fix.summary and "searched up to the CPU count" not in f.fix.summary
    assert "the rest of the step 118.3 ms, so the workers needed to keep up number 1," in f.fix.summary
    assert f.to_dict()["fix"]["summary"] == f.fix.summary  # made concrete by the rule, in every format
    for text in (render(w0, 80, False), [tracedoc.render.render(w0, "markdown")]):
        assert any("num_workers=2" in ln for ln in text)


def test_a_fix_detail_falls_back_to_the_summary_without_its_signals():
    from tracedoc.engine.rules import builtin_rules
    from tracedoc.signals import SignalUnavailable

    td101 = next(r for r in builtin_rules() if r.code == "TD101")
    base = {"dataloader_share": 0.3, "dataloader_ms": 30.0, "step_time_ms": 100.0, "dataloader_saving_ms": 30.0}

    def get_from(values):
        def get(n):
            if n not in values:
                raise SignalUnavailable("not here")
            return values[n]

        return get

    assert td101.evaluate(get_from(base)).fix.summary == td101.fix.summary  # no detail signals
    full = {
        **base,
        "dataloader_compute_ms": 70.0,
        "dataloader_workers_keep_up": 1.0,
        "dataloader_workers_suggested": 2.0,
    }
    assert "num_workers=2" in td101.evaluate(get_from(full)).fix.summary


def test_markdown_has_evidence_tables_and_summary(w0):
    md = MarkdownRenderer().render(w0)
    assert "- `dataloader_share` = 33.4%" in md
    assert "| kernel | op | ms/step | count/step |" in md
    assert "| `cudnn::detail::dgrad_engine<…>(…)` | `aten::cudnn_convolution_backward_input` | 13.46 | 27 |" in md
    assert "| `Optimizer.step#SGD.step`" in md or "optimizer_single_tensor_kernels_per_step" in md
    assert ORDER_NOTE in md and "num_workers=2" in md
    assert md.rstrip().endswith(f"**{summary_line(w0)}**")
    assert "## Skipped rules" in md and "TD401" in md


def unescape_gh(text: str) -> str:
    return text.replace("%2C", ",").replace("%3A", ":").replace("%0A", "\n").replace("%0D", "\r").replace("%25", "%")


def test_github_annotations(w0):
    out = GithubRenderer().render(w0).splitlines()
    anns = [ln for ln in out if ln.startswith("::")]
    level = {"error": "::error", "warning": "::warning", "info": "::notice"}
    # one annotation per finding, then a notice per skipped rule
    assert [a.split(" ", 1)[0] for a in anns] == [level[f.severity] for f in w0.findings] + ["::notice"] * len(
        w0.skipped
    )
    # severity follows the saving's share of the step: TD210 (8.5%) and TD202 (3.4%) are warnings
    assert [a.split(" ", 1)[0] for a in anns][:4] == ["::error", "::warning", "::warning", "::warning"]
    assert out[-1] == summary_line(w0)
    m = re.match(r"^::error file=([^,]*),title=([^:]*)::(.*)$", anns[0])
    assert m, anns[0]
    assert unescape_gh(m.group(1)) == str(real_trace(WORKERS0))
    # the replayed DataLoader saving, as the independent re-derivation gives it (tests/golden/replay_figures.json)
    assert unescape_gh(m.group(2)) == f"TD101 dataloader-stall (~{golden_dataloader_replay_ms():.1f} ms/step)"
    assert unescape_gh(m.group(3)).startswith(w0.findings[0].message + "\nFix [safe]: ")
    assert "33.4%25 of step time" in anns[0]  # % escaped


def test_github_escaping_round_trips():
    nasty = "50% of a:b, c\r\nnext"
    assert escape_data(nasty) == "50%25 of a:b, c%0D%0Anext"
    assert escape_property(nasty) == "50%25 of a%3Ab%2C c%0D%0Anext"
    assert unescape_gh(escape_property(nasty)) == nasty
    r = synthetic([finding(msg="line1\nline2 100%")])
    r.trace["path"] = "dir,x/a:b.json"
    ann = GithubRenderer().render(r).splitlines()[0]
    assert "\n" not in ann and ann.startswith("::warning file=dir%2Cx/a%3Ab.json,title=TD999 some-rule")
    assert ann.endswith("::line1%0Aline2 100%25%0AFix [safe]: do it")


@pytest.fixture(scope="module")
def sarif_validator():
    schema = json.loads((FIXTURES / "schemas" / "sarif-schema-2.1.0.json").read_text())
    assert schema["title"].startswith("Static Analysis Results Format (SARIF) Version 2.1.0")
    cls = jsonschema.validators.validator_for(schema)
    cls.check_schema(schema)
    return cls(schema, format_checker=cls.FORMAT_CHECKER)


def test_sarif_is_valid_2_1_0(w0, sarif_validator):
    log = json.loads(SarifRenderer().render([w0], builtin_rules()))
    sarif_validator.validate(log)
    run = log["runs"][0]
    assert log["version"] == "2.1.0"
    assert (
        [r["ruleId"] for r in run["results"]]
        == [f.code for f in w0.findings]
        == ["TD101", "TD210", "TD204", "TD202", "TD301", "TD102"]
    )
    assert [r["level"] for r in run["results"]] == ["error", "warning", "warning", "warning", "warning", "warning"]
    rules = run["tool"]["driver"]["rules"]
    for res in run["results"]:
        assert rules[res["ruleIndex"]]["id"] == res["ruleId"]
        assert res["locations"][0]["physicalLocation"]["artifactLocation"]["uri"].endswith(WORKERS0)
    assert run["results"][0]["properties"]["estimated_saving_ms"] == pytest.approx(
        golden_dataloader_replay_ms(), abs=0.01
    )
    notes = run["invocations"][0]["toolExecutionNotifications"]
    # one notice per skipped rule: the memory rule, the CPU rules (a GPU trace) and communication
    assert [n["associatedRule"]["id"] for n in notes] == [k.code for k in w0.skipped]
    assert {"TD401", "TD601", "TD501"} <= {k.code for k in w0.skipped}
    # the validator does reject a broken log (so the check above means something)
    broken = json.loads(SarifRenderer().render([w0], builtin_rules()))
    broken["runs"][0]["results"][0]["level"] = "fatal"
    with pytest.raises(jsonschema.ValidationError):
        sarif_validator.validate(broken)


def test_sarif_of_a_trace_without_findings_is_valid(sarif_validator):
    log = SarifRenderer().to_dict([synthetic([])])
    sarif_validator.validate(log)
    assert log["runs"][0]["results"] == []


def fixloop_summary():
    from tracedoc.report.fixloop import FixLoopSummary

    trial = {"predicted_saving_ms": None, "measured_saving_ms": None}
    return FixLoopSummary(
        version="0",
        workload="workloads/resnet.py",
        out_dir="out",
        device={},
        options={},
        noise_rule="",
        baseline=None,
        stop_reason="no fix left to try",
        final={"samples_per_s": 270.5, "speedup": 1.5, "trial": 1, "changes": ["num_workers=4"]},
        trials=[
            {**trial, "index": 0, "change": "baseline", "step_time_ms": 177.6, "samples_per_s": 180.2, "speedup": 1.0}
            | {"status": "baseline"},
            {"index": 1, "change": "num_workers: 0 -> 4", "step_time_ms": 118.3, "samples_per_s": 12270.5}
            | {"speedup": 1.5, "status": "kept", "predicted_saving_ms": 59.3, "measured_saving_ms": 59.3},
            {"index": 2, "change": "a_very_long_knob_name_that_cannot_fit_anywhere_at_all: 32 -> 64"}
            | {"step_time_ms": 117.1, "samples_per_s": 270.1, "speedup": 1.49, "status": "reverted"}
            | {"predicted_saving_ms": 1.0, "measured_saving_ms": -0.2},
        ],
    )


def test_fixloop_table_fits_80_columns_without_cutting_numbers():
    from tracedoc.render.fixloop import render_table

    buf = io.StringIO()
    Console(file=buf, width=80, color_system=None).print(render_table(fixloop_summary(), 80))
    lines = buf.getvalue().splitlines()
    assert all(len(ln) <= 80 for ln in lines)
    text = "\n".join(lines)
    for cell in ("12270.5", "+59.3", "-0.2", "1.50x", "reverted", "samples/s", "speedup", "num_workers:", "predicted"):
        assert cell in text, cell
    assert "…" in text  # the knob name too long for its column, shortened in the middle
    assert any(ln.split()[:1] == ["2"] and "a_very_" in ln and "t_all:" in ln for ln in lines)


def test_rank_table_fits_80_columns_and_pluralises(w0):
    from tracedoc.ranks import MultiRankReport, RankResult, summarize
    from tracedoc.render.ranks import render_text

    ranks = [RankResult(path="rank0.a_long_trace_file_name_for_rank_zero.pt.trace.json.gz", rank=0, report=w0)]
    buf = io.StringIO()
    render_text(MultiRankReport("job", ranks, summarize(ranks)), Console(file=buf, width=80, color_system=None))
    lines = buf.getvalue().splitlines()
    assert lines[0] == "tracedoc job: 1 trace"
    assert all(len(ln) <= 80 for ln in lines)
    row = next(ln for ln in lines if ln.strip().startswith("0 "))
    assert "rank0.a_l" in row and "json.gz" in row and "…" in row and "177.59" in row and "33.4%" in row
