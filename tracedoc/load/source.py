"""Reading trace bytes from disk: gzip detected by magic bytes, errors as one line."""

from __future__ import annotations

import gzip
import os
import zlib
from pathlib import Path

from tracedoc.errors import TraceLoadError

GZIP_MAGIC = b"\x1f\x8b"


def is_gzip(path: str | os.PathLike[str]) -> bool:
    """True when the file starts with the gzip magic bytes (RFC 1952), whatever its name."""
    with open(path, "rb") as fh:
        return fh.read(2) == GZIP_MAGIC


def read_trace_bytes(path: str | os.PathLike[str]) -> bytes:
    """Return the (decompressed) JSON bytes of a trace file.

    Args:
        path: a ``.json`` or gzipped trace; gzip is detected from the first two bytes.

    Raises:
        TraceLoadError: the file is missing, unreadable, a directory, empty, or a
            truncated/corrupt gzip stream.
    """
    p = Path(path)
    try:
        if p.is_dir():
            raise TraceLoadError(str(path), "is a directory, not a trace file")
        gz = is_gzip(p)
        if gz:
            with gzip.open(p, "rb") as fh:
                data = fh.read()
        else:
            data = p.read_bytes()
    except TraceLoadError:
        raise
    except FileNotFoundError:
        raise TraceLoadError(str(path), "no such file") from None
    except PermissionError:
        raise TraceLoadError(str(path), "permission denied") from None
    except EOFError:
        raise TraceLoadError(str(path), "truncated gzip stream (the file ends before the compressed data does)") from None
    except (gzip.BadGzipFile, zlib.error) as exc:
        raise TraceLoadError(str(path), f"corrupt gzip data ({exc})") from None
    except OSError as exc:
        raise TraceLoadError(str(path), f"cannot read file ({exc.strerror or exc})") from None
    if not data.strip():
        raise TraceLoadError(str(path), "empty file" if not gz else "empty after gzip decompression")
    return data
