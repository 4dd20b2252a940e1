"""Reading trace bytes: one open, gzip detected from the first bytes, a size limit, errors as one line.

What can be read (see the README's "Limits and failure behaviour"):

* a regular file, opened once: a large plain file is memory-mapped, a gzipped one is
  decompressed as a stream;
* a FIFO or a pipe (``tracedoc analyze <(zcat t.json.gz)``, ``/dev/stdin``) and ``-``
  (standard input): read once as a stream;
* nothing else: a directory, a character or block device (``/dev/zero``,
  ``/dev/urandom``) or a socket is refused before it is read.

Every input is bounded by a limit on its JSON bytes (after decompression):
:data:`DEFAULT_MAX_TRACE_BYTES`, raised with ``max_bytes=`` or the environment variable
``TRACEDOC_MAX_TRACE_BYTES``. The gzip trailer's size field (ISIZE) is never used to size a
buffer: it is the size modulo 2**32 of the *last* member only, and garbage in a corrupt file.
"""

from __future__ import annotations

import mmap
import os
import re
import stat
import sys
import zlib
from typing import IO, Callable

from tracedoc.errors import TraceLoadError

GZIP_MAGIC = b"\x1f\x8b"

#: Default limit on a trace's JSON bytes (after gzip decompression): 4 GiB. Parsing needs
#: several times the JSON size in memory, so a larger trace would not fit a usual machine anyway.
DEFAULT_MAX_TRACE_BYTES = 4 << 30
#: Environment variable that overrides :data:`DEFAULT_MAX_TRACE_BYTES` (bytes, or with a
#: ``K``/``M``/``G``/``T`` suffix, powers of 1024).
MAX_BYTES_ENV = "TRACEDOC_MAX_TRACE_BYTES"
#: The name standard input is shown as in messages.
STDIN_NAME = "<stdin>"

#: Plain files at least this large are memory-mapped rather than read.
MMAP_MIN_BYTES = 16 << 20
_BLANK = re.compile(rb"[ \t\n\r\x0b\x0c]*")

#: Decompression chunk: at most this many uncompressed bytes per step (bounds the memory a
#: single step can take, whatever the compression ratio).
_CHUNK = 8 << 20
#: Compressed bytes read from the file per step.
_READ = 1 << 20

_SIZE_RE = re.compile(r"^\s*(\d+)\s*([kmgt]?)i?b?\s*$", re.IGNORECASE)
_UNITS = {"": 0, "k": 10, "m": 20, "g": 30, "t": 40}


def parse_size(text: str) -> int:
    """Parse a byte count: ``"123"``, ``"64M"``, ``"2GiB"`` (suffixes are powers of 1024).

    Raises:
        ValueError: not a non-negative whole number with an optional K/M/G/T suffix, or zero.
    """
    m = _SIZE_RE.match(str(text))
    if not m:
        raise ValueError(f"invalid size {text!r}: expected bytes, or a number with K, M, G or T")
    value = int(m.group(1)) << _UNITS[m.group(2).lower()]
    if value <= 0:
        raise ValueError(f"invalid size {text!r}: must be positive")
    return value


def max_trace_bytes(max_bytes: int | None = None) -> int:
    """The size limit in force: ``max_bytes`` if given, else :data:`DEFAULT_MAX_TRACE_BYTES`.
    (``$TRACEDOC_MAX_TRACE_BYTES`` is read once, by :class:`tracedoc.settings.Environment`,
    and reaches the loader as ``max_bytes``.)

    Raises:
        ValueError: ``max_bytes`` is not positive.
    """
    if max_bytes is not None:
        if max_bytes <= 0:
            raise ValueError("max_bytes must be positive")
        return int(max_bytes)
    return DEFAULT_MAX_TRACE_BYTES


def _fmt_bytes(n: int) -> str:
    for unit, shift in (("GiB", 30), ("MiB", 20), ("KiB", 10)):
        if n >= 1 << shift:
            return f"{n / (1 << shift):.4g} {unit}"
    return f"{n} bytes"


