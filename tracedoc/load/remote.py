"""Reading traces through fsspec: ``s3://``, ``gs://``, ``file://``, ``memory://`` and any
other protocol whose fsspec backend is installed (``s3fs``, ``gcsfs``, ...).

:func:`tracedoc.load.load` calls :func:`read_remote_bytes` for a path that starts with
``PROTOCOL://``; local paths keep the local reader (:mod:`tracedoc.load.source`). The
bytes are streamed: read in 8 MiB chunks (a gzipped trace decompressed as it arrives)
into one growing buffer, so nothing holds the compressed file and the JSON at once
beyond one chunk. In a rank directory each worker reads its own rank this way; the
client only lists the folder.
"""

from __future__ import annotations

import re
import zlib
from typing import Callable

from tracedoc.errors import TraceLoadError, install_hint

_CHUNK = 8 << 20
_BLANK = re.compile(rb"[ \t\n\r\x0b\x0c]*")
#: Refuse a remote object larger than this (uncompressed), instead of exhausting memory.
MAX_BYTES = 64 << 30


def _fs(url: str):
    try:
        import fsspec
    except ImportError:  # pragma: no cover - fsspec is a dependency of the dask extra
        raise TraceLoadError(url, f"reading URLs needs fsspec ({install_hint('dask')})") from None
    try:
        fs, path = fsspec.core.url_to_fs(url)
    except (ImportError, ValueError) as exc:
        raise TraceLoadError(url, f"no fsspec backend for this URL ({exc})") from None
    return fs, path


def _unstrip(url: str, fs, path: str) -> str:
    """Give a listed path its protocol back (``memory://x``), so workers can open it."""
    if "://" in path:
        return path
    protocol = url.split("://", 1)[0]
    return fs.unstrip_protocol(path) if hasattr(fs, "unstrip_protocol") else f"{protocol}://{path}"


def list_remote(url: str) -> tuple[list[str], bool]:
    """The files a URL names: a glob's matches, a folder's files (one level), or itself.

    Returns:
        ``(urls, is_folder)``; each URL carries its protocol.

    Raises:
        TraceLoadError: nothing exists at the URL, or the backend cannot be reached.
    """
    fs, path = _fs(url)
    try:
        if any(c in path for c in "*?["):
            return sorted(_unstrip(url, fs, p) for p in fs.glob(path) if not fs.isdir(p)), False
        if fs.isdir(path):
            entries = fs.ls(path, detail=True)
            files = sorted(_unstrip(url, fs, e["name"]) for e in entries if e.get("type") != "directory")
            return files, True
        if fs.exists(path):
            return [url], False
    except OSError as exc:
        raise TraceLoadError(url, f"cannot list ({exc})") from None
    raise TraceLoadError(url, "no such file or directory")


def read_remote_bytes(url: str, progress: Callable[[str], None] | None = None) -> bytearray:
    """The (decompressed) JSON bytes of the trace at ``url``, read as a stream.

    gzip is detected by its magic bytes (RFC 1952), as for local files.

    Raises:
        TraceLoadError: missing object, unreadable, truncated or corrupt gzip, empty,
            or larger than :data:`MAX_BYTES` once decompressed.
    """
    fs, path = _fs(url)
    out = bytearray()
    try:
        with fs.open(path, "rb") as fh:
            first = fh.read(_CHUNK)
            gz = first[:2] == b"\x1f\x8b"
            d = zlib.decompressobj(16 + zlib.MAX_WBITS) if gz else None
            chunk = first
            while chunk:
                if d is not None:
                    data = d.decompress(chunk)
                    while d.unconsumed_tail:  # pragma: no cover - decompress without max_length keeps none
                        data += d.decompress(d.unconsumed_tail)
                    out += data
                    if d.eof and d.unused_data:  # a second gzip member: continue with it
                        rest = d.unused_data
                        d = zlib.decompressobj(16 + zlib.MAX_WBITS)
                        out += d.decompress(rest)
                else:
                    out += chunk
                if len(out) > MAX_BYTES:
                    raise TraceLoadError(url, f"larger than {MAX_BYTES >> 30} GiB once decompressed")
                if progress:
                    progress(f"reading {len(out) / 1e6:,.0f} MB")
                chunk = fh.read(_CHUNK)
            if d is not None and not d.eof:
                raise TraceLoadError(url, "truncated gzip stream (the file ends before the compressed data does)")
    except TraceLoadError:
        raise
    except FileNotFoundError:
        raise TraceLoadError(url, "no such file") from None
    except zlib.error as exc:
        raise TraceLoadError(url, f"corrupt gzip data ({exc})") from None
    except OSError as exc:
        raise TraceLoadError(url, f"cannot read ({exc})") from None
    if _BLANK.match(out).end() == len(out):  # stops at the first non-blank byte
        raise TraceLoadError(url, "empty file" if not gz else "empty after gzip decompression")
    return out
