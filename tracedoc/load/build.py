"""Turn collected columns and the trace's top-level metadata into a :class:`Trace`."""

from __future__ import annotations

import math
from typing import Any

import numpy as np

from tracedoc.errors import TraceLoadError
from tracedoc.load.reference import ColumnSink
from tracedoc.trace import FRAME_COLUMNS, Device, Trace, frame_from_columns

_AMD_MARKERS = ("AMD", "Radeon", "Instinct")
#: Names CUDA gives NVIDIA devices (``cudaDeviceProp.name``): "NVIDIA H100 80GB HBM3", "Tesla V100-SXM2-32GB",
#: "GeForce RTX 2080 Ti", "Quadro RTX 8000", "TITAN V" (pre-2020 drivers leave out "NVIDIA").
_NVIDIA_MARKERS = ("NVIDIA", "Tesla", "GeForce", "Quadro", "TITAN")


def device_vendor(name: str, hip_runtime: bool) -> str:
    """The vendor of a described device: its name when the name says (AMD's or NVIDIA's marketing
    names), else ``"AMD"`` when the trace's runtime calls are ``hip*`` (ROCm), else ``"NVIDIA"``.
    The name comes first: HIP runtime names alone do not make a "Tesla V100" an AMD GPU (HIP also
    runs on NVIDIA GPUs)."""
    if any(m in name for m in _AMD_MARKERS):
        return "AMD"
    if any(m in name for m in _NVIDIA_MARKERS):
        return "NVIDIA"
    return "AMD" if hip_runtime else "NVIDIA"


#: ``c10::DeviceType::MTIA`` (c10/core/DeviceType.h), as ``[memory]`` events write it.
_MTIA_DEVICE_TYPE = 19


def _is_mtia(frames: dict[str, Any]) -> bool:
    """True when the trace ran on Meta's MTIA: ``mtia_runtime`` calls or MTIA ``[memory]`` events."""
    rt, mem = frames["runtime"], frames["memory"]
    return bool((rt["cat"] == "mtia_runtime").any() or (mem["device_type"] == _MTIA_DEVICE_TYPE).any())


def _mtia_devices(frames: dict[str, Any], described: list[Device]) -> list[Device]:
    """Devices of an MTIA trace: the described ones relabelled, else one per kernel device id."""
    if described:
        return [Device(d.id, d.name, d.total_memory_bytes, d.compute_capability, d.num_sms, "Meta") for d in described]
    ids = sorted({int(i) for i in frames["kernels"]["device"].unique()}) or [0]
    return [Device(i, "MTIA", None, None, None, "Meta") for i in ids]


def _events(n: int) -> str:
    from tracedoc.text import plural  # only on an error path: rich is not imported to load

    return plural(n, "event")


_INT64_MAX = (1 << 63) - 1
#: Nesting depth below which trace metadata is made JSON-safe; deeper values are dropped.
METADATA_MAX_DEPTH = 64

#: Reasons an event is dropped at load (keys of ``Trace.dropped_events``).
DROP_NEGATIVE_DURATION = "negative duration"
DROP_NON_FINITE_TIME = "time not finite (ts + dur overflows)"
DROP_NEGATIVE_BYTES = "negative bytes"
DROP_NEGATIVE_MEMORY_TOTAL = "negative Total Allocated / Total Reserved"
#: A ``ph: "B"`` with no matching ``"E"`` (a trace cut while the span was open) or an ``"E"``
#: with no open ``"B"`` on its thread (:func:`tracedoc.load.reference.pair_begin_end`).
DROP_UNPAIRED_BEGIN_END = "a B/E duration event without its other half"
#: Not an event: a device whose ``totalGlobalMem`` is zero, negative or beyond int64; its
#: memory size is treated as unknown (memory-share signals become unavailable).
DROP_DEVICE_MEMORY = "device memory size <= 0 or out of range (ignored)"


def _small_int(v: Any) -> int | None:
    """``v`` when it is an int (not a bool) in int64 range, else None."""
    if isinstance(v, int) and not isinstance(v, bool) and -_INT64_MAX - 1 <= v <= _INT64_MAX:
        return v
    return None


