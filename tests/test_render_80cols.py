"""What a person sees in an 80-column terminal (issue 22): tables whose columns never collapse,
paths shortened from the left with their line numbers, numbers right-aligned with one
precision per column, skipped rules folded into one line (``--show-skipped`` lists them),
"per window" where the trace has no iterations, no scientific notation, hanging indents,
readable ``tracedoc rules``/``signals``, a running progress clock, and the config file named
in the header when ``[tool.tracedoc]`` changed the analysis."""

from __future__ import annotations

import dataclasses
import os
import re
import subprocess
import sys

import pytest
from conftest import FIXTURES, real_trace
from helpers import terminal_console
from tracebuilder import dataloader_bound

import tracedoc
from tracedoc.render import render
from tracedoc.render.report import (
    ConsoleRenderer,
    _fmt,
    code_ranges,
    per_window,
    skipped_line,
    summary_line,
    terminal_options,
    windowed,
)
from tracedoc.text import left_ellipsis_path, plain_rst

TIMESFORMER = "h100_timesformer_inference.pt.trace.json.gz"
SGLANG = "mi300x_sglang_qwen3_prefill_decode.pt.trace.json.gz"
GLOO = "cpu_only_gloo.pt.trace.json.gz"
WORKERS0 = "v100_resnet50_workers0.pt.trace.json.gz"
SCIENTIFIC = re.compile(r"\d(?:\.\d+)?[eE][+-]?\d")

#: A TD104 evidence table as the sglang and TimeSformer traces give it (long calls, ops and frames).
BLOCKING_ROWS = [
    {
        "call": "hipStreamSynchronize",
        "op": "aten::_local_scalar_dense",
        "python": "sglang/srt/model_executor/forward_batch_info.py(443): compute_position_kernel",
        "per_step": 12.0,
        "ms_per_step": 0.123,
    },
    {
        "call": "hipMemcpyWithStream",
        "op": "aten::item",
        "python": "transformers/models/videomae/modeling_videomae.py(443): forward",
        "per_step": 0.5,
        "ms_per_step": 245.25,
    },
    {"call": "hipDeviceSynchronize", "op": None, "python": None, "per_step": 3, "ms_per_step": 0.0004},
]


@pytest.fixture(scope="module")
def reports() -> dict:
    return {name: tracedoc.analyze(real_trace(name)) for name in (TIMESFORMER, SGLANG, GLOO, WORKERS0)}


def text_of(report, width: int = 80, colour: bool = False, **kw) -> list[str]:
    console, buf = terminal_console(width, colour)
    ConsoleRenderer(console, **kw).render(report)
    return re.sub(r"\x1b\[[0-9;]*m", "", buf.getvalue()).splitlines()


def with_table(report, key: str = "top_blocking_calls", rows=BLOCKING_ROWS, base=None):
    """``report`` with one finding (taken from ``base``) whose evidence is the table ``rows``."""
    f = (base or report).findings[0]
    return dataclasses.replace(report, findings=[dataclasses.replace(f, evidence={key: rows})])


def table_lines(lines: list[str]) -> tuple[str, list[str]]:
    """The header row and the body rows of the (one) evidence table in ``lines``, panel border off."""
    inner = [ln.strip()[1:-1] for ln in lines if ln.strip().startswith("│") and ("┃" in ln or "│" in ln[3:-3])]
    head = next(ln for ln in inner if "┃" in ln)
    body = [ln for ln in inner if "│" in ln and "┃" not in ln and "━" not in ln]
    return head, body


def cells(row: str, sep: str) -> list[str]:
    return row.rstrip().split(sep)


# -- 1. tables survive 80 columns ------------------------------------------------------------------


