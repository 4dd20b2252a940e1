"""Array helpers the signals share, written for memory as well as speed (issue 24)."""

from __future__ import annotations

import numpy as np


def sorted_unique(values) -> np.ndarray:
    """The distinct values of ``values`` (any shape, flattened), sorted, with the input's dtype:
    ``np.unique(values)``, NaNs counted as one value as there, by a sort and a comparison of
    neighbours.

    Why not ``np.unique`` itself: since numpy 2.3 it finds the values of a plain call with a
    hash set of one small allocation per distinct value, and the C heap keeps those pages once
    freed: 18 MiB of resident memory for 333,222 int32 values, kept to the end of the process
    (this helper: the size of its sorted copy, returned when freed). Measured on numpy 2.4.6,
    glibc 2.36, with ``/proc/self/status`` ``VmRSS`` before and after.
    """
    a = np.sort(np.asarray(values).reshape(-1))
    if not a.size:
        return a
    keep = np.empty(a.size, dtype=bool)
    keep[0] = True
    np.not_equal(a[1:], a[:-1], out=keep[1:])
    if a.dtype.kind == "f" and np.isnan(a[-1]):  # NaNs sort last and differ from each other
        first = int(np.flatnonzero(np.isnan(a))[0])
        keep[first + 1 :] = False
        keep[first] = True
    return a[keep]
