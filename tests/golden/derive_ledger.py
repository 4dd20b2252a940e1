#!/usr/bin/env python3
"""Independent re-derivation of tracedoc's idle ledger on the real traces in fixtures/.

Standalone on purpose: stdlib only, never imports tracedoc, pandas or numpy.  Written
from the *written* definition of the ledger (the module docstring of
``tracedoc/signals/ledger.py`` in its revised form, and its constants and name patterns,
copied by value), not from its code, so that agreement means something.  Step windows and complete
steps come from ``derive_golden.py`` (the TensorBoard plugin's rule, re-derived from
the plugin's source).  Every reading of the definition that had to be decided is
listed in README.md ("Idle ledger"), numbered as R1, R2, ... in the comments below.
Usage:

    python3 tests/golden/derive_ledger.py [TRACE_DIR] [OUT_JSON]

Method: an instant-by-instant sweep.  For each device, every boundary of every
interval that matters (GPU events, queued spans, CPU events of the launching
threads, refills, step windows) is collected and sorted; between two consecutive
boundaries nothing changes, so each elementary segment is classified once, at its
midpoint, by plain membership tests.  Times in traces are µs; figures are written in ms.
"""

import bisect
import gzip
import json
import math
import os
import re
import statistics
import sys
import tomllib
from collections import defaultdict

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, HERE)
import derive_golden  # noqa: E402  (sibling stdlib script: step windows and complete steps)

TRACE_DIR = os.path.join(HERE, "..", "..", "fixtures")
PATTERNS = os.path.join(HERE, "..", "..", "tracedoc", "signals", "patterns.toml")  # a data file

# ---- the written definition's constants and name patterns, copied by value
HOST_WAIT_CAUSES = (
    "dataloader",
    "blocking_sync",
    "pageable_h2d",
    "allocator",
    "communication",
    "startup",
    "zero_grad",
    "optimizer_step",
    "launch_overhead",
    "other_cpu",
    "untraced",
)
QUEUED_CAUSES = ("kernel_wait", "dependency_wait", "other_idle")
KEYS = (*HOST_WAIT_CAUSES, *QUEUED_CAUSES)  # LEDGER_KEYS

#: Launch calls by name: a kernel launch (first pattern), a memcpy or a memset call.
LAUNCH_CALL_PATTERNS = (
    r"^(cuda|hip)(LaunchKernel|LaunchKernelExC|LaunchCooperativeKernel|ExtLaunchKernel|ExtModuleLaunchKernel|"
    r"ModuleLaunchKernel|GraphLaunch)|^cu(LaunchKernel|LaunchKernelEx|LaunchCooperativeKernel|GraphLaunch)|"
    r"^hipLaunch|^cudaLaunch",
    r"^(cuda|hip|cu)Memcpy",
    r"^(cuda|hip|cu)Memset",
)
KERNEL_WAIT_MAX_US = 30.0
SLOW_LAUNCH_MIN_US = 1000.0
SLOW_LAUNCH_FACTOR = 50.0
BLOCKING_SYNC = re.compile(r"^(cuda|hip|cu)(Stream|Device|Event|Ctx)Synchroni[sz]e")
STREAM_WAIT = re.compile(r"^(cuda|hip|cu)StreamWaitEvent")
EVENT_RECORD = re.compile(r"^(cuda|hip|cu)EventRecord")
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
# ---- names the definition gives in prose
ZERO_GRAD_PREFIX = "Optimizer.zero_grad#"
OPTIMIZER_STEP_PREFIX = "Optimizer.step#"
DATALOADER_PREFIX, DATALOADER_SUFFIX = "enumerate(DataLoader)#", ".__next__"
STEP_PREFIX = "ProfilerStep#"
RECORD_WINDOW_END = "Record Window End"  # the instant that ends recorded activity (R9)
STREAM_WAIT_SYNC = "Stream Wait Event"  # the cuda_sync event that records a wait's stream
ASYNC_MEMCPY = re.compile(r"Memcpy\w*Async")  # "a *MemcpyAsync" (R6)
# a launch call is known by its name (LAUNCH_CALL_PATTERNS), whether or not a GPU event links to it (R4);
# a *kernel*-launch call is one of the first pattern only
LAUNCH_CALL = [re.compile(p) for p in LAUNCH_CALL_PATTERNS]
KERNEL_LAUNCH = LAUNCH_CALL[0]
COPY_NAME = re.compile(r"Memcpy (\w+) \((\w+) -> (\w+)\)")  # "Memcpy HtoD (Pageable -> Device)"

