#!/usr/bin/env python3
"""Independent re-derivation of tracedoc's step model (the step replay) on the real traces in fixtures/.

Standalone on purpose: stdlib only, never imports tracedoc, pandas or numpy. Written from the
*written* definition of the step model only (the REVISED module docstring of
``tracedoc/signals/stepmodel.py``, its constants copied by value and the docstrings of
``WhatIf`` and of its public functions), the idle ledger's definition it refers to (launch
calls, blocking calls, launching threads) and the docstrings of the kernel classification
(``kernel_ops``: ``eligible`` / ``tensor_core``), with the name patterns of
``tracedoc/signals/patterns.toml`` (a data file). The code behind them was not read, so that
agreement means something. Usage:

    python3 tests/golden/derive_replay.py [TRACE_DIR] [OUT_JSON]

It reuses the sibling scripts, which are independent of tracedoc too:

* ``derive_golden.py``: the step windows (the TensorBoard plugin's rule) and the complete steps;
* ``derive_ledger.py``: the trace loader (rebased µs, trace order), the launch-call and blocking-call
  name patterns and the link rules (R2-R4, R6 of README.md, "Idle ledger").

Every reading of the definition that had to be chosen is listed in README.md ("Step replay"), numbered
S1, S2, ... in the comments below. Times in traces are µs; per-step figures are written in µs,
one per step window (complete or not, as ``replay_steps_us`` gives them), signals in ms per step over
the complete steps, all rounded to 0.001. The replay is one continuous pass over the step windows: the
CPU clock, the streams, ``ready`` and the previous replayed window end carry over (S15).
"""

import bisect
import gzip
import json
import math
import os
import re
import sys
from collections import defaultdict

import tomllib

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, HERE)
import derive_ledger as L  # noqa: E402  (sibling stdlib script: loader, call patterns; its windows() uses derive_golden)

TRACE_DIR = os.path.join(HERE, "..", "..", "fixtures")
PATTERNS = os.path.join(HERE, "..", "..", "tracedoc", "signals", "patterns.toml")  # a data file

# ---- the written definition's constants, copied by value
TENSOR_CORE_PEAK_RATIO = (
    ("V100", 125.0 / 15.7),
    ("A100", 312.0 / 19.5),
    ("H100", 989.4 / 67.0),
    ("MI250", 362.1 / 45.3),
    ("MI300", 1307.4 / 163.4),
)
CONTENTION_MAX = 1.19  # no GPU fixture records tracedoc_host metadata: f = CONTENTION_MAX (S12)
STEP_CPU_CATS = {"operator", "cpu_op", "user_annotation", "python"}  # derive_golden's CPU roles
KERNEL_CATS = {"kernel"}


# ---------------------------------------------------------------- kernel classification (kernel_ops)
def _patterns(table, section):
    return [re.compile(p, re.I) for pats in table[section].values() for p in pats]


def kernel_classes():
    """Name tests of the kernel classification, from patterns.toml (re.search, ignoring case)."""
    with open(PATTERNS, "rb") as f:
        t = tomllib.load(f)
    tc, excl = _patterns(t, "tensor_core_kernels"), _patterns(t, "tensor_core_exclusions")
    layout = _patterns(t, "layout_transform_kernels")
    elig_ops, elig_kern = _patterns(t, "tensor_core_eligible_ops"), _patterns(t, "tensor_core_eligible_kernels")

    def is_layout(name):
        return any(p.search(name) for p in layout)

    def is_tensor_core(name):
        # a Tensor Core kernel: matches [tensor_core_kernels], not [tensor_core_exclusions]; a layout
        # transform is neither (kernel_ops docstring)
        return any(p.search(name) for p in tc) and not any(p.search(name) for p in excl) and not is_layout(name)

    def op_eligible(op_names):
        return any(p.search(n) for n in op_names for p in elig_ops)

    def name_eligible(name):
        return any(p.search(name) for p in elig_kern)

    def eligible(name, op_names):
        # GEMM/conv/attention work: op_eligible, a Tensor Core kernel or a GEMM/conv kernel name,
        # and not a layout transform (S13)
        return (op_eligible(op_names) or is_tensor_core(name) or name_eligible(name)) and not is_layout(name)

    return eligible, is_tensor_core


