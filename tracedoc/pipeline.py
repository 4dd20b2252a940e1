"""The one road from a trace to a :class:`~tracedoc.report.model.Report`.

:func:`analyze` takes a trace (a path, or a loaded :class:`~tracedoc.trace.Trace`) and the
:class:`~tracedoc.settings.Settings` of the analysis, resolved once by the caller or here from
the trace's folder; it brings the rules (with the project's threshold overrides), the
selectors, the finding floors and, for a cached file, the signal store. The CLI,
:func:`tracedoc.analyze`, rank jobs, fix-loop trials and ``tracedoc diff`` all come through it.
"""

from __future__ import annotations

import os
from typing import TYPE_CHECKING, Any

from tracedoc.settings import Settings

if TYPE_CHECKING:
    from tracedoc.report.model import Report
    from tracedoc.trace import Trace


def analyze(
    source: str | os.PathLike[str] | Trace,
    settings: Settings | None = None,
    *,
    rules: list[Any] | None = None,
    cache: Any = None,
    signal_store: Any = None,
    **load_options: Any,
) -> Report:
    """Analyze one trace under ``settings``.

    Args:
        source: a trace file path, ``-`` (stdin), or a loaded Trace.
        settings: the options; default :meth:`Settings.resolve` from the trace's folder (the
            working directory for a loaded Trace or stdin).
        rules: the rules to evaluate instead of ``settings.rules()`` (already loaded; the
            selectors and floors of ``settings`` still apply).
        cache: a :class:`tracedoc.cache.FrameCache` for a path (its signal store is used too).
        signal_store: a :class:`tracedoc.cache.SignalStore` for a loaded Trace.
        load_options: passed to :func:`tracedoc.load.load` (``progress``, ``max_bytes``,
            ``workers``).

    Raises:
        tracedoc.errors.TraceLoadError: the file is not a readable trace.
        tracedoc.errors.RuleError: a bad rule file or selector.
        tracedoc.config.ConfigError: a malformed ``[tool.tracedoc]`` table.
    """
    from tracedoc.engine import analyze_trace
    from tracedoc.trace import Trace

    if isinstance(source, Trace):
        trace = source
        if settings is None:
            settings = Settings.resolve(None)
    else:
        from tracedoc.load import load

        if settings is None:
            settings = Settings.resolve(source)
        load_options.setdefault("max_bytes", settings.max_trace_bytes)
        trace = load(source, cache=cache, **load_options)
        if cache is not None and signal_store is None:
            signal_store = cache.signals(source)
    return analyze_trace(
        trace,
        rules=rules if rules is not None else settings.rules(),
        select=list(settings.select) if settings.select is not None else None,
        ignore=list(settings.ignore) if settings.ignore is not None else None,
        min_saving_ms=settings.min_saving_ms,
        min_saving_share=settings.min_saving_share,
        signal_store=signal_store,
    )
