"""Benchmark: memory per event, time against orjson.loads, warm cache against cold (issue 24).

    python benchmarks/run.py                                  # x10 tiled + 4 M small events, 3 interleaved runs
    python benchmarks/run.py --repeats 10 --small-events 1000000 --runs 3
    python benchmarks/run.py --base /tmp/base --runs 3        # also the same commands on a baseline tree
    python benchmarks/run.py --repeats --small-events 35000000 --runs 1 --no-orjson --no-warm   # one big run

Two traces, built into ``bench-out/`` (ignored by git) when missing:

* **tiled**: ``v100_resnet50_workers0`` repeated ``--repeats`` times end to end
  (``make_trace.py``; x10: 301 MB, 757,000 events), and its tiny trace of the same shape (the
  source's metadata and first 200 complete events, ``memory_per_event.tiny_trace``);
* **small**: ``--small-events`` small events in steps (``make_small_trace.py``: an op, its
  launch and its kernel, correlated), and a tiny one of 300 events made the same way.

Each round runs every measurement once, in an order that rotates from round to round (the
machine is shared; a slow spell hits every side alike):

* ``analyze``: ``tracedoc analyze TRACE --format json --no-cache`` (cold, nothing cached), on
  the trace and on its tiny trace;
* ``orjson``: a whole ``python`` process that reads the file and runs ``orjson.loads`` on its
  bytes, timed like ``analyze`` (wall time of the process);
* ``cold`` / ``warm``: ``tracedoc analyze TRACE --format json`` with an empty frame cache
  (``TRACEDOC_CACHE_DIR`` a fresh folder: decode, analyse and write the entry), then again (the
  entry is read);
* with ``--base TREE``: ``analyze`` and its tiny run again with ``TREE`` first on ``PYTHONPATH``.

Memory of a run is the peak over time of the summed RSS of the command and every process it
forks (sampled every 10 ms from ``/proc``), or the largest single process's ``ru_maxrss`` when
that is larger; the summed PSS (pages shared with a forked worker counted once) is shown beside
it. Then, with medians over the rounds,

    bytes per event     = (peak of the trace - peak of its tiny trace) / (its events - the tiny trace's)
    bytes per JSON byte = (the same difference) / (its JSON bytes - the tiny trace's)

Times are quoted as median (minimum). Linux only (``/proc``).
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import subprocess
import sys
import tempfile
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

def tree(root):
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
    out, todo = [], [root]
    while todo:
        p = todo.pop()
        out.append(p)
        todo += kids.get(p, [])
    return out

def field(pid, name, key):
    try:
        with open(f'/proc/{pid}/{name}') as fh:
            for line in fh:
                if line.startswith(key):
                    return int(line.split()[1]) * 1024
    except OSError:
        pass
    return 0

t = time.perf_counter()
p = subprocess.Popen(sys.argv[1:], stdout=subprocess.PIPE, stderr=subprocess.PIPE)
peak = [0, 0]
def sample():
    n = 0
    while p.poll() is None:
        procs = tree(p.pid)
        # summed RSS every 10 ms; summed PSS (pages shared with a forked worker counted once) every 50 ms
        peak[0] = max(peak[0], sum(field(q, 'status', 'VmRSS:') for q in procs))
        if n % 5 == 0:
            peak[1] = max(peak[1], sum(field(q, 'smaps_rollup', 'Pss:') for q in procs))
        n += 1
        time.sleep(0.01)
th = threading.Thread(target=sample, daemon=True)
th.start()
out, err = p.communicate()
wall = time.perf_counter() - t
th.join()
ru = resource.getrusage(resource.RUSAGE_CHILDREN)
print(json.dumps({"rc": p.returncode, "wall_s": wall, "cpu_s": ru.ru_utime + ru.ru_stime,
                  "peak_rss_bytes": ru.ru_maxrss * 1024, "tree_peak_rss_bytes": peak[0],
                  "tree_peak_pss_bytes": peak[1],
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
    m["time_s"] = float(m["stdout_tail"].strip().splitlines()[-1])  # orjson.loads alone
    return m


def peak_bytes(m: dict) -> int:
    """The memory of one run: the peak of the process tree's summed RSS, or the largest single
    process's ``ru_maxrss`` when larger (a peak between two samples)."""
    return max(m["peak_rss_bytes"], m["tree_peak_rss_bytes"])


