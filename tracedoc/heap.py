"""The C heap under the frames: give freed memory back to the operating system (glibc only).

Measured in ``benchmarks/RESULTS.md`` (issue 24): after a 1 M-event trace is loaded, glibc's
malloc still held about 110 MiB the loader had freed (decoded parts, their Python objects),
and during the analysis it kept NumPy temporaries of a few MiB in its heap instead of
returning them, because its mmap threshold rises to the size of the largest freed block (up
to 32 MiB on 64-bit, ``mallopt(3)``, "M_MMAP_THRESHOLD"). Both count in the peak RSS that
decides whether a trace of many GB can be read at all.

Every function here is a no-op that returns False where the C library is not glibc (macOS,
musl, Windows): nothing depends on them but the memory figures.
"""

from __future__ import annotations

import ctypes
import ctypes.util
import platform
from functools import lru_cache

#: ``M_MMAP_THRESHOLD`` from glibc's ``malloc.h``.
_M_MMAP_THRESHOLD = -3
#: Blocks of at least this many bytes get pages of their own, returned to the system on free.
#: 1 MiB: the same peak as 128 KiB on ``benchmarks/run.py``'s traces (within 2%) with no
#: measurable time cost, where 128 KiB (glibc's starting value) cost up to 20% in page faults.
MMAP_THRESHOLD_BYTES = 1 << 20


@lru_cache(maxsize=1)
def _libc():
    """glibc's handle, or None elsewhere."""
    if platform.system() != "Linux" or platform.libc_ver()[0] != "glibc":
        return None
    try:
        return ctypes.CDLL(ctypes.util.find_library("c") or "libc.so.6")
    except OSError:
        return None


def fix_mmap_threshold(nbytes: int = MMAP_THRESHOLD_BYTES) -> bool:
    """Fix glibc's mmap threshold at ``nbytes`` for this process (and the processes it forks
    later), which also stops it from rising. For a process that tracedoc owns (the CLI): it
    changes the whole process's allocator. True when applied."""
    libc = _libc()
    if libc is None:
        return False
    try:
        return bool(libc.mallopt(_M_MMAP_THRESHOLD, int(nbytes)))
    except (AttributeError, OSError):
        return False


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
