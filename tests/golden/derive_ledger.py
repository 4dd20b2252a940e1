#!/usr/bin/env python3
"""Independent re-derivation of tracedoc's idle ledger on the real traces in fixtures/.

Standalone on purpose: stdlib only, never imports tracedoc, pandas or numpy.  Written
from the *written* definition of the ledger (the module docstring and the constants of
``tracedoc/signals/ledger.py``), not from its code, so that agreement means something.
Step windows and complete steps come from ``derive_golden.py`` (the TensorBoard
plugin's rule, re-derived from the plugin's source).  Every reading of the definition
that had to be decided is listed in README.md ("Idle ledger").  Usage:

    python3 tests/golden/derive_ledger.py [TRACE_DIR] [OUT_JSON]

Method: an instant-by-instant sweep.  For each device, every boundary of every
interval that matters (GPU events, queued spans, CPU events of the launching
threads, step windows) is collected and sorted; between two consecutive boundaries
nothing changes, so each elementary segment is classified once, at its midpoint, by
plain membership tests.  Times in traces are µs; figures are written in ms.
"""

import bisect
import gzip
import json
import os
import re
import statistics
import sys
from collections import defaultdict

import tomllib

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, HERE)
import derive_golden  # noqa: E402  (sibling stdlib script: step windows and complete steps)

TRACE_DIR = os.path.join(HERE, "..", "..", "fixtures")
PATTERNS = os.path.join(HERE, "..", "..", "tracedoc", "signals", "patterns.toml")  # a data file

# ---- the written definition's constants, copied by value
KERNEL_WAIT_MAX_US = 30.0
SLOW_LAUNCH_MIN_US = 1000.0
SLOW_LAUNCH_FACTOR = 50.0
BLOCKING_SYNC = re.compile(r"^(cuda|hip|cu)(Stream|Device|Event|Ctx)Synchroni[sz]e")
SYNC_MEMCPY = re.compile(r"^(cudaMemcpy|cudaMemcpy2D|cudaMemcpy3D|hipMemcpy|hipMemcpyWithStream|cuMemcpy[DH]to[DH])$")
ALLOCATOR = re.compile(
    r"^(cuda|hip)(Malloc|Free)(Async|Host|Managed|Pitch|Array)?$|^cu(MemAlloc|MemFree)|^(cuda|hip)(HostAlloc|FreeHost)$"
)
STARTUP_RUNTIME = re.compile(
    r"^(cuInit|hipInit|cuCtxCreate|cuDevicePrimaryCtxRetain|hipDevicePrimaryCtxRetain|cuModuleLoad\w*|"
    r"hipModuleLoad\w*|cudaGetDeviceCount|hipGetDeviceCount|cuLibraryLoad\w*)$"
)
BLOCKING_OPS = re.compile(r"^aten::(item|_local_scalar_dense|nonzero|is_nonzero|equal|tolist)$")
STARTUP_OPS = re.compile(
    r"(_compile\.compile_inner|compile_fx|OutputGraph\.call_user_compiler|inductor_codecache|"
    r"async_compile|triton\.compiler|/triton/compiler/|TorchDynamo Cache Lookup.*compile|"
    r"torch/_dynamo/convert_frame|torch/_inductor/compile_fx|CachingAutotuner\.benchmark_all_configs)"
)
ZERO_GRAD_PREFIX = "Optimizer.zero_grad#"
OPTIMIZER_STEP_PREFIX = "Optimizer.step#"  # cause 6b
ASYNC_MEMCPY = re.compile(r"Memcpy\w*Async")
# a *kernel*-launch call (cudaLaunchKernel, cudaLaunchKernelExC, cuLaunchKernel, hipLaunchKernel,
# hipExtModuleLaunchKernel, hipModuleLaunchKernel, cudaLaunchCooperativeKernel): not a memcpy/memset call
KERNEL_LAUNCH = re.compile(r"Launch\w*Kernel")
STEP_PREFIX = "ProfilerStep#"

