"""Turn collected columns and the trace's top-level metadata into a :class:`Trace`."""

from __future__ import annotations

import math
from typing import Any

import numpy as np

from tracedoc.errors import TraceLoadError
from tracedoc.load.reference import ColumnSink
from tracedoc.load.shapes import DROP_SHAPE_ARG, frame_columns
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
#: Kineto takes its times from a 64-bit nanosecond clock (libkineto's ``int64_t`` timestamps,
#: written in µs): a ``ts`` or ``ts + dur`` beyond 2**63 ns in magnitude cannot come from it.
DROP_TIME_OUT_OF_RANGE = "time beyond the 64-bit nanosecond clock (|ts| or ts + dur over 2**63 ns)"
#: 2**63 ns in µs (9.22e15 µs, the year 2262 on the Unix epoch; real traces are near 1.7e15).
CLOCK_MAX_US = float(1 << 63) / 1000.0
DROP_NEGATIVE_BYTES = "negative bytes"
DROP_NEGATIVE_MEMORY_TOTAL = "negative Total Allocated / Total Reserved"
#: A ``ph: "B"`` with no matching ``"E"`` (a trace cut while the span was open) or an ``"E"``
#: with no open ``"B"`` on its thread (:func:`tracedoc.load.reference.pair_begin_end`).
DROP_UNPAIRED_BEGIN_END = "a B/E duration event without its other half"
#: A duration of over a second and more than :data:`ABSURD_DURATION_FACTOR` times the window
#: the other events span (:func:`absurd_duration_cut`): an unfinished or wrapped-around record.
DROP_ABSURD_DURATION = "duration longer than twice the span of the other events"
#: Not an event: a device whose ``totalGlobalMem`` is zero, negative or beyond int64; its
#: memory size is treated as unknown (memory-share signals become unavailable).
DROP_DEVICE_MEMORY = "device memory size <= 0 or out of range (ignored)"


#: How many times the window of the other events a duration may be before it is impossible.
#: Why 2: on the real traces in ``fixtures/`` no duration is more than 1.005 times the span of
#: the timestamps, nor more than 1.0 times the window of the other events (the root python
#: function or ``ProfilerStep`` spans the trace); a wrapped-around record (2**64 ns, 1.8e16 µs)
#: or an unfinished one (an end near int64's maximum) is 1e6 to 1e10 times a trace of seconds.
#: An event kept under the rule (and over the floor below) leaves every share within a factor of 3
#: of the truth instead of about 0.
ABSURD_DURATION_FACTOR = 2.0
#: Shortest duration (µs) that can be absurd: 1 s. Why: below a second a duration is ordinary
#: for one kernel, op or wait whatever else a trace holds -- a small or sparse trace may record
#: little besides it (this project's own test traces put a 100 µs step around one 5 µs op, or
#: an 80 µs kernel after a 5 µs launch) -- while the records the rule is for stretch a trace
#: of seconds by orders of magnitude (an unfinished one ends near 2**63 ns: years).
ABSURD_DURATION_MIN_US = 1e6
#: Longest name (characters) kept whole; a longer one keeps its first ``NAME_MAX_CHARS``
#: characters and gets a marker (:func:`cap_name`). Why 16,384: the longest name in the real
#: traces of ``fixtures/`` is a 5,123-character templated CUDA kernel (a100_alexnet_forward),
#: so three times that keeps every real name whole, while names of megabytes made the text
#: report take minutes (its cost grows with the square of a name's length) and made every
#: pattern of ``patterns.toml`` scan the whole name.
NAME_MAX_CHARS = 16_384


def cap_name(name: str) -> str:
    """``name`` unchanged when it has at most :data:`NAME_MAX_CHARS` characters; otherwise its
    first :data:`NAME_MAX_CHARS` characters and a marker giving the full length and a short
    hash of the whole name, so the cut name stays recognisable and two long names that
    differ after the cut stay apart: ``"aaaa…[name cut: 1,048,576 chars, #1a2b3c4d]"``."""
    if len(name) <= NAME_MAX_CHARS:
        return name
    import hashlib

    digest = hashlib.blake2b(name.encode("utf-8", "surrogatepass"), digest_size=4).hexdigest()
    return f"{name[:NAME_MAX_CHARS]}…[name cut: {len(name):,} chars, #{digest}]"


