"""`tracedoc analyze DIR`: per-rank traces in parallel, each reported, plus a cross-rank summary."""

from __future__ import annotations

import json
import os
import shutil

import pytest
from conftest import FIXTURES
from tracebuilder import TraceBuilder, budget_rule_toml, comm_rank, dataloader_bound, write_comm_ranks
from typer.testing import CliRunner

from tracedoc.cli import app
from tracedoc.errors import TraceLoadError
from tracedoc.ranks import analyze_directory, analyze_inputs, rank_from_filename

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
    assert doc["schema_version"] == 2 and doc["kind"] == "multi-rank"
    assert len(doc["ranks"]) == 4
    assert all(x["report"]["schema_version"] == 2 and "findings" in x["report"] for x in doc["ranks"])
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
    # ... and said (issue 21): the note names the rank and each file claiming it
    (note,) = json.loads(r.stdout)["notes"]
    assert "rank 1 in 2 traces (a.json: distributedInfo, rank-1.json: file name)" in note
    assert "warning: duplicate ranks" in r.stderr
    for fmt in ("text", "markdown"):  # and in the report a person reads
        r = runner.invoke(app, ["analyze", str(tmp_path), "-f", fmt, "--exit-zero"])
        assert "note: duplicate ranks" in r.stdout and "rank-1.json" in r.stdout.split("note: duplicate")[1], fmt
    # ... and, forced into rank mode, an error
    r = runner.invoke(app, ["analyze", str(tmp_path), "--ranks"])
    assert r.exit_code == 2 and "rank 1 again" in r.stderr


def test_rule_folder_parsed_once_not_per_rank(synthetic_dir, tmp_path, monkeypatch):
    """Issue 9 item 11: a --rules folder is parsed once in the client, whatever the rank count."""
    import tracedoc.engine.rules as rules_mod

    budget_dir = tmp_path / "budgets"
    budget_dir.mkdir()
    (budget_dir / "budget.toml").write_text(budget_rule_toml(120, code="TD999"))
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


# -- several inputs: files, globs, unrelated folders, URLs (issue 11, inputs) -------------------------


def test_several_files_and_a_glob_give_one_report_each(tmp_path):
    TraceBuilder().step(1, 0, 100).op("aten::mm", 0, 50).write(tmp_path / "a.json")
    dataloader_bound(n_steps=3).write(tmp_path / "b.json")
    (tmp_path / "c.txt").write_text("not matched by the glob")
    r = runner.invoke(app, ["analyze", str(tmp_path / "a.json"), str(tmp_path / "b.json"), "-f", "json", "-j", "1"])
    assert r.exit_code == 1, r.output  # b is DataLoader-bound: findings
    doc = json.loads(r.stdout)
    assert doc["kind"] == "multi-trace" and [t["path"].rsplit("/", 1)[-1] for t in doc["traces"]] == [
        "a.json",
        "b.json",
    ]
    codes_b = {f["code"] for f in doc["traces"][1]["report"]["findings"]}
    assert "TD101" in codes_b and "TD101" not in {f["code"] for f in doc["traces"][0]["report"]["findings"]}
    r = runner.invoke(app, ["analyze", str(tmp_path / "*.json"), "-f", "json", "-j", "1", "--exit-zero"])
    assert r.exit_code == 0 and len(json.loads(r.stdout)["traces"]) == 2
    r = runner.invoke(app, ["analyze", str(tmp_path / "*.nothing")])
    assert r.exit_code == 2 and "no file matches" in r.stderr
    # a single file stays the single-trace report
    r = runner.invoke(app, ["analyze", str(tmp_path / "b.json"), "-f", "json", "--exit-zero"])
    assert "kind" not in json.loads(r.stdout) and "findings" in json.loads(r.stdout)


