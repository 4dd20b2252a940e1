#!/usr/bin/env python3
"""Independent re-derivation of tracedoc's step model (the step replay, its critical path and its
named fixes) on the real traces in fixtures/.

Standalone on purpose: stdlib only, never imports tracedoc, pandas or numpy. Written from the
*written* definition of the step model only: the module docstring of
``tracedoc/signals/stepmodel.py`` (revised: dependency edges, regions, non-blocking anchors, GPU
classes, critical path, named fixes), the docstrings of ``WhatIf`` (and ``WhatIf.combine``) and of
its public functions, the constants copied by value (``TENSOR_CORE_PEAK_RATIO``, ``CONTENTION_MAX``,
``FOREACH_HOST_FACTOR``, ``FUSED_ATTENTION_FACTOR``, ``PATH_CAUSES``, ``REGIONS``, ``GPU_CLASSES``,
``WAIT_CLASSES``, ``TIE_US``, ``TF32_KERNEL``, ``FLASH_ATTENTION_PEAK_SHARE``, ``SCALE_OPS``) and the fields of the ``WhatIf`` each named fix builds (printed, as data); the
idle ledger's definition it refers to (launch calls, blocking calls, ``pageable_h2d``, start-up
work, ``allocator``, launching threads, stream waits and their producers: the module docstring of
``tracedoc/signals/ledger.py`` and the ``dependency_waits`` docstring); the docstrings of the
kernel classification (``attribution.kernel_ops``), of ``attention`` (softmax / batched-matmul /
fused attention kernels), ``comm`` and ``optimizer``, with the name patterns of
``tracedoc/signals/patterns.toml`` (a data file); for the cost models of ``tensor_cores`` and
``fused_attention`` (the docstring's "Cost models of two fixes", the ``attention`` module docstring
and the ``match_device`` docstring) the device peak table ``tracedoc/perf/peaks.toml`` (a data
file) and the FLOP count of a batched matmul in docs/op-models.md. The code behind them was not read, so that
agreement means something. Usage:

    python3 tests/golden/derive_replay.py [TRACE_DIR] [OUT_JSON]

It reuses the sibling scripts, which are independent of tracedoc too:

* ``derive_golden.py``: the step windows (the TensorBoard plugin's rule), the complete steps and
  interval arithmetic;
* ``derive_ledger.py``: the trace loader (rebased µs, trace order), the ledger's name patterns
  (launch, blocking, allocator, start-up calls, stream waits, event records) and the link rules
  (R2-R4, R6, R8, R12, R13 of README.md, "Idle ledger").

Every reading of the definition that had to be chosen is listed in README.md ("Step replay"),
numbered S1, S2, ... in the comments below. Times in traces are µs; per-step figures are written
in µs, one per step window (complete or not, as ``replay_steps_us`` gives them), signals in ms per
step over the complete steps, all rounded to 0.001.
"""

import bisect
import gzip
import json
import math
import os
import re
import sys
import time
import tomllib
from collections import defaultdict

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, HERE)
import derive_golden as G  # noqa: E402  (sibling stdlib script: interval arithmetic)
import derive_ledger as L  # noqa: E402  (sibling stdlib script: loader, call patterns, windows())

TRACE_DIR = os.path.join(HERE, "..", "..", "fixtures")
PATTERNS = os.path.join(HERE, "..", "..", "tracedoc", "signals", "patterns.toml")  # a data file

# ---- the written definition's constants, copied by value
TENSOR_CORE_PEAK_RATIO = (
    ("V100", 125.0 / 15.7),
    ("A100", 312.0 / 19.5),
    ("H100", 989.5 / 67.0),
    ("MI250", 362.1 / 45.3),
    ("MI300", 1307.4 / 163.4),
)
CONTENTION_MAX = 1.19  # no GPU fixture records tracedoc_host metadata: f = CONTENTION_MAX (S12)
FOREACH_HOST_FACTOR = 0.04938927243759958  # 0.93 / 18.83 ms
FUSED_ATTENTION_FACTOR = 0.5
TF32_KERNEL = re.compile(r"tf32", re.I)  # tensor_core.TF32_KERNEL, by value
FLASH_ATTENTION_PEAK_SHARE = 0.35  # attention.FLASH_ATTENTION_PEAK_SHARE, by value
SCALE_OPS = re.compile(r"^aten::(?:mul|div)_?$")  # attention.SCALE_OPS, by value
PEAKS = os.path.join(HERE, "..", "..", "tracedoc", "perf", "peaks.toml")  # a data file
REGIONS = ("startup", "dataloader", "optimizer_step", "zero_grad", "launching_ops", "allocator", "other_cpu")
GPU_CLASSES = ("comm", "zero_grad", "eager_attention")
WAIT_CLASSES = ("sync", "pageable_copy")
HOST_PATH_CAUSES = ("startup", "dataloader", "zero_grad", "optimizer_step", "launch_overhead", "sync", "other_cpu")
DEVICE_PATH_CAUSES = ("compute", "communication", "memcpy", "gpu_wait")
PATH_CAUSES = HOST_PATH_CAUSES + DEVICE_PATH_CAUSES
# the regions that split CPU time on the critical path, in precedence, and the cause each gives
PATH_REGIONS = (
    ("startup", "startup"),
    ("dataloader", "dataloader"),
    ("zero_grad", "zero_grad"),
    ("optimizer_step", "optimizer_step"),
    ("launching_ops", "launch_overhead"),
)

STEP_CPU_CATS = {"operator", "cpu_op", "user_annotation", "python"}  # derive_golden's CPU roles
KERNEL_CATS = {"kernel"}
MEMCPY_MEMSET_CATS = {"memcpy", "gpu_memcpy", "memset", "gpu_memset"}
RECORD_CORR_ARG = "wait_on_cuda_event_record_corr_id"
TIE_US = 1e-3  # stepmodel.TIE_US, by value: the CPU end node must exceed the latest event end by more (S22)


# ---------------------------------------------------------------- the WhatIfs (WhatIf, FIXES, combine)
def whatif(cpu_scale=(), cpu_factor=1.0, tensor_core_ratio=1.0, no_wait=(), gpu_scale=(), tf32_ratio=1.0):
    return {
        "cpu_scale": dict(cpu_scale),
        "cpu_factor": cpu_factor,
        "tensor_core_ratio": tensor_core_ratio,
        "no_wait": set(no_wait),
        "gpu_scale": dict(gpu_scale),
        "tf32_ratio": tf32_ratio,
    }


