"""tracedoc: diagnose PyTorch Profiler (Kineto) traces.

    >>> import tracedoc
    >>> report = tracedoc.analyze("trace.json.gz")   # doctest: +SKIP
    >>> [f.name for f in report.findings]             # doctest: +SKIP
"""

__version__ = "0.1.0"

from tracedoc.errors import TraceLoadError, TracedocError  # noqa: E402
from tracedoc.load import load  # noqa: E402
from tracedoc.trace import Trace  # noqa: E402
from tracedoc.engine import analyze, analyze_trace  # noqa: E402
from tracedoc.report import Report  # noqa: E402

__all__ = ["__version__", "load", "analyze", "analyze_trace", "Trace", "Report", "TracedocError", "TraceLoadError"]
