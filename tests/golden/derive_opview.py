#!/usr/bin/env python3
"""Independent re-derivation of tracedoc's op view (``tracedoc ops``) on traces with recorded shapes.

Standalone on purpose: stdlib only, never imports tracedoc, numpy or pandas.  Written from the
*written* definition only:

* ``docs/op-models.md`` (every FLOP and byte formula, the compute-dtype and peak rules);
* the docstrings of ``tracedoc.signals.opview`` (module, ``op_view``, ``kernel_view``), of
  ``tracedoc.perf.flops`` (``op_cost``, ``OpCost``, ``roofline``, ``Roofline``), of
  ``tracedoc.perf.peaks`` (``match_device``, ``DevicePeak``), of
  ``tracedoc.signals.attribution`` (``runtime_ops``, ``kernel_ops``), of
  ``tracedoc.signals.steps`` (module, ``step_windows``, ``complete_mask``, ``gpu_events``,
  ``steps_past_window_end``) and of ``tracedoc.signals.links`` (module, ``link_launches``);
* the constants, copied by value: ``attribution.MAX_NESTING_SCAN = 64``, ``opview.TOP_N = 15``
  (this file stores the top 10);
* the data file ``tracedoc/perf/peaks.toml`` (read here with ``tomllib``).

The code behind them was not read.  Every reading that had to be decided is listed in README.md
("Op view"), numbered O1, O2, ... in the comments below.  Usage:

    python3 tests/golden/derive_opview.py [FIXTURES_DIR] [OUT_JSON]

Times in traces are µs; figures: GPU ms per step, GFLOP and MB (10^6 bytes) per call, TFLOP/s and
TB/s (10^12 per second), percent of peak.
"""

import bisect
import gzip
import json
import math
import os
import re
import sys
import tomllib
from collections import defaultdict

HERE = os.path.dirname(os.path.abspath(__file__))
ROOT = os.path.join(HERE, "..", "..")
FIXTURES = os.path.join(ROOT, "fixtures")
PEAKS = os.path.join(ROOT, "tracedoc", "perf", "peaks.toml")  # a data file
TRACES = (
    "h100_timesformer_inference.pt.trace.json.gz",
    "h100_resnet18_baseline.pt.trace.json.gz",
    "h100_resnet18_amp.pt.trace.json.gz",
)
TOP = 10
MAX_NESTING_SCAN = 64  # attribution.MAX_NESTING_SCAN, by value

# O1: runtime calls are `cuda_runtime` and `cuda_driver` events (cuLaunchKernel launches kernels too).
RUNTIME_CATS = {"cuda_runtime", "cuda_driver", "runtime"}
GPU_CATS = {"kernel": "kernel", "gpu_memcpy": "memcpy", "memcpy": "memcpy", "gpu_memset": "memset", "memset": "memset"}


# ------------------------------------------------------------------------------ dtypes
#: caffe2::TypeMeta names -> (short name, bytes per element, floating?, rank among floats: narrower first)
DTYPES = {
    "float": ("fp32", 4, True),
    "double": ("fp64", 8, True),
    "c10::Half": ("fp16", 2, True),
    "c10::BFloat16": ("bf16", 2, True),
    "c10::Float8_e4m3fn": ("fp8", 1, True),
    "c10::Float8_e5m2": ("fp8", 1, True),
    "c10::Float8_e4m3fnuz": ("fp8", 1, True),
    "c10::Float8_e5m2fnuz": ("fp8", 1, True),
    "long int": ("int64", 8, False),
    "int": ("int32", 4, False),
    "short int": ("int16", 2, False),
    "signed char": ("int8", 1, False),
    "unsigned char": ("uint8", 1, False),
    "bool": ("bool", 1, False),
}
FLOAT_WIDTH = {"fp8": 1, "fp16": 2, "bf16": 2, "fp32": 4, "fp64": 8}
#: c10::ScalarType numbers of a recorded `dtype` argument (c10/core/ScalarType.h)
SCALAR_TYPE = {0: "unsigned char", 1: "signed char", 3: "int", 4: "long int", 5: "c10::Half", 6: "float",
               7: "double", 11: "bool", 15: "c10::BFloat16"}  # fmt: skip


def is_tensor_type(t):
    return t in DTYPES


def compute_dtype(types):
    """The narrowest floating dtype among the tensor operands; on a width tie (fp16 with bf16) the first one (O9)."""
    floats = [DTYPES[t][0] for t in types if t in DTYPES and DTYPES[t][2]]
    if floats:
        return min(floats, key=lambda d: FLOAT_WIDTH[d])
    ints = [DTYPES[t][0] for t in types if t in DTYPES]
    return ints[0] if ints else None


