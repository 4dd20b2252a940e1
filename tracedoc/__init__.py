"""tracedoc: diagnose PyTorch Profiler (Kineto) traces.

The Python API (a notebook session is in ``docs/python-api.md``):

    >>> import tracedoc
    >>> trace = tracedoc.load("fixtures/v100_resnet50_workers0.pt.trace.json.gz")  # doctest: +SKIP
    >>> report = tracedoc.analyze(trace)              # or analyze(path)  # doctest: +SKIP
    >>> report                                         # a short repr      # doctest: +SKIP
    <Report fixtures/v100_resnet50_workers0.pt.trace.json.gz: 4 findings (1 error, ...>
    >>> report.print()                                 # the terminal report  # doctest: +SKIP

- :func:`load` -- a trace file (``.json`` or ``.json.gz``) -> :class:`Trace` (pandas frames).
- :func:`analyze` -- a path or a :class:`Trace` -> :class:`Report` (signals, findings, skipped rules).
- :class:`Trace`, :class:`Report` -- both have short reprs and render as HTML and
  Markdown in notebooks (``_repr_html_``, ``_repr_markdown_``).
- :func:`on_trace_ready`, :func:`profile` -- inside ``torch.profiler``: write each trace,
  print its diagnosis, keep the :class:`Report` (:mod:`tracedoc.profiler`).
- :class:`TracedocError` (and :class:`TraceLoadError`) -- one-line messages, never a repr.

``import tracedoc`` stays light (no pandas): ``analyze_trace``, ``Trace`` and ``Report``
are imported on first use, so the command line can start decoding a large trace in
parallel worker processes while pandas is still being imported.
"""

import os as _os  # noqa: E402

from tracedoc._version import __version__  # noqa: E402
from tracedoc.errors import TracedocError, TraceLoadError  # noqa: E402
from tracedoc.load import load as _load  # noqa: E402

_LAZY = {
    "analyze_trace": "tracedoc.engine",
    "Trace": "tracedoc.trace",
    "Report": "tracedoc.report",
    "on_trace_ready": "tracedoc.profiler",
    "profile": "tracedoc.profiler",
}


def load(path, *args, **kwargs):
    """Load a PyTorch Profiler trace file into a :class:`Trace` (see :func:`tracedoc.load.load`
    for the arguments). A :class:`Trace` given by mistake is a short TypeError, not an error
    message holding its repr."""
    if type(path).__name__ == "Trace" and hasattr(path, "kernels"):
        raise TypeError("load() takes a trace file path; this is already a loaded tracedoc.Trace")
    return _load(path, *args, **kwargs)


load.__doc__ = (load.__doc__ or "") + "\n\n" + (_load.__doc__ or "")


def analyze(trace, select=None, ignore=None, rules=None):
    """Analyze a trace: compute the signals, evaluate the rules, rank the findings.

    Args:
        trace: a trace file path (``str`` or ``os.PathLike``) or a :class:`Trace` from
            :func:`load` (loading once and analyzing several times is cheaper).
        select, ignore: rule selectors (code ``"TD101"``, prefix ``"TD1"`` or name
            ``"dataloader-stall"``).
        rules: the rules to evaluate (default: the built-in ones; add your own with
            ``tracedoc.engine.load_rules(["my_rules/"])``).

    Returns:
        a :class:`Report`; findings are ranked by estimated saving (ms per step).

    Raises:
        TypeError: ``trace`` is neither a path nor a Trace (the message names the type only).
        TraceLoadError: the file is not a readable trace.
        tracedoc.errors.RuleError: a bad selector or rule file.
    """
    from tracedoc import pipeline
    from tracedoc.settings import Settings
    from tracedoc.trace import Trace

    if not isinstance(trace, (Trace, str, _os.PathLike)):
        raise TypeError(f"analyze() takes a trace path or a tracedoc.Trace, not {type(trace).__name__}")
    settings = Settings.resolve(None if isinstance(trace, Trace) else trace, select=select, ignore=ignore)
    if rules is not None and settings.thresholds:
        from tracedoc.config import apply_thresholds

        rules = apply_thresholds(rules, settings.threshold_map, settings.config_path)
    return pipeline.analyze(trace, settings, rules=rules)


def __getattr__(name: str):
    if name in _LAZY:
        import importlib

        value = getattr(importlib.import_module(_LAZY[name]), name)
        globals()[name] = value
        return value
    raise AttributeError(f"module 'tracedoc' has no attribute {name!r}")


def __dir__():
    return sorted(__all__)


__all__ = [
    "__version__",
    "load",
    "analyze",
    "analyze_trace",
    "Trace",
    "Report",
    "TracedocError",
    "TraceLoadError",
    "on_trace_ready",
    "profile",
]