def combine(a, b):
    """WhatIf.combine: a region or GPU class keeps the smaller factor, the larger cpu_factor,
    tensor_core_ratio and tf32_ratio apply, the no_wait sets unite."""
    out = whatif()
    for key in ("cpu_scale", "gpu_scale"):
        d = dict(a[key])
        for k, v in b[key].items():
            d[k] = min(d.get(k, v), v)
        out[key] = d
    out["cpu_factor"] = max(a["cpu_factor"], b["cpu_factor"])
    out["tensor_core_ratio"] = max(a["tensor_core_ratio"], b["tensor_core_ratio"])
    out["tf32_ratio"] = max(a["tf32_ratio"], b["tf32_ratio"])
    out["no_wait"] = set(a["no_wait"]) | set(b["no_wait"])
    return out


def fixes(ratio, ratio32, fused, contention=CONTENTION_MAX):
    """The WhatIf of each named fix of FIXES (fields as tracedoc's FIXES[name].what(ctx) prints them, S24);
    ``ratio``, ``ratio32`` and ``fused`` from the docstring's cost models (device_ratios, fused_factor)."""
    return {
        "dataloader": whatif(cpu_scale={"dataloader": 0.0}),
        "dataloader_low": whatif(cpu_scale={"dataloader": 0.0}, cpu_factor=contention),
        "tensor_cores": whatif(tensor_core_ratio=ratio, tf32_ratio=ratio32),
        "launch_collapse": whatif(cpu_scale={"launching_ops": 0.0}),
        "foreach": whatif(cpu_scale={"optimizer_step": FOREACH_HOST_FACTOR}),
        "zero_grad": whatif(cpu_scale={"zero_grad": 0.0}, gpu_scale={"zero_grad": 0.0}),
        "no_sync": whatif(no_wait={"sync"}),
        "pinned_memory": whatif(no_wait={"pageable_copy"}),
        "no_allocator": whatif(cpu_scale={"allocator": 0.0}),
        "overlap_communication": whatif(gpu_scale={"comm": 0.0}),
        "fused_attention": whatif(gpu_scale={"eager_attention": fused}),
        "host_work_offloaded": whatif(cpu_scale={"other_cpu": 0.0}),
    }


FIX_NAMES = (
    "dataloader",
    "dataloader_low",
    "tensor_cores",
    "launch_collapse",
    "foreach",
    "zero_grad",
    "no_sync",
    "pinned_memory",
    "no_allocator",
    "overlap_communication",
    "fused_attention",
    "host_work_offloaded",
)
COMBINED = tuple(n for n in FIX_NAMES if n != "dataloader_low")  # every fix but the low end


# ---------------------------------------------------------------- kernel classification
def _patterns(table, section, key=None):
    if key is not None:
        return [re.compile(p, re.I) for p in table[section].get(key, [])]
    return [re.compile(p, re.I) for pats in table[section].values() for p in pats]


def classifiers():
    """Name tests from patterns.toml (re.search, ignoring case; ``(?-i:...)`` groups stay case-sensitive)."""
    with open(PATTERNS, "rb") as f:
        t = tomllib.load(f)
    tc, excl = _patterns(t, "tensor_core_kernels"), _patterns(t, "tensor_core_exclusions")
    layout = _patterns(t, "layout_transform_kernels")
    elig_ops, elig_kern = _patterns(t, "tensor_core_eligible_ops"), _patterns(t, "tensor_core_eligible_kernels")
    comm = _patterns(t, "communication_kernels")
    softmax_ops, softmax_kern = _patterns(t, "attention_softmax", "ops"), _patterns(t, "attention_softmax", "kernels")
    bmm_ops = _patterns(t, "attention_batched_matmul", "ops")
    fused_ops, fused_kern = _patterns(t, "attention_fused_ops"), _patterns(t, "tensor_core_kernels", "attention")

    def any_(pats, s):
        return s is not None and any(p.search(s) for p in pats)

    def is_layout(name):
        return any_(layout, name)

    def is_tensor_core(name):
        return any_(tc, name) and not any_(excl, name) and not is_layout(name)

    def eligible(name, op_names):
        # GEMM/conv/attention work: an enclosing op (any depth) eligible, a Tensor Core kernel or a
        # GEMM/conv kernel name, and not a layout transform (S13)
        return (any(any_(elig_ops, n) for n in op_names) or is_tensor_core(name) or any_(elig_kern, name)) and not (
            is_layout(name)
        )

    def is_comm(name):
        return any_(comm, name)

    def attention(name, op):
        """(softmax, batched_matmul, fused) of a kernel launched by the innermost cpu_op ``op`` (S18)."""
        fused = any_(fused_kern, name) or any_(fused_ops, op)
        softmax = (any_(softmax_ops, op) or any_(softmax_kern, name)) and not fused
        bmm = any_(bmm_ops, op) and not fused and not softmax
        return softmax, bmm, fused

    return {"eligible": eligible, "is_tc": is_tensor_core, "is_comm": is_comm, "attention": attention}


# ---------------------------------------------------------------- device peaks (match_device's docstring)
def _peak_rows():
    with open(PEAKS, "rb") as f:
        return tomllib.load(f)["device"]


PEAK_ROWS = _peak_rows()
RATE_KEYS = (
    "mem_tbs",
    "fp64",
    "fp64_tc",
    "fp32",
    "fp32_tc",
    "tf32_tc",
    "fp16_tc",
    "bf16_tc",
    "fp8_tc",
    "fp4_tc",
    "int8_tc",
)
GENERIC_NAMES = ("amd radeon graphics", "amd instinct", "nvidia graphics device", "")


