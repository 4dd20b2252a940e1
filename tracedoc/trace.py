"""The trace model: a loaded trace as pandas frames with fixed, documented columns.

All times are float64 microseconds relative to the trace start (``Trace.origin_us``
is the absolute Kineto timestamp that was subtracted). ``end_us = ts_us + dur_us``.

Frames (one row per event; empty frames keep their columns):

``ops`` -- CPU ops and CPU-side annotations (categories ``cpu_op``, ``user_annotation``,
    ``python_function``; the old ``Operator`` maps to ``cpu_op``):
    name, cat, pid, tid (Categorical of str), ts_us, dur_us, end_us (float64),
    external_id (float64, NaN when absent); input_dims, input_types, input_strides,
    concrete_inputs (category: the recorded inputs as compact JSON text, NaN when not
    recorded; see the :class:`Trace` docstring and :mod:`tracedoc.load.shapes`).
``runtime`` -- CUDA/HIP runtime and driver calls: name, cat, kind (launch | memcpy |
    memset | sync | other), pid, tid (Categorical of str), ts_us, dur_us, end_us,
    correlation (float64, NaN when absent).

The ``name`` columns of ``ops``, ``runtime`` and ``kernels`` and the ``cat``, ``kind``,
``pid`` and ``tid`` columns are dictionary-encoded (a ``Categorical`` whose categories are
the distinct strings present, sorted, and whose codes take one byte below 128 of them, two
below 32,768: :func:`text_categorical`): a trace repeats a few thousand names and a few
threads over millions of events, and an ``object`` column held an 8-byte pointer per row
(issue 24: about 26 MiB on 1 M small events). ``==``, ``isin``, ``.str`` and groupbys read
them as strings do; :func:`tracedoc.signals.strings.thread_labels` builds ``"pid/tid"`` keys
and :func:`tracedoc.signals.strings.text_rows` takes rows of one for a derived frame.
``kernels`` -- GPU kernels: name (Categorical of str), device, stream (int32, int64 when an id does
    not fit: :func:`id_array`; as in every frame's device, stream and device_type columns), ts_us, dur_us, end_us,
    correlation, occupancy_pct (float64, NaN when the trace does not record them).
``memcpys`` -- GPU memory copies: name, copy_kind (HtoD, DtoH, DtoD, ...), src_memory
    (Pageable, Pinned, Device, Host, unknown), dst_memory, device, stream, ts_us,
    dur_us, end_us, bytes (float64, NaN when absent), correlation.
``memsets`` -- GPU memsets: name, device, stream, ts_us, dur_us, end_us, bytes, correlation.
``syncs`` -- ``cuda_sync`` events: name, device, stream, ts_us, dur_us, end_us, correlation,
wait_event_corr.
``memory`` -- ``[memory]`` instant events: ts_us, device_type (int; 0 CPU, 1 CUDA),
    device_id (int), bytes (allocation delta, float64), total_allocated_bytes,
    total_reserved_bytes (float64, NaN in traces that predate those fields).
``steps`` -- ``ProfilerStep#N`` CPU annotations, sorted by time: step (int), name,
    ts_us, dur_us, end_us. Empty when the trace has no step annotations.
"""

from __future__ import annotations

import re
from dataclasses import dataclass, field
from typing import Any

import numpy as np
import pandas as pd

from tracedoc.load.shapes import frame_columns
from tracedoc.schema import FRAME_COLUMNS  # noqa: F401  (re-exported)