def _too_large(name: str, limit: int, what: str = "") -> TraceLoadError:
    return TraceLoadError(
        name,
        f"trace is larger than the {_fmt_bytes(limit)} limit{what} "
        f"(raise it with --max-trace-bytes or ${MAX_BYTES_ENV})",
    )


def _regular(path: str | os.PathLike[str]) -> bool:
    try:
        return stat.S_ISREG(os.stat(path).st_mode)
    except (OSError, ValueError):
        return False


def is_gzip(path: str | os.PathLike[str]) -> bool:
    """True when a regular file starts with the gzip magic bytes (RFC 1952), whatever its name.

    Anything that is not a regular file (a FIFO, a device) gives False without being opened:
    opening a FIFO would block, and reading from it would take bytes from the one reader.
    """
    if not _regular(path):
        return False
    with open(path, "rb") as fh:
        return fh.read(2) == GZIP_MAGIC


def gzip_size_hint(path: str | os.PathLike[str]) -> int:
    """Uncompressed size from a regular gzip file's trailer (ISIZE, RFC 1952: size mod 2**32).

    Only a display hint (progress percentages): it is the last member's size only, and
    garbage in a corrupt file, so nothing is ever allocated from it. Raised by multiples of
    4 GiB until it is at least the compressed size; 0 for a file that is not regular.
    """
    if not _regular(path):
        return 0
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


_JSON_START = frozenset(b'{["-0123456789tfn')
_CONTROL = re.compile(rb"[\x00-\x08\x0b\x0c\x0e-\x1f]")
_SNIFF_BYTES = 64 << 10


class _Sniffer:
    """Check the start of a trace as soon as there is one, so that a stream of zeros or
    random bytes is refused after its first chunk rather than read up to the size limit.

    Call :meth:`check` with the bytes read so far, as they grow; each call scans only what
    it has not seen (a stream of blanks costs one pass, not one per chunk).
    """

    def __init__(self, name: str) -> None:
        self.name = name
        self.pos = 0  # bytes before this are blanks
        self.done = False

    def check(self, buf: bytes | bytearray) -> None:
        """Scan the bytes of ``buf`` not seen before.

        Raises:
            TraceLoadError: the first non-blank byte cannot start a JSON value, or the
                64 KiB from there hold a control byte JSON text never contains (RFC 8259:
                only tab, line feed and carriage return, and only between tokens).
        """
        if self.done:
            return
        i = _BLANK.match(buf, self.pos).end()
        self.pos = i
        if i == len(buf):
            return
        if buf[i] not in _JSON_START:
            if bytes(buf[i : i + 2]) == GZIP_MAGIC:
                raise TraceLoadError(self.name, "gzip inside gzip: the data was compressed twice; gunzip it once")
            raise TraceLoadError(self.name, f"invalid JSON (starts with byte 0x{buf[i]:02x}; a trace starts with '{{')")
        m = _CONTROL.search(buf, i, i + _SNIFF_BYTES)
        if m:
            raise TraceLoadError(self.name, f"invalid JSON (control byte 0x{buf[m.start()]:02x} at byte {m.start()})")
        self.done = len(buf) >= i + _SNIFF_BYTES


def _read_stream_bytes(fh: IO[bytes], limit: int, name: str, prefix: bytes = b"") -> bytearray:
    """Read a raw stream to its end after ``prefix`` (bytes already read), at most ``limit``
    bytes in all (one more is read to detect excess), refusing non-JSON early."""
    buf = bytearray(prefix)
    sniffer = _Sniffer(name)
    sniffer.check(buf)
    while True:
        chunk = fh.read(min(_READ, limit + 1 - len(buf)))
        if not chunk:
            return buf
        buf += chunk
        sniffer.check(buf)
        if len(buf) > limit:
            raise _too_large(name, limit)


