"""Torch-side helpers for workloads: warm up, record one profiler trace, time steady-state steps.

A workload's ``run(config, out_dir)`` builds its model and data, defines ``step()`` (one
training step, including fetching the batch) and returns :func:`measure`'s result::

    def run(config, out_dir):
        device = harness.resolve_device(config.device)
        ...
        return harness.measure(step, batch_size=config.batch_size, device=device,
                               out_dir=out_dir, steps=harness.Steps.from_config(config))

torch is imported inside the functions, so importing this module stays cheap.
"""

from __future__ import annotations

import json
import os
import time
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Callable

from tracedoc import hostfacts

#: File name of the trace each trial writes (gzipped Chrome trace, Kineto format).
TRACE_NAME = "trace.pt.trace.json.gz"

#: Top-level key of the trace JSON under which :func:`measure` records the host facts
#: (:func:`host_info`); ``tracedoc.load`` keeps it in ``Trace.metadata``.
HOST_METADATA_KEY = "tracedoc_host"

#: Environment variable the fix-loop sets for its A/B measurement runs: when ``"1"``,
#: :func:`measure` records no trace and times a single window (see docs/fix-loop.md).
MEASURE_ONLY_ENV = "TRACEDOC_MEASURE_ONLY"
#: ``TRACEDOC_RECORD_SHAPES=1`` records input shapes and dtypes (``record_shapes=True``), which
#: the op views read; off by default, since it adds CPU time to every profiled op.
RECORD_SHAPES_ENV = "TRACEDOC_RECORD_SHAPES"

#: CPU flags that mean the cores have bf16 matrix or dot-product units (see :mod:`tracedoc.hostfacts`).
BF16_CPU_FLAGS = hostfacts.BF16_CPU_FLAGS


@dataclass(frozen=True)
class Steps:
    """Step counts of one run.

    Attributes:
        warmup: steps run before anything is recorded (allocator, cuDNN autotune, compile).
        profile_wait, profile_warmup, profile_active: the ``torch.profiler.schedule``
            phases; only the ``profile_active`` steps are in the trace.
        timed: steps in each timed window (after the profiled steps, profiler off).
        repeats: number of timed windows; their spread is the measured noise.
    """

    warmup: int = 5
    profile_wait: int = 1
    profile_warmup: int = 1
    profile_active: int = 3
    timed: int = 20
    repeats: int = 3

    @classmethod
    def from_config(cls, config: Any) -> Steps:
        """Read the step counts from a Config with fields ``warmup_steps``, ``profile_wait``,
        ``profile_warmup``, ``profile_active``, ``timed_steps`` and ``repeats``."""
        return cls(
            warmup=config.warmup_steps,
            profile_wait=config.profile_wait,
            profile_warmup=config.profile_warmup,
            profile_active=config.profile_active,
            timed=config.timed_steps,
            repeats=config.repeats,
        )

    @property
    def total(self) -> int:
        """Steps one run takes in all (how many batches the data must supply)."""
        return self.warmup + self.profile_wait + self.profile_warmup + self.profile_active + self.timed * self.repeats


def set_intra_op_threads(num_threads: int) -> None:
    """Apply a workload's ``num_threads`` knob: ``torch.set_num_threads(num_threads)``, or
    PyTorch's default (one thread per core) when it is 0.

    Raises:
        ValueError: ``num_threads`` is negative.
    """
    if num_threads < 0:
        raise ValueError(f"num_threads must be >= 0, not {num_threads}")
    if num_threads:
        import torch

        torch.set_num_threads(num_threads)


def resolve_device(name: str) -> str:
    """``"auto"`` becomes ``"cuda"`` when a GPU is usable, else ``"cpu"``; other names pass through."""
    import torch

    if name == "auto":
        return "cuda" if torch.cuda.is_available() else "cpu"
    return name


def device_info(device: str) -> dict[str, Any]:
    """Describe the device a run used: ``type``, ``name``, ``bf16_supported``, torch version."""
    import torch

    dev = torch.device(device)
    info: dict[str, Any] = {"type": dev.type, "torch": torch.__version__}
    if dev.type == "cuda":
        info["name"] = torch.cuda.get_device_name(dev)
        info["bf16_supported"] = bool(torch.cuda.is_bf16_supported())
        info["total_memory_bytes"] = torch.cuda.get_device_properties(dev).total_memory
    else:
        info["name"] = hostfacts.cpu_model()
        info["bf16_supported"] = hostfacts.bf16_matrix_units()
    return info


def host_info(dataloader_workers: int = 0, amp: str | None = None) -> dict[str, Any]:
    """The host facts the CPU rules read, as recorded in a trace's ``tracedoc_host`` metadata.

    Returns:
        ``{"cpu_cores": int`` (CPUs this process may run on: :func:`tracedoc.hostfacts.cpu_cores`),
        ``"intra_op_threads": int`` (``torch.get_num_threads()``), ``"inter_op_threads": int``,
        ``"dataloader_workers": int`` (as the workload says), ``"cpu_model": str``,
        ``"cpu_flags": [str]`` (:func:`tracedoc.hostfacts.cpu_flags`), ``"bf16_matrix_units": bool`` (any of
        :data:`BF16_CPU_FLAGS`), ``"torch": str``, and ``"amp": str`` (the autocast dtype
        the workload ran with: ``"off"`` for fp32, ``"bf16"``, ``"fp16"``) when given``}``.
    """
    import torch

    flags = hostfacts.cpu_flags()
    return {
        "cpu_cores": hostfacts.cpu_cores(),
        "intra_op_threads": torch.get_num_threads(),
        "inter_op_threads": torch.get_num_interop_threads(),
        "dataloader_workers": int(dataloader_workers),
        "cpu_model": hostfacts.cpu_model(),
        "cpu_flags": flags,
        "bf16_matrix_units": hostfacts.bf16_matrix_units(flags),
        "torch": torch.__version__,
        **({"amp": str(amp)} if amp is not None else {}),
    }


