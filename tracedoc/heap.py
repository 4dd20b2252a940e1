"""The C heap under the frames: give freed memory back to the operating system (glibc only).

Measured in ``benchmarks/RESULTS.md`` (issue 24): after a 1 M-event trace was loaded, glibc's
malloc still held about 110 MiB that the loader had freed (decoded parts and their Python
objects). It counts in the peak RSS that decides whether a trace of many GB can be read at all.
:func:`release_free_memory` runs once the loader has built the frames.

Fixing glibc's mmap threshold (``mallopt(3)``, ``M_MMAP_THRESHOLD``) so that large NumPy
temporaries go back to the system when freed was measured too and left out: at 1 MiB it cut
the peak by 7-9% and cost 13-17% more time (page faults on fresh pages for every large
temporary).

The function is a no-op that returns False where the C library is not glibc (macOS, musl,
Windows): nothing depends on it but the memory figures.
"""

from __future__ import annotations

import ctypes
import ctypes.util
import platform
from functools import lru_cache


@lru_cache(maxsize=1)
def _libc():
    """glibc's handle, or None elsewhere."""
    if platform.system() != "Linux" or platform.libc_ver()[0] != "glibc":
        return None
    try:
        return ctypes.CDLL(ctypes.util.find_library("c") or "libc.so.6")
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
