#!/usr/bin/env python3
"""Independent golden figures for the real traces in fixtures/.

Standalone on purpose: stdlib only, does not import tracedoc.  Definitions are
spelled out in README.md next to this file.  Usage:

    python3 tests/golden/derive_golden.py [TRACE_DIR] [OUT_JSON]

Times in traces are microseconds; figures are reported in ms, shares in [0, 1].
"""

import bisect
import gzip
import json
import os
import re
import sys
from collections import defaultdict

HERE = os.path.dirname(os.path.abspath(__file__))
TRACE_DIR = os.path.join(HERE, "..", "..", "fixtures")

KERNEL, MEMCPY, MEMSET, RUNTIME = "kernel", "memcpy", "memset", "runtime"
CATS = {  # trace category (lower-cased) -> role; anything else is ignored
    "kernel": KERNEL,
    "memcpy": MEMCPY,
    "gpu_memcpy": MEMCPY,
    "memset": MEMSET,
    "gpu_memset": MEMSET,
    "runtime": RUNTIME,
    "cuda_runtime": RUNTIME,
    "operator": "cpu",
    "cpu_op": "cpu",
    "user_annotation": "cpu",
    "python": "cpu",
}
COMM_OPS = {
    f"{lib}:{op}"
    for lib in ("nccl", "gloo")
    for op in ("broadcast", "reduce", "all_reduce", "all_gather", "reduce_scatter")
}
# Breakdown categories, highest priority first; "other" is what is left.
PRIORITY = ["kernel", "memcpy", "memset", "communication", "runtime", "dataloader", "cpu_exec"]
TC_RE = re.compile(
    r"884|1688|16816|8816|hmma|xmma|gmma|imma|wmma|tensorop|nvjet"
    r"|sm80_|sm86_|sm89_|sm90_|sm100_",
    re.I,
)
LAUNCH_RE = re.compile(r"LaunchKernel|Memcpy|Memset", re.I)  # runtime calls that enqueue GPU work
MATH_OP_RE = re.compile(r"conv|matmul|linear|addmm|bmm|(^|::|_)mm($|_|backward)", re.I)


# ---------------------------------------------------------------- intervals
def merge(iv):
    out = []
    for s, e in sorted(iv):
        if out and s <= out[-1][1]:
            if e > out[-1][1]:
                out[-1][1] = e
        else:
            out.append([s, e])
    return [tuple(x) for x in out]


def intersect(a, b):
    """Intersection of two merged interval lists."""
    out, i, j = [], 0, 0
    while i < len(a) and j < len(b):
        s, e = max(a[i][0], b[j][0]), min(a[i][1], b[j][1])
        if s < e:
            out.append((s, e))
        if a[i][1] < b[j][1]:
            i += 1
        else:
            j += 1
    return out


def subtract(a, b):
    """a minus b, both merged."""
    out, j = [], 0
    for s, e in a:
        while j < len(b) and b[j][1] <= s:
            j += 1
        k, cur = j, s
        while k < len(b) and b[k][0] < e:
            if b[k][0] > cur:
                out.append((cur, b[k][0]))
            cur = max(cur, b[k][1])
            k += 1
        if cur < e:
            out.append((cur, e))
    return out


def total(iv):
    return sum(e - s for s, e in iv)


# ---------------------------------------------------------------- loading
def load(path):
    with gzip.open(path, "rt") as f:
        doc = json.load(f)
    props = doc.get("deviceProperties") or doc.get("computeProperties") or []
    ev = {k: [] for k in (KERNEL, MEMCPY, MEMSET, RUNTIME, "cpu", "steps", "mem")}
    last_end = float("-inf")
    for e in doc["traceEvents"]:
        ph, name = e.get("ph"), e.get("name", "")
        if ph == "i" and name == "[memory]":
            ev["mem"].append(e["args"])
        if ph != "X":
            continue
        e["end"] = e["ts"] + e.get("dur", 0)
        last_end = max(last_end, e["end"])
        role = CATS.get(str(e.get("cat", "")).lower())
        if role == "cpu" and name.startswith("ProfilerStep#"):
            ev["steps"].append(e)  # CPU-side only: gpu_user_annotation is not in CATS
        elif role:
            ev[role].append(e)
    ev["steps"].sort(key=lambda e: e["ts"])
    return ev, props, last_end


def ext_id(e):
    a = e.get("args", {})
    return a.get("External id", a.get("external id"))


def nbytes(copies):
    """Summed args.bytes, or None when some copy does not record its size (ROCm)."""
    if any("bytes" not in g.get("args", {}) for g in copies):
        return None
    return sum(g["args"]["bytes"] for g in copies)


def is_dataloader(name):
    return (name.startswith("enumerate(DataLoader)#") and name.endswith(".__next__")) or name.startswith(
        "enumerate(DataPipe)#"
    )


# ---------------------------------------------------------------- analysis
def launching_step(rt_list, steps):
    """step index whose CPU span fully contains each runtime call (or None)."""
    starts = [s["ts"] for s in steps]
    out = []
    for r in rt_list:
        i = bisect.bisect_right(starts, r["ts"]) - 1
        out.append(i if i >= 0 and r["end"] <= steps[i]["end"] else None)
    return out