@pytest.mark.parametrize("name", [TIMESFORMER, SGLANG])
@pytest.mark.parametrize("colour", [False, True], ids=["no-colour", "colour"])
def test_no_column_collapses_and_no_line_is_wider_than_80(reports, name, colour):
    for report in (reports[name], with_table(reports[name], base=reports[TIMESFORMER])):
        lines = text_of(report, 80, colour)
        assert all(len(ln) <= 80 for ln in lines), max(lines, key=len)
        for ln in lines:
            assert not re.search(r"┃\s*┃|┃ … ┃|│ … │", ln), ln  # a column squeezed to nothing
        heads = [ln for ln in lines if "┃" in ln]
        assert heads or not any(isinstance(v, list) for f in report.findings for v in f.evidence.values())
        for head in heads:
            labels = [c.strip() for c in head.strip().strip("│").split("┃")]
            assert all(len(c) >= 2 and "…" not in c for c in labels), head
    head, body = table_lines(text_of(with_table(reports[name], base=reports[TIMESFORMER])))
    assert [c.strip() for c in head.split("┃")] == ["call", "op", "python", "per step", "ms/step"] or [
        c.strip() for c in head.split("┃")
    ] == ["call", "op", "python", "per window", "ms/window"]
    assert len(body) == 3


def test_a_table_too_wide_for_any_layout_becomes_records(reports):
    wide = [{f"column_{i}": f"value_{i}_" * 3 for i in range(8)}]
    lines = text_of(with_table(reports[GLOO], "many_columns", wide, base=reports[TIMESFORMER]), 80)
    assert all(len(ln) <= 80 for ln in lines)
    assert any("1. column_0: value_0_value_0_value_0_" in ln for ln in lines)
    assert any("column_7: value_7_" in ln for ln in lines)


# -- 2. paths from the left, line numbers kept ---------------------------------------------------


def test_paths_shorten_from_the_left_and_keep_the_line_number():
    frame = "transformers/models/videomae/modeling_videomae.py(443): forward"
    assert left_ellipsis_path(frame, 80) == frame
    assert left_ellipsis_path(frame, 50) == "…/videomae/modeling_videomae.py(443): forward"
    assert left_ellipsis_path(frame, 40) == "…/modeling_videomae.py(443): forward"
    assert left_ellipsis_path(frame, 30) == "…/modeling_videomae.py(443)"
    assert left_ellipsis_path("transformers/models/videomae.py(443)", 25) == "…/models/videomae.py(443)"
    assert left_ellipsis_path("a/b/c/long_file_name.py(443)", 12).endswith(".py(443)")
    for w in range(1, 70):
        assert len(left_ellipsis_path(frame, w)) <= w
    assert left_ellipsis_path("/data/runs/2024/trace.json.gz", 20) == "…/2024/trace.json.gz"
    assert left_ellipsis_path("<built-in function array>", 12) == "<built…rray>"  # no path: the middle


def test_frames_in_tables_keep_file_and_line(reports):
    _, body = table_lines(text_of(with_table(reports[SGLANG], base=reports[TIMESFORMER]), 80))
    python = [cells(r, "│")[2].strip() for r in body[:2]]
    assert all(re.search(r"\.py\(443\)", p) and p.startswith("…") for p in python), python
    lines = text_of(reports[TIMESFORMER], 80)
    assert any("…/image_processing_videomae.py(178)" in ln for ln in lines)


# -- 3. numbers right-aligned, one precision per column --------------------------------------------


def test_numbers_are_right_aligned_with_one_precision_per_column(reports):
    _, body = table_lines(text_of(with_table(reports[TIMESFORMER]), 80))
    rows = [[c for c in cells(r, "│")] for r in body]
    for j in (3, 4):
        col = [r[j] for r in rows]
        widths = {len(c.rstrip()) for c in col[:-1]} | {len(col[-1].rstrip())}
        assert len(widths) == 1, col  # every number ends in the same cell column: right-aligned
        decimals = {len(c.strip().split(".")[1]) if "." in c else 0 for c in col}
        assert len(decimals) == 1, col
    assert [r[3].strip() for r in rows] == ["12.00", "0.50", "3.00"]
    assert [r[4].strip() for r in rows] == ["0.123", "245.250", "0.000"]
    # a column of whole numbers has no fraction; shares are percentages
    lines = text_of(reports[TIMESFORMER], 80)
    assert any(re.search(r"│\s+12$", ln.rstrip(" │")) for ln in lines)
    assert any(re.search(r"│\s+73\.8%", ln) for ln in lines)