def match_peak(prop):
    """The peaks.toml row of a deviceProperties entry, or None (match_device's docstring): rows whose family
    matches the name (and no exclude pattern) are candidates, those whose form matches too are preferred, the
    properties (SM count, compute capability, memory size; without totalGlobalMem a "NNGB" in the name) rule
    rows out; a generic name is matched by properties alone among the generic rows; what is left must carry
    one set of figures."""
    name = " ".join(str(prop.get("name") or "").lower().replace("_", " ").split())

    def num(*keys):
        for k in keys:
            v = prop.get(k)
            if type(v) is int:
                return v
        return None

    sms = num("numSms", "multiProcessorCount")
    major, minor = num("computeMajor", "major"), num("computeMinor", "minor")
    cc = [major, minor] if major is not None and minor is not None else None
    mem = num("totalGlobalMem")
    mem_gb = mem / 1e9 if mem else None
    if mem_gb is None:
        m = re.search(r"(\d{2,3})\s*gb?\b", name)
        mem_gb = float(m.group(1)) if m else None

    def fits(r):
        if r.get("sms") is not None and sms is not None and r["sms"] != sms:
            return False
        if r.get("compute") is not None and cc is not None and list(r["compute"]) != cc:
            return False
        lo_hi = r.get("mem_gb")
        return not (lo_hi is not None and mem_gb is not None and not lo_hi[0] <= mem_gb <= lo_hi[1])

    def one(rows):
        if not rows or len({tuple(r.get(k) for k in RATE_KEYS) for r in rows}) != 1:
            return None
        return rows[0]

    cands = [
        r for r in PEAK_ROWS if re.search(r["family"], name) and not ("exclude" in r and re.search(r["exclude"], name))
    ]
    if cands:
        formed = [r for r in cands if "form" in r and re.search(r["form"], name)]
        fitting = [r for r in formed if fits(r)] or [r for r in cands if fits(r)]
        return one(fitting)
    if name in GENERIC_NAMES and cc is not None and sms is not None:
        vendor = "amd" if name.startswith("amd") else "nvidia" if name.startswith("nvidia") else None
        gen = [
            r
            for r in PEAK_ROWS
            if r.get("generic")
            and (vendor is None or r["vendor"] == vendor)
            and r.get("sms") == sms
            and list(r.get("compute") or []) == cc
            and fits(r)
        ]
        return one(gen)
    return None


def p16_of(row):
    """The 16-bit Tensor Core peak AMP runs at: bf16, else fp16 (the docstring's P16)."""
    return row.get("bf16_tc") if row.get("bf16_tc") is not None else row.get("fp16_tc")


def device_ratios(props, dev):
    """(r, r32, peak row, name) of the primary device (docstring, "Cost models of two fixes"): r = P16 / FP32
    and r32 = P16 / TF32 from its peaks.toml row; without a row (or P16 / FP32), r is the first
    TENSOR_CORE_PEAK_RATIO key that is a substring of the name, else the table's smallest (S14); r32 = 1 without
    a row or a TF32 rate. Both at least 1."""
    prop = None
    for p in props or []:
        if str(p.get("id")) == str(dev):
            prop = p
            break
    if prop is None and props:
        prop = props[0]  # ROCm numbers devices differently from its properties (S14)
    name = prop.get("name") if prop else None
    row = match_peak(prop) if prop else None
    r = r32 = None
    if row is not None:
        p16 = p16_of(row)
        if p16 is not None and row.get("fp32"):
            r = max(p16 / row["fp32"], 1.0)
        if p16 is not None and row.get("tf32_tc"):
            r32 = max(p16 / row["tf32_tc"], 1.0)
    if r is None:
        r = next((v for key, v in TENSOR_CORE_PEAK_RATIO if name and key in name), None)
        if r is None:
            r = min(v for _, v in TENSOR_CORE_PEAK_RATIO)
    return r, (r32 if r32 is not None else 1.0), row, name


DTYPES = {"c10::BFloat16": "bf16", "c10::Half": "fp16", "float": "fp32", "double": "fp64"}


def bmm_flops(op):
    """(FLOPs, dtype) of a batched-matmul op event from its recorded args (docs/op-models.md: 2*b*m*n*k for
    bmm [b,m,k]@[b,k,n]; baddbmm adds b*m*n unless beta = 0), or None without shapes."""
    args = op.get("args") or {}
    dims, types = args.get("Input Dims"), args.get("Input type")
    if not isinstance(dims, list) or not isinstance(types, list):
        return None
    first = 1 if op["name"] == "aten::baddbmm" else 0
    if len(dims) < first + 2 or len(types) < first + 2:
        return None
    a, b = dims[first], dims[first + 1]
    if len(a) != 3 or len(b) != 3 or a[0] != b[0] or a[2] != b[1]:
        return None
    bb, m, k, n = a[0], a[1], a[2], b[2]
    flops = 2 * bb * m * n * k
    if first:
        conc = args.get("Concrete Inputs") or []
        beta = conc[3] if len(conc) > 3 else ""
        if beta not in ("0", "0.0"):
            flops += bb * m * n
    dt = {DTYPES.get(types[first]), DTYPES.get(types[first + 1])}
    dtype = "fp16" if "fp16" in dt else "bf16" if "bf16" in dt else next(iter(dt)) if len(dt) == 1 else None
    return flops, dtype


def fused_factor(evs, row):
    """The share s of the eager_attention class a fused kernel keeps (docstring, "Cost models of two fixes"):
    min(1, T_fused / T_replaced), T_fused = F / (FLASH_ATTENTION_PEAK_SHARE * P16(dtype)); F over the distinct
    batched-matmul op calls that launched kernels of the class; FUSED_ATTENTION_FACTOR without shapes, with
    several or non-16-bit dtypes, or without a peak row. Returns (s, F, T_fused µs, T_replaced µs)."""
    cls_evs = [ev for ev in evs if ev.get("eager_attention")]
    replaced = sum(ev["d"] for ev in cls_evs)
    if not cls_evs or replaced <= 0:
        return FUSED_ATTENTION_FACTOR, None, None, replaced
    ops = {}
    for ev in cls_evs:
        if ev["bmm"]:
            if ev["inner_op"] is None:
                return FUSED_ATTENTION_FACTOR, None, None, replaced
            ops[id(ev["inner_op"])] = ev["inner_op"]
    costs = [bmm_flops(o) for o in ops.values()]
    if not costs or any(c is None for c in costs):
        return FUSED_ATTENTION_FACTOR, None, None, replaced
    dtypes = {c[1] for c in costs}
    if len(dtypes) != 1 or next(iter(dtypes)) not in ("fp16", "bf16") or row is None:
        return FUSED_ATTENTION_FACTOR, None, None, replaced
    peak = row.get(f"{next(iter(dtypes))}_tc")
    if not peak:
        return FUSED_ATTENTION_FACTOR, None, None, replaced
    flops = sum(c[0] for c in costs)
    t_fused = flops / (FLASH_ATTENTION_PEAK_SHARE * peak * 1e12) * 1e6
    return min(t_fused / replaced, 1.0), flops, t_fused, replaced


def load_props(path):
    with gzip.open(path, "rt") as f:
        doc = json.load(f)
    if not isinstance(doc, dict):
        return []
    return doc.get("deviceProperties") or doc.get("computeProperties") or []


# ---------------------------------------------------------------- intervals
def merged(iv):
    return [tuple(x) for x in L.merge(iv)]


