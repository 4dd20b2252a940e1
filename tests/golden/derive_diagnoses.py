#!/usr/bin/env python3
"""Independent figures for the diagnoses of issue 8 (single-tensor-optimizer,
unfused-attention, AMD matrix cores, HIP memory events), from the real traces in fixtures/.

Standalone on purpose: stdlib only (gzip + json), never imports tracedoc, written from the
definitions in the rule docs, not from tracedoc's code. Usage:

    python3 tests/golden/derive_diagnoses.py [TRACE_DIR] [OUT_JSON]

Definitions (times in the traces are µs; figures are ms per step, shares in [0, 1]):

* A *step* is a CPU event named ``ProfilerStep#N``. Its window is the TensorBoard plugin's:
  ``[max(start_N, end of the previous window), max(end_N, g_N)]`` where ``g_N`` is the latest
  end of a kernel, memcpy or memset whose launching runtime/driver call (same ``args.correlation``) starts
  inside step N's CPU span. A kernel belongs to the window its start falls in. Figures are
  given per step, so a test can average the steps it counts (the last step of a trace is
  often cut off).
* *Optimizer kernels*: kernels whose launching runtime call starts inside a CPU span named
  ``Optimizer.step#...`` (categories ``cpu_op``/``Operator``/``user_annotation``).
  *Multi-tensor*: the kernel name contains ``multi_tensor_apply``. Their wall-clock time is
  the length of the union of their ``[ts, ts+dur]`` intervals.
* *Softmax kernels*: kernel name contains ``softmax`` (any case). *Eager attention kernels*:
  softmax kernels plus kernels whose launching runtime call lies inside a CPU op named
  ``aten::bmm`` or ``aten::baddbmm`` on the same pid/tid. Shares are of the summed kernel
  durations of the step.
* *AMD matrix-core kernels*: names starting ``Cijk_`` that carry an ``_MI<m>x<n>x<k>_`` field.
* *HIP memory peak*: the largest ``Total Allocated`` of ``[memory]`` events with
  ``Device Type`` 6 (c10::DeviceType::HIP).
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
OUT = os.path.join(HERE, "diagnoses_figures.json")

TRACES = {
    "optimizer": [
        "v100_ddp_memory_events",
        "v100_resnet50_workers0",
        "v100_resnet50_workers4",
        "v100_resnet50_ddp_gpu_bound",
        *(
            f"h100_resnet18_{c}"
            for c in ("baseline", "workers", "pinned", "amp", "batch", "uint8", "channels_last", "compile")
        ),
    ],
    "attention": ["h100_timesformer_inference", "h100_vit_nsfw_inference", "mi300x_bert_small_inference"],
    "matrix_core": ["mi250_toy_train", "mi300x_bert_small_inference"],
    "hip_memory": ["mi300x_bert_small_inference"],
}
CPU_CATS = {"cpu_op", "operator", "user_annotation"}
RUNTIME_CATS = {"cuda_runtime", "runtime", "cuda_driver"}
GPU_CATS = {"kernel", "gpu_memcpy", "memcpy", "gpu_memset", "memset"}
MFMA_RE = re.compile(r"^Cijk_.*_MI\d+x\d+x\d+")


def events(name):
    with gzip.open(os.path.join(TRACE_DIR, name + ".pt.trace.json.gz"), "rb") as f:
        doc = json.load(f)
    return doc["traceEvents"] if isinstance(doc, dict) else doc


def union_len(iv):
    total, cur_s, cur_e = 0.0, None, None
    for s, e in sorted(iv):
        if cur_e is None or s > cur_e:
            if cur_e is not None:
                total += cur_e - cur_s
            cur_s, cur_e = s, e
        elif e > cur_e:
            cur_e = e
    if cur_e is not None:
        total += cur_e - cur_s
    return total


class Trace:
    def __init__(self, name):
        ev = events(name)
        self.cpu = [e for e in ev if e.get("ph") == "X" and str(e.get("cat", "")).lower() in CPU_CATS]
        self.runtime = [e for e in ev if e.get("ph") == "X" and str(e.get("cat", "")).lower() in RUNTIME_CATS]
        self.kernels = [e for e in ev if e.get("ph") == "X" and str(e.get("cat", "")).lower() == "kernel"]
        self.gpu = [e for e in ev if e.get("ph") == "X" and str(e.get("cat", "")).lower() in GPU_CATS]
        self.memory = [e for e in ev if e.get("name") == "[memory]"]
        self.steps = sorted(
            (e for e in self.cpu if str(e.get("name", "")).startswith("ProfilerStep#")), key=lambda e: e["ts"]
        )
        self.launch = {}  # correlation -> runtime event
        for r in self.runtime:
            c = r.get("args", {}).get("correlation")
            if c is not None:
                self.launch.setdefault(c, r)
        self.windows = []  # (start, end, step number)
        prev_end = float("-inf")
        for s in self.steps:
            g = float("-inf")
            for k in self.gpu:
                r = self.launcher(k)
                if r is not None and s["ts"] <= r["ts"] <= s["ts"] + s["dur"]:
                    g = max(g, k["ts"] + k["dur"])
            start = max(s["ts"], prev_end)
            end = max(s["ts"] + s["dur"], g, start)
            self.windows.append((start, end, int(s["name"].split("#")[1])))
            prev_end = end

    def launcher(self, k):
        return self.launch.get(k.get("args", {}).get("correlation"))

    def step_of(self, ts):
        """The step whose window holds time ts (None outside every window)."""
        for start, end, n in self.windows:
            if start <= ts < end:
                return n
        return None

    def spans(self, pred):
        """Sorted [start, end] of CPU events whose name satisfies pred, keyed by (pid, tid)."""
        out = defaultdict(list)
        for e in self.cpu:
            if pred(e["name"]):
                out[(str(e["pid"]), str(e["tid"]))].append((e["ts"], e["ts"] + e["dur"]))
        return {k: sorted(v) for k, v in out.items()}


def inside(spans_by_thread, r, any_thread=False):
    keys = spans_by_thread.keys() if any_thread else [(str(r["pid"]), str(r["tid"]))]
    for key in keys:
        sp = spans_by_thread.get(key, [])
        i = bisect.bisect_right(sp, (r["ts"], float("inf"))) - 1
        # spans of one name can nest; walk back while an earlier one may still cover ts
        while i >= 0:
            if sp[i][0] <= r["ts"] <= sp[i][1]:
                return True
            i -= 1
            if i >= 0 and sp[i][1] < r["ts"] - 1e7:  # 10 s back: nothing older can cover it
                break
    return False


def optimizer_figures(name):
    t = Trace(name)
    opt = t.spans(lambda n: n.startswith("Optimizer.step#"))
    per = defaultdict(lambda: {"kernels": 0, "multi_tensor": 0, "single_iv": [], "multi_iv": []})
    for k in t.kernels:
        r = t.launcher(k)
        if r is None or not inside(opt, r, any_thread=True):
            continue
        step = t.step_of(r["ts"])  # optimizer kernels: the step whose window holds the launch
        if step is None:
            continue
        p = per[step]
        p["kernels"] += 1
        if "multi_tensor_apply" in k["name"]:
            p["multi_tensor"] += 1
            p["multi_iv"].append((k["ts"], k["ts"] + k["dur"]))
        else:
            p["single_iv"].append((k["ts"], k["ts"] + k["dur"]))
    return {
        str(s): {
            "kernels": p["kernels"],
            "multi_tensor_kernels": p["multi_tensor"],
            "single_tensor_kernel_ms": round(union_len(p["single_iv"]) / 1000.0, 4),
            "multi_tensor_kernel_ms": round(union_len(p["multi_iv"]) / 1000.0, 4),
        }
        for s, p in sorted(per.items())
    }


def attention_figures(name):
    t = Trace(name)
    bmm = t.spans(lambda n: n in ("aten::bmm", "aten::baddbmm"))
    per = defaultdict(lambda: {"total_us": 0.0, "softmax_us": 0.0, "bmm_us": 0.0})
    for k in t.kernels:
        r = t.launcher(k)
        step = t.step_of(k["ts"])
        if step is None:
            continue
        p = per[step]
        p["total_us"] += k["dur"]
        if "softmax" in k["name"].lower():
            p["softmax_us"] += k["dur"]
        elif r is not None and inside(bmm, r):
            p["bmm_us"] += k["dur"]
    out = {}
    for s, p in sorted(per.items()):
        eager = p["softmax_us"] + p["bmm_us"] if p["softmax_us"] and p["bmm_us"] else 0.0
        out[str(s)] = {
            "kernel_ms": round(p["total_us"] / 1000.0, 4),
            "softmax_share": round(p["softmax_us"] / p["total_us"], 5),
            "eager_attention_share": round(eager / p["total_us"], 5),
        }
    return out


def matrix_core_figures(name):
    t = Trace(name)
    per = defaultdict(lambda: [0.0, 0.0])
    for k in t.kernels:
        step = t.step_of(k["ts"])
        if step is None:
            continue
        per[step][0] += k["dur"]
        if MFMA_RE.search(k["name"]):
            per[step][1] += k["dur"]
    return {str(s): {"matrix_core_share": round(mc / tot, 5)} for s, (tot, mc) in sorted(per.items())}


def hip_memory_figures(name):
    t = Trace(name)
    vals = [
        m["args"]["Total Allocated"]
        for m in t.memory
        if m.get("args", {}).get("Device Type") == 6 and "Total Allocated" in m["args"]
    ]
    return {"hip_events": len(vals), "peak_allocated_bytes": max(vals) if vals else None}


def main():
    global TRACE_DIR
    if len(sys.argv) > 1:
        TRACE_DIR = sys.argv[1]
    out_path = sys.argv[2] if len(sys.argv) > 2 else OUT
    result = {
        "_about": "Derived by tests/golden/derive_diagnoses.py (stdlib only, never imports tracedoc); "
        "definitions in its docstring. Per-step figures keyed by ProfilerStep number.",
        "optimizer": {n: optimizer_figures(n) for n in TRACES["optimizer"]},
        "attention": {n: attention_figures(n) for n in TRACES["attention"]},
        "matrix_core": {n: matrix_core_figures(n) for n in TRACES["matrix_core"]},
        "hip_memory": {n: hip_memory_figures(n) for n in TRACES["hip_memory"]},
    }
    with open(out_path, "w") as f:
        json.dump(result, f, indent=1, sort_keys=True)
        f.write("\n")
    print(json.dumps(result, indent=1, sort_keys=True))


if __name__ == "__main__":
    main()
