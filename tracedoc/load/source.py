"""Reading trace bytes: one open, gzip detected from the first bytes, a size limit, errors as one line.

What can be read (see the README's "Limits and failure behaviour"):

* a regular file, opened once: a plain file is read into one buffer of its size (never
  memory-mapped: a mapped file truncated while it is read kills the process with SIGBUS),
  a gzipped one is decompressed as a stream;
* a FIFO or a pipe (``tracedoc analyze <(zcat t.json.gz)``, ``/dev/stdin``) and ``-``
  (standard input): read once as a stream;
* nothing else: a directory, a character or block device (``/dev/zero``,
  ``/dev/urandom``) or a socket is refused before it is read.

Every input is bounded by a limit on its JSON bytes (after decompression):
:data:`DEFAULT_MAX_TRACE_BYTES`, raised with ``max_bytes=`` or the environment variable
``TRACEDOC_MAX_TRACE_BYTES``. The gzip trailer's size field (ISIZE) is never used to size a
buffer: it is the size modulo 2**32 of the *last* member only, and garbage in a corrupt file.

Inside :func:`record_reads`, each regular file read to its end is recorded with the SHA-256 of
exactly the bytes read (:class:`ReadRecord`): the frame cache keys its entry on the bytes the
trace was built from, without reading the file twice. :func:`file_sha256` hashes a file the
same way; :func:`read_regular` reads a small file (the cache's own) as a regular file only.
"""

from __future__ import annotations

import contextlib
import contextvars
import hashlib
import os
import re
import stat
import sys
import zlib
from dataclasses import dataclass
from typing import IO, Callable, Iterator

from tracedoc.errors import TraceLoadError

GZIP_MAGIC = b"\x1f\x8b"

#: Default limit on a trace's JSON bytes (after gzip decompression): 1 GiB. A regular file is
#: decoded as a stream (never held whole); ``tracedoc analyze`` then needs about 1.1 (a real
#: trace's large events) to 3.5 (many small events) bytes of memory per JSON byte, most of it the
#: analysis's (``benchmarks/run.py``, benchmarks/RESULTS.md, 2026-11-27), so 1 GiB takes about
#: 1.2 to 4 GB; a pipe, standard input or a URL is held whole, about 1 byte per JSON byte more.
#: Raise it (``--max-trace-bytes``) where the memory is there.
DEFAULT_MAX_TRACE_BYTES = 1 << 30
#: Environment variable that overrides :data:`DEFAULT_MAX_TRACE_BYTES` (bytes, or with a
#: ``K``/``M``/``G``/``T`` suffix, powers of 1024).
MAX_BYTES_ENV = "TRACEDOC_MAX_TRACE_BYTES"
#: The name standard input is shown as in messages.
STDIN_NAME = "<stdin>"

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
        return _isize_hint(fh.fileno(), os.fstat(fh.fileno()).st_size)


def _isize_hint(fd: int, size: int) -> int:
    """:func:`gzip_size_hint` of an open regular file of ``size`` bytes, read with ``pread``
    (the file's position does not move); 0 under 18 bytes (no room for a gzip trailer)."""
    if size < 18:
        return 0
    hint = int.from_bytes(os.pread(fd, 4, size - 4), "little")
    while hint < size:
        hint += 1 << 32
    return hint


#: The first bytes of an SQLite database (what ``nsys export --type sqlite`` writes).
SQLITE_MAGIC = b"SQLite format 3\x00"
#: Profiler outputs that are not Kineto JSON, known by the end of their name (case-insensitive).
FOREIGN_SUFFIXES = (
    (".nsys-rep", "Nsight Systems report (.nsys-rep)"),
    (".qdrep", "Nsight Systems report (.qdrep)"),
    (".qdstrm", "Nsight Systems capture (.qdstrm)"),
    (".ncu-rep", "Nsight Compute report (.ncu-rep)"),
    (".xplane.pb", "XPlane profile (.xplane.pb, TensorFlow/JAX profiler)"),
    (".sqlite", "SQLite database (.sqlite, e.g. an Nsight Systems export)"),
)
#: What to do instead, said after the format's name.
FOREIGN_HINT = (
    "tracedoc reads PyTorch Profiler (Kineto) JSON traces; record one with torch.profiler "
    "(export_chrome_trace or tensorboard_trace_handler)"
)


