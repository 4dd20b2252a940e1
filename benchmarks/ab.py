"""Interleaved A/B: a cold ``tracedoc analyze`` of one trace by two code trees, and orjson.loads.

    git worktree add /tmp/perfbase <baseline commit>
    python benchmarks/ab.py --base /tmp/perfbase --runs 5      # bench-out/v100_resnet50_workers0_x10.json

Each round runs, in an order that rotates from round to round (so a slow spell of the
shared machine hits every side alike): ``orjson.loads`` of the trace's bytes
(:func:`run.orjson_run`), ``tracedoc analyze TRACE --format json --no-cache`` with the
baseline tree first on ``PYTHONPATH``, and the same command with this tree
(:func:`run.analyze_run`). Prints every raw run, the medians, the analyze / orjson ratio
of the medians (target <= 0.4) and the speed-up of this tree over the baseline.
"""

from __future__ import annotations

import argparse
import os
import statistics
import sys
from pathlib import Path

HERE = Path(__file__).resolve().parent
sys.path.insert(0, str(HERE))

from run import DEFAULT_SOURCE, ROOT, analyze_run, ensure_trace, orjson_run  # noqa: E402


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
    a = ap.parse_args(argv)
    trace = a.trace.resolve() if a.trace else ensure_trace(DEFAULT_SOURCE, 10, False)
    base = a.base.resolve()
    sides = {
        "orjson": lambda: orjson_run(trace)["time_s"],
        "base": lambda: analyze_run(trace, _env_for(base), cwd=base)["time_s"],
        "this": lambda: analyze_run(trace, _env_for(ROOT), cwd=ROOT)["time_s"],
    }
    names = list(sides)
    runs: dict[str, list[float]] = {n: [] for n in names}
    for r in range(a.runs):
        order = names[r % 3 :] + names[: r % 3]
        for n in order:
            runs[n].append(sides[n]())
        print(f"round {r + 1}: " + "  ".join(f"{n} {runs[n][-1]:.2f} s" for n in order), flush=True)
    med = {n: statistics.median(v) for n, v in runs.items()}
    print(f"\ntrace: {trace}")
    for n in names:
        print(f"{n:7s} runs (s): {' '.join(f'{x:.2f}' for x in runs[n])}   median {med[n]:.2f} s")
    print(
        f"ratio analyze / orjson (medians): base {med['base'] / med['orjson']:.2f}, this {med['this'] / med['orjson']:.2f}"
    )
    print(f"this / base (medians): {med['this'] / med['base']:.2f}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
