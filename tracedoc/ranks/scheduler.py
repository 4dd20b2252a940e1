"""Checking that a scheduler address is a Dask scheduler before Dask is handed it.

Dask's own connect bounds only the TCP connection by its timeout. The handshake after it
reads the peer's first 8 bytes as a message length and waits for that many bytes, with no
deadline. So a peer that is not a Dask scheduler either makes it allocate whatever those
bytes say (an HTTP server's ``HTTP/1.0`` read as a length is 3 EiB: a ``MemoryError``, once
reported as "out of memory while analyzing") or, when it accepts and never answers, hangs
past the timeout. :func:`check_scheduler` speaks the first step of Dask's TCP protocol
itself, under one deadline, and checks the shape of the answer before a
:class:`distributed.Client` is made.

Dask's TCP handshake (``distributed.comm.core.connect`` and ``Listener.on_connection``):
each side writes one message as soon as the connection is up, then reads the other's. A
message is an 8-byte total length, then its frames: an 8-byte frame count, one 8-byte
length per frame, then the frames' bytes (native byte order, as Dask writes them). The
handshake is one msgpack map (``compression``, ``python``, ``pickle-protocol``), about
60 bytes. Only ``tcp://`` addresses (and bare ``HOST:PORT``, which Dask reads as TCP) are
checked; other schemes (``tls://``, ``ucx://``, ``inproc://``) go to Dask as they are.
"""

from __future__ import annotations

import pickle
import socket
import struct
import sys
import time

from tracedoc.errors import TracedocError

#: Largest first message taken for a handshake (bytes). A Dask handshake is about 60 bytes
#: (three short entries); 64 KiB is three orders of magnitude above it and still read at
#: once, while a length read from another protocol's text is far larger (``HTTP/1.0``: 3 EiB).
MAX_HANDSHAKE_BYTES = 64 * 1024

#: Most frames taken in a handshake message (Dask writes one; a header frame may precede it).
MAX_HANDSHAKE_FRAMES = 16

#: Keys of Dask's handshake map; the peer's map must hold at least one of them.
HANDSHAKE_KEYS = frozenset({"compression", "python", "pickle-protocol"})

_U64 = struct.Struct("=Q")


class SchedulerError(TracedocError):
    """The Dask scheduler cannot be used (extra not installed, address unreachable, not a
    Dask scheduler, no answer)."""


class _NotDask(Exception):
    """The peer answered, but not as a Dask scheduler does (the message says how)."""


class _NoAnswer(Exception):
    """The peer gave no answer (refused, silent, closed): the message says which."""


def _show(data: bytes, limit: int = 40) -> str:
    """Bytes a peer sent, on one line: printable ASCII kept, the rest escaped, cut at ``limit``."""
    text = repr(data[:limit])[2:-1]
    return text + ("..." if len(data) > limit else "")


def handshake_message() -> bytes:
    """The handshake Dask's client writes first (its framing, a msgpack map), so that a peer
    that speaks only when spoken to (an HTTP server) answers the probe as it answers Dask."""
    import msgpack

    info = {"compression": None, "python": tuple(sys.version_info[:3]), "pickle-protocol": pickle.HIGHEST_PROTOCOL}
    frame = msgpack.packb(info, use_bin_type=True)
    body = _U64.pack(1) + _U64.pack(len(frame)) + frame
    return _U64.pack(len(body)) + body


def _recv_exact(sock: socket.socket, n: int, deadline: float) -> tuple[bytes, str]:
    """Read ``n`` bytes before ``deadline`` (``time.monotonic``); returns what was read and
    why it stopped: ``""`` (all of it), ``"timeout"`` or ``"closed"``."""
    buf = bytearray()
    while len(buf) < n:
        left = deadline - time.monotonic()
        if left <= 0:
            return bytes(buf), "timeout"
        sock.settimeout(left)
        try:
            chunk = sock.recv(n - len(buf))
        except TimeoutError:
            return bytes(buf), "timeout"
        except OSError:
            return bytes(buf), "closed"
        if not chunk:
            return bytes(buf), "closed"
        buf += chunk
    return bytes(buf), ""


