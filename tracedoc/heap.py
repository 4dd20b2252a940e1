"""The C heap under the frames: give freed memory back to the operating system (glibc only).

Measured in ``benchmarks/RESULTS.md`` (issue 24): after a 1 M-event trace was loaded, glibc's
malloc still held about 110 MiB that the loader had freed (decoded parts and their Python
objects). It counts in the peak RSS that decides whether a trace of many GB can be read at all.
:func:`release_free_memory` runs once the loader has built the frames, and
:class:`GrowthTrim` runs it whenever the process has grown by a step while the streaming loader
decodes its parts and joins their columns (:func:`tracedoc.load.fast.load_stream`, in this
process and in its worker: 108 -> 65 MiB held after the parts of the 301 MB tiled trace, 38 of
them live) and during the analysis
(:meth:`tracedoc.signals.base.SignalContext.cached`, after each shared result is built): the
analysis frees its temporaries, but glibc keeps their pages, and on the 301 MB tiled trace
that retained memory was the difference between an analysis peak of 291 and 270 MiB
(in process; :data:`TRIM_STEP_BYTES`).

Fixing glibc's mmap threshold (``mallopt(3)``, ``M_MMAP_THRESHOLD``) so that large NumPy
temporaries go back to the system when freed was measured too and left out: at 1 MiB it cut
the peak by 7-9% and cost 13-17% more time (page faults on fresh pages for every large
temporary).

Everything here is a no-op (False) where the C library is not glibc (macOS, musl, Windows):
nothing depends on it but the memory figures.
"""

from __future__ import annotations

import ctypes
import os
import platform
from functools import lru_cache


@lru_cache(maxsize=1)
def _libc():
    """glibc's handle, or None elsewhere.

    The handle is the process's own symbols (``dlopen(NULL)``: the interpreter is linked
    against the C library), not ``ctypes.util.find_library("c")``: that runs ``ldconfig -p``
    in a child process, and a fork of a process of hundreds of MiB counts twice in the
    process tree's RSS while it lasts (it doubled a benchmark's peak on the tiled trace, 295
    -> 534 MiB, in one run of two) and can fail where memory is not overcommitted."""
    if platform.system() != "Linux" or platform.libc_ver()[0] != "glibc":
        return None
    try:
        return ctypes.CDLL(None)
    except OSError:
        return None


def release_free_memory() -> bool:
    """Return the free memory at the top and inside glibc's heap to the system
    (``malloc_trim(0)``); True when some was returned. Takes a few ms on a heap of
    hundreds of MiB."""
    libc = _libc()
    if libc is None:
        return False
    try:
        return bool(libc.malloc_trim(0))
    except (AttributeError, OSError):
        return False


def _rss_bytes() -> int | None:
    """This process's resident set (bytes) from ``/proc/self/statm`` (in pages); None without
    procfs."""
    try:
        with open("/proc/self/statm", "rb") as fh:
            return int(fh.read().split()[1]) * os.sysconf("SC_PAGE_SIZE")
    except (OSError, ValueError, IndexError, AttributeError):  # no procfs; no os.sysconf
        return None


#: Growth of the resident set (bytes) after which :class:`GrowthTrim` releases the heap's free
#: pages. Why 8 MiB: measured with ``tracedoc analyze --format json --no-cache`` (peak RSS of the
#: process, ``ru_maxrss``; 3 alternating runs each, 2-core VM), the tiled x10 trace (757k events,
#: 301 MB) peaked at 291-293 MiB with a 32 MiB step, 282-283 MiB with 16 and 276-278 MiB with 8
#: (4.66-4.94 s, 4.75-5.11 s and 4.77-5.06 s); the 1 M small-event trace at 566-586 MiB with 32
#: and 551 MiB with 8 (7.5-7.8 s and 7.1-7.3 s). A release after every shared result (69 on the
#: tiled trace) cost 13% more time: the released pages fault in again when they are reused.
TRIM_STEP_BYTES = 8 << 20


class GrowthTrim:
    """``trim()`` releases the heap's free pages (:func:`release_free_memory`) when the resident
    set has grown by more than ``step`` bytes since the last release (or since it was made), then
    takes the new resident set as its base. Cost when nothing is released: one read of
    ``/proc/self/statm`` (about 10 µs). A no-op without procfs or glibc."""

    def __init__(self, step: int = TRIM_STEP_BYTES) -> None:
        self.step = step
        self.base = _rss_bytes() if _libc() is not None else None
        self.releases = 0

    def release(self) -> bool:
        """Release the heap's free pages now, whatever the growth, and take the resident set
        after it as the new base: for a caller that has just dropped large values (the engine's
        :meth:`tracedoc.signals.base.SignalContext.release`), whose freed pages glibc would
        otherwise keep resident under the next phase's peak. True when some memory was
        returned; a no-op (False) without procfs or glibc."""
        if self.base is None:
            return False
        returned = release_free_memory()
        self.releases += 1
        self.base = _rss_bytes() or self.base
        return returned

    def __call__(self) -> bool:
        """True when the heap was trimmed now."""
        if self.base is None:
            return False
        now = _rss_bytes()
        if now is None or now - self.base <= self.step:
            return False
        self.base = now  # the base if the resident set cannot be read after the release
        self.release()
        return True
