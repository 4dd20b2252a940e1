"""The one join between GPU activity and the runtime calls that launched it.

Kineto links a kernel, memcpy or memset to the CUDA/HIP runtime call that issued it
through ``args.correlation``. Correlation ids are unique within one process, but a
trace merged from several processes (or several profiling sessions) can repeat them,
and GPU events carry the *device* in ``pid``, not the process. Every signal that needs
"who launched this GPU event" goes through :func:`link_launches`, which resolves a
repeated id the same way everywhere:

1. candidates are the runtime calls with the same correlation id;
2. a launch cannot start after the work it launched: candidates with
   ``launch_ts > event_ts`` are dropped (unless that leaves none: clocks of some ROCm
   traces are skewed by a few µs, so then every candidate stays);
3. the process that launched the most unambiguously linked work onto the event's device
   is preferred (a process drives its own devices);
4. then the latest remaining launch (the nearest one before the event).
"""

from __future__ import annotations

import numpy as np
import pandas as pd

from tracedoc.signals.strings import owned_frame


def link_launches(
    gpu_corr: np.ndarray,
    gpu_ts: np.ndarray,
    gpu_device: np.ndarray,
    rt_corr: np.ndarray,
    rt_ts: np.ndarray,
    rt_pid: np.ndarray,
) -> np.ndarray:
    """For each GPU event, the position of its launching runtime call, or -1.

    Args:
        gpu_corr, gpu_ts, gpu_device: per GPU event (length n): correlation id (float, NaN
            when absent), start time (µs), device id.
        rt_corr, rt_ts, rt_pid: per runtime call (length m): correlation id, start time
            (µs), process id (str).

    Returns:
        ``int64`` array of length n: a row position into the runtime arrays, or -1 when
        the event has no correlation id or no runtime call carries it.
    """
    n = len(gpu_corr)
    out = np.full(n, -1, dtype=np.int64)
    if n == 0 or len(rt_corr) == 0:
        return out
    rt = owned_frame({"corr": np.asarray(rt_corr, dtype=np.float64), "rt_pos": np.arange(len(rt_corr))})
    rt = rt[rt["corr"].notna()]
    ev = owned_frame({"corr": np.asarray(gpu_corr, dtype=np.float64), "ev_pos": np.arange(n)})
    ev = ev[ev["corr"].notna()]
    if not len(rt) or not len(ev):
        return out
    if not rt["corr"].duplicated().any():  # the common case: one process, ids unique
        m = ev.merge(rt, on="corr", how="inner")
        out[m["ev_pos"].to_numpy()] = m["rt_pos"].to_numpy()
        return out
    m = ev.merge(rt, on="corr", how="inner")
    if not len(m):
        return out
    ev_pos = m["ev_pos"].to_numpy()
    rt_pos = m["rt_pos"].to_numpy()
    launch_ts = np.asarray(rt_ts, dtype=np.float64)[rt_pos]
    start_ts = np.asarray(gpu_ts, dtype=np.float64)[ev_pos]
    before = launch_ts <= start_ts
    any_before = pd.Series(before).groupby(ev_pos).transform("any").to_numpy()
    keep = before | ~any_before
    ev_pos, rt_pos, launch_ts = ev_pos[keep], rt_pos[keep], launch_ts[keep]
    pid = np.asarray(rt_pid, dtype=object)[rt_pos]
    device = np.asarray(gpu_device)[ev_pos]
    # which process drives each device, judged from events with a single candidate
    single = pd.Series(ev_pos).map(pd.Series(ev_pos).value_counts()).to_numpy() == 1
    owner_votes = pd.DataFrame({"device": device[single], "pid": pid[single]})
    owner = {}
    if len(owner_votes):
        counts = owner_votes.groupby(["device", "pid"]).size().reset_index(name="n")
        counts = counts.sort_values(["device", "n"], ascending=[True, False], kind="stable")
        top = counts.drop_duplicates("device")
        owner = dict(zip(top["device"], top["pid"], strict=True))
    preferred = np.fromiter(
        (owner.get(d) == p for d, p in zip(device, pid, strict=True)), dtype=bool, count=len(device)
    )
    cand = pd.DataFrame({"ev_pos": ev_pos, "rt_pos": rt_pos, "pref": preferred, "launch_ts": launch_ts})
    cand = cand.sort_values(["ev_pos", "pref", "launch_ts"], ascending=[True, False, False], kind="stable")
    best = cand.drop_duplicates("ev_pos")
    out[best["ev_pos"].to_numpy()] = best["rt_pos"].to_numpy()
    return out


#: A GPU event that starts this much before its launching call (µs) cannot be explained by a
#: few µs of clock jitter (tolerated by :func:`link_launches`, step 2): the clocks disagree.
CLOCK_SKEW_TOLERANCE_US = 10.0
#: Share of linked GPU events starting that early above which the report warns. Every real
#: trace in fixtures/ has none; a GPU timeline 50 µs early already gives 17% to 100%, and 3 ms
#: early 3% on a GPU-bound trace (its kernels queue for longer than that after their launch).
CLOCK_SKEW_MIN_SHARE = 0.01