GPU_CATS = {"kernel", "memcpy", "gpu_memcpy", "memset", "gpu_memset"}
COPY_CATS = {"memcpy", "gpu_memcpy"}
RUNTIME_CATS = {"runtime", "cuda_runtime", "cuda_driver"}
OP_CATS = {"operator", "cpu_op"}
CPU_CATS = OP_CATS | RUNTIME_CATS | {"user_annotation", "python_function"}

# host-wait test order, first match wins; the two refills are reported under their cause
ORDER = (
    "pageable_h2d",
    "blocking_sync",
    "allocator",
    "communication",
    "startup",
    "dataloader",
    "zero_grad",
    "optimizer_step",
    "refill_pageable_h2d",
    "refill_blocking_sync",
    "launch_overhead",
    "other_cpu",
)
REPORT_AS = {"refill_pageable_h2d": "pageable_h2d", "refill_blocking_sync": "blocking_sync"}


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


# ---------------------------------------------------------------- per trace
def is_number(v):
    return isinstance(v, (int, float)) and not isinstance(v, bool) and math.isfinite(v)


def load_events(path):
    """All complete events with their role; ts rebased to the trace's first event.

    ``idx`` is the event's position in ``traceEvents``: the trace order that breaks ties (R8).
    Also returns the trace's ``Record Window End`` instant, rebased the same way: the latest one
    whose ts is a number, or None when there is none (the end of recorded activity, R9)."""
    with gzip.open(path, "rt") as f:
        doc = json.load(f)
    evs, record_ends = [], []
    for i, e in enumerate(doc["traceEvents"]):
        if e.get("ph") == "X" and str(e.get("cat", "")).lower() != "trace":
            e["idx"] = i
            evs.append(e)
        elif e.get("ph") == "i" and e.get("name") == RECORD_WINDOW_END and is_number(e.get("ts")):
            record_ends.append(e["ts"])
    t0 = min(e["ts"] for e in evs)
    record_end = max(record_ends) - t0 if record_ends else None
    for e in evs:
        e["cat_"] = str(e.get("cat", "")).lower()
        e["s"] = e["ts"] - t0
        e["e"] = e["s"] + e.get("dur", 0)
        e["thread"] = (str(e.get("pid")), str(e.get("tid")))
        e.setdefault("name", "")
        e.setdefault("args", {})
    return evs, t0, record_end


def windows(path, t0, evs):
    """Every step window (µs, rebased), their step numbers and how many leading ones are complete.

    Traces without ProfilerStep get one pseudo-window: first event start to last event end (R1)."""
    ev, _, _ = derive_golden.load(path)
    steps = ev["steps"]
    if not steps:
        return [(min(e["s"] for e in evs), max(e["e"] for e in evs))], [None], 1
    gpu_all = ev["kernel"] + ev["memcpy"] + ev["memset"]
    by_corr = defaultdict(list)
    for g in gpu_all:
        by_corr[g.get("args", {}).get("correlation")].append(g)
    win, _, _, kept = derive_golden.tb_windows(steps, ev["runtime"], by_corr, gpu_all)
    nums = [int(s["name"].split("#")[1]) for s in steps]
    return [(s - t0, e - t0) for s, e in win], nums, kept


def copy_kind(g):
    """(direction, source memory, destination memory) of a copy event, or None."""
    if g["cat_"] not in COPY_CATS:
        return None
    m = COPY_NAME.match(g["name"])
    return m.groups() if m else None


def is_annotation(e):
    """Record-function annotations are not ops, whatever their category: told by the '#' (R10)."""
    return e["cat_"] == "user_annotation" or (e["cat_"] in OP_CATS and "#" in e["name"])


def is_op(e):
    return e["cat_"] in OP_CATS and not is_annotation(e)