class Weight:
    """A piecewise-constant weight over time (disjoint sorted segments ``(s, e, w)``), integrated
    over any [a, b) with two binary searches."""

    def __init__(self, segs):
        self.s = [s for s, _, _ in segs]
        self.e = [e for _, e, _ in segs]
        self.w = [w for _, _, w in segs]
        self.cum = [0.0]
        for s, e, w in segs:
            self.cum.append(self.cum[-1] + (e - s) * w)

    @classmethod
    def cover(cls, intervals):
        return cls([(s, e, 1.0) for s, e in merged(intervals)])

    def upto(self, x):
        i = bisect.bisect_right(self.s, x) - 1
        if i < 0:
            return 0.0
        return self.cum[i] + self.w[i] * (min(x, self.e[i]) - self.s[i])

    def integral(self, a, b):
        if b <= a or not self.s:
            return 0.0
        return self.upto(b) - self.upto(a)


def factor_weight(regions, cpu_scale):
    """``1 - s(t)``: s(t) the smallest factor of the scaled regions covering t, 1 outside them."""
    active = [(regions[r], f) for r, f in cpu_scale.items() if f < 1.0 and regions.get(r)]
    if not active:
        return Weight([])
    bounds = []
    for k, (iv, _) in enumerate(active):
        for s, e in iv:
            bounds.append((s, 1, k))
            bounds.append((e, -1, k))
    bounds.sort()
    count = [0] * len(active)
    segs, prev = [], None
    for t, d, k in bounds:
        if prev is not None and t > prev:
            fs = [active[j][1] for j in range(len(active)) if count[j] > 0]
            if fs:
                w = 1.0 - min(fs)
                if segs and segs[-1][1] == prev and segs[-1][2] == w:
                    segs[-1] = (segs[-1][0], t, w)
                else:
                    segs.append((prev, t, w))
        count[k] += d
        prev = t
    return Weight([s for s in segs if s[2] > 0])


# ---------------------------------------------------------------- the schedule
class Step:
    def __init__(self, number, ws, we, cs, ce, complete):
        self.number, self.ws, self.we, self.cs, self.ce = number, ws, we, cs, ce
        self.complete = complete
        self.anchors = []
        self.tail = (cs, ce)
        self.between = (cs, cs)  # [ce_{k-1}, max(ce_{k-1}, cs_k)), set from the second step on


