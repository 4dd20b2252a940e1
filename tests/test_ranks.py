"""`tracedoc analyze DIR`: per-rank traces in parallel, each reported, plus a cross-rank summary."""

from __future__ import annotations

import json
import shutil

import pytest
from conftest import FIXTURES
from tracebuilder import TraceBuilder, dataloader_bound
from typer.testing import CliRunner

from tracedoc.cli import app
from tracedoc.errors import TraceLoadError
from tracedoc.ranks import analyze_directory, rank_from_filename

runner = CliRunner()


@pytest.mark.parametrize(
    "name,rank",
    [
        ("rank-3.Apr_03_18_51_38.1102.pt.trace.json.gz", 3),
        ("worker0_rank_12_step.json", 12),
        ("rank7.json", 7),
        ("job.RANK-2.json.gz", 2),
        ("trace_rank_0.pt.trace.json", 0),
        ("worker0.1623143089861.pt.trace.json.gz", None),
        ("frankly.json", None),
        ("ranked-3.json", None),
    ],
)
def test_rank_from_filename(name, rank):
    assert rank_from_filename(name) == rank


def _rank_trace(step_us: float, dl_us: float = 20.0, rank: int | None = None) -> dict:
    d = dataloader_bound(n_steps=4, step_us=step_us, dl_us=dl_us).doc()
    if rank is not None:
        d["distributedInfo"] = {"backend": "nccl", "rank": rank, "world_size": 4}
    return d


@pytest.fixture
def synthetic_dir(tmp_path):
    """Four ranks: rank 2 is 50% slower and DataLoader-bound; the others alike."""
    d = tmp_path / "run"
    d.mkdir()
    (d / "host_a.json").write_text(json.dumps(_rank_trace(1000.0, rank=0)))  # rank from distributedInfo
    (d / "trace_rank_1.json").write_text(json.dumps(_rank_trace(1000.0)))  # from the file name
    (d / "rank-2.pt.trace.json").write_text(json.dumps(_rank_trace(1500.0, dl_us=700.0)))
    (d / "rank-3.pt.trace.json").write_text(json.dumps(_rank_trace(1010.0)))
    (d / "notes.txt").write_text("not a trace")  # ignored: not *.json / *.gz
    return d


def test_summary_slowest_rank_and_scoped_findings(synthetic_dir):
    mr = analyze_directory(synthetic_dir, jobs=1)
    assert [r.rank for r in mr.ranks] == [0, 1, 2, 3]
    assert [r.rank_source for r in mr.ranks] == ["distributedInfo", "file name", "file name", "file name"]
    s = mr.summary
    assert s["n_ranks"] == 4
    assert s["step_time_ms"] == {"rank 0": 1.0, "rank 1": 1.0, "rank 2": 1.5, "rank 3": 1.01}
    assert s["slowest_rank"] == "rank 2"
    assert s["median_step_time_ms"] == pytest.approx(1.005)
    assert s["slowest_lag_ms"] == pytest.approx(0.495)
    assert s["slowest_lag_pct"] == pytest.approx(49.25, abs=0.01)
    by_code = {f["code"]: f for f in s["findings"]}
    assert by_code["TD101"]["scope"] == "one" and by_code["TD101"]["ranks"] == ["rank 2"]
    most = [f for f in s["findings"] if f["scope"] == "most"]
    assert all(f["n_ranks"] > 2 for f in most)


def test_parallel_workers_give_the_same_result(synthetic_dir):
    one = analyze_directory(synthetic_dir, jobs=1).to_dict()
    two = analyze_directory(synthetic_dir, jobs=2).to_dict()
    assert one.pop("run")["workers"] == 1 and two.pop("run")["workers"] == 2  # timings differ, nothing else
    assert json.dumps(one, sort_keys=True, default=str) == json.dumps(two, sort_keys=True, default=str)


def test_cli_json_document(synthetic_dir):
    r = runner.invoke(app, ["analyze", str(synthetic_dir), "--format", "json", "--jobs", "2", "--exit-zero"])
    assert r.exit_code == 0, r.output
    doc = json.loads(r.stdout)
    assert doc["schema_version"] == 1 and doc["kind"] == "multi-rank"
    assert len(doc["ranks"]) == 4
    assert all(x["report"]["schema_version"] == 1 and "findings" in x["report"] for x in doc["ranks"])
    assert doc["summary"]["slowest_rank"] == "rank 2"


def test_cli_text_and_markdown(synthetic_dir):
    r = runner.invoke(app, ["analyze", str(synthetic_dir), "-j", "1"])
    assert r.exit_code == 1  # findings at or above info
    out = " ".join(r.stdout.split())  # rich wraps at the terminal width
    assert "cross-rank summary" in out and "slowest: rank 2" in out and "behind the median" in out
    assert "one rank only" in out
    assert "TD101 dataloader-stall (error): 1/4 ranks [rank 2]" in out  # brackets are not a rich tag
    r = runner.invoke(app, ["analyze", str(synthetic_dir), "-j", "1", "-f", "markdown", "--exit-zero"])
    assert r.exit_code == 0 and "| rank |" in r.stdout and "Cross-rank summary" in r.stdout