CAUSES = [  # host-wait causes, first match wins; "refill" is reported as blocking_sync
    "blocking_sync",
    "allocator",
    "communication",
    "startup",
    "dataloader",
    "zero_grad",
    "optimizer_step",
    "refill",
    "launch_overhead",
    "other_cpu",
]
KEYS = [
    "dataloader",
    "blocking_sync",
    "allocator",
    "communication",
    "startup",
    "zero_grad",
    "optimizer_step",
    "launch_overhead",
    "other_cpu",
    "untraced",
    "kernel_wait",
    "other_idle",
]

GPU_CATS = {"kernel", "memcpy", "gpu_memcpy", "memset", "gpu_memset"}
RUNTIME_CATS = {"runtime", "cuda_runtime", "cuda_driver"}
OP_CATS = {"operator", "cpu_op"}
CPU_CATS = OP_CATS | RUNTIME_CATS | {"user_annotation", "python_function"}


def comm_op_patterns():
    with open(PATTERNS, "rb") as f:
        table = tomllib.load(f)["communication_ops"]
    return [re.compile(p, re.I) for pats in table.values() for p in pats]


# ---------------------------------------------------------------- interval sets
def merge(iv):
    out = []
    for s, e in sorted(iv):
        if e <= s:
            continue
        if out and s <= out[-1][1]:
            out[-1][1] = max(out[-1][1], e)
        else:
            out.append([s, e])
    return out


class Cover:
    """A merged interval list answering "is the instant t inside?" with a binary search."""

    def __init__(self, intervals):
        self.iv = merge(intervals)
        self.starts = [s for s, _ in self.iv]

    def __contains__(self, t):
        i = bisect.bisect_right(self.starts, t) - 1
        return i >= 0 and t < self.iv[i][1]

    def around(self, t):
        """(start, end) of the merged interval containing t."""
        i = bisect.bisect_right(self.starts, t) - 1
        return tuple(self.iv[i])


# ---------------------------------------------------------------- per trace
def load_events(path):
    """All complete events with their role; ts rebased to the trace's first event."""
    with gzip.open(path, "rt") as f:
        doc = json.load(f)
    evs = [e for e in doc["traceEvents"] if e.get("ph") == "X" and str(e.get("cat", "")).lower() != "trace"]
    t0 = min(e["ts"] for e in evs)
    for e in evs:
        e["cat_"] = str(e.get("cat", "")).lower()
        e["s"] = e["ts"] - t0
        e["e"] = e["s"] + e.get("dur", 0)
        e["thread"] = (str(e.get("pid")), str(e.get("tid")))
        e.setdefault("name", "")
    return evs, t0


def windows(path, t0, evs):
    """Complete step windows (µs, rebased) and their step numbers, from derive_golden.

    Traces without ProfilerStep get one pseudo-window: first event start to last event end."""
    ev, _, _ = derive_golden.load(path)
    steps = ev["steps"]
    if not steps:
        return [(min(e["s"] for e in evs), max(e["e"] for e in evs))], [None]
    gpu_all = ev["kernel"] + ev["memcpy"] + ev["memset"]
    by_corr = defaultdict(list)
    for g in gpu_all:
        by_corr[g.get("args", {}).get("correlation")].append(g)
    win, _, _, kept = derive_golden.tb_windows(steps, ev["runtime"], by_corr, gpu_all)
    nums = [int(s["name"].split("#")[1]) for s in steps]
    return [(s - t0, e - t0) for s, e in win[:kept]], nums[:kept]