def cap_names(cols: dict[str, dict[str, Any]]) -> None:
    """Apply :func:`cap_name` in place to the ``name`` column of every frame in ``cols``
    (lists from the reference loader or object arrays from the fast one): the one place both
    loaders cap names, before any signal matches or any renderer shows them. Cost: one
    C-level pass over the lengths; names are rebuilt only when one is too long."""
    for frame in cols.values():
        names = frame.get("name")
        if names is None or not len(names) or max(map(len, names)) <= NAME_MAX_CHARS:
            continue
        memo: dict[str, str] = {}
        capped = [memo[n] if n in memo else memo.setdefault(n, cap_name(n)) for n in names]
        if isinstance(names, np.ndarray):
            names[:] = capped
        else:
            frame["name"] = capped


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
            end = ts + dur
            out.append((DROP_NON_FINITE_TIME, ~np.isfinite(end)))
            out.append((DROP_TIME_OUT_OF_RANGE, (np.abs(ts) > CLOCK_MAX_US) | (np.abs(end) > CLOCK_MAX_US)))
    else:
        out.append((DROP_NON_FINITE_TIME, ~np.isfinite(ts)))
        out.append((DROP_TIME_OUT_OF_RANGE, np.abs(ts) > CLOCK_MAX_US))
    if kind in ("memcpys", "memsets"):
        out.append((DROP_NEGATIVE_BYTES, df["bytes"].to_numpy(dtype=np.float64) < 0))
    if kind == "memory":
        neg = (df["total_allocated_bytes"].to_numpy(dtype=np.float64) < 0) | (
            df["total_reserved_bytes"].to_numpy(dtype=np.float64) < 0
        )
        out.append((DROP_NEGATIVE_MEMORY_TOTAL, neg))
    return out


#: Frames whose rows have a duration (``steps`` rows are also ``ops`` rows; ``memory`` rows are instants).
_DURATION_FRAMES = ("ops", "runtime", "kernels", "memcpys", "memsets", "syncs")


def absurd_duration_cut(frames: dict) -> float | None:
    """The end time (raw µs) beyond which every event of ``frames`` has an absurd duration, or
    None when none has.

    An event's duration is absurd when it is longer than :data:`ABSURD_DURATION_MIN_US` (1 s)
    and more than :data:`ABSURD_DURATION_FACTOR` times the window the *other* events span: from
    the earliest timestamp of any event (starts are not in doubt) to the latest timestamp of
    any event or the latest end among the others, whichever is later. Only the event that ends
    last can qualify (any other's window already holds its own end), so the events are peeled
    in order of their end, latest first, until one is not absurd; the cut is the latest end
    left. When two events end at the same time they vouch for each other and both stay (a
    known limit: two records wrapped around to the same absurd end are kept). An event with no
    other event to compare to, or a window of zero (every other event an instant at the same
    time), stays.

    Times are the raw (un-rebased) ``ts_us`` and ``ts_us + dur_us`` of rows already cleared of
    negative and non-finite values (:func:`drop_impossible` applies them first). Cost: one pass
    over the times, then a sort of the few events longer than the factor times the span of
    the timestamps (none on a real trace).
    """
    starts, ends, durs = [], [], []
    for kind in (*_DURATION_FRAMES, "memory"):
        df = frames.get(kind)
        if df is None or not len(df):
            continue
        ts = df["ts_us"].to_numpy(dtype=np.float64)
        dur = df["dur_us"].to_numpy(dtype=np.float64) if kind != "memory" else np.zeros(len(ts))
        starts.append(ts)
        durs.append(dur)
        with np.errstate(over="ignore", invalid="ignore"):
            ends.append(ts + dur)
    if not starts:
        return None
    ts, dur, end = np.concatenate(starts), np.concatenate(durs), np.concatenate(ends)
    if len(ts) < 2:
        return None
    t_min, t_max = float(ts.min()), float(ts.max())
    with np.errstate(over="ignore", invalid="ignore"):
        ts_span = t_max - t_min
        cand = np.flatnonzero((dur > ABSURD_DURATION_FACTOR * ts_span) & (dur > ABSURD_DURATION_MIN_US))
    if not len(cand):
        return None
    others = np.ones(len(ts), dtype=bool)
    others[cand] = False
    rest_end = float(end[others].max()) if others.any() else float("-inf")
    order = cand[np.argsort(-end[cand], kind="stable")]
    cut = None
    for k, i in enumerate(order.tolist()):
        nxt = float(end[order[k + 1]]) if k + 1 < len(order) else float("-inf")
        latest_other = max(nxt, rest_end)
        if latest_other == float("-inf"):  # no other event left to compare to
            break
        window = max(t_max, latest_other) - t_min
        if not (window > 0 and float(dur[i]) > max(ABSURD_DURATION_FACTOR * window, ABSURD_DURATION_MIN_US)):
            break
        cut = latest_other
    return cut