def foreign_format(name: str, head: bytes | bytearray = b"") -> str | None:
    """The name of a profiler output that is not a Kineto JSON trace, from its file name
    (:data:`FOREIGN_SUFFIXES`) or its first bytes (an SQLite database: :data:`SQLITE_MAGIC`);
    None for anything else. ``head``: the first non-blank bytes, if read."""
    lower = str(name).lower()
    if bytes(head[: len(SQLITE_MAGIC)]) == SQLITE_MAGIC:
        return "Nsight Systems SQLite export (.sqlite)" if lower.endswith(".sqlite") else "SQLite database"
    for suffix, what in FOREIGN_SUFFIXES:
        if lower.endswith(suffix) and suffix != ".sqlite":  # a .sqlite name alone: its bytes decide
            return what
    return None


def foreign_error(name: str, what: str) -> TraceLoadError:
    """The one-line error for a profiler output of another format (:func:`foreign_format`)."""
    return TraceLoadError(name, f"{what}: {FOREIGN_HINT}")


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
            head = bytes(buf[i : i + len(SQLITE_MAGIC)])
            if len(head) < len(SQLITE_MAGIC) and SQLITE_MAGIC.startswith(head):
                return  # perhaps an SQLite database: wait for its whole magic
            what = foreign_format(self.name, head)
            if what:
                raise foreign_error(self.name, what)
            if bytes(buf[i : i + 2]) == GZIP_MAGIC:
                raise TraceLoadError(self.name, "gzip inside gzip: the data was compressed twice; gunzip it once")
            raise TraceLoadError(self.name, f"invalid JSON (starts with byte 0x{buf[i]:02x}; a trace starts with '{{')")
        m = _CONTROL.search(buf, i, i + _SNIFF_BYTES)
        if m:
            raise TraceLoadError(self.name, f"invalid JSON (control byte 0x{buf[m.start()]:02x} at byte {m.start()})")
        self.done = len(buf) >= i + _SNIFF_BYTES


def _read_stream_bytes(fh: IO[bytes], limit: int, name: str, prefix: bytes | bytearray = b"") -> bytearray:
    """Read a raw stream to its end after ``prefix`` (bytes already read; a bytearray is
    extended in place, not copied), at most ``limit`` bytes in all (one more is read to
    detect excess), refusing non-JSON early."""
    buf = prefix if isinstance(prefix, bytearray) else bytearray(prefix)
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


def _fill(fh: IO[bytes], buf: bytearray, pos: int, sniffer: _Sniffer | None = None) -> int:
    """Read into ``buf[pos:]`` until it is full or the file ends; returns the bytes now in ``buf``.
    ``sniffer`` checks each chunk as it arrives (a file of zeros is refused after one chunk)."""
    with memoryview(buf) as mv:
        while pos < len(buf):
            n = fh.readinto(mv[pos : pos + _CHUNK])
            if not n:
                break
            pos += n
            if sniffer is not None and not sniffer.done:
                sniffer.check(mv[:pos])
    return pos


def _read_regular_bytes(fh: IO[bytes], name: str, size: int, limit: int, first: bytes) -> bytearray:
    """A plain regular file, of ``size`` bytes when opened, after its ``first`` bytes: read
    into one buffer of that size (one copy of the bytes, as a memory map would hold, and
    no SIGBUS when the file is truncated meanwhile: the buffer just ends sooner). A file
    that grew meanwhile is read on to its end, within ``limit``."""
    if size > limit:
        raise _too_large(name, limit)
    buf = bytearray(max(size, len(first)))
    buf[: len(first)] = first
    n = _fill(fh, buf, len(first), _Sniffer(name))
    if n < len(buf):
        del buf[n:]  # shrank while read
        return buf
    return _read_stream_bytes(fh, limit, name, prefix=buf)


