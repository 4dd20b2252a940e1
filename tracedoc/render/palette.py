"""The one palette of the HTML report's charts (and of ``Report.plot()``).

CARTO's qualitative palette **Safe** (CARTOColors, https://github.com/CartoDB/CartoColor,
CC BY 3.0), made to stay distinguishable under the common colour-vision deficiencies
(deuteranopia, protanopia, tritanopia); plotly ships it as ``plotly.colors.qualitative.Safe``,
which is where the colours are read from (11 colours, the last a neutral grey).

A thing keeps its colour across the charts: the DataLoader is the same rose in the step
breakdown and in the idle ledger, kernels the same green in the breakdown and in kernel time
by category (:data:`ROLES`). A chart's other series take the palette's colours not yet used
in that chart, in order (:func:`colours_for`).
"""

from __future__ import annotations

from collections.abc import Iterable

#: The palette's name, as plotly and CARTO call it.
NAME = "Safe"

#: What each colour of the palette means, by its index: the series of every chart whose key
#: is here get that colour (step-breakdown categories, idle-ledger causes, kernel categories,
#: the rank charts' roles). The colours follow the terminal report's where they can (kernel
#: green, DataLoader red, runtime magenta, CPU yellow, other grey).
ROLES: dict[str, int] = {
    "kernel": 3,  # green
    "GEMM/conv on Tensor Cores": 3,
    "communication": 6,  # teal
    "memcpy": 4,  # indigo
    "pageable_h2d": 4,
    "memset": 0,  # sky blue
    "runtime": 5,  # purple
    "launch_overhead": 5,
    "dataloader": 1,  # rose
    "cpu_exec": 2,  # sand
    "other_cpu": 2,
    "GEMM/conv not on Tensor Cores": 7,  # olive
    "zero_grad": 8,  # wine
    "other compute": 9,  # brown
    "other": 10,  # grey
    "other_idle": 10,
    "rank": 4,  # a rank's bar
    "slowest": 1,  # the slowest rank, the straggler
}


def colours() -> list[str]:
    """The palette's colours (``rgb(r, g, b)`` strings), from plotly.

    Raises:
        ImportError: plotly is not installed (the HTML renderer says how to install it first).
    """
    from plotly.colors import qualitative

    return list(qualitative.Safe)


def colours_for(keys: Iterable[str]) -> dict[str, str]:
    """A colour for each of ``keys`` (series of one chart), all different while the palette
    lasts: a key of :data:`ROLES` gets its colour unless an earlier key took it; every other
    key the next colour no key of the chart uses (after 11 series the palette repeats)."""
    pal = colours()
    keys = list(dict.fromkeys(keys))
    out: dict[str, str] = {}
    used: set[int] = set()
    for k in keys:
        i = ROLES.get(k)
        if i is not None and i not in used:
            out[k] = pal[i]
            used.add(i)
    free = [i for i in range(len(pal)) if i not in used and i not in {ROLES[k] for k in keys if k in ROLES}]
    free += [i for i in range(len(pal)) if i not in free]  # then any, the palette repeating
    n = 0
    for k in keys:
        if k not in out:
            out[k] = pal[free[n % len(free)]]
            n += 1
    return out


def colour(role: str) -> str:
    """The colour of one of :data:`ROLES` (a single-series chart)."""
    return colours()[ROLES[role]]
