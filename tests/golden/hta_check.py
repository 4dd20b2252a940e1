#!/usr/bin/env python3
"""One-off cross-check with Meta's HolisticTraceAnalysis (HTA); not a project dependency.

    python3 -m venv /tmp/htaenv && /tmp/htaenv/bin/pip install HolisticTraceAnalysis
    /tmp/htaenv/bin/python tests/golden/hta_check.py [TRACE_DIR]

HTA wants a directory of per-rank traces, so each trace is copied alone into a
fresh temporary directory under /tmp (never into the repository).  The temporal
breakdown is recorded under "hta" in golden_figures.json, for HTA's default
(last ProfilerStep excluded) and with include_last_profiler_step=True.
"""

import json
import os
import shutil
import sys
import tempfile
from importlib.metadata import version

from hta.trace_analysis import TraceAnalysis

HERE = os.path.dirname(os.path.abspath(__file__))
TRACE_DIR = os.path.join(HERE, "..", "..", "fixtures")
TRACES = [
    "v100_resnet50_ddp_gpu_bound.pt.trace.json.gz",
    "v100_resnet50_workers0.pt.trace.json.gz",
    "v100_resnet50_workers4.pt.trace.json.gz",
]


def breakdown(path, include_last):
    with tempfile.TemporaryDirectory(dir="/tmp") as d:
        shutil.copy(path, os.path.join(d, os.path.basename(path).replace(".pt.trace", "")))
        ta = TraceAnalysis(trace_dir=d, include_last_profiler_step=include_last)
        row = ta.get_temporal_breakdown(visualize=False).iloc[0]
    return {
        k: round(float(row[k]), 3)
        for k in ("idle_time_pctg", "compute_time_pctg", "non_compute_time_pctg", "kernel_time(us)")
    }


def main():
    tdir = sys.argv[1] if len(sys.argv) > 1 else TRACE_DIR
    out_path = os.path.join(HERE, "golden_figures.json")
    with open(out_path) as f:
        golden = json.load(f)
    hta = {"version": version("HolisticTraceAnalysis")}
    for name in TRACES:
        hta[name] = {
            "default": breakdown(os.path.join(tdir, name), False),
            "include_last_profiler_step": breakdown(os.path.join(tdir, name), True),
        }
        print(name, hta[name])
    golden["hta"] = hta
    with open(out_path, "w") as f:
        json.dump(golden, f, indent=1, sort_keys=True)
        f.write("\n")


if __name__ == "__main__":
    main()
