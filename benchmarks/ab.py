"""Interleaved A/B: a cold ``tracedoc analyze`` of one trace by two code trees, and orjson.loads.

    git worktree add /tmp/perfbase <baseline commit>
    python benchmarks/ab.py --base /tmp/perfbase --runs 5      # bench-out/v100_resnet50_workers0_x10.json
    python benchmarks/ab.py --base /tmp/perfbase --runs 5 --analysis-only

Each round runs, in an order that rotates from round to round (so a slow spell of the
shared machine hits every side alike): ``orjson.loads`` of the trace's bytes
(:func:`run.orjson_run`), ``tracedoc analyze TRACE --format json --no-cache`` with the
baseline tree first on ``PYTHONPATH``, and the same command with this tree
(:func:`run.analyze_run`). Prints every raw run, the medians, the analyze / orjson ratio
of the medians (target <= 0.4) and the speed-up of this tree over the baseline.
With ``--analysis-only`` each run loads the trace untimed in a fresh process and times one
analysis (``tracedoc.engine.analyze_trace``: signals, rules, report) in wall and CPU time.
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import subprocess
import sys
from pathlib import Path

HERE = Path(__file__).resolve().parent
sys.path.insert(0, str(HERE))

from run import DEFAULT_SOURCE, ROOT, analyze_run, ensure_trace, orjson_run  # noqa: E402

# --analysis-only: load the trace in a fresh process, then time one analysis (signals, rules, report)
# on it: wall and CPU time of this process, which a busy shared machine disturbs less than wall time
_ANALYSIS_CHILD = r"""
import json, sys, time
from tracedoc.engine import analyze_trace
from tracedoc.load import load
trace = load(sys.argv[1])
wall, cpu = time.perf_counter(), time.process_time()
analyze_trace(trace)
print(json.dumps({"wall_s": time.perf_counter() - wall, "cpu_s": time.process_time() - cpu}))
"""


def _analysis_run(trace: Path, tree: Path) -> tuple[float, float]:
    out = subprocess.run(
        [sys.executable, "-c", _ANALYSIS_CHILD, str(trace)],
        capture_output=True,
        text=True,
        check=True,
        env=_env_for(tree),
        cwd=tree,
    )
    m = json.loads(out.stdout.strip().splitlines()[-1])
    return m["wall_s"], m["cpu_s"]


def _wall_cpu(m: dict) -> tuple[float, float]:
    return m["time_s"], m["cpu_s"]


def _env_for(tree: Path) -> dict[str, str]:
    # with ``python -m`` the working directory comes first on sys.path: runs also start in ``tree``
    env = dict(os.environ)
    env["PYTHONPATH"] = os.pathsep.join([str(tree), *filter(None, [env.get("PYTHONPATH")])])
    return env


def main(argv: list[str] | None = None) -> int:
    """Run the interleaved rounds and print raw runs and medians; returns the exit status."""
    ap = argparse.ArgumentParser(description="interleaved A/B of a cold tracedoc analyze, two code trees")
    ap.add_argument("--base", type=Path, required=True, help="root of the baseline checkout (a git worktree)")
    ap.add_argument("--trace", type=Path, help="trace to analyze (default: the x10 benchmark trace, built if missing)")
    ap.add_argument("--runs", type=int, default=5, help="rounds (default 5)")
    ap.add_argument(
        "--analysis-only",
        action="store_true",
        help="time only the analysis after an untimed load, in-process (wall and CPU s); no orjson",
    )
    a = ap.parse_args(argv)
    trace = a.trace.resolve() if a.trace else ensure_trace(DEFAULT_SOURCE, 10, False)
    base = a.base.resolve()
    if a.analysis_only:
        return _analysis_ab(trace, base, a.runs)
    # each side gives (wall s, CPU s); orjson's CPU is not measured (its wall is loads() alone)
    sides = {
        "orjson": lambda: (orjson_run(trace)["time_s"], float("nan")),
        "base": lambda: _wall_cpu(analyze_run(trace, _env_for(base), cwd=base)),
        "this": lambda: _wall_cpu(analyze_run(trace, _env_for(ROOT), cwd=ROOT)),
    }
    names = list(sides)
    runs: dict[str, list[tuple[float, float]]] = {n: [] for n in names}
    for r in range(a.runs):
        order = names[r % 3 :] + names[: r % 3]
        for n in order:
            runs[n].append(sides[n]())
        print(f"round {r + 1}: " + "  ".join(f"{n} {runs[n][-1][0]:.2f} s" for n in order), flush=True)
    med = {n: statistics.median(w for w, _ in v) for n, v in runs.items()}
    print(f"\ntrace: {trace}")
    for n in names:
        line = f"{n:7s} runs (s): {' '.join(f'{w:.2f}' for w, _ in runs[n])}   median {med[n]:.2f} s"
        if n != "orjson":
            cpu = [c for _, c in runs[n]]
            line += f";  CPU incl. decode worker (s): {' '.join(f'{c:.2f}' for c in cpu)}  median {statistics.median(cpu):.2f}"
        print(line)
    print(
        f"ratio analyze / orjson (medians): base {med['base'] / med['orjson']:.2f}, this {med['this'] / med['orjson']:.2f}"
    )
    print(f"this / base (medians): {med['this'] / med['base']:.2f}")
    return 0


def _analysis_ab(trace: Path, base: Path, rounds: int) -> int:
    trees = {"base": base, "this": ROOT}
    runs: dict[str, list[tuple[float, float]]] = {n: [] for n in trees}
    for r in range(rounds):
        order = list(trees) if r % 2 == 0 else list(trees)[::-1]
        for n in order:
            runs[n].append(_analysis_run(trace, trees[n]))
        print(f"round {r + 1}: " + "  ".join(f"{n} {runs[n][-1][0]:.2f} s ({runs[n][-1][1]:.2f} s CPU)" for n in order))
    print(f"\ntrace: {trace} (analysis after the load, in-process)")
    med = {}
    for n in trees:
        wall, cpu = [w for w, _ in runs[n]], [c for _, c in runs[n]]
        med[n] = (statistics.median(wall), statistics.median(cpu))
        print(
            f"{n:5s} wall (s): {' '.join(f'{x:.2f}' for x in wall)}  median {med[n][0]:.2f};"
            f"  CPU (s): {' '.join(f'{x:.2f}' for x in cpu)}  median {med[n][1]:.2f}"
        )
    print(
        f"this / base (medians): wall {med['this'][0] / med['base'][0]:.2f}, CPU {med['this'][1] / med['base'][1]:.2f}"
    )
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