def test_no_scientific_notation_in_numbers():
    assert _fmt(1.5e-05) == "0.000015"
    assert _fmt(12345.6) == "12346"
    assert _fmt(2.5e-9) == "0"
    assert _fmt(3.25e7) == "32,500,000"
    assert _fmt(0.093) == "0.093"
    assert _fmt(222.6) == "222.6"
    assert not any(SCIENTIFIC.search(_fmt(v)) for v in (1e-12, 1e-7, 1e-4, 1.0, 1e5, 1e9, 1e21, -3e-6))


@pytest.mark.parametrize("name", sorted(p.name for p in FIXTURES.glob("*.pt.trace.json.gz")))
def test_no_fixture_report_prints_scientific_notation(name):
    report = tracedoc.analyze(real_trace(name))
    for width in (80, 120):
        text = "\n".join(text_of(report, width))
        assert not SCIENTIFIC.search(text), SCIENTIFIC.findall(text)
        assert all(len(ln) <= width for ln in text.splitlines()), name
    assert not SCIENTIFIC.search(render(report, "markdown"))


# -- 4. skipped rules fold into one line ---------------------------------------------------------


def test_code_ranges():
    assert code_ranges(["TD101", "TD102", "TD103", "TD210", "TD401", "TD402", "TD702"]) == (
        "TD101-103, TD210, TD401-402, TD702"
    )
    assert code_ranges(["TD199", "TD200"]) == "TD199-200"
    assert code_ranges(["X1", "budget"]) == "X1, budget"


def test_skipped_rules_fold_into_one_line_and_the_finding_stays_on_screen(reports):
    report = reports[GLOO]
    lines = text_of(report, 80)
    assert not any("Skipped rules" in ln for ln in lines)
    folded = " ".join(ln.strip() for ln in lines if "not applicable" in ln or "--show-skipped" in ln)
    n = len(report.skipped)
    assert n >= 10
    assert folded.startswith(f"{n} rules not applicable here: TD101-105, ") and folded.endswith(
        "; --show-skipped to list them"
    )
    assert skipped_line(report) == folded
    assert sum(1 for ln in lines if "not applicable" in ln or "--show-skipped" in ln) <= 2
    # in a 24-line terminal (one line for the next prompt) the finding and the summary stay in view
    title = next(i for i, ln in enumerate(lines) if "TD601" in ln and "╭" in ln)
    assert len(lines) - title <= 23
    assert lines[-1] == summary_line(report, 80)
    # --show-skipped: today's full list, each reason with a hanging indent
    full = text_of(report, 80, show_skipped=True)
    assert any(ln == "Skipped rules:" for ln in full)
    for k in report.skipped:
        assert any(ln.startswith(f"  {k.code} {k.name}: ") for ln in full), k.code
    with terminal_options(show_skipped=True):
        assert text_of(report, 80) == full


def run_cli(*args, cwd=None, columns=80):
    env = {**os.environ, "COLUMNS": str(columns), "LINES": "24"}
    env.pop("NO_COLOR", None)
    return subprocess.run(
        [sys.executable, "-m", "tracedoc", *map(str, args)],
        capture_output=True,
        text=True,
        cwd=cwd,
        env=env,
        timeout=120,
    )


def test_show_skipped_option_of_analyze():
    trace = real_trace(GLOO)
    short = run_cli("analyze", trace, "--no-cache", "--color", "never").stdout
    assert "Skipped rules:" not in short and "rules not applicable here" in short
    full = run_cli("analyze", trace, "--no-cache", "--color", "never", "--show-skipped").stdout
    assert "Skipped rules:" in full and "TD702 step-time-outlier: needs max_step_ratio" in full
    assert "--show-skipped to list them" not in full
    assert all(len(ln) <= 80 for ln in short.splitlines() + full.splitlines())