class CallClasses:
    """The ledger's call classes over one trace's events (R3, R4, R6, R8, R9, R12 of "Idle
    ledger"), built once per trace. derive_replay.py uses the same classes: the step model
    takes them from the ledger by definition.

    Building it annotates each GPU event with ``dev``, ``stream`` and ``launch`` (its launch
    call through args.correlation, R3, or None)."""

    def __init__(self, evs, gpu):
        self.runtime = [e for e in evs if e["cat_"] in RUNTIME_CATS]
        self.rocm = any(r["name"].startswith("hip") for r in self.runtime)
        self.rt_by_corr = {}  # one join: args.correlation (R3)
        for r in self.runtime:
            self.rt_by_corr.setdefault(r["args"].get("correlation"), r)
        self.first_gpu = min(g["s"] for g in gpu)  # R8: the trace's first GPU event, by start

        # GPU event -> launch call (R3); a launch call is a runtime call linked to a GPU event (R4).
        self.launched = defaultdict(list)  # id(runtime) -> its GPU events
        for g in gpu:
            g["dev"] = g["args"].get("device", g.get("pid"))
            g["stream"] = (g["dev"], g["args"].get("stream", g.get("tid")))
            r = self.rt_by_corr.get(g["args"].get("correlation"))
            g["launch"] = r
            if r is not None:
                self.launched[id(r)].append(g)

        kernel_launch_calls = [r for r in self.runtime if KERNEL_LAUNCH.match(r["name"])]
        self.median_launch = (
            statistics.median(r.get("dur", 0) for r in kernel_launch_calls) if kernel_launch_calls else 0.0
        )
        self.slow_launch = max(SLOW_LAUNCH_MIN_US, SLOW_LAUNCH_FACTOR * self.median_launch)

        # ---- per thread: launch-call starts and ops (R9, R10, R12)
        self.by_thread = defaultdict(list)
        for e in evs:
            if e["cat_"] in CPU_CATS:
                self.by_thread[e["thread"]].append(e)
        self.launch_starts = {
            th: sorted(e["s"] for e in items if e["cat_"] in RUNTIME_CATS and self.is_launch(e))
            for th, items in self.by_thread.items()
        }

        # cpu_ops per thread, by (ts, -dur, -trace order), with the running maximum of their ends:
        # walking back from the last op that starts at or before a call, the first one that contains
        # it has the latest ts and, on a tie, the shortest duration (R12); on a full tie (same ts and
        # dur, which the text does not order) the earlier event in the trace
        self.ops_by_thread, self.ops_s, self.ops_maxe = {}, {}, {}
        for th, items in self.by_thread.items():
            ops = sorted((o for o in items if is_op(o)), key=lambda o: (o["s"], -o.get("dur", 0), -o["idx"]))
            self.ops_by_thread[th] = ops
            self.ops_s[th] = [o["s"] for o in ops]
            run, mx = [], float("-inf")
            for o in ops:
                mx = max(mx, o["e"])
                run.append(mx)
            self.ops_maxe[th] = run

        # (thread, op name) -> the first call of that op on the thread: the earliest ts, the first in
        # trace order on a tie (R8)
        self.first_of_name = {}
        for th, ops in self.ops_by_thread.items():
            for o in ops:
                k = (th, o["name"])
                if k not in self.first_of_name or (o["ts"], o["idx"]) < (
                    self.first_of_name[k]["ts"],
                    self.first_of_name[k]["idx"],
                ):
                    self.first_of_name[k] = o

        # lazy initialisation in an op's first call applies only in a trace that records the process's
        # GPU start-up: a start-up runtime call by name, or a non-blocking runtime call longer than
        # SLOW_LAUNCH_MIN_US, starting before the trace's first GPU event (any thread; R8). A trace
        # that begins in steady state sees no first calls.
        self.records_startup = any(
            r["s"] < self.first_gpu
            and (STARTUP_RUNTIME.match(r["name"]) or (r.get("dur", 0) > SLOW_LAUNCH_MIN_US and not self.is_blocking(r)))
            for r in self.runtime
        )

    def is_launch(self, r):
        """A launch call: a runtime call whose name is a kernel launch, memcpy or memset call (R4)."""
        return any(p.match(r["name"]) for p in LAUNCH_CALL)

    def is_blocking(self, r):
        """A blocking runtime call: a synchronize or synchronous copy by name, or an async copy call
        whose copy is pageable (or a DtoH into unpinned memory) (R6)."""
        n = r["name"]
        if BLOCKING_SYNC.match(n) or SYNC_MEMCPY.match(n):
            return True
        if not ASYNC_MEMCPY.search(n):
            return False
        for g in self.launched.get(id(r), ()):  # the copy it issued (R6)
            k = copy_kind(g)
            if k and ("Pageable" in k[1:] or (k[0] == "DtoH" and k[2] != "Pinned")):
                return True
        return False

    def issues_unpinned_h2d(self, r):
        """Whether the call issued an HtoD copy from unpinned memory."""
        return any((k := copy_kind(g)) and k[0] == "HtoD" and k[1] != "Pinned" for g in self.launched.get(id(r), ()))

    def contains_launch(self, op):
        """A launch call [ts, end) of op's thread is contained when op.ts <= call.ts <= op.end."""
        starts = self.launch_starts.get(op["thread"], [])
        i = bisect.bisect_left(starts, op["s"])
        return i < len(starts) and starts[i] <= op["e"]

    def innermost_op(self, call):
        """The innermost enclosing cpu_op of call: among the cpu_ops of its thread that contain it
        (op.ts <= call.ts <= op.end), the one with the latest ts; on a tie, the shortest (R12)."""
        th, t = call["thread"], call["s"]
        ops, maxe = self.ops_by_thread.get(th, []), self.ops_maxe.get(th, [])
        i = bisect.bisect_right(self.ops_s.get(th, []), t) - 1
        while i >= 0 and maxe[i] >= t:
            if ops[i]["e"] >= t:
                return ops[i]
            i -= 1
        return None