@dataclass(frozen=True)
class Device:
    """A GPU described by the trace's ``deviceProperties`` (or older ``computeProperties``).

    Attributes:
        id: device index as used by kernels' ``args.device``.
        name: marketing name, e.g. ``"Tesla V100-SXM2-32GB"``.
        total_memory_bytes: ``totalGlobalMem`` in bytes (None when absent).
        compute_capability: ``(major, minor)``; for AMD this is the gfx major/minor.
        num_sms: streaming multiprocessors (compute units on AMD), None when absent.
        vendor: ``"NVIDIA"``, ``"AMD"`` (from the name and the ``hip*`` runtime call names) or
            ``"Meta"`` for MTIA (``mtia_runtime`` calls or MTIA ``[memory]`` events).
    """

    id: int
    name: str
    total_memory_bytes: int | None
    compute_capability: tuple[int, int] | None
    num_sms: int | None
    vendor: str

    @property
    def full_name(self) -> str:
        """The vendor and the name, the vendor said once: ``"NVIDIA Tesla V100-SXM2-32GB"``,
        but ``"AMD Radeon Graphics"`` and ``"NVIDIA H100 80GB HBM3"`` as the trace names
        them (the name already starts with its vendor, whatever the case). For messages."""
        if not self.vendor or re.match(rf"{re.escape(self.vendor)}(?![A-Za-z0-9])", self.name, re.IGNORECASE):
            return self.name
        return f"{self.vendor} {self.name}"

    def to_dict(self) -> dict[str, Any]:
        return {
            "id": self.id,
            "name": self.name,
            "total_memory_bytes": self.total_memory_bytes,
            "compute_capability": list(self.compute_capability) if self.compute_capability else None,
            "num_sms": self.num_sms,
            "vendor": self.vendor,
        }


