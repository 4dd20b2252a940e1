"""The reference loader: orjson into Python objects, one pass over the events.

Simple and obviously correct; the fast loader must give identical frames (a test
compares them on every real trace).
"""

from __future__ import annotations

import math
import re
from typing import Any

import orjson

from tracedoc.errors import TraceLoadError
from tracedoc.load.categories import (
    KIND_GPU_ANNOTATION,
    KIND_IGNORED,
    KIND_KERNEL,
    KIND_MEMCPY,
    KIND_MEMSET,
    KIND_OP,
    KIND_RUNTIME,
    KIND_SYNC,
    classify_runtime,
    normalize_category,
    parse_memcpy_name,
)
from tracedoc.load.shapes import SHAPE_ARGS, shape_text

_NUM = (int, float)
_STEP_RE = re.compile(r"^ProfilerStep#(\d+)$")
_STREAM_RE = re.compile(r"(\d+)")
#: The int64 range the frames' integer columns (step, device, stream) hold.
INT64_MIN, INT64_MAX = -(1 << 63), (1 << 63) - 1


def _in_int64(v: int) -> bool:
    return INT64_MIN <= v <= INT64_MAX


def step_number(name: str) -> int:
    """N of a ``ProfilerStep#N`` name, or -1 when the name is not one or N does not fit int64
    (such an annotation is kept as a CPU op, not a step)."""
    m = _STEP_RE.match(name)
    if not m:
        return -1
    digits = m.group(1)
    if len(digits) > 19:  # int() of a huge digit string is slow and cannot fit anyway
        return -1
    n = int(digits)
    return n if n <= INT64_MAX else -1


def parse_document(data: bytes, path: str) -> dict[str, Any]:
    """Parse JSON bytes into the top-level trace object.

    Raises:
        TraceLoadError: invalid JSON (bare ``NaN``/``Infinity`` included: they are not
            JSON), a top level that is not an object, or no ``traceEvents`` list.
    """
    try:
        doc = orjson.loads(data)
    except orjson.JSONDecodeError as exc:
        raise TraceLoadError(path, f"invalid JSON ({exc})") from None
    return check_document(doc, path)


def check_document(doc: Any, path: str) -> dict[str, Any]:
    """Validate the top level of a parsed trace (shared by every loader)."""
    if isinstance(doc, list):
        raise TraceLoadError(
            path, "top level is a JSON array; expected a Kineto trace object with a 'traceEvents' list"
        )
    if not isinstance(doc, dict):
        raise TraceLoadError(path, f"top level is a JSON {type(doc).__name__}; expected a Kineto trace object")
    if "traceEvents" not in doc:
        raise TraceLoadError(path, "no 'traceEvents' key: not a PyTorch profiler (Kineto) trace")
    if not isinstance(doc["traceEvents"], list):
        raise TraceLoadError(path, f"'traceEvents' is a {_json_type(doc['traceEvents'])}, expected a list")
    return doc


def _json_type(v: Any) -> str:
    return {dict: "object", list: "array", str: "string", bool: "boolean", type(None): "null"}.get(type(v), "number")


def _bad(path: str, i: int, ev: dict, key: str, want: str) -> TraceLoadError:
    name = ev.get("name")
    label = f"event #{i}" + (f" ({name[:40]!r})" if isinstance(name, str) else "")
    return TraceLoadError(path, f"{label}: '{key}' is a {_json_type(ev.get(key))}, expected {want}")


#: Name of the instant event Kineto writes where the profiler stopped recording.
WINDOW_END_NAME = "Record Window End"


def window_end_of(current: float | None, ts: Any) -> float | None:
    """The later of ``current`` and a ``Record Window End`` instant's ``ts`` (µs); a ``ts``
    that is not a finite number is ignored (the instant is a hint, not an event we keep)."""
    if isinstance(ts, bool) or not isinstance(ts, (int, float)) or not math.isfinite(ts):
        return current
    return float(ts) if current is None else max(current, float(ts))