# -- 5. per window where no iteration was found --------------------------------------------------


def test_no_iterations_means_per_window(reports):
    sg = reports[SGLANG]
    assert windowed(sg) and not windowed(reports[TIMESFORMER]) and not windowed(reports[GLOO])
    report = with_table(sg, base=reports[TIMESFORMER])
    text = "\n".join(text_of(report, 80))
    assert "ms/window" in text and "per window" in text and "of a 987.4 ms window" in text
    assert not re.search(r"\bper step\b|ms/step|step-time|of the step\b", text), text
    md = render(report, "markdown")
    findings = md.split("## Findings", 1)[1].split("## Skipped", 1)[0]  # skip reasons are the trace's own words
    assert "ms/window" in md and not re.search(r"\bper step\b|ms/step", findings)
    # a trace with steps keeps "per step"
    tf = "\n".join(text_of(reports[TIMESFORMER], 80))
    assert "ms/step" in tf and "per window" not in tf
    assert per_window("waits 2.0 ms per step (4% of the step)", reports[TIMESFORMER]) == (
        "waits 2.0 ms per step (4% of the step)"
    )
    assert per_window("waits 2.0 ms per step (4% of the step), ms/step", sg) == (
        "waits 2.0 ms per window (4% of the window), ms/window"
    )


# -- 6. hanging indent ----------------------------------------------------------------------------


def test_wrapped_notes_and_headers_keep_a_hanging_indent(reports):
    lines = text_of(reports[SGLANG], 80)
    i = next(i for i, ln in enumerate(lines) if ln.startswith("  note: "))
    cont = lines[i + 1 : i + 3]
    assert cont and all(ln.startswith("    ") and ln[4] != " " for ln in cont), cont
    gpu = next(i for i, ln in enumerate(lines) if ln.startswith("  GPU idle"))
    assert lines[gpu + 1].startswith("    ") and lines[gpu + 1][4] != " "
    also = text_of(reports[TIMESFORMER], 80)
    j = next(i for i, ln in enumerate(also) if ln.startswith("  TD102 "))
    assert also[j + 1].startswith("    ") and also[j + 1][4] != " "
    for ln in lines + also:  # nothing wraps back to the left edge but the section heads
        if ln and not ln.startswith((" ", "╭", "│", "╰")):
            assert ln.startswith(("tracedoc ", "No findings", "Also true", "Skipped", "1", "2", "3", "4", "8")), ln


# -- 7. tracedoc rules / signals at 80 columns -----------------------------------------------------


@pytest.mark.parametrize("command", ["rules", "signals"])
def test_listings_are_readable_at_80_columns(command):
    from tracedoc.engine.rules import builtin_rules
    from tracedoc.signals import SIGNALS

    out = run_cli(command).stdout
    lines = out.splitlines()
    assert lines and all(len(ln) <= 80 for ln in lines), max(lines, key=len)
    assert not re.search(r"``|:(?:func|data|class|meth|mod|attr):", out)
    texts = (
        [r.summary for r in builtin_rules()]
        if command == "rules"
        else [plain_rst(s.doc.split("\n\n", 1)[0]) for s in SIGNALS.values()]
    )
    words = {w for t in texts for w in plain_rst(t).split()}
    on_lines = {w for ln in lines for w in ln.split()}
    assert words <= on_lines, sorted(words - on_lines)[:5]  # no word split across two lines
    wide = run_cli(command, columns=200).stdout
    assert "┃" in wide and not re.search(r"``|:(?:func|data):", wide)


