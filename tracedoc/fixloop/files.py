"""Every file the fix-loop writes goes through here: atomic writes that survive a deleted
``--out``, bounded logs, and the test for a full disk.

- :func:`write_text` recreates the missing folders first (a workload may delete ``--out``
  while it runs: what is measured is kept in memory and written again) and replaces the
  file atomically (a temporary file, then :func:`os.replace`).
- :class:`BoundedLog` captures a trial's stdout or stderr from a pipe and keeps the first
  ``head_bytes`` and the last ``tail_bytes`` of it, with one line saying how much was left
  out between them, so a chatty workload cannot fill the disk.
- :func:`is_disk_full` says whether an :class:`OSError` means no space (``ENOSPC``) or no
  quota (``EDQUOT``) is left: the loop then stops and writes its summary first.
"""

from __future__ import annotations

import errno
import os
import threading
from pathlib import Path

#: Bytes of a trial's log kept from its start and from its end. A normal trial logs a few
#: kilobytes; 1 MiB is about 10,000 lines of 100 characters, so only a runaway log is cut,
#: and what a failure leaves (start-up messages at the head, the traceback at the tail) is kept.
LOG_HEAD_BYTES = 1 << 20
LOG_TAIL_BYTES = 1 << 20

_DISK_FULL = {errno.ENOSPC, getattr(errno, "EDQUOT", errno.ENOSPC)}


def is_disk_full(exc: BaseException) -> bool:
    """Whether ``exc`` is an :class:`OSError` for a full disk (``ENOSPC``) or an exhausted
    quota (``EDQUOT``)."""
    return isinstance(exc, OSError) and exc.errno in _DISK_FULL


def describe_oserror(exc: OSError) -> str:
    """One line for a failed write: the reason (``strerror``) and the file."""
    what = exc.strerror or type(exc).__name__
    return f"{what}: {exc.filename}" if exc.filename else what


def _store(path: Path, data: bytes, mode: str) -> None:
    """The one place the fix-loop puts bytes on disk (``mode`` ``"wb"`` or ``"ab"``), creating
    missing folders first; tests replace it to simulate a full disk."""
    path.parent.mkdir(parents=True, exist_ok=True)
    with open(path, mode) as fh:
        fh.write(data)


def write_bytes(path: Path, data: bytes) -> None:
    """Write ``data`` to ``path`` atomically, creating missing parent folders first.

    Raises:
        OSError: the folder cannot be created or the file written (e.g. ``ENOSPC``); the
            temporary file is removed and ``path`` keeps its old content.
    """
    tmp = path.with_name(path.name + ".tmp")
    try:
        _store(tmp, data, "wb")
        os.replace(tmp, path)
    except OSError:
        tmp.unlink(missing_ok=True)
        raise


def write_text(path: Path, text: str) -> None:
    """:func:`write_bytes` of ``text`` in UTF-8.

    Raises:
        OSError: as :func:`write_bytes`.
    """
    write_bytes(path, text.encode("utf-8"))


def append_bytes(path: Path, data: bytes) -> None:
    """Append ``data`` to ``path`` (created with its folders when missing): a log's next part.

    Raises:
        OSError: the write failed (e.g. ``ENOSPC``).
    """
    _store(path, data, "ab")


class BoundedLog:
    """One stream of a trial (stdout or stderr), read from a pipe by a thread and written to
    ``path`` bounded: the first ``head_bytes`` as they arrive, then, when the stream ends
    (:meth:`close`), a line saying how many bytes were left out and the last ``tail_bytes``.
    A stream no longer than ``head_bytes + tail_bytes`` is written whole.

    A failed write (a full disk, a deleted folder that cannot be recreated) never stops the
    reading: the child is never blocked on a full pipe, the tail stays in memory
    (:meth:`tail_text`), and the first error is kept in :attr:`error`.

    Attributes:
        path: the log file.
        total: bytes the stream carried.
        error: the first failed write (None: every write succeeded).
    """

    def __init__(self, path: Path, head_bytes: int = LOG_HEAD_BYTES, tail_bytes: int = LOG_TAIL_BYTES) -> None:
        self.path = path
        self.head_bytes = max(int(head_bytes), 0)
        self.tail_bytes = max(int(tail_bytes), 0)
        self.total = 0
        self.error: OSError | None = None
        self._head_kept = 0
        self._tail = bytearray()
        self._recent = bytearray()  # the last bytes seen, for the classification of a failure
        self._read_fd, self.write_fd = os.pipe()
        self._thread = threading.Thread(target=self._pump, name=f"log {path.name}", daemon=True)
        self._closed = False
        self._write(lambda d: _store(path, d, "wb"), b"")  # truncate an old log (a trial reads only its own)

    def start(self) -> None:
        """Start reading; call once the child holds :attr:`write_fd` (it is closed here)."""
        os.close(self.write_fd)
        self._thread.start()

    def _write(self, fn, data: bytes) -> None:
        if self.error is not None:
            return
        try:
            fn(data)
        except OSError as exc:
            self.error = exc

    def _pump(self) -> None:
        while True:
            try:
                chunk = os.read(self._read_fd, 1 << 16)
            except OSError:
                return
            if not chunk:
                return
            self._take(chunk)

    def _take(self, chunk: bytes) -> None:
        self.total += len(chunk)
        self._recent += chunk
        del self._recent[: max(len(self._recent) - 20000, 0)]
        room = self.head_bytes - self._head_kept
        if room > 0:
            head, chunk = chunk[:room], chunk[room:]
            self._head_kept += len(head)
            self._write(lambda d: append_bytes(self.path, d), head)
        if chunk:
            self._tail += chunk
            del self._tail[: max(len(self._tail) - self.tail_bytes, 0)]

    def omitted(self) -> int:
        """Bytes of the stream left out of the file (between its head and its tail)."""
        return self.total - self._head_kept - len(self._tail)

    def close(self, timeout_s: float = 5.0) -> None:
        """Wait up to ``timeout_s`` for the stream to end (every holder of the pipe gone), then
        write the note of what was left out and the tail. Safe to call twice."""
        if self._closed:
            return
        self._closed = True
        if self._thread.ident is None:  # never started: the child did not start
            os.close(self.write_fd)
        else:
            self._thread.join(timeout_s)
        gone = self.omitted()
        note = b""
        if gone > 0:
            note = (
                f"\n[tracedoc: {gone} bytes of this log left out; the first {self._head_kept} and "
                f"the last {len(self._tail)} bytes are kept]\n"
            ).encode()
        if note or self._tail:
            self._write(lambda d: append_bytes(self.path, d), note + bytes(self._tail))
        if not self._thread.is_alive():
            os.close(self._read_fd)

    def tail_text(self, n_bytes: int = 20000) -> str:
        """The last ``n_bytes`` the stream carried (from memory: the file may be gone), as text."""
        return bytes(self._recent[-n_bytes:]).decode("utf-8", "replace")
