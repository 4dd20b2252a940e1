"""The HTML report: one self-contained page that a real headless Chromium (Debian's
``chromium`` package; ``make test`` installs it) loads with no console message, showing
every finding, with the plots drawn by the embedded plotly.js."""

from __future__ import annotations

import re
import subprocess
import sys
from pathlib import Path

import pytest
from conftest import real_trace
from helpers import chromium, headless_chromium_args

import tracedoc
from tracedoc.render.html import HtmlRenderer
from tracedoc.render.report import summary_line
from tracedoc.signals.gpu import KERNEL_CATEGORIES

WORKERS0 = "v100_resnet50_workers0.pt.trace.json.gz"


def open_in_chromium(page: Path, tmp_path: Path) -> tuple[str, list[str]]:
    """Load ``page`` in headless Chromium; return (the DOM after scripts ran, console lines)."""
    r = subprocess.run(
        [
            *headless_chromium_args(chromium(), tmp_path / "profile"),
            "--enable-logging=stderr",
            "--v=0",
            "--virtual-time-budget=5000",
            "--dump-dom",
            page.resolve().as_uri(),
        ],
        capture_output=True,
        text=True,
        timeout=180,
    )
    assert r.returncode == 0, r.stderr[-2000:]
    console = [ln for ln in r.stderr.splitlines() if ":CONSOLE" in ln]
    return r.stdout, console


@pytest.fixture(scope="module")
def w0_trace():
    return tracedoc.load(real_trace(WORKERS0))


def test_console_errors_are_detected(tmp_path):
    # the check below means something: a page with a console error and an exception is caught
    bad = tmp_path / "bad.html"
    bad.write_text("<!DOCTYPE html><p>x</p><script>console.error('boom'); notAFunction();</script>")
    _, console = open_in_chromium(bad, tmp_path)
    assert any("boom" in ln for ln in console) and any("notAFunction" in ln for ln in console)


def test_html_report_loads_in_chromium_and_shows_the_findings(tmp_path, w0_trace):
    out = tmp_path / "report.html"
    r = subprocess.run(
        [sys.executable, "-m", "tracedoc", "analyze", str(real_trace(WORKERS0)), "--format", "html", "-o", str(out)],
        capture_output=True,
        text=True,
        timeout=300,
    )
    assert r.returncode == 1, r.stderr  # findings: exit 1 as for every format
    assert r.stdout == "" and r.stderr == f"tracedoc: wrote the HTML report to {out}\n"  # one line: where
    page = out.read_text(encoding="utf-8")
    # self-contained: nothing is loaded from elsewhere
    assert not re.search(r"<(script|img|iframe)[^>]+src=", page, re.IGNORECASE)
    assert not re.search(r"<link[^>]+href=", page, re.IGNORECASE)
    dom, console = open_in_chromium(out, tmp_path)
    assert console == []
    report = tracedoc.analyze(w0_trace)
    for f in report.findings:
        assert f'id="{f.code}"' in dom and f.name in dom
    assert "num_workers=2" in dom and summary_line(report) in dom
    assert "Skipped rules" in dom and "TD401" in dom
    # plotly.js ran: every plot div holds a drawn SVG
    for div in ("step-breakdown", "kernel-categories", "top-kernels"):
        assert re.search(rf'id="{div}"[^>]*class="[^"]*js-plotly-plot', dom), div
    assert dom.count('class="main-svg"') >= 3


def test_kernel_categories_add_up_to_kernel_time(w0_trace):
    report = tracedoc.analyze(w0_trace)
    cats = {r["category"]: r["ms_per_step"] for r in report.kernels["by_category"]}
    top = report.kernels["top"]
    assert list(cats) == list(KERNEL_CATEGORIES)
    # the eligible-not-on-Tensor-Cores share is TD301's own figure (66.67 ms per step)
    assert cats["GEMM/conv not on Tensor Cores"] == pytest.approx(report.signals["tc_eligible_non_tc_ms"], rel=1e-3)
    assert cats["communication"] == 0.0 and cats["GEMM/conv on Tensor Cores"] == 0.0
    assert len(top) == 10 and top[0]["ms_per_step"] >= top[-1]["ms_per_step"]
    assert top[0]["ms_per_step"] <= sum(cats.values())


def test_idle_ledger_and_rank_pages_render():
    report = tracedoc.analyze(real_trace("a100_alexnet_forward.pt.trace.json.gz"))
    report.idle_ledger = {"cuda:0": {"host-wait: DataLoader": 3.0, "kernel-wait": 1.5}}
    page = HtmlRenderer().render(report)
    assert 'id="idle-ledger"' in page and "host-wait: DataLoader" in page
    assert 'id="kernel-categories"' in page  # drawn from the report's kernels section
    report.kernels = None
    assert 'id="kernel-categories"' not in HtmlRenderer().render(report)  # none: no kernel charts


def test_rank_directory_page_has_step_time_per_rank():
    from tracedoc.ranks import MultiRankReport, RankResult, summarize

    reports = [tracedoc.analyze(real_trace(n)) for n in (WORKERS0, "v100_resnet50_workers4.pt.trace.json.gz")]
    ranks = [RankResult(path=f"rank{i}.json", rank=i, report=r) for i, r in enumerate(reports)]
    page = HtmlRenderer().render_ranks(MultiRankReport(directory="job", ranks=ranks, summary=summarize(ranks)))
    assert 'id="rank-step-time"' in page and "2 traces" in page
    for r in reports:  # each rank's step time is plotted (plotly's JSON carries the numbers)
        assert str(r.signals["step_time_ms"]) in page