def parse_devices(doc: dict[str, Any], hip_runtime: bool, dropped: dict[str, int] | None = None) -> list[Device]:
    """Read devices from ``deviceProperties`` (current) or ``computeProperties`` (old layout).

    Malformed entries (not objects, no integer ``id`` in int64 range) are skipped rather
    than fatal: device properties only refine the analysis. Integers beyond int64
    (``numSms: 2**70``) are treated as absent, and a ``totalGlobalMem`` that is not a
    finite number in ``(0, 2**63)`` bytes as unknown, counted under
    :data:`DROP_DEVICE_MEMORY` in ``dropped``. MTIA traces are relabelled by
    :func:`build_trace` (vendor ``"Meta"``).
    """
    props = doc.get("deviceProperties")
    if not isinstance(props, list):
        props = doc.get("computeProperties")
    if not isinstance(props, list):
        return []
    devices = []
    for p in props:
        if not isinstance(p, dict) or _small_int(p.get("id")) is None:
            continue
        name = str(p.get("name", "unknown"))
        major = _small_int(p.get("computeMajor", p.get("major")))
        minor = _small_int(p.get("computeMinor", p.get("minor")))
        cc = (major, minor) if major is not None and minor is not None else None
        mem = p.get("totalGlobalMem")
        if isinstance(mem, (int, float)) and not isinstance(mem, bool):
            if not (math.isfinite(mem) and 0 < mem <= _INT64_MAX):
                if dropped is not None:
                    dropped[DROP_DEVICE_MEMORY] = dropped.get(DROP_DEVICE_MEMORY, 0) + 1
                mem = None
        sms = _small_int(p.get("numSms", p.get("multiProcessorCount")))
        vendor = device_vendor(name, hip_runtime)
        devices.append(
            Device(
                id=p["id"],
                name=name,
                total_memory_bytes=int(mem) if isinstance(mem, (int, float)) and not isinstance(mem, bool) else None,
                compute_capability=cc,
                num_sms=sms,
                vendor=vendor,
            )
        )
    return devices


def json_safe_metadata(value: Any, depth: int = METADATA_MAX_DEPTH) -> Any:
    """A copy of trace metadata that any JSON writer can take back: integers beyond int64
    (``rank: 2**70``) become floats (or None when even a float cannot hold them), and
    values nested deeper than ``depth`` become None. Iterative, so deep nesting cannot hit
    Python's recursion limit."""

    def leaf(v: Any) -> Any:
        if isinstance(v, int) and not isinstance(v, bool) and _small_int(v) is None:
            try:
                return float(v)
            except OverflowError:
                return None
        return v

    if not isinstance(value, (dict, list)):
        return leaf(value)
    root: Any = {} if isinstance(value, dict) else []
    stack = [(value, root, 1)]
    while stack:
        src, dst, level = stack.pop()
        items = src.items() if isinstance(src, dict) else enumerate(src)
        for k, v in items:
            if isinstance(v, (dict, list)):
                if level >= depth:
                    out = None
                else:
                    out = {} if isinstance(v, dict) else []
                    stack.append((v, out, level + 1))
            else:
                out = leaf(v)
            if isinstance(dst, dict):
                dst[k] = out
            else:
                dst.append(out)
    return root


def _invalid_rows(kind: str, df) -> list[tuple[str, np.ndarray]]:
    """``(reason, row mask)`` pairs of the rows of frame ``kind`` with impossible values
    (raw, un-rebased times). A row may appear under several reasons; it is counted once,
    under the first."""
    out = []
    ts = df["ts_us"].to_numpy(dtype=np.float64)
    if "dur_us" in df.columns:
        dur = df["dur_us"].to_numpy(dtype=np.float64)
        out.append((DROP_NEGATIVE_DURATION, dur < 0))
        with np.errstate(over="ignore", invalid="ignore"):
            out.append((DROP_NON_FINITE_TIME, ~np.isfinite(ts + dur)))
    else:
        out.append((DROP_NON_FINITE_TIME, ~np.isfinite(ts)))
    if kind in ("memcpys", "memsets"):
        out.append((DROP_NEGATIVE_BYTES, df["bytes"].to_numpy(dtype=np.float64) < 0))
    if kind == "memory":
        neg = (df["total_allocated_bytes"].to_numpy(dtype=np.float64) < 0) | (
            df["total_reserved_bytes"].to_numpy(dtype=np.float64) < 0
        )
        out.append((DROP_NEGATIVE_MEMORY_TOTAL, neg))
    return out


