"""The one door out (tracedoc.render): one registry chooses every format of every document,
renderers read documents and never compute, and the notebook hooks are thin calls into it."""

from __future__ import annotations

import ast
import io
import json
from pathlib import Path

import pytest
from conftest import real_trace
from rich.console import Console

import tracedoc
from tracedoc.errors import TracedocError
from tracedoc.render import RENDERERS, formats, kind_of, render

PKG = Path(__file__).resolve().parents[1] / "tracedoc"


@pytest.fixture(scope="module")
def report():
    return tracedoc.analyze(real_trace("v100_resnet50_workers0.pt.trace.json.gz"))


def test_every_format_of_a_report_renders_what_it_says(report):
    out = {f: render(report, f) for f in ("json", "markdown", "github", "sarif", "summary", "fragment")}
    assert json.loads(out["json"]) == report.to_dict()
    assert out["markdown"].startswith("#") and "TD101" in out["markdown"]
    assert [ln.split(" ", 1)[0] for ln in out["github"].splitlines() if ln.startswith("::")][:1] == ["::error"]
    assert json.loads(out["sarif"])["runs"][0]["results"][0]["ruleId"] == report.findings[0].code
    assert out["summary"].endswith("\n") and out["summary"].count("\n") == 1
    assert out["fragment"].startswith('<div class="tracedoc">')
    buf = io.StringIO()
    assert render(report, "text", console=Console(file=buf, width=100, color_system=None), top=1) is None
    text = buf.getvalue()
    assert report.findings[0].code in text and report.findings[1].code not in text  # top=1


def test_the_notebook_hooks_are_calls_into_the_registry(report):
    assert report.to_markdown() == render(report, "markdown")
    assert report._repr_html_() == render(report, "fragment")
    assert repr(report) == f"<Report {report.trace['path']}: {render(report, 'summary').strip()}>"
    buf = io.StringIO()
    report.print(console=Console(file=buf, width=100), quiet=True)
    assert buf.getvalue() == render(report, "summary", width=100)


def test_a_format_a_document_lacks_is_one_line_naming_those_it_has(report):
    from tracedoc.report.ranks import MultiTraceReport

    traces = MultiTraceReport(inputs=["d"], traces=[])
    with pytest.raises(TracedocError, match=r"^--format html is not available for several unrelated traces \(use "):
        render(traces, "html")
    assert formats("traces") == ["text", "json", "markdown", "github", "sarif"]
    with pytest.raises(TypeError, match="not a tracedoc document"):
        render({"findings": []}, "json")
    assert kind_of(report) == "report"


def test_every_kind_in_the_registry_is_a_document_class_kind():
    from tracedoc.report.comparison import DiffResult
    from tracedoc.report.fixloop import FixLoopSummary
    from tracedoc.report.model import Report
    from tracedoc.report.ranks import MultiRankReport, MultiTraceReport

    kinds = {k for _, k in RENDERERS}
    assert kinds == {c.KIND for c in (Report, MultiRankReport, MultiTraceReport, DiffResult, FixLoopSummary)}
    for kind in kinds:  # every document has JSON, text and markdown
        assert {"json", "text", "markdown"} <= set(formats(kind))


def _runtime_imports(path: Path) -> set[str]:
    tree = ast.parse(path.read_text())
    skip = set()
    for n in ast.walk(tree):
        if isinstance(n, ast.If) and "TYPE_CHECKING" in ast.unparse(n.test):
            skip |= {id(m) for b in n.body for m in ast.walk(b)}
    out = set()
    for n in ast.walk(tree):
        if id(n) in skip:
            continue
        if isinstance(n, ast.ImportFrom) and n.module:
            out.add(n.module)
        elif isinstance(n, ast.Import):
            out |= {a.name for a in n.names}
    return out


def test_renderers_read_documents_and_never_compute():
    """No renderer imports the layers that compute (signals, the engine, loading, the rank
    jobs, the comparison, the fix-loop) or the document model at run time: the documents'
    notebook hooks call in here, so an import back would be a cycle."""
    banned = (
        "tracedoc.signals",
        "tracedoc.engine",
        "tracedoc.load",
        "tracedoc.pipeline",
        "tracedoc.ranks",
        "tracedoc.diff",
        "tracedoc.fixloop",
        "tracedoc.report.model",
    )
    found = {
        f"{p.name}: {m}"
        for p in (PKG / "render").glob("*.py")
        for m in _runtime_imports(p)
        if any(m == b or m.startswith(b + ".") for b in banned)
    }
    assert found == set()
