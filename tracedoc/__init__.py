"""tracedoc: diagnose PyTorch Profiler (Kineto) traces.

The Python API (a notebook session is in ``docs/python-api.md``):

    >>> import tracedoc
    >>> trace = tracedoc.load("fixtures/v100_resnet50_workers0.pt.trace.json.gz")  # doctest: +SKIP
    >>> report = tracedoc.analyze(trace)              # or analyze(path)  # doctest: +SKIP
    >>> report                                         # a short repr      # doctest: +SKIP
    <Report fixtures/v100_resnet50_workers0.pt.trace.json.gz: 4 findings (1 error, ...>
    >>> report.print()                                 # the terminal report  # doctest: +SKIP

- :func:`load` -- a trace file (``.json`` or ``.json.gz``) -> :class:`Trace` (pandas frames).
- :func:`analyze` -- a path or a :class:`Trace` -> :class:`Report` (signals, findings, skipped rules);
  a folder, glob or list of paths -> a many-trace report (one report per trace, and for the
  ranks of one job the cross-rank summary). Every report has ``.tables`` (pandas DataFrames).
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


def analyze(trace, select=None, ignore=None, rules=None, *, jobs=None):
    """Analyze a trace: compute the signals, evaluate the rules, rank the findings; or analyze
    several traces (a folder, a glob, a list of paths), as ``tracedoc analyze`` does.

    Args:
        trace: a trace file path (``str`` or ``os.PathLike``) or a :class:`Trace` from
            :func:`load` (loading once and analyzing several times is cheaper); or several
            traces: a folder (the ranks of one job, unrelated traces, or a TensorBoard log
            directory), a glob (``"runs/*.json.gz"``, ``**`` too), or a list or tuple of such
            paths.
        select, ignore: rule selectors (code ``"TD101"``, prefix ``"TD1"`` or name
            ``"dataloader-stall"``).
        rules: the rules to evaluate (default: the built-in ones; add your own with
            ``tracedoc.engine.load_rules(["my_rules/"])``).
        jobs: worker processes for several traces (default: one per CPU, at most one per
            trace); ignored for one trace.

    Returns:
        one trace: a :class:`Report`; findings are ranked by estimated saving (ms per step).
        Several: what ``tracedoc analyze FOLDER`` reports
        (:func:`tracedoc.ranks.executors.analyze_inputs`, ``[tool.tracedoc]`` found from the
        first input): a :class:`tracedoc.report.ranks.MultiRankReport` when the traces are the
        ranks of one job (every trace has a distinct rank), else a
        :class:`tracedoc.report.ranks.MultiTraceReport` (one report per trace). Nothing is
        printed: traces that could not be analyzed are in its ``failed`` (and the ``error``
        column of ``.tables.ranks``), skipped folder entries in ``skipped``.

    Raises:
        TypeError: ``trace`` is neither a path, a list of paths nor a Trace (the message names
            the type only).
        TraceLoadError: the file is not a readable trace; for several, nothing to analyze,
            every trace failed, or (``strict`` in ``[tool.tracedoc]``) any did.
        tracedoc.errors.RuleError: a bad selector or rule file.
    """
    from tracedoc import pipeline
    from tracedoc.settings import Settings
    from tracedoc.trace import Trace

    listed = isinstance(trace, (list, tuple))
    paths = list(trace) if listed else [trace]
    if listed and not paths:
        raise TypeError("analyze() takes a trace path or a tracedoc.Trace, not an empty list")
    if not isinstance(trace, Trace) and not all(isinstance(p, (str, _os.PathLike)) for p in paths):
        raise TypeError(f"analyze() takes a trace path or a tracedoc.Trace, not {type(trace).__name__}")
    many = False
    if not isinstance(trace, Trace):
        from tracedoc.ranks.command import wants_many

        paths = [_os.fspath(p) for p in paths]
        many = wants_many(paths)  # as the command line decides: a folder, a glob, several inputs
        trace = trace if many else paths[0]
    start = None if isinstance(trace, Trace) else paths[0]
    settings = Settings.resolve(start, select=select, ignore=ignore)
    if rules is not None and settings.thresholds:
        from tracedoc.config import apply_thresholds

        rules = apply_thresholds(rules, settings.threshold_map, settings.config_path)
    if many:
        from tracedoc.ranks.executors import analyze_inputs

        return analyze_inputs(paths, settings, jobs=jobs, rules=rules)
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