def ledger(path):
    evs, t0 = load_events(path)
    wins, step_numbers = windows(path, t0, evs)
    comm_pats = comm_op_patterns()
    gpu = [e for e in evs if e["cat_"] in GPU_CATS]
    if not gpu:
        return None
    runtime = [e for e in evs if e["cat_"] in RUNTIME_CATS]
    rocm = any(r["name"].startswith("hip") for r in runtime)
    rt_by_corr = {}
    for r in runtime:
        rt_by_corr.setdefault(r.get("args", {}).get("correlation"), r)
    first_gpu = min(g["s"] for g in gpu)

    # GPU event -> launch call; a launch call is a runtime call linked to a GPU event.
    dev_of = {}
    launched = defaultdict(list)  # id(runtime) -> its GPU events
    for g in gpu:
        dev_of[id(g)] = g.get("args", {}).get("device", g.get("pid"))
        r = rt_by_corr.get(g.get("args", {}).get("correlation"))
        g["launch"] = r
        if r is not None:
            launched[id(r)].append(g)
    # only kernel-launch calls can be slow first launches, and the median is over them (decision C)
    kernel_launch_calls = [r for r in runtime if id(r) in launched and KERNEL_LAUNCH.search(r["name"])]
    median_launch = statistics.median(r.get("dur", 0) for r in kernel_launch_calls) if kernel_launch_calls else 0.0
    slow_launch = max(SLOW_LAUNCH_MIN_US, SLOW_LAUNCH_FACTOR * median_launch)

    def is_blocking_runtime(r):
        n = r["name"]
        if BLOCKING_SYNC.match(n) or SYNC_MEMCPY.match(n):
            return True
        # an async copy that reads or writes pageable memory (staged by the driver)
        return bool(ASYNC_MEMCPY.search(n)) and any("Pageable" in g["name"] for g in launched.get(id(r), ()))

    # CPU ops that launch GPU work: cpu_op/Operator events enclosing a launch call on their thread.
    def is_annotation(e):  # old traces record record_function annotations as "Operator" with a "#"
        return e["cat_"] == "user_annotation" or (e["cat_"] == "operator" and "#" in e["name"])

    launching_op = set()
    by_thread = defaultdict(list)
    for e in evs:
        if (e["cat_"] in OP_CATS and not is_annotation(e)) or id(e) in launched:
            by_thread[e["thread"]].append(e)
    for items in by_thread.values():
        items.sort(key=lambda e: (e["s"], id(e) in launched, -e["e"]))
        stack = []
        for e in items:
            while stack and stack[-1]["e"] < e["s"]:
                stack.pop()
            if id(e) in launched:
                launching_op.update(id(o) for o in stack if o["s"] <= e["s"] and e["e"] <= o["e"])
            else:
                stack.append(e)

    devices = sorted({dev_of[id(g)] for g in gpu}, key=str)
    out = {"step_numbers": step_numbers, "windows_ms": [round((e - s) / 1e3, 4) for s, e in wins], "devices": {}}
    for dev in devices:
        key = f"{'hip' if rocm else 'cuda'}:{dev}"
        dgpu = [g for g in gpu if dev_of[id(g)] == dev]
        threads = {g["launch"]["thread"] for g in dgpu if g["launch"] is not None}
        cpu = [e for e in evs if e["cat_"] in CPU_CATS and (not threads or e["thread"] in threads)]
        busy = Cover([(g["s"], g["e"]) for g in dgpu])
        queued = Cover([(g["launch"]["e"], g["s"]) for g in dgpu if g["launch"] is not None])
        dev_launch_starts = sorted({g["launch"]["s"] for g in dgpu if g["launch"] is not None})

        sets = defaultdict(list)
        slow = []  # slow first launches (start-up), listed for the tests
        for e in cpu:
            n, c, span = e["name"], e["cat_"], (e["s"], e["e"])
            if not n.startswith(STEP_PREFIX):  # ProfilerStep#N spans the whole step: no activity (decision A)
                sets["other_cpu"].append(span)  # any other event of a launching thread
            if c in RUNTIME_CATS:
                if is_blocking_runtime(e):
                    sets["blocking_sync"].append(span)
                elif ALLOCATOR.match(n):
                    sets["allocator"].append(span)
                elif STARTUP_RUNTIME.match(n) or (e.get("dur", 0) > SLOW_LAUNCH_MIN_US and e["s"] < first_gpu):
                    sets["startup"].append(span)
                if id(e) in launched:  # kernel-launch, memcpy and memset calls alike
                    sets["launch_overhead"].append(span)
                    if KERNEL_LAUNCH.search(n) and e.get("dur", 0) > slow_launch:
                        sets["startup"].append(span)
                        slow.append({"name": n, "ts_us": round(e["s"], 3), "dur_us": e.get("dur", 0)})
                continue
            if BLOCKING_OPS.match(n):
                sets["blocking_sync"].append(span)
            if any(p.search(n) for p in comm_pats):
                sets["communication"].append(span)
            if STARTUP_OPS.search(n):
                sets["startup"].append(span)
            if n.startswith("enumerate(DataLoader)#") and n.endswith(".__next__"):
                sets["dataloader"].append(span)
            if n.startswith(ZERO_GRAD_PREFIX):
                sets["zero_grad"].append(span)
            if n.startswith(OPTIMIZER_STEP_PREFIX):
                sets["optimizer_step"].append(span)
            if id(e) in launching_op:
                sets["launch_overhead"].append(span)
        # refill: from the end of each blocking call to the next launch on this device (or forever)
        for _, end in merge(sets["blocking_sync"]):
            i = bisect.bisect_left(dev_launch_starts, end)
            sets["refill"].append((end, dev_launch_starts[i] if i < len(dev_launch_starts) else float("inf")))
        covers = {k: Cover(v) for k, v in sets.items()}
        blocking = covers.get("blocking_sync", Cover([]))

        bounds = set()
        for c in (busy, queued, *covers.values()):
            for s, e in c.iv:
                bounds.update((s, e))
        per_step = []
        for ws, we in wins:
            pts = sorted({ws, we} | {b for b in bounds if ws < b < we})
            acc = dict.fromkeys([*KEYS, "busy"], 0.0)
            for a, b in zip(pts, pts[1:], strict=False):
                t, length = (a + b) / 2, b - a
                if t in busy:
                    acc["busy"] += length
                    continue
                if t in queued and t not in blocking:  # work is queued: the GPU waits on something else
                    gs, ge = (float("-inf"), float("inf"))
                    i = bisect.bisect_right(busy.starts, t)  # idle gap = between busy intervals
                    if i > 0:
                        gs = busy.iv[i - 1][1]
                    if i < len(busy.iv):
                        ge = busy.iv[i][0]
                    acc["kernel_wait" if ge - gs < KERNEL_WAIT_MAX_US else "other_idle"] += length
                    continue
                cause = next((k for k in CAUSES if k in covers and t in covers[k]), "untraced")
                acc["blocking_sync" if cause == "refill" else cause] += length
            per_step.append(acc)
        n = len(per_step)
        mean = {k: round(sum(p[k] for p in per_step) / n / 1e3, 4) for k in [*KEYS, "busy"]}
        out["devices"][key] = {
            "mean_ms": mean,
            "idle_ms": round(sum(mean[k] for k in KEYS), 4),
            "per_step_ms": [{k: round(v / 1e3, 4) for k, v in p.items()} for p in per_step],
            "launching_threads": sorted("/".join(t) for t in threads),
            "median_kernel_launch_us": median_launch,
            "slow_kernel_launches": slow,
        }
    return out


def main():
    tdir = sys.argv[1] if len(sys.argv) > 1 else TRACE_DIR
    out_path = sys.argv[2] if len(sys.argv) > 2 else os.path.join(HERE, "ledger_figures.json")
    figures = {
        "_about": (
            "Idle ledger per device, ms per complete step (mean_ms) and per step (per_step_ms), derived by "
            "tests/golden/derive_ledger.py: stdlib only, independent of tracedoc, from the written definition "
            "in tracedoc/signals/ledger.py's docstring; step windows from derive_golden.py. Readings of the "
            "definition: tests/golden/README.md, section 'Idle ledger'."
        ),
        "traces": {},
    }
    for name in sorted(os.listdir(tdir)):
        if name.endswith(".gz"):
            res = ledger(os.path.join(tdir, name))
            if res is not None:
                figures["traces"][name] = res
                print(name, json.dumps({k: v["mean_ms"] for k, v in res["devices"].items()}))
    with open(out_path, "w") as f:
        json.dump(figures, f, indent=1, sort_keys=True)
        f.write("\n")


if __name__ == "__main__":
    main()
