"""Reading trace bytes from disk: gzip detected by magic bytes, errors as one line."""

from __future__ import annotations

import gzip
import mmap
import os
import re
import zlib
from pathlib import Path
from typing import Callable

from tracedoc.errors import TraceLoadError

GZIP_MAGIC = b"\x1f\x8b"


def is_gzip(path: str | os.PathLike[str]) -> bool:
    """True when the file starts with the gzip magic bytes (RFC 1952), whatever its name."""
    with open(path, "rb") as fh:
        return fh.read(2) == GZIP_MAGIC


#: Plain files at least this large are memory-mapped rather than read.
MMAP_MIN_BYTES = 16 << 20
_BLANK = re.compile(rb"[ \t\n\r\x0b\x0c]*")

#: Decompression chunk (uncompressed bytes per read).
_CHUNK = 8 << 20


def gzip_size_hint(path: str | os.PathLike[str]) -> int:
    """Uncompressed size from the gzip trailer (ISIZE, RFC 1952: size mod 2**32).

    Raised by multiples of 4 GiB until it is at least the compressed size, so it is a
    good first guess for multi-GB traces too; the reader grows the buffer if it is short.
    """
    with open(path, "rb") as fh:
        fh.seek(0, os.SEEK_END)
        csize = fh.tell()
        if csize < 18:
            return 0
        fh.seek(-4, os.SEEK_END)
        hint = int.from_bytes(fh.read(4), "little")
    while hint < csize:
        hint += 1 << 32
    return hint


def _gunzip(path: Path, progress: Callable[[str], None] | None) -> bytearray:
    """Stream-decompress into one preallocated buffer (no list of chunks joined at the end,
    so the peak is the decompressed size, not twice it)."""
    hint = gzip_size_hint(path)
    buf = bytearray(max(hint, _CHUNK))
    pos = 0
    last = -1
    with gzip.open(path, "rb") as fh:
        while True:
            if pos == len(buf):
                buf.extend(bytes(max(len(buf) // 4, _CHUNK)))
            view = memoryview(buf)
            try:
                n = fh.readinto(view[pos : pos + _CHUNK])
            finally:
                view.release()
            if not n:
                break
            pos += n
            if progress and hint:
                pct = min(99, 100 * pos // hint)
                if pct != last:
                    last = pct
                    progress(f"decompressing {pos / 1e6:,.0f} MB ({pct}%)")
    del buf[pos:]
    return buf


def _read_plain(path: Path) -> bytearray | mmap.mmap:
    """The file's bytes, without a copy where possible: a private copy-on-write memory
    map (pages come straight from the page cache; the few bytes the parallel decoder
    edits around its cut points are copied on write and never reach the file). Small
    files, and files that cannot be mapped, are read into a ``bytearray``."""
    with open(path, "rb") as fh:
        size = os.fstat(fh.fileno()).st_size
        if size >= MMAP_MIN_BYTES:
            try:
                return mmap.mmap(fh.fileno(), 0, access=mmap.ACCESS_COPY)
            except (OSError, ValueError):
                pass
        return bytearray(fh.read())


def read_trace_bytes(
    path: str | os.PathLike[str], progress: Callable[[str], None] | None = None
) -> bytearray | mmap.mmap:
    """Return the (decompressed) JSON bytes of a trace file.

    Args:
        path: a ``.json`` or gzipped trace; gzip is detected from the first two bytes.
        progress: optional callback receiving short status lines while decompressing.

    Returns:
        a buffer: a gzipped file decompressed as a stream into one ``bytearray`` sized
        from the gzip trailer; a large plain file as a private (copy-on-write) memory
        map; a small one as a ``bytearray``. All are writable (see :func:`_read_plain`).

    Raises:
        TraceLoadError: the file is missing, unreadable, a directory, empty, or a
            truncated/corrupt gzip stream.
    """
    p = Path(path)
    try:
        if p.is_dir():
            raise TraceLoadError(str(path), "is a directory, not a trace file")
        gz = is_gzip(p)
        data = _gunzip(p, progress) if gz else _read_plain(p)
    except TraceLoadError:
        raise
    except FileNotFoundError:
        raise TraceLoadError(str(path), "no such file") from None
    except PermissionError:
        raise TraceLoadError(str(path), "permission denied") from None
    except EOFError:
        raise TraceLoadError(
            str(path), "truncated gzip stream (the file ends before the compressed data does)"
        ) from None
    except (gzip.BadGzipFile, zlib.error) as exc:
        raise TraceLoadError(str(path), f"corrupt gzip data ({exc})") from None
    except OSError as exc:
        raise TraceLoadError(str(path), f"cannot read file ({exc.strerror or exc})") from None
    if _BLANK.match(data).end() == len(data):  # stops at the first non-blank byte; strip() would copy
        raise TraceLoadError(str(path), "empty file" if not gz else "empty after gzip decompression")
    return data