class ColumnSink:
    """Column lists per frame kind, filled event by event; raw (un-rebased) times.

    Attributes:
        cols: ``kind -> column -> list``; kinds and columns as in
            :func:`tracedoc.load.shapes.all_frame_columns` (the schema plus the ops frame's
            recorded-input columns, which hold text or None: :func:`tracedoc.load.shapes.shape_text`).
        min_ts: smallest timestamp seen (absolute µs), the rebase origin.
        max_end: largest ``ts + dur`` seen (absolute µs).
        hip_runtime: True when a ``hip*`` runtime call was seen (ROCm trace).
        window_end: the latest ``Record Window End`` instant (absolute µs), None without one.
        shape_args_dropped: recorded-input values (``Input Dims``...) dropped as invalid.
    """

    def __init__(self) -> None:
        from tracedoc.load.shapes import all_frame_columns

        self.cols = {k: {c: [] for c, _ in spec} for k, spec in all_frame_columns().items()}
        self.min_ts = float("inf")
        self.max_end = float("-inf")
        self.hip_runtime = False
        self.window_end: float | None = None
        self.n_events = 0
        #: ``ph: "B"``/``"E"`` events left without their other half (a trace cut mid-span), dropped
        self.unpaired_begin_end = 0
        self.shape_args_dropped = 0

    def add(self, kind: str, cat: str, name: str, pid: Any, tid: Any, ts: float, dur: float, args: dict) -> None:
        """Add one complete ('X') event already sorted into ``kind``."""
        if ts < self.min_ts:
            self.min_ts = ts
        if ts + dur > self.max_end:
            self.max_end = ts + dur
        c = self.cols
        if kind == KIND_OP:
            o = c["ops"]
            o["name"].append(name)
            o["cat"].append(cat)
            o["pid"].append(str(pid))
            o["tid"].append(str(tid))
            o["ts_us"].append(ts)
            o["dur_us"].append(dur)
            o["end_us"].append(0.0)
            o["external_id"].append(_num(args.get("External id")))
            for col, key in SHAPE_ARGS:
                value = args.get(key)
                text = shape_text(col, value)
                if text is None and value is not None:
                    self.shape_args_dropped += 1
                o[col].append(text)
            n = step_number(name)
            if n >= 0 and cat in ("cpu_op", "user_annotation"):
                s = c["steps"]
                s["step"].append(n)
                s["name"].append(name)
                s["ts_us"].append(ts)
                s["dur_us"].append(dur)
                s["end_us"].append(0.0)
        elif kind == KIND_RUNTIME:
            if name.startswith("hip"):
                self.hip_runtime = True
            r = c["runtime"]
            r["name"].append(name)
            r["cat"].append(cat)
            r["kind"].append(classify_runtime(name))
            r["pid"].append(str(pid))
            r["tid"].append(str(tid))
            r["ts_us"].append(ts)
            r["dur_us"].append(dur)
            r["end_us"].append(0.0)
            r["correlation"].append(_num(args.get("correlation")))
        elif kind in (KIND_KERNEL, KIND_MEMCPY, KIND_MEMSET, KIND_SYNC):
            frame = {KIND_KERNEL: "kernels", KIND_MEMCPY: "memcpys", KIND_MEMSET: "memsets", KIND_SYNC: "syncs"}[kind]
            g = c[frame]
            g["name"].append(name)
            g["device"].append(_int(args.get("device"), _int(pid, -1)))
            g["stream"].append(_int(args.get("stream"), _stream_from_tid(tid)))
            g["ts_us"].append(ts)
            g["dur_us"].append(dur)
            g["end_us"].append(0.0)
            g["correlation"].append(_num(args.get("correlation")))
            if kind == KIND_KERNEL:
                g["occupancy_pct"].append(_num(args.get("est. achieved occupancy %")))
            elif kind == KIND_MEMCPY:
                ck, src, dst = parse_memcpy_name(name)
                g["copy_kind"].append(ck)
                g["src_memory"].append(src)
                g["dst_memory"].append(dst)
                g["bytes"].append(_num(args.get("bytes")))
            elif kind == KIND_SYNC:
                g["wait_event_corr"].append(_num(args.get("wait_on_cuda_event_record_corr_id")))
            elif kind == KIND_MEMSET:
                g["bytes"].append(_num(args.get("bytes")))

    def add_memory(self, ts: float, args: dict) -> None:
        """Add one ``[memory]`` instant event."""
        if ts < self.min_ts:
            self.min_ts = ts
        m = self.cols["memory"]
        m["ts_us"].append(ts)
        m["device_type"].append(_int(args.get("Device Type"), -1))
        m["device_id"].append(_int(args.get("Device Id"), -1))
        m["bytes"].append(_num(args.get("Bytes")))
        m["total_allocated_bytes"].append(_num(args.get("Total Allocated")))
        m["total_reserved_bytes"].append(_num(args.get("Total Reserved")))


