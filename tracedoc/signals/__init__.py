"""Signals: named measurements of a trace. Importing this package registers them all."""

from tracedoc.signals import attention, gpu, h2d, memory, optimizer, steps, tensor_core  # noqa: F401  (registers)
from tracedoc.signals.base import SIGNALS, Signal, SignalContext, SignalUnavailable, signal

__all__ = ["SIGNALS", "Signal", "SignalContext", "SignalUnavailable", "signal"]
