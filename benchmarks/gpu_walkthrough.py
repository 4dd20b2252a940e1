"""Record the ResNet-18 walkthrough on a GPU: the baseline, then one change at a time.

The sequence is the walkthrough's (about 400 to 3,268 samples/s on one V100, 8.2x):

0. ``baseline``: ``num_workers=0``, pageable memory, fp32, batch 32 (``workloads/resnet.py``
   defaults, 224x224 images);
1. ``workers``: DataLoader workers (``--workers``, default: half the cores, at most 8);
2. ``pinned``: ``pin_memory=True`` with ``non_blocking=True``;
3. ``amp``: autocast (``--amp``, default bf16);
4. ``batch``: a larger batch (``--batch``, default 128);
5. ``uint8``: the batch copied as uint8 and converted on the GPU;
6. ``channels_last``;
7. ``compile``: ``torch.compile``.

Each change is applied on top of the ones before it. A change whose trial fails (crash, out of
memory, time-out) is recorded and dropped, and the next change builds on the last good
configuration. Each trial is ``python -m tracedoc.fixloop.trial run workloads/resnet.py`` in its
own process, so it writes ``config.json``, ``result.json`` (samples/s of ``repeats`` timed
windows, profiler off) and ``trace.pt.trace.json.gz`` in ``OUT/<NN>_<change>/``. Set
``TRACEDOC_RECORD_SHAPES=1`` to record shapes for the op views.

Usage::

    TRACEDOC_RECORD_SHAPES=1 python benchmarks/gpu_walkthrough.py --out runs/walkthrough --device cuda

Prints one JSON line per trial and a table at the end; ``OUT/walkthrough.json`` holds the same.
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import subprocess
import sys
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
WORKLOAD = ROOT / "workloads" / "resnet.py"


def changes(workers: int, amp: str, batch: int) -> list[tuple[str, dict]]:
    """The walkthrough's changes in order, as (name, knob values) pairs."""
    return [
        ("baseline", {}),
        ("workers", {"num_workers": workers}),
        ("pinned", {"pin_memory": True, "non_blocking": True}),
        ("amp", {"amp": amp}),
        ("batch", {"batch_size": batch}),
        ("uint8", {"input_dtype": "uint8"}),
        ("channels_last", {"channels_last": True}),
        ("compile", {"compile": True}),
    ]


def run_trial(out: Path, config: dict, timeout_s: float) -> dict:
    """Run one trial with ``config``; return its result.json plus ``status`` and ``wall_s``."""
    out.mkdir(parents=True, exist_ok=True)
    (out / "knobs.json").write_text(json.dumps(config, indent=1))
    cmd = [sys.executable, "-m", "tracedoc.fixloop.trial", "run", str(WORKLOAD), "--out", str(out)]
    for key, value in config.items():
        cmd += ["--set", f"{key}={str(value).lower() if isinstance(value, bool) else value}"]
    start = time.monotonic()
    with open(out / "stdout.log", "wb") as so, open(out / "stderr.log", "wb") as se:
        try:
            proc = subprocess.run(cmd, stdout=so, stderr=se, timeout=timeout_s, cwd=ROOT)
            status = "ok" if proc.returncode == 0 else f"exit {proc.returncode}"
        except subprocess.TimeoutExpired:
            status = "timeout"
    result: dict = {}
    if (out / "result.json").exists():
        result = json.loads((out / "result.json").read_text())
        if status == "ok" and result.get("status") not in (None, "ok"):
            status = str(result.get("status"))
    result.update(status=status, wall_s=round(time.monotonic() - start, 1), command=cmd[1:])
    return result


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--out", required=True, type=Path)
    parser.add_argument("--device", default="cuda")
    parser.add_argument("--workers", type=int, default=min(8, max(1, (os.cpu_count() or 2) // 2)))
    parser.add_argument("--amp", default="bf16", choices=["bf16", "fp16"])
    parser.add_argument("--batch", type=int, default=128)
    parser.add_argument("--timeout", type=float, default=240.0, help="seconds per trial")
    parser.add_argument("--set", dest="sets", action="append", default=[], metavar="KNOB=VALUE")
    parser.add_argument("--only", default="", help="comma-separated change names to run (default: all)")
    args = parser.parse_args(argv)

    base: dict = {"device": args.device}
    for item in args.sets:
        key, _, value = item.partition("=")
        base[key] = value
    only = {n for n in args.only.split(",") if n}
    rows = []
    good = dict(base)
    for index, (name, knobs) in enumerate(changes(args.workers, args.amp, args.batch)):
        if only and name not in only:
            continue
        config = {**good, **knobs}
        result = run_trial(args.out / f"{index:02d}_{name}", config, args.timeout)
        sps = result.get("samples_per_s") or []
        row = {
            "index": index,
            "change": name,
            "knobs": config,
            "status": result["status"],
            "wall_s": result["wall_s"],
            "samples_per_s": sps,
            "median_samples_per_s": round(statistics.median(sps), 1) if sps else None,
            "step_time_ms": result.get("step_time_ms"),
            "device": result.get("device"),
        }
        print(json.dumps(row), flush=True)
        rows.append(row)
        if result["status"] == "ok":
            good = config
    (args.out / "walkthrough.json").write_text(json.dumps(rows, indent=1))
    first = next((r["median_samples_per_s"] for r in rows if r["median_samples_per_s"]), None)
    print(f"{'change':<14} {'status':<10} {'samples/s':>10} {'x base':>7}")
    for r in rows:
        m = r["median_samples_per_s"]
        ratio = f"{m / first:.2f}" if m and first else "-"
        print(f"{r['change']:<14} {r['status']:<10} {m if m else '-':>10} {ratio:>7}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