def test_the_fixtures_folder_of_unrelated_traces(tmp_path):
    """`tracedoc analyze fixtures/`: the project's own folder of unrelated real traces, one report each."""
    r = runner.invoke(app, ["analyze", str(FIXTURES), "-f", "json", "-j", "2", "--no-cache", "--exit-zero"])
    assert r.exit_code == 0, r.output
    doc = json.loads(r.stdout)
    names = sorted(p.name for p in FIXTURES.iterdir() if p.name.endswith(".gz"))
    assert doc["kind"] == "multi-trace" and not doc["failed"]
    assert [t["path"].rsplit("/", 1)[-1] for t in doc["traces"]] == names
    assert {s["path"].rsplit("/", 1)[-1] for s in doc["skipped"]} == {
        "PROVENANCE.md",
        "calibration",
        "gpu_runs",  # the H100 session's run files (fixtures/gpu_runs/README.md): folders, not a trace
        "licenses",
        "schemas",
    }
    # cpu_only_gloo (rank 34 of 300) and the DDP traces carry ranks, but not of one job
    assert all(t["report"]["schema_version"] == 2 for t in doc["traces"])


def test_fsspec_memory_folder_as_ranks():
    """Paths through fsspec: a memory:// folder (in-process: memory:// is per process)."""
    import fsspec

    fs = fsspec.filesystem("memory")
    for r, step in ((0, 1000.0), (1, 1000.0), (2, 1500.0)):
        with fs.open(f"/fleetjob/rank-{r}.json", "wb") as fh:
            fh.write(json.dumps(_rank_trace(step, dl_us=20.0 if r != 2 else 700.0, rank=r)).encode())
    with fs.open("/fleetjob/.hidden.json", "wb") as fh:
        fh.write(b"{}")
    try:
        r = runner.invoke(app, ["analyze", "memory://fleetjob", "-j", "1", "-f", "json", "--exit-zero"])
        assert r.exit_code == 0, r.output
        doc = json.loads(r.stdout)
        assert doc["kind"] == "multi-rank" and [x["rank"] for x in doc["ranks"]] == [0, 1, 2]
        p0 = doc["ranks"][0]["path"]  # fsspec's own spelling of the URL (memory:///fleetjob/...)
        assert p0.startswith("memory://") and p0.endswith("fleetjob/rank-0.json")
        assert doc["summary"]["slowest_rank"] == "rank 2"
        assert [s["reason"] for s in doc["skipped"]] == ["hidden"]
        # one URL of one trace: the single-trace report, read through fsspec
        r = runner.invoke(app, ["analyze", "memory://fleetjob/rank-2.json", "-f", "json", "--exit-zero"])
        assert r.exit_code == 0 and json.loads(r.stdout)["signals"]["step_time_ms"] == pytest.approx(1.5)
        r = runner.invoke(app, ["analyze", "memory://fleetjob/missing.json"])
        assert r.exit_code == 2 and "memory://fleetjob/missing.json" in r.stderr
    finally:
        fs.rm("/fleetjob", recursive=True)


def test_file_url_gzip_ranks_in_worker_processes(tmp_path):
    """file:// URLs, gzipped, each read by its own worker process (-j 2)."""
    import gzip

    d = tmp_path / "job"
    d.mkdir()
    for r in range(3):
        (d / f"rank-{r}.json.gz").write_bytes(gzip.compress(json.dumps(_rank_trace(1000.0 + 100 * r)).encode()))
    (d / "rank-3.json.gz").write_bytes(gzip.compress(json.dumps(_rank_trace(1000.0)).encode())[:40])
    r = runner.invoke(app, ["analyze", f"file://{d}", "-j", "2", "-f", "json", "--exit-zero"])
    assert r.exit_code == 0, r.output
    doc = json.loads(r.stdout)
    assert [x["rank"] for x in doc["ranks"]] == [0, 1, 2] and doc["summary"]["slowest_rank"] == "rank 2"
    assert "truncated gzip" in doc["failed"][0]["error"] and doc["failed"][0]["path"].startswith("file://")


