"""Benchmark: tracedoc analyze vs orjson.loads on large traces built from a real one.

    python benchmarks/run.py                      # x10 and x20 of v100_resnet50_workers0, plus x10 gzipped
    python benchmarks/run.py --repeats 10 20 60 --gzip 10 --runs 3

For each trace (built by ``make_trace.py`` into ``bench-out/``, ignored by git):

* **orjson**: a fresh ``python`` process reads the file's (decompressed) bytes, then
  times ``orjson.loads`` of those bytes alone. Peak RSS is that process's.
* **analyze**: ``tracedoc analyze TRACE --format json`` as a fresh process, timed end
  to end (interpreter start, imports, read, load, signals, rules, JSON report).

Each measurement runs ``--runs`` times, alternating the two, and the fastest run is
kept (the machine is shared; the minimum is the least disturbed). Peak RSS comes from
``resource.getrusage(RUSAGE_CHILDREN)`` around each child alone (``ru_maxrss`` is the
largest child so far, so every measurement runs in its own helper process): that is the
largest single process. As ``tracedoc`` decodes a large trace in forked worker
processes, the helper also samples (every 50 ms) the summed PSS of the process and all
its descendants from ``/proc/PID/smaps_rollup``: the memory they use together, with
copy-on-write pages shared between them counted once. The RSS target is checked
against the larger of the two.

Prints a Markdown table with the ratios the targets are stated in:
``analyze / orjson`` time (target <= 0.4), ``analyze RSS / file size`` (target <= 3),
and time(x2N) / time(xN) (target <= 2.1).
"""

from __future__ import annotations

import argparse
import json
import subprocess
import sys
import time
from pathlib import Path

HERE = Path(__file__).resolve().parent
ROOT = HERE.parent
DEFAULT_SOURCE = ROOT / "fixtures" / "v100_resnet50_workers0.pt.trace.json.gz"
OUT = ROOT / "bench-out"

_ORJSON_CHILD = r"""
import gzip, sys, time, orjson
path = sys.argv[1]
with open(path, 'rb') as fh:
    gz = fh.read(2) == b'\x1f\x8b'
data = gzip.open(path, 'rb').read() if gz else open(path, 'rb').read()
t = time.perf_counter()
doc = orjson.loads(data)
print(time.perf_counter() - t)
"""

# Runs one command in a child and reports its wall time and peak RSS (own process, so
# RUSAGE_CHILDREN's maximum is this child's alone).
_MEASURE = r"""
import json, os, resource, subprocess, sys, threading, time

def tree_rss(root):
    # summed PSS of root and all its descendants (forked decode workers included), from /proc
    kids = {}
    for d in os.listdir('/proc'):
        if not d.isdigit():
            continue
        try:
            with open(f'/proc/{d}/stat') as fh:
                ppid = int(fh.read().rsplit(')', 1)[1].split()[1])
        except (OSError, ValueError, IndexError):
            continue
        kids.setdefault(ppid, []).append(int(d))
    total, todo = 0, [root]
    while todo:
        p = todo.pop()
        total += pss(p)
        todo += kids.get(p, [])
    return total

def pss(pid):
    # proportional set size: pages shared between the parent and its forked workers
    # (copy-on-write buffers, the memory-mapped file) count once in the sum, not per process
    try:
        with open(f'/proc/{pid}/smaps_rollup') as fh:
            for line in fh:
                if line.startswith('Pss:'):
                    return int(line.split()[1]) * 1024
    except OSError:
        pass
    return 0

t = time.perf_counter()
p = subprocess.Popen(sys.argv[1:], stdout=subprocess.PIPE, stderr=subprocess.PIPE)
peak = [0]
def sample():
    while p.poll() is None:
        peak[0] = max(peak[0], tree_rss(p.pid))
        time.sleep(0.05)
th = threading.Thread(target=sample, daemon=True)
th.start()
out, err = p.communicate()
wall = time.perf_counter() - t
th.join()
ru = resource.getrusage(resource.RUSAGE_CHILDREN)
print(json.dumps({"rc": p.returncode, "wall_s": wall, "cpu_s": ru.ru_utime + ru.ru_stime,
                  "peak_rss_bytes": ru.ru_maxrss * 1024, "tree_peak_pss_bytes": peak[0],
                  "stdout_tail": out[-200:].decode(errors="replace"), "stderr": err[-500:].decode(errors="replace")}))
"""


def measure(cmd: list[str], env: dict[str, str] | None = None, cwd: Path | None = None) -> dict:
    out = subprocess.run(
        [sys.executable, "-c", _MEASURE, *cmd], capture_output=True, text=True, check=True, env=env, cwd=cwd
    )
    return json.loads(out.stdout)


def orjson_run(path: Path) -> dict:
    m = measure([sys.executable, "-c", _ORJSON_CHILD, str(path)])
    if m["rc"] != 0:
        raise SystemExit(f"orjson child failed: {m['stderr']}")
    m["time_s"] = float(m["stdout_tail"].strip().splitlines()[-1])
    return m


def analyze_run(path: Path, env: dict[str, str] | None = None, cwd: Path | None = None) -> dict:
    # --no-cache: a cold analysis every run (a cache hit would time the frame cache, not the analysis)
    exe = [sys.executable, "-m", "tracedoc", "analyze", str(path), "--format", "json", "--exit-zero", "--no-cache"]
    m = measure(exe, env, cwd)
    if m["rc"] != 0:
        raise SystemExit(f"tracedoc analyze failed ({m['rc']}): {m['stderr']}")
    m["time_s"] = m["wall_s"]
    return m


