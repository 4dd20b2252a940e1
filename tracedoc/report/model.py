"""The analysis report as plain data, and its versioned JSON form.

JSON schema (``schema_version`` 1; additive changes keep the version, anything
else bumps it)::

    {"schema_version": 1,
     "tool": {"name": "tracedoc", "version": str},
     "trace": {"primary_device", "path", "n_events", "span_ms", "has_steps", "n_steps", "rank",
               "device": {...} | null, "devices": [...]},
     "signals": {name: number | bool | null},
     "signals_unavailable": {name: reason},
     "units": {name: unit},
     "scopes": {name: "primary device" | "all devices" | "host" | "steps" | "trace"},
     "steps": [{"step", "step_time_ms", "<category>_ms", ...}],
     "findings": [{"code", "name", "severity", "message", "estimated_saving_ms",
                   "saving_basis", "evidence", "fix": {"summary", "safety", "knobs"}}],
     "skipped": [{"code", "name", "reason"}],
     "rules_evaluated": [code, ...],
     "idle_ledger": {device_label: {cause: ms_per_step}},   # causes add up to the idle time
     "below_floor": [{"code", "name", "estimated_saving_ms"}],
     "notes": [str]}

Findings also carry ``claims`` (the ledger slices their saving is granted from) and
``uncapped_saving_ms`` (the rule's own estimate when the engine capped it).
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

from tracedoc import __version__

if TYPE_CHECKING:  # annotations only: importing the engine here would be circular
    from tracedoc.engine.rules import Finding, Skipped
    from tracedoc.trace import Trace

SCHEMA_VERSION = 1


def summarize_trace(trace: Trace) -> dict[str, Any]:
    """The report's ``trace`` section."""
    dev = trace.primary_device()
    vendor = {"NVIDIA": "cuda", "AMD": "hip"}.get(dev.vendor, "gpu") if dev else None
    return {
        "primary_device": f"{vendor}:{dev.id}" if dev else None,
        "path": trace.path,
        "n_events": trace.n_events,
        "span_ms": round(trace.span_us / 1000.0, 3),
        "has_steps": bool(len(trace.steps)),
        "n_steps": int(len(trace.steps)),
        "rank": trace.rank,
        "device": dev.to_dict() if dev else None,
        "devices": [d.to_dict() for d in trace.devices],
    }


@dataclass
class Report:
    """Everything an analysis produced; render it with :mod:`tracedoc.report.render`."""

    trace: dict[str, Any]
    signals: dict[str, Any]
    signals_unavailable: dict[str, str]
    units: dict[str, str]
    steps: list[dict[str, Any]]
    findings: list[Finding]
    skipped: list[Skipped]
    rules_evaluated: list[str] = field(default_factory=list)
    #: signal -> what it covers (tracedoc.signals.base.SCOPES); ``trace.primary_device`` names the device
    scopes: dict[str, str] = field(default_factory=dict)
    #: device label -> {ledger cause -> ms per step}; each device's causes add up to its idle time
    idle_ledger: dict[str, dict[str, float]] = field(default_factory=dict)
    #: findings whose granted saving fell below the floors (not ranked, not counted for --fail-on)
    below_floor: list[Finding] = field(default_factory=list)
    #: caveats about the whole report (e.g. a window dominated by start-up work)
    notes: list[str] = field(default_factory=list)

    def to_dict(self) -> dict[str, Any]:
        """The versioned, JSON-safe form (see the module docstring)."""
        return {
            "schema_version": SCHEMA_VERSION,
            "tool": {"name": "tracedoc", "version": __version__},
            "trace": self.trace,
            "signals": self.signals,
            "signals_unavailable": self.signals_unavailable,
            "units": self.units,
            "scopes": self.scopes,
            "steps": self.steps,
            "findings": [f.to_dict() for f in self.findings],
            "skipped": [s.to_dict() for s in self.skipped],
            "rules_evaluated": self.rules_evaluated,
            "idle_ledger": self.idle_ledger,
            "below_floor": [
                {"code": f.code, "name": f.name, "estimated_saving_ms": f.estimated_saving_ms} for f in self.below_floor
            ],
            "notes": self.notes,
        }
