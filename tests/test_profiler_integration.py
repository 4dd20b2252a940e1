"""tracedoc inside torch.profiler (tracedoc.profiler): real profiler runs of a workload's model on the CPU."""

from __future__ import annotations

import importlib.util
import io
import sys
from pathlib import Path

import pytest

torch = pytest.importorskip("torch")  # the workloads extra; CI installs it (nothing skips there)

import tracedoc  # noqa: E402

ROOT = Path(__file__).resolve().parents[1]
pytestmark = pytest.mark.needs_torch


def _dispatch_bound_step():
    """One training step of workloads/dispatch_bound.py's model (48 tiny residual blocks)."""
    spec = importlib.util.spec_from_file_location("dispatch_bound", ROOT / "workloads" / "dispatch_bound.py")
    mod = importlib.util.module_from_spec(spec)
    sys.modules[spec.name] = mod  # its dataclasses look their module up there
    spec.loader.exec_module(mod)
    torch.manual_seed(0)
    model = mod.build_model(width=32, depth=12)
    opt = torch.optim.SGD(model.parameters(), lr=0.01)
    x, y = torch.randn(8, 32), torch.randint(0, 10, (8,))

    def step():
        opt.zero_grad()
        torch.nn.functional.cross_entropy(model(x), y).backward()
        opt.step()

    return step


def test_profile_records_the_scheduled_window_and_diagnoses_it(tmp_path):
    step, err = _dispatch_bound_step(), io.StringIO()
    with tracedoc.profile(tmp_path, wait=1, warmup=1, active=2, stream=err) as prof:
        for _ in range(6):
            step()
            prof.step()
    handler = prof.tracedoc
    assert len(handler.paths) == 1 and handler.paths[0].exists()
    assert handler.paths[0].name.endswith(".pt.trace.json.gz")
    report = handler.report
    assert report is not None and report is handler.reports[-1]
    # the window holds the two active steps only: warm-up stayed out
    assert [s["step"] for s in report.to_dict()["steps"]] == [2, 3]
    # the same findings as analyzing the written file afresh
    again = tracedoc.analyze(str(handler.paths[0]))
    assert [f.code for f in report.findings] == [f.code for f in again.findings]
    lines = err.getvalue().splitlines()
    assert lines[0].startswith(f"tracedoc: {handler.paths[0].name}: 2 steps, ")
    assert len(lines) >= 2
    if report.findings:
        assert lines[1].startswith(f"  #1 {report.findings[0].severity} {report.findings[0].code} ")


def test_on_trace_ready_with_torch_profiler_keeps_every_cycle(tmp_path):
    from torch.profiler import ProfilerActivity, profile, schedule

    step = _dispatch_bound_step()
    handler = tracedoc.on_trace_ready(tmp_path / "traces", worker_name="w0", use_gzip=False, quiet=True)
    with profile(
        activities=[ProfilerActivity.CPU], schedule=schedule(wait=0, warmup=1, active=1, repeat=2),
        on_trace_ready=handler,
    ) as prof:  # fmt: skip
        for _ in range(5):
            step()
            prof.step()
    assert len(handler.reports) == 2 and handler.report is handler.reports[-1]
    assert [p.name.startswith("w0.") and p.name.endswith(".pt.trace.json") for p in handler.paths] == [True, True]
    assert all(p.exists() for p in handler.paths)


def test_a_bad_trace_is_one_line_and_the_loop_goes_on(tmp_path):
    err = io.StringIO()
    handler = tracedoc.on_trace_ready(tmp_path, stream=err)
    bad = tmp_path / "x.pt.trace.json"
    bad.write_text('{"traceEvents": [')
    assert handler.analyze(bad) is None and handler.report is None
    out = err.getvalue()
    assert out.count("\n") == 1 and out.startswith("tracedoc: ")


def test_diagnosis_escapes_trace_text(tmp_path):
    err = io.StringIO()
    handler = tracedoc.on_trace_ready(tmp_path, stream=err)
    name = "x\x1b]0;pwned\x07\n::error::y.pt.trace.json"
    src = ROOT / "fixtures" / "v100_resnet50_workers0.pt.trace.json.gz"
    path = tmp_path / name
    path.write_bytes(src.read_bytes())
    assert handler.analyze(path) is not None
    out = err.getvalue()
    assert "\x1b" not in out and "\x07" not in out
    assert not any(line.startswith("::") for line in out.splitlines())
