"""The fast loader: typed, field-selective msgspec decoding, then column-wise numpy.

Why it is fast (measured in ``benchmarks/RESULTS.md``):

* ``msgspec.json.decode`` into :class:`Event` structs that declare only the fields the
  analysis reads (``ph``, ``cat``, ``name``, ``pid``, ``tid``, ``ts``, ``dur``, a few
  typed ``args`` and the recorded op inputs, ``Input Dims`` and its kin); every other
  key -- call stacks, flow ids, the dozens of kernel attributes -- is skipped by the
  parser without ever becoming a Python object. Recorded inputs become one text per
  distinct value (:func:`shape_column`).
* After decoding, no per-event branching: events are sorted into frames with numpy
  masks over one kind code per event, each column is one C-level
  ``map(attrgetter(...))`` over the kept events, and per-name work (runtime call
  class, memcpy kind, step number, canonical category, ``str(pid)``) runs once per
  *distinct* value through a memo dict.
* A regular file is read and decoded as a stream of parts of about 4 MB
  (:func:`load_stream`): each part is decoded, proven to be cut between two events, and
  turned into compact columns (string columns as codes into their distinct values) before
  the next, alternately in this process and in one worker process; neither the whole JSON
  nor all decoded events are ever in memory. Other inputs (a pipe, a URL) and a stream
  that hands over are held in one buffer, which a large trace decodes in one forked worker
  per CPU (:func:`parse_parallel`).

Semantics are those of :mod:`tracedoc.load.reference`, which stays the definition:
anything the typed decode cannot take as it is -- invalid JSON, a top level that is
not an object, a field of an unexpected type anywhere (even on an event the analysis
would skip), a kept event missing ``ts``/``name``, ``ph: "B"``/``"E"`` duration events
(paired by the reference loader) -- makes this loader hand the same
bytes to the reference loader, so error messages (and the rare odd-but-valid trace)
come out exactly as the reference gives them. ``tests/test_fast_loader.py`` checks
that both loaders give identical frames on every real trace and on edge cases.
"""

from __future__ import annotations

import os
import pickle
import re
import struct
import sys
from collections import deque
from itertools import compress, repeat
from operator import attrgetter
from typing import Any, Callable, Iterable

import msgspec
import numpy as np
import orjson

from tracedoc import hostfacts
from tracedoc.heap import GrowthTrim
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
from tracedoc.load.reference import WINDOW_END_NAME, _int, _num, _stream_from_tid, step_number, window_end_of
from tracedoc.load.shapes import SHAPE_ARGS, all_frame_columns, shape_text
from tracedoc.schema import FRAME_COLUMNS

_NAN = float("nan")


class Args(msgspec.Struct, gc=False):
    """The ``args`` keys the analysis reads; all others are skipped while parsing.

    Numbers may arrive as strings in some traces (ROCm writes ``"stream": "0x0"``);
    they are converted exactly as the reference loader does. Absent floats are NaN.
    """

    correlation: float | str = _NAN
    external_id: float | str = msgspec.field(default=_NAN, name="External id")
    device: int | str | None = None
    stream: int | str | None = None
    bytes: float | str = _NAN
    occupancy_pct: float | str = msgspec.field(default=_NAN, name="est. achieved occupancy %")
    device_type: int | str | None = msgspec.field(default=None, name="Device Type")
    device_id: int | str | None = msgspec.field(default=None, name="Device Id")
    mem_bytes: float | str = msgspec.field(default=_NAN, name="Bytes")
    total_allocated: float | str = msgspec.field(default=_NAN, name="Total Allocated")
    total_reserved: float | str = msgspec.field(default=_NAN, name="Total Reserved")
    wait_event_corr: float | str = msgspec.field(default=_NAN, name="wait_on_cuda_event_record_corr_id")


class ShapedArgs(Args, gc=False):
    """:class:`Args` and the recorded op inputs (``record_shapes=True``): each value's JSON
    bytes, read once per distinct value when the columns are built (:func:`shape_column`); empty
    when absent. A ``Raw`` points into the input buffer, so :func:`decode_document` replaces each
    by a ``bytes`` copy at once (:func:`_detach_shapes`). A trace that holds none of these keys
    (:func:`may_hold_shapes`) is decoded into the smaller :class:`Args`: four fields are 32 bytes
    on every event with args."""

    input_dims: msgspec.Raw = msgspec.field(default=msgspec.Raw(), name="Input Dims")
    input_types: msgspec.Raw = msgspec.field(default=msgspec.Raw(), name="Input type")
    input_strides: msgspec.Raw = msgspec.field(default=msgspec.Raw(), name="Input Strides")
    concrete_inputs: msgspec.Raw = msgspec.field(default=msgspec.Raw(), name="Concrete Inputs")


class Event(msgspec.Struct, gc=False):
    """One trace event, reduced to the fields the analysis reads.

    ``gc=False``: the structs hold only scalars, strings and another such struct,
    so they cannot form cycles; leaving them untracked keeps the garbage collector
    from rescanning hundreds of thousands of objects while they are created.
    """

    ph: str | None = None
    cat: str | None = None
    name: str | None = None
    pid: int | str | None = None
    tid: int | str | None = None
    ts: float = _NAN
    dur: float = 0.0
    args: Args | None = None


class ShapedEvent(Event, gc=False):
    """An :class:`Event` whose args may hold recorded op inputs (:class:`ShapedArgs`)."""

    args: ShapedArgs | None = None


_NONE = np.array(None, dtype=object)  # 0-d: broadcast to an all-None column of any length
_EMPTY_ARGS = Args()
_EMPTY_SHAPED_ARGS = ShapedArgs()
_TOP_DECODER = msgspec.json.Decoder(dict[str, msgspec.Raw])
_EVENTS_DECODER = msgspec.json.Decoder(list[Event])
_SHAPED_EVENTS_DECODER = msgspec.json.Decoder(list[ShapedEvent])
_ANY_DECODER = msgspec.json.Decoder()


class Fallback(Exception):
    """The typed fast path cannot take this input as it is; use the reference loader."""


