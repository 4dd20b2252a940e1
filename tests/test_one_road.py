"""One road in (issue "One road in, one document model through, one door out"): one trace and
one ``pyproject.toml`` of thresholds and selectors give the same findings through every entry
point: the CLI, ``tracedoc.analyze``, a rank job, a fix-loop trial's analysis and ``diff``."""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys

import pytest
from conftest import real_trace

import tracedoc
from tracedoc.diff import load_side
from tracedoc.fixloop.runner import trial_analyzer
from tracedoc.ranks import analyze_directory
from tracedoc.settings import Settings

PYPROJECT = """
[tool.tracedoc]
ignore = ["zero-grad-kernels"]

[tool.tracedoc.thresholds]
TD101 = { dataloader_share = 0.5 }
"""


@pytest.fixture()
def project(tmp_path, monkeypatch):
    """A project folder: its pyproject.toml, and the V100 workers0 trace in a runs/ folder under it."""
    monkeypatch.delenv("TRACEDOC_NO_CONFIG", raising=False)
    (tmp_path / "pyproject.toml").write_text(PYPROJECT)
    runs = tmp_path / "runs" / "rank0"
    runs.mkdir(parents=True)
    trace = runs / "rank0.pt.trace.json.gz"
    shutil.copy(real_trace("v100_resnet50_workers0.pt.trace.json.gz"), trace)
    monkeypatch.chdir(tmp_path.parent)  # the config is found from the trace's folder, not the cwd
    return trace


def codes(findings) -> list[str]:
    return [f["code"] if isinstance(f, dict) else f.code for f in findings]


def test_every_entry_point_applies_the_project_settings(project):
    env = {k: v for k, v in os.environ.items() if k != "TRACEDOC_NO_CONFIG"}
    cli = subprocess.run(
        [sys.executable, "-m", "tracedoc", "analyze", str(project), "-f", "json", "--exit-zero", "--no-cache"],
        capture_output=True,
        text=True,
        env=env,
        timeout=300,
    )
    assert cli.returncode == 0, cli.stderr
    by_cli = codes(json.loads(cli.stdout)["findings"])
    # the overrides bite: TD101 (33% DataLoader, under the 50% override) and TD202 (ignored) are gone
    assert "TD101" not in by_cli and "TD202" not in by_cli and by_cli
    api = tracedoc.analyze(project)
    rank = analyze_directory(project.parent, jobs=1)
    trial = trial_analyzer(Settings.resolve(project))(project)
    diff = load_side(project).report
    assert codes(api.findings) == by_cli
    assert codes(rank.ranks[0].report.findings) == by_cli
    assert codes(trial.findings) == by_cli
    assert codes(diff.findings) == by_cli
    # and the same savings, to the µs
    savings = [f.estimated_saving_ms for f in api.findings]
    assert [f.estimated_saving_ms for f in trial.findings] == savings
    assert [f.estimated_saving_ms for f in diff.findings] == savings


def test_without_the_project_file_every_entry_point_reports_the_defaults(project, monkeypatch):
    monkeypatch.setenv("TRACEDOC_NO_CONFIG", "1")
    api = codes(tracedoc.analyze(project).findings)
    assert api[0] == "TD101" and "TD202" in api
    assert codes(load_side(project).report.findings) == api
    assert codes(trial_analyzer(Settings.resolve(project))(project).findings) == api