def promote(types_dims):
    """O18: PyTorch's result type of tensors (type, dims): dimensioned tensors over 0-dim ones, category
    first (bool < int < float); fp16 with bf16 gives fp32."""
    dimmed = [t for t, d in types_dims if d]
    pool = dimmed or [t for t, _ in types_dims]
    cats = [(2 if DTYPES[t][2] else (0 if t == "bool" else 1), t) for t in pool]
    top = max(c for c, _ in cats)
    cands = [t for c, t in cats if c == top]
    # a 0-dim tensor of a higher category lifts the result to that category's default
    zero = [t for t, d in types_dims if not d]
    if dimmed and zero:
        zc = max((2 if DTYPES[t][2] else (0 if t == "bool" else 1)) for t in zero)
        if zc > top:
            return "float" if zc == 2 else "long int"
    names = {DTYPES[t][0] for t in cands}
    if names == {"fp16", "bf16"}:
        return "float"
    return max(cands, key=lambda t: DTYPES[t][1])


def numel(dims):
    return math.prod(dims) if dims else 1


def stored(dims, strides):
    """Elements an argument really stores: an expanded dimension (stride 0) counts once."""
    if strides and len(strides) == len(dims):
        return math.prod(1 if s == 0 else d for d, s in zip(dims, strides, strict=True)) if dims else 1
    return numel(dims)


def tbytes(i, dims, types, strides):
    """Bytes of tensor argument i read once (stored elements, recorded dtype)."""
    st = strides[i] if strides and i < len(strides) else None
    return stored(dims[i], st) * DTYPES[types[i]][1]


def text(concrete, i):
    return concrete[i] if concrete and i < len(concrete) else ""


def parse_list(s):
    v = json.loads(s)
    if not isinstance(v, list) or not all(isinstance(x, int) for x in v):
        raise ValueError(s)
    return v


def parse_bool(s):
    if s == "True":
        return True
    if s == "False":
        return False
    raise ValueError(s)


def parse_num(s):
    return float(s)


# ------------------------------------------------------------------------------ op cost models (docs/op-models.md)
def bare(name):
    return name[len("aten::") :] if name.startswith("aten::") else name


def cost_gemm(op, dims, types, concrete, strides):
    """mm, bmm, addmm (beta from Concrete Inputs), linear, matmul's 2-D/3-D forms."""
    if op in ("mm", "bmm", "matmul"):
        a, b = 0, 1
        bias = None
    elif op in ("addmm", "baddbmm", "_addmm_activation"):
        a, b, bias = 1, 2, 0
    elif op == "linear":
        a, b, bias = 0, 1, (2 if len(dims) > 2 and dims[2] and is_tensor_type(types[2]) else None)
    else:
        return None
    A, B = dims[a], dims[b]
    if op == "linear":  # weight [n, k]
        m, k, n, batch = numel(A[:-1]), A[-1], B[0], 1
        if B[1] != k:
            return None
    elif len(A) == 2 and len(B) == 2:
        (m, k), (k2, n), batch = A, B, 1
        if k != k2:
            return None
    elif len(A) == 3 and len(B) == 3:
        (batch, m, k), (b2, k2, n) = A, B
        if k != k2 or batch != b2:
            return None
    else:
        return None
    flops = 2 * batch * m * n * k
    operand_types = [types[a], types[b]] + ([types[bias]] if bias is not None else [])
    cd = compute_dtype(operand_types)
    out_t = next(t for t in operand_types if DTYPES[t][0] == cd)  # O10: output in the compute dtype
    nbytes = tbytes(a, dims, types, strides) + tbytes(b, dims, types, strides) + batch * m * n * DTYPES[out_t][1]
    if bias is not None:
        beta = 1.0
        if op != "linear":
            beta = parse_num(text(concrete, 3)) if text(concrete, 3) else 1.0
        if beta != 0:
            flops += batch * m * n
            nbytes += tbytes(bias, dims, types, strides)
    return {"flops": flops, "bytes": nbytes, "kind": "gemm", "dtype": cd}


