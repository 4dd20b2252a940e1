"""Build small Kineto-style traces in tests, with known answers.

Times are given in µs relative to ``base``; events are written with absolute ts
near 1.7e15 like real traces, so the loader's rebasing is exercised.
"""

from __future__ import annotations

import gzip
import json
from pathlib import Path
from typing import Any

BASE_US = 1_700_000_000_000_000

V100 = {
    "id": 0,
    "name": "Tesla V100-SXM2-32GB",
    "totalGlobalMem": 34089730048,
    "computeMajor": 7,
    "computeMinor": 0,
    "numSms": 80,
}
A100 = {
    "id": 0,
    "name": "NVIDIA A100-SXM4-80GB",
    "totalGlobalMem": 85899345920,
    "computeMajor": 8,
    "computeMinor": 0,
    "numSms": 108,
}
P100 = {
    "id": 0,
    "name": "Tesla P100-PCIE-16GB",
    "totalGlobalMem": 17071734784,
    "computeMajor": 6,
    "computeMinor": 0,
    "numSms": 56,
}


class TraceBuilder:
    """Accumulates events; ``doc()`` returns the trace object, ``write()`` a file."""

    def __init__(self, devices: list[dict] | None = None, old_categories: bool = False, base: float = BASE_US):
        self.events: list[dict[str, Any]] = []
        self.devices = devices if devices is not None else [V100]
        self.old = old_categories
        self.base = base
        self._corr = 1000
        self.pid, self.tid = 100, 100

    def _cat(self, new: str) -> str:
        if not self.old:
            return new
        return {
            "cpu_op": "Operator",
            "user_annotation": "Operator",
            "kernel": "Kernel",
            "cuda_runtime": "Runtime",
            "gpu_memcpy": "Memcpy",
            "gpu_memset": "Memset",
        }[new]

    def op(self, name: str, ts: float, dur: float, cat: str = "cpu_op", tid: Any = None) -> TraceBuilder:
        self.events.append(
            {
                "ph": "X",
                "cat": self._cat(cat),
                "name": name,
                "pid": self.pid,
                "tid": self.tid if tid is None else tid,
                "ts": self.base + ts,
                "dur": dur,
                "args": {"External id": len(self.events)},
            }
        )
        return self

    def step(self, n: int, ts: float, dur: float) -> TraceBuilder:
        return self.op(f"ProfilerStep#{n}", ts, dur, cat="user_annotation")

    def dataloader(self, ts: float, dur: float) -> TraceBuilder:
        return self.op("enumerate(DataLoader)#_SingleProcessDataLoaderIter.__next__", ts, dur)

    def _launch(self, name: str, ts: float, dur: float) -> int:
        self._corr += 1
        self.events.append(
            {
                "ph": "X",
                "cat": self._cat("cuda_runtime"),
                "name": name,
                "pid": self.pid,
                "tid": self.tid,
                "ts": self.base + ts,
                "dur": dur,
                "args": {"correlation": self._corr},
            }
        )
        return self._corr

    def runtime(self, name: str, ts: float, dur: float) -> TraceBuilder:
        """A runtime call that launches nothing (a sync, cudaMalloc, ...) on the current thread."""
        self._launch(name, ts, dur)
        return self

    def kernel(
        self,
        name: str,
        launch_ts: float,
        ts: float,
        dur: float,
        launch_dur: float = 5.0,
        device: int = 0,
        stream: int = 7,
        corr: int | None = None,
    ) -> TraceBuilder:
        if corr is None:
            corr = self._launch("cudaLaunchKernel", launch_ts, launch_dur)
        else:  # a chosen id (tests of repeated correlation ids)
            self.events.append(
                {
                    "ph": "X",
                    "cat": self._cat("cuda_runtime"),
                    "name": "cudaLaunchKernel",
                    "pid": self.pid,
                    "tid": self.tid,
                    "ts": self.base + launch_ts,
                    "dur": launch_dur,
                    "args": {"correlation": corr},
                }
            )
        self.events.append(
            {
                "ph": "X",
                "cat": self._cat("kernel"),
                "name": name,
                "pid": device,
                "tid": f"stream {stream}",
                "ts": self.base + ts,
                "dur": dur,
                "args": {"device": device, "stream": stream, "correlation": corr},
            }
        )
        return self

    def memcpy(
        self, kind: str, src: str, nbytes: int, launch_ts: float, ts: float, dur: float, dst: str = "Device"
    ) -> TraceBuilder:
        corr = self._launch("cudaMemcpyAsync", launch_ts, 5.0)
        self.events.append(
            {
                "ph": "X",
                "cat": self._cat("gpu_memcpy"),
                "name": f"Memcpy {kind} ({src} -> {dst})",
                "pid": 0,
                "tid": "stream 7",
                "ts": self.base + ts,
                "dur": dur,
                "args": {"device": 0, "stream": 7, "correlation": corr, "bytes": nbytes},
            }
        )
        return self

    def memset(self, launch_ts: float, ts: float, dur: float) -> TraceBuilder:
        corr = self._launch("cudaMemsetAsync", launch_ts, 3.0)
        self.events.append(
            {
                "ph": "X",
                "cat": self._cat("gpu_memset"),
                "name": "Memset (Device)",
                "pid": 0,
                "tid": "stream 7",
                "ts": self.base + ts,
                "dur": dur,
                "args": {"device": 0, "stream": 7, "correlation": corr, "bytes": 64},
            }
        )
        return self

    def memory(
        self, ts: float, total_allocated: float, device_type: int = 1, device_id: int = 0, delta: float = 0
    ) -> TraceBuilder:
        self.events.append(
            {
                "ph": "i",
                "s": "t",
                "cat": "cpu_instant_event",
                "name": "[memory]",
                "pid": self.pid,
                "tid": self.tid,
                "ts": self.base + ts,
                "args": {
                    "Device Type": device_type,
                    "Device Id": device_id,
                    "Bytes": delta,
                    "Total Allocated": total_allocated,
                    "Total Reserved": total_allocated,
                },
            }
        )
        return self

    def doc(self) -> dict[str, Any]:
        return {
            "schemaVersion": 1,
            "deviceProperties": self.devices,
            "traceEvents": [{"ph": "M", "name": "process_name", "pid": self.pid, "tid": 0, "args": {"name": "python"}}]
            + self.events,
        }

    def write(self, path: Path, gz: bool = False) -> Path:
        data = json.dumps(self.doc()).encode()
        path.write_bytes(gzip.compress(data) if gz else data)
        return path


