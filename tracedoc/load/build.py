"""Turn collected columns and the trace's top-level metadata into a :class:`Trace`."""

from __future__ import annotations

from typing import Any

from tracedoc.errors import TraceLoadError
from tracedoc.load.reference import ColumnSink
from tracedoc.trace import FRAME_COLUMNS, Device, Trace, frame_from_columns

_AMD_MARKERS = ("AMD", "Radeon", "Instinct")
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


def parse_devices(doc: dict[str, Any], hip_runtime: bool) -> list[Device]:
    """Read devices from ``deviceProperties`` (current) or ``computeProperties`` (old layout).

    Malformed entries (not objects, no integer ``id``) are skipped rather than fatal:
    device properties only refine the analysis. MTIA traces are relabelled by
    :func:`build_trace` (vendor ``"Meta"``).
    """
    props = doc.get("deviceProperties")
    if not isinstance(props, list):
        props = doc.get("computeProperties")
    if not isinstance(props, list):
        return []
    devices = []
    for p in props:
        if not isinstance(p, dict) or not isinstance(p.get("id"), int):
            continue
        name = str(p.get("name", "unknown"))
        major = p.get("computeMajor", p.get("major"))
        minor = p.get("computeMinor", p.get("minor"))
        cc = (int(major), int(minor)) if isinstance(major, int) and isinstance(minor, int) else None
        mem = p.get("totalGlobalMem")
        sms = p.get("numSms", p.get("multiProcessorCount"))
        vendor = "AMD" if hip_runtime or any(m in name for m in _AMD_MARKERS) else "NVIDIA"
        devices.append(
            Device(
                id=p["id"],
                name=name,
                total_memory_bytes=int(mem) if isinstance(mem, (int, float)) and not isinstance(mem, bool) else None,
                compute_capability=cc,
                num_sms=int(sms) if isinstance(sms, int) else None,
                vendor=vendor,
            )
        )
    return devices


def build_trace(sink: ColumnSink, doc: dict[str, Any], path: str) -> Trace:
    """Assemble frames (rebased to the trace start) and devices into a :class:`Trace`.

    ``sink`` is a :class:`ColumnSink` (column lists, reference loader) or a
    :class:`tracedoc.load.fast.ArrayColumns` (numpy arrays, fast loader): same attributes.

    Raises:
        TraceLoadError: the trace holds no PyTorch profiler events at all (empty or foreign).
    """
    c = sink.cols
    if not any(len(c[k].get("ts_us", ())) for k in ("ops", "runtime", "kernels", "memcpys", "memory")):
        what = (
            "no events"
            if sink.n_events == 0
            else f"{sink.n_events} events but none from the PyTorch profiler (no CPU ops, runtime calls, kernels or memory events)"
        )
        raise TraceLoadError(path, f"trace has {what}")
    origin = sink.min_ts
    frames = {}
    for kind in FRAME_COLUMNS:
        df = frame_from_columns(kind, c[kind])
        df["ts_us"] = df["ts_us"] - origin
        if "end_us" in df.columns:
            df["end_us"] = df["ts_us"] + df["dur_us"]
        frames[kind] = df
    steps = frames["steps"].sort_values("ts_us", kind="stable").reset_index(drop=True)
    frames["steps"] = steps
    meta = {k: v for k, v in doc.items() if k not in ("traceEvents", "deviceProperties", "computeProperties")}
    span = (sink.max_end - origin) if sink.max_end > float("-inf") else 0.0
    devices = parse_devices(doc, sink.hip_runtime)
    if _is_mtia(frames):
        devices = _mtia_devices(frames, devices)
    return Trace(
        path=path,
        devices=devices,
        origin_us=origin,
        span_us=span,
        n_events=sink.n_events,
        metadata=meta,
        **frames,
    )