def device_ratio(props, dev):
    """TENSOR_CORE_PEAK_RATIO of the device's name (first match wins), else the table's smallest (S14)."""
    name = None
    for p in props or []:
        if str(p.get("id")) == str(dev):
            name = p.get("name")
            break
    if name is None and props:
        name = props[0].get("name")  # ROCm numbers devices differently from its properties (S14)
    for key, r in TENSOR_CORE_PEAK_RATIO:
        if name and key in name:
            return r, name
    return min(r for _, r in TENSOR_CORE_PEAK_RATIO), name


# ---------------------------------------------------------------- intervals
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


def covered(merged, a, b):
    """Length of [a, b) covered by a merged interval list."""
    if b <= a:
        return 0.0
    tot = 0.0
    i = max(0, bisect.bisect_right([s for s, _ in merged], a) - 1) if merged else 0
    while i < len(merged) and merged[i][0] < b:
        s, e = merged[i]
        lo, hi = max(s, a), min(e, b)
        if hi > lo:
            tot += hi - lo
        i += 1
    return tot


# ---------------------------------------------------------------- per trace
def load_props(path):
    with gzip.open(path, "rt") as f:
        doc = json.load(f)
    if not isinstance(doc, dict):
        return []
    return doc.get("deviceProperties") or doc.get("computeProperties") or []


class Step:
    """The schedule of one step window (module docstring, "The schedule")."""

    def __init__(self, number, ws, we, cs, ce, complete):
        self.number, self.ws, self.we, self.cs, self.ce = number, ws, we, cs, ce
        self.complete = complete
        self.anchors = []  # dicts: kind, ts, te, gap (a, b), events, o
        self.tail = (cs, ce)  # without anchors the tail is ce - cs
        self.between = (cs, cs)  # the CPU time between the previous step and this one: [ce_{k-1}, cs_k]
        self.n_events = 0
        self.clamped_overheads = []  # blocking anchors whose te - max(ts, ready_obs) < 0 (o = 0, S5)


