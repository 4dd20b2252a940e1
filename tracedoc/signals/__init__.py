"""Signals: named measurements of a trace. Importing this package registers them all."""

from tracedoc.signals import (  # noqa: F401  (registers)
    attention,
    causes,
    comm,
    cpu,
    cpumodel,
    elementwise,
    gemm,
    gpu,
    h2d,
    hostbound,
    layout,
    ledger,
    memory,
    optimizer,
    opview,
    stepmodel,
    steps,
    tensor_core,
    workload,
)
from tracedoc.signals.base import SIGNALS, Signal, SignalContext, SignalUnavailable, signal

__all__ = ["SIGNALS", "Signal", "SignalContext", "SignalUnavailable", "signal"]