class _Gunzip:
    """Incremental gzip decoder: multi-member streams (RFC 1952 section 2.2), zero padding
    after a member accepted as :mod:`gzip` does, every member's CRC-32 and size checked by zlib.
    Output grows a ``bytearray`` (geometric growth; on Linux large reallocations move pages
    with ``mremap``, so the peak stays near the decompressed size)."""

    def __init__(self, name: str, limit: int, progress: Callable[[str], None] | None, hint: int) -> None:
        self.name, self.limit, self.progress, self.hint = name, limit, progress, hint
        self.out = bytearray()
        self.d: zlib._Decompress | None = zlib.decompressobj(31)
        self.pending = b""  # compressed bytes between members, before the next header is seen
        self.last_pct = -1
        self.sniffer = _Sniffer(name)

    def feed(self, data: bytes) -> None:
        while data:
            if self.d is None:  # between members: skip zero padding, then expect a new header
                data = self.pending + data
                self.pending = b""
                stripped = data.lstrip(b"\x00")
                if not stripped:
                    return
                if len(stripped) < 2:
                    self.pending = stripped
                    return
                if stripped[:2] != GZIP_MAGIC:
                    raise TraceLoadError(self.name, "trailing garbage after the gzip data")
                data = stripped
                self.d = zlib.decompressobj(31)
            d = self.d
            while True:
                room = min(_CHUNK, self.limit + 1 - len(self.out))
                chunk = d.decompress(data, room)
                self.out += chunk
                if len(self.out) > self.limit:
                    raise _too_large(self.name, self.limit, " after gzip decompression")
                self.sniffer.check(self.out)
                self._report()
                data = d.unconsumed_tail
                if d.eof or (not data and len(chunk) < room):  # output not cut short: all consumed
                    break
            if d.eof:
                data = d.unused_data
                self.d = None
            else:
                return

    def finish(self) -> bytearray:
        """The decompressed bytes once the input has ended.

        Raises:
            EOFError: the input ended inside a member (truncated file).
            TraceLoadError: bytes after the last member that are not a gzip member.
        """
        if self.d is not None and not self.d.eof:
            raise EOFError
        if self.pending:
            raise TraceLoadError(self.name, "trailing garbage after the gzip data")
        return self.out

    def _report(self) -> None:
        if self.progress and self.hint:
            pct = min(99, 100 * len(self.out) // self.hint)
            if pct != self.last_pct:
                self.last_pct = pct
                self.progress(f"decompressing {len(self.out) / 1e6:,.0f} MB ({pct}%)")


def _gunzip_stream(
    fh: IO[bytes], first: bytes, name: str, limit: int, progress: Callable[[str], None] | None, hint: int = 0
) -> bytearray:
    g = _Gunzip(name, limit, progress, hint)
    g.feed(first)
    while True:
        chunk = fh.read(_READ)
        if not chunk:
            break
        g.feed(chunk)
    return g.finish()


def _read_open(
    fh: IO[bytes], name: str, regular: bool, size: int, limit: int, progress: Callable[[str], None] | None
) -> tuple[bytearray | mmap.mmap, bool]:
    """Read an open file or stream once; returns ``(bytes, gzipped)``."""
    first = fh.read(2)
    if first[:1] == GZIP_MAGIC[:1] and len(first) == 1:  # a stream may deliver one byte at a time
        first += fh.read(1)
    if first[:2] == GZIP_MAGIC:
        hint = 0
        if regular and size >= 18:
            fh.seek(-4, os.SEEK_END)
            hint = int.from_bytes(fh.read(4), "little")
            while hint < size:
                hint += 1 << 32
            fh.seek(2)
        return _gunzip_stream(fh, first, name, limit, progress, hint), True
    _Sniffer(name).check(first)
    if regular:
        if size > limit:
            raise _too_large(name, limit)
        if size >= MMAP_MIN_BYTES:
            try:
                return mmap.mmap(fh.fileno(), 0, access=mmap.ACCESS_COPY), False
            except (OSError, ValueError):
                pass
        fh.seek(0)
        return _read_stream_bytes(fh, limit, name), False  # bounded: the file may have grown since stat
    return _read_stream_bytes(fh, limit, name, prefix=first), False


def read_trace_bytes(
    path: str | os.PathLike[str],
    progress: Callable[[str], None] | None = None,
    max_bytes: int | None = None,
) -> bytearray | mmap.mmap:
    """Return the (decompressed) JSON bytes of a trace, reading the input exactly once.

    Args:
        path: a ``.json`` or gzipped trace file, a FIFO or pipe, or ``"-"`` for standard
            input; gzip is detected from the first two bytes, whatever the name.
        progress: optional callback receiving short status lines while decompressing.
        max_bytes: limit on the JSON bytes (after decompression); default
            :func:`max_trace_bytes` (``$TRACEDOC_MAX_TRACE_BYTES`` or 4 GiB).

    Returns:
        a writable buffer: a large plain regular file as a private (copy-on-write) memory
        map, whose few bytes the parallel decoder edits never reach the file; anything
        else as a ``bytearray`` (a gzipped input decompressed as a stream). A stream cannot
        be read twice: see :func:`rereadable`.

    Raises:
        TraceLoadError: one line naming the input (escaped) and the problem: missing,
            unreadable, a directory, a device or socket, empty, larger than the limit, or a
            truncated / corrupt gzip stream.
    """
    limit = max_trace_bytes(max_bytes)
    is_stdin = str(path) == "-"
    name = STDIN_NAME if is_stdin else str(path)  # TraceLoadError escapes it
    try:
        if is_stdin:
            fh = os.fdopen(os.dup(sys.stdin.fileno()), "rb", buffering=0)
            if fh.isatty():
                fh.close()
                raise TraceLoadError(name, "standard input is a terminal; pipe a trace into it")
        else:
            st = os.stat(path)
            mode = st.st_mode
            if stat.S_ISDIR(mode):
                raise TraceLoadError(name, "is a directory, not a trace file")
            if not (stat.S_ISREG(mode) or stat.S_ISFIFO(mode)):
                kind = (
                    "a character device"
                    if stat.S_ISCHR(mode)
                    else "a block device"
                    if stat.S_ISBLK(mode)
                    else "a socket"
                    if stat.S_ISSOCK(mode)
                    else "not a regular file"
                )
                raise TraceLoadError(name, f"is {kind}; expected a trace file, a FIFO or '-' for standard input")
            fh = open(path, "rb", buffering=0)  # noqa: SIM115 (closed below)
        with fh:
            st = os.fstat(fh.fileno())
            regular = stat.S_ISREG(st.st_mode)
            data, gz = _read_open(fh, name, regular, st.st_size, limit, progress)
    except TraceLoadError:
        raise
    except FileNotFoundError:
        raise TraceLoadError(name, "no such file") from None
    except PermissionError:
        raise TraceLoadError(name, "permission denied") from None
    except EOFError:
        raise TraceLoadError(name, "truncated gzip stream (the file ends before the compressed data does)") from None
    except zlib.error as exc:
        raise TraceLoadError(name, f"corrupt gzip data ({exc})") from None
    except MemoryError:
        raise TraceLoadError(name, "out of memory while reading the trace") from None
    except (OSError, ValueError) as exc:
        raise TraceLoadError(name, f"cannot read file ({getattr(exc, 'strerror', None) or exc})") from None
    if _BLANK.match(data).end() == len(data):  # stops at the first non-blank byte; strip() would copy
        raise TraceLoadError(name, "empty file" if not gz else "empty after gzip decompression")
    return data


def rereadable(path: str | os.PathLike[str]) -> bool:
    """True when ``path`` is a regular file that can be read a second time."""
    return str(path) != "-" and _regular(path)


__all__ = [
    "DEFAULT_MAX_TRACE_BYTES",
    "MAX_BYTES_ENV",
    "gzip_size_hint",
    "is_gzip",
    "max_trace_bytes",
    "parse_size",
    "read_trace_bytes",
    "rereadable",
]
