"""Signals: named measurements of a trace. Importing this package registers them all."""

from tracedoc.signals import cpu as _cpu  # noqa: F401  (registers the CPU signals)
from tracedoc.signals import gpu, h2d, memory, optimizer, steps, tensor_core  # noqa: F401  (registers)
from tracedoc.signals.base import SIGNALS, Signal, SignalContext, SignalUnavailable, signal

__all__ = ["SIGNALS", "Signal", "SignalContext", "SignalUnavailable", "signal"]