# -- collectives across ranks: the straggler (issue 8, multi-rank) ------------------------------------


def test_collectives_name_the_straggler_per_collective_and_step(tmp_path):
    # hand-made durations (µs). Step 1: rank 2 is late (the others wait 100); step 2: rank 0 is
    # late at the AllReduce only (others wait 40 and 60).
    write_comm_ranks(tmp_path)
    mr = analyze_directory(tmp_path, jobs=1)
    c = mr.summary["collectives"]
    # hand count: AllReduce step 1: rank 2 last, others wait 100, 100 -> lag 100; step 2: rank 0 last,
    # waits 40 (rank 1), 60 (rank 2) -> lag median 50. AllGather step 1: rank 2, lag 100; step 2: tie, 0.
    assert c["source"] == "kernels" and c["n_matched"] == 4
    assert c["straggler"] == "rank 2" and mr.summary["straggler"] == "rank 2"
    assert c["caused_wait_ms"] == {"rank 0": 0.05, "rank 1": 0.0, "rank 2": 0.2}
    assert c["straggler_lag_ms_total"] == 0.2
    assert c["per_step"] == [
        {"step": 1, "straggler": "rank 2", "lag_ms": 0.2},
        {"step": 2, "straggler": "rank 0", "lag_ms": 0.05},
    ]
    by_kind = {k["kind"]: k for k in c["kinds"]}
    assert by_kind["AllReduce"]["lag_ms_total"] == 0.15 and by_kind["AllGather"]["lag_ms_total"] == 0.1
    w = c["worst"][0]
    assert (w["straggler"], w["lag_ms"], w["step"]) == ("rank 2", 0.1, 1)
    assert w["wait_ms"] == {"rank 0": 0.1, "rank 1": 0.1, "rank 2": 0.0}


def test_equal_collectives_have_no_straggler_and_counts_that_differ_are_said(tmp_path):
    same = {"AllReduce": [80.0, 80.0], "AllGather": [40.0, 40.0]}
    for r in range(2):
        (tmp_path / f"r{r}.json").write_text(json.dumps(comm_rank(r, same, world=2)))
    c = analyze_directory(tmp_path, jobs=1).summary["collectives"]
    assert c["straggler"] is None and c["straggler_lag_ms_total"] == 0.0
    doc = comm_rank(1, same, world=2)
    doc["traceEvents"] = [e for e in doc["traceEvents"] if "AllGather" not in str(e.get("name"))][:]
    (tmp_path / "r1.json").write_text(json.dumps(doc))
    c = analyze_directory(tmp_path, jobs=1).summary["collectives"]
    assert [k["kind"] for k in c["kinds"]] == ["AllReduce"]  # AllGather exists on one rank only


def test_gloo_cpu_collectives_on_cpu_only_ranks(tmp_path):
    """CPU-only gloo ranks: the blocking gloo:* ops are compared (the real gloo trace's shape)."""
    for r, dur in ((0, 500.0), (1, 200.0)):  # rank 1's op is shortest: the others waited for it
        b = TraceBuilder().step(1, 0, 1000).op("gloo:all_reduce", 100, dur).op("gloo:all_reduce", 700, 100)
        d = b.doc()
        d["distributedInfo"] = {"backend": "gloo", "rank": r, "world_size": 2}
        (tmp_path / f"rank{r}.json").write_text(json.dumps(d))
    c = analyze_directory(tmp_path, jobs=1).summary["collectives"]
    assert c["source"] == "gloo ops" and c["straggler"] == "rank 1" and c["straggler_lag_ms_total"] == 0.3


