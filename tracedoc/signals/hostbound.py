"""The host-bound diagnosis: when the launching thread's own CPU work holds the step, name it.

The idle ledger's ``other_cpu`` slice (:mod:`tracedoc.signals.ledger`) is GPU idle time with
nothing queued while a launching thread runs CPU work that launches nothing: preprocessing,
postprocessing, Python. The GPU waits on that work, and no GPU-side fix helps. This module
names it from the spans that cover those idle segments on the launching threads:

* With Python stacks (``python_function`` events, recorded with ``with_stack=True``), the
  candidates are the Python frames; without them, the CPU ops and annotations (never
  ``ProfilerStep#N``).
* A candidate's *cover* is the length of the ``other_cpu`` segments of the primary device,
  inside the complete steps, that lie within its span (µs).
* Candidates with the same name are one frame (each step calls ``preprocess`` again): its
  cover is the sum. The *dominant* frame is the frame of shortest mean span whose cover is
  at least :data:`DOMINANT_SHARE` of the slice: the deepest frame that holds most of the wait.
* *Hotspots* are the candidates whose cover is at least :data:`HOTSPOT_SHARE` of the slice
  and that hold no shorter such candidate inside their span (the leaves of the covering
  frames), their covers summed by name (a layer's ``forward`` called many times is one
  hotspot), largest first, at most :data:`MAX_HOTSPOTS`.
"""

from __future__ import annotations

import numpy as np

from tracedoc.signals.base import SignalContext, SignalUnavailable, signal
from tracedoc.signals.intervals import covered_length
from tracedoc.signals.ledger import idle_segments, launching_threads, ledger_devices
from tracedoc.signals.steps import profiler_step_mask
from tracedoc.signals.strings import on_threads

#: Share of the ``other_cpu`` slice the dominant frame must cover (most of it).
DOMINANT_SHARE = 0.5
#: Share of the slice a hotspot must cover.
HOTSPOT_SHARE = 0.05
#: Hotspots listed at most.
MAX_HOTSPOTS = 5


@signal("table", scope="primary device")
def host_bound_frames(ctx: SignalContext) -> list[dict]:
    """The CPU work the GPU waits on (module docstring): rows ``{"frame", "role"
    ("dominant" | "hotspot"), "ms_per_step", "share"}`` (share of the ``other_cpu`` slice),
    the dominant frame first, then the hotspots. Empty when the slice is empty.

    Raises:
        SignalUnavailable: a CPU-only trace.
    """
    device = ledger_devices(ctx)[0]
    seg_s, seg_e = idle_segments(ctx, device, "other_cpu")
    total = float((seg_e - seg_s).sum())
    if total <= 0:
        return []
    threads = launching_threads(ctx, device)
    ops = ctx.trace.ops
    on = on_threads(ctx, "ops", threads) & ~profiler_step_mask(ctx)
    py = on & (ops["cat"] == "python_function").to_numpy()
    cand = py if py.any() else on & (ops["cat"] != "python_function").to_numpy()
    pos = np.flatnonzero(cand)
    if not pos.size:
        return []
    a = ops["ts_us"].to_numpy(dtype=float)[pos]
    b = ops["end_us"].to_numpy(dtype=float)[pos]
    cover = covered_length(seg_s, seg_e, a, b)
    names = ops["name"].to_numpy(dtype=object)[pos]
    n = max(int(ctx.get("step_count")), 1)
    rows = []
    # a frame is its name: one step's preprocess() and the next one's are the same frame
    per: dict[str, list[float]] = {}
    for name, cov, dur in zip(names.tolist(), cover.tolist(), (b - a).tolist(), strict=True):
        acc = per.setdefault(str(name), [0.0, 0.0, 0.0])
        acc[0] += cov
        acc[1] += dur
        acc[2] += 1
    dom = [(acc[1] / acc[2], name, acc[0]) for name, acc in per.items() if acc[0] >= DOMINANT_SHARE * total]
    if dom:
        _, name, cov = min(dom)  # the shortest on average: the deepest such frame
        rows.append({"frame": name, "role": "dominant", "ms_per_step": cov / n / 1000.0, "share": cov / total})
    hot = np.flatnonzero(cover >= HOTSPOT_SHARE * total)
    hot = hot[np.argsort(b[hot] - a[hot], kind="stable")]  # shortest first: leaves before their parents
    leaves: list[int] = []
    for i in hot.tolist():
        if not any(a[i] <= a[j] and b[j] <= b[i] and (a[j], b[j]) != (a[i], b[i]) for j in leaves):
            leaves.append(i)
    by_name: dict[str, float] = {}
    for i in leaves:  # a frame called many times (a layer's forward) is one hotspot
        by_name[str(names[i])] = by_name.get(str(names[i]), 0.0) + float(cover[i])
    for name, us in sorted(by_name.items(), key=lambda kv: -kv[1])[:MAX_HOTSPOTS]:
        rows.append({"frame": name, "role": "hotspot", "ms_per_step": us / n / 1000.0, "share": us / total})
    for r in rows:
        r["ms_per_step"] = round(float(r["ms_per_step"]), 3)
        r["share"] = round(float(r["share"]), 4)
    return rows


@signal("share", scope="primary device")
def host_cpu_work_share(ctx: SignalContext) -> float:
    """Share of the step the primary GPU idles, nothing queued, while a launching thread runs
    CPU work that launches nothing: ``idle_other_cpu_ms / step_time_ms`` (0..1).

    Raises:
        SignalUnavailable: a CPU-only trace.
    """
    step = float(ctx.get("step_time_ms"))
    if step <= 0:
        raise SignalUnavailable("the step time is zero")
    return float(ctx.get("idle_other_cpu_ms")) / step
