"""Fast per-row string tests on object columns of event names.

pandas' ``.str`` accessor and ``Series.map(dict)`` carry per-call overheads that
dominate on traces of hundreds of thousands of events. These helpers give the same
boolean masks (names are always ``str``: the loader guarantees it) by running the
test once per *distinct* name and broadcasting it with C-level ``map``.
"""

from __future__ import annotations

from typing import Callable

import numpy as np
import pandas as pd


class _Memo(dict):
    def __init__(self, func: Callable[[str], bool]) -> None:
        super().__init__()
        self.func = func

    def __missing__(self, key: str) -> bool:
        value = self[key] = bool(self.func(key))
        return value


def texts(values, index=None) -> pd.Series:
    """``values`` (an array or list of ``str`` and None) as an ``object`` Series, to put in a
    derived frame. pandas 3 turns a column of strings into its Arrow-backed ``str`` dtype,
    which copies every row's text into Arrow memory and makes new Python strings each time
    the column is read back as objects; an object column holds the trace's own (shared)
    strings at 8 bytes a row. Measured on the 301 MB tiled trace (issue 24): analysis peak
    405 -> 349 MiB once the derived frames of the op view, the attribution and the kernel
    categories kept object columns. An object array is taken as it is, not copied (pandas 3
    copies by default): callers pass arrays that nothing writes to."""
    return pd.Series(values, index=index, dtype=object, copy=False)


def text_rows(column: pd.Series, take: Callable[[np.ndarray], np.ndarray], index=None) -> pd.Series:
    """A derived frame's text column: ``take`` (a row selection of a per-row array: a boolean
    mask, positions, or :func:`tracedoc.signals.steps.rows_of`) applied to ``column`` (a
    trace frame's text column, shape ``(n,)``). A ``Categorical`` column (the loaders' name,
    category and thread columns) stays one: ``take`` runs on its codes, one or two bytes a row,
    with the same categories; an ``object`` column becomes :func:`texts` of the rows taken.
    Materialised, the names of a derived frame were an 8-byte pointer a row each (issue 24)."""
    if isinstance(column.dtype, pd.CategoricalDtype):
        return pd.Series(pd.Categorical.from_codes(take(column.array.codes), dtype=column.dtype), index=index)
    return texts(take(column.to_numpy(dtype=object)), index)


def text_at(column: pd.Series, pos: np.ndarray, index=None) -> pd.Series:
    """A derived frame's text column: the value of ``column`` (a trace frame's text column) at
    each row position of ``pos`` (shape ``(m,)``, -1: missing). A ``Categorical`` stays one (its
    codes taken, -1 where ``pos`` is), an ``object`` column gives :func:`texts` with None there:
    the launching op's name of every runtime call and kernel, held for the whole analysis, was
    an 8-byte pointer a row (issue 24)."""
    pos = np.asarray(pos)
    safe = np.maximum(pos, 0)
    if isinstance(column.dtype, pd.CategoricalDtype):
        codes = column.array.codes
        taken = (
            np.where(pos >= 0, codes[safe], -1).astype(codes.dtype) if len(codes) else np.full(pos.size, -1, np.int8)
        )
        return pd.Series(pd.Categorical.from_codes(taken, dtype=column.dtype), index=index)
    values = column.to_numpy(dtype=object)
    return texts(np.where(pos >= 0, values[safe], None) if len(values) else np.full(pos.size, None), index)


def sorted_codes(column: pd.Series) -> tuple[np.ndarray, np.ndarray]:
    """``(codes, labels)`` of a text column (shape ``(n,)`` and ``(distinct,)``): codes into
    labels sorted as Python sorts strings, -1 for a missing value. A ``Categorical`` from the
    loaders (:func:`text_rows`) gives its own codes and categories, which are sorted; an
    ``object`` column is factorised with ``sort=True``. Grouping on the codes orders groups as
    grouping on the strings does, with no string per row."""
    if isinstance(column.dtype, pd.CategoricalDtype) and column.cat.categories.is_monotonic_increasing:
        return column.array.codes, np.asarray(column.cat.categories, dtype=object)
    codes, labels = pd.factorize(column.to_numpy(dtype=object), sort=True, use_na_sentinel=True)
    return codes, np.asarray(labels, dtype=object)


def owned_frame(columns: dict, index=None) -> pd.DataFrame:
    """A derived frame over ``columns`` (name -> array or Series, all of one length) that takes
    the arrays as they are: pandas 3's constructor copies every numpy array it is given, so a
    frame of freshly computed arrays briefly held each one twice, and one of a trace frame's
    columns held a copy for the analysis's whole life. On 1 M small events those copies made
    34 MiB of the analysis's peak (issue 24). The arrays are the frame's columns, so callers
    pass arrays nothing else writes to, and never write into the frame (a derived frame is
    read-only: every signal shares it)."""
    return pd.DataFrame(columns, index=index, copy=False)


def shared_column(df: pd.DataFrame, name: str, values: np.ndarray) -> None:
    """Set column ``name`` of the derived frame ``df`` to ``values`` (shape ``(len(df),)``)
    without a copy: pandas 3 copies an array set as a column, but not a Series, whose sharing
    it tracks. For a view of an array held elsewhere in the analysis (issue 24); the frame
    must not be written into (:func:`owned_frame`)."""
    df[name] = pd.Series(values, index=df.index, copy=False)