def test_exposed_communication_per_rank_when_the_signal_exists(synthetic_dir):
    """The summary carries each rank's `exposed_comm_ms` signal when the reports have it."""
    from tracedoc.ranks import summarize

    mr = analyze_directory(synthetic_dir, jobs=1)
    if "exposed_comm_ms" not in mr.ranks[0].report.signals:  # the signal arrives with the ledger work
        assert "exposed_comm_ms" not in mr.summary
        for i, r in enumerate(mr.ranks):
            r.report.signals["exposed_comm_ms"] = 1.5 * i
    s = summarize(mr.ranks)
    assert set(s["exposed_comm_ms"]) == {"rank 0", "rank 1", "rank 2", "rank 3"}
    assert all(v is None or v >= 0 for v in s["exposed_comm_ms"].values())


# -- [tool.tracedoc] threshold overrides and the finding floors reach every rank ---------------------


@pytest.fixture(scope="module")
def real_rank_dir(tmp_path_factory):
    """Two real V100 ResNet-50 traces as ranks 0 and 1 (ranks from the file names), with a
    ``[tool.tracedoc]`` table beside them that moves TD101's threshold from 0.05 to 0.5.

    Figures from each trace analyzed alone with no settings (``tracedoc analyze FILE -f json``):
    rank 0 (num_workers=0) has DataLoader share 33.4% and findings TD101 58.7, TD301 33.3,
    TD210 9.9, TD202 5.3 ms per step; rank 1 (num_workers=4) TD301 33.6, TD201 17.8, TD102 6.3,
    TD202 5.9, TD210 4.7 ms. So with the override (33.4% < 50%) and ``--min-saving-ms 20``
    each rank keeps TD301 alone; without the override rank 0 keeps TD101 too."""
    root = tmp_path_factory.mktemp("cfg")
    d = root / "job"
    d.mkdir()
    shutil.copy(FIXTURES / "v100_resnet50_workers0.pt.trace.json.gz", d / "rank-0.json.gz")
    shutil.copy(FIXTURES / "v100_resnet50_workers4.pt.trace.json.gz", d / "rank-1.json.gz")
    (root / "pyproject.toml").write_text("[tool.tracedoc.thresholds]\nTD101 = { dataloader_share = 0.5 }\n")
    return d


def _json(args):
    r = runner.invoke(app, ["analyze", *map(str, args), "-f", "json", "--exit-zero", "--no-cache"])
    assert r.exit_code == 0, r.output
    return json.loads(r.stdout)


@pytest.mark.parametrize("executor", [["-j", "2"], ["--scheduler", "local", "-j", "2"]], ids=["pool", "dask"])
def test_threshold_overrides_and_floors_apply_to_every_rank(real_rank_dir, executor, monkeypatch):
    """The settings a single trace gets ([tool.tracedoc.thresholds], --min-saving-ms) reach
    each rank's analysis, in the process pool and on Dask: each rank's findings are those of
    the same trace analyzed alone under the same settings."""
    monkeypatch.delenv("TRACEDOC_NO_CONFIG", raising=False)
    floor = ["--min-saving-ms", "16"]
    doc = _json([real_rank_dir, *executor, *floor])
    assert doc["kind"] == "multi-rank" and doc["run"]["executor"] == (
        "dask" if "--scheduler" in executor else "process pool"
    )
    rank0, rank1 = (x["report"] for x in doc["ranks"])
    assert [f["code"] for f in rank0["findings"]] == [] and [f["code"] for f in rank1["findings"]] == ["TD201"]
    # the override: TD101 was evaluated on rank 0 and did not hold (not even below the floor)
    assert "TD101" in rank0["rules_evaluated"] and "TD101" not in {f["code"] for f in rank0["also_true"]}
    # the floor: TD210 (15.1 ms replayed on rank 0) and TD102 (3.2 ms on rank 1) are below 16 ms; TD201
    # (28.5 ms on rank 1) is above it
    assert "TD102" in {f["code"] for f in rank1["also_true"]} and "TD210" in {f["code"] for f in rank0["also_true"]}
    assert [f["code"] for f in doc["summary"]["findings"]] == ["TD201"]
    for x in doc["ranks"]:  # the single-trace path under the same pyproject.toml and floor
        solo = _json([x["path"], *floor])
        assert x["report"]["findings"] == solo["findings"] and x["report"]["also_true"] == solo["also_true"]
    # and without the table, rank 0's DataLoader stall is back in the directory report
    monkeypatch.setenv("TRACEDOC_NO_CONFIG", "1")
    bare = _json([real_rank_dir, *executor, *floor])
    assert [f["code"] for f in bare["ranks"][0]["report"]["findings"]] == ["TD101"]