def build(path, cls):
    evs, t0, _ = L.load_events(path)
    all_wins, nums, kept = L.windows(path, t0, evs)
    gpu = [e for e in evs if e["cat_"] in L.GPU_CATS]
    if not gpu:
        return None
    cc = L.CallClasses(evs, gpu)  # the ledger's call classes (R3, R4, R6, R8, R12 of "Idle ledger")
    runtime, rocm, first_gpu, launched, rt_by_corr = cc.runtime, cc.rocm, cc.first_gpu, cc.launched, cc.rt_by_corr
    by_thread, first_of_name, records_startup = cc.by_thread, cc.first_of_name, cc.records_startup
    is_launch, is_blocking, issues_unpinned_h2d = cc.is_launch, cc.is_blocking, cc.issues_unpinned_h2d
    contains_launch, innermost_op, slow_launch = cc.contains_launch, cc.innermost_op, cc.slow_launch

    # primary device: the one with the most kernel time (S1); every fixture has only one
    ktime = defaultdict(float)
    for g in gpu:
        ktime[g["dev"]] += g.get("dur", 0) if g["cat_"] in KERNEL_CATS else 0.0
    dev = max(sorted(ktime, key=str), key=lambda d: ktime[d])
    dgpu = [g for g in gpu if g["dev"] == dev]
    threads = {g["launch"]["thread"] for g in dgpu if g["launch"] is not None}  # launching threads

    def startup_call(r, blocking):
        """A runtime call the ledger calls start-up work by itself (cause 5, S16)."""
        n, dur = r["name"], r.get("dur", 0)
        if records_startup and (
            L.ALLOCATOR.match(n) or (dur > L.SLOW_LAUNCH_MIN_US and not blocking and not is_launch(r))
        ):
            op = innermost_op(r)
            if op is not None and first_of_name.get((op["thread"], op["name"])) is op:
                return True  # lazy initialisation in an op's first call
        if L.ALLOCATOR.match(n) and r["s"] < first_gpu:
            return True
        if L.STARTUP_RUNTIME.match(n) or (dur > L.SLOW_LAUNCH_MIN_US and r["s"] < first_gpu and not blocking):
            return True
        return bool(L.KERNEL_LAUNCH.match(n) and dur > L.SLOW_LAUNCH_MIN_US and dur > slow_launch)

    # ---- regions (merged spans on the launching threads)
    reg = defaultdict(list)
    blocking_of, startup_of = {}, {}
    pageable, blocking_rt = [], []
    for th in threads:
        for e in by_thread.get(th, ()):
            n, span = e["name"], (e["s"], e["e"])
            if e["cat_"] in L.RUNTIME_CATS:
                b = is_blocking(e)
                su = startup_call(e, b)
                blocking_of[id(e)], startup_of[id(e)] = b, su
                if b:
                    (pageable if issues_unpinned_h2d(e) else blocking_rt).append(e)
                if su:
                    reg["startup"].append(span)
                elif L.ALLOCATOR.match(n):
                    reg["allocator"].append(span)  # the ledger's allocator class: not start-up work
                if is_launch(e):
                    reg["launching_ops"].append(span)
            if n.startswith(L.DATALOADER_PREFIX):  # enumerate(DataLoader)#... (S9)
                reg["dataloader"].append(span)
            if n.startswith(L.OPTIMIZER_STEP_PREFIX):
                reg["optimizer_step"].append(span)
            if n.startswith(L.ZERO_GRAD_PREFIX):
                reg["zero_grad"].append(span)
            if L.is_op(e) and contains_launch(e):
                reg["launching_ops"].append(span)
    regions = {k: merged(v) for k, v in reg.items()}
    regions["launching_ops"] = G.subtract(regions.get("launching_ops", []), regions.get("startup", []))

    # pageable_h2d of the ledger: the unpinned H2D copy calls and the other blocking runtime calls that
    # start inside the innermost enclosing cpu_op of one on the same thread (R12)
    pageable_ids = {id(p) for p in pageable}
    for p in pageable:
        op = innermost_op(p)
        if op is None:
            continue
        for b in blocking_rt:
            if b["thread"] == p["thread"] and op["s"] <= b["s"] <= op["e"]:
                pageable_ids.add(id(b))

    # ---- anchors: runtime calls on the launching threads that are launch or blocking calls
    anchors_all = []
    for r in runtime:
        if r["thread"] not in threads:
            continue
        b = blocking_of[id(r)]
        if b or is_launch(r):
            kind = "blocking" if b else "launch"  # both: a blocking anchor (S4)
            anchors_all.append((r["s"], r["idx"], r, kind))
    anchors_all.sort(key=lambda x: (x[0], x[1]))
    a_starts = [a[0] for a in anchors_all]

    # ---- stream waits: dependent event and producer (dependency_waits; S17)
    producers = dependency_producers(evs, runtime, gpu, dev, rt_by_corr)

    # ---- GPU classes and kernel classes
    zg = regions_by_thread(evs, threads, L.ZERO_GRAD_PREFIX)
    step_evs = sorted(
        (e for e in evs if e["cat_"] in STEP_CPU_CATS and e["name"].startswith("ProfilerStep#")),
        key=lambda e: e["s"],
    )
    steps = []
    ws0 = all_wins[0][0]
    ready_obs = ws0  # latest observed end of every GPU event enqueued so far in the trace
    taken = set()
    for i in range(len(all_wins)):
        ws, we = all_wins[i]
        cs, ce = (step_evs[i]["s"], step_evs[i]["e"]) if step_evs else (ws, we)  # S2
        st = Step(nums[i], ws, we, cs, ce, i < kept)
        if steps:
            pce = steps[-1].ce
            st.between = (pce, max(pce, cs))
        lo, hi = bisect.bisect_left(a_starts, cs), bisect.bisect_left(a_starts, ce)  # start in [cs, ce)
        mine = [a for a in anchors_all[lo:hi] if a[1] not in taken]
        taken.update(a[1] for a in mine)
        per_anchor = [
            sorted((g for g in launched.get(id(r), ()) if g["dev"] == dev), key=lambda g: (g["s"], g["idx"]))
            for _, _, r, _ in mine
        ]
        # prev_end: previous event of the same stream (by start) among the step's events, ws first (S6)
        by_stream = defaultdict(list)
        for evl in per_anchor:
            for g in evl:
                by_stream[g["stream"]].append(g)
        prev_end = {}
        for lst in by_stream.values():
            lst.sort(key=lambda g: (g["s"], g["idx"]))
            pe = ws
            for g in lst:
                prev_end[g["idx"]] = pe
                pe = g["e"]
        p = cs
        for (ts, _, r, kind), evl in zip(mine, per_anchor, strict=True):
            te = r["e"]
            a = {
                "kind": kind,
                "ts": ts,
                "te": te,
                "name": r["name"],
                "gap": (p, max(p, ts)),
                # a launch anchor's call less what earlier anchors of the step covered: [max(ts, p), max(te, p)) (S25)
                "call": (max(ts, p), max(te, p)),
                "startup": startup_of[id(r)],
                "wclass": "pageable_copy" if id(r) in pageable_ids else "sync",
                "events": [],
            }
            for g in evl:
                prods = [q for q in producers.get(g["idx"], ()) if q["stream"] != g["stream"]]
                prod_end = max((q["e"] for q in prods), default=None)
                base = max(te, prev_end[g["idx"]], prod_end if prod_end is not None else -math.inf)
                a["events"].append(
                    {
                        "idx": g["idx"],
                        "stream": g["stream"],
                        "d": g.get("dur", 0),
                        "lat": max(0.0, g["s"] - base),
                        "cat": g["cat_"],
                        "name": g["name"],
                        "rt": r,
                        "producers": [q["idx"] for q in prods],
                        "s_obs": g["s"],
                        "zero_grad": in_thread_spans(zg, r),
                    }
                )
                ready_obs = max(ready_obs, g["e"])
            if kind == "blocking":
                a["o"] = max(0.0, te - max(ts, ready_obs))  # ready_obs includes its own events (S5)
            st.anchors.append(a)
            p = max(p, te)
        st.tail = (max(p, cs), max(ce, p))
        steps.append(st)

    # other_cpu: the steps' CPU spans outside every other region and outside the anchors
    others = merged([iv for k in REGIONS if k != "other_cpu" for iv in regions.get(k, [])])
    anchor_iv = merged([(a["ts"], a["te"]) for st in steps for a in st.anchors])
    spans = merged([(st.cs, st.ce) for st in steps])
    regions["other_cpu"] = G.subtract(G.subtract(spans, others), anchor_iv)

    # kernel classes: enclosing ops of each kernel's launch call (S13, S18)
    ops_all = defaultdict(list)
    for e in evs:
        if e["cat_"] in L.OP_CATS:
            ops_all[e["thread"]].append(e)
    for v in ops_all.values():
        v.sort(key=lambda o: o["s"])
    starts_all = {k: [o["s"] for o in v] for k, v in ops_all.items()}

    def enclosing(r):
        ops, st_ = ops_all.get(r["thread"], []), starts_all.get(r["thread"], [])
        i = bisect.bisect_right(st_, r["s"])
        return [o["name"] for o in ops[:i] if o["e"] >= r["s"]]

    complete_wins = [(st.ws, st.we) for st in steps if st.complete]
    cache = {}
    has_soft = has_bmm = False
    for st in steps:
        for a in st.anchors:
            for ev in a["events"]:
                kern = ev["cat"] in KERNEL_CATS
                ev["kernel"] = kern
                ev["comm"] = kern and cls["is_comm"](ev["name"])
                ev["tc"] = ev["tf32"] = False
                ev["softmax"] = ev["bmm"] = ev["fused"] = ev["scale"] = False
                ev["inner_op"] = None
                if not kern:
                    continue
                rid = id(ev["rt"])
                if rid not in cache:
                    op = innermost_op(ev["rt"])
                    cache[rid] = (enclosing(ev["rt"]), op["name"] if op is not None else None, op)
                op_names, inner, inner_op = cache[rid]
                ev["inner_op"] = inner_op
                eligible = cls["eligible"](ev["name"], op_names)
                ev["tc"] = eligible and not cls["is_tc"](ev["name"])
                # an eligible Tensor Core kernel whose name says TF32 (docstring, "Cost models of two fixes")
                ev["tf32"] = eligible and cls["is_tc"](ev["name"]) and bool(TF32_KERNEL.search(ev["name"]))
                in_step = any(s <= ev["s_obs"] < e for s, e in complete_wins)
                ev["in_step"] = in_step
                if in_step:  # attention_kernels: the kernels of the complete step windows (S18)
                    ev["softmax"], ev["bmm"], ev["fused"] = cls["attention"](ev["name"], inner)
                    has_soft |= ev["softmax"]
                    has_bmm |= ev["bmm"]
    eager = has_soft and has_bmm  # eager attention: 0 unless the steps hold both kinds (S18)

    # score-scaling kernels (attention module docstring): launched by aten::mul/div(_), not softmax, bmm or fused,
    # whose op's first input has the recorded dims of the first input of a softmax op that launched a softmax
    # kernel in the steps
    def first_dims(op):
        dims = ((op or {}).get("args") or {}).get("Input Dims")
        return tuple(dims[0]) if isinstance(dims, list) and dims and isinstance(dims[0], list) and dims[0] else None

    all_evs = [ev for st in steps for a in st.anchors for ev in a["events"]]
    scores = {first_dims(ev["inner_op"]) for ev in all_evs if ev["softmax"] and ev["inner_op"] is not None}
    scores.discard(None)
    for ev in all_evs:
        if ev.get("in_step") and not (ev["softmax"] or ev["bmm"] or ev["fused"]) and ev["inner_op"] is not None:
            ev["scale"] = bool(SCALE_OPS.match(ev["inner_op"]["name"])) and first_dims(ev["inner_op"]) in scores
        # the class a fused kernel replaces: eager attention plus the score scaling, none without eager attention
        ev["eager_attention"] = eager and (ev["softmax"] or ev["bmm"] or ev["scale"])

    # the critical-path regions in precedence, as cumulative unions (S21)
    path_unions, acc = [], []
    for name, _ in PATH_REGIONS:
        acc = acc + list(regions.get(name, []))
        path_unions.append(Weight.cover(acc))

    key = f"{'hip' if rocm else 'cuda'}:{dev}"
    return {
        "device": key,
        "dev": dev,
        "steps": steps,
        "regions": regions,
        "path_unions": path_unions,
        "t0": t0,
        "kept": kept,
    }