class ArrayColumns:
    """Column arrays per frame kind (the fast loader's counterpart of ``ColumnSink``).

    Same attributes as :class:`tracedoc.load.reference.ColumnSink`; the columns are
    numpy arrays instead of lists.
    """

    def __init__(self) -> None:
        self.cols: dict[str, dict[str, Any]] = {k: {} for k in FRAME_COLUMNS}
        self.min_ts = float("inf")
        self.max_end = float("-inf")
        self.hip_runtime = False
        self.window_end: float | None = None
        self.n_events = 0
        self.unpaired_begin_end = 0  # always 0: traces with B/E events go to the reference loader
        self.shape_args_dropped = 0


#: Bytes mapped for the scan of number tokens that may not fit a double: digits to ``0``,
#: ``e``, ``E`` and ``+`` to ``e`` (so ``e+400`` reads ``ee000``), everything else to a space.
_NUMBER_MAP = bytes(0x30 if 0x30 <= i <= 0x39 else 0x65 if i in (0x45, 0x65, 0x2B) else 0x20 for i in range(256))
#: A token may overflow a double only with 100+ digits in a row or a 3+ digit exponent.
_OVERFLOW_PATTERNS = (b"0" * 100, b"e000")
_NUMBER_CHARS = frozenset(b"0123456789+-.eE")
_SCAN_CHUNK = 8 << 20
_SCAN_OVERLAP = 128
_DECODE_ERRORS = (msgspec.DecodeError, msgspec.ValidationError, RecursionError, UnicodeDecodeError)


_BEFORE_NUMBER = frozenset(b" \t\n\r:,[")
_AFTER_NUMBER = frozenset(b" \t\n\r,]}")


def _overflows(data: Any, pos: int) -> tuple[bool, int]:
    """Whether the JSON number token around ``pos`` (delimited as a JSON value is, so the
    digits of ``0x7cc1558e8480`` in a string are not one) parses to an infinite double, and
    the offset where the run of number characters around ``pos`` ends (the scan goes on
    from there: a name of 50,000 digits is read once, not once per digit)."""
    lo = hi = pos
    n = len(data)
    while lo > 0 and data[lo - 1] in _NUMBER_CHARS:
        lo -= 1
    while hi < n and data[hi] in _NUMBER_CHARS:
        hi += 1
    if hi - lo > 100_000:  # no double needs so many characters; orjson reads it as inf
        return True, hi
    if (lo > 0 and data[lo - 1] not in _BEFORE_NUMBER) or (hi < n and data[hi] not in _AFTER_NUMBER):
        return False, hi
    try:
        value = float(bytes(data[lo:hi]))
    except ValueError:
        return False, hi
    return value in (float("inf"), float("-inf")), hi


def reference_would_reject(data: Any) -> bool:
    """True when the bytes hold something the reference parser (orjson) rejects but a
    typed msgspec decode skips over unread: bytes that are not valid UTF-8, or a number
    that overflows a double (``1e400``, a 400-digit integer), anywhere in the document.

    The fast loader hands such input to the reference loader, so both give the same error.
    Cost: one pass in 8 MB chunks (``isascii``; UTF-8 is decoded only in chunks that hold
    non-ASCII bytes; ``bytes.translate`` and two substring searches for number tokens that
    might overflow, each candidate then parsed): about a third of msgspec's decoding time. A candidate inside a string only costs
    the handover, never a wrong answer.
    """
    view = memoryview(data).cast("B") if not isinstance(data, memoryview) else data.cast("B")
    n = len(view)
    try:
        import codecs

        dec = codecs.getincrementaldecoder("utf-8")("strict")
        for start in range(0, max(n, 1), _SCAN_CHUNK):
            stop = min(n, start + _SCAN_CHUNK)
            chunk = bytes(view[start : min(n, stop + _SCAN_OVERLAP)])
            body = chunk[: stop - start]
            if not body.isascii() or dec.buffer:  # type: ignore[attr-defined]
                try:
                    dec.decode(body)
                except UnicodeDecodeError:
                    return True
            mapped = chunk.translate(_NUMBER_MAP)
            for pat in _OVERFLOW_PATTERNS:
                i = mapped.find(pat)
                while 0 <= i < len(body):
                    over, end = _overflows(view, start + i)
                    if over:
                        return True
                    i = mapped.find(pat, max(i + 1, end - start))
        try:
            dec.decode(b"", final=True)
        except UnicodeDecodeError:
            return True
    finally:
        view.release()
    return False


def _span(raw: msgspec.Raw, data: Any) -> tuple[int, int]:
    """``(start, end)`` byte offsets of a decoded ``Raw`` value inside the buffer ``data``
    (msgspec's ``Raw`` points into the input buffer); ``(-1, -1)`` when it does not."""
    with memoryview(raw) as rv:
        if not len(rv):
            return (-1, -1)
        base = np.frombuffer(data, dtype=np.uint8)
        where = np.frombuffer(rv, dtype=np.uint8)
        start = where.ctypes.data - base.ctypes.data
        del base, where
        if not 0 <= start <= len(data) - len(rv):
            return (-1, -1)
        return (start, start + len(rv))


#: Nesting msgspec may decode or skip before the fast loader hands over. orjson (the
#: reference parser) rejects documents nested deeper than 1024; msgspec's limit is Python's
#: recursion limit, which a caller may have raised: keep it below 1024 while decoding.
MSGSPEC_MAX_NESTING = 1000


class _BoundedRecursion:
    """Lower Python's recursion limit to the current depth + :data:`MSGSPEC_MAX_NESTING`
    while msgspec decodes (never raise it), so that anything nested deeper than orjson
    accepts fails here and goes to the reference loader."""

    def __enter__(self) -> None:
        depth, frame = 0, sys._getframe()
        while frame is not None:
            depth += 1
            frame = frame.f_back
        self.old = sys.getrecursionlimit()
        sys.setrecursionlimit(min(self.old, depth + MSGSPEC_MAX_NESTING))

    def __exit__(self, *exc: Any) -> None:
        sys.setrecursionlimit(self.old)


#: ``Input`` occurrences :func:`may_hold_shapes` checks one by one before it answers True.
_SHAPE_SCAN_MAX_HITS = 10_000