class _Digesting:
    """A raw file whose bytes, as they are read in order, are added to a SHA-256."""

    def __init__(self, fh: IO[bytes]) -> None:
        self.fh = fh
        self.hash = hashlib.sha256()

    def read(self, n: int = -1) -> bytes:
        data = self.fh.read(n)
        self.hash.update(data)
        return data

    def readinto(self, b: memoryview) -> int:
        n = self.fh.readinto(b) or 0
        self.hash.update(b[:n])
        return n

    def fileno(self) -> int:
        return self.fh.fileno()


@dataclass(frozen=True)
class ReadRecord:
    """A regular file :func:`read_trace_bytes` read to its end inside :func:`record_reads`.

    Attributes:
        path: its real path (``os.path.realpath``).
        size, mtime_ns: its ``fstat`` when it was opened (bytes; ns since the epoch).
        sha256: SHA-256 (hex) of exactly the bytes read, compressed ones for a gzipped file.
    """

    path: str
    size: int
    mtime_ns: int
    sha256: str


_RECORDS: contextvars.ContextVar[list[ReadRecord] | None] = contextvars.ContextVar("tracedoc_reads", default=None)


@contextlib.contextmanager
def record_reads() -> Iterator[list[ReadRecord]]:
    """Within the block, record every regular file :func:`read_trace_bytes` reads to its end
    (in this thread or task), in the list yielded, oldest first. Hashing costs about
    0.6 ms per MB (SHA-256; see ``benchmarks/cache_key.py``), paid only inside the block."""
    records: list[ReadRecord] = []
    token = _RECORDS.set(records)
    try:
        yield records
    finally:
        _RECORDS.reset(token)


def _open_regular(path: str | os.PathLike[str]) -> tuple[IO[bytes], os.stat_result]:
    """Open ``path`` for reading without blocking (a FIFO opened plainly waits for a writer)
    and check, on the open file, that it is a regular file.

    Raises:
        OSError: it cannot be opened.
        ValueError: it is not a regular file (a FIFO, a device, a socket, a directory).
    """
    fd = os.open(path, os.O_RDONLY | getattr(os, "O_NONBLOCK", 0) | getattr(os, "O_CLOEXEC", 0))
    try:
        st = os.fstat(fd)
        if not stat.S_ISREG(st.st_mode):
            raise ValueError(f"{os.fspath(path)!r} is not a regular file")
    except BaseException:
        os.close(fd)
        raise
    return open(fd, "rb", buffering=0), st  # noqa: SIM115 (the caller closes it)


def read_regular(path: str | os.PathLike[str], limit: int) -> bytes:
    """All the bytes of a regular file of at most ``limit`` bytes (memory: at most ``limit``).

    Anything else is refused before it is read: a FIFO (whose open would wait for a writer),
    a device (``/dev/zero`` never ends), a socket, a directory.

    Raises:
        OSError: the file cannot be opened or read (FileNotFoundError when it is missing).
        ValueError: not a regular file, or larger than ``limit`` (when opened or as read).
    """
    fh, st = _open_regular(path)
    with fh:
        if st.st_size > limit:
            raise ValueError(f"{os.fspath(path)!r} is larger than {limit} bytes")
        buf = bytearray(st.st_size + 1)  # one byte more: a file that grew meanwhile is seen
        n = _fill(fh, buf, 0)
        if n > st.st_size and (n > limit or fh.read(1)):
            raise ValueError(f"{os.fspath(path)!r} grew past {limit} bytes while read")
        return bytes(buf[:n])