def build(path):
    evs, t0, _ = L.load_events(path)
    all_wins, nums, kept = L.windows(path, t0, evs)
    gpu = [e for e in evs if e["cat_"] in L.GPU_CATS]
    if not gpu:
        return None
    runtime = [e for e in evs if e["cat_"] in L.RUNTIME_CATS]
    rocm = any(r["name"].startswith("hip") for r in runtime)
    rt_by_corr = {}
    for r in runtime:
        rt_by_corr.setdefault(r["args"].get("correlation"), r)  # one join: args.correlation (R3)

    launched = defaultdict(list)  # id(runtime) -> its GPU events
    for g in gpu:
        g["dev"] = g["args"].get("device", g.get("pid"))
        g["stream"] = (g["dev"], g["args"].get("stream", g.get("tid")))
        r = rt_by_corr.get(g["args"].get("correlation"))
        g["launch"] = r
        if r is not None:
            launched[id(r)].append(g)

    # primary device: the one with the most kernel time (S1); every fixture has only one
    ktime = defaultdict(float)
    for g in gpu:
        if g["cat_"] in KERNEL_CATS:
            ktime[g["dev"]] += g.get("dur", 0)
    for g in gpu:
        ktime.setdefault(g["dev"], 0.0)
    dev = max(sorted(ktime, key=str), key=lambda d: ktime[d])
    dgpu = [g for g in gpu if g["dev"] == dev]
    threads = {g["launch"]["thread"] for g in dgpu if g["launch"] is not None}  # launching threads

    def is_launch(r):
        return any(p.match(r["name"]) for p in L.LAUNCH_CALL)

    def is_blocking(r):
        """Blocking runtime call of the ledger's cause 2 (R6): sync calls, synchronous copies, and a
        *MemcpyAsync whose copy reads or writes Pageable memory or is a D2H into unpinned memory."""
        n = r["name"]
        if L.BLOCKING_SYNC.match(n) or L.SYNC_MEMCPY.match(n):
            return True
        if not L.ASYNC_MEMCPY.search(n):
            return False
        for g in launched.get(id(r), ()):
            k = L.copy_kind(g)
            if k and ("Pageable" in k[1:] or (k[0] == "DtoH" and k[2] != "Pinned")):
                return True
        return False

    anchors_all = []
    for r in runtime:
        if r["thread"] not in threads:
            continue
        blocking = is_blocking(r)
        if blocking or is_launch(r):
            # a call that is both a launch and a blocking call is a blocking anchor (the text, S4)
            anchors_all.append((r["s"], r["idx"], r, "blocking" if blocking else "launch"))
    anchors_all.sort(key=lambda x: (x[0], x[1]))  # order of start, ties in trace order
    a_starts = [a[0] for a in anchors_all]

    # spans named enumerate(DataLoader)#... (any CPU category) on the launching threads, merged (S9)
    dl = merge(
        [
            (e["s"], e["e"])
            for e in evs
            if e["cat_"] in L.CPU_CATS and e["thread"] in threads and e["name"].startswith(L.DATALOADER_PREFIX)
        ]
    )

    # CPU spans of the steps: the ProfilerStep#N events in the order derive_golden sorts them (S2)
    step_evs = sorted(
        (e for e in evs if e["cat_"] in STEP_CPU_CATS and e["name"].startswith("ProfilerStep#")),
        key=lambda e: e["s"],
    )
    steps = []
    ws0 = all_wins[0][0]
    ready_obs = ws0  # latest observed end of every GPU event enqueued so far in the trace, ws_0 before any
    taken = set()  # anchors already in an earlier step (CPU spans never overlap on the fixtures)
    for i in range(len(all_wins)):
        ws, we = all_wins[i]
        if step_evs:
            cs, ce = step_evs[i]["s"], step_evs[i]["e"]
        else:
            cs, ce = ws, we  # a trace without steps: one window, its CPU span the window itself (S2)
        st = Step(nums[i], ws, we, cs, ce, i < kept)
        if steps:
            pce = steps[-1].ce
            st.between = (pce, max(pce, cs))  # max(0, cs_k - ce_{k-1})
        lo, hi = bisect.bisect_left(a_starts, cs), bisect.bisect_left(a_starts, ce)  # start in [cs, ce)
        mine = [a for a in anchors_all[lo:hi] if a[1] not in taken]
        taken.update(a[1] for a in mine)
        # the events of the step's anchors, each anchor's in order of observed start (ties in trace order)
        per_anchor = [
            sorted((g for g in launched.get(id(r), ()) if g["dev"] == dev), key=lambda g: (g["s"], g["idx"]))
            for _, _, r, _ in mine
        ]
        # prev_end: the observed end of the previous event of the same stream, by start, among the step's
        # events (the events its anchors enqueue), ws of the window for the first (S6)
        by_stream = defaultdict(list)
        for evl in per_anchor:
            for g in evl:
                by_stream[g["stream"]].append(g)
        prev_end = {}
        for lst in by_stream.values():
            lst.sort(key=lambda g: (g["s"], g["idx"]))
            pe = ws
            for g in lst:
                prev_end[id(g)] = pe
                pe = g["e"]
        e_prev = cs
        for (ts, _, r, kind), evl in zip(mine, per_anchor, strict=True):
            te = r["e"]
            a = {"kind": kind, "ts": ts, "te": te, "name": r["name"], "gap": (e_prev, max(e_prev, ts))}
            a["events"] = []
            for g in evl:
                lat = max(0.0, g["s"] - max(te, prev_end[id(g)]))  # launch_end: the anchor's end (S6)
                a["events"].append(
                    {
                        "stream": g["stream"],
                        "d": g.get("dur", 0),
                        "lat": lat,
                        "kernel": g["cat_"] in KERNEL_CATS,
                        "name": g["name"],
                        "op_names": None,  # filled for kernels below
                        "rt": r,
                    }
                )
                ready_obs = max(ready_obs, g["e"])
            if kind == "blocking":
                raw = te - max(ts, ready_obs)  # ready_obs includes its own events
                a["o"] = max(0.0, raw)
                if raw < 0:
                    st.clamped_overheads.append({"call": r["name"], "ts": ts, "te": te, "ready": ready_obs})
            st.anchors.append(a)
            st.n_events += len(a["events"])
            e_prev = max(e_prev, te)  # latest end of the step's earlier anchors: gap_i is [e_prev, ts_i] (S7)
        st.tail = (e_prev, max(e_prev, ce))
        steps.append(st)

    # kernel_ops: enclosing cpu_ops of each kernel's launch call (same thread, op.ts <= call.ts <= op.end)
    ops_by_thread = defaultdict(list)
    for e in evs:
        if e["cat_"] in L.OP_CATS:
            ops_by_thread[e["thread"]].append(e)
    for v in ops_by_thread.values():
        v.sort(key=lambda o: o["s"])
    starts_by_thread = {k: [o["s"] for o in v] for k, v in ops_by_thread.items()}

    def enclosing(r):
        ops, st_ = ops_by_thread.get(r["thread"], []), starts_by_thread.get(r["thread"], [])
        i = bisect.bisect_right(st_, r["s"])
        return [o["name"] for o in ops[:i] if o["e"] >= r["s"]]

    cache = {}
    for st in steps:
        for a in st.anchors:
            for ev in a["events"]:
                if ev["kernel"]:
                    rid = id(ev["rt"])
                    if rid not in cache:
                        cache[rid] = enclosing(ev["rt"])
                    ev["op_names"] = cache[rid]

    key = f"{'hip' if rocm else 'cuda'}:{dev}"
    return {"device": key, "dev": dev, "steps": steps, "dl": dl, "t0": t0, "kept": kept}