def regions_by_thread(evs, threads, prefix):
    out = defaultdict(list)
    for e in evs:
        if e["cat_"] in L.CPU_CATS and e["thread"] in threads and e["name"].startswith(prefix):
            out[e["thread"]].append((e["s"], e["e"]))
    return {k: sorted(v) for k, v in out.items()}


def in_thread_spans(spans, call):
    """The call starts inside one of the spans of its own thread (span.ts <= call.ts <= span.end)."""
    return any(s <= call["s"] <= e for s, e in spans.get(call["thread"], ()))


def dependency_producers(evs, runtime, gpu, dev, rt_by_corr):
    """dependent event idx -> [producer GPU events] (module docstring, "The schedule"; S17).

    A stream-wait call's waiting stream and dependent event as the ledger reads them (R13); its
    producer event-record call: the runtime call whose correlation is the ``Stream Wait Event``'s
    ``wait_on_cuda_event_record_corr_id`` (none in the trace: no producer), else the last event-record
    call of any thread that starts before the wait starts. The producer GPU event: the last GPU event
    of the device launched by the record call's thread before the record call starts."""
    sync_by_corr = {}
    for e in evs:
        if e["cat_"] == "cuda_sync" and e["name"] == L.STREAM_WAIT_SYNC:
            sync_by_corr.setdefault(e["args"].get("correlation"), e)
    launched_gpu = sorted(
        (g for g in gpu if g["launch"] is not None), key=lambda g: (g["launch"]["s"], g["s"], g["idx"])
    )
    by_launch_thread, by_stream = defaultdict(list), defaultdict(list)
    dev_by_thread = defaultdict(list)
    for g in launched_gpu:
        by_launch_thread[g["launch"]["thread"]].append(g)
        by_stream[g["stream"]].append(g)
        if g["dev"] == dev:
            dev_by_thread[g["launch"]["thread"]].append(g)
    thread_s = {k: [g["launch"]["s"] for g in v] for k, v in by_launch_thread.items()}
    stream_s = {k: [g["launch"]["s"] for g in v] for k, v in by_stream.items()}
    dev_thread_s = {k: [g["launch"]["s"] for g in v] for k, v in dev_by_thread.items()}
    records = sorted((r for r in runtime if L.EVENT_RECORD.match(r["name"])), key=lambda r: (r["s"], r["idx"]))
    record_s = [r["s"] for r in records]
    out = defaultdict(list)
    for w in runtime:
        if not L.STREAM_WAIT.match(w["name"]):
            continue
        rec = sync_by_corr.get(w["args"].get("correlation"))
        if rec is not None:
            a = rec["args"]
            stream = (a.get("device", rec.get("pid")), a.get("stream", rec.get("tid")))
        else:
            cand = by_launch_thread.get(w["thread"], [])
            i = bisect.bisect_left(thread_s.get(w["thread"], []), w["e"])
            if i == len(cand):
                continue  # no waiting stream: the wait is ignored
            stream = cand[i]["stream"]
        cand = by_stream.get(stream, [])
        i = bisect.bisect_left(stream_s.get(stream, []), w["s"])
        if i == len(cand):
            continue  # no dependent event
        dep = cand[i]
        if dep["dev"] != dev:
            continue
        if rec is not None and RECORD_CORR_ARG in rec["args"]:
            pr = rt_by_corr.get(rec["args"][RECORD_CORR_ARG])  # none in the trace: outside the window
        else:
            j = bisect.bisect_left(record_s, w["s"]) - 1  # the last record call starting before the wait
            pr = records[j] if j >= 0 else None
        if pr is None:
            continue
        lst = dev_by_thread.get(pr["thread"], [])
        j = bisect.bisect_left(dev_thread_s.get(pr["thread"], []), pr["s"]) - 1  # launched before it starts
        if j < 0:
            continue
        out[dep["idx"]].append(lst[j])
    return out


# ---------------------------------------------------------------- replay
class Node:
    __slots__ = ("kind", "end", "pred", "pred_end", "ref")

    def __init__(self, kind, end, pred, pred_end, ref):
        self.kind, self.end, self.pred, self.pred_end, self.ref = kind, end, pred, pred_end, ref


