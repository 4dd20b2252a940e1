"""The Python API: exports, short reprs, notebook renderings, Report.print, errors without reprs."""

from __future__ import annotations

import io
import subprocess
import sys

import pytest
from conftest import real_trace
from rich.console import Console

import tracedoc

TRACE = "a100_alexnet_forward.pt.trace.json.gz"


@pytest.fixture(scope="module")
def trace():
    return tracedoc.load(real_trace(TRACE))


def test_exports_are_documented():
    for name in ("load", "analyze", "Trace", "Report"):
        assert name in dir(tracedoc) and name in tracedoc.__all__
        obj = getattr(tracedoc, name)
        assert obj.__doc__ and len(obj.__doc__) > 80, name
    for frame in ("ops", "runtime", "kernels", "memcpys", "memsets", "syncs", "memory", "steps"):
        assert f"``{frame}``" in tracedoc.Trace.__doc__
    assert "microseconds" in tracedoc.Trace.__doc__ and "occupancy_pct" in tracedoc.Trace.__doc__


def test_import_stays_light():
    r = subprocess.run(
        [sys.executable, "-c", "import sys, tracedoc; dir(tracedoc); print('pandas' in sys.modules)"],
        capture_output=True,
        text=True,
        timeout=60,
    )
    assert r.stdout.strip() == "False", r.stderr


def test_trace_repr_is_one_short_line(trace):
    r = repr(trace)
    assert "\n" not in r and len(r) < 200, r
    assert r.startswith(f"<Trace {trace.path}: {trace.n_events:,} events") and f"{len(trace.kernels):,} kernels" in r
    md, html = trace._repr_markdown_(), trace._repr_html_()
    for frame in ("ops", "kernels", "steps"):
        assert f"`{frame}` | {len(getattr(trace, frame)):,} |" in md
        assert f"<code>{frame}</code></td><td>{len(getattr(trace, frame)):,}</td>" in html


def test_analyze_takes_a_trace_or_a_path(trace):
    a = tracedoc.analyze(trace)
    b = tracedoc.analyze(real_trace(TRACE))
    assert [f.code for f in a.findings] == [f.code for f in b.findings]
    assert a.signals == b.signals


def test_type_errors_are_short(trace):
    with pytest.raises(TypeError) as e:
        tracedoc.analyze([1, 2])
    assert str(e.value) == "analyze() takes a trace path or a tracedoc.Trace, not list"
    with pytest.raises(TypeError) as e:
        tracedoc.load(trace)
    assert len(str(e.value)) < 100 and "Trace(" not in str(e.value)


def test_report_repr_print_and_notebook_forms(trace):
    report = tracedoc.analyze(trace)
    r = repr(report)
    assert "\n" not in r and len(r) < 250 and r.startswith(f"<Report {trace.path}: ")
    buf = io.StringIO()
    report.print(Console(file=buf, width=80, color_system=None))
    text = buf.getvalue()
    assert text.startswith("tracedoc ") and all(len(ln) <= 80 for ln in text.splitlines())
    for f in report.findings:
        assert f.code in text
        assert f.code in report._repr_html_() and f.code in report._repr_markdown_()
    assert report._repr_markdown_().startswith("# tracedoc report")


def test_report_plot_is_the_step_breakdown():
    report = tracedoc.analyze(real_trace("v100_resnet50_workers0.pt.trace.json.gz"))
    fig = report.plot()
    names = [t.name for t in fig.data]
    assert names == ["kernel", "comm", "memcpy", "memset", "runtime", "DataLoader", "CPU exec", "other"]
    dl = next(t for t in fig.data if t.name == "DataLoader")
    assert list(dl.y) == [s["dataloader_ms"] for s in report.steps] and len(dl.y) == len(report.steps)
