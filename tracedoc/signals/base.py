"""The signal registry: named, documented measurements computed lazily from a Trace.

A signal is a function ``f(ctx: SignalContext) -> value`` registered with a unit.
Values are floats, ints or bools (usable in rule conditions) or lists of dicts
("tables", used as evidence). A signal that cannot be computed on a trace raises
:class:`SignalUnavailable` with the reason; rules that need it are then skipped.
"""

from __future__ import annotations

from dataclasses import dataclass
from functools import cached_property
from typing import Any, Callable

from tracedoc.heap import GrowthTrim
from tracedoc.trace import Trace

UNITS = ("ms", "us", "share", "count", "bytes", "bool", "table", "ratio")
#: What a signal covers: the primary GPU (most kernel time), every GPU, the host (CPU
#: threads), the step windows as a whole (host and primary GPU), or the trace.
SCOPES = ("primary device", "all devices", "host", "steps", "trace")


class SignalUnavailable(Exception):
    """The signal cannot be computed on this trace; ``str(exc)`` says why."""


def _once(
    values: dict[str, Any],
    errors: dict[str, str],
    key: str,
    compute: Callable[[], Any],
    after_build: Callable[[], Any] | None = None,
) -> Any:
    """``values[key]``, built by ``compute()`` the first time (then ``after_build()``); a
    :class:`SignalUnavailable` it raised is kept in ``errors`` as its reason and raised anew,
    a fresh exception, each time after.

    Raises:
        SignalUnavailable: ``compute()`` raised it, now or before.
    """
    if key in values:
        return values[key]
    if key in errors:
        raise SignalUnavailable(errors[key])
    try:
        value = compute()
    except SignalUnavailable as exc:
        errors[key] = str(exc)
        raise
    values[key] = value
    if after_build is not None:
        after_build()
    return value


@dataclass(frozen=True)
class Signal:
    """A registered signal.

    Attributes:
        name: snake_case name with its unit as suffix (``_ms``, ``_share``, ...).
        unit: one of :data:`UNITS`.
        func: computes the value from a :class:`SignalContext`.
        scope: what it covers, one of :data:`SCOPES` (reports name the primary device).
        doc: the function's docstring: formula, events used, unit.
    """

    name: str
    unit: str
    func: Callable[[SignalContext], Any]
    scope: str = "primary device"

    @property
    def doc(self) -> str:
        return (self.func.__doc__ or "").strip()

    @property
    def summary(self) -> str:
        return self.doc.splitlines()[0] if self.doc else ""


SIGNALS: dict[str, Signal] = {}


def signal(
    unit: str, scope: str = "primary device"
) -> Callable[[Callable[[SignalContext], Any]], Callable[[SignalContext], Any]]:
    """Register the decorated function as a signal named after the function.

    Raises:
        ValueError: an unknown unit or scope.
    """
    if unit not in UNITS:
        raise ValueError(f"unknown unit {unit!r}")
    if scope not in SCOPES:
        raise ValueError(f"unknown scope {scope!r}")

    def deco(func: Callable[[SignalContext], Any]) -> Callable[[SignalContext], Any]:
        SIGNALS[func.__name__] = Signal(func.__name__, unit, func, scope)
        return func

    return deco


#: The arrays an intermediate must hold before :meth:`SignalContext.release` drops it: 64 KiB,
#: a few thousand rows of one column; below it a value is kept (a per-step or per-name array).
RELEASE_MIN_BYTES = 1 << 16