def ledger(path):
    evs, t0, record_end = load_events(path)
    all_wins, all_numbers, kept = windows(path, t0, evs)
    comm_pats = comm_op_patterns()
    gpu = [e for e in evs if e["cat_"] in GPU_CATS]
    if not gpu:
        return None
    cc = CallClasses(evs, gpu)
    runtime, rocm, first_gpu = cc.runtime, cc.rocm, cc.first_gpu
    median_launch, slow_launch = cc.median_launch, cc.slow_launch
    by_thread, first_of_name, records_startup = cc.by_thread, cc.first_of_name, cc.records_startup
    is_launch, is_blocking_runtime, issues_unpinned_h2d = cc.is_launch, cc.is_blocking, cc.issues_unpinned_h2d
    contains_launch, innermost_op = cc.contains_launch, cc.innermost_op

    other_work_starts = {}
    for th, items in by_thread.items():
        st = []
        for e in items:
            if e["cat_"] in RUNTIME_CATS:
                if not (is_launch(e) or STREAM_WAIT.match(e["name"]) or EVENT_RECORD.match(e["name"])):
                    st.append(e["s"])
            elif not e["name"].startswith(STEP_PREFIX) and not contains_launch(e):
                st.append(e["s"])
        other_work_starts[th] = sorted(st)

    # ---- stream waits: waiting stream and dependent event (R13)
    sync_by_corr = {}
    for e in evs:
        if e["cat_"] == "cuda_sync" and e["name"] == STREAM_WAIT_SYNC:
            sync_by_corr.setdefault(e["args"].get("correlation"), e)
    launched_gpu = sorted((g for g in gpu if g["launch"] is not None), key=lambda g: (g["launch"]["s"], g["s"]))
    by_launch_thread = defaultdict(list)
    by_stream = defaultdict(list)
    for g in launched_gpu:
        by_launch_thread[g["launch"]["thread"]].append(g)
        by_stream[g["stream"]].append(g)
    thread_launch_s = {k: [g["launch"]["s"] for g in v] for k, v in by_launch_thread.items()}
    stream_launch_s = {k: [g["launch"]["s"] for g in v] for k, v in by_stream.items()}
    dependent = set()
    wait_stats = {"stream_wait_calls": 0, "recorded": 0, "inferred": 0, "ignored": 0, "dependent_events": 0}
    for w in runtime:
        if not STREAM_WAIT.match(w["name"]):
            continue
        wait_stats["stream_wait_calls"] += 1
        rec = sync_by_corr.get(w["args"].get("correlation"))
        if rec is not None:
            a = rec["args"]
            dev = a.get("device", rec.get("pid"))
            stream = (dev, a.get("stream", rec.get("tid")))
            wait_stats["recorded"] += 1
        else:
            cand = by_launch_thread.get(w["thread"], [])
            i = bisect.bisect_left(thread_launch_s.get(w["thread"], []), w["e"])
            if i == len(cand):
                wait_stats["ignored"] += 1
                continue
            stream = cand[i]["stream"]
            wait_stats["inferred"] += 1
        cand = by_stream.get(stream, [])
        i = bisect.bisect_left(stream_launch_s.get(stream, []), w["s"])
        if i < len(cand):
            dependent.add(id(cand[i]))
    wait_stats["dependent_events"] = len(dependent)

    devices = sorted({g["dev"] for g in gpu}, key=str)
    wins = all_wins[:kept]
    out = {
        "step_numbers": all_numbers[:kept],
        "windows_ms": [round((e - s) / 1e3, 4) for s, e in wins],
        "stream_waits": wait_stats,
        "devices": {},
    }
    # a refill runs at most to the end of the last step window, or to the Record Window End instant
    # when that comes first: the end of recorded activity (R9)
    refill_cap = max(e for _, e in all_wins)
    if record_end is not None:
        refill_cap = min(refill_cap, record_end)

    for dev in devices:
        key = f"{'hip' if rocm else 'cuda'}:{dev}"
        dgpu = [g for g in gpu if g["dev"] == dev]
        threads = {g["launch"]["thread"] for g in dgpu if g["launch"] is not None}
        cpu = [e for e in evs if e["cat_"] in CPU_CATS and (not threads or e["thread"] in threads)]
        busy = Cover([(g["s"], g["e"]) for g in dgpu])
        queued = Cover([(g["launch"]["e"], g["s"]) for g in dgpu if g["launch"] is not None])
        dep_queued = Cover([(g["launch"]["e"], g["s"]) for g in dgpu if g["launch"] is not None and id(g) in dependent])
        dev_launch_starts = sorted({g["launch"]["s"] for g in dgpu if g["launch"] is not None})

        sets = defaultdict(list)
        slow = []  # slow first launches (start-up), listed for the tests
        blocking_calls = []  # runtime calls and CPU ops of cause 2
        pageable_calls = []  # runtime calls of cause 1 that issue the unpinned H2D copy
        for e in cpu:
            n, c, span = e["name"], e["cat_"], (e["s"], e["e"])
            if not n.startswith(STEP_PREFIX):  # ProfilerStep#N spans the whole step: no activity (R11)
                sets["other_cpu"].append(span)
            if c in RUNTIME_CATS:
                blocking = is_blocking_runtime(e)
                if blocking:
                    (pageable_calls if issues_unpinned_h2d(e) else blocking_calls).append(e)
                if records_startup and (
                    ALLOCATOR.match(n) or (e.get("dur", 0) > SLOW_LAUNCH_MIN_US and not blocking and not is_launch(e))
                ):
                    # lazy initialisation in an op's first call (5), in a trace that records start-up:
                    # an allocator call, or a slow runtime call that is neither a launch nor a blocking
                    # call, whose innermost enclosing cpu_op is the first call of that op's name on its
                    # thread (R8)
                    op = innermost_op(e)
                    if op is not None and first_of_name.get((op["thread"], op["name"])) is op:
                        sets["startup"].append(span)
                        continue
                if ALLOCATOR.match(n):
                    sets["startup" if e["s"] < first_gpu else "allocator"].append(span)
                # a slow call before the first GPU event may be a launch call (R8)
                if STARTUP_RUNTIME.match(n) or (
                    e.get("dur", 0) > SLOW_LAUNCH_MIN_US and e["s"] < first_gpu and not blocking
                ):
                    sets["startup"].append(span)
                if is_launch(e):  # kernel-launch, memcpy and memset calls alike
                    sets["launch_overhead"].append(span)
                    if (
                        KERNEL_LAUNCH.match(n)
                        and e.get("dur", 0) > SLOW_LAUNCH_MIN_US
                        and e.get("dur", 0) > slow_launch
                    ):
                        sets["startup"].append(span)
                        slow.append({"name": n, "ts_us": round(e["s"], 3), "dur_us": e.get("dur", 0)})
                continue
            if is_op(e) and BLOCKING_OPS.match(n):
                blocking_calls.append(e)  # a blocking call of 2) in every respect, refill included (R15)
            if any(p.search(n) for p in comm_pats):
                sets["communication"].append(span)
            if STARTUP_OPS.search(n):  # compilation spans: matched on every event of the ops frame (R8)
                sets["startup"].append(span)
            if n.startswith(DATALOADER_PREFIX) and n.endswith(DATALOADER_SUFFIX):
                sets["dataloader"].append(span)
            if n.startswith(ZERO_GRAD_PREFIX):
                sets["zero_grad"].append(span)
            if n.startswith(OPTIMIZER_STEP_PREFIX):
                sets["optimizer_step"].append(span)
            if is_op(e) and contains_launch(e):
                sets["launch_overhead"].append(span)

        # cause 1 also takes any other blocking call of cause 2 that starts inside the innermost
        # enclosing cpu_op of a pageable copy call on the same thread (tensor.to's stream sync), R12;
        # a blocking CPU op is never pageable_h2d (R15)
        extra = set()
        for p in pageable_calls:
            op = innermost_op(p)
            if op is None:
                continue
            for b in blocking_calls:
                if b["cat_"] in RUNTIME_CATS and b["thread"] == p["thread"] and op["s"] <= b["s"] <= op["e"]:
                    extra.add(id(b))
        pageable_calls += [b for b in blocking_calls if id(b) in extra]
        blocking_calls = [b for b in blocking_calls if id(b) not in extra]

        # refills (9): from the call's end to the first of the next launch of this device, the next
        # other work on the call's thread, the end of recorded activity (the last window's end or the
        # Record Window End instant, whichever comes first); none without a later launch (R9)
        refills = []
        for cause, calls in (("pageable_h2d", pageable_calls), ("blocking_sync", blocking_calls)):
            for b in calls:
                sets[cause].append((b["s"], b["e"]))
                end = b["e"]
                i = bisect.bisect_left(dev_launch_starts, end)
                if i == len(dev_launch_starts):
                    continue  # no GPU event of this device launched after the call: no refill
                stop = dev_launch_starts[i]
                ow = other_work_starts.get(b["thread"], [])
                j = bisect.bisect_left(ow, end)
                if j < len(ow):
                    stop = min(stop, ow[j])
                stop = min(stop, refill_cap)  # may cross into the next window (R9)
                if stop <= end:
                    continue  # the call ends at or after the end of recorded activity: nothing to refill
                sets["refill_" + cause].append((end, stop))
                refills.append(
                    {
                        "cause": cause,
                        "call": b["name"],
                        "thread": "/".join(b["thread"]),
                        "from_us": round(end, 3),
                        "to_us": round(stop, 3),
                    }
                )
        covers = {k: Cover(v) for k, v in sets.items()}

        bounds = set()
        for cv in (busy, queued, dep_queued, *covers.values()):
            for s, e in cv.iv:
                bounds.update((s, e))
        bounds = sorted(bounds)
        per_step = []
        for ws, we in wins:
            lo, hi = bisect.bisect_right(bounds, ws), bisect.bisect_left(bounds, we)
            pts = [ws, *bounds[lo:hi], we]
            acc = dict.fromkeys([*KEYS, "busy"], 0.0)
            for a, b in zip(pts, pts[1:], strict=False):
                t, length = (a + b) / 2, b - a
                if length <= 0:
                    continue
                if t in busy:
                    acc["busy"] += length
                    continue
                if t in queued:  # launched and not started: never host-wait
                    i = bisect.bisect_right(busy.starts, t)  # the idle gap: between busy intervals (R7)
                    gs = busy.iv[i - 1][1] if i > 0 else float("-inf")
                    ge = busy.iv[i][0] if i < len(busy.iv) else float("inf")
                    if ge - gs < KERNEL_WAIT_MAX_US:
                        acc["kernel_wait"] += length
                    elif t in dep_queued:
                        acc["dependency_wait"] += length
                    else:
                        acc["other_idle"] += length
                    continue
                cause = next((k for k in ORDER if k in covers and t in covers[k]), "untraced")
                acc[REPORT_AS.get(cause, cause)] += length
            per_step.append(acc)
        n = len(per_step)
        mean = {k: round(sum(p[k] for p in per_step) / n / 1e3, 4) for k in [*KEYS, "busy"]}
        out["devices"][key] = {
            "mean_ms": mean,
            "idle_ms": round(sum(sum(p[k] for k in KEYS) for p in per_step) / n / 1e3, 4),
            "per_step_ms": [{k: round(v / 1e3, 4) for k, v in p.items()} for p in per_step],
            "launching_threads": sorted("/".join(t) for t in threads),
            "median_kernel_launch_us": median_launch,
            "slow_kernel_launches": slow,
            "pageable_h2d_calls": len(pageable_calls),
            "blocking_calls": len(blocking_calls),
            "dependent_events": sum(id(g) in dependent for g in dgpu),
        }
        if os.environ.get("LEDGER_DEBUG"):
            out["devices"][key]["refills"] = refills
    return out


def main():
    tdir = sys.argv[1] if len(sys.argv) > 1 else TRACE_DIR
    out_path = sys.argv[2] if len(sys.argv) > 2 else os.path.join(HERE, "ledger_figures.json")
    figures = {
        "_about": (
            "Idle ledger per device, ms per complete step (mean_ms) and per step (per_step_ms), derived by "
            "tests/golden/derive_ledger.py: stdlib only, independent of tracedoc, from the written definition "
            "in tracedoc/signals/ledger.py's (revised) docstring; step windows from derive_golden.py. Readings of the "
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
