"""Recorded op inputs (``record_shapes=True``): the ``Input Dims``, ``Input type``,
``Input Strides`` and ``Concrete Inputs`` args of Kineto's CPU-op events, as the ops frame
holds them, and :func:`parse_shape_arg` to get a value back as a Python list.

Column semantics (the same in both loaders; ``tests/test_shapes_loading.py``):

========================  ===================  ==========================================
ops column                Kineto ``args`` key  a valid value
========================  ===================  ==========================================
``input_dims``            ``Input Dims``       a list whose items are lists of ints, or
                                               lists of lists of ints (a tensor list);
                                               ``[]`` for a non-tensor input
``input_types``           ``Input type``       a list of strings (``"float"``,
                                               ``"c10::BFloat16"``, ``"Scalar"``, ``""``)
``input_strides``         ``Input Strides``    as ``input_dims``
``concrete_inputs``       ``Concrete Inputs``  a list of strings (``"[2, 2]"``, ``"False"``)
========================  ===================  ==========================================

Each cell is the value re-serialised as compact JSON text (``orjson.dumps`` of the value as
JSON reads it: no spaces, ``[[32,3,224,224],[]]``), so both loaders give the same bytes and
equal inputs give equal text. The columns are pandas ``Categorical`` (each distinct text
stored once, a 1-2 byte code per row; the categories are the distinct texts present, sorted);
a missing cell is NaN. Missing means: the event has no such arg (a trace recorded without
``record_shapes``, or an annotation), the arg is ``null``, or the value was dropped as
invalid: not of the form above (a string, a number, a float or a bool in a shape, an integer
outside int64, nesting deeper than the table says), or longer than
:data:`SHAPE_TEXT_MAX_CHARS` characters once serialised. Each dropped value (not each event)
is counted under :data:`DROP_SHAPE_ARG` in ``Trace.dropped_events``; the event is kept.

This module imports neither pandas nor numpy: the fast loader uses it while decoding.
"""

from __future__ import annotations

import functools
from typing import Any

import orjson

#: ``(ops column, Kineto args key)`` of each recorded-input column, in column order.
SHAPE_ARGS: tuple[tuple[str, str], ...] = (
    ("input_dims", "Input Dims"),
    ("input_types", "Input type"),
    ("input_strides", "Input Strides"),
    ("concrete_inputs", "Concrete Inputs"),
)
#: The ops frame's recorded-input columns and their dtype, as in :data:`tracedoc.schema.FRAME_COLUMNS`.
SHAPE_COLUMNS: list[tuple[str, str]] = [(c, "category") for c, _ in SHAPE_ARGS]
#: Longest serialised value kept (characters). Why 4,096: the longest value in the real traces
#: of ``fixtures/`` is 1,045 characters (the ``Input type`` of a ``torch.compile`` graph call in
#: h100_resnet18_compile); most are under 150. A 4x margin keeps every real value while a
#: hostile list of millions of items costs nothing past the cut.
SHAPE_TEXT_MAX_CHARS = 4096
#: Key of ``Trace.dropped_events`` counting recorded-input values dropped as invalid (values,
#: not events: the event is kept with a missing cell).
DROP_SHAPE_ARG = "recorded op input (Input Dims/type/Strides, Concrete Inputs) malformed or over 4,096 chars (ignored)"

_INT64_MIN, _INT64_MAX = -(1 << 63), (1 << 63) - 1
#: The form each column's values must have (:func:`_valid`).
_SHAPE_KINDS = {"input_dims": "dims", "input_types": "strings", "input_strides": "dims", "concrete_inputs": "strings"}


def frame_columns(kind: str) -> list[tuple[str, str]]:
    """The columns ``(name, dtype)`` of frame ``kind``: :data:`tracedoc.schema.FRAME_COLUMNS`,
    plus :data:`SHAPE_COLUMNS` for ``"ops"`` (unless the schema already lists them).

    Raises:
        KeyError: an unknown frame kind.
    """
    from tracedoc.schema import FRAME_COLUMNS

    cols = FRAME_COLUMNS[kind]
    if kind != "ops":
        return cols
    have = {c for c, _ in cols}
    return [*cols, *(c for c in SHAPE_COLUMNS if c[0] not in have)]


