"""Memory of the analysis beyond the loaded frames (issue 24).

Two things kept the analysis of a large trace far above its frames:

* pandas 3 turns a column of Python strings into its Arrow-backed ``str`` dtype, so every
  derived frame with a name column copied each row's text into Arrow's memory pool (67 MiB
  at its peak on the 301 MB tiled trace; analysis peak 405 -> 349 MiB once the derived frames
  kept ``object`` columns, :func:`tracedoc.signals.strings.texts`);
* the step model's replay read its arrays through Python lists, one float object per element
  (160 MiB more on the 1 M-event trace); it reads them through memoryviews now.
"""

from __future__ import annotations

import json
import subprocess
import sys
import tracemalloc

import numpy as np
import pandas as pd

from tests.conftest import real_trace
from tracedoc.load import load
from tracedoc.signals import SignalContext
from tracedoc.signals.stepmodel import BASELINE, _anchor_order, _replay, _schedule
from tracedoc.signals.strings import texts

_ARROW_PEAK = r"""
import json, sys
from tracedoc.engine import analyze_trace
from tracedoc.load import load
try:
    import pyarrow as pa
except ImportError:  # pandas keeps strings as objects without pyarrow
    pa = None
report = analyze_trace(load(sys.argv[1], cache=None))
peak = pa.default_memory_pool().max_memory() if pa is not None else 0
print(json.dumps({"findings": len(report.findings), "arrow_peak": peak}))
"""


def test_texts_is_an_object_column_of_the_same_strings():
    values = np.array(["volta_sgemm_128x64_nn", None, "volta_sgemm_128x64_nn"], dtype=object)
    s = texts(values, index=pd.Index([4, 7, 9]))
    assert s.dtype == object
    assert s.index.tolist() == [4, 7, 9]
    assert s.iloc[0] is values[0]  # the trace's own string, not a copy
    assert s.isna().tolist() == [False, True, False]


def test_analysis_keeps_names_out_of_arrow_memory():
    # a whole analysis of a real V100 training trace (3,800 kernels) in a fresh process, so the
    # pool's peak is this analysis's alone; with the derived frames' names inferred as Arrow
    # strings the pool peaked at 7.6 MB here (code of 9396e7c), with object columns at 0.12 MB
    path = real_trace("v100_resnet50_workers0.pt.trace.json.gz")
    out = subprocess.run(
        [sys.executable, "-c", _ARROW_PEAK, str(path)], capture_output=True, text=True, timeout=300, check=True
    )
    got = json.loads(out.stdout)
    assert got["findings"] > 0
    assert got["arrow_peak"] < 1 << 20


def test_replay_needs_no_object_per_event():
    # traced allocations of one replay, after the schedule is built: arrays of 8 bytes per event
    # and anchor; the list-based loop allocated about 300 bytes per element
    ctx = SignalContext(load(real_trace("v100_resnet50_workers0.pt.trace.json.gz"), cache=None))
    sch = _schedule(ctx)
    _anchor_order(ctx)
    _replay(ctx, BASELINE, True)  # imports and one-off caches out of the way
    elements = sch.ev_rows.size + sch.a_ts.size
    assert elements > 10_000
    for trace_path, limit in ((False, 64), (True, 192)):
        tracemalloc.start()
        try:
            _replay(ctx, BASELINE, trace_path)
            peak = tracemalloc.get_traced_memory()[1]
        finally:
            tracemalloc.stop()
        assert peak / elements < limit, (trace_path, peak / elements)


def test_kernel_categories_are_shared_strings_not_text_arrays():
    """The categorised kernels' ``category`` column holds the four category strings themselves.
    Choosing among the texts with np.where made fixed-width unicode arrays, three at once, and
    a new string per kernel: on this trace (8,772 kernels in its windows) the build peaked at
    245 bytes a kernel and held 91 (code of f603027); choosing by index, 62 and 25."""
    from tracedoc.signals.attribution import kernel_ops
    from tracedoc.signals.gpu import KERNEL_CATEGORIES, _categorised_kernels, kernels_in_windows_mask

    ctx = SignalContext(load(real_trace("v100_resnet50_workers0.pt.trace.json.gz"), cache=None))
    kernel_ops(ctx), kernels_in_windows_mask(ctx)  # what it reads, built before the measurement
    tracemalloc.start()
    try:
        df, _ = _categorised_kernels(ctx)
        held, peak = tracemalloc.get_traced_memory()
    finally:
        tracemalloc.stop()
    n = len(df)
    assert n == 8772
    assert peak / n < 120 and held / n < 50, (peak / n, held / n)
    by_text = {c: c for c in KERNEL_CATEGORIES}
    assert all(v is by_text[v] for v in df["category"].tolist())
