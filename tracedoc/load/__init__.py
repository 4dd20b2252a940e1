"""Loading a Kineto / Chrome trace file into a :class:`tracedoc.trace.Trace`.

Everything that reads trace files goes through :func:`load`.
"""

from __future__ import annotations

import os

from tracedoc.load.build import build_trace
from tracedoc.load.reference import collect_events, parse_document
from tracedoc.load.source import read_trace_bytes
from tracedoc.trace import Trace


def load(path: str | os.PathLike[str]) -> Trace:
    """Load a PyTorch Profiler trace (``.json`` or gzipped, detected by magic bytes).

    Categories are normalised across PyTorch versions, device properties are read
    from ``deviceProperties`` or ``computeProperties``, and all timestamps are rebased
    to the trace start (µs, float64).

    Raises:
        tracedoc.errors.TraceLoadError: with a one-line message naming the file and the
            problem (missing file, truncated gzip, invalid JSON, not a trace, events of
            the wrong type, no profiler events).
    """
    p = str(path)
    data = read_trace_bytes(p)
    doc = parse_document(data, p)
    del data
    sink = collect_events(doc["traceEvents"], p)
    return build_trace(sink, doc, p)


__all__ = ["load"]