# ---------------------------------------------------------------- replay
def replay(steps, dl, drop_dataloader=False, cpu_factor=1.0, tc_ratio=1.0, tc_test=None):
    """One pass over every step window in order (module docstring, "Replay"), the CPU clock, the streams,
    ready and the previous window end E carried over. Returns one (S_k, E_k, duration) per window, µs;
    the duration is None for a step with no anchor (S3)."""

    def cpu(span, dataloader=True):
        # CPU time that stays: DataLoader time removed from gaps and tails (S9), all of it times f (S10)
        a, b = span
        t = b - a
        if drop_dataloader and dataloader:
            t -= covered(dl, a, b)
        return t * cpu_factor

    E = steps[0].ws  # the previous replayed window end, ws_0 at first
    ready = steps[0].ws  # the replayed ready_obs
    c = steps[0].cs  # the CPU clock
    free = {}  # stream -> free time; a stream not used yet is free from E

    def enqueue(ev, c_now, e_now):
        """Start the event at max(c, free[stream]) + lat; returns its replayed end."""
        d = ev["d"]
        if tc_ratio != 1.0 and ev["kernel"] and tc_test(ev):
            d = d / tc_ratio
        end = max(c_now, free.get(ev["stream"], e_now)) + ev["lat"] + d
        free[ev["stream"]] = end
        return end

    out = []
    for k, st in enumerate(steps):
        if k:
            c += cpu(st.between, dataloader=False)  # the time between steps keeps its DataLoader time (S9)
        C = c
        ends = []  # replayed ends of the events enqueued in this step
        for a in st.anchors:
            c += cpu(a["gap"])
            if a["kind"] == "launch":
                c += a["te"] - a["ts"]
            # a blocking anchor's events are enqueued at the c reached before its wait (S8)
            for ev in a["events"]:
                ends.append(enqueue(ev, c, E))
                ready = max(ready, ends[-1])
            if a["kind"] == "blocking":
                c = max(c, ready) + a["o"]
        c += cpu(st.tail)
        S = max(C, E)
        E_k = max(c, S, *ends)
        out.append((S, E_k, E_k - S if st.anchors else None))
        E = E_k
    return out


WHATIFS = ("baseline", "dataloader", "dataloader_low", "tensor_cores")


