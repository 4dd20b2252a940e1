"""tracedoc inside ``torch.profiler``: diagnose each trace where it is born.

Two entry points:

- :func:`on_trace_ready` -- a handler for ``torch.profiler.profile(on_trace_ready=...)``. It
  writes the trace as ``torch.profiler.tensorboard_trace_handler`` does
  (``DIR/<worker>.<ms since epoch>.pt.trace.json[.gz]``, so TensorBoard-style tools find it),
  analyzes it, prints a short diagnosis and keeps the :class:`~tracedoc.report.Report` on the
  handler (``handler.report``; every cycle's in ``handler.reports``).
- :func:`profile` -- a context manager around a training loop with a schedule that keeps
  warm-up out of the recorded window (``wait=1, warmup=1, active=3`` by default: PyTorch's
  own documentation example), CPU activity plus CUDA/XPU where available, shapes recorded
  (the op view reads them), the host facts the CPU rules read (as the fix-loop's harness
  records them) and this handler. Call ``prof.step()`` once per iteration.

::

    with tracedoc.profile("runs/prof") as prof:
        for batch in loader:
            train_step(batch)
            prof.step()
    prof.tracedoc.report.print()

torch is imported only when :func:`profile` runs or the handler is called with a profiler;
the analyzer itself never needs it.
"""

from __future__ import annotations

import os
import socket
import sys
import time
from pathlib import Path
from typing import IO, Any

#: ``schedule(wait, warmup, active)`` of :func:`profile`: one step skipped, one step of
#: profiler warm-up (its events are discarded), three recorded, as in the torch.profiler
#: documentation's example (``schedule(wait=1, warmup=1, active=3)``).
DEFAULT_SCHEDULE = (1, 1, 3)
#: Findings printed per diagnosis.
SHOWN_FINDINGS = 3


class TraceHandler:
    """The ``on_trace_ready`` callable made by :func:`on_trace_ready`.

    Attributes:
        dir: the folder traces are written to.
        report: the last cycle's :class:`~tracedoc.report.Report` (None before the first).
        reports: every cycle's report, oldest first.
        paths: every trace written, oldest first.
    """

    def __init__(
        self,
        dir_name: str | os.PathLike[str],
        worker_name: str | None = None,
        use_gzip: bool = True,
        quiet: bool = False,
        stream: IO[str] | None = None,
    ) -> None:
        self.dir = Path(dir_name)
        self.worker_name = worker_name or f"{socket.gethostname()}_{os.getpid()}"
        self.use_gzip = use_gzip
        self.quiet = quiet
        self.stream = stream
        self.report: Any = None
        self.reports: list[Any] = []
        self.paths: list[Path] = []

    def trace_path(self) -> Path:
        """The next trace file's path (``<worker>.<ms since epoch>.pt.trace.json[.gz]``)."""
        name = f"{self.worker_name}.{time.time_ns() // 1_000_000}.pt.trace.json"
        return self.dir / (name + ".gz" if self.use_gzip else name)

    def __call__(self, prof: Any) -> None:
        """Export ``prof``'s trace (``prof.export_chrome_trace``), analyze it, print the
        diagnosis. An analysis error is printed as one line and leaves ``report`` as it was:
        the training loop is never stopped by tracedoc."""
        self.dir.mkdir(parents=True, exist_ok=True)
        path = self.trace_path()
        prof.export_chrome_trace(str(path))
        self.paths.append(path)
        self.analyze(path)

    def analyze(self, path: str | os.PathLike[str]) -> Any:
        """Analyze the trace at ``path``, keep and print its report; return it (None on error)."""
        import tracedoc
        from tracedoc.errors import one_line

        stream = self.stream if self.stream is not None else sys.stderr
        try:
            report = tracedoc.analyze(str(path))
        except tracedoc.TracedocError as exc:
            stream.write(one_line(f"tracedoc: {path}: {exc}") + "\n")
            return None
        self.report = report
        self.reports.append(report)
        if not self.quiet:  # trace text is untrusted: each line has its controls escaped
            stream.write("".join(one_line(line) + "\n" for line in diagnosis_lines(report, path)))
            stream.flush()
        return report


def diagnosis_lines(report: Any, path: str | os.PathLike[str]) -> list[str]:
    """The short diagnosis: one header line (trace, step time) and one line per top finding
    (at most :data:`SHOWN_FINDINGS`), or "no findings"."""
    doc = report.to_dict()
    steps = doc.get("steps") or []
    step_ms = [s["step_time_ms"] for s in steps if isinstance(s, dict) and s.get("step_time_ms")]
    head = f"tracedoc: {Path(path).name}"
    if step_ms:
        head += f": {len(step_ms)} step{'s' if len(step_ms) != 1 else ''}, {sum(step_ms) / len(step_ms):.1f} ms/step"
    lines = [head]
    if not report.findings:
        lines.append("  no findings")
    for i, f in enumerate(report.findings[:SHOWN_FINDINGS], 1):
        saving = f" ~{f.estimated_saving_ms:.1f} ms/step" if f.estimated_saving_ms is not None else ""
        lines.append(f"  #{i} {f.severity} {f.code} {f.name}{saving}: {f.fix.summary}")
    more = len(report.findings) - SHOWN_FINDINGS
    if more > 0:
        lines.append(f"  ... {more} more: tracedoc analyze {path}")
    return lines