def test_plain_rst():
    assert plain_rst("The ``num_workers`` of :func:`dataloader_workers_keep_up`") == (
        "The num_workers of dataloader_workers_keep_up"
    )
    assert plain_rst(":data:`~tracedoc.signals.cpu.MATMUL_CONV_OPS`, :class:`the model <a.B>`") == (
        "MATMUL_CONV_OPS, the model"
    )
    assert plain_rst('rows ``{"frame",\n    "role"}``') == 'rows {"frame", "role"}'


# -- 8. the progress line runs its clock -----------------------------------------------------------


def test_progress_line_shows_a_running_elapsed_time():
    from rich.console import Console

    from tracedoc.cli.common import Elapsed

    now = [100.0]
    line = Elapsed("big\x1b].pt.trace.json", clock=lambda: now[0])
    line.message = "decoding"
    console = Console(width=80, color_system=None, file=open(os.devnull, "w"))  # noqa: SIM115
    first = "".join(seg.text for seg in console.render(line))
    now[0] += 12.34
    second = "".join(seg.text for seg in console.render(line))
    assert "decoding (0.0 s)" in first and "decoding (12.3 s)" in second  # no message in between
    assert "\x1b" not in first and "\\x1b" in first


def test_progress_line_is_off_without_a_terminal(tmp_path):
    from tracedoc.cli.common import progress_line

    with progress_line(real_trace(GLOO), json_output=False) as progress:
        assert progress is None  # pytest's stderr is no terminal


# -- 9. the header names the config file that changed the analysis ---------------------------------


def test_header_names_the_config_file_when_it_changed_anything(tmp_path):
    proj = tmp_path / "proj"
    proj.mkdir()
    trace = dataloader_bound().write(proj / "dl.json")
    (proj / "pyproject.toml").write_text('[tool.tracedoc]\nselect = ["TD101"]\n')
    out = run_cli("analyze", trace, "--color", "never", "--exit-zero", cwd=proj).stdout
    head = out.split("step-time breakdown")[0]
    assert "config: pyproject.toml [tool.tracedoc] sets select" in head, head
    # the command line overrides everything the file says: nothing to name
    out = run_cli("analyze", trace, "--color", "never", "--select", "TD202", cwd=proj).stdout
    assert "config:" not in out
    # a table that sets only the defaults changes nothing
    (proj / "pyproject.toml").write_text('[tool.tracedoc]\nfail-on = "info"\n')
    out = run_cli("analyze", trace, "--color", "never", cwd=proj).stdout
    assert "config:" not in out
    # no table at all
    (proj / "pyproject.toml").write_text("[project]\nname = 'x'\n")
    assert "config:" not in run_cli("analyze", trace, "--color", "never", cwd=proj).stdout


def test_config_line_is_escaped_shortened_and_wraps_with_a_hanging_indent(reports):
    path = "/very/long/" + "deep/" * 14 + "pro\x1b[2Jject/pyproject.toml"
    lines = text_of(reports[GLOO], 80, config=(path, ("select", "thresholds")))
    i = next(i for i, ln in enumerate(lines) if ln.startswith("  config: "))
    assert "\x1b" not in "".join(lines) and all(len(ln) <= 80 for ln in lines)
    assert lines[i] == "  config: …/pyproject.toml [tool.tracedoc] sets select, thresholds"  # from the left
    lines = text_of(reports[GLOO], 80, config=("/p/pro\x1b[2Jj/pyproject.toml", ("select",)))
    assert "  config: /p/pro\\x1b[2Jj/pyproject.toml [tool.tracedoc] sets select" in lines  # shown, not run
    keys = ("select", "ignore", "rules", "thresholds", "fail-on", "strict")
    lines = text_of(reports[GLOO], 80, config=(path, keys))
    i = next(i for i, ln in enumerate(lines) if ln.startswith("  config: "))
    assert lines[i + 1].startswith("    ") and lines[i + 1][4] != " "
    assert "sets " + ", ".join(keys) in " ".join(ln.strip() for ln in lines[i : i + 3])