def may_hold_shapes(data: Any) -> bool:
    """False only when the JSON bytes surely hold no recorded-input key (``Input Dims``,
    ``Input type``, ``Input Strides``, ``Concrete Inputs``): no backslash (a key may be written
    with escapes, ``"\\u0049nput Dims"``) and no ``Input`` that begins a key (``"Input ``) or
    ends one (``Inputs"``). A name that holds one makes it True: the events are then decoded
    with :class:`ShapedArgs`, which only costs memory. Anything but ``bytes``/``bytearray``:
    True. Cost: a ``memchr`` pass, then a substring search whose few hits in names are checked
    one by one (past :data:`_SHAPE_SCAN_MAX_HITS`, True)."""
    if not isinstance(data, (bytes, bytearray)) or data.find(b"\\") >= 0:
        return True
    i = data.find(b"Input")
    for _ in range(_SHAPE_SCAN_MAX_HITS):
        if i < 0:
            return False
        if (data[i - 1 : i] == b'"' and data[i + 5 : i + 6] == b" ") or data[i + 5 : i + 7] == b's"':
            return True
        i = data.find(b"Input", i + 5)
    return True


def decode_document(
    data: Any, progress: Callable[[str], None] | None = None, span_out: list | None = None, shapes: bool | None = None
) -> tuple[dict[str, Any], list[Event]]:
    """Decode the top level and the typed events.

    Returns ``(doc, events)`` where ``doc`` holds every top-level key except
    ``traceEvents`` as plain Python values. When ``span_out`` is a list, the byte span
    ``(start, end)`` of the ``traceEvents`` array (the value the top-level object ends up
    with, the last one when the key repeats) inside ``data`` is appended to it.

    ``shapes``: whether to decode the recorded op inputs (:class:`ShapedEvent`, no event then
    refers to ``data``: :func:`_detach_shapes`); None: :func:`may_hold_shapes` of ``data``.

    Raises:
        Fallback: invalid JSON (including what only the reference parser checks, see
            :func:`reference_would_reject`), nesting deeper than :data:`MSGSPEC_MAX_NESTING`,
            an unexpected top level, or a field of an unexpected type.
    """
    if shapes is None:
        shapes = may_hold_shapes(data)
    with _BoundedRecursion():
        return _decode_document(data, progress, span_out, shapes)


def _decode_document(
    data: Any, progress: Callable[[str], None] | None, span_out: list | None, shapes: bool
) -> tuple[dict[str, Any], list[Event]]:
    """The body of :func:`decode_document` (under bounded recursion)."""
    if reference_would_reject(data):
        raise Fallback
    try:
        top = _TOP_DECODER.decode(data)
    except _DECODE_ERRORS:
        raise Fallback from None
    raw_events = top.pop("traceEvents", None)
    if raw_events is None:
        raise Fallback
    if span_out is not None:
        span_out.append(_span(raw_events, data))
    try:
        doc = {k: _ANY_DECODER.decode(v) for k, v in top.items()}
    except _DECODE_ERRORS:
        raise Fallback from None
    if progress:
        progress("decoding events")
    try:
        events = (_SHAPED_EVENTS_DECODER if shapes else _EVENTS_DECODER).decode(raw_events)
    except _DECODE_ERRORS:
        raise Fallback from None
    del raw_events
    if shapes:
        _detach_shapes(events)
    return doc, events


#: The :class:`Args` fields of the recorded op inputs (:data:`tracedoc.load.shapes.SHAPE_ARGS`).
_SHAPE_FIELDS = tuple(c for c, _ in SHAPE_ARGS)


def _detach_shapes(events: list[ShapedEvent]) -> None:
    """Replace every non-empty recorded-input ``Raw`` of ``events`` by a ``bytes`` copy (one
    object per distinct value), so that no decoded event refers to the input buffer: the caller
    may then release it. C-level maps only; on a trace without recorded inputs, one pass over
    the events' args per field finds nothing to do."""
    args = list(filter(None, map(attrgetter("args"), events)))
    for field in _SHAPE_FIELDS:
        raws = list(map(attrgetter(field), args))
        if not any(raws):  # an empty Raw (absent) is false
            continue
        distinct = _Memo(lambda b: b)  # equal values share one bytes object
        copies = map(distinct.__getitem__, map(bytes, filter(None, raws)))
        deque(map(setattr, compress(args, raws), repeat(field), copies), maxlen=0)  # run, keep nothing
        del raws


def _floats(values: list) -> np.ndarray:
    """float64 array of decoded ``float | str`` values; strings as the reference's ``_num``."""
    try:
        return np.fromiter(values, dtype=np.float64, count=len(values))
    except (TypeError, ValueError):
        return np.array([_num(v) for v in values], dtype=np.float64)


def _ints_or(values: list, default: Any) -> np.ndarray:
    """int64 array of decoded ``int | str | None`` values, as the reference's ``_int``:
    ``None`` and unparseable strings take ``default`` (a scalar or a per-row array)."""
    n = len(values)
    try:
        return np.fromiter(values, dtype=np.int64, count=n)  # all plain ints: the common case
    except (TypeError, ValueError, OverflowError):
        pass
    conv = [_int(v, None) for v in values]
    missing = np.fromiter((c is None for c in conv), dtype=bool, count=n)
    out = np.fromiter((0 if c is None else c for c in conv), dtype=np.int64, count=n)
    out[missing] = default[missing] if isinstance(default, np.ndarray) else default
    return out


class _Memo(dict):
    """``memo[x]`` is ``func(x)``, computed once per distinct ``x`` (dict ``__missing__``)."""

    def __init__(self, func: Callable[[Any], Any]) -> None:
        super().__init__()
        self.func = func

    def __missing__(self, key: Any) -> Any:
        value = self[key] = self.func(key)
        return value


def _id_str(v: Any) -> str:
    """``str`` of a pid or tid as the reference loader sees it: orjson reads an integer
    outside ``[-2**63, 2**64 - 1]`` as a float, msgspec as an int."""
    if type(v) is int and not -(1 << 63) <= v <= (1 << 64) - 1:
        return str(float(v))
    return str(v)


def _obj(values: list) -> np.ndarray:
    a = np.empty(len(values), dtype=object)
    a[:] = values
    return a


_KIND_CODE = {KIND_OP: 0, KIND_RUNTIME: 1, KIND_KERNEL: 2, KIND_MEMCPY: 3, KIND_MEMSET: 4, KIND_SYNC: 5}
_MEMORY_CODE = 6
_GPU_FRAMES = {KIND_KERNEL: "kernels", KIND_MEMCPY: "memcpys", KIND_MEMSET: "memsets", KIND_SYNC: "syncs"}
assert KIND_IGNORED not in _KIND_CODE and KIND_GPU_ANNOTATION not in _KIND_CODE


