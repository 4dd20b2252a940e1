"""Fleet benchmark: many ranks on Dask vs the process pool, and the frame cache.

    python benchmarks/fleet.py --ranks 64 --runs 3 --json bench-out/fleet.json

In one run, on this machine:

1. **Ranks.** A folder of ``--ranks`` ranks built from the real DDP trace
   ``fixtures/v100_ddp_memory_events.pt.trace.json.gz`` (``tests/fleetbuild.py``: its first
   ``--steps`` steps, one rank delayed on purpose) is analyzed with
   ``tracedoc analyze DIR --jobs 2`` (process pool) and ``--scheduler local --jobs 2``
   (a Dask LocalCluster of 2 single-threaded workers, started and stopped inside the
   command), alternating which goes first, ``--runs`` times each. Wall time of the
   whole command (interpreter start, cluster start, analysis, JSON) and the peak RSS of
   the largest process (``wait4``). Medians are reported. Each Dask JSON is checked
   equal to the pool's except the ``run`` timings.
2. **Per-rank cost.** One rank analyzed alone in a fresh process (``--jobs 1``): wall,
   peak RSS, and the pickled size of its result (what a worker sends back).
3. **Scheduler overhead per task.** 2,000 no-op tasks through a 2-process pool and through
   a 2-worker LocalCluster (``client.map``/``gather``), after start-up; and the
   LocalCluster start-up itself.
4. **Cache.** A 300 MB trace (``benchmarks/make_trace.py`` x10 of the workers0 trace):
   ``tracedoc analyze`` with an empty cache (cold: parse, analyze, write the entry), then
   again (warm: read the entry), ``--cache-runs`` pairs; also ``--no-cache``.
"""

from __future__ import annotations

import argparse
import json
import os
import pickle
import shutil
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

REPO = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(REPO / "tests"))
TRACEDOC = [sys.executable, "-m", "tracedoc"]


def timed(cmd: list[str], env: dict | None = None) -> dict:
    """Run ``cmd``; wall seconds, peak RSS (MB, largest process of the tree) and stdout."""
    t0 = time.perf_counter()
    with tempfile.TemporaryFile() as out:
        p = subprocess.Popen(cmd, stdout=out, stderr=subprocess.DEVNULL, env=env)
        _, status, ru = os.wait4(p.pid, 0)
        wall = time.perf_counter() - t0
        out.seek(0)
        text = out.read().decode()
    rc = os.waitstatus_to_exitcode(status)
    return {"wall_s": wall, "peak_rss_mb": ru.ru_maxrss / 1024.0, "rc": rc, "stdout": text}


def _noop(x: int) -> int:
    return x


def scheduler_overhead(n: int = 2000) -> dict:
    """Seconds per no-op task: process pool (2) and Dask LocalCluster (2 workers); cluster start."""
    from concurrent.futures import ProcessPoolExecutor

    from distributed import Client, LocalCluster

    with ProcessPoolExecutor(max_workers=2) as pool:
        list(pool.map(_noop, range(10)))  # workers up
        t0 = time.perf_counter()
        list(pool.map(_noop, range(n)))
        pool_s = (time.perf_counter() - t0) / n
    t0 = time.perf_counter()
    cluster = LocalCluster(n_workers=2, threads_per_worker=1, processes=True, dashboard_address=None)
    client = Client(cluster)
    start_s = time.perf_counter() - t0
    client.gather(client.map(_noop, range(10), pure=False))
    t0 = time.perf_counter()
    client.gather(client.map(_noop, range(n), pure=False))
    dask_s = (time.perf_counter() - t0) / n
    client.close()
    cluster.close()
    return {"pool_ms_per_task": pool_s * 1e3, "dask_ms_per_task": dask_s * 1e3, "dask_cluster_start_s": start_s}