def analyze_run(path: Path, env: dict[str, str] | None = None, cwd: Path | None = None, cache: bool = False) -> dict:
    # --no-cache: a cold analysis every run (a cache hit would time the frame cache, not the analysis)
    exe = [sys.executable, "-m", "tracedoc", "analyze", str(path), "--format", "json", "--exit-zero"]
    if not cache:
        exe.append("--no-cache")
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


def ensure_small(events: int) -> Path:
    OUT.mkdir(exist_ok=True)
    path = OUT / f"small_{events}.json"
    if not path.exists():
        sys.path.insert(0, str(HERE))
        from make_small_trace import build

        t = time.perf_counter()
        tmp = path.with_name(path.name + ".tmp")
        build(events, str(tmp))
        tmp.rename(path)
        print(f"built {path.name}: {events:,} events in {time.perf_counter() - t:.0f} s", file=sys.stderr)
    return path


def ensure_tiny_tiled(source: Path) -> tuple[Path, int]:
    sys.path.insert(0, str(HERE))
    from memory_per_event import tiny_trace

    path = OUT / "tiled_tiny.json"
    n = tiny_trace(source, path)
    return path, n


def _env(tree: Path | None, cache_dir: str | None = None) -> dict[str, str]:
    env = dict(os.environ)
    if tree is not None:  # with ``python -m`` the working directory comes first on sys.path too
        env["PYTHONPATH"] = os.pathsep.join([str(tree), *filter(None, [env.get("PYTHONPATH")])])
    if cache_dir is not None:
        env["TRACEDOC_CACHE_DIR"] = cache_dir
        env["TRACEDOC_CACHE_MIN_BYTES"] = "1"
    return env


def _fmt_t(xs: list[float]) -> str:
    return f"{statistics.median(xs):.2f} s ({min(xs):.2f})" if xs else "not run"


def _fmt_m(xs: list[int]) -> str:
    return f"{statistics.median(xs) / 2**20:,.0f} MiB ({min(xs) / 2**20:,.0f})" if xs else "not run"


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description="memory per event, time vs orjson.loads, warm vs cold (issue 24)")
    ap.add_argument("--source", type=Path, default=DEFAULT_SOURCE)
    ap.add_argument("--repeats", type=int, nargs="?", const=0, default=10, help="tiled trace: repeats (0: none)")
    ap.add_argument("--small-events", type=int, default=4_000_000, help="streamed small-event trace: events (0: none)")
    ap.add_argument("--runs", type=int, default=3, help="interleaved rounds (medians and minima over them)")
    ap.add_argument("--no-orjson", action="store_true", help="skip orjson.loads (it needs about 6x the JSON in memory)")
    ap.add_argument("--no-warm", action="store_true", help="skip the cold / warm frame-cache runs")
    ap.add_argument("--base", type=Path, help="also run analyze with this code tree first on PYTHONPATH")
    ap.add_argument("--json", type=Path, help="also write the raw runs here")
    a = ap.parse_args(argv)
    traces = []  # (label, path, events, tiny path, tiny events)
    if a.repeats:
        sys.path.insert(0, str(HERE))
        big = ensure_trace(a.source, a.repeats, False)
        tiny, tiny_n = ensure_tiny_tiled(a.source)

        traces.append((f"tiled x{a.repeats}", big, _count_events(big), tiny, tiny_n))
    if a.small_events:
        big = ensure_small(a.small_events)
        tiny = ensure_small(300)
        traces.append((f"small {a.small_events:,}", big, a.small_events, tiny, 300))
    cache_root = Path(tempfile.mkdtemp(prefix="tracedoc-bench-cache-"))
    trees = [("this", ROOT)] + ([("base", a.base.resolve())] if a.base else [])
    raw: dict = {}
    for r in range(a.runs):
        for label, big, _n, tiny, _tn in traces:
            steps = []
            for tname, tree in trees:
                steps.append((f"{tname} tiny", lambda tiny=tiny, tree=tree: analyze_run(tiny, _env(tree), cwd=tree)))
                steps.append((f"{tname} analyze", lambda big=big, tree=tree: analyze_run(big, _env(tree), cwd=tree)))
            if not a.no_orjson:
                steps.append(("orjson", lambda big=big: _orjson_process(big)))
            if not a.no_warm:
                steps.append(("cold+warm", lambda big=big, r=r: _cold_warm(big, cache_root / f"{r}-{big.stem}")))
            k = r % len(steps)
            for name, fn in steps[k:] + steps[:k]:
                ms = fn()
                for sub, m in ms if isinstance(ms, list) else [(name, ms)]:
                    raw.setdefault(label, {}).setdefault(sub, []).append(m)
                    print(
                        f"round {r + 1} {label} {sub}: {m['wall_s']:.2f} s, {peak_bytes(m) / 2**20:,.0f} MiB",
                        file=sys.stderr,
                        flush=True,
                    )
    _report(traces, raw, trees)
    if a.json:
        a.json.write_text(json.dumps(raw, indent=1))
    return 0