def name_mask(names: pd.Series, test: Callable[[str], bool]) -> np.ndarray:
    """``np.array([test(n) for n in names], bool)``, calling ``test`` once per distinct name."""
    values = names.to_numpy(dtype=object)
    return np.fromiter(map(_Memo(test).__getitem__, values), dtype=bool, count=len(values))


def startswith_mask(names: pd.Series, prefix: str) -> np.ndarray:
    """Same as ``names.str.startswith(prefix).to_numpy(bool)`` for a column of ``str``."""
    return name_mask(names, lambda s: s.startswith(prefix))


def frame_names(ctx, frame: str) -> tuple[np.ndarray, np.ndarray]:
    """``(codes, uniques)`` of the ``name`` column of ``ctx.trace.<frame>`` (shapes ``(n,)`` and
    ``(distinct,)``), once per context: a ``Categorical`` column's own codes (int8 or int16, a
    view) and categories, else factorised, the codes int32 (:func:`_narrow`). Index the
    uniques or a per-name array with the codes; do no arithmetic on them."""
    df = getattr(ctx.trace, frame)

    def build() -> tuple[np.ndarray, np.ndarray]:
        names = df["name"]
        if isinstance(names.dtype, pd.CategoricalDtype):  # the loaders': its own codes, no copy
            return names.array.codes, np.asarray(names.cat.categories, dtype=object)
        codes, uniques = pd.factorize(names, sort=False)
        return _narrow(codes), uniques

    return ctx.cached(f"names_{frame}", build)


def _narrow(codes: np.ndarray) -> np.ndarray:
    """Per-row codes (shape ``(n,)``, each below ``n``) as int32: half of pandas' int64, and a
    trace of 2**31 rows in one frame would be some 400 GB of JSON. The names and threads codes
    of the three large frames are held for the whole analysis (8 MiB less on 1 M small events,
    issue 24)."""
    return codes.astype(np.int32) if len(codes) < 2**31 else codes


def cached_name_mask(ctx, frame: str, key: str, test: Callable[[str], bool]) -> np.ndarray:
    """Boolean mask over ``ctx.trace.<frame>`` rows (shape ``(len(frame),)``, a new array each
    call): ``test(name)``, computed once per distinct name and that per-name answer cached in the
    context under ``key``.

    The per-row mask is taken anew from the names' codes at each call rather than held: the
    two dozen name masks of an analysis held a byte per row each for the whole run, about 8 MiB
    on 1 M small events, against a gather of well under a millisecond per call (issue 24)."""

    def build() -> np.ndarray:
        _, uniques = frame_names(ctx, frame)
        return np.fromiter((bool(test(n)) for n in uniques), dtype=bool, count=len(uniques))

    per_name = ctx.cached(f"mask_{frame}_{key}", build)
    codes, _ = frame_names(ctx, frame)
    return per_name[codes] if len(codes) else np.zeros(0, dtype=bool)


def frame_threads(ctx, frame: str) -> tuple[np.ndarray, np.ndarray]:
    """``(codes, labels)``: an int32 code per row of ``ctx.trace.<frame>`` for its (pid, tid), and
    the ``"pid/tid"`` label of each code. Factorised once per context (no per-row string building)."""

    return ctx.cached(f"threads_{frame}", lambda: thread_codes(getattr(ctx.trace, frame)))


def thread_codes(df: pd.DataFrame) -> tuple[np.ndarray, np.ndarray]:
    """``(codes, labels)`` for the rows of ``df`` (a frame with ``pid`` and ``tid`` columns,
    ``Categorical`` as the loaders give them or ``object``): an int32 code per row for its
    (pid, tid), numbered in order of first appearance, and the ``"pid/tid"`` label of each code.
    One groupby, no string built per row."""
    if not len(df):
        return np.zeros(0, dtype=np.int32), np.array([], dtype=object)
    g = df.groupby(["pid", "tid"], sort=False, observed=True)
    codes = _narrow(g.ngroup().to_numpy())
    # with sort=False, ngroup() numbers groups in order of first appearance, as size() lists them
    keys = [f"{p}/{t}" for p, t in g.size().index]
    return codes, np.array(keys, dtype=object)


def thread_labels(df: pd.DataFrame) -> np.ndarray:
    """The ``"pid/tid"`` label of each row of ``df`` (shape ``(len(df),)``, ``object``): the
    labels of :func:`thread_codes` taken per row, each label one shared string."""
    codes, labels = thread_codes(df)
    return labels[codes]


def on_threads(ctx, frame: str, threads: set[str] | None) -> np.ndarray:
    """Mask over ``ctx.trace.<frame>``: the row's (pid, tid) is one of ``threads`` (all rows when None)."""
    codes, labels = frame_threads(ctx, frame)
    if threads is None:
        return np.ones(len(codes), dtype=bool)
    keep = np.fromiter((lab in threads for lab in labels), dtype=bool, count=len(labels))
    return keep[codes] if len(codes) else np.zeros(0, dtype=bool)