def _num(v: Any) -> float:
    if isinstance(v, bool) or not isinstance(v, _NUM):
        if isinstance(v, str):
            try:
                return float(v)
            except ValueError:
                return float("nan")
        return float("nan")
    return float(v)


def _int(v: Any, default: Any) -> Any:
    """``v`` as an int64-range integer (ints, finite floats truncated, decimal strings), else
    ``default``: an id beyond int64 (a pid, device or stream of 2**70) is treated as absent."""
    if isinstance(v, bool):
        return default
    if isinstance(v, int):
        return v if _in_int64(v) else default
    if isinstance(v, float) and -9.3e18 < v < 9.3e18:  # NaN and inf fail both comparisons
        i = int(v)
        return i if _in_int64(i) else default
    if isinstance(v, str) and len(v) <= 40:
        try:
            i = int(v)
        except ValueError:
            return default
        return i if _in_int64(i) else default
    return default


def _stream_from_tid(tid: Any) -> int:
    """The stream of a GPU event from its ``tid`` (an int, or the first number in a string
    such as ``"stream 7"``); -1 when there is none or it does not fit int64."""
    if isinstance(tid, int) and not isinstance(tid, bool):
        return tid if _in_int64(tid) else -1
    m = _STREAM_RE.search(str(tid))
    if not m or len(m.group(1)) > 19:
        return -1
    n = int(m.group(1))
    return n if _in_int64(n) else -1


def collect_events(events: list, path: str, sink: ColumnSink | None = None) -> ColumnSink:
    """Sort every event of ``traceEvents`` into the sink's columns.

    Complete events (``ph == "X"``) with a known category, duration events written as
    ``ph: "B"``/``"E"`` pairs (paired by :func:`pair_begin_end`, added after the ``X``
    events) and ``[memory]`` instant events are kept; flows, metadata, counters and
    other instants are skipped.

    Raises:
        TraceLoadError: an event that is not an object, or a kept event whose
            ``ts``/``dur`` is not a number, whose ``name``/``cat`` is not a string, or
            whose ``args`` is not an object.
    """
    sink = sink or ColumnSink()
    begin_end: list[tuple[int, dict]] = []
    for i, ev in enumerate(events):
        if not isinstance(ev, dict):
            raise TraceLoadError(path, f"event #{i} is a {_json_type(ev)}, expected an object")
        sink.n_events += 1
        ph = ev.get("ph")
        if ph == "B" or ph == "E":
            ts = ev.get("ts")
            if not isinstance(ts, _NUM) or isinstance(ts, bool):
                raise _bad(path, i, ev, "ts", "a number")
            begin_end.append((i, ev))
        else:
            _collect_one(sink, path, i, ev, ph)
    if begin_end:
        pairs, sink.unpaired_begin_end = pair_begin_end(begin_end)
        for i, ev in pairs:
            _collect_one(sink, path, i, ev, "X")
    return sink


