"""``tracedoc mcp``: the tools, through the official SDK's own client, in-process."""

from __future__ import annotations

import asyncio
import json
import shutil
from pathlib import Path

import pytest

pytest.importorskip("mcp")  # the dev extra installs it (nothing skips in CI)

from mcp import Client  # noqa: E402

from tracedoc.mcpserver import build_server  # noqa: E402

FIX = Path(__file__).resolve().parents[1] / "fixtures"
TOOLS = {"analyze", "explain_rule", "list_signals", "diff", "op_view"}


def call(root: Path, tool: str, args: dict):
    async def go():
        async with Client(build_server([root])) as client:
            return await client.call_tool(tool, args)

    return asyncio.run(go())


def payload(result) -> object:
    assert not result.is_error, result.content
    if result.structured_content is not None:
        sc = result.structured_content
        return sc.get("result", sc) if isinstance(sc, dict) and set(sc) == {"result"} else sc
    return json.loads(result.content[0].text)


@pytest.fixture
def root(tmp_path):
    shutil.copy(FIX / "v100_resnet50_workers0.pt.trace.json.gz", tmp_path / "w0.pt.trace.json.gz")
    shutil.copy(FIX / "v100_resnet50_workers4.pt.trace.json.gz", tmp_path / "w4.pt.trace.json.gz")
    return tmp_path


def test_lists_the_tools(root):
    async def go():
        async with Client(build_server([root])) as client:
            return await client.list_tools()

    names = {t.name for t in asyncio.run(go()).tools}
    assert names == TOOLS


def test_analyze_returns_the_json_report(root):
    import tracedoc

    got = payload(call(root, "analyze", {"path": "w0.pt.trace.json.gz"}))
    want = tracedoc.analyze(str(root / "w0.pt.trace.json.gz")).to_dict()
    assert [f["code"] for f in got["findings"]] == [f["code"] for f in want["findings"]]
    assert got["findings"][0]["code"] == "TD101"


@pytest.mark.parametrize("outside", ["../x.pt.trace.json", "/etc/passwd", "link/escape"])
def test_paths_outside_the_roots_are_refused(root, tmp_path_factory, outside):
    elsewhere = tmp_path_factory.mktemp("elsewhere")
    shutil.copy(FIX / "v100_resnet50_workers0.pt.trace.json.gz", elsewhere / "escape")
    (root / "link").symlink_to(elsewhere)  # a link inside the root that points out of it
    result = call(root, "analyze", {"path": outside})
    assert result.is_error
    assert "outside the allowed roots" in result.content[0].text


def test_explain_rule_and_signals(root):
    rule = payload(call(root, "explain_rule", {"rule": "dataloader-stall"}))
    assert rule["code"] == "TD101" and rule["fix"]["knobs"] == ["num_workers"]
    signals = payload(call(root, "list_signals", {}))
    assert {"step_time_ms", "dataloader_share"} <= {s["name"] for s in signals}


def test_diff_two_traces(root):
    got = payload(call(root, "diff", {"before": "w0.pt.trace.json.gz", "after": "w4.pt.trace.json.gz"}))
    assert got["step_time_ms"]["after"] < got["step_time_ms"]["before"]
    assert "TD101" in {f["code"] for f in got["resolved"]}