def on_trace_ready(
    dir_name: str | os.PathLike[str],
    worker_name: str | None = None,
    use_gzip: bool = True,
    quiet: bool = False,
    stream: IO[str] | None = None,
) -> TraceHandler:
    """A ``torch.profiler`` ``on_trace_ready`` handler that writes, analyzes and diagnoses.

    Args:
        dir_name: the folder for trace files (created when needed).
        worker_name: the file-name prefix (default ``<hostname>_<pid>``, as
            ``tensorboard_trace_handler``).
        use_gzip: write ``.pt.trace.json.gz``.
        quiet: keep the reports without printing.
        stream: where the diagnosis goes (default: ``sys.stderr`` at call time).

    Returns:
        a :class:`TraceHandler`; after each profiler cycle ``handler.report`` is its report.
    """
    return TraceHandler(dir_name, worker_name, use_gzip, quiet, stream)


class _Profile:
    def __init__(self, dir_name, wait, warmup, active, repeat, record_shapes, activities, handler_kwargs, kwargs):
        self.handler = on_trace_ready(dir_name, **handler_kwargs)
        self.args = (wait, warmup, active, repeat, record_shapes, activities, kwargs)
        self.prof: Any = None

    def __enter__(self):
        import torch
        from torch.profiler import ProfilerActivity, schedule

        wait, warmup, active, repeat, record_shapes, activities, kwargs = self.args
        if activities is None:
            activities = [ProfilerActivity.CPU]
            if torch.cuda.is_available():
                activities.append(ProfilerActivity.CUDA)
            elif hasattr(torch, "xpu") and torch.xpu.is_available():
                activities.append(ProfilerActivity.XPU)
        self.prof = torch.profiler.profile(
            activities=activities,
            schedule=schedule(wait=wait, warmup=warmup, active=active, repeat=repeat),
            on_trace_ready=self.handler,
            record_shapes=record_shapes,
            **kwargs,
        )
        self.prof.__enter__()
        self.prof.tracedoc = self.handler
        _record_host_facts(self.prof)
        return self.prof

    def __exit__(self, *exc):
        return self.prof.__exit__(*exc)


def _record_host_facts(prof: Any) -> None:
    """Make each ``prof.step()`` add the host facts (core count, intra-op threads, CPU flags:
    :func:`tracedoc.fixloop.harness.host_info`) to the trace's metadata under
    ``tracedoc_host``, as the fix-loop's harness does, so the CPU rules (oversubscription,
    dispatch overhead, bf16) can run on the trace. The profiler keeps metadata added while
    it records."""
    import json

    from tracedoc.fixloop.harness import HOST_METADATA_KEY, host_info

    host_json = json.dumps(host_info())
    step = prof.step

    def step_with_host_facts() -> None:
        prof.add_metadata_json(HOST_METADATA_KEY, host_json)
        step()

    prof.step = step_with_host_facts


def profile(
    dir_name: str | os.PathLike[str] = "runs/tracedoc",
    wait: int = DEFAULT_SCHEDULE[0],
    warmup: int = DEFAULT_SCHEDULE[1],
    active: int = DEFAULT_SCHEDULE[2],
    repeat: int = 1,
    record_shapes: bool = True,
    activities: list | None = None,
    worker_name: str | None = None,
    quiet: bool = False,
    stream: IO[str] | None = None,
    **kwargs: Any,
) -> _Profile:
    """Profile a loop with a schedule that keeps warm-up out of the window, and diagnose it.

    ``with tracedoc.profile(dir) as prof:`` gives the ``torch.profiler.profile`` object; call
    ``prof.step()`` at the end of each iteration. ``prof.tracedoc`` is the
    :class:`TraceHandler` (``prof.tracedoc.report`` after the first cycle ends).

    Args:
        dir_name: the folder for trace files.
        wait, warmup, active, repeat: ``torch.profiler.schedule``'s (steps); the defaults
            (:data:`DEFAULT_SCHEDULE`, one cycle) record steps 3 to 5 of the loop.
        record_shapes: record input shapes (the op view's FLOPs need them).
        activities: ``torch.profiler.ProfilerActivity`` list (default: CPU, plus CUDA or XPU
            when available).
        worker_name, quiet, stream: as :func:`on_trace_ready`.
        **kwargs: passed to ``torch.profiler.profile`` (``profile_memory``, ``with_stack``, ...).

    Raises:
        ModuleNotFoundError: torch is not installed (``pip install 'tracedoc[workloads]'``).
    """
    handler_kwargs = {"worker_name": worker_name, "quiet": quiet, "stream": stream}
    return _Profile(dir_name, wait, warmup, active, repeat, record_shapes, activities, handler_kwargs, kwargs)