def _get(field: str, items: list) -> list:
    """``[x.<field> for x in items]`` at C speed."""
    return list(map(attrgetter(field), items))


def _floats_of(field: str, items: list) -> np.ndarray:
    return _floats(_get(field, items))


def _mapped(memo: _Memo, values: list) -> list:
    return list(map(memo.__getitem__, values))


def shape_column(column: str, values: list) -> tuple[np.ndarray, int]:
    """The ops frame's recorded-input ``column`` from the kept ops' values of that arg (JSON
    bytes as :func:`_detach_shapes` left them; empty where absent): an object array of text or
    None, and how many values were dropped as invalid. Each distinct value is read by orjson, as
    the reference loader reads it, and checked once (:func:`tracedoc.load.shapes.shape_text`).

    Raises:
        Fallback: a value orjson rejects (the reference loader words the error).
    """
    m = len(values)
    out = np.empty(m, dtype=object)  # all None
    present = np.fromiter(map(bool, values), dtype=bool, count=m)
    if not present.any():  # a trace recorded without shapes: nothing to read
        return out, 0
    invalid: set[bytes] = set()

    def text_of(raw: bytes) -> str | None:
        try:
            value = orjson.loads(raw)
        except orjson.JSONDecodeError:
            raise Fallback from None
        text = shape_text(column, value)
        if text is None and value is not None:  # null reads as absent, not as dropped
            invalid.add(raw)
        return text

    kept = list(compress(values, present.tolist()))
    out[present] = _mapped(_Memo(text_of), kept)
    return out, (sum(map(invalid.__contains__, kept)) if invalid else 0)


def collect_columns(events: list[Event], progress: Callable[[str], None] | None = None) -> ArrayColumns:
    """Sort decoded events into frame columns, column by column.

    Every per-event step is a C-level ``map`` (``attrgetter``, dict lookups) or numpy;
    Python code runs once per distinct category, name, pid or tid.

    Raises:
        Fallback: a kept event lacks ``ts`` or ``name`` (the reference loader words the error),
            or the trace has ``ph: "B"``/``"E"`` duration events (the reference loader pairs them).
    """
    out = ArrayColumns()
    out.n_events = n = len(events)
    if progress:
        progress(f"building columns ({n:,} events)")
    kind_of_cat = _Memo(lambda c: _KIND_CODE.get(normalize_category(c)[1], -1))
    canon_of_cat = _Memo(lambda c: normalize_category(c)[0])
    # one code per event: the frame kind (0-5) of a complete event, 6 for [memory], -1 skipped
    ph = _obj(_get("ph", events))
    if ((ph == "B") | (ph == "E")).any():  # duration events to pair: the reference loader does it
        raise Fallback
    codes = np.fromiter(map(kind_of_cat.__getitem__, _get("cat", events)), dtype=np.int8, count=n)
    codes[ph != "X"] = -1
    inst = np.flatnonzero((ph == "i") | (ph == "I"))
    del ph
    if inst.size:
        inst_names = _obj(_get("name", [events[i] for i in inst.tolist()]))
        codes[inst[inst_names == "[memory]"]] = _MEMORY_CODE
        for i in inst[inst_names == WINDOW_END_NAME].tolist():
            out.window_end = window_end_of(out.window_end, getattr(events[i], "ts", None))
    mins, maxs = [], []
    shaped = bool(events) and type(events[0]) is ShapedEvent
    empty_args = _EMPTY_SHAPED_ARGS if shaped else _EMPTY_ARGS
    for kind, code in _KIND_CODE.items():
        sel = [events[i] for i in np.flatnonzero(codes == code).tolist()]
        m = len(sel)
        names = _get("name", sel)
        if None in names:
            raise Fallback
        ts = _floats_of("ts", sel)
        if np.isnan(ts).any():
            raise Fallback
        dur = _floats_of("dur", sel)
        if m:
            mins.append(ts.min())
            maxs.append((ts + dur).max())
        zeros = np.zeros(m)
        name_arr = _obj(names)
        args = [e.args or empty_args for e in sel]
        if kind in (KIND_OP, KIND_RUNTIME):
            cats = _obj(_mapped(canon_of_cat, _get("cat", sel)))
            as_str = _Memo(_id_str)
            pid = _obj(_mapped(as_str, _get("pid", sel)))
            tid = _obj(_mapped(as_str, _get("tid", sel)))
        if kind == KIND_OP:
            out.cols["ops"] = {
                "name": name_arr,
                "cat": cats,
                "pid": pid,
                "tid": tid,
                "ts_us": ts,
                "dur_us": dur,
                "end_us": zeros,
                "external_id": _floats_of("external_id", args),
            }
            for col, _key in SHAPE_ARGS:
                if not shaped:  # decoded without them: no such key in the trace; a view, no memory
                    out.cols["ops"][col] = np.broadcast_to(_NONE, (m,))
                    continue
                out.cols["ops"][col], bad = shape_column(col, _get(col, args))
                out.shape_args_dropped += bad
            step_no = np.fromiter(map(_Memo(step_number).__getitem__, names), dtype=np.int64, count=m)
            is_step = (step_no >= 0) & ((cats == "cpu_op") | (cats == "user_annotation"))
            out.cols["steps"] = {
                "step": step_no[is_step],
                "name": name_arr[is_step],
                "ts_us": ts[is_step],
                "dur_us": dur[is_step],
                "end_us": np.zeros(int(is_step.sum())),
            }
        elif kind == KIND_RUNTIME:
            klass = _Memo(classify_runtime)
            out.cols["runtime"] = {
                "name": name_arr,
                "cat": cats,
                "kind": _obj(_mapped(klass, names)),
                "pid": pid,
                "tid": tid,
                "ts_us": ts,
                "dur_us": dur,
                "end_us": zeros,
                "correlation": _floats_of("correlation", args),
            }
            out.hip_runtime = any(x.startswith("hip") for x in klass)
        else:
            pid_dev = np.fromiter(
                map(_Memo(lambda p: _int(p, -1)).__getitem__, _get("pid", sel)), dtype=np.int64, count=m
            )
            tid_stream = np.fromiter(
                map(_Memo(_stream_from_tid).__getitem__, _get("tid", sel)), dtype=np.int64, count=m
            )
            g = {
                "name": name_arr,
                "device": _ints_or(_get("device", args), pid_dev),
                "stream": _ints_or(_get("stream", args), tid_stream),
                "ts_us": ts,
                "dur_us": dur,
                "end_us": zeros,
                "correlation": _floats_of("correlation", args),
            }
            if kind == KIND_KERNEL:
                g["occupancy_pct"] = _floats_of("occupancy_pct", args)
            elif kind == KIND_MEMCPY:
                parts = _mapped(_Memo(parse_memcpy_name), names)
                g["copy_kind"] = _obj([p[0] for p in parts])
                g["src_memory"] = _obj([p[1] for p in parts])
                g["dst_memory"] = _obj([p[2] for p in parts])
                g["bytes"] = _floats_of("bytes", args)
            elif kind == KIND_MEMSET:
                g["bytes"] = _floats_of("bytes", args)
            elif kind == KIND_SYNC:
                g["wait_event_corr"] = _floats_of("wait_event_corr", args)
            out.cols[_GPU_FRAMES[kind]] = g
        del sel

    mem = [events[i] for i in np.flatnonzero(codes == _MEMORY_CODE).tolist()]
    margs = [e.args or _EMPTY_ARGS for e in mem]
    mts = _floats_of("ts", mem)
    if np.isnan(mts).any():
        raise Fallback
    if mts.size:
        mins.append(mts.min())
    out.cols["memory"] = {
        "ts_us": mts,
        "device_type": _ints_or(_get("device_type", margs), -1),
        "device_id": _ints_or(_get("device_id", margs), -1),
        "bytes": _floats_of("mem_bytes", margs),
        "total_allocated_bytes": _floats_of("total_allocated", margs),
        "total_reserved_bytes": _floats_of("total_reserved", margs),
    }
    if mins:
        out.min_ts = float(min(mins))
    if maxs:
        out.max_end = float(max(maxs))
    return out