def test_bad_file_in_directory_is_a_failed_rank(synthetic_dir):
    """Issue 9 item 11: one broken rank is reported as failed; the rest are analyzed."""
    (synthetic_dir / "rank-4.json").write_bytes(b'{"traceEvents": [')
    r = runner.invoke(app, ["analyze", str(synthetic_dir), "-j", "2", "--format", "json", "--exit-zero"])
    assert r.exit_code == 0, r.output
    doc = json.loads(r.stdout)
    assert [x["rank"] for x in doc["ranks"]] == [0, 1, 2, 3]
    assert len(doc["failed"]) == 1 and doc["failed"][0]["path"].endswith("rank-4.json")
    assert "invalid JSON" in doc["failed"][0]["error"]
    assert doc["summary"]["n_ranks"] == 4 and doc["summary"]["slowest_rank"] == "rank 2"
    assert "1 of 5 traces failed" in r.stderr and "rank-4.json" in r.stderr
    # --strict: an incomplete analysis is a failure, one line, exit 2
    r = runner.invoke(app, ["analyze", str(synthetic_dir), "-j", "1", "--strict"])
    assert r.exit_code == 2
    err = r.stderr.strip()
    assert err.count("\n") == 0 and "rank-4.json" in err and "invalid JSON" in err


def test_non_trace_json_is_a_failed_rank(synthetic_dir):
    (synthetic_dir / "config.json").write_text(json.dumps({"lr": 0.1, "batch": 32}))
    mr = analyze_directory(synthetic_dir, jobs=1)
    assert [r.rank for r in mr.ranks] == [0, 1, 2, 3]
    assert [r.path.rsplit("/", 1)[-1] for r in mr.failed] == ["config.json"]
    with pytest.raises(TraceLoadError, match=r"config\.json"):
        analyze_directory(synthetic_dir, jobs=1, strict=True)


def test_truncated_gzip_in_directory(synthetic_dir):
    import gzip

    (synthetic_dir / "rank-5.json.gz").write_bytes(gzip.compress(b'{"traceEvents": []}' * 50)[:30])
    mr = analyze_directory(synthetic_dir, jobs=1)
    assert len(mr.ranks) == 4 and "gzip" in mr.failed[0].error
    with pytest.raises(TraceLoadError, match=r"rank-5\.json\.gz: .*gzip"):
        analyze_directory(synthetic_dir, jobs=1, strict=True)


def test_every_rank_failing_is_an_error(tmp_path):
    (tmp_path / "rank-0.json").write_text("{")
    (tmp_path / "rank-1.json").write_text("[]")
    r = runner.invoke(app, ["analyze", str(tmp_path)])
    assert r.exit_code == 2 and "rank-0.json" in r.stderr and "1 more failed" in r.stderr


def test_skipped_entries_are_said(synthetic_dir, tmp_path):
    """FIFOs, hidden files, *.JSON, subfolders and outside symlinks are skipped, and said."""
    import os

    os.mkfifo(synthetic_dir / "rank-9.json")  # reading it would block forever
    (synthetic_dir / ".rank-8.json").write_text(json.dumps(_rank_trace(1000.0)))
    (synthetic_dir / "RANK-7.JSON").write_text(json.dumps(_rank_trace(1000.0)))
    (synthetic_dir / "sub").mkdir()
    (synthetic_dir / "sub" / "rank-6.json").write_text(json.dumps(_rank_trace(1000.0)))
    outside = tmp_path / "elsewhere.json"
    outside.write_text(json.dumps(_rank_trace(1200.0, rank=5)))
    (synthetic_dir / "rank-5.json").symlink_to(outside)
    inside_target = synthetic_dir / "rank-3.pt.trace.json"
    (synthetic_dir / "alias.txt").symlink_to(inside_target)  # inside, but not a trace name
    r = runner.invoke(app, ["analyze", str(synthetic_dir), "-j", "1", "--format", "json", "--exit-zero"])
    assert r.exit_code == 0, r.output
    doc = json.loads(r.stdout)
    assert [x["rank"] for x in doc["ranks"]] == [0, 1, 2, 3]
    reasons = {x["path"].rsplit("/", 1)[-1]: x["reason"] for x in doc["skipped"]}
    assert reasons["rank-9.json"] == "a FIFO"
    assert reasons[".rank-8.json"] == "hidden"
    assert reasons["RANK-7.JSON"].startswith("upper-case suffix")
    assert reasons["sub"].startswith("subfolder")
    assert "--follow-symlinks" in reasons["rank-5.json"]
    assert "notes.txt" in reasons and "alias.txt" in reasons
    assert "skipped 7: " in r.stderr and "(hidden)" in r.stderr  # the full list is in the report
    # the outside symlink is followed only on request, and that is said
    args = ["analyze", str(synthetic_dir), "-j", "1", "-f", "json", "--exit-zero", "--follow-symlinks", "--ranks"]
    r = runner.invoke(app, args)
    doc = json.loads(r.stdout)
    assert [x["rank"] for x in doc["ranks"]] == [0, 1, 2, 3, 5]
    assert doc["followed_symlinks"][0].endswith("rank-5.json")
    assert "followed symlink outside the folder" in r.stderr