def file_sha256(path: str | os.PathLike[str]) -> str:
    """SHA-256 (hex) of all the bytes of a regular file, the digest :class:`ReadRecord` gives
    for the same bytes; memory: one 8 MiB chunk. Costs about 0.6 ms per MB on this project's
    machine (OpenSSL's SHA-256 uses the CPU's SHA instructions; several times slower without
    them, still less than reading the JSON).

    Raises:
        OSError: the file cannot be opened or read.
        ValueError: not a regular file.
    """
    fh, _ = _open_regular(path)
    with fh:
        h = hashlib.sha256()
        buf = bytearray(_CHUNK)  # large: in a second thread, each step waits for the GIL twice
        with memoryview(buf) as mv:
            while n := fh.readinto(buf):
                h.update(mv[:n])
    return h.hexdigest()


class _Gunzip:
    """Incremental gzip decoder: multi-member streams (RFC 1952 section 2.2), zero padding
    after a member accepted as :mod:`gzip` does, every member's CRC-32 and size checked by zlib.
    Output grows a ``bytearray`` (geometric growth; on Linux large reallocations move pages
    with ``mremap``, so the peak stays near the decompressed size)."""

    def __init__(
        self, name: str, limit: int, progress: Callable[[str], None] | None, hint: int, sniff: bool = True
    ) -> None:
        self.name, self.limit, self.progress, self.hint, self.sniff = name, limit, progress, hint, sniff
        self.out = bytearray()
        self.taken = 0  # bytes handed out by take() (a streaming reader drains ``out``)
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
                room = min(_CHUNK, self.limit + 1 - self.taken - len(self.out))
                chunk = d.decompress(data, room)
                self.out += chunk
                if self.taken + len(self.out) > self.limit:
                    raise _too_large(self.name, self.limit, " after gzip decompression")
                if self.sniff:
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

    def take(self) -> bytearray:
        """The bytes decompressed since the last call (a streaming reader's block)."""
        out, self.out = self.out, bytearray()
        self.taken += len(out)
        if self.sniff and not self.sniffer.done:  # its offsets were into ``out``
            if self.sniffer.pos >= len(out):  # all blanks so far: start again on the next bytes
                self.sniffer.pos = 0
            else:  # (8 MiB of blanks, then a value) rare: let the decoder judge it
                self.sniff = False
        return out

    def _report(self) -> None:
        if self.progress and self.hint:
            done = self.taken + len(self.out)
            pct = min(99, 100 * done // self.hint)
            if pct != self.last_pct:
                self.last_pct = pct
                self.progress(f"decompressing {done / 1e6:,.0f} MB ({pct}%)")


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
    fh: IO[bytes] | _Digesting,
    name: str,
    regular: bool,
    size: int,
    limit: int,
    progress: Callable[[str], None] | None,
) -> tuple[bytearray, bool]:
    """Read an open file or stream once, from its start, in order (``fh`` may add what it
    reads to a hash); returns ``(bytes, gzipped)``."""
    first = fh.read(2)
    if first[:1] == GZIP_MAGIC[:1] and len(first) == 1:  # a stream may deliver one byte at a time
        first += fh.read(1)
    if first[:2] == GZIP_MAGIC:
        hint = _isize_hint(fh.fileno(), size) if regular else 0  # not through fh: no seek
        return _gunzip_stream(fh, first, name, limit, progress, hint), True
    _Sniffer(name).check(first)
    if regular:
        return _read_regular_bytes(fh, name, size, limit, first), False
    return _read_stream_bytes(fh, limit, name, prefix=first), False


