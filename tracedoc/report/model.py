"""The analysis report as plain data, and its versioned JSON form.

JSON schema (``schema_version`` 2; additive changes keep the version, anything
else bumps it. Version 2 replaced ``below_floor`` with ``also_true``)::

    {"schema_version": 2,
     "tool": {"name": "tracedoc", "version": str},
     "trace": {"primary_device", "path", "n_events", "span_ms", "has_steps", "n_steps", "rank",
               "device": {...} | null, "devices": [...], "dropped_events": {reason: count}},
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
     "also_true": [{"code", "name", "overlaps", "why", "estimated_saving_ms", "uncapped_saving_ms"}],
                   # rules whose condition holds but that are not ranked: "overlaps" names the
                   # finding that claims their time first, "below floor", or "window"
     "notes": [str],
     "recoverable": {"ms", "basis": "replay", "findings": [code], "not_replayed": [code]} | null}
                   # the headline: every replayed fix together in the step model (never a sum)

Findings also carry ``claims`` (the ledger slices their saving is granted from),
``uncapped_saving_ms`` (the rule's own estimate when the engine capped it),
``replayed_saving_ms`` (the step model's saving of the rule's ``[fix] replay``; when set it is
``estimated_saving_ms``) and ``slice_saving_ms`` (the granted slice, the upper bound beside it).
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

from tracedoc._version import __version__

if TYPE_CHECKING:  # annotations only: importing the engine here would be circular
    from tracedoc.engine.claims import AlsoTrue
    from tracedoc.engine.rules import Finding, Skipped
    from tracedoc.trace import Trace

SCHEMA_VERSION = 2


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
        # impossible values dropped at load (negative durations, sizes...), by reason
        "dropped_events": dict(getattr(trace, "dropped_events", {}) or {}),
    }


@dataclass(repr=False)
class Report:
    """Everything an analysis produced, as plain data.

    Attributes:
        trace: the trace summary (path, n_events, span_ms, has_steps, n_steps, rank,
            device, devices).
        signals: signal name -> value (units in ``units``; None when unavailable, the
            reason in ``signals_unavailable``).
        steps: per step, ms in each step-time breakdown category.
        findings: :class:`~tracedoc.engine.rules.Finding` list, ranked by estimated saving
            (ms per step), largest first.
        skipped: rules that could not be evaluated on this trace, with the reason.
        rules_evaluated: the codes of the selected rules.

    ``print()`` shows the terminal report, ``plot()`` the step breakdown; in a notebook a
    Report renders as HTML (``_repr_html_``) or Markdown; ``repr()`` is one line.
    """

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
    #: rules whose condition holds but that are not ranked (another finding claims their time,
    #: below the floor, or the window makes them unreliable), each with why; not counted for --fail-on
    also_true: list[AlsoTrue] = field(default_factory=list)
    #: caveats about the whole report (e.g. a window dominated by start-up work)
    notes: list[str] = field(default_factory=list)
    #: the headline: ``{"ms", "basis": "replay", "findings", "not_replayed"}``, the step model's
    #: saving of every replayed finding's fix together (ms per step); None when nothing was
    #: replayed (a CPU-only trace): the headline is then the sum of the granted slices
    recoverable: dict[str, Any] | None = None

    def __repr__(self) -> str:
        from tracedoc.report.render import summary_line

        return f"<Report {self.trace.get('path')}: {summary_line(self)}>"

    def print(self, console: Any = None, top: int | None = None, quiet: bool = False) -> None:
        """Print the terminal report (the one ``tracedoc analyze`` prints).

        Args:
            console: a :class:`rich.console.Console` (default: a new one on stdout).
            top: show only the first ``top`` findings.
            quiet: print only the closing summary line.
        """
        from rich.console import Console

        from tracedoc.report.render import ConsoleRenderer

        ConsoleRenderer(console or Console(highlight=False), top=top, quiet=quiet).render(self)

    def to_markdown(self) -> str:
        """The Markdown report (``--format markdown``)."""
        from tracedoc.report.render import MarkdownRenderer

        return MarkdownRenderer().render(self)

    def _repr_markdown_(self) -> str:
        return self.to_markdown()

    def _repr_html_(self) -> str:
        """The findings as HTML for a notebook (no plots, so no plotly needed)."""
        from tracedoc.report.html import findings_html

        return findings_html(self)

    def plot(self) -> Any:
        """The step-time breakdown of every step as a stacked plotly bar chart (ms per
        category and step). Needs the ``html`` extra (plotly).

        Raises:
            tracedoc.errors.TracedocError: plotly is not installed.
        """
        from tracedoc.report.html import step_breakdown_figure

        return step_breakdown_figure(self)

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
            "also_true": [a.to_dict() for a in self.also_true],
            "notes": self.notes,
            "recoverable": self.recoverable,
        }
