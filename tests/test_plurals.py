"""Counts printed with a noun agree with the count ("1 trace", "2 traces"): the ranks
progress and views, and the other places that print "N things" to a user."""

from __future__ import annotations

import json

from rich.console import Console
from tracebuilder import TraceBuilder, dataloader_bound

import tracedoc
from tracedoc.errors import TraceLoadError
from tracedoc.fixloop.noise import decide
from tracedoc.ranks import analyze_inputs
from tracedoc.render.comparison import _side
from tracedoc.render.ranks import render_markdown, render_text


def test_one_rank_directory_says_one_trace_and_one_rank(tmp_path):
    d = tmp_path / "job"
    d.mkdir()
    dataloader_bound(n_steps=3).write(d / "rank-0.json")  # DataLoader-bound: TD101 on the one rank
    said: list[str] = []
    mr = analyze_inputs([str(d)], jobs=1, ranks=True, progress=said.append)
    assert said == ["analyzing 1 trace with 1 worker process", "analyzed 1/1 trace"]
    console = Console(width=200, record=True, color_system=None)
    render_text(mr, console)
    text = console.export_text()
    assert ": 1 trace" in text and "1/1 rank [rank 0]" in text and "1/1 ranks" not in text
    md = render_markdown(mr)
    assert "on 1/1 rank (most)" in md and "ranks" not in md.split("Cross-rank summary", 1)[1]


def test_two_ranks_stay_plural(tmp_path):
    for r in (0, 1):
        dataloader_bound(n_steps=3).write(tmp_path / f"rank-{r}.json")
    said: list[str] = []
    mr = analyze_inputs([str(tmp_path)], jobs=1, progress=said.append)
    assert said[0] == "analyzing 2 traces with 1 worker process" and said[-1] == "analyzed 2/2 traces"
    assert "on 2/2 ranks (most)" in render_markdown(mr)


def test_other_counts_with_a_noun(tmp_path):
    # the noise rule with a single A/B round
    assert decide([100.0], [110.0], final=False).reason.startswith("median ratio 1.100 over 1 A/B round; at least 5")
    assert " over 5 A/B rounds; " in decide([100.0] * 5, [110.0] * 5).reason
    # a trace's repr with one kernel
    t = tracedoc.load(
        TraceBuilder().step(1, 0, 100).op("aten::mm", 0, 50).kernel("k", 1, 10, 20).write(tmp_path / "one.json")
    )
    assert len(t.kernels) == 1 and ", 1 kernel," in repr(t)
    # a file with one event, not from the profiler
    p = tmp_path / "foreign.json"
    p.write_text(json.dumps({"traceEvents": [{"ph": "X", "name": "x", "ts": 1, "dur": 1, "pid": 1, "tid": 1}]}))
    try:
        tracedoc.load(p)
    except TraceLoadError as exc:
        assert "trace has 1 event but none from the PyTorch profiler" in str(exc)
    else:
        raise AssertionError("a foreign trace loaded")
    # a diff side of one step
    assert _side({"path": "a.json", "kind": "trace", "step_count": 1}) == "a.json (trace, 1 step)"
    assert _side({"path": "a.json", "kind": "trace", "step_count": 2}) == "a.json (trace, 2 steps)"