def synchronize(device: str) -> None:
    """Wait for all queued work on ``device`` (no-op on the CPU)."""
    import torch

    if torch.device(device).type == "cuda":
        torch.cuda.synchronize(device)


def measure(
    step: Callable[[], None],
    *,
    batch_size: int,
    device: str,
    out_dir: str | Path,
    steps: Steps,
    dataloader_workers: int = 0,
    amp: str | None = None,
) -> dict[str, Any]:
    """Warm up, record a trace, then time ``steps.repeats`` windows of ``steps.timed`` steps.

    The trace is recorded with ``torch.profiler`` (CPU activity, plus CUDA on a GPU),
    ``schedule(wait, warmup, active)``, ``record_shapes=False`` (``True`` with the environment
    variable ``TRACEDOC_RECORD_SHAPES=1``) and ``profile_memory=True`` (so ``[memory]`` events exist), and exported as a gzipped Chrome trace
    ``out_dir/trace.pt.trace.json.gz``. The timed windows run with the profiler off and
    the device synchronised at each window's edges, so profiling overhead and queued
    work do not pollute the figures. The trace carries :func:`host_info` (core count,
    intra-op threads, ``dataloader_workers``, CPU model and flags, and ``amp``, the
    workload's autocast setting, when it passes one) under the top-level key ``tracedoc_host``.

    With the environment variable ``TRACEDOC_MEASURE_ONLY=1`` (the fix-loop's A/B
    measurement runs) no trace is recorded and one timed window is run: the result then
    has ``"trace": None``.

    Returns:
        ``{"samples_per_s": [...], "step_time_ms": [...]}`` (one value per repeat; samples/s
        = batch_size * timed / seconds, step time in ms), plus ``batch_size``, ``steps``,
        ``trace`` (file name) and ``device`` (:func:`device_info`).
    """
    out_dir = Path(out_dir)
    out_dir.mkdir(parents=True, exist_ok=True)
    measure_only = os.environ.get(MEASURE_ONLY_ENV) == "1"
    for _ in range(steps.warmup):
        step()
    synchronize(device)
    if measure_only:
        samples_per_s, step_time_ms = _timed_windows(step, batch_size, device, steps.timed, 1)
        return {
            "samples_per_s": samples_per_s,
            "step_time_ms": step_time_ms,
            "batch_size": batch_size,
            "steps": steps.__dict__,
            "trace": None,
            "device": device_info(device),
        }

    _record_trace(step, device, out_dir / TRACE_NAME, steps, host_info(dataloader_workers, amp))
    synchronize(device)

    samples_per_s, step_time_ms = _timed_windows(step, batch_size, device, steps.timed, steps.repeats)
    return {
        "samples_per_s": samples_per_s,
        "step_time_ms": step_time_ms,
        "batch_size": batch_size,
        "steps": steps.__dict__,
        "trace": TRACE_NAME,
        "device": device_info(device),
    }


def _record_trace(step: Callable[[], None], device: str, trace_path: Path, steps: Steps, host: dict[str, Any]) -> None:
    """Run the profiled steps (``steps.profile_wait + profile_warmup + profile_active``) under
    ``torch.profiler`` and export the active ones to ``trace_path`` (gzipped Chrome trace),
    with ``host`` (:func:`host_info`) under the top-level key :data:`HOST_METADATA_KEY`."""
    import torch
    from torch.profiler import ProfilerActivity, profile, schedule

    activities = [ProfilerActivity.CPU]
    if torch.device(device).type == "cuda":
        activities.append(ProfilerActivity.CUDA)

    def export(prof) -> None:
        prof.export_chrome_trace(str(trace_path))  # a ".gz" path is written gzipped

    with profile(
        activities=activities,
        schedule=schedule(wait=steps.profile_wait, warmup=steps.profile_warmup, active=steps.profile_active, repeat=1),
        on_trace_ready=export,
        record_shapes=os.environ.get(RECORD_SHAPES_ENV) == "1",
        profile_memory=True,
        with_stack=False,
    ) as prof:
        host_json = json.dumps(host)
        for _ in range(steps.profile_wait + steps.profile_warmup + steps.profile_active):
            step()
            prof.add_metadata_json(HOST_METADATA_KEY, host_json)  # kept only while a session records
            prof.step()


def _timed_windows(
    step: Callable[[], None], batch_size: int, device: str, timed: int, repeats: int
) -> tuple[list[float], list[float]]:
    samples_per_s, step_time_ms = [], []
    for _ in range(repeats):
        synchronize(device)
        t0 = time.perf_counter()
        for _ in range(timed):
            step()
        synchronize(device)
        seconds = time.perf_counter() - t0
        samples_per_s.append(batch_size * timed / seconds)
        step_time_ms.append(1000.0 * seconds / timed)
    return samples_per_s, step_time_ms