def drop_impossible(frames: dict, dropped: dict[str, int]) -> None:
    """Remove rows with impossible values from ``frames`` in place, counting them by reason in
    ``dropped``: a negative duration, a ``ts + dur`` that is not finite, a ``ts`` or ``ts + dur``
    beyond the profiler clock's range (:data:`CLOCK_MAX_US`), negative copy or memset bytes, a negative ``Total Allocated``/``Total Reserved``. (A ``[memory]`` event's
    ``Bytes`` is a signed allocation delta and may be negative.) Then, among the rows left, a
    duration of over a second and more than :data:`ABSURD_DURATION_FACTOR` times the window of
    the other events
    (:func:`absurd_duration_cut`). ``steps`` rows are filtered by the same rules but not counted
    again: each is also a row of ``ops``."""
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
    cut = absurd_duration_cut(frames)
    if cut is None:
        return
    for kind in (*_DURATION_FRAMES, "steps"):
        df = frames[kind]
        if not len(df):
            continue
        end = df["ts_us"].to_numpy(dtype=np.float64) + df["dur_us"].to_numpy(dtype=np.float64)
        bad = end > cut
        if bad.any():
            if kind != "steps":
                dropped[DROP_ABSURD_DURATION] = dropped.get(DROP_ABSURD_DURATION, 0) + int(bad.sum())
            frames[kind] = df[~bad].reset_index(drop=True)


#: Codes read at a time by :func:`without_unused_categories` (1 Mi: an 8 MiB index array at most).
UNUSED_CATEGORIES_CHUNK = 1 << 20


def without_unused_categories(column, chunk: int = UNUSED_CATEGORIES_CHUNK):
    """``column`` (a ``Categorical`` Series) without the categories no row uses: the column
    itself when every category is used (nothing copied), else a new Series with the used
    categories in their order and the codes renumbered -- what pandas'
    ``cat.remove_unused_categories()`` gives, -1 (missing) kept.

    Why not pandas' own: it runs ``np.unique(codes, return_inverse=True)`` on every column,
    a sort and several 8-byte arrays per row even when nothing is unused, and that was the
    load's peak (291 MiB in process against 228 after it on 1 M small events, issue 24). Here
    the used categories are marked ``chunk`` codes at a time (the index array numpy makes for
    them is at most ``chunk`` int64s), and codes are renumbered only when a category goes:
    rows were dropped (:func:`drop_impossible`)."""
    import pandas as pd

    cat = column.array
    codes = cat.codes
    used = np.zeros(len(cat.categories), dtype=bool)
    for lo in range(0, codes.size, chunk):
        part = codes[lo : lo + chunk]
        used[part[part >= 0]] = True
    if used.all():
        return column
    renumber = np.cumsum(used, dtype=np.int64) - 1
    new = np.empty(codes.size, dtype=np.int32 if used.size < 2**31 else np.int64)
    for lo in range(0, codes.size, chunk):
        part = codes[lo : lo + chunk]
        new[lo : lo + part.size] = np.where(part >= 0, renumber[np.maximum(part, 0)], -1)
    return pd.Series(
        pd.Categorical.from_codes(new, categories=cat.categories[used]), index=column.index, name=column.name
    )


def build_trace(sink: ColumnSink, doc: dict[str, Any], path: str) -> Trace:
    """Assemble frames (rebased to the trace start) and devices into a :class:`Trace`.

    ``sink`` is a :class:`ColumnSink` (column lists, reference loader) or a
    :class:`tracedoc.load.fast.ArrayColumns` (numpy arrays, fast loader): same attributes. It is
    consumed: its columns are emptied as the frames take them.

    Names longer than :data:`NAME_MAX_CHARS` are cut (:func:`cap_names`). Events with
    impossible values are dropped (:func:`drop_impossible`) and counted in
    ``Trace.dropped_events`` (reason -> count); the origin and span are those of the events
    kept. Recorded op inputs dropped as invalid (``sink.shape_args_dropped``, values, not
    events) are counted there under :data:`tracedoc.load.shapes.DROP_SHAPE_ARG`, and the
    recorded-input columns keep as categories only the texts of the rows kept. Metadata is
    made JSON-safe (:func:`json_safe_metadata`).

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
    cap_names(c)
    frames = {}
    for kind in FRAME_COLUMNS:
        # each kind's columns are dropped from the sink once its frame holds them: the sink and
        # every frame at once added one more copy of the events to the load's peak (issue 24)
        frames[kind] = frame_from_columns(kind, c[kind], consume=True)
        c[kind] = {}
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
    if getattr(sink, "shape_args_dropped", 0):
        dropped[DROP_SHAPE_ARG] = sink.shape_args_dropped
    for kind, df in frames.items():  # the categories of the rows kept, whatever was dropped
        for col, dtype in frame_columns(kind):
            column = df[col]
            if dtype == "category" and len(column.cat.categories):
                kept = without_unused_categories(column)
                if kept is not column:  # a category went: set the renumbered column
                    df[col] = kept
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