def held_bytes(value: Any, exclude: set[int] | None = None) -> int:
    """Bytes of the numpy arrays ``value`` holds (its own, or those of the pandas objects,
    tuples, lists, dicts and dataclasses in it, to 4 levels; a view counts its base once, and
    not at all when the base's ``id`` is in ``exclude``: the trace's own columns, which a
    release does not free). An estimate of what dropping ``value`` frees, for
    :meth:`SignalContext.release`: objects of Python's own (strings, numbers) count 0."""
    import numpy as np
    import pandas as pd

    seen: set[int] = set(exclude or ())

    def walk(v: Any, depth: int) -> int:
        if isinstance(v, np.ndarray):
            base = v
            while isinstance(base.base, np.ndarray):
                base = base.base
            if id(base) in seen:
                return 0
            seen.add(id(base))
            return base.nbytes
        if depth >= 4:
            return 0
        if isinstance(v, pd.DataFrame):
            return sum(walk(v.iloc[:, i], depth + 1) for i in range(v.shape[1]))
        if isinstance(v, pd.RangeIndex):
            return 0
        if isinstance(v, (pd.Series, pd.Index)):
            values = v.array
            if isinstance(values, pd.Categorical):
                return walk(values.codes, depth + 1)
            return walk(np.asarray(values), depth + 1) if values.dtype != object else 0
        if isinstance(v, (tuple, list)):
            return sum(walk(x, depth + 1) for x in v)
        if isinstance(v, dict):
            return sum(walk(x, depth + 1) for x in v.values())
        if hasattr(v, "__dataclass_fields__"):
            return sum(walk(getattr(v, f), depth + 1) for f in v.__dataclass_fields__)
        return 0

    return walk(value, 0)


def _frame_bases(trace: Trace) -> set[int]:
    """``id`` of the base array of every column of the trace's frames (numeric values, a
    categorical's codes): the arrays an intermediate may view but never owns."""
    import numpy as np
    import pandas as pd

    from tracedoc.schema import FRAME_COLUMNS

    out = set()
    for name in FRAME_COLUMNS:
        df = getattr(trace, name, None)
        if not isinstance(df, pd.DataFrame):
            continue
        for i in range(df.shape[1]):
            col = df.iloc[:, i]
            if isinstance(col.dtype, pd.CategoricalDtype):
                arr = col.array.codes
            elif isinstance(col.dtype, np.dtype) and col.dtype != object:
                arr = col.to_numpy(copy=False)  # a view of the frame's block
            else:
                continue
            while isinstance(arr, np.ndarray) and isinstance(arr.base, np.ndarray):
                arr = arr.base
            if isinstance(arr, np.ndarray):
                out.add(id(arr))
    return out


