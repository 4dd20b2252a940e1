"""Memory per event and per JSON byte of ``tracedoc analyze``, measured on whole processes.

    python benchmarks/memory_per_event.py [--source fixtures/v100_resnet50_workers0.pt.trace.json.gz]
        [--repeats 1 4 8] [--runs 5] [--out bench-out]

Method (README, "Limits and failure behaviour"): build traces of the source repeated end to end
(``benchmarks/make_trace.py``, ids kept unique) and a tiny trace (one step of the source's
first events); run ``python -m tracedoc analyze TRACE --format json --no-cache`` as a fresh process, runs
interleaved (tiny, x1, x4, ..., then again); for each run record the peak over time of the
summed RSS of the process and every process it forks (the parallel decoder's workers), sampled
every 10 ms from ``/proc``, and the largest ``ru_maxrss`` among them (exact, one process, read
by a small measuring process in between: the CLI must not be a direct child of this one, whose
own memory a child holds between fork and exec); the peak is the larger of the two. Per size, the median over runs. Then

    memory per event     = (median peak of the trace - median peak of the tiny trace) / (its events - the tiny trace's)
    memory per JSON byte = (the same difference) / (its JSON bytes - the tiny trace's)

RSS counts a page shared by a forked worker and its parent twice: the figure is what the
machine must be able to give, an upper bound of what is touched.

Linux only (``/proc``).
"""

from __future__ import annotations

import argparse
import gzip
import json
import os
import statistics
import subprocess
import sys
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT / "benchmarks"))

from make_trace import build  # noqa: E402


def _rss_kib(pid: int) -> int:
    try:
        with open(f"/proc/{pid}/status") as fh:
            for line in fh:
                if line.startswith("VmRSS:"):
                    return int(line.split()[1])
    except OSError:
        pass
    return 0


def _children(pid: int) -> list[int]:
    out = []
    try:
        for task in os.listdir(f"/proc/{pid}/task"):
            try:
                with open(f"/proc/{pid}/task/{task}/children") as fh:
                    out += [int(x) for x in fh.read().split()]
            except OSError:
                pass
    except OSError:
        pass
    return out


def _tree(pid: int) -> list[int]:
    todo, seen = [pid], []
    while todo:
        p = todo.pop()
        seen.append(p)
        todo += _children(p)
    return seen


#: A small Python process runs the CLI and writes its children's peak RSS (KiB) to a file: the
#: ``ru_maxrss`` of a direct child of this process would include this process's own memory (the
#: traces it built), which the child holds between fork and exec.
_MEASURE = (
    "import resource, subprocess, sys\n"
    "code = subprocess.run(sys.argv[2:], stdout=subprocess.DEVNULL).returncode\n"
    "open(sys.argv[1], 'w').write(str(resource.getrusage(resource.RUSAGE_CHILDREN).ru_maxrss))\n"
    "sys.exit(code)\n"
)


def measure(trace: Path, tmp: Path) -> tuple[float, float]:
    """``(peak bytes, wall seconds)`` of one ``tracedoc analyze`` run (see the module docstring)."""
    t0 = time.perf_counter()
    rss_file = tmp / "rss"
    cmd = [sys.executable, "-m", "tracedoc", "analyze", str(trace), "--format", "json", "--exit-zero", "--no-cache"]
    p = subprocess.Popen([sys.executable, "-c", _MEASURE, str(rss_file), *cmd], stderr=subprocess.PIPE, cwd=ROOT)
    peak = 0
    while p.poll() is None:
        tree = _tree(p.pid)[1:]  # the CLI and its decode workers, not the measuring process
        peak = max(peak, sum(_rss_kib(q) for q in tree))
        time.sleep(0.01)
    err = p.stderr.read().decode() if p.stderr else ""
    if p.returncode != 0:
        raise SystemExit(f"{trace}: exit {p.returncode}: {err}")
    return max(peak, int(rss_file.read_text())) * 1024.0, time.perf_counter() - t0


def tiny_trace(source: Path, out: Path, events: int = 200) -> int:
    """The source's metadata and its first ``events`` complete events: a trace that loads and is
    analysed, to subtract the fixed cost (interpreter, imports, rules)."""
    opener = gzip.open if source.read_bytes()[:2] == b"\x1f\x8b" else open
    with opener(source, "rb") as fh:
        doc = json.loads(fh.read())
    evs = [e for e in doc["traceEvents"] if e.get("ph") == "M"]
    evs += [e for e in doc["traceEvents"] if e.get("ph") == "X"][:events]
    doc["traceEvents"] = evs
    out.write_text(json.dumps(doc))
    return len(evs)


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--source", default=str(ROOT / "fixtures" / "v100_resnet50_workers0.pt.trace.json.gz"))
    ap.add_argument("--repeats", type=int, nargs="+", default=[1, 4, 8])
    ap.add_argument("--runs", type=int, default=5)
    ap.add_argument("--out", default=str(ROOT / "bench-out"))
    args = ap.parse_args()
    out = Path(args.out)
    out.mkdir(exist_ok=True)
    traces = {"tiny": (out / "mem-tiny.json", tiny_trace(Path(args.source), out / "mem-tiny.json"))}
    for r in args.repeats:
        path = out / f"mem-x{r}.json"
        traces[f"x{r}"] = (path, build(args.source, r, str(path)))
    peaks: dict[str, list[float]] = {k: [] for k in traces}
    for run in range(args.runs):  # interleaved: every size once per round
        for key, (path, _) in traces.items():
            peak, wall = measure(path, out)
            peaks[key].append(peak)
            print(f"run {run + 1} {key}: {peak / 2**20:,.0f} MiB in {wall:.1f} s", file=sys.stderr)
    base = statistics.median(peaks["tiny"])
    tiny_path, tiny_events = traces["tiny"]
    tiny_bytes = tiny_path.stat().st_size
    print(f"source: {args.source}; {args.runs} interleaved runs per size; medians")
    print("| trace | events | JSON bytes | peak RSS (median) | runs (MiB) | bytes per event | bytes per JSON byte |")
    print("|---|---|---|---|---|---|---|")
    for key, (path, events) in traces.items():
        med = statistics.median(peaks[key])
        size = path.stat().st_size
        runs = " ".join(f"{p / 2**20:.0f}" for p in peaks[key])
        if key == "tiny":
            per_event = per_byte = "(subtracted)"
        else:
            extra = med - base
            per_event = f"{extra / (events - tiny_events):,.0f}"
            per_byte = f"{extra / (size - tiny_bytes):.2f}"
        print(f"| {key} | {events:,} | {size:,} | {med / 2**20:,.0f} MiB | {runs} | {per_event} | {per_byte} |")


if __name__ == "__main__":
    main()
