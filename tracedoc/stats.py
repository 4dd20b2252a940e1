"""Small statistics shared by the fix-loop's decision and the renderers of its summary."""

from __future__ import annotations

import math
import statistics


def cv(values: list[float]) -> float:
    """Coefficient of variation: sample standard deviation / mean; 0 for fewer than two values."""
    if len(values) < 2:
        return 0.0
    mean = statistics.fmean(values)
    return statistics.stdev(values) / mean if mean else math.inf