@dataclass
class Trace:
    """A loaded trace: one pandas DataFrame per kind of event. Build one with :func:`tracedoc.load`.

    Times are float64 **microseconds relative to the trace start** (``origin_us`` is the
    absolute Kineto timestamp that was subtracted); ``end_us = ts_us + dur_us``. Every
    frame exists (empty, with its columns, when the trace has no such events).

    Frames and columns:

    - ``ops`` -- CPU ops and annotations (``cpu_op``, ``user_annotation``,
      ``python_function``): name, cat, pid, tid (``Categorical`` of str, as in the module
      docstring), ts_us, dur_us, end_us (µs),
      external_id (float64, NaN when absent), and the inputs recorded with
      ``record_shapes=True``: input_dims (Kineto's ``Input Dims``), input_types (``Input
      type``), input_strides (``Input Strides``), concrete_inputs (``Concrete Inputs``). Each
      is a pandas ``Categorical`` of the value re-serialised as compact JSON text, the same
      from both loaders (``"[[32,3,224,224],[64,3,7,7],[],[]]"``, ``'["float","","Scalar"]'``);
      :func:`tracedoc.load.shapes.parse_shape_arg` gives the list back. NaN when the event
      has no such arg (a trace recorded without shapes, most annotations) or its value was
      dropped: not a list of the documented form (dims and strides: lists of int64 integers or
      of such lists; types and concrete inputs: strings), or over 4,096 characters of JSON
      (:data:`tracedoc.load.shapes.SHAPE_TEXT_MAX_CHARS`); each dropped value is counted in
      ``dropped_events`` under :data:`tracedoc.load.shapes.DROP_SHAPE_ARG` and the op is kept.
      The categories are the distinct texts present, sorted (a filtered frame keeps them all).
    - ``runtime`` -- CUDA/HIP runtime and driver calls: name, cat, kind (launch | memcpy |
      memset | sync | other), pid, tid (``Categorical`` of str), ts_us, dur_us, end_us (µs),
      correlation.
    - ``kernels`` -- GPU kernels: name (``Categorical`` of str), device, stream (int32, or int64
      when an id does not fit it, :func:`id_array`: so are every frame's device, stream,
      device_type and device_id columns), ts_us, dur_us, end_us (µs), correlation,
      occupancy_pct (%; NaN when not recorded). A kernel's other launch figures (``blocks per
      SM``, ``warps per SM``, grid and block shapes, registers) are not kept: no signal reads
      them, and two float64 columns of them were 20 MiB of 4 M small events (issue 24).
    - ``memcpys`` -- GPU copies: name, copy_kind (HtoD, DtoH, DtoD, ...), src_memory,
      dst_memory (Pageable, Pinned, Device, Host, unknown), device, stream, ts_us, dur_us,
      end_us (µs), bytes (float64, NaN when absent), correlation.
    - ``memsets`` -- GPU memsets: name, device, stream, ts_us, dur_us, end_us (µs), bytes,
      correlation.
    - ``syncs`` -- ``cuda_sync`` events: name, device, stream, ts_us, dur_us, end_us (µs),
      correlation, wait_event_corr (``wait_on_cuda_event_record_corr_id``: the correlation id
      of the event-record call a ``Stream Wait Event`` waits for, newer Kineto; NaN without).
    - ``memory`` -- ``[memory]`` instant events: ts_us (µs), device_type (0 CPU, 1 CUDA),
      device_id, bytes (allocation delta), total_allocated_bytes, total_reserved_bytes
      (bytes; NaN in traces that predate them).
    - ``steps`` -- ``ProfilerStep#N`` annotations, by time: step (int), name, ts_us,
      dur_us, end_us (µs). Empty when the trace has none.

    Names (every frame's ``name`` column) longer than
    :data:`tracedoc.load.build.NAME_MAX_CHARS` (16,384 characters) are cut to that head plus
    a marker ``…[name cut: N chars, #hash]`` (:func:`tracedoc.load.build.cap_name`).

    Other attributes: ``path``; ``devices`` (:class:`Device` list); ``origin_us``;
    ``span_us`` (first event start to last event end, µs); ``n_events``; ``metadata``
    (the trace's top-level keys other than ``traceEvents``, e.g. ``distributedInfo``);
    ``record_window_end_us`` (the ``Record Window End`` instant, µs from the start, or None).

    ``repr(trace)`` is one line; in a notebook the trace shows as a table of its frames.
    """

    def __repr__(self) -> str:
        dev = self.primary_device()
        gpu = f", {dev.name}" if dev else ", no GPU described"
        if len(self.devices) > 1:
            gpu += f" ({len(self.devices)} devices)"
        n_steps, n_kernels = len(self.steps), len(self.kernels)
        return (
            f"<Trace {self.path}: {self.n_events:,} event{'' if self.n_events == 1 else 's'}, "
            f"{self.span_us / 1000.0:,.1f} ms, {n_steps} step{'' if n_steps == 1 else 's'}, "
            f"{n_kernels:,} kernel{'' if n_kernels == 1 else 's'}{gpu}>"
        )

    def _frame_rows(self) -> list[tuple[str, int, str]]:
        names = ("ops", "runtime", "kernels", "memcpys", "memsets", "syncs", "memory", "steps")
        return [(n, len(getattr(self, n)), ", ".join(map(str, getattr(self, n).columns))) for n in names]

    def _repr_markdown_(self) -> str:
        rows = "\n".join(f"| `{n}` | {k:,} | {c} |" for n, k, c in self._frame_rows())
        return f"**{repr(self)[1:-1]}**\n\n| frame | rows | columns |\n|---|---|---|\n{rows}\n"

    def _repr_html_(self) -> str:
        import html

        rows = "".join(
            f"<tr><td><code>{n}</code></td><td>{k:,}</td><td>{html.escape(c)}</td></tr>"
            for n, k, c in self._frame_rows()
        )
        return (
            f"<p><b>{html.escape(repr(self)[1:-1])}</b></p><table><thead><tr><th>frame</th><th>rows</th>"
            f"<th>columns</th></tr></thead><tbody>{rows}</tbody></table>"
        )

    path: str
    ops: pd.DataFrame
    runtime: pd.DataFrame
    kernels: pd.DataFrame
    memcpys: pd.DataFrame
    memsets: pd.DataFrame
    syncs: pd.DataFrame
    memory: pd.DataFrame
    steps: pd.DataFrame
    devices: list[Device]
    origin_us: float
    span_us: float
    n_events: int
    metadata: dict[str, Any] = field(default_factory=dict)
    #: Events dropped at load for impossible values: reason -> count (see
    #: :func:`tracedoc.load.build.drop_impossible`: negative durations or sizes, times that are
    #: not finite or beyond the 64-bit nanosecond clock, a duration over 1 s and more than twice
    #: the window of the other events); empty when nothing was dropped. Both loaders count the same.
    dropped_events: dict[str, int] = field(default_factory=dict)
    #: Where the profiler stopped recording: Kineto's ``Record Window End`` instant, µs from the
    #: trace start (the latest one when there are several); None when the trace has none.
    record_window_end_us: float | None = None

    @property
    def has_gpu_activity(self) -> bool:
        """True when the trace holds any kernel, memcpy or memset."""
        return bool(len(self.kernels) or len(self.memcpys) or len(self.memsets))

    @property
    def rank(self) -> int | None:
        """``distributedInfo.rank`` when the trace carries it."""
        info = self.metadata.get("distributedInfo")
        if isinstance(info, dict) and isinstance(info.get("rank"), int):
            return info["rank"]
        return None

    def primary_device(self) -> Device | None:
        """The device that ran the most kernel time (else the only/first described device)."""
        by_id = {d.id: d for d in self.devices}
        if len(self.kernels):
            busiest = int(self.kernels.groupby("device")["dur_us"].sum().idxmax())
            if busiest in by_id:
                return by_id[busiest]
        return self.devices[0] if self.devices else None