def _count_events(path: Path) -> int:
    import orjson

    return len(orjson.loads(path.read_bytes())["traceEvents"])


def _orjson_process(path: Path) -> dict:
    m = orjson_run(path)
    return m  # wall_s: the whole process (start, read, loads); time_s: loads alone


def _cold_warm(path: Path, cache_dir: Path) -> list[tuple[str, dict]]:
    cache_dir.mkdir(parents=True, exist_ok=True)
    env = _env(ROOT, str(cache_dir))
    cold = analyze_run(path, env, cwd=ROOT, cache=True)
    warm = analyze_run(path, env, cwd=ROOT, cache=True)
    import shutil

    shutil.rmtree(cache_dir, ignore_errors=True)
    return [("cold (cache write)", cold), ("warm (cache hit)", warm)]


def _report(traces: list, raw: dict, trees: list) -> None:
    print(
        "| trace | events | JSON | code | analyze peak (median, min) | tiny trace peak | bytes per event | "
        "bytes per JSON byte | peak / file | PSS peak (median) |"
    )
    print("|---|---|---|---|---|---|---|---|---|---|")
    for label, big, n, tiny, tn in traces:
        size, tsize = big.stat().st_size, tiny.stat().st_size
        for tname, _ in trees:
            runs = raw[label][f"{tname} analyze"]
            truns = raw[label][f"{tname} tiny"]
            peaks = [peak_bytes(m) for m in runs]
            tpeaks = [peak_bytes(m) for m in truns]
            extra = statistics.median(peaks) - statistics.median(tpeaks)
            pss = statistics.median(m["tree_peak_pss_bytes"] for m in runs)
            print(
                f"| {label} | {n:,} | {size / 1e6:,.0f} MB | {tname} | {_fmt_m(peaks)} | {_fmt_m(tpeaks)} "
                f"| {extra / (n - tn):,.0f} | {extra / (size - tsize):.2f} | {statistics.median(peaks) / size:.2f} "
                f"| {pss / 2**20:,.0f} MiB |"
            )
    print()
    print(
        "| trace | code | analyze --no-cache, wall (CPU) | orjson.loads process (loads alone) | analyze / orjson "
        "| cold, cache write | warm, cache hit | warm / cold | warm / orjson |"
    )
    print("|---|---|---|---|---|---|---|---|---|")
    for label, *_ in traces:
        d = raw[label]
        oj = [m["wall_s"] for m in d.get("orjson", [])]
        ojl = [m["time_s"] for m in d.get("orjson", [])]
        cold = [m["wall_s"] for m in d.get("cold (cache write)", [])]
        warm = [m["wall_s"] for m in d.get("warm (cache hit)", [])]
        for tname, _ in trees:
            an = [m["wall_s"] for m in d[f"{tname} analyze"]]
            cpu = statistics.median(m["cpu_s"] for m in d[f"{tname} analyze"])
            ratio = f"{statistics.median(an) / statistics.median(oj):.2f}" if oj else ""
            mine = tname == "this"
            wc = f"{statistics.median(warm) / statistics.median(cold):.2f}" if warm and mine else ""
            wo = f"{statistics.median(warm) / statistics.median(oj):.2f}" if warm and oj and mine else ""
            print(
                f"| {label} | {tname} | {_fmt_t(an)} ({cpu:.2f} s) "
                f"| {_fmt_t(oj) if mine else ''}{f' ({statistics.median(ojl):.2f} s)' if oj and mine else ''} "
                f"| {ratio} | {_fmt_t(cold) if mine else ''} | {_fmt_t(warm) if mine else ''} | {wc} | {wo} |"
            )


if __name__ == "__main__":
    sys.exit(main())
