"""Fast per-row string tests on object columns of event names.

pandas' ``.str`` accessor and ``Series.map(dict)`` carry per-call overheads that
dominate on traces of hundreds of thousands of events. These helpers give the same
boolean masks (names are always ``str``: the loader guarantees it) by running the
test once per *distinct* name and broadcasting it with C-level ``map``.
"""

from __future__ import annotations

from typing import Callable

import numpy as np
import pandas as pd


class _Memo(dict):
    def __init__(self, func: Callable[[str], bool]) -> None:
        super().__init__()
        self.func = func

    def __missing__(self, key: str) -> bool:
        value = self[key] = bool(self.func(key))
        return value


def name_mask(names: pd.Series, test: Callable[[str], bool]) -> np.ndarray:
    """``np.array([test(n) for n in names], bool)``, calling ``test`` once per distinct name."""
    values = names.to_numpy(dtype=object)
    return np.fromiter(map(_Memo(test).__getitem__, values), dtype=bool, count=len(values))


def startswith_mask(names: pd.Series, prefix: str) -> np.ndarray:
    """Same as ``names.str.startswith(prefix).to_numpy(bool)`` for a column of ``str``."""
    return name_mask(names, lambda s: s.startswith(prefix))