def text_categorical(values: Any) -> pd.Categorical:
    """A ``Categorical`` of strings from ``values`` (a sequence of str, None or NaN; None and
    NaN are missing): its categories are the distinct strings present, sorted, as an
    ``object`` index, and its codes the smallest integer type that holds them (int8 below 128
    categories). The one form the recorded-input columns take, whichever loader or cache made them.

    Raises:
        TypeError: a value that is neither a string nor missing.
    """
    arr = values if isinstance(values, np.ndarray) and values.dtype == object else np.asarray(values, dtype=object)
    if arr.ndim != 1:
        arr = arr.reshape(-1)
    if not len(arr) or (arr.strides == (0,) and arr[0] is None):  # the fast loader's all-None view
        return pd.Categorical.from_codes(np.full(len(arr), -1, dtype=np.int8), categories=pd.Index([], dtype=object))
    codes, uniques = pd.factorize(arr, sort=True, use_na_sentinel=True)
    uniques = np.asarray(uniques, dtype=object)
    if not all(isinstance(u, str) for u in uniques.tolist()):
        raise TypeError("a text column holds a value that is not a string")
    return pd.Categorical.from_codes(codes, categories=pd.Index(uniques, dtype=object))


def id_array(values: Any) -> np.ndarray:
    """The integer ids ``values`` (a sequence or array of integers in int64 range: device, stream
    or device-type ids) as int32 when every one fits, else as int64; int32 when empty. The
    frames' ``"int"`` columns (:data:`tracedoc.schema.FRAME_COLUMNS`) take this form, whichever
    loader or cache made them: 4 bytes per GPU event and column instead of 8 (issue 24).

    Raises:
        OverflowError, ValueError, TypeError: a value that is not an integer of int64 range.
    """
    arr = np.asarray(values)
    if arr.dtype.kind not in "iu":
        arr = np.asarray(values, dtype=np.int64)
    if not arr.size or (arr.min() >= np.iinfo(np.int32).min and arr.max() <= np.iinfo(np.int32).max):
        return arr.astype(np.int32, copy=False)
    return arr.astype(np.int64, copy=False)


def _series(values: Any, dtype: str, consume: bool = False) -> pd.Series:
    if dtype == "category":
        return pd.Series(text_categorical(values))
    if dtype == "int":
        ids = id_array(values)
        if ids is not values:  # a new array: the column's own
            return pd.Series(ids, copy=False)
        dtype = ids.dtype.name  # the given array itself: taken as below
    # a consumed numpy array of the column's dtype that owns its memory becomes the column as it
    # is: pandas 3 copies an array it is given by default (issue 24)
    owned = consume and isinstance(values, np.ndarray) and values.flags.owndata and values.flags.writeable
    return pd.Series(values, dtype=object if dtype == "object" else dtype, copy=not owned)


def empty_frame(kind: str) -> pd.DataFrame:
    """An empty frame with the documented columns and dtypes of ``kind``
    (:func:`tracedoc.load.shapes.frame_columns`)."""
    return pd.DataFrame({c: _series([], t) for c, t in frame_columns(kind)})


def frame_from_columns(kind: str, cols: dict[str, list], consume: bool = False) -> pd.DataFrame:
    """Build the ``kind`` frame from column lists or arrays (all of equal length), coercing
    dtypes; ``category`` columns take strings or None (:func:`text_categorical`). With
    ``consume``, each column is removed from ``cols`` once converted, so a caller that holds no
    other reference to it never holds the input and the frame in full at once.

    Raises:
        KeyError: ``cols`` lacks a column of the frame.
    """
    if not cols or not len(next(iter(cols.values()))):
        return empty_frame(kind)
    take = cols.pop if consume else cols.__getitem__
    return pd.DataFrame({c: _series(take(c), t, consume) for c, t in frame_columns(kind)}, copy=False)