def drop_impossible(frames: dict, dropped: dict[str, int]) -> None:
    """Remove rows with impossible values from ``frames`` in place, counting them by reason in
    ``dropped``: a negative duration, a ``ts + dur`` that is not finite, negative copy or
    memset bytes, a negative ``Total Allocated``/``Total Reserved``. (A ``[memory]`` event's
    ``Bytes`` is a signed allocation delta and may be negative.) ``steps`` rows are filtered
    by the same rules but not counted again: each is also a row of ``ops``."""
    for kind, df in frames.items():
        if not len(df):
            continue
        bad_any = np.zeros(len(df), dtype=bool)
        for reason, mask in _invalid_rows(kind, df):
            new = mask & ~bad_any
            if new.any():
                if kind != "steps":
                    dropped[reason] = dropped.get(reason, 0) + int(new.sum())
                bad_any |= new
        if bad_any.any():
            frames[kind] = df[~bad_any].reset_index(drop=True)


def build_trace(sink: ColumnSink, doc: dict[str, Any], path: str) -> Trace:
    """Assemble frames (rebased to the trace start) and devices into a :class:`Trace`.

    ``sink`` is a :class:`ColumnSink` (column lists, reference loader) or a
    :class:`tracedoc.load.fast.ArrayColumns` (numpy arrays, fast loader): same attributes.

    Events with impossible values are dropped (:func:`drop_impossible`) and counted in
    ``Trace.dropped_events`` (reason -> count); the origin and span are those of the events
    kept. Metadata is made JSON-safe (:func:`json_safe_metadata`).

    Raises:
        TraceLoadError: the trace holds no PyTorch profiler events at all (empty or foreign),
            or every one of them was dropped as impossible.
    """
    c = sink.cols
    if not any(len(c[k].get("ts_us", ())) for k in ("ops", "runtime", "kernels", "memcpys", "memory")):
        what = (
            "no events"
            if sink.n_events == 0
            else f"{_events(sink.n_events)} but none from the PyTorch profiler (no CPU ops, runtime calls, kernels or memory events)"
        )
        raise TraceLoadError(path, f"trace has {what}")
    frames = {kind: frame_from_columns(kind, c[kind]) for kind in FRAME_COLUMNS}
    dropped: dict[str, int] = {}
    if getattr(sink, "unpaired_begin_end", 0):
        dropped[DROP_UNPAIRED_BEGIN_END] = sink.unpaired_begin_end
    drop_impossible(frames, dropped)
    origin, max_end = sink.min_ts, sink.max_end
    if dropped:  # the extent of the events kept
        kept = [(k, df) for k, df in frames.items() if len(df) and k != "steps"]
        if not kept:
            raise TraceLoadError(
                path, f"trace has {_events(sink.n_events)} but every profiler event has impossible values"
            )
        origin = float(min(df["ts_us"].min() for _, df in kept))
        ends = [float((df["ts_us"] + df["dur_us"]).max()) for k, df in kept if k != "memory"]
        max_end = max(ends, default=float("-inf"))
    for df in frames.values():
        df["ts_us"] = df["ts_us"] - origin
        if "end_us" in df.columns:
            df["end_us"] = df["ts_us"] + df["dur_us"]
    steps = frames["steps"].sort_values("ts_us", kind="stable").reset_index(drop=True)
    frames["steps"] = steps
    meta = json_safe_metadata(
        {k: v for k, v in doc.items() if k not in ("traceEvents", "deviceProperties", "computeProperties")}
    )
    span = (max_end - origin) if max_end > float("-inf") else 0.0
    devices = parse_devices(doc, sink.hip_runtime, dropped)
    if _is_mtia(frames):
        devices = _mtia_devices(frames, devices)
    return Trace(
        path=path,
        devices=devices,
        origin_us=origin,
        span_us=span,
        n_events=sink.n_events,
        metadata=meta,
        dropped_events=dropped,
        record_window_end_us=None if getattr(sink, "window_end", None) is None else sink.window_end - origin,
        **frames,
    )