def test_analyze_directory_takes_threshold_overrides(synthetic_dir):
    """The Python API: ``thresholds`` as in [tool.tracedoc.thresholds]. Rank 2's DataLoader share
    is 700/1500 = 46.7% (the builder's construction): TD101 holds above 0.05, not above 0.5."""
    assert "TD101" in {f.code for f in analyze_directory(synthetic_dir, jobs=1).ranks[2].report.findings}
    mr = analyze_directory(synthetic_dir, jobs=1, thresholds={"dataloader-stall": {"dataloader_share": 0.5}})
    assert all("TD101" not in {f.code for f in r.report.findings} for r in mr.ranks)
    assert all("TD101" in r.report.rules_evaluated for r in mr.ranks)


def test_json_envelope_of_both_many_trace_reports(synthetic_dir):
    """Both documents share one envelope (key order included): header, body, failed, skipped,
    followed symlinks, run."""
    (synthetic_dir / "rank-9.json").write_bytes(b'{"traceEvents": [')
    tail = ["failed", "skipped", "followed_symlinks", "run"]
    for ranks, kind, body in (
        (True, "multi-rank", ["directory", "ranks", "summary"]),
        (False, "multi-trace", ["inputs", "traces"]),
    ):
        rep = analyze_inputs([str(synthetic_dir)], jobs=1, ranks=ranks)
        doc = rep.to_dict()
        assert list(doc) == ["schema_version", "kind", "tool", *body, *tail] and doc["kind"] == kind
        assert doc["schema_version"] == 2 and doc["tool"]["name"] == "tracedoc"
        assert [f["path"].rsplit("/", 1)[-1] for f in doc["failed"]] == ["rank-9.json"]
        assert "invalid JSON" in doc["failed"][0]["error"]
        assert doc["skipped"] == [{"path": str(synthetic_dir / "notes.txt"), "reason": rep.skipped[0][1]}]
        assert doc["followed_symlinks"] == [] and doc["run"]["executor"] == "process pool"
        results = doc["ranks"] if ranks else doc["traces"]
        assert len(results) == 4 and all(r["report"]["schema_version"] == 2 for r in results)
        assert len(rep.findings) == sum(len(r["report"]["findings"]) for r in results)


@pytest.mark.parametrize("jobs", ["1", "2"])
def test_the_size_limit_reaches_every_worker_as_an_argument(tmp_path, monkeypatch, jobs):
    """--max-trace-bytes is passed to each rank job (Settings, not an environment variable the
    workers happen to inherit): both traces of the folder fail on it, and the CLI leaves the
    environment as it was."""
    monkeypatch.delenv("TRACEDOC_MAX_TRACE_BYTES", raising=False)
    for name in ("v100_resnet50_workers0.pt.trace.json.gz", "v100_resnet50_workers4.pt.trace.json.gz"):
        shutil.copy(FIXTURES / name, tmp_path / name)
    r = runner.invoke(
        app, ["analyze", str(tmp_path), "--no-ranks", "-j", jobs, "--max-trace-bytes", "1M", "-f", "json"]
    )
    assert r.exit_code == 2, r.output
    assert "1 MiB limit" in r.output or "MiB limit" in r.output
    assert "TRACEDOC_MAX_TRACE_BYTES" not in os.environ
    # without the option the same folder is analyzed
    ok = runner.invoke(app, ["analyze", str(tmp_path), "--no-ranks", "-j", jobs, "-f", "json", "--exit-zero"])
    assert ok.exit_code == 0, ok.output