# ---- parallel decoding: split the events array, one forked worker per part ----------------

#: Below this many bytes of JSON, splitting costs more than it saves.
PARALLEL_MIN_BYTES = 48 << 20
_BOUNDARY = re.compile(rb"\}\s*,\s*\{")
_PREFIX = b'{"traceEvents":['
_SUFFIX = b"]}"


def parallel_parts(data: Any, workers: int | None = None) -> int:
    """How many parts to decode ``data`` in: 1 unless it is large, the platform can
    ``fork`` (Linux), and there is more than one CPU."""
    if workers is None:
        workers = hostfacts.cpu_cores()
    if workers < 2 or len(data) < PARALLEL_MIN_BYTES or not sys.platform.startswith("linux"):
        return 1
    return int(min(workers, max(1, len(data) // (PARALLEL_MIN_BYTES // 2))))


def split_points(data: Any, parts: int) -> list[tuple[int, int]] | None:
    """Cut the ``traceEvents`` array into ``parts`` runs of whole events.

    Returns ``[(end_of_last_event_before_cut, start_of_first_event_after_cut), ...]``
    or None when no cut can be placed. A cut is placed at the first ``}``, ``,``, ``{``
    sequence after each target offset. It is only a candidate: :func:`check_part_span`
    proves it (or the caller decodes the whole buffer in one piece instead).
    """
    key = data.find(b'"traceEvents"')
    if key < 0:
        return None
    lo = key + len(_PREFIX)
    cuts = []
    n = len(data)
    for i in range(1, parts):
        m = _BOUNDARY.search(data, max(lo, n * i // parts))
        if m is None:
            return None
        a_end, b_start = m.start() + 1, m.end() - 1
        if b_start - len(_PREFIX) < 0 or (cuts and a_end <= cuts[-1][1]):
            return None
        cuts.append((a_end, b_start))
        lo = b_start
    return cuts


def check_part_span(span: tuple[int, int], length: int, first: bool, last: bool) -> None:
    """Prove that a part's cuts are event boundaries of the top-level ``traceEvents`` array.

    A part is ``{"traceEvents":[`` (unless first) + the original bytes between two cuts +
    ``]}`` (unless last), ``length`` bytes in all, and it decoded as valid JSON. ``span`` is
    where the decoded top-level ``traceEvents`` array lies in the part.

    Why this is a proof: appending ``]}`` closes exactly two levels, so a part that ends at
    a cut decodes only if the cut is outside any string, at depth two: between elements of
    an array that is the value of a top-level key. That array ends at the part's last
    ``]`` (``span[1] == length - 1``) only if it is the one the part's ``traceEvents``
    ends up as. A part that starts at a cut begins with our own ``[``, and its
    ``traceEvents`` starting there (``span[0]``) shows that no later ``traceEvents`` key
    replaced it (JSON duplicate keys: the last one wins, in both loaders). By induction from
    the first part, every cut lies between two events of the one ``traceEvents`` array the
    reference loader reads -- never in a later top-level array of objects, never in a
    nested value or a string.

    Raises:
        Fallback: the span does not prove the cuts.
    """
    if not first and span[0] != len(_PREFIX) - 1:
        raise Fallback
    if not last and span[1] != length - 1:
        raise Fallback


def _decode_part(
    holder: list, lo: int, hi: int, first: bool, last: bool, shapes: bool | None = None
) -> tuple[dict, ArrayColumns]:
    """In a forked child: decode ``holder[0][lo:hi]`` as one document, editing the bytes
    around it in place (the child's copy-on-write view; the parent never sees it), then
    drop this process's view of the buffer before building columns."""
    data = holder[0]
    start = lo
    if not first:
        start = lo - len(_PREFIX)
        data[start:lo] = _PREFIX
    end = hi
    if not last:
        data[hi : hi + len(_SUFFIX)] = _SUFFIX
        end = hi + len(_SUFFIX)
    view = memoryview(data)[start:end]
    span: list = []
    doc, events = decode_document(view, span_out=span, shapes=shapes)
    check_part_span(span[0], len(view), first, last)
    view.release()
    holder[0] = None  # drops this process's reference to the buffer
    del data, view
    return doc, _pack(collect_columns(events))


def _pack(cols: ArrayColumns) -> ArrayColumns:
    """Compact a part's columns before they are pickled or held until the merge:

    * each object (string) column becomes ``(codes, distinct values)`` (:class:`_Packed`): a
      trace repeats a few thousand names over millions of events, and pickling codes is far
      cheaper than pickling every string. The codes are the narrowest of int8, int16 and int32
      that holds the part's distinct count (:func:`_narrowest_codes`): a part's columns mostly
      have under 128 distinct values, and int32 codes were 9.8 of the 33 MiB of parts held at
      the end of the 301 MB tiled trace's decode (issue 24);
    * an ``end_us`` column of zeros (the loaders leave it to the frame stage) becomes its length
      (:class:`_Zeros`): a worker's part arrived with every zero written.

    :func:`_unpack` restores both."""
    for frame in cols.cols.values():
        for name, values in frame.items():
            if name == "end_us" and isinstance(values, np.ndarray) and values.dtype == np.float64:
                if not values.any():
                    frame[name] = _Zeros(len(values))
                continue
            if isinstance(values, np.ndarray) and values.dtype == object:
                if values.strides == (0,) and len(values) and values[0] is None:  # an all-None view
                    frame[name] = _Packed(np.zeros(len(values), dtype=np.int8), [None])
                    continue
                index: dict = {}
                codes = np.fromiter(
                    map(lambda v: index.setdefault(v, len(index)), values.tolist()), dtype=np.int32, count=len(values)
                )
                frame[name] = _Packed(_narrowest_codes(codes, len(index)), list(index))
    return cols


def _narrowest_codes(codes: np.ndarray, distinct: int) -> np.ndarray:
    """``codes`` (int32, values in ``0..distinct-1``) as int8 when ``distinct`` <= 128, int16
    when <= 32,768, else as they are."""
    if distinct <= 1 << 7:
        return codes.astype(np.int8)
    if distinct <= 1 << 15:
        return codes.astype(np.int16)
    return codes


class _Packed:
    __slots__ = ("codes", "values")

    def __init__(self, codes: np.ndarray, values: list) -> None:
        self.codes, self.values = codes, values


class _Zeros:
    """A column of ``n`` zeros, by its length alone (:func:`_pack`)."""

    __slots__ = ("n",)

    def __init__(self, n: int) -> None:
        self.n = n

    def __len__(self) -> int:
        return self.n


def _unpack(cols: ArrayColumns) -> ArrayColumns:
    """Inverse of :func:`_pack`."""
    for frame in cols.cols.values():
        for name, values in frame.items():
            if isinstance(values, _Packed):
                distinct = np.empty(len(values.values), dtype=object)
                distinct[:] = values.values
                frame[name] = distinct[values.codes]
            elif isinstance(values, _Zeros):
                frame[name] = np.zeros(values.n)
    return cols


def _merge_totals(out, cols) -> None:
    """Set ``out``'s whole-trace figures from its parts' (``cols``, in order): the first start,
    the last end, whether any part saw HIP runtime calls, the latest ``Record Window End``, and
    the event and dropped-shape counts."""
    out.min_ts = min(c.min_ts for c in cols)
    out.max_end = max(c.max_end for c in cols)
    out.hip_runtime = any(c.hip_runtime for c in cols)
    ends = [c.window_end for c in cols if c.window_end is not None]
    out.window_end = max(ends) if ends else None
    out.n_events = sum(c.n_events for c in cols)
    out.shape_args_dropped = sum(c.shape_args_dropped for c in cols)


def _split_parts(parts: list[tuple[dict, ArrayColumns]]) -> tuple[dict, list[ArrayColumns]]:
    """The parts' top-level keys merged in order (a later part's value wins), and their columns."""
    doc: dict = {}
    for d, _ in parts:
        doc.update(d)
    return doc, [c for _, c in parts]


def _merge(parts: list[tuple[dict, ArrayColumns]]) -> tuple[dict, ArrayColumns]:
    doc, cols = _split_parts(parts)
    out = ArrayColumns()
    for kind, spec in all_frame_columns().items():
        out.cols[kind] = {name: np.concatenate([c.cols[kind][name] for c in cols]) for name, _ in spec}
    _merge_totals(out, cols)
    return doc, out


def parse_parallel(holder: list, parts: int, after_fork: Callable[[], None] | None = None) -> tuple[dict, ArrayColumns]:
    """Decode the buffer ``holder[0]`` in ``parts`` pieces: parts 1.. in forked children
    (which see the buffer copy-on-write, so nothing is copied to them), part 0 here;
    results come back pickled through pipes and are concatenated in event order.

    ``after_fork`` runs in this process once the children are started, before it decodes
    its own part (the loader imports pandas there, overlapping the children's work).

    Once this process has decoded its part it drops the buffer (``holder[0] = None``),
    so the JSON bytes and the columns of the whole trace are never held at once.

    Every cut is proven to lie between two events of the top-level ``traceEvents`` array
    (:func:`check_part_span`); otherwise nothing of the parts is used.

    Raises:
        Fallback: no valid cut, a cut not proven, or any part failed to decode as the typed
            fast path.
            ``holder[0]`` is then either the buffer exactly as it was or None (it was
            already released: read the file again).
    """
    data = holder[0]
    cuts = split_points(data, parts)
    if not cuts:
        raise Fallback
    bounds = []
    lo = 0
    for a_end, b_start in cuts:
        bounds.append((lo, a_end))
        lo = b_start
    bounds.append((lo, len(data)))
    shapes = may_hold_shapes(data)  # once, on the whole buffer: the parts are memoryviews
    children = []
    try:
        for i in range(1, len(bounds)):
            r, w = os.pipe()
            pid = os.fork()
            if pid == 0:  # child: decode one part, send it back, exit without cleanup
                code = 0
                try:
                    os.close(r)
                    try:
                        del data
                        last = i == len(bounds) - 1
                        result: Any = _decode_part(holder, *bounds[i], first=False, last=last, shapes=shapes)
                    except Fallback:
                        result = None
                    payload = pickle.dumps(result, protocol=pickle.HIGHEST_PROTOCOL)
                    with os.fdopen(w, "wb") as fh:
                        fh.write(payload)
                except BaseException:
                    code = 1
                finally:
                    os._exit(code)
            os.close(w)
            children.append((pid, r))
        if after_fork is not None:
            after_fork()
        cut = bounds[0][1]
        saved = bytes(data[cut : cut + len(_SUFFIX)])
        data[cut : cut + len(_SUFFIX)] = _SUFFIX
        view = memoryview(data)[: cut + len(_SUFFIX)]
        try:
            span0: list = []
            doc0, events0 = decode_document(view, span_out=span0, shapes=shapes)
            check_part_span(span0[0], len(view), first=True, last=False)
        except Fallback:
            # the exception's traceback may still hold slices of the buffer: leave the view
            # to be freed with it, and put the bytes back (same length: allowed while exported)
            data[cut : cut + len(_SUFFIX)] = saved
            raise
        view.release()
        # the events no longer refer to the bytes, and the children have their own view:
        # release the buffer here before building columns
        holder[0] = None
        del data, view
        results = [(doc0, collect_columns(events0))]
        del events0
        failed = False
        for pid, r in children:
            with os.fdopen(r, "rb") as fh:
                payload = fh.read()
            _, status = os.waitpid(pid, 0)
            if status != 0 or not payload:
                failed = True
                continue
            res = pickle.loads(payload)
            if res is not None:
                res = (res[0], _unpack(res[1]))
            if res is None:
                failed = True
            else:
                results.append(res)
        children = []
        if failed:
            raise Fallback
    finally:
        for pid, r in children:  # only on an error in this process: reap what was started
            try:
                os.close(r)
            except OSError:
                pass
            try:
                os.kill(pid, 9)
                os.waitpid(pid, 0)
            except OSError:
                pass
    return _merge(results)


# ---- streaming: a regular file decoded part by part, never held whole -------------------------

#: JSON bytes per part when a file is decoded as a stream (:func:`load_stream`). Memory while
#: loading is about two parts' decoded events (this process's and its worker's) and one part's
#: bytes each, whatever the size of the trace, plus the compact columns of the parts done.
STREAM_PART_BYTES = 4 << 20
_HEAD = struct.Struct("<QBB")
_LEN = struct.Struct("<Q")


def stream_parts(blocks: Iterable[bytes | bytearray], part_bytes: int | None = None):
    """Cut a trace's bytes, arriving in ``blocks``, into parts of about ``part_bytes`` (default
    :data:`STREAM_PART_BYTES`) at candidate event boundaries of the ``traceEvents`` array (the
    first after each part's target size, as :func:`split_points` places them); yields ``(document, first, last)``, each ``document`` a
    part made a JSON document of its own (``{"traceEvents":[`` before it unless first, ``]}``
    after it unless last: the form :func:`check_part_span` proves). Holds at most one part and
    the bytes read past it. A trace with no boundary (or no ``"traceEvents"`` key) is one part."""
    target = part_bytes or STREAM_PART_BYTES
    buf = bytearray()
    it = iter(blocks)
    first, eof, key_end = True, False, -1
    want = target
    while True:
        while not eof and len(buf) <= want:
            block = next(it, None)
            if block is None:
                eof = True
            else:
                buf += block
            del block
        if eof:
            if not first:
                buf[0:0] = _PREFIX
            yield buf, first, True
            return
        if key_end < 0:
            k = buf.find(b'"traceEvents"')
            if k < 0:
                want = len(buf) + target
                continue
            key_end = k + len(_PREFIX)
        m = _BOUNDARY.search(buf, max(key_end if first else 1, target))
        if m is None:  # no boundary yet past the target: read on
            want = len(buf) + target
            continue
        a_end, b_start = m.start() + 1, m.end() - 1
        del m
        part = bytearray() if first else bytearray(_PREFIX)
        part += memoryview(buf)[:a_end]
        part += _SUFFIX
        del buf[:b_start]  # O(1): a bytearray drops its head in place
        yield part, first, False
        del part
        first, want = False, target


def decode_part(part: Any, first: bool, last: bool) -> tuple[dict, ArrayColumns]:
    """One part of :func:`stream_parts`: decoded, its cuts proven (:func:`check_part_span`), and
    turned into compact columns (:func:`_pack`: string columns as int32 codes and their distinct
    values), so that no decoded event outlives its part.

    Raises:
        Fallback: the part is not what the typed path takes, or its cuts are not proven.
    """
    span: list = []
    doc, events = decode_document(part, span_out=span)
    check_part_span(span[0], len(part), first, last)
    return doc, _pack(collect_columns(events))


def _send_all(fd: int, data: Any) -> None:
    with memoryview(data) as mv:
        while len(mv):
            n = os.write(fd, mv)
            mv = mv[n:]


def _recv_exact(fd: int, n: int) -> bytearray | None:
    buf = bytearray(n)
    with memoryview(buf) as mv:
        got = 0
        while got < n:
            k = os.readv(fd, [mv[got:]])
            if not k:
                return None
            got += k
    return buf


#: The worker's program: it imports the decoder alone (numpy, msgspec, this module), from the
#: same tree as this process, and serves parts on the two descriptors it is given.
_WORKER_MAIN = (
    "import sys; sys.path.insert(0, sys.argv[1]); from tracedoc.load.fast import _Worker; "
    "_Worker._serve(int(sys.argv[2]), int(sys.argv[3]))"
)


class _Worker:
    """A worker process that decodes the parts it is sent (:func:`decode_part`) and sends back
    their compact columns, pickled; one part at a time.

    It is a fresh interpreter (``sys.executable``), not a fork: a fork of this process maps
    every page the parent had at that point (pandas, the CLI, the blocks read so far: 144 MiB
    when ``tracedoc analyze`` reaches its first part), and each page a forked child touches
    is counted again in the process tree's memory or copied. The fresh one holds about 36 MiB
    of imports beside the part it decodes; its start (about 0.1 s) overlaps this process
    decoding the next part. Measured on the 301 MB tiled trace (issue 24): the process tree's
    RSS while loading peaked at 327 MiB with a forked worker (214 + 113), at 260 MiB with this
    one (212 + 48), the load time unchanged within the runs' noise.

    Raises:
        OSError: the interpreter could not be started.
    """

    def __init__(self) -> None:
        import subprocess

        to_r, self.to_w = os.pipe()
        self.from_r, from_w = os.pipe()
        root = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
        try:
            self.proc = subprocess.Popen(
                [sys.executable, "-c", _WORKER_MAIN, root, str(to_r), str(from_w)],
                pass_fds=(to_r, from_w),
                stdin=subprocess.DEVNULL,
                stdout=subprocess.DEVNULL,
            )
        except BaseException:
            for fd in (self.to_w, self.from_r):
                os.close(fd)
            raise
        finally:
            os.close(to_r)
            os.close(from_w)
        self.pid = self.proc.pid
        self.busy = False

    @staticmethod
    def _serve(rfd: int, wfd: int) -> None:
        trim = GrowthTrim()
        while True:
            head = _recv_exact(rfd, _HEAD.size)
            if head is None:
                return
            n, first, last = _HEAD.unpack(head)
            if n == 0:
                return
            part = _recv_exact(rfd, n)
            if part is None:
                return
            try:
                result: Any = decode_part(part, bool(first), bool(last))
            except Fallback:
                result = None
            del part
            payload = pickle.dumps(result, protocol=pickle.HIGHEST_PROTOCOL)
            del result
            _send_all(wfd, _LEN.pack(len(payload)))
            _send_all(wfd, payload)
            del payload
            trim()

    def send(self, part: Any, first: bool, last: bool) -> None:
        _send_all(self.to_w, _HEAD.pack(len(part), first, last))
        _send_all(self.to_w, part)
        self.busy = True

    def receive(self) -> tuple[dict, ArrayColumns]:
        """The result of the part sent last.

        Raises:
            Fallback: the worker could not take it (or died).
        """
        self.busy = False
        head = _recv_exact(self.from_r, _LEN.size)
        if head is None:
            raise Fallback
        payload = _recv_exact(self.from_r, _LEN.unpack(head)[0])
        if payload is None:
            raise Fallback
        result = pickle.loads(payload)
        if result is None:
            raise Fallback
        return result

    def close(self, kill: bool = False) -> None:
        try:
            if kill:
                self.proc.kill()
            else:
                _send_all(self.to_w, _HEAD.pack(0, 0, 0))
        except OSError:
            pass
        for fd in (self.to_w, self.from_r):
            try:
                os.close(fd)
            except OSError:
                pass
        self.proc.wait()


def load_stream(
    blocks: Iterable[bytes | bytearray],
    workers: int | None = None,
    after_fork: Callable[[], None] | None = None,
    progress: Callable[[str], None] | None = None,
    part_bytes: int | None = None,
) -> tuple[dict, ArrayColumns]:
    """Decode a trace arriving in ``blocks`` part by part (:func:`stream_parts`,
    :func:`decode_part`): neither the whole JSON nor all decoded events are ever held, only the
    compact columns of the parts done. With ``workers`` >= 2 (default: the CPUs; Linux), a
    trace of more than one part is decoded by this process and one worker process in turn
    (:class:`_Worker`, started once; parts reach it through a pipe; where it cannot start, this
    process decodes every part). ``after_fork`` runs once, after the worker is started or when
    it is known that there is none.

    Raises:
        Fallback: a part the typed path cannot take, or a cut not proven: decode the whole
            buffer instead (the bytes were read; read them again).
    """
    if workers is None:
        workers = hostfacts.cpu_cores()
    parallel = workers >= 2 and sys.platform.startswith("linux")  # the worker is spawned, not forked
    worker: _Worker | None = None
    trim = GrowthTrim()
    results: list = []
    pending = -1
    done = 0
    ok = False
    try:
        for i, (part, first, last) in enumerate(stream_parts(blocks, part_bytes)):
            done += len(part)
            if progress:
                progress(f"decoding {done / 1e6:,.0f} MB of JSON into columns")
            if worker is None and parallel and not last:
                try:
                    worker = _Worker()
                except OSError:
                    parallel = False
                if after_fork is not None:
                    after_fork()
                    after_fork = None
            if worker is not None and not worker.busy:
                worker.send(part, first, last)
                del part
                pending = i
                results.append(None)
                continue
            results.append(decode_part(part, first, last))
            del part
            trim()
            if worker is not None and worker.busy:
                results[pending] = worker.receive()
        if worker is not None and worker.busy:
            results[pending] = worker.receive()
        ok = True
    finally:
        if worker is not None:
            worker.close(kill=not ok)
    if after_fork is not None:
        after_fork()
    return _merge_packed(results)


def _merge_packed(parts: list[tuple[dict, ArrayColumns]]) -> tuple[dict, ArrayColumns]:
    """Concatenate the parts' compact columns in event order (as :func:`_merge`): string
    columns through one dictionary of their distinct values (each value one object), a
    recorded-input column absent from every part as an all-None view (no memory), ``end_us``
    as zeros (the frame stage computes it)."""
    doc, cols = _split_parts(parts)
    out = ArrayColumns()
    trim = GrowthTrim()
    for kind, spec in all_frame_columns().items():
        frame: dict[str, Any] = {}
        for name, _ in spec:
            pieces = [c.cols[kind][name] for c in cols]
            if name == "end_us":
                frame[name] = np.zeros(sum(map(len, pieces)))
            elif pieces and isinstance(pieces[0], _Packed):
                frame[name] = _join_packed(pieces)
            else:
                frame[name] = np.concatenate(pieces)
            for c in cols:  # free each part's column as soon as it is joined
                c.cols[kind][name] = None
            del pieces
            trim()  # the parts' pieces lie in the heap, the joined columns outside it
        out.cols[kind] = frame
    _merge_totals(out, cols)
    return doc, out


def _join_packed(pieces: list) -> np.ndarray:
    """One object column from the parts' ``_Packed`` pieces."""
    total = sum(len(p.codes) for p in pieces)
    if all(p.values == [None] for p in pieces):
        return np.broadcast_to(_NONE, (total,))
    index: dict = {}
    codes = np.empty(total, dtype=np.int32)
    at = 0
    for p in pieces:
        remap = np.fromiter((index.setdefault(v, len(index)) for v in p.values), dtype=np.int32, count=len(p.values))
        n = len(p.codes)
        if n:
            codes[at : at + n] = remap[p.codes]
        at += n
    distinct = np.empty(len(index), dtype=object)
    distinct[:] = list(index)
    return distinct[codes]