def read_trace_bytes(
    path: str | os.PathLike[str],
    progress: Callable[[str], None] | None = None,
    max_bytes: int | None = None,
) -> bytearray:
    """Return the (decompressed) JSON bytes of a trace, reading the input exactly once.

    Args:
        path: a ``.json`` or gzipped trace file, a FIFO or pipe, or ``"-"`` for standard
            input; gzip is detected from the first two bytes, whatever the name.
        progress: optional callback receiving short status lines while decompressing.
        max_bytes: limit on the JSON bytes (after decompression); default
            :func:`max_trace_bytes` (``$TRACEDOC_MAX_TRACE_BYTES`` or 1 GiB).

    Returns:
        a ``bytearray`` (writable: the parallel decoder edits a few bytes): a plain regular
        file read into one buffer of its size (not memory-mapped, so a file truncated while
        it is read gives a shorter buffer, then a one-line error, never SIGBUS), a gzipped
        input decompressed as a stream. A stream cannot be read twice: see :func:`rereadable`.
        Inside :func:`record_reads`, a regular file read is recorded (:class:`ReadRecord`).

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
            what = foreign_format(name)
            if what:  # refused by its name, before a report of gigabytes is read
                raise foreign_error(name, what)
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
            records = _RECORDS.get() if regular else None
            src = _Digesting(fh) if records is not None else fh
            data, gz = _read_open(src, name, regular, st.st_size, limit, progress)
            if isinstance(src, _Digesting) and records is not None:
                real = os.path.realpath(path)
                records.append(ReadRecord(real, st.st_size, st.st_mtime_ns, src.hash.hexdigest()))
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


def iter_trace_blocks(
    path: str | os.PathLike[str],
    progress: Callable[[str], None] | None = None,
    max_bytes: int | None = None,
) -> Iterator[bytes | bytearray]:
    """The (decompressed) JSON bytes of a regular trace file, in order, a block (about
    8 MiB) at a time: what the streaming loader reads instead of :func:`read_trace_bytes`, so
    that the whole file is never in memory. The file is read once, in order; inside
    :func:`record_reads` it is recorded (:class:`ReadRecord`, SHA-256 of the bytes read) once
    read to its end.

    The first bytes are checked as :func:`read_trace_bytes` checks them (a stream of zeros or
    random bytes is refused after its first chunk). This reader does not promise the wording of
    its errors: anything it refuses (not JSON, over the size limit, corrupt or truncated gzip,
    not a regular file, unreadable) raises, and the caller reads the file again with
    :func:`read_trace_bytes`, which gives the one-line error.

    Raises:
        TraceLoadError, OSError, ValueError, EOFError, zlib.error: see above.
    """
    limit = max_trace_bytes(max_bytes)
    name = str(path)
    fh, st = _open_regular(path)
    with fh:
        if st.st_size > limit:
            raise _too_large(name, limit)
        records = _RECORDS.get()
        src: IO[bytes] | _Digesting = _Digesting(fh) if records is not None else fh
        first = src.read(2)
        if first[:2] == GZIP_MAGIC:
            hint = _isize_hint(fh.fileno(), st.st_size)
            g = _Gunzip(name, limit, progress, hint)
            g.feed(first)
            while True:
                chunk = src.read(_READ)
                if not chunk:
                    break
                g.feed(chunk)
                if len(g.out) >= _CHUNK:
                    yield g.take()
            g.finish()
            yield g.take()
        else:
            sniffer, head = _Sniffer(name), bytearray()
            total, chunk = 0, first
            while chunk:
                total += len(chunk)
                if total > limit:
                    raise _too_large(name, limit)
                if not sniffer.done:  # a file of zeros is refused after its first chunk
                    head += chunk
                    sniffer.check(head)
                    if sniffer.done:
                        head = bytearray()
                    elif sniffer.pos == len(head):  # blanks only so far
                        head.clear()
                        sniffer.pos = 0
                yield chunk
                chunk = src.read(_CHUNK)
        if isinstance(src, _Digesting) and records is not None:
            records.append(ReadRecord(os.path.realpath(path), st.st_size, st.st_mtime_ns, src.hash.hexdigest()))


def rereadable(path: str | os.PathLike[str]) -> bool:
    """True when ``path`` is a regular file that can be read a second time."""
    return str(path) != "-" and _regular(path)


__all__ = [
    "DEFAULT_MAX_TRACE_BYTES",
    "MAX_BYTES_ENV",
    "ReadRecord",
    "file_sha256",
    "foreign_error",
    "foreign_format",
    "gzip_size_hint",
    "is_gzip",
    "iter_trace_blocks",
    "max_trace_bytes",
    "parse_size",
    "read_regular",
    "read_trace_bytes",
    "record_reads",
    "rereadable",
]
