"""Performance models of ops and devices: FLOPs and bytes per op from the recorded shapes
(:mod:`tracedoc.perf.flops`) and the peak throughput of known GPUs (:mod:`tracedoc.perf.peaks`).

A bottom layer: it imports nothing of tracedoc's above :mod:`tracedoc.errors` and
:mod:`tracedoc.text`, so the loaders' callers, the signals and the renderers can all use it.
The formulas, their sources and how they differ from TraceLens's are in ``docs/op-models.md``.
"""

from tracedoc.perf.flops import OpCost, Roofline, op_cost, roofline
from tracedoc.perf.peaks import DevicePeak, match_device

__all__ = ["DevicePeak", "OpCost", "Roofline", "match_device", "op_cost", "roofline"]
