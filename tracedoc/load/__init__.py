"""Loading a Kineto / Chrome trace file into a :class:`tracedoc.trace.Trace`.

Everything that reads trace files goes through :func:`load`. Two engines give
identical traces (``tests/test_fast_loader.py``):

* ``"fast"`` (default): typed, field-selective msgspec decoding and column-wise
  numpy (:mod:`tracedoc.load.fast`); hands over to the reference engine for input it
  cannot take as it is, so errors read the same.
* ``"reference"``: orjson into Python objects and one loop over the events
  (:mod:`tracedoc.load.reference`); the definition of the semantics.
"""

from __future__ import annotations

import gc
import os
import re
from typing import TYPE_CHECKING, Callable

from tracedoc.load.reference import collect_events, parse_document
from tracedoc.load.source import DEFAULT_MAX_TRACE_BYTES, MAX_BYTES_ENV, STDIN_NAME, read_trace_bytes, rereadable

if TYPE_CHECKING:
    from tracedoc.cache import FrameCache
    from tracedoc.trace import Trace

ENGINES = ("fast", "reference")
_URL = re.compile(r"^[a-zA-Z][a-zA-Z0-9+.-]*://")


def _import_frame_stage() -> None:
    """Import pandas and the frame builder (about 0.3 s). The fast engine calls this right
    after it has started its decode workers (a fresh process for a streamed file, forked ones
    for one buffer), so the import overlaps their decoding."""
    import tracedoc.load.build  # noqa: F401  (imported for its side effect: the import itself)


def _read_bytes(p: str, progress: Callable[[str], None] | None = None, max_bytes: int | None = None):
    """The hook between local files (and streams) and fsspec URLs (``PROTOCOL://...``)."""
    if _URL.match(p):
        from tracedoc.load.remote import read_remote_bytes

        return read_remote_bytes(p, progress)
    return read_trace_bytes(p, progress, max_bytes)


def load(
    path: str | os.PathLike[str],
    engine: str = "fast",
    progress: Callable[[str], None] | None = None,
    workers: int | None = None,
    max_bytes: int | None = None,
    cache: FrameCache | None = None,
) -> Trace:
    """Load a PyTorch Profiler trace (``.json`` or gzipped, detected by magic bytes).

    Categories are normalised across PyTorch versions, device properties are read
    from ``deviceProperties`` or ``computeProperties``, and all timestamps are rebased
    to the trace start (µs, float64).

    Args:
        path: the trace file, a FIFO or pipe (read once), or ``"-"`` for standard input.
        engine: ``"fast"`` (default) or ``"reference"``; both give identical traces.
        progress: optional callback receiving short status lines (for a progress display).
        workers: processes the fast engine may decode a large trace in (Linux: a streamed file in
            this process and one fresh worker process, one buffer in forked workers);
            default: the CPUs this process may use; 1 decodes in this process only. A
            stream (FIFO, pipe, standard input) is always decoded in this process. A
            regular file is read and decoded part by part (never held whole:
            :func:`tracedoc.load.fast.load_stream`), by this process and at most one worker.
        max_bytes: limit on the trace's JSON bytes after decompression; default
            ``$TRACEDOC_MAX_TRACE_BYTES`` or 1 GiB
            (:data:`tracedoc.load.source.DEFAULT_MAX_TRACE_BYTES`).
        cache: a :class:`tracedoc.cache.FrameCache`: frames come from it when its entry
            for this file is current, and are stored in it after a load (default: none).

    A path with a protocol (``s3://``, ``file://``, ``memory://``) is read through fsspec
    (:mod:`tracedoc.load.remote`).

    Raises:
        tracedoc.errors.TraceLoadError: with a one-line message naming the file and the
            problem (missing file, a device, over the size limit, truncated gzip, invalid
            JSON, not a trace, events of the wrong type, no profiler events).
        ValueError: unknown ``engine``.
    """
    if engine not in ENGINES:
        raise ValueError(f"unknown loader engine {engine!r}; expected one of {ENGINES}")
    if cache is not None:
        return cache.load(path, lambda: load(path, engine, progress, workers, max_bytes))
    src = str(path)
    p = STDIN_NAME if src == "-" else src  # the name errors and the Trace carry
    if progress:
        progress("reading")
    if engine == "fast" and src != "-" and not _URL.match(src) and rereadable(src):
        trace = _load_streaming(src, p, progress, workers, max_bytes)
        if trace is not None:
            return trace
    data = _read_bytes(src, progress, max_bytes)
    # a stream cannot be read again: keep its bytes for the reference loader's handover
    keep = None if rereadable(src) else data
    if keep is not None:
        workers = 1
    if engine == "fast":
        from tracedoc.load.fast import Fallback, collect_columns, decode_document, parallel_parts, parse_parallel

        gc_was_enabled = gc.isenabled()
        gc.disable()  # millions of new objects, no cycles: the collector would only rescan them
        try:
            parts = parallel_parts(data, workers) if workers != 1 else 1
            if progress:
                progress(
                    f"decoding {len(data) / 1e6:,.0f} MB of JSON" + (f" in {parts} processes" if parts > 1 else "")
                )
            cols = None
            if parts > 1:
                holder = [data]
                del data
                try:
                    doc, cols = parse_parallel(holder, parts, after_fork=_import_frame_stage)  # releases the buffer
                except Fallback:  # no clean cut, or a part needs the reference loader: one piece
                    data = holder[0] if holder[0] is not None else _read_bytes(src, None, max_bytes)
                del holder
            if cols is None:
                doc, events = decode_document(data, progress)
                del data  # the events no longer refer to the bytes: free them before building columns
                cols = collect_columns(events, progress)
                del events
            if progress:
                progress("building frames")
            from tracedoc.load.build import build_trace

            return build_trace(cols, doc, p)
        except Fallback:
            pass
        finally:
            if gc_was_enabled:
                gc.enable()
        if "data" not in locals():
            data = keep if keep is not None else _read_bytes(src, None, max_bytes)
    del keep
    return _load_reference(data, p)