def _check_handshake(body: bytes) -> None:
    """Check the frames of a first message (what follows its 8-byte length).

    Raises:
        _NotDask: the frame count or lengths do not add up, or no frame is a msgpack map
            holding one of :data:`HANDSHAKE_KEYS`.
    """
    if len(body) < 8:
        raise _NotDask(f"its first message is too short ({len(body)} bytes)")
    (n,) = _U64.unpack_from(body)
    if not 1 <= n <= MAX_HANDSHAKE_FRAMES or len(body) < 8 + 8 * n:
        raise _NotDask(f"its first message has {n} frames")
    lengths = [_U64.unpack_from(body, 8 + 8 * i)[0] for i in range(n)]
    if 8 + 8 * n + sum(lengths) != len(body):
        raise _NotDask("the frame lengths of its first message do not add up")
    import msgpack

    at = 8 + 8 * n
    for size in lengths:
        try:
            obj = msgpack.unpackb(body[at : at + size], raw=False, strict_map_key=False)
        except Exception:  # any decoding failure: not Dask's msgpack
            obj = None
        if isinstance(obj, dict) and HANDSHAKE_KEYS & set(map(str, obj)):
            return
        at += size
    raise _NotDask("its first message is not a Dask handshake")


def _connect(host: str, port: int, deadline: float, seconds: float) -> socket.socket:
    """A TCP connection to ``host:port``, retried (as Dask retries) until ``deadline``.

    Raises:
        _NoAnswer: no connection before the deadline (refused, unreachable, unknown host).
    """
    # Dask's own backoff starts at 10 ms and doubles; capped at 0.5 s here so that a scheduler
    # still starting up is found within half a second of listening
    backoff = 0.01
    while True:
        try:
            return socket.create_connection((host, port), timeout=max(0.01, deadline - time.monotonic()))
        except OSError as exc:
            if time.monotonic() + backoff >= deadline:
                raise _NoAnswer(f"{exc.strerror or exc}, retried for {seconds:g} s") from None
        time.sleep(backoff)
        backoff = min(backoff * 2, 0.5)


def _probe(host: str, port: int, seconds: float) -> None:
    """Connect, write Dask's handshake, read and check the peer's (see the module docstring).

    Raises:
        _NoAnswer: no connection, or not one byte before the deadline or the peer closing.
        _NotDask: an answer that is not a Dask handshake.
    """
    deadline = time.monotonic() + seconds
    with _connect(host, port, deadline, seconds) as sock:
        try:
            sock.sendall(handshake_message())
            # and nothing more: a line-based server (Python's http.server) answers a request
            # without a line end only at the end of the input. A Dask scheduler has written
            # its handshake on accepting, and reads the end of input as a client leaving.
            sock.shutdown(socket.SHUT_WR)
        except OSError as exc:
            raise _NoAnswer(f"the connection was closed ({exc.strerror or exc})") from None
        head, why = _recv_exact(sock, 8, deadline)
        if not head:
            raise _NoAnswer(f"nothing within {seconds:g} s" if why == "timeout" else "it closed the connection")
        if why:
            raise _NotDask(f"it answered '{_show(head)}' and then {'nothing' if why == 'timeout' else 'closed'}")
        (length,) = _U64.unpack(head)
        if not 16 <= length <= MAX_HANDSHAKE_BYTES:
            sock.setblocking(False)
            try:
                more = sock.recv(64)
            except OSError:
                more = b""
            raise _NotDask(f"it answered '{_show(head + more)}'")
        body, why = _recv_exact(sock, length, deadline)
        if why:
            raise _NotDask(f"its first message stopped after {8 + len(body)} of {8 + length} bytes")
        _check_handshake(body)


def check_scheduler(address: str, seconds: float) -> None:
    """Check that ``address`` answers as a Dask scheduler, within ``seconds`` (wall clock).

    ``tcp://HOST:PORT`` and bare ``HOST:PORT`` are checked; other schemes, and an address Dask
    cannot parse (Dask itself then says why), are left to Dask.

    Raises:
        SchedulerError: ``cannot reach the Dask scheduler ADDRESS (REASON)``, one line, where
            REASON starts with ``no answer`` (refused or unreachable until the deadline, silent
            until it, or closed without a byte) or ``not a Dask scheduler`` (it answered with
            something that is not Dask's handshake: another protocol, a message length over
            :data:`MAX_HANDSHAKE_BYTES`, frames that do not parse).
    """
    from distributed.comm.addressing import parse_address, parse_host_port

    from tracedoc.errors import display_path

    try:
        scheme, loc = parse_address(address)
        if scheme != "tcp":
            return
        host, port = parse_host_port(loc)
    except ValueError:
        return
    try:
        _probe(host.strip("[]"), int(port), seconds)
    except _NoAnswer as exc:
        raise SchedulerError(f"cannot reach the Dask scheduler {display_path(address)} (no answer: {exc})") from None
    except _NotDask as exc:
        raise SchedulerError(
            f"cannot reach the Dask scheduler {display_path(address)} (not a Dask scheduler: {exc})"
        ) from None
