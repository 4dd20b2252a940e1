"""Issue 12, done-when: a Dask LocalCluster and the local process pool give the same
JSON cross-rank summary, byte for byte except timings, on 8 ranks built from a real DDP
trace with one rank delayed on purpose; that rank is named the straggler in both."""

from __future__ import annotations

import json

import distributed  # noqa: F401  (the dask extra is part of the dev extra: a missing one is a failure)
import pytest
from fleetbuild import build_rank_dir
from typer.testing import CliRunner

from tracedoc.cli import app

runner = CliRunner()
DELAYED = 5


@pytest.fixture(scope="module")
def rank_dir(tmp_path_factory):
    d = tmp_path_factory.mktemp("fleet") / "job"
    expected = build_rank_dir(d, n_ranks=8, delayed=DELAYED, delay_us=300.0)
    return d, expected


def _run(args):
    r = runner.invoke(app, ["analyze", *args, "--format", "json", "--exit-zero", "--no-cache"])
    assert r.exit_code == 0, r.output
    doc = json.loads(r.stdout)
    run = doc.pop("run")
    return doc, run, r.stdout


def test_dask_local_cluster_equals_process_pool(rank_dir):
    d, expected = rank_dir
    pool, pool_run, _ = _run([str(d), "--jobs", "2"])
    dask, dask_run, _ = _run([str(d), "--scheduler", "local", "--jobs", "2"])
    assert pool_run["executor"] == "process pool" and dask_run == {**dask_run, "executor": "dask", "scheduler": "local"}
    # byte for byte, once the timings ("run") are taken out
    assert json.dumps(pool, indent=2) == json.dumps(dask, indent=2)
    s = pool["summary"]
    assert s["n_ranks"] == 8 and [x["rank"] for x in pool["ranks"]] == list(range(8))
    c = s["collectives"]
    assert s["straggler"] == c["straggler"] == f"rank {DELAYED}"
    assert c["n_matched"] == expected["n_collectives"] > 500
    assert c["straggler_last_share"] == 1.0  # it arrived last at every AllReduce
    assert c["straggler_lag_ms_total"] == pytest.approx(expected["lag_ms_total"], abs=0.01)
    # per step: the delayed rank, in each step
    steps = [st for st in c["per_step"] if st["step"] is not None]
    assert len(steps) == expected["n_steps"] == 2 and {st["straggler"] for st in steps} == {f"rank {DELAYED}"}
    assert sum(st["lag_ms"] for st in c["per_step"]) == pytest.approx(expected["lag_ms_total"], abs=0.05)
    assert c["kinds"][0]["kind"] == "AllReduce" and c["worst"][0]["straggler"] == f"rank {DELAYED}"
    assert dask["summary"]["straggler"] == f"rank {DELAYED}"
    # the text report names it too
    r = runner.invoke(app, ["analyze", str(d), "-j", "1", "--exit-zero", "--no-cache", "--select", "TD1"])
    out = " ".join(r.stdout.split())
    assert f"straggler: rank {DELAYED}" in out and "arrived last in 100%" in out and "per step" in out


def test_unreachable_scheduler_is_one_line_exit_2(rank_dir, monkeypatch):
    d, _ = rank_dir
    monkeypatch.setenv("TRACEDOC_DASK_TIMEOUT", "2s")
    r = runner.invoke(app, ["analyze", str(d), "--scheduler", "tcp://127.0.0.1:9", "--no-cache"])
    assert r.exit_code == 2
    assert r.stderr.strip().count("\n") == 0 and "Dask scheduler" in r.stderr
    assert "cannot reach the Dask scheduler tcp://127.0.0.1:9 (no answer: " in r.stderr


def test_existing_cluster_by_address(tmp_path):
    """`--scheduler tcp://HOST:PORT`: an existing cluster (here one started by the test) runs the jobs."""
    from distributed import LocalCluster
    from tracebuilder import dataloader_bound

    for r, (step, dl) in enumerate(((1000.0, 20.0), (1000.0, 20.0), (1500.0, 700.0))):
        d = dataloader_bound(n_steps=4, step_us=step, dl_us=dl).doc()
        d["distributedInfo"] = {"backend": "nccl", "rank": r, "world_size": 3}
        (tmp_path / f"rank-{r}.json").write_text(json.dumps(d))
    pool, _, _ = _run([str(tmp_path), "--jobs", "1"])
    with LocalCluster(
        n_workers=1, threads_per_worker=1, processes=False, protocol="tcp", dashboard_address=None
    ) as cluster:
        remote, run, _ = _run([str(tmp_path), "--scheduler", cluster.scheduler_address])
    assert run["executor"] == "dask" and run["scheduler"].startswith("tcp://")
    assert json.dumps(pool) == json.dumps(remote)
    assert remote["summary"]["slowest_rank"] == "rank 2"