def _collect_one(sink: ColumnSink, path: str, i: int, ev: dict, ph: Any) -> None:
    """Add event #``i`` to the sink when it is kept (see :func:`collect_events`)."""
    if ph == "X":
        cat = ev.get("cat")
        if cat is not None and not isinstance(cat, str):
            raise _bad(path, i, ev, "cat", "a string")
        canon, kind = normalize_category(cat)
        if kind in (KIND_IGNORED, KIND_GPU_ANNOTATION):
            return
    elif (ph == "i" or ph == "I") and ev.get("name") == "[memory]":
        kind = "memory"
    else:
        if (ph == "i" or ph == "I") and ev.get("name") == WINDOW_END_NAME:
            sink.window_end = window_end_of(sink.window_end, ev.get("ts"))
        return
    ts = ev.get("ts")
    if not isinstance(ts, _NUM) or isinstance(ts, bool):
        raise _bad(path, i, ev, "ts", "a number")
    args = ev.get("args")
    if args is None:
        args = {}
    elif not isinstance(args, dict):
        raise _bad(path, i, ev, "args", "an object")
    if kind == "memory":
        sink.add_memory(float(ts), args)
        return
    name = ev.get("name")
    if not isinstance(name, str):
        raise _bad(path, i, ev, "name", "a string")
    dur = ev.get("dur", 0)
    if not isinstance(dur, _NUM) or isinstance(dur, bool):
        raise _bad(path, i, ev, "dur", "a number")
    sink.add(kind, canon, name, ev.get("pid"), ev.get("tid"), float(ts), float(dur), args)


def pair_begin_end(items: list[tuple[int, dict]]) -> tuple[list[tuple[int, dict]], int]:
    """Pair Chrome-trace duration events (``ph: "B"`` begins, ``ph: "E"`` ends) into complete
    ``ph: "X"`` events, as the Trace Event Format defines them: on each ``(pid, tid)``, in time
    order (file order breaks ties), an ``E`` closes the most recent open ``B``; the ``X`` event
    takes the ``B`` event's fields, ``dur = E.ts - B.ts`` (µs), and ``args`` of both (the
    ``E``'s win). An ``E`` that carries a ``name`` closes the most recent open ``B`` of that
    name (spans on one thread that overlap without nesting stay apart); one whose name matches
    no open ``B`` closes the most recent one, as an unnamed ``E`` does.

    Args:
        items: ``(index in traceEvents, event)`` of every ``B``/``E`` event, ``ts`` already
            checked to be a number.

    Returns:
        ``((B's index, complete event) ordered by that index, count of unpaired B and E events)``;
        an unpaired event (an ``E`` with nothing open, a ``B`` still open when the trace
        ends) is dropped, as the trace gives it no duration.

    Source: Trace Event Format, "Duration Events" (Google, chromium catapult docs).
    """
    by_thread: dict[tuple[str, str], list[tuple[float, int, dict]]] = {}
    for i, ev in items:
        key = (str(ev.get("pid")), str(ev.get("tid")))
        by_thread.setdefault(key, []).append((float(ev["ts"]), i, ev))
    out: list[tuple[int, dict]] = []
    unpaired = 0
    for evs in by_thread.values():
        evs.sort(key=lambda x: (x[0], x[1]))
        stack: list[tuple[int, dict]] = []
        for ts, i, ev in evs:
            if ev.get("ph") == "B":
                stack.append((i, ev))
                continue
            if not stack:
                unpaired += 1
                continue
            at = len(stack) - 1
            name = ev.get("name")
            if isinstance(name, str) and stack[at][1].get("name") != name:
                at = next((k for k in range(at, -1, -1) if stack[k][1].get("name") == name), at)
            bi, b = stack.pop(at)
            x = {k: v for k, v in b.items() if k != "ph"}
            x["ph"] = "X"
            x["dur"] = ts - float(b["ts"])
            if isinstance(ev.get("args"), dict) and ev["args"]:
                merged = dict(b["args"]) if isinstance(b.get("args"), dict) else {}
                merged.update(ev["args"])
                x["args"] = merged
            out.append((bi, x))
        unpaired += len(stack)
    out.sort(key=lambda x: x[0])
    return out, unpaired
