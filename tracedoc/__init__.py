"""tracedoc: diagnose PyTorch Profiler (Kineto) traces.

    >>> import tracedoc
    >>> report = tracedoc.analyze("trace.json.gz")   # doctest: +SKIP
    >>> [f.name for f in report.findings]             # doctest: +SKIP

``import tracedoc`` stays light (no pandas): ``analyze``, ``analyze_trace``, ``Trace``
and ``Report`` are imported on first use, so the command line can start decoding a
large trace in parallel worker processes while pandas is still being imported.
"""

__version__ = "0.1.0"

from tracedoc.errors import TracedocError, TraceLoadError  # noqa: E402
from tracedoc.load import load  # noqa: E402

_LAZY = {
    "analyze": "tracedoc.engine",
    "analyze_trace": "tracedoc.engine",
    "Trace": "tracedoc.trace",
    "Report": "tracedoc.report",
}


def __getattr__(name: str):
    if name in _LAZY:
        import importlib

        value = getattr(importlib.import_module(_LAZY[name]), name)
        globals()[name] = value
        return value
    raise AttributeError(f"module 'tracedoc' has no attribute {name!r}")


__all__ = ["__version__", "load", "analyze", "analyze_trace", "Trace", "Report", "TracedocError", "TraceLoadError"]