def derive(path, eligible, is_tc):
    m = build(path)
    if m is None:
        return None
    props = load_props(path)
    ratio, dev_name = device_ratio(props, m["dev"])
    steps, kept = m["steps"], m["kept"]

    def tc_test(ev):
        return eligible(ev["name"], ev["op_names"] or []) and not is_tc(ev["name"])

    knobs = {  # the WhatIf fields of each what-if
        "baseline": {},
        "dataloader": {"drop_dataloader": True},
        "dataloader_low": {"drop_dataloader": True, "cpu_factor": CONTENTION_MAX},
        "tensor_cores": {"tensor_core_ratio": ratio},
    }
    runs = {}
    for k, kn in knobs.items():
        runs[k] = replay(
            steps,
            m["dl"],
            drop_dataloader=kn.get("drop_dataloader", False),
            cpu_factor=kn.get("cpu_factor", 1.0),
            tc_ratio=kn.get("tensor_core_ratio", 1.0),
            tc_test=tc_test,
        )
    per = {"observed": [st.we - st.ws for st in steps]}
    per.update({k: [d for _, _, d in runs[k]] for k in WHATIFS})
    n_tc = sum(1 for st in steps for a in st.anchors for ev in a["events"] if ev["kernel"] and tc_test(ev))

    def mean_ms(vals):
        return sum(vals) / len(vals) / 1e3

    signals, unclamped = None, {}
    ok = [i for i in range(kept) if per["baseline"][i] is not None]  # complete steps with a replayed duration
    if ok:
        signals = {"replay_error_ms": mean_ms([abs(per["baseline"][i] - per["observed"][i]) for i in ok])}
        for name, k in (
            ("dataloader_replay_saving_ms", "dataloader"),
            ("dataloader_replay_saving_low_ms", "dataloader_low"),
            ("tensor_core_replay_saving_ms", "tensor_cores"),
        ):
            both = [i for i in ok if per[k][i] is not None]  # steps both replays give a duration (S11)
            raw = mean_ms([per["baseline"][i] - per[k][i] for i in both]) if both else None
            signals[name] = None if raw is None else max(0.0, raw)  # a negative mean counts as 0 (S11)
            unclamped[name] = None if raw is None else round(raw, 3)
        signals = {k: None if v is None else round(v, 3) for k, v in signals.items()}

    def r3(v):
        return None if v is None or (isinstance(v, float) and math.isnan(v)) else round(v, 3)

    return {
        "device": m["device"],
        "device_name": dev_name,
        "tensor_core_ratio": round(ratio, 6),
        "contention_factor": CONTENTION_MAX,
        "steps": [st.number for st in steps],
        "complete_steps": kept,
        "whatif": knobs,  # the WhatIf fields of each what-if, unrounded: WhatIf(**whatif[k])
        "per_step_us": {k: [r3(v) for v in vals] for k, vals in per.items()},
        "replayed_window_us": {k: [[r3(s), r3(e)] for s, e, _ in runs[k]] for k in WHATIFS},
        "anchors_per_step": [len(st.anchors) for st in steps],
        "gpu_events_per_step": [st.n_events for st in steps],
        "tensor_core_candidate_kernels": n_tc,
        "clamped_overhead_anchors_per_step": [len(st.clamped_overheads) for st in steps],
        "window_us": [[r3(st.ws), r3(st.we)] for st in steps],
        "cpu_span_us": [[r3(st.cs), r3(st.ce)] for st in steps],
        "t0_us": m["t0"],
        "signals": signals,
        "savings_before_clamp_ms": unclamped,  # the means before "a negative mean counts as 0"
    }


def main():
    tdir = sys.argv[1] if len(sys.argv) > 1 else TRACE_DIR
    out_path = sys.argv[2] if len(sys.argv) > 2 else os.path.join(HERE, "replay_figures.json")
    eligible, is_tc = kernel_classes()
    figures = {
        "_about": (
            "Step replay (tracedoc's step model) of the primary device, derived by tests/golden/derive_replay.py: "
            "stdlib only, independent of tracedoc, from the written definition (revised: one continuous pass) "
            "of tracedoc/signals/stepmodel.py's docstrings. per_step_us: one figure per step window, complete "
            "or not (the first complete_steps are complete), like replay_steps_us; null for a window with no "
            "anchor; whatif[k] gives the WhatIf fields of per_step_us[k]. signals: ms per step over the complete "
            "steps. Step windows from derive_golden.py, loader and call classes from derive_ledger.py. "
            "Readings: tests/golden/README.md, section 'Step replay'."
        ),
        "traces": {},
    }
    for name in sorted(os.listdir(tdir)):
        if name.endswith(".gz"):
            res = derive(os.path.join(tdir, name), eligible, is_tc)
            if res is not None:
                figures["traces"][name] = res
                print(name, json.dumps(res["signals"]))
    with open(out_path, "w") as f:
        json.dump(figures, f, indent=1, sort_keys=True)
        f.write("\n")


if __name__ == "__main__":
    main()