def tb_windows(steps, runtimes, gpu_by_corr, gpu_all):
    """TensorBoard-plugin step windows.

    Returns (windows, GPU events launched per step, launch calls per step whose GPU
    event is missing from the trace, number of leading steps kept as complete)."""
    n = len(steps)
    win = [(s["ts"], s["end"]) for s in steps]
    dev_end, n_dev, matched = [None] * n, [0] * n, set()
    dev_start, missing = [None] * n, [0] * n
    for r, i in zip(runtimes, launching_step(runtimes, steps), strict=False):
        if i is None:
            continue
        if LAUNCH_RE.search(r["name"]) and not gpu_by_corr.get(r["args"].get("correlation")):
            missing[i] += 1
        for g in gpu_by_corr.get(r["args"].get("correlation"), ()):
            n_dev[i] += 1
            matched.add(id(g))
            dev_end[i] = g["end"] if dev_end[i] is None else max(dev_end[i], g["end"])
            dev_start[i] = g["ts"] if dev_start[i] is None else min(dev_start[i], g["ts"])
    if not matched:  # CPU-only run: windows are the CPU spans
        return win, n_dev, missing, n
    prev_end = win[0][0]
    if dev_start[0] is not None:  # GPU work of earlier (unprofiled) steps
        for g in gpu_all:
            if id(g) not in matched and g["end"] < dev_start[0]:
                prev_end = max(prev_end, g["end"])
    out = []
    for i, (cs, ce) in enumerate(win):
        start = max(prev_end, cs)
        end = max(ce, start) if dev_end[i] is None else max(ce, dev_end[i], start)
        out.append((start, end))
        prev_end = end
    kept = n
    if n > 1:
        last = max((i for i in range(n) if n_dev[i] > 0), default=-1)
        kept = last + 1
        if last > 0 and n_dev[last - 1] * 0.8 > n_dev[last]:
            kept = last
    return out, n_dev, missing, kept