def replay(model, w, path=False):
    """One pass over every step window in order (module docstring, "Replay"). Returns one
    (S_k, E_k, duration or None) per window and, with ``path``, the critical path of each window
    (cause -> µs, None for a window without anchors)."""
    steps, regions = model["steps"], model["regions"]
    fw = factor_weight(regions, w["cpu_scale"])
    f = w["cpu_factor"]
    r = w["tensor_core_ratio"]
    r32 = w["tf32_ratio"]
    gs = w["gpu_scale"]

    def kept(span):
        a, b = span
        return (b - a) - fw.integral(a, b) if b > a else 0.0

    def duration(ev):
        d, lat = ev["d"], ev["lat"]
        facs = [gs[k] for k in GPU_CLASSES if k in gs and ev[k]]
        if facs:
            s = min(facs)
            d *= s
            if s == 0:
                lat = 0.0
        if r != 1.0 and ev["kernel"] and ev["tc"]:
            d /= r  # S19: a kernel both scaled and Tensor-Core-eligible takes both
        if r32 != 1.0 and ev["kernel"] and ev["tf32"]:
            d /= r32  # the same for a TF32 Tensor Core kernel
        return d, lat

    E = ready = steps[0].ws
    ready_node = None
    c = steps[0].cs
    free, free_node, rend, rnode = {}, {}, {}, {}
    last_cpu = None
    out, paths = [], []
    for k, st in enumerate(steps):
        if k:
            c += f * kept(st.between)
        C = c
        latest, latest_node = -math.inf, None
        for a in st.anchors:
            c += f * kept(a["gap"])
            # a blocking anchor made non-blocking takes no time (not even a launch call's) and waits for nothing;
            # a blocking anchor's overhead o is never scaled by a region (S20)
            nb = a["kind"] == "blocking" and a["wclass"] in w["no_wait"]
            if a["kind"] == "launch":
                c += kept(a["call"])  # kept(max(ts, p_i), max(te, p_i)), no f (S10, S25)
            anode = Node("anchor", c, last_cpu, last_cpu.end if last_cpu else -math.inf, a) if path else None
            for ev in a["events"]:
                d, lat = duration(ev)
                fr = free.get(ev["stream"], E)
                cands = [(c, 0, anode), (fr, 1, free_node.get(ev["stream"]))]
                for q in ev["producers"]:
                    if q in rend:
                        cands.append((rend[q], 2, rnode.get(q)))
                base, _, pred = max(cands, key=lambda x: (x[0], -x[1]))  # the launch on a tie (S21)
                end = base + lat + d
                free[ev["stream"]] = end
                rend[ev["idx"]] = end
                node = Node("gpu", end, pred, base, ev) if path else None
                free_node[ev["stream"]] = node
                rnode[ev["idx"]] = node
                if end > ready:
                    ready, ready_node = end, node
                if end > latest:
                    latest, latest_node = end, node
            if a["kind"] == "blocking" and not nb:
                pred = ready_node if ready > c else anode
                pe = ready if ready > c else c
                c = max(c, ready) + a["o"]
                last_cpu = Node("wait", c, pred, pe, a) if path else None
            else:
                last_cpu = anode
        c_before_tail = c
        c += f * kept(st.tail)
        S = max(C, E)
        E_k = max(c, S, latest)
        out.append((S, E_k, E_k - S if st.anchors else None))
        if path:
            paths.append(walk(model, st, S, c, c_before_tail, latest, latest_node, last_cpu) if st.anchors else None)
        E = E_k
    return out, paths


def region_shares(model, span):
    """Share of the observed interval inside each critical-path region, in precedence; the rest is
    other_cpu (S21)."""
    a, b = span
    length = b - a
    out = {}
    if length <= 0:
        return {"other_cpu": 1.0}
    prev = 0.0
    for (_name, cause), cov in zip(PATH_REGIONS, model["path_unions"], strict=True):
        tot = cov.integral(a, b)
        out[cause] = out.get(cause, 0.0) + (tot - prev) / length
        prev = tot
    out["other_cpu"] = (length - prev) / length
    return out


def walk(model, st, S, c_end, c_before_tail, latest, latest_node, last_cpu):
    acc = dict.fromkeys(PATH_CAUSES, 0.0)

    def split(span, amount):
        for cause, sh in region_shares(model, span).items():
            acc[cause] += amount * sh

    if c_end - latest > TIE_US:
        # the CPU end (c exceeds the latest event end by more than TIE_US; a tie goes to the GPU, S22): the last CPU
        # node followed by the tail
        tail = c_end - max(c_before_tail, S)
        if tail > 0:
            split(st.tail, tail)
        if c_before_tail <= S:
            return acc
        node = last_cpu
    else:
        node = latest_node
    while node is not None and node.end > S:
        contrib = node.end - max(node.pred_end, S)
        if node.kind == "gpu":
            ev = node.ref
            dpart = min(contrib, ev["d"])
            kind = "memcpy" if not ev["kernel"] else ("communication" if ev["comm"] else "compute")
            acc[kind] += dpart
            acc["gpu_wait"] += contrib - dpart
        elif node.kind == "wait":
            acc["sync"] += contrib
        else:
            a = node.ref
            rest = contrib
            if a["kind"] == "launch":
                call = min(contrib, a["te"] - a["ts"])
                acc["startup" if a["startup"] else "launch_overhead"] += call
                rest = contrib - call
            if rest > 0:
                split(a["gap"], rest)
        node = node.pred
    return acc