def ensure_trace(source: Path, repeats: int, gz: bool) -> Path:
    OUT.mkdir(exist_ok=True)
    path = OUT / f"{source.name.split('.')[0]}_x{repeats}.json{'.gz' if gz else ''}"
    if not path.exists():
        sys.path.insert(0, str(HERE))
        from make_trace import build

        t = time.perf_counter()
        tmp = path.with_name(path.name + ".tmp")
        n = build(str(source), repeats, str(tmp), compress=gz)
        tmp.rename(path)
        print(f"built {path.name}: {n:,} events in {time.perf_counter() - t:.0f} s", file=sys.stderr)
    return path


def uncompressed_size(path: Path) -> int:
    if path.suffix == ".gz":
        from tracedoc.load.source import gzip_size_hint

        return gzip_size_hint(path)
    return path.stat().st_size


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description="tracedoc analyze vs orjson.loads on large traces")
    ap.add_argument("--source", type=Path, default=DEFAULT_SOURCE)
    ap.add_argument("--repeats", type=int, nargs="*", default=[10, 20], help="repeat counts to test uncompressed")
    ap.add_argument("--gzip", type=int, nargs="*", default=[10], help="repeat counts to also test gzipped")
    ap.add_argument("--runs", type=int, default=3, help="runs per measurement; the fastest is kept")
    ap.add_argument(
        "--no-orjson",
        type=int,
        nargs="*",
        default=[],
        help="repeat counts to time analyze only (orjson would not fit in memory)",
    )
    ap.add_argument("--json", type=Path, help="also write the raw figures here")
    a = ap.parse_args(argv)
    if not a.source.exists():
        raise SystemExit(f"no source trace {a.source}")
    cases = [(r, False) for r in a.repeats] + [(r, True) for r in a.gzip]
    rows = []
    for repeats, gz in cases:
        path = ensure_trace(a.source, repeats, gz)
        with_orjson = repeats not in a.no_orjson
        best: dict[str, dict] = {}
        for _ in range(a.runs):
            for name, fn in (("orjson", orjson_run), ("analyze", analyze_run)):
                if name == "orjson" and not with_orjson:
                    continue
                m = fn(path)
                b = best.setdefault(
                    name,
                    {"time_s": float("inf"), "cpu_s": None, "peak_rss_bytes": 0, "tree_peak_rss_bytes": 0, "times": []},
                )
                b["times"].append(round(m["time_s"], 3))
                if m["time_s"] < b["time_s"]:
                    b["time_s"], b["cpu_s"] = m["time_s"], m["cpu_s"]
                b["peak_rss_bytes"] = max(b["peak_rss_bytes"], m["peak_rss_bytes"])
                b["tree_peak_rss_bytes"] = max(b["tree_peak_rss_bytes"], m["tree_peak_pss_bytes"])
        size = uncompressed_size(path)
        o = best.get("orjson")
        an = best["analyze"]
        row = {
            "trace": path.name,
            "repeats": repeats,
            "gzip": gz,
            "file_bytes": path.stat().st_size,
            "json_bytes": size,
            "orjson_s": o["time_s"] if o else None,
            "orjson_runs_s": o["times"] if o else None,
            "orjson_rss": o["peak_rss_bytes"] if o else None,
            "analyze_s": an["time_s"],
            "analyze_runs_s": an["times"],
            "analyze_cpu_s": an["cpu_s"],
            "analyze_rss": an["peak_rss_bytes"],
            "analyze_tree_rss": an["tree_peak_rss_bytes"],
        }
        rows.append(row)
        print(json.dumps(row), file=sys.stderr)
    base = {r["repeats"]: r for r in rows if not r["gzip"]}
    print(
        "| trace | JSON size | orjson.loads | orjson peak RSS | tracedoc analyze (CPU) | analyze peak memory: largest process RSS / all processes PSS | time ratio (target <= 0.4) | RSS / JSON size (target <= 3) | time vs half-size trace (target <= 2.1) |"
    )
    print("|---|---|---|---|---|---|---|---|---|")
    for r in rows:
        half = base.get(r["repeats"] // 2) if r["repeats"] % 2 == 0 and not r["gzip"] else None
        lin = f"{r['analyze_s'] / half['analyze_s']:.2f}x (vs x{half['repeats']})" if half else ""
        o_s = f"{r['orjson_s']:.2f} s" if r["orjson_s"] is not None else "not run"
        o_rss = f"{r['orjson_rss'] / 1e9:.2f} GB" if r["orjson_rss"] else "not run"
        ratio = f"{r['analyze_s'] / r['orjson_s']:.2f}" if r["orjson_s"] else ""
        rss = max(r["analyze_rss"], r["analyze_tree_rss"])
        print(
            f"| {r['trace']}{' (gzip)' if r['gzip'] else ''} | {r['json_bytes'] / 1e6:,.0f} MB | {o_s} | {o_rss} "
            f"| {r['analyze_s']:.2f} s ({r['analyze_cpu_s']:.2f} s) "
            f"| {r['analyze_rss'] / 1e9:.2f} GB / {r['analyze_tree_rss'] / 1e9:.2f} GB | {ratio} "
            f"| {rss / r['json_bytes']:.2f} | {lin} |"
        )
    if a.json:
        a.json.write_text(json.dumps(rows, indent=2))
    return 0


if __name__ == "__main__":
    sys.exit(main())