def test_empty_directory_and_duplicate_ranks(tmp_path):
    r = runner.invoke(app, ["analyze", str(tmp_path)])
    assert r.exit_code == 2 and "no trace files" in r.stderr
    (tmp_path / "a.json").write_text(json.dumps(_rank_trace(1000.0, rank=1)))
    (tmp_path / "rank-1.json").write_text(json.dumps(_rank_trace(1000.0)))
    # two traces claiming rank 1 are not the ranks of one job: one report each ...
    r = runner.invoke(app, ["analyze", str(tmp_path), "-f", "json", "--exit-zero"])
    assert r.exit_code == 0 and json.loads(r.stdout)["kind"] == "multi-trace"
    # ... and, forced into rank mode, an error
    r = runner.invoke(app, ["analyze", str(tmp_path), "--ranks"])
    assert r.exit_code == 2 and "rank 1 again" in r.stderr


def test_rule_folder_parsed_once_not_per_rank(synthetic_dir, tmp_path, monkeypatch):
    """Issue 9 item 11: a --rules folder is parsed once in the client, whatever the rank count."""
    import tracedoc.engine.rules as rules_mod

    src = (FIXTURES.parent / "rules").glob("*.toml")
    budget_dir = tmp_path / "budgets"
    budget_dir.mkdir()
    first = sorted(src)[0].read_text()
    (budget_dir / "budget.toml").write_text(
        first.replace(first.split('code = "', 1)[1].split('"', 1)[0], "TD999", 1).replace(
            first.split('name = "', 1)[1].split('"', 1)[0], "my-budget", 1
        )
    )
    calls = []
    real = rules_mod.load_rule_file
    monkeypatch.setattr(rules_mod, "load_rule_file", lambda p: calls.append(p) or real(p))
    mr = analyze_directory(synthetic_dir, jobs=1, rule_paths=[str(budget_dir)])
    assert len(calls) == 1  # four ranks, one parse
    assert all("TD999" in r.report.rules_evaluated for r in mr.ranks)


def test_bad_selector_fails_before_workers(synthetic_dir):
    r = runner.invoke(app, ["analyze", str(synthetic_dir), "--select", "NOPE999"])
    assert r.exit_code == 2


def test_traces_without_any_rank_are_listed_by_file(tmp_path):
    for name in ("b.json", "a.json"):
        TraceBuilder().step(1, 0, 100).op("aten::mm", 0, 50).write(tmp_path / name)
    mr = analyze_directory(tmp_path, jobs=1)
    assert [r.rank for r in mr.ranks] == [None, None]
    assert list(mr.summary["step_time_ms"]) == ["a.json", "b.json"]


def test_real_traces_as_ranks(tmp_path):
    d = tmp_path / "ranks"
    d.mkdir()
    shutil.copy(FIXTURES / "v100_resnet50_ddp_gpu_bound.pt.trace.json.gz", d / "a.json.gz")  # rank 0 inside
    shutil.copy(FIXTURES / "v100_resnet50_workers0.pt.trace.json.gz", d / "w0_rank_1.json.gz")
    shutil.copy(FIXTURES / "v100_resnet50_workers4.pt.trace.json.gz", d / "rank-2.json.gz")
    # a.json.gz says world size 1: not ranks of one job unless told (--ranks)
    r = runner.invoke(app, ["analyze", str(d), "--format", "json", "--exit-zero"])
    assert r.exit_code == 0 and json.loads(r.stdout)["kind"] == "multi-trace"
    r = runner.invoke(app, ["analyze", str(d), "--format", "json", "--exit-zero", "--ranks"])
    assert r.exit_code == 0, r.output
    doc = json.loads(r.stdout)
    assert [x["rank"] for x in doc["ranks"]] == [0, 1, 2]
    assert doc["ranks"][0]["rank_source"] == "distributedInfo"
    s = doc["summary"]
    assert s["slowest_rank"] == "rank 1"  # num_workers=0: DataLoader-bound
    td101 = [f for f in s["findings"] if f["code"] == "TD101"]
    assert td101 and td101[0]["ranks"] == ["rank 1"] and td101[0]["scope"] == "one"
    # each rank's report is the single-trace report
    single = runner.invoke(app, ["analyze", str(d / "rank-2.json.gz"), "--format", "json", "--exit-zero"])
    solo = json.loads(single.stdout)
    assert doc["ranks"][2]["report"]["signals"] == solo["signals"]
    assert doc["ranks"][2]["report"]["findings"] == solo["findings"]