# ---------------------------------------------------------------- figures
def derive(path, cls):
    model = build(path, cls)
    if model is None:
        return None
    props = load_props(path)
    ratio, ratio32, row, dev_name = device_ratios(props, model["dev"])
    steps, kept = model["steps"], model["kept"]
    evs_all = [ev for st in steps for a in st.anchors for ev in a["events"]]
    fused, fused_flops, fused_us, replaced_us = fused_factor(evs_all, row)
    fx = fixes(ratio, ratio32, fused)
    comb = whatif()
    for n in COMBINED:
        comb = combine(comb, fx[n])
    whatifs = {"baseline": whatif(), **fx, "combined": comb}
    per, path_per_step = {}, None
    for k, wi in whatifs.items():
        res, paths = replay(model, wi, path=(k == "baseline"))
        per[k] = [d for _, _, d in res]
        if k == "baseline":
            path_per_step = paths
    observed = [st.we - st.ws for st in steps]

    def r3(v):
        return None if v is None or (isinstance(v, float) and math.isnan(v)) else round(v, 3)

    ok = [i for i in range(kept) if per["baseline"][i] is not None]  # complete steps with a duration
    signals = None
    if ok:

        def mean_ms(vals):
            return sum(vals) / len(vals) / 1e3

        saving, unclamped = {}, {}
        for k in (*FIX_NAMES, "combined"):
            both = [i for i in ok if per[k][i] is not None]
            raw = mean_ms([per["baseline"][i] - per[k][i] for i in both]) if both else None
            saving[k] = None if raw is None else r3(max(0.0, raw))  # a negative mean counts as 0 (S11)
            unclamped[k] = r3(raw)
        cp = {c: mean_ms([path_per_step[i][c] for i in ok]) for c in PATH_CAUSES}
        total = sum(cp.values())
        n_complete = kept
        tck = (
            sum(  # eligible non-Tensor-Core kernels launched by the complete steps' anchors (S23)
                ev["d"] * (1 - 1 / ratio)
                for st in steps[:kept]
                for a in st.anchors
                for ev in a["events"]
                if ev["kernel"] and ev["tc"]
            )
            + sum(  # and the eligible TF32 Tensor Core kernels (tensor_core_kernel_saving_ms docstring)
                ev["d"] * (1 - 1 / ratio32)
                for st in steps[:kept]
                for a in st.anchors
                for ev in a["events"]
                if ev["kernel"] and ev["tf32"]
            )
        )
        signals = {
            "replay_error_ms": r3(mean_ms([abs(per["baseline"][i] - observed[i]) for i in ok])),
            "dataloader_replay_saving_ms": saving["dataloader"],
            "dataloader_replay_saving_low_ms": saving["dataloader_low"],
            "tensor_core_replay_saving_ms": saving["tensor_cores"],
            "tensor_core_kernel_saving_ms": r3(tck / n_complete / 1e3),
            "critical_path_host_share": r3(sum(cp[c] for c in HOST_PATH_CAUSES) / total) if total > 0 else None,
            "critical_path_device_share": r3(sum(cp[c] for c in DEVICE_PATH_CAUSES) / total) if total > 0 else None,
            "saving_ms": saving,
            "saving_before_clamp_ms": unclamped,
            "critical_path_ms": {c: r3(v) for c, v in cp.items()},
            "mean_replayed_step_ms": r3(mean_ms([per["baseline"][i] for i in ok])),
        }

    def ser(wi):
        return {
            "cpu_scale": dict(sorted(wi["cpu_scale"].items())),
            "cpu_factor": wi["cpu_factor"],
            "tensor_core_ratio": wi["tensor_core_ratio"],
            "no_wait": sorted(wi["no_wait"]),
            "gpu_scale": dict(sorted(wi["gpu_scale"].items())),
            "tf32_ratio": wi["tf32_ratio"],
        }

    return {
        "device": model["device"],
        "device_name": dev_name,
        "peak_row": row["id"] if row else None,
        "tensor_core_ratio": round(ratio, 6),
        "tf32_ratio": round(ratio32, 6),
        "fused_attention": {
            "factor": round(fused, 6),
            "gflop": None if fused_flops is None else round(fused_flops / 1e9, 3),
            "fused_ms": None if fused_us is None else round(fused_us / 1e3, 3),
            "replaced_ms": round(replaced_us / 1e3, 3),
        },
        "contention_factor": CONTENTION_MAX,
        "steps": [st.number for st in steps],
        "complete_steps": kept,
        "observed_us": [r3(v) for v in observed],
        "per_step_us": {k: [r3(v) for v in vals] for k, vals in per.items()},
        # the names to pass to fix_whatif(ctx, names) for each key, and the WhatIf fields the script used
        "fix_names": {"baseline": [], **{n: [n] for n in FIX_NAMES}, "combined": list(COMBINED)},
        "whatif_fields": {k: ser(v) for k, v in whatifs.items()},
        "critical_path_per_step_us": [None if p is None else {c: r3(v) for c, v in p.items()} for p in path_per_step],
        "signals": signals,
        "inspect": {
            "anchors_per_step": [len(st.anchors) for st in steps],
            "blocking_anchors_per_step": {
                wc: [sum(a["kind"] == "blocking" and a["wclass"] == wc for a in st.anchors) for st in steps]
                for wc in WAIT_CLASSES
            },
            "gpu_events_per_step": [sum(len(a["events"]) for a in st.anchors) for st in steps],
            "events_with_producer": sum(bool(ev["producers"]) for ev in evs_all),
            "gpu_class_events": {k: sum(bool(ev[k]) for ev in evs_all) for k in GPU_CLASSES},
            "tensor_core_candidate_kernels": sum(bool(ev["tc"]) for ev in evs_all),
            "tf32_kernels": sum(bool(ev["tf32"]) for ev in evs_all),
            "score_scaling_kernels": sum(bool(ev["scale"]) for ev in evs_all),
            # launch anchors whose call starts before p_i (an earlier anchor of the step ends after it starts), and
            # the call time they lose to that overlap, per step (S25)
            "overlapping_launch_anchors_per_step": [
                sum(a["kind"] == "launch" and a["ts"] < a["gap"][0] for a in st.anchors) for st in steps
            ],
            "launch_overlap_us_per_step": [
                r3(sum(a["te"] - a["ts"] - (a["call"][1] - a["call"][0]) for a in st.anchors if a["kind"] == "launch"))
                for st in steps
            ],
            "region_ms": {k: r3(G.total(v) / 1e3) for k, v in sorted(model["regions"].items())},
            "window_us": [[r3(st.ws), r3(st.we)] for st in steps],
            "cpu_span_us": [[r3(st.cs), r3(st.ce)] for st in steps],
            "t0_us": model["t0"],
        },
    }


def main():
    tdir = sys.argv[1] if len(sys.argv) > 1 else TRACE_DIR
    out_path = sys.argv[2] if len(sys.argv) > 2 else os.path.join(HERE, "replay_figures.json")
    cls = classifiers()
    figures = {
        "about": (
            "Step model (tracedoc/signals/stepmodel.py) of the primary device, derived by "
            "tests/golden/derive_replay.py: stdlib only, independent of tracedoc, from the written definition "
            "(module docstring, WhatIf, FIXES fields, the ledger's call classes). per_step_us[key]: replayed "
            "duration of every step window (complete or not; the first complete_steps are complete; null: no "
            "anchor) for key = baseline, each fix of FIXES, and combined (every fix but dataloader_low, "
            "WhatIf.combine); fix_names[key] is the list to pass to fix_whatif, whatif_fields[key] the WhatIf "
            "fields used; observed_us: the TB windows. signals: ms per step over the complete steps "
            "(saving_ms: baseline minus transformed, mean, clamped at 0; critical_path_ms: by PATH_CAUSES). "
            "Readings: tests/golden/README.md, section 'Step replay'."
        ),
        "traces": {},
    }
    t_start = time.process_time()
    for name in sorted(os.listdir(tdir)):
        if name.endswith(".gz"):
            res = derive(os.path.join(tdir, name), cls)
            if res is not None:
                figures["traces"][name] = res
                s = res["signals"] or {}
                print(name, json.dumps({k: v for k, v in s.items() if not isinstance(v, dict)}))
    with open(out_path, "w") as f:
        json.dump(figures, f, indent=1, sort_keys=True)
        f.write("\n")
    print(f"cpu {time.process_time() - t_start:.1f} s")


if __name__ == "__main__":
    main()