def dataloader_bound(n_steps: int = 3, step_us: float = 1000.0, dl_us: float = 400.0) -> TraceBuilder:
    """Steps of ``step_us``: DataLoader for ``dl_us`` then one kernel filling the rest but 50 µs.

    Per step: kernel share (step_us - dl_us - 100)/step_us, DataLoader dl_us/step_us.
    """
    b = TraceBuilder()
    for i in range(n_steps):
        t0 = i * step_us
        b.step(i + 1, t0, step_us)
        b.dataloader(t0, dl_us)
        b.op("aten::conv2d", t0 + dl_us, 40.0)
        b.kernel("volta_scudnn_128x64_relu_medium_nn_v1", t0 + dl_us + 10, t0 + dl_us + 50, step_us - dl_us - 100)
    return b


def budget_rule_toml(threshold_ms: float, code: str = "CI1") -> str:
    """A user rule file: a CI step-time budget ``step_time_ms > threshold_ms``."""
    return f'''
code = "{code}"
name = "step-time-budget"
severity = "error"
summary = "Step time over budget"
condition = "step_time_ms > {threshold_ms}"
message = "step time {{step_time_ms:.1f}} ms exceeds the {threshold_ms} ms budget"
[fix]
summary = "find out what got slower"
safety = "display-only"
[docs]
what = "x"
why = "x"
example = "x"
fix = "x"
safety = "x"
'''


#: The hand-counted three-rank job of tests/test_ranks.py (kernel durations in µs). Step 1: rank 2
#: arrives last at both collectives (the others wait 100 each); step 2: rank 0 is late at the
#: AllReduce only (the others wait 40 and 60).
COMM_DURS = {
    0: {"AllReduce": [150.0, 50.0], "AllGather": [130.0, 30.0]},
    1: {"AllReduce": [150.0, 90.0], "AllGather": [130.0, 30.0]},
    2: {"AllReduce": [50.0, 110.0], "AllGather": [30.0, 30.0]},
}


def comm_rank(rank: int, durs: dict[str, list[float]], world: int = 3) -> dict:
    """Two steps of 1 ms; in each, one AllReduce and one AllGather kernel of the given durations
    (µs), with ``distributedInfo`` naming the rank and world size."""
    b = TraceBuilder()
    for s in range(2):
        t0 = s * 1000.0
        b.step(s + 1, t0, 1000.0).op("aten::mm", t0 + 10, 50)
        b.kernel("sgemm_kernel", t0 + 10, t0 + 20, 200)
        b.kernel("ncclDevKernel_AllReduce_Sum_f32_RING_LL", t0 + 300, t0 + 300, durs["AllReduce"][s])
        b.kernel("ncclDevKernel_AllGather_RING_LL", t0 + 600, t0 + 600, durs["AllGather"][s])
    d = b.doc()
    d["distributedInfo"] = {"backend": "nccl", "rank": rank, "world_size": world}
    return d


def write_comm_ranks(folder) -> None:
    """Write :data:`COMM_DURS`'s three ranks as ``folder/r0.json`` .. ``r2.json``."""
    import json

    for r, dd in COMM_DURS.items():
        (folder / f"r{r}.json").write_text(json.dumps(comm_rank(r, dd)))