def _load_streaming(
    src: str, p: str, progress: Callable[[str], None] | None, workers: int | None, max_bytes: int | None
) -> Trace | None:
    """A regular file decoded as a stream (:func:`tracedoc.load.fast.load_stream`): the JSON is
    never held whole, nor all its decoded events. None when anything is not as the stream
    needs it (a part the typed path cannot take, an unproven cut, an error while reading): the
    caller then reads the file again as one buffer, whose path words every error."""
    import zlib

    from tracedoc.errors import TraceLoadError
    from tracedoc.load.fast import Fallback, load_stream
    from tracedoc.load.source import iter_trace_blocks

    gc_was_enabled = gc.isenabled()
    gc.disable()  # millions of new objects, no cycles: the collector would only rescan them
    try:
        try:
            blocks = iter_trace_blocks(src, progress, max_bytes)
            doc, cols = load_stream(blocks, workers, after_fork=_import_frame_stage, progress=progress)
        except (Fallback, TraceLoadError, OSError, ValueError, EOFError, MemoryError, zlib.error):
            return None
        if progress:
            progress("building frames")
        from tracedoc.heap import release_free_memory
        from tracedoc.load.build import build_trace

        trace = build_trace(cols, doc, p)
        del cols, doc
        release_free_memory()  # the decoded parts' memory, freed but kept by malloc
        return trace
    finally:
        if gc_was_enabled:
            gc.enable()


def _load_reference(data, path: str) -> Trace:
    from tracedoc.load.build import build_trace

    if not isinstance(data, (bytes, bytearray)):
        data = memoryview(data)  # any other buffer: orjson reads buffers through memoryview
    doc = parse_document(data, path)
    del data
    sink = collect_events(doc["traceEvents"], path)
    return build_trace(sink, doc, path)


__all__ = ["load", "ENGINES", "DEFAULT_MAX_TRACE_BYTES", "MAX_BYTES_ENV"]