def analyze(path):
    ev, props, last_end = load(path)
    steps = ev["steps"]
    gpu_all = ev[KERNEL] + ev[MEMCPY] + ev[MEMSET]
    gpu_by_corr = defaultdict(list)
    for g in gpu_all:
        gpu_by_corr[g.get("args", {}).get("correlation")].append(g)
    rt_by_corr = {r["args"].get("correlation"): r for r in ev[RUNTIME]}
    ev[RUNTIME].sort(key=lambda r: r["ts"])
    res = {
        "n_steps": len(steps),
        "step_numbers": [int(s["name"].split("#")[1]) for s in steps],
        "cpu_step_ms": [round(s["dur"] / 1e3, 4) for s in steps],
    }

    if steps:
        win, n_dev, missing, kept = tb_windows(steps, ev[RUNTIME], gpu_by_corr, gpu_all)
        kw = win[:kept]
        res.update(
            {
                "gpu_events_launched_per_step": n_dev,
                "launches_missing_gpu_event_per_step": missing,
                "tb_window_ms": [round((e - s) / 1e3, 4) for s, e in win],
                "complete_steps": res["step_numbers"][:kept],
                "mean_step_ms_cpu": round(sum(s["dur"] for s in steps[:kept]) / kept / 1e3, 4),
                "mean_step_ms_tb": round(sum(e - s for s, e in kw) / kept / 1e3, 4),
            }
        )
        # ---- breakdown (every instant goes to the highest-priority busy role)
        comm_ext = {ext_id(c) for c in ev["cpu"] if c["name"] in COMM_OPS}
        roles = defaultdict(list)
        for k in ev[KERNEL]:
            roles["communication" if ext_id(k) in comm_ext and ext_id(k) is not None else "kernel"].append(
                (k["ts"], k["end"])
            )
        for r in (MEMCPY, MEMSET, RUNTIME):
            roles[r] = [(x["ts"], x["end"]) for x in ev[r]]
        for c in ev["cpu"]:
            role = (
                "dataloader" if is_dataloader(c["name"]) else "communication" if c["name"] in COMM_OPS else "cpu_exec"
            )
            roles[role].append((c["ts"], c["end"]))
        free = merge(kw)
        cost = {}
        for role in PRIORITY:
            cost[role] = intersect(free, merge(roles[role]))
            free = subtract(free, cost[role])
        cost["other"] = free
        span = sum(e - s for s, e in kw)
        per_step = [{k: total(intersect([w], v)) for k, v in cost.items()} for w in kw]
        res["breakdown_share"] = {k: round(sum(p[k] for p in per_step) / span, 5) for k in cost}
        res["breakdown_ms_per_step"] = {k: round(sum(p[k] for p in per_step) / kept / 1e3, 4) for k in cost}
        res["dataloader_share"] = res["breakdown_share"]["dataloader"]
        kern = merge([(k["ts"], k["end"]) for k in ev[KERNEL]])
        res["gpu_busy_share"] = round(total(intersect(kern, merge(kw))) / span, 5)
        lo, hi = kw[0][0], kw[-1][1]  # plugin's GPU utilization: first..last window
        res["tb_gpu_utilization"] = round(total(intersect(kern, [(lo, hi)])) / (hi - lo), 5) if kern else None

        # ---- H2D copies, attributed to the step whose CPU span launched them
        h2d = [[] for _ in steps]
        for r, i in zip(ev[RUNTIME], launching_step(ev[RUNTIME], steps), strict=False):
            if i is not None:
                h2d[i] += [g for g in gpu_by_corr.get(r["args"].get("correlation"), ()) if "HtoD" in g["name"]]
        res["h2d_per_step"] = {
            "count": [len(x) for x in h2d],
            "pageable": [sum("Pageable -> Device" in g["name"] for g in x) for x in h2d],
            "bytes": [nbytes(x) for x in h2d],
            "ms": [round(sum(g["dur"] for g in x) / 1e3, 4) for x in h2d],
        }
    h2d_all = [g for g in ev[MEMCPY] if "HtoD" in g["name"]]
    res["h2d_total"] = {
        "count": len(h2d_all),
        "pageable": sum("Pageable -> Device" in g["name"] for g in h2d_all),
        "bytes": nbytes(h2d_all),
        "ms": round(sum(g["dur"] for g in h2d_all) / 1e3, 4),
    }

    # ---- memory: peak "Total Allocated" on CUDA devices
    peak = {}
    for a in ev["mem"]:
        if a.get("Device Type") == 1 and "Total Allocated" in a:
            d = a.get("Device Id", 0)
            peak[d] = max(peak.get(d, 0), a["Total Allocated"])
    if peak:
        d = max(peak, key=peak.get)
        tot = next((p.get("totalGlobalMem") for p in props if p.get("id") == d), None)
        res["memory"] = {
            "device": d,
            "peak_allocated_bytes": peak[d],
            "total_global_mem": tot,
            "peak_share": round(peak[d] / tot, 5) if tot else None,
        }
    else:
        res["memory"] = None

    # ---- kernels: Tensor Core names, and time launched by conv/matmul ops
    kt = sum(k["dur"] for k in ev[KERNEL])
    tc = [k for k in ev[KERNEL] if TC_RE.search(k["name"])]
    res["kernels"] = {
        "count": len(ev[KERNEL]),
        "total_ms": round(kt / 1e3, 4),
        "tensor_core_count": len(tc),
        "tensor_core_names": sorted({k["name"][:80] for k in tc})[:8],
        "tensor_core_time_share": round(sum(k["dur"] for k in tc) / kt, 5) if kt else None,
    }
    if kt:
        stacks = enclosing_ops(ev["cpu"] + steps, ev[RUNTIME])
        math, linked = 0, 0
        for k in ev[KERNEL]:
            r = rt_by_corr.get(k.get("args", {}).get("correlation"))
            if r is None:
                continue
            linked += k["dur"]
            if any(MATH_OP_RE.search(n) for n in stacks.get(id(r), ())):
                math += k["dur"]
        res["kernels"]["linked_to_runtime_share"] = round(linked / kt, 5)
        res["kernels"]["conv_matmul_time_share"] = round(math / kt, 5)
    return res


def enclosing_ops(ops, runtimes):
    """id(runtime) -> names of CPU ops on the same (pid, tid) whose span contains it."""
    by_tid = defaultdict(list)
    for o in ops:
        by_tid[(o["pid"], o["tid"])].append((o["ts"], 0, -o["dur"], o))
    for r in runtimes:
        by_tid[(r["pid"], r["tid"])].append((r["ts"], 1, 0, r))
    out = {}
    for items in by_tid.values():
        items.sort(key=lambda x: x[:3])
        stack = []
        for ts, is_rt, _, e in items:
            while stack and stack[-1]["end"] < ts:
                stack.pop()
            if is_rt:
                out[id(e)] = [o["name"] for o in stack if o["end"] >= e["end"]]
            else:
                stack.append(e)
    return out


def main():
    tdir = sys.argv[1] if len(sys.argv) > 1 else TRACE_DIR
    out_path = sys.argv[2] if len(sys.argv) > 2 else os.path.join(HERE, "golden_figures.json")
    try:
        with open(out_path) as f:
            golden = json.load(f)
    except (OSError, ValueError):
        golden = {}
    traces = golden.setdefault("traces", {})
    for name in sorted(os.listdir(tdir)):
        if name.endswith(".gz"):
            traces[name] = analyze(os.path.join(tdir, name))
            print(name, json.dumps(traces[name], indent=1))
    golden["_about"] = (
        "Derived by tests/golden/derive_golden.py (independent of tracedoc); "
        "'hta' section by tests/golden/hta_check.py. See tests/golden/README.md."
    )
    with open(out_path, "w") as f:
        json.dump(golden, f, indent=1, sort_keys=True)
        f.write("\n")


if __name__ == "__main__":
    main()
