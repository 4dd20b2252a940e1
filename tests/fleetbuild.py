"""Build a rank directory from a real DDP trace: N copies of
``fixtures/v100_ddp_memory_events.pt.trace.json.gz`` (HTA's DDP rank 1 of 2, 2,020 NCCL
AllReduce kernels over 5 steps), each with its own ``distributedInfo.rank`` and world
size N, and one rank delayed on purpose.

How a late rank shows in real traces: the others reach each collective first and their
NCCL kernel runs until the late rank joins, so their collective kernels are *longer* by
the delay. The builder does exactly that: every rank but ``delayed`` gets ``delay_us``
added to the duration of each NCCL kernel, plus a small deterministic jitter
(:func:`jitter_us`) on every rank so that the ranks are not identical.
"""

from __future__ import annotations

import gzip
import statistics
from pathlib import Path

import orjson

SOURCE = Path(__file__).resolve().parent.parent / "fixtures" / "v100_ddp_memory_events.pt.trace.json.gz"


def jitter_us(rank: int, i: int) -> float:
    """Deterministic jitter (0..9 µs) of the i-th collective kernel of ``rank``."""
    return float((rank * 7 + i * 13) % 10)


def _is_comm_kernel(e: dict) -> bool:
    return e.get("ph") == "X" and e.get("cat") == "kernel" and "nccl" in str(e.get("name", "")).lower()


def build_rank_dir(
    out: Path, n_ranks: int = 8, delayed: int = 5, delay_us: float = 300.0, steps: int | None = 2
) -> dict:
    """Write ``rank-<r>.json.gz`` for r in 0..n_ranks-1 into ``out``.

    ``steps``: keep only the events that start before the end of the first ``steps``
    ``ProfilerStep`` annotations (a shorter real trace, so that the tests stay quick);
    None keeps all 5 steps.

    Returns the expected figures, computed here from the construction (not by tracedoc):
    ``{"n_collectives", "n_steps", "lag_ms_total"}`` where the lag of collective i is the median over
    the other ranks of (their duration - the delayed rank's duration), as the summary
    defines it.
    """
    out.mkdir(parents=True, exist_ok=True)
    with gzip.open(SOURCE, "rb") as fh:
        doc = orjson.loads(fh.read())
    events = doc["traceEvents"]
    if steps is not None:
        marks = sorted(
            (float(e["ts"]), float(e["ts"]) + float(e["dur"]))
            for e in events
            if e.get("ph") == "X" and str(e.get("name", "")).startswith("ProfilerStep#")
        )
        cut = marks[steps - 1][1]
        events = [e for e in events if e.get("ph") != "X" or float(e.get("ts", 0)) < cut]
        doc["traceEvents"] = events
    comm = [e for e in events if _is_comm_kernel(e)]
    comm.sort(key=lambda e: float(e["ts"]))  # their order within the kind: by start time
    base = [float(e["dur"]) for e in comm]
    for r in range(n_ranks):
        for i, e in enumerate(comm):
            e["dur"] = base[i] + jitter_us(r, i) + (0.0 if r == delayed else delay_us)
        doc["distributedInfo"] = {"backend": "nccl", "rank": r, "world_size": n_ranks}
        (out / f"rank-{r}.json.gz").write_bytes(gzip.compress(orjson.dumps(doc), compresslevel=1))
    lag_total = 0.0
    for i, b in enumerate(base):
        mine = b + jitter_us(delayed, i)
        others = [b + jitter_us(r, i) + delay_us - mine for r in range(n_ranks) if r != delayed]
        lag_total += statistics.median(others)
    n_steps = sum(1 for e in events if e.get("ph") == "X" and str(e.get("name", "")).startswith("ProfilerStep#"))
    return {"n_collectives": len(comm), "n_steps": n_steps, "lag_ms_total": lag_total / 1000.0}