def all_frame_columns() -> dict[str, list[tuple[str, str]]]:
    """``{kind: frame_columns(kind)}`` for every frame kind, in the schema's order."""
    from tracedoc.schema import FRAME_COLUMNS

    return {k: frame_columns(k) for k in FRAME_COLUMNS}


def _is_int(v: Any) -> bool:
    return type(v) is int and _INT64_MIN <= v <= _INT64_MAX


def _valid(kind: str, value: Any) -> bool:
    """Whether ``value`` has the form of its kind (``"dims"`` or ``"strings"``, module
    docstring). Stops as soon as the items seen could not serialise within the cap (each item
    takes at least one character), so a list of millions of items costs no more than a short one."""
    if type(value) is not list:
        return False
    budget = SHAPE_TEXT_MAX_CHARS
    if kind == "strings":
        for s in value:
            if type(s) is not str:
                return False
            budget -= len(s) + 3  # its quotes and a comma (or a bracket)
            if budget < 0:
                return False
        return True
    for item in value:  # lower bounds of each part's share of the text: 2 per list, 2 per int
        budget -= 2
        if type(item) is not list or budget < 0:
            return False
        for x in item:
            budget -= 2
            if budget < 0:
                return False
            if type(x) is list:  # a tensor list: one list of ints per tensor
                for y in x:
                    budget -= 2
                    if budget < 0 or not _is_int(y):
                        return False
            elif not _is_int(x):
                return False
    return True


def shape_text(column: str, value: Any) -> str | None:
    """The text an ops ``column`` of :data:`SHAPE_ARGS` holds for the arg ``value`` (as JSON
    reads it): compact JSON, or None when ``value`` is None (absent) or invalid (module
    docstring: wrong form, or over :data:`SHAPE_TEXT_MAX_CHARS` characters). Never raises.

    Raises:
        KeyError: ``column`` is not a recorded-input column.
    """
    kind = _SHAPE_KINDS[column]
    if value is None or not _valid(kind, value):
        return None
    try:
        text = orjson.dumps(value).decode()
    except (TypeError, orjson.JSONEncodeError):  # defensive: _valid admits only what orjson writes
        return None
    return text if len(text) <= SHAPE_TEXT_MAX_CHARS else None


@functools.lru_cache(maxsize=65536)
def _parse(text: str) -> tuple | None:
    try:
        value = orjson.loads(text)
    except orjson.JSONDecodeError:
        return None
    return _freeze(value) if type(value) is list else None


def _freeze(v: Any) -> Any:
    return tuple(_freeze(x) for x in v) if type(v) is list else v


def _thaw(v: Any) -> Any:
    return [_thaw(x) for x in v] if type(v) is tuple else v


def parse_shape_arg(text: Any) -> list | None:
    """The Python list a recorded-input cell of the ops frame holds (module docstring): e.g.
    ``parse_shape_arg("[[32,3,224,224],[]]") == [[32, 3, 224, 224], []]``; None for a missing
    cell (NaN, None, ``""``) or text that is not a JSON list. Parsing is cached per distinct text
    (``functools.lru_cache``, 65,536 entries; a trace has hundreds of distinct values); each
    call returns a new list, which the caller may change. Never raises."""
    if not isinstance(text, str) or not text:
        return None
    frozen = _parse(text)
    return None if frozen is None else _thaw(frozen)


__all__ = [
    "DROP_SHAPE_ARG",
    "SHAPE_ARGS",
    "SHAPE_COLUMNS",
    "SHAPE_TEXT_MAX_CHARS",
    "all_frame_columns",
    "frame_columns",
    "parse_shape_arg",
    "shape_text",
]