class SignalContext:
    """Per-trace cache of signal values and of the intermediate results they share.

    Sub-modules attach their intermediate results as cached properties through
    :meth:`cached`; :meth:`get` computes a signal once and remembers its value or
    the reason it is unavailable.
    """

    def __init__(self, trace: Trace) -> None:
        self.trace = trace
        self._values: dict[str, Any] = {}
        self._errors: dict[str, str] = {}
        self._cache: dict[str, Any] = {}
        self._cache_errors: dict[str, str] = {}
        self._trim = GrowthTrim()

    def cached(self, key: str, compute: Callable[[], Any]) -> Any:
        """Return ``compute()`` once per context. After each result is built, the C heap's free
        pages go back to the system when the process has grown by
        :data:`tracedoc.heap.TRIM_STEP_BYTES` (:class:`tracedoc.heap.GrowthTrim`).

        A :class:`SignalUnavailable` that ``compute()`` raises is kept too, as its reason, and
        raised anew (a fresh exception, no traceback into the build) each time ``key`` is asked
        for again: a shared result that cannot be built on this trace was built again by every
        signal that reads it (the elementwise chains of a trace without recorded shapes: a
        17 MiB transient on 1 M small events, once per signal; issue 24). Other exceptions are
        not kept.

        Raises:
            SignalUnavailable: ``compute()`` raised it, now or the first time.
        """
        return _once(self._cache, self._cache_errors, key, compute, self._trim)

    def release(self, keep: Callable[[str], bool] = lambda key: False, min_bytes: int | None = None) -> int:
        """Drop the cached intermediates (:meth:`cached`) that hold at least ``min_bytes`` of
        arrays of their own (default :data:`RELEASE_MIN_BYTES`; :func:`held_bytes`, the trace's
        columns they view not counted) and whose key ``keep``
        does not accept; signal values, and the reasons of those unavailable, stay. Returns the
        bytes dropped (their arrays: what is freed once nothing else holds them). When some were
        dropped, the C heap's free pages go back to the system (:meth:`tracedoc.heap.GrowthTrim.release`).

        An intermediate is a pure function of the trace, so one that is asked for again is
        built again, the same value: a release costs time, never a result. The engine releases
        at the ends of its phases (:func:`tracedoc.engine.analyze_trace`), so that one family's
        intermediates are not held under the next one's peak (issue 24). Small values (a
        per-step dict, a per-name mask) stay whatever their key: they cost nothing to hold and
        some took a large build.
        """
        floor = RELEASE_MIN_BYTES if min_bytes is None else min_bytes
        frames = _frame_bases(self.trace)
        dropped = 0
        for key in [k for k in self._cache if not keep(k)]:
            size = held_bytes(self._cache[key], frames)
            if size >= floor:
                del self._cache[key]
                dropped += size
        if dropped:
            # glibc keeps the freed pages resident until a trim, and the next phase's arrays
            # fault in only the pages they use: without it the traced replay of 4 M small events
            # started 68 MiB above what the analysis held (issue 24)
            self._trim.release()
        return dropped

    def get(self, name: str) -> Any:
        """Value of signal ``name``.

        A signal that fails with an unexpected exception (a bug, or a trace odd enough to
        break an assumption: a zero-length span, an empty selection) does not end the
        analysis: it becomes unavailable with the reason ``internal error in signal NAME:
        ExceptionType: message``, so the rules that need it are skipped with that reason.
        ``MemoryError`` is not converted.

        Raises:
            KeyError: no such signal.
            SignalUnavailable: the signal cannot be computed on this trace (or failed).
        """
        if name not in self._values and name not in self._errors and name not in SIGNALS:
            raise KeyError(name)
        return self.memo(name, lambda: self._compute(name))

    def _compute(self, name: str) -> Any:
        """Run signal ``name``'s function; an unexpected exception becomes
        :class:`SignalUnavailable` with the reason :meth:`get` documents."""
        try:
            return SIGNALS[name].func(self)
        except (SignalUnavailable, MemoryError):
            raise
        except Exception as exc:  # never lose the whole analysis to one signal
            detail = " ".join(str(exc).split())[:200]
            reason = f"internal error in signal {name}: {type(exc).__name__}" + (f": {detail}" if detail else "")
            raise SignalUnavailable(reason) from None

    def memo(self, key: str, compute: Callable[[], Any]) -> Any:
        """``compute()`` once per context, kept beside the signal values (:meth:`get` computes
        signals through it): a value (or the :class:`SignalUnavailable` it raised) is exported
        and seeded with them (:meth:`export`, :meth:`seed`), so a second analysis of the same
        trace by the same code (:class:`tracedoc.cache.SignalStore`) reads it back instead of
        computing it. For
        results that, like signals, depend on the trace and tracedoc's signal code alone
        (``key`` names the question: the step model's replayed savings of named fixes).

        Raises:
            SignalUnavailable: ``compute()`` raised it (now or when the value was stored).
        """
        return _once(self._values, self._errors, key, compute)

    def export(self) -> tuple[dict[str, Any], dict[str, str]]:
        """``(values, reasons)``: every signal computed so far, and why the unavailable ones are."""
        return dict(self._values), dict(self._errors)

    def seed(self, values: dict[str, Any], reasons: dict[str, str]) -> None:
        """Take signal values (and reasons for unavailable ones) computed earlier on the same
        trace by the same code (:class:`tracedoc.cache.SignalStore`); they are not recomputed."""
        self._values.update(values)
        self._errors.update(reasons)

    def try_get(self, name: str) -> tuple[Any, str | None]:
        """``(value, None)`` or ``(None, reason)`` when unavailable."""
        try:
            return self.get(name), None
        except SignalUnavailable as exc:
            return None, str(exc)

    @cached_property
    def device(self):
        """The primary device (most kernel time), or None."""
        return self.trace.primary_device()