def per_rank_cost(path: Path) -> dict:
    """One rank alone: wall and peak RSS of ``tracedoc analyze RANK`` in a fresh process, and
    the pickled size of the per-rank result a worker returns."""
    from tracedoc.ranks.job import analyze_one, result_nbytes

    run = timed([*TRACEDOC, "analyze", str(path), "-f", "json", "--no-cache", "--exit-zero"])
    t0 = time.perf_counter()
    r = analyze_one(str(path), decode_workers=1)
    job_s = time.perf_counter() - t0
    report_only = len(pickle.dumps(r.report, protocol=pickle.HIGHEST_PROTOCOL))
    return {
        "command_wall_s": run["wall_s"],
        "command_peak_rss_mb": run["peak_rss_mb"],
        "job_s": job_s,
        "result_bytes": result_nbytes(r),
        "report_bytes": report_only,
        "trace_bytes_gz": path.stat().st_size,
        "n_collectives": r.collectives.count if r.collectives else 0,
    }


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--ranks", type=int, default=64)
    ap.add_argument("--steps", type=int, default=1, help="steps of the real trace kept per rank")
    ap.add_argument("--runs", type=int, default=3, help="pool/Dask runs each, alternating")
    ap.add_argument("--cache-runs", type=int, default=3, help="cold/warm pairs on the 300 MB trace")
    ap.add_argument("--cache-repeats", type=int, default=10, help="make_trace.py repeats (10: 301 MB)")
    ap.add_argument("--out", type=Path, default=REPO / "bench-out")
    ap.add_argument("--skip-fleet", action="store_true")
    ap.add_argument("--skip-cache", action="store_true")
    ap.add_argument("--json", type=Path)
    a = ap.parse_args(argv)
    a.out.mkdir(parents=True, exist_ok=True)
    res: dict = {"machine": {"cpus": os.cpu_count(), "load_before": os.getloadavg()}}

    if not a.skip_fleet:
        from fleetbuild import build_rank_dir

        d = a.out / f"fleet{a.ranks}"
        if d.exists():
            shutil.rmtree(d)
        expected = build_rank_dir(d, n_ranks=a.ranks, delayed=a.ranks // 3, steps=a.steps)
        res["fleet"] = {"ranks": a.ranks, "delayed": a.ranks // 3, "expected": expected, "pool": [], "dask": []}
        base = [*TRACEDOC, "analyze", str(d), "-f", "json", "--no-cache", "--exit-zero", "--jobs", "2"]
        modes = {"pool": base, "dask": [*base, "--scheduler", "local"]}
        docs = {}
        for i in range(a.runs):
            for mode in ("pool", "dask") if i % 2 == 0 else ("dask", "pool"):
                r = timed(modes[mode])
                doc = json.loads(r["stdout"])
                run = doc.pop("run")
                docs.setdefault(mode, doc)
                res["fleet"][mode].append(
                    {"wall_s": r["wall_s"], "peak_rss_mb": r["peak_rss_mb"], "analysis_s": run["seconds"]}
                )
                print(
                    f"{mode}: {r['wall_s']:.2f} s, peak {r['peak_rss_mb']:.0f} MB, straggler {doc['summary']['straggler']}"
                )
                assert doc == docs["pool" if "pool" in docs else mode], f"{mode} JSON differs from the pool's"
        f = res["fleet"]
        f["pool_median_s"] = statistics.median(x["wall_s"] for x in f["pool"])
        f["dask_median_s"] = statistics.median(x["wall_s"] for x in f["dask"])
        f["dask_vs_pool"] = f["dask_median_s"] / f["pool_median_s"]
        f["same_json"] = json.dumps(docs["pool"]) == json.dumps(docs["dask"])
        f["straggler"] = docs["pool"]["summary"]["straggler"]
        res["per_rank"] = per_rank_cost(d / "rank-0.json.gz")
        res["overhead"] = scheduler_overhead()
        print(json.dumps({k: v for k, v in f.items() if k not in ("pool", "dask")}, indent=1))
        print(json.dumps(res["per_rank"], indent=1), json.dumps(res["overhead"], indent=1))

    if not a.skip_cache:
        big = a.out / f"v100_resnet50_workers0_x{a.cache_repeats}.json"
        if not big.exists():
            subprocess.run(
                [
                    sys.executable,
                    str(REPO / "benchmarks" / "make_trace.py"),
                    str(REPO / "fixtures" / "v100_resnet50_workers0.pt.trace.json.gz"),
                    str(a.cache_repeats),
                    str(big),
                ],
                check=True,
            )
        cdir = a.out / "cache"
        cmd = [*TRACEDOC, "analyze", str(big), "-f", "json", "--exit-zero", "--cache-dir", str(cdir)]
        pairs = []
        for _ in range(a.cache_runs):
            shutil.rmtree(cdir, ignore_errors=True)
            cold = timed(cmd)
            warm = timed(cmd)
            nocache = timed([*cmd, "--no-cache"])
            assert cold["stdout"] == warm["stdout"] == nocache["stdout"], "cached report differs"
            pairs.append(
                {
                    "cold_s": cold["wall_s"],
                    "warm_s": warm["wall_s"],
                    "nocache_s": nocache["wall_s"],
                    "cold_rss_mb": cold["peak_rss_mb"],
                    "warm_rss_mb": warm["peak_rss_mb"],
                    "ratio": warm["wall_s"] / cold["wall_s"],
                    "ratio_vs_nocache": warm["wall_s"] / nocache["wall_s"],
                }
            )
            print("cache:", {k: round(v, 3) for k, v in pairs[-1].items()})
        res["cache"] = {
            "trace_bytes": big.stat().st_size,
            "pairs": pairs,
            "median_cold_s": statistics.median(p["cold_s"] for p in pairs),
            "median_warm_s": statistics.median(p["warm_s"] for p in pairs),
            "median_nocache_s": statistics.median(p["nocache_s"] for p in pairs),
            "median_ratio": statistics.median(p["ratio"] for p in pairs),
            "median_ratio_vs_nocache": statistics.median(p["ratio_vs_nocache"] for p in pairs),
            "entry_bytes": sum(f.stat().st_size for f in cdir.rglob("*") if f.is_file()),
        }
        print(json.dumps({k: v for k, v in res["cache"].items() if k != "pairs"}, indent=1))
    res["machine"]["load_after"] = os.getloadavg()
    if a.json:
        a.json.parent.mkdir(parents=True, exist_ok=True)
        a.json.write_text(json.dumps(res, indent=1))
    return 0


if __name__ == "__main__":
    sys.exit(main())