def conv_out(inp, w, padding, stride, dilation):
    sp = len(inp) - 2
    pad = padding * sp if len(padding) == 1 else padding
    st = stride * sp if len(stride) == 1 else stride
    dil = dilation * sp if len(dilation) == 1 else dilation
    out = [inp[0], w[0]]
    for j in range(sp):
        out.append((inp[2 + j] + 2 * pad[j] - dil[j] * (w[2 + j] - 1) - 1) // st[j] + 1)
    return out


def cost_conv(op, dims, types, concrete, strides):
    """Convolution forward; the positions of padding/stride/dilation follow each schema."""
    if (
        op == "cudnn_convolution"
    ):  # (self, weight, padding, stride, dilation, groups, benchmark, deterministic, allow_tf32)
        x, w, bias = 0, 1, None
        padding, stride, dilation = (parse_list(text(concrete, i)) for i in (2, 3, 4))
    elif op in ("convolution", "_convolution"):  # (input, weight, bias, stride, padding, dilation, transposed, ...)
        x, w = 0, 1
        bias = 2 if dims[2] and is_tensor_type(types[2]) else None
        stride, padding, dilation = (parse_list(text(concrete, i)) for i in (3, 4, 5))
        if parse_bool(text(concrete, 6)):
            return None  # transposed: not met on these traces
    elif op in ("conv1d", "conv2d", "conv3d"):  # (input, weight, bias, stride, padding, dilation, groups)
        x, w = 0, 1
        bias = 2 if dims[2] and is_tensor_type(types[2]) else None
        stride, padding, dilation = (parse_list(text(concrete, i)) for i in (3, 4, 5))
    else:
        return None
    out = conv_out(dims[x], dims[w], padding, stride, dilation)
    flops = 2 * numel(out) * numel(dims[w][1:])
    tt = [types[x], types[w]] + ([types[bias]] if bias is not None else [])
    cd = compute_dtype(tt)
    out_t = types[x]  # O11: the output in the input's dtype
    nbytes = tbytes(x, dims, types, strides) + tbytes(w, dims, types, strides) + numel(out) * DTYPES[out_t][1]
    if bias is not None:
        flops += numel(out)
        nbytes += tbytes(bias, dims, types, strides)
    return {"flops": flops, "bytes": nbytes, "kind": "conv", "dtype": cd}


def cost_conv_backward(op, dims, types, concrete, strides):
    """convolution_backward(grad_output, input, weight, bias_sizes, stride, padding, dilation, transposed,
    output_padding, groups, output_mask)."""
    if op != "convolution_backward":
        return None
    go, x, w = dims[0], dims[1], dims[2]
    if parse_bool(text(concrete, 7)):
        return None  # transposed: not met
    mask = [parse_bool(s.strip()) for s in text(concrete, 10).strip("[]").split(",")] if text(concrete, 10) else []
    if len(mask) != 3:
        mask = [True, True, False]  # the doc's default: grad-input and grad-weight
    fwd = 2 * numel(go) * numel(w[1:])  # O12: forward FLOPs without a bias term
    flops = fwd * (int(mask[0]) + int(mask[1])) + (numel(go) if mask[2] else 0)
    nbytes = tbytes(0, dims, types, strides)  # grad_out once
    if mask[0]:
        nbytes += tbytes(2, dims, types, strides) + numel(x) * DTYPES[types[1]][1]
    if mask[1]:
        nbytes += tbytes(1, dims, types, strides) + numel(w) * DTYPES[types[2]][1]
    if mask[2]:
        nbytes += go[1] * DTYPES[types[0]][1]  # O13: grad-bias in grad_output's dtype (never asked here)
    return {"flops": flops, "bytes": nbytes, "kind": "conv", "dtype": compute_dtype(types[:3])}


def tensor_args(dims, types, strides, idx=None):
    """Bytes of every recorded tensor argument (or those in idx)."""
    return sum(
        tbytes(i, dims, types, strides)
        for i in range(len(types))
        if is_tensor_type(types[i]) and (idx is None or i in idx)
    )


def cost_norm(op, dims, types, concrete, strides):
    x = dims[0]
    n = numel(x)
    xt = types[0]
    if op in ("cudnn_batch_norm", "native_batch_norm", "batch_norm", "_batch_norm_impl_index"):
        # (input, weight, bias, running_mean, running_var, training, momentum, eps)
        training = True
        t = text(concrete, 5)
        if t in ("True", "False"):
            training = t == "True"  # unknown = training
        c = x[1]
        flops = (8 if training else 2) * n
        nbytes = tensor_args(dims, types, strides) + n * DTYPES[xt][1] + (4 * c * 4 if training else 0)
        return {"flops": flops, "bytes": nbytes, "kind": "norm", "dtype": compute_dtype(types)}
    if op in ("native_layer_norm", "layer_norm"):
        # (input, normalized_shape, weight, bias, eps)
        ns = parse_list(text(concrete, 1))
        rows = n // numel(ns)
        nbytes = tensor_args(dims, types, strides) + n * DTYPES[xt][1] + 2 * rows * 4
        return {"flops": 8 * n, "bytes": nbytes, "kind": "norm", "dtype": compute_dtype(types)}
    if op == "cudnn_batch_norm_backward":
        # (input, grad_output, weight, running_mean, running_var, save_mean, save_var, epsilon, reserveSpace):
        # cuDNN computes all three gradients
        c, wt = dims[2][0], types[2]
        nbytes = tensor_args(dims, types, strides) + n * DTYPES[xt][1] + 2 * c * DTYPES[wt][1]
        return {"flops": 12 * n, "bytes": nbytes, "kind": "norm", "dtype": compute_dtype(types)}
    if op == "native_batch_norm_backward":
        # (grad_out, input, weight, running_mean, running_var, save_mean, save_invstd, train, eps, output_mask)
        mask = [parse_bool(s.strip()) for s in text(concrete, 9).strip("[]").split(",")]
        xt = types[1]
        c = dims[1][1]
        wt = types[2] if is_tensor_type(types[2]) else "float"
        flops = (9 * mask[0] + 2 * mask[1] + 1 * mask[2]) * n
        nbytes = (
            tensor_args(dims, types, strides)
            + (n * DTYPES[xt][1] if mask[0] else 0)
            + (mask[1] + mask[2]) * c * DTYPES[wt][1]
        )
        return {"flops": flops, "bytes": nbytes, "kind": "norm", "dtype": compute_dtype(types)}
    return None


def cost_softmax(op, dims, types, concrete, strides):
    n = numel(dims[0])
    if op in ("_softmax", "_log_softmax"):  # (self, dim, half_to_float)
        out_t = "float" if text(concrete, 2) == "True" else types[0]
        nbytes = tbytes(0, dims, types, strides) + n * DTYPES[out_t][1]
        return {"flops": 5 * n, "bytes": nbytes, "kind": "softmax", "dtype": compute_dtype(types[:1])}
    if op in ("softmax", "log_softmax"):  # (self, dim, dtype)
        dt = text(concrete, 2)
        out_t = SCALAR_TYPE[int(dt)] if dt not in ("", "None") else types[0]
        nbytes = tbytes(0, dims, types, strides) + n * DTYPES[out_t][1]
        return {"flops": 5 * n, "bytes": nbytes, "kind": "softmax", "dtype": compute_dtype(types[:1])}
    if op in ("_softmax_backward_data", "_log_softmax_backward_data"):  # (grad_output, output, dim, input_dtype)
        dt = text(concrete, 3)
        out_t = SCALAR_TYPE[int(dt)] if dt not in ("", "None") else types[0]
        nbytes = tensor_args(dims, types, strides, {0, 1}) + n * DTYPES[out_t][1]
        return {"flops": 4 * n, "bytes": nbytes, "kind": "softmax", "dtype": compute_dtype(types[:2])}
    return None


ELEMENTWISE = {  # O16: the doc's list ends in "…"; clamp_min/clamp_max read as forms of clamp
    "add", "sub", "mul", "div", "relu", "gelu", "silu", "sigmoid", "tanh", "exp", "clamp", "clamp_min",
    "clamp_max", "threshold_backward", "where", "masked_fill", "eq", "ne", "lt", "le", "gt", "ge", "neg",
    "rsqrt", "sqrt", "pow", "gelu_backward", "silu_backward", "sigmoid_backward", "tanh_backward", "hardtanh",
    "addcmul", "addcdiv", "lerp", "threshold",
}  # fmt: skip
COMPARISONS = {"eq", "ne", "lt", "le", "gt", "ge"}
THREE_FLOPS = {"addcmul", "addcdiv", "lerp"}


def broadcast(shapes):
    nd = max((len(s) for s in shapes), default=0)
    out = []
    for j in range(nd):
        sizes = [s[len(s) - nd + j] for s in shapes if len(s) - nd + j >= 0]
        big = [x for x in sizes if x != 1]
        out.append(big[0] if big else 1)
    return out


def cost_elementwise(op, dims, types, concrete, strides):
    inplace = op.endswith("_") and not op.endswith("__")
    base = op[:-1] if inplace else op
    if base not in ELEMENTWISE:
        return None
    tens = [i for i in range(len(types)) if is_tensor_type(types[i])]
    if not tens:
        return None
    out_shape = dims[0] if inplace else broadcast([dims[i] for i in tens])
    if inplace:
        out_t = types[0]
    elif base in COMPARISONS:
        out_t = "bool"
    else:
        out_t = promote([(types[i], dims[i]) for i in tens])
    per = 3 if base in THREE_FLOPS else 1
    if base in ("add", "sub") and len(types) > 2 and text(concrete, 2) not in ("", "1"):
        per = 2 if parse_num(text(concrete, 2)) != 1 else 1
    n = numel(out_shape)
    nbytes = tensor_args(dims, types, strides) + n * DTYPES[out_t][1]
    # the doc: elementwise ops compute in their inputs' promoted dtype (comparisons too)
    dtype = DTYPES[promote([(types[i], dims[i]) for i in tens])][0]
    return {"flops": per * n, "bytes": nbytes, "kind": "elementwise", "dtype": dtype}


def cost_copy(op, dims, types, concrete, strides):
    if op == "copy_":  # (self, src, non_blocking): src read, self written
        nbytes = tbytes(1, dims, types, strides) + numel(dims[0]) * DTYPES[types[0]][1]
        dt = types[0]
    elif op in ("fill_", "zero_"):  # written only
        nbytes = numel(dims[0]) * DTYPES[types[0]][1]
        dt = types[0]
    elif op == "clone":
        nbytes = tbytes(0, dims, types, strides) + numel(dims[0]) * DTYPES[types[0]][1]
        dt = types[0]
    elif op == "_to_copy":  # (self, dtype, layout, device, pin_memory, non_blocking, memory_format)
        d = text(concrete, 1)
        dt = SCALAR_TYPE[int(d)] if d not in ("", "None") else types[0]
        nbytes = tbytes(0, dims, types, strides) + numel(dims[0]) * DTYPES[dt][1]
    else:
        return None
    return {"flops": 0, "bytes": nbytes, "kind": "elementwise", "dtype": DTYPES[dt][0]}  # O14: kind


REDUCTIONS = {"sum", "mean", "prod", "amax", "amin", "max", "min", "argmax", "argmin", "norm"}


def cost_reduction(op, dims, types, concrete, strides):
    if op not in REDUCTIONS:
        return None
    x = dims[0]
    n = numel(x)
    if len(types) < 2 or text(concrete, 1) in ("", "None"):
        if len(types) >= 2 and types[1] not in ("", "ScalarList", "Scalar"):
            return None
        out = 1
        if len(types) >= 2 and types[1] in ("ScalarList", "Scalar"):
            return None  # a dim argument whose value is not recorded: unknown
    else:
        dl = text(concrete, 1)
        dim = parse_list(dl) if dl.startswith("[") else [int(dl)]
        keep = text(concrete, 2) == "True"
        dim = [d % len(x) for d in dim] if x else []
        if not dim:
            dim = list(range(len(x)))
        out = (
            numel([s for j, s in enumerate(x) if j not in dim])
            if not keep
            else numel([1 if j in dim else s for j, s in enumerate(x)])
        )
    out_t = "long int" if op in ("argmax", "argmin") else types[0]
    nbytes = tbytes(0, dims, types, strides) + out * DTYPES[out_t][1]
    return {"flops": n, "bytes": nbytes, "kind": "reduction", "dtype": compute_dtype(types[:1])}


MODELS = (cost_gemm, cost_conv, cost_conv_backward, cost_norm, cost_softmax, cost_elementwise, cost_copy,
          cost_reduction)  # fmt: skip


def op_cost(name, dims, types, concrete, strides):
    """FLOPs, bytes, kind and compute dtype of one call, or None (not modelled, or malformed)."""
    if dims is None or types is None or len(dims) != len(types):
        return None
    op = bare(name)
    for model in MODELS:
        try:
            c = model(op, dims, types, concrete, strides)
        except (ValueError, KeyError, IndexError, TypeError, ZeroDivisionError):
            c = None
        if c is not None:
            return c
    return None


# ------------------------------------------------------------------------------ device peaks
def match_device(props):
    with open(PEAKS, "rb") as f:
        rows = tomllib.load(f)["device"]
    name = str(props.get("name", "")).lower()
    cands = [
        r for r in rows if re.search(r["family"], name) and not (r.get("exclude") and re.search(r["exclude"], name))
    ]
    pref = [r for r in cands if r.get("form") and re.search(r["form"], name)]
    cands = pref or cands
    if "numSms" in props:
        cands = [r for r in cands if "sms" not in r or r["sms"] == props["numSms"]]
    if "computeMajor" in props:
        cc = [props["computeMajor"], props.get("computeMinor", 0)]
        cands = [r for r in cands if "compute" not in r or list(r["compute"]) == cc]
    if "totalGlobalMem" in props:
        gb = props["totalGlobalMem"] / 1e9
        cands = [r for r in cands if "mem_gb" not in r or r["mem_gb"][0] <= gb <= r["mem_gb"][1]]
    rates = {
        tuple((k, r.get(k)) for k in ("fp32", "tf32_tc", "fp16_tc", "bf16_tc", "fp8_tc", "mem_tbs")) for r in cands
    }
    return cands[0] if len(rates) == 1 else None


TC_KINDS = {"gemm", "conv", "attention"}


def peak_tflops(peak, kind, dtype):
    """docs/op-models.md, "Roofline": tensor-core peak for low-precision GEMM/conv/attention and fp32 conv."""
    if kind in TC_KINDS:
        if dtype in ("fp16", "bf16", "fp8", "int8"):
            return peak.get(f"{dtype}_tc")
        if dtype == "fp32" and kind == "conv":
            return peak.get("tf32_tc")
    if dtype == "fp64":
        return peak.get("fp64")
    return peak.get("fp32")  # O15: fp32 vector rate for everything else (fp16/bf16 without tensor cores too)


# ------------------------------------------------------------------------------ trace: steps, links, ops
def load(path):
    with gzip.open(path, "rt") as f:
        doc = json.load(f)
    ev = {"kernel": [], "memcpy": [], "memset": [], "runtime": [], "ops": [], "steps": []}
    record_end = []
    for e in doc["traceEvents"]:
        if e.get("ph") == "i" and e.get("name") == "Record Window End":
            record_end.append(e["ts"])
        if e.get("ph") != "X":
            continue
        e["end"] = e["ts"] + e.get("dur", 0)
        cat = str(e.get("cat", "")).lower()
        if cat in GPU_CATS:
            ev[GPU_CATS[cat]].append(e)
        elif cat in RUNTIME_CATS:
            ev["runtime"].append(e)
        elif cat == "cpu_op":
            ev["ops"].append(e)
        elif cat == "user_annotation" and e.get("name", "").startswith("ProfilerStep#"):
            ev["steps"].append(e)
    ev["steps"].sort(key=lambda e: e["ts"])
    props = (doc.get("deviceProperties") or [{}])[0]
    return ev, props, (max(record_end) if record_end else None)


def link(gpu, runtime):
    """links.link_launches: same correlation; not after the event; the busiest process; the latest."""
    by_corr = defaultdict(list)
    for r in runtime:
        c = r.get("args", {}).get("correlation")
        if c is not None:
            by_corr[c].append(r)
    out = {}
    unamb = defaultdict(int)  # (pid, device) -> unambiguous links
    for g in gpu:
        cands = by_corr.get(g.get("args", {}).get("correlation"), [])
        if len(cands) == 1:
            unamb[(cands[0]["pid"], g["pid"])] += 1
    for g in gpu:
        cands = by_corr.get(g.get("args", {}).get("correlation"), [])
        if not cands:
            continue
        keep = [r for r in cands if r["ts"] <= g["ts"]] or cands
        best = max(unamb[(r["pid"], g["pid"])] for r in keep)
        keep = [r for r in keep if unamb[(r["pid"], g["pid"])] == best]
        out[id(g)] = max(keep, key=lambda r: r["ts"])
    return out


def windows(ev, launcher):
    """steps.step_windows and complete_mask (their docstrings), over the ProfilerStep# annotations."""
    steps = ev["steps"]
    gpu = ev["kernel"] + ev["memcpy"] + ev["memset"]
    n = len(steps)
    launched = [[] for _ in range(n)]
    starts = [s["ts"] for s in steps]
    owner = {}
    for g in gpu:
        r = launcher.get(id(g))
        if r is None:
            continue
        i = bisect.bisect_right(starts, r["ts"]) - 1  # O3: the call *starts* inside [s_i, e_i]
        if i >= 0 and r["ts"] <= steps[i]["end"]:
            launched[i].append(g)
            owner[id(g)] = i
    # O17: first window: after earlier iterations' GPU work still running when step 0 begins and ending
    # before step 0's own GPU work starts
    start0 = steps[0]["ts"]
    if launched[0]:
        own0 = min(g["ts"] for g in launched[0])
        for g in gpu:
            r = launcher.get(id(g))
            if id(g) in owner or (r is not None and r["ts"] >= steps[0]["ts"]):
                continue
            if steps[0]["ts"] < g["end"] < own0:
                start0 = max(start0, g["end"])
    wins, prev = [], None
    for i, s in enumerate(steps):
        st = start0 if i == 0 else max(s["ts"], prev)
        g_end = max((g["end"] for g in launched[i]), default=None)
        en = max(s["end"], st) if g_end is None else max(s["end"], g_end, st)
        wins.append((st, en))
        prev = en
    n_gpu = [len(x) for x in launched]
    keep = [True] * n
    if n > 1 and any(n_gpu):
        last = max(i for i in range(n) if n_gpu[i])
        for i in range(last + 1, n):
            keep[i] = False
        if last > 0 and n_gpu[last] < 0.8 * n_gpu[last - 1]:
            keep[last] = False
    return wins, keep, n_gpu


def innermost_ops(ops, runtime):
    """attribution.runtime_ops: among cpu_ops on the same pid/tid with op.ts <= call.ts <= op.end, the latest
    ts (tie: the shortest), searched at most MAX_NESTING_SCAN ops back."""
    by_thread = defaultdict(list)
    for o in ops:
        by_thread[(o["pid"], o["tid"])].append(o)
    for v in by_thread.values():
        v.sort(key=lambda o: (o["ts"], -o["dur"]))  # O4: longer first on equal starts
    starts = {k: [o["ts"] for o in v] for k, v in by_thread.items()}
    out, unlimited_differs = {}, 0
    for r in runtime:
        key = (r["pid"], r["tid"])
        lst = by_thread.get(key, [])
        hi = bisect.bisect_right(starts.get(key, []), r["ts"])
        best, best_all = None, None
        for j in range(hi - 1, -1, -1):
            o = lst[j]
            if o["end"] >= r["ts"]:
                if (
                    best_all is None
                    or o["ts"] > best_all["ts"]
                    or (o["ts"] == best_all["ts"] and o["dur"] < best_all["dur"])
                ):
                    best_all = o
                if hi - j <= MAX_NESTING_SCAN and (  # O8: the 64 latest-starting ops, the call's own start included
                    best is None or o["ts"] > best["ts"] or (o["ts"] == best["ts"] and o["dur"] < best["dur"])
                ):
                    best = o
            if best_all is not None and lst[j]["ts"] < best_all["ts"]:
                break
        out[id(r)] = best
        unlimited_differs += best is not best_all
    return out, unlimited_differs


def shapes(o):
    a = o.get("args", {})
    return a.get("Input Dims"), a.get("Input type"), a.get("Concrete Inputs"), a.get("Input Strides")


def sig(x, n=10):
    if x is None or x == 0 or not math.isfinite(x):
        return x
    return round(x, -int(math.floor(math.log10(abs(x)))) + n - 1)


def analyze(path):
    ev, props, record_end = load(path)
    launcher = link(ev["kernel"] + ev["memcpy"] + ev["memset"], ev["runtime"])
    wins, keep, n_gpu = windows(ev, launcher)
    if record_end is not None:
        keep = [k and w[1] <= record_end for k, w in zip(keep, wins, strict=True)]
    if len(wins) == 1:
        keep = [True]  # a single step is always kept
    complete = [w for w, k in zip(wins, keep, strict=True) if k]
    n_steps = len(complete)
    op_of_call, scan_differs = innermost_ops(ev["ops"], ev["runtime"])
    peak = match_device(props)

    lo = sorted(complete)
    starts = [w[0] for w in lo]

    def in_window(ts):  # O2: a kernel counts when it starts in [start, end) of a complete window
        i = bisect.bisect_right(starts, ts) - 1
        return i >= 0 and ts < lo[i][1]

    groups = {}
    diag = {"kernels": len(ev["kernel"]), "in_windows": 0, "unlinked": 0, "no_op": 0, "no_op_us": 0.0,
            "on_boundary": 0, "calls_straddling": 0, "scan_limit_changes": scan_differs}  # fmt: skip
    calls_in, calls_out = set(), set()
    for k in ev["kernel"]:
        ts = k["ts"]
        r = launcher.get(id(k))
        o = op_of_call.get(id(r)) if r is not None else None
        if not in_window(ts):
            if o is not None:
                calls_out.add(id(o))
            continue
        diag["in_windows"] += 1
        diag["on_boundary"] += any(ts == w[0] or ts == w[1] for w in complete)
        if r is None:
            diag["unlinked"] += 1
            continue
        if o is None:  # O6: kernels with no launching op are left out of the op rows
            diag["no_op"] += 1
            diag["no_op_us"] += k["dur"]
            continue
        calls_in.add(id(o))
        dims, types, concrete, strides = shapes(o)
        key = (o["name"], json.dumps(dims), json.dumps(types), json.dumps(concrete), json.dumps(strides))  # O5
        g = groups.setdefault(key, {"calls": {}, "kernels": 0, "us": 0.0, "strides": set()})
        g["calls"][id(o)] = o
        g["kernels"] += 1
        g["us"] += k["dur"]
        g["strides"].add(json.dumps(strides))
    diag["calls_straddling"] = len(calls_in & calls_out)
    diag["no_op_us"] = round(diag["no_op_us"], 3)

    rows = []
    for (name, _dims_s, _types_s, _conc_s, _strides_s), g in groups.items():
        o = next(iter(g["calls"].values()))
        dims, types, concrete, strides = shapes(o)
        calls = len(g["calls"])  # O7: op calls with at least one kernel starting in a complete window
        cost = op_cost(name, dims, types, concrete, strides)
        secs = g["us"] * 1e-6
        row = {
            "op": name,
            "input_dims": dims,
            "input_types": types,
            "concrete_inputs": concrete,
            "input_strides": strides,
            "strides_vary": len(g["strides"]) > 1,
            "flops": cost["flops"] if cost else None,
            "bytes": cost["bytes"] if cost else None,
            "calls_per_step": sig(calls / n_steps),
            "kernels_per_call": sig(g["kernels"] / calls),
            "gpu_ms_per_step": sig(g["us"] / n_steps / 1e3),
            "mean_us": sig(g["us"] / calls),
            "dtype": cost["dtype"] if cost else None,
            "kind": cost["kind"] if cost else None,
            "gflop": None,
            "mbytes": None,
            "tflops": None,
            "tbps": None,
            "intensity": None,
            "peak_tflops": None,
            "peak_tbs": None,
            "pct_of_peak": None,
            "bound": None,
        }
        if cost:
            row["gflop"] = sig(cost["flops"] / 1e9)
            row["mbytes"] = sig(cost["bytes"] / 1e6)
            tfl = calls * cost["flops"] / secs / 1e12 if secs > 0 else None
            tbs = calls * cost["bytes"] / secs / 1e12 if secs > 0 else None
            row["tflops"], row["tbps"] = sig(tfl), sig(tbs)
            inten = cost["flops"] / cost["bytes"] if cost["bytes"] else None
            row["intensity"] = sig(inten)
            if peak is not None:
                pt, pb = peak_tflops(peak, cost["kind"], cost["dtype"]), peak.get("mem_tbs")
                row["peak_tflops"], row["peak_tbs"] = pt, pb
                if pt and pb and inten is not None and tfl is not None:
                    compute = inten >= pt / pb
                    row["bound"] = "compute" if compute else "memory"
                    row["pct_of_peak"] = sig(100 * (tfl / pt if compute else tbs / pb))
        rows.append(row)
    rows.sort(key=lambda r: -r["gpu_ms_per_step"])
    return {
        "device": props.get("name"),
        "peak_row": peak["id"] if peak else None,
        "complete_windows_ms": [round((e - s) / 1e3, 4) for s, e in complete],
        "n_complete_steps": n_steps,
        "gpu_events_launched_per_step": n_gpu,
        "groups": len(groups),
        "diagnostics": diag,
        "top": rows[:TOP],
    }


_CB = ["ScalarList"] * 4 + ["Scalar", "ScalarList", "Scalar", "ScalarList"]
#: Hand-made recorded arguments for readings the three traces' top groups cannot decide (README, "Op view",
#: probes P1-P14): (op, Input Dims, Input type, Concrete Inputs, Input Strides or None).
PROBES = [
    ("aten::clamp_min_", [[32, 64, 112, 112], []], ["float", "Scalar"], ["", "0"], None),  # P1
    (  # P2: grad-bias requested; forward FLOPs without the bias term
        "aten::convolution_backward",
        [[2, 8, 4, 4], [2, 3, 4, 4], [8, 3, 1, 1], [], [], [], [], [], [], [], []],
        ["float"] * 3 + _CB,
        ["", "", "", "[8]", "[1, 1]", "[0, 0]", "[1, 1]", "False", "[0, 0]", "1", "[True, True, True]"],
        None,
    ),
    (  # P3: grad-bias alone, written in grad_output's dtype
        "aten::convolution_backward",
        [[2, 8, 4, 4], [2, 3, 4, 4], [8, 3, 1, 1], [], [], [], [], [], [], [], []],
        ["c10::BFloat16", "c10::BFloat16", "float"] + _CB,
        ["", "", "", "[8]", "[1, 1]", "[0, 0]", "[1, 1]", "False", "[0, 0]", "1", "[False, False, True]"],
        None,
    ),
    ("aten::mm", [[4, 8], [8, 16]], ["c10::BFloat16", "float"], ["", ""], None),  # P4: output in the compute dtype
    ("aten::mm", [[4, 8], [8, 16]], ["c10::Half", "c10::BFloat16"], ["", ""], None),  # P5: fp16/bf16 tie: the first
    ("aten::mm", [[4, 8], [8, 16]], ["c10::BFloat16", "c10::Half"], ["", ""], None),  # P5
    ("aten::add", [[4, 8], [4, 8], []], ["c10::Half", "c10::BFloat16", "Scalar"], ["", "", "1"], None),  # P6
    ("aten::add", [[4, 8], [4, 8], []], ["c10::BFloat16", "float", "Scalar"], ["", "", "1"], None),  # P6
    ("aten::add", [[4, 8], [4, 8], []], ["float", "float", "Scalar"], ["", "", "2"], None),  # P7: alpha 2
    ("aten::mul", [[4, 8], []], ["c10::BFloat16", "float"], ["", ""], None),  # P8: a 0-dim tensor operand
    ("aten::mul", [[4, 8], [4, 8]], ["float", "float"], ["", ""], [[8, 1], [0, 1]]),  # P9: an expanded operand
    ("aten::eq", [[4, 8], [4, 8]], ["float", "float"], ["", ""], None),  # P10: a comparison
    (
        "aten::mean",
        [[32, 512, 7, 7], [], [], []],
        ["float", "ScalarList", "Scalar", ""],
        ["", "[-1, -2]", "True", ""],
        None,
    ),
    ("aten::sum", [[32, 10], [], [], []], ["float", "ScalarList", "Scalar", ""], ["", "[0]", "False", ""], None),
    ("aten::addmm", [[10], [32, 512], [512, 10], [], []], ["float"] * 3 + ["Scalar"] * 2, ["", "", "", "0", "1"], None),
    ("aten::_softmax", [[8, 10], [], []], ["c10::Half", "Scalar", "Scalar"], ["", "-1", "True"], None),  # P11
    (  # P12
        "aten::native_layer_norm",
        [[1, 25089, 768], [], [768], [768], []],
        ["c10::BFloat16", "ScalarList", "c10::BFloat16", "c10::BFloat16", "Scalar"],
        ["", "[768]", "", "", "1e-06"],
        None,
    ),
    ("aten::fill_", [[64], []], ["float", "Scalar"], ["", "0"], None),
    (
        "aten::_to_copy",
        [[32], [], [], [], [], [], []],
        ["long int", "Scalar", "Scalar", "", "", "Scalar", ""],
        ["", "4", "0", "", "", "True", ""],
        None,
    ),  # fmt: skip
    (  # P13: inference batch norm
        "aten::cudnn_batch_norm",
        [[32, 64, 56, 56], [64], [64], [64], [64], [], [], []],
        ["float"] * 5 + ["Scalar"] * 3,
        ["", "", "", "", "", "False", "0.1", "1e-05"],
        None,
    ),
    ("aten::add", [[4, 8], [4, 8], []], ["long int", "long int", "Scalar"], ["", "", "1"], None),  # P14: integers
]


def probes():
    out = []
    for name, dims, types, concrete, strides in PROBES:
        c = op_cost(name, dims, types, concrete, strides)
        out.append(
            {
                "op": name,
                "input_dims": dims,
                "input_types": types,
                "concrete_inputs": concrete,
                "input_strides": strides,
                "flops": c["flops"] if c else None,
                "bytes": c["bytes"] if c else None,
                "kind": c["kind"] if c else None,
                "dtype": c["dtype"] if c else None,
            }
        )
    return out


def main():
    tdir = sys.argv[1] if len(sys.argv) > 1 else FIXTURES
    out_path = sys.argv[2] if len(sys.argv) > 2 else os.path.join(HERE, "opview_figures.json")
    out = {
        "_about": "Derived by tests/golden/derive_opview.py (independent of tracedoc). See tests/golden/README.md, 'Op view'.",
        "top_n": TOP,
        "traces": {name: analyze(os.path.join(tdir, name)) for name in TRACES},
        "probes": probes(),
    }
    with open(out_path, "w") as f:
        json.dump(out, f, indent=1)
        f.write("\n")
    for name, t in out["traces"].items():
        print(name, t["peak_row"], t["n_complete_steps"], t["diagnostics"])
        for r in t["top"]:
            print(
                f"  {r['op']:34s} {json.dumps(r['input_dims'])[:60]:60s} {r['gpu_ms_per_step']:9.4f} "
                f"{r['calls_per_step']:6.2f} {r['gflop']} {r['mbytes']} {r['tflops']} {r['tbps']} {r['pct_of_peak']} {r['bound']}"
            )


if __name__ == "__main__":
    main()
