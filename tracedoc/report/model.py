"""The analysis report as plain data, and its versioned JSON form.

The documents: :class:`Report` and the parts it holds, :class:`Finding` (with its
:class:`Fix` and :class:`Severity`), :class:`Skipped` and :class:`AlsoTrue`. Each has
``to_dict`` (JSON-safe plain data: tuples become lists, a severity its string) and a
``from_dict`` classmethod that reverses it exactly: ``X.from_dict(x.to_dict()) == x``, also
after a trip through JSON. The engine (:mod:`tracedoc.engine`) builds them; this module never
imports it. :class:`ManyTraceHooks` gives the many-trace documents (:mod:`tracedoc.report.ranks`)
the notebook hooks a Report has (``print``, ``tables``, ``plot``, ...).

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
                   "saving_basis", "evidence", "fix": {"summary", "safety", "knobs", "replay"}}],
     "skipped": [{"code", "name", "reason"}],
     "rules_evaluated": [code, ...],
     "idle_ledger": {device_label: {cause: ms_per_step}},   # causes add up to the idle time
     "also_true": [{"code", "name", "overlaps", "why", "estimated_saving_ms", "uncapped_saving_ms"}],
                   # rules whose condition holds but that are not ranked: "overlaps" names the
                   # finding that claims their time first, "below floor", or "window"
     "notes": [str],
     "recoverable": {"ms", "basis": "replay", "findings": [code], "not_replayed": [code]} | null,
                   # the headline: every replayed fix together in the step model (never a sum)
     "kernels": {"by_category": [{"category", "ms_per_step"}],
                 "top": [{"kernel", "ms_per_step", "count_per_step", "category"}]} | null,
                   # kernel time per step by category and the top 10 kernels (the table
                   # signals kernel_time_by_category and top_kernels); null without kernels
     "op_view": {"peak": {device peak fields} | null,
                 "ops": [{"op", "input_dims", "dtype", "kind", "calls_per_step", "kernels_per_call",
                          "gpu_ms_per_step", "mean_us", "gflop", "mbytes", "tflops", "tbps",
                          "pct_of_peak", "intensity", "bound"}],
                 "kernels": [{"kernel", "op", "count_per_step", "gpu_ms_per_step", "mean_us",
                              "occupancy_pct", "tflops", "tbps", "pct_of_peak", "intensity",
                              "bound"}]} | null}
                   # the op and kernel views (tracedoc.signals.opview); null without kernels

A finding's ``severity`` is ``"info"``, ``"warning"`` or ``"error"`` (:class:`Severity`, in
that order of importance), the shown level: set by its saving's share of the step (below 1%
info, from 1% warning, from 10% error; :func:`tracedoc.engine.claims.impact_severity`), the
rule's own level where the share is unknown; ``base_severity`` is the rule's own level (its
TOML ``severity``; null in a report written before it was kept, and read back as None); its
fix's ``replay`` is the step model's name of the fix or null.
Findings also carry ``claims`` (the ledger slices their saving is granted from),
``uncapped_saving_ms`` (the rule's own estimate when the engine capped it), ``overlaps`` (the
codes of the findings granted its slices first when it was capped, else ``[]``),
``replayed_saving_ms`` (the step model's saving of the rule's ``[fix] replay``; when set it is
``estimated_saving_ms``), ``slice_saving_ms`` (the granted slice, the upper bound beside it) and
``replayed_low_ms`` (the low end of the replayed saving's range, or null). All savings are ms per
step.

:meth:`Report.from_dict` reads a document of this ``schema_version`` only (any other, or none,
raises :class:`tracedoc.errors.TracedocError`); it ignores ``tool`` (written anew by
``to_dict``), and the optional sections and fields (``scopes``, ``idle_ledger``, ``notes``,
``recoverable``, ``kernels``, a finding's ``overlaps`` and savings after ``fix``, a fix's ``replay`` ...)
take their defaults when absent, so a version-2 report written before they were added reads too.
"""

from __future__ import annotations

import enum
from dataclasses import asdict, dataclass, field
from typing import TYPE_CHECKING, Any, ClassVar

from tracedoc._version import __version__
from tracedoc.errors import DocumentError, TracedocError, display_path, one_line
from tracedoc.report.header import check_header

if TYPE_CHECKING:  # annotations only
    from tracedoc.trace import Trace

SCHEMA_VERSION = 2


class Severity(enum.StrEnum):
    """How much a finding matters, ordered by importance: ``INFO < WARNING < ERROR``.

    A member is its string (``Severity.ERROR == "error"``, ``str()``, f-strings and JSON give
    ``"error"``), but it orders by :attr:`rank`, never alphabetically. A comparison with a
    plain string reads the string as a severity (``Severity.WARNING < "error"``); a string that
    is no severity raises :class:`TypeError`, as does any other type.
    """

    INFO = "info"
    WARNING = "warning"
    ERROR = "error"

    @property
    def rank(self) -> int:
        """0 for info, 1 for warning, 2 for error (higher is more severe)."""
        return _RANK[self]

    @classmethod
    def most_severe_first(cls) -> tuple[Severity, ...]:
        """Every severity, the most severe first: ``(ERROR, WARNING, INFO)``."""
        return tuple(sorted(cls, key=lambda s: -s.rank))

    @classmethod
    def _coerce(cls, other: object) -> Severity | None:
        """``other`` as a Severity; None when it is not a string.

        Raises:
            TypeError: a string that is not a severity (plain string order is never used).
        """
        if isinstance(other, cls):
            return other
        if isinstance(other, str):
            try:
                return cls(other)
            except ValueError:
                raise TypeError(
                    f"cannot order a Severity against {one_line(repr(other)[:40])}: not one of info, warning, error"
                ) from None
        return None

    def __lt__(self, other: object) -> bool:
        o = self._coerce(other)
        return NotImplemented if o is None else self.rank < o.rank

    def __le__(self, other: object) -> bool:
        o = self._coerce(other)
        return NotImplemented if o is None else self.rank <= o.rank

    def __gt__(self, other: object) -> bool:
        o = self._coerce(other)
        return NotImplemented if o is None else self.rank > o.rank

    def __ge__(self, other: object) -> bool:
        o = self._coerce(other)
        return NotImplemented if o is None else self.rank >= o.rank


_RANK = {s: i for i, s in enumerate(Severity)}  # definition order: least severe first


@dataclass(frozen=True)
class Fix:
    """The change that addresses a finding: text, safety level, workload knobs it maps to.

    Attributes:
        summary: one line.
        safety: ``"safe"``, ``"unsafe"`` or ``"display-only"``
            (:data:`tracedoc.engine.rules.SAFETY_LEVELS`).
        knobs: the workload knobs the fix maps to (``to_dict``: a list).
    """

    summary: str
    safety: str
    knobs: tuple[str, ...] = ()
    #: the step model's name for this fix (:data:`tracedoc.signals.stepmodel.FIXES`): the
    #: engine replays the step with it to estimate the saving (None: no replay)
    replay: str | None = None

    def to_dict(self) -> dict[str, Any]:
        return {"summary": self.summary, "safety": self.safety, "knobs": list(self.knobs), "replay": self.replay}

    @classmethod
    def from_dict(cls, d: dict[str, Any]) -> Fix:
        """The Fix of :meth:`to_dict`'s output (``knobs`` and ``replay`` may be absent)."""
        return cls(d["summary"], d["safety"], tuple(d.get("knobs", ())), d.get("replay"))


@dataclass
class Finding:
    """A rule that fired on a trace. Savings are ms per step.

    Attributes:
        code, name: the rule's.
        severity: a :class:`Severity` (a valid string given here is converted): the shown one,
            set by the saving's share of the step (:func:`tracedoc.engine.claims.impact_severity`);
            the rule's own level is ``base_severity``.
        message: the rule's message, filled in with the trace's signals.
        estimated_saving_ms: the saving the report ranks by (None: not estimated).
        saving_basis: how the saving is estimated, in words.
        evidence: signal name -> value (numbers, bools, None, or a table signal's rows).
        fix: the :class:`Fix`.
        claims: the pools its saving is granted from (``idle:<cause>``, ``busy``, ``comm``,
            ``step``; :mod:`tracedoc.engine.claims`).
    """

    code: str
    name: str
    severity: Severity
    message: str
    estimated_saving_ms: float | None
    saving_basis: str
    evidence: dict[str, Any]
    fix: Fix
    claims: tuple[str, ...] = ("step",)
    #: the rule's own estimate before the engine capped it to the slices still unclaimed
    #: (None when the estimate was granted whole)
    uncapped_saving_ms: float | None = None
    #: codes of the findings that were granted this finding's slices first, when the engine
    #: capped its saving (empty otherwise)
    overlaps: tuple[str, ...] = ()
    #: the step model's saving for the rule's ``[fix] replay`` (ms per step; None: the rule
    #: declares no replay or the trace cannot be replayed); when set it is the estimate
    replayed_saving_ms: float | None = None
    #: the rule's own estimate as granted from its claimed slices (ms per step): beside a
    #: replayed saving, the slice-based upper bound
    slice_saving_ms: float | None = None
    #: the low end of the replayed saving's range, where the fix has one (a ``<replay>_low``
    #: fix of :data:`tracedoc.signals.stepmodel.FIXES`: DataLoader workers slow the host)
    replayed_low_ms: float | None = None
    #: the rule's own severity (its TOML ``severity``) when the engine set ``severity`` by the
    #: saving's share of the step (:func:`tracedoc.engine.claims.impact_severity`); None in a
    #: finding built by hand or read from a report written before the field was added
    base_severity: Severity | None = None

    def __post_init__(self) -> None:
        self.severity = Severity(self.severity)  # ValueError: not info, warning or error
        if self.base_severity is not None:
            self.base_severity = Severity(self.base_severity)

    def to_dict(self) -> dict[str, Any]:
        return {
            "code": self.code,
            "name": self.name,
            "severity": self.severity.value,
            "message": self.message,
            "estimated_saving_ms": self.estimated_saving_ms,
            "saving_basis": self.saving_basis,
            "claims": list(self.claims),
            "uncapped_saving_ms": self.uncapped_saving_ms,
            "overlaps": list(self.overlaps),
            "replayed_saving_ms": self.replayed_saving_ms,
            "slice_saving_ms": self.slice_saving_ms,
            "replayed_low_ms": self.replayed_low_ms,
            "base_severity": self.base_severity.value if self.base_severity is not None else None,
            "evidence": self.evidence,
            "fix": self.fix.to_dict(),
        }

    @classmethod
    def from_dict(cls, d: dict[str, Any]) -> Finding:
        """The Finding of :meth:`to_dict`'s output; the fields after ``fix`` may be absent
        (their defaults), as in a report written before they were added."""
        return cls(
            code=d["code"],
            name=d["name"],
            severity=Severity(d["severity"]),
            message=d["message"],
            estimated_saving_ms=d["estimated_saving_ms"],
            saving_basis=d["saving_basis"],
            evidence=dict(d["evidence"]),
            fix=Fix.from_dict(d["fix"]),
            claims=tuple(d.get("claims", ("step",))),
            uncapped_saving_ms=d.get("uncapped_saving_ms"),
            overlaps=tuple(d.get("overlaps", ())),
            replayed_saving_ms=d.get("replayed_saving_ms"),
            slice_saving_ms=d.get("slice_saving_ms"),
            replayed_low_ms=d.get("replayed_low_ms"),
            base_severity=Severity(d["base_severity"]) if d.get("base_severity") is not None else None,
        )


@dataclass
class Skipped:
    """A rule that could not be evaluated on a trace, and why (one line)."""

    code: str
    name: str
    reason: str

    def to_dict(self) -> dict[str, Any]:
        return {"code": self.code, "name": self.name, "reason": self.reason}

    @classmethod
    def from_dict(cls, d: dict[str, Any]) -> Skipped:
        return cls(d["code"], d["name"], d["reason"])


@dataclass
class AlsoTrue:
    """A rule whose condition holds but which is not ranked: another finding already claims
    its saving, its saving is under the floor, or the window makes its figure unreliable.

    Attributes:
        code, name: the rule's.
        overlaps: ``"TD104 blocking-sync"``-style names of the findings granted its slices
            first, ``"below floor"``, or ``"window"`` (a report note's reason).
        why: one sentence a person can check against the figures.
        estimated_saving_ms: what was granted (ms per step; None: not estimated).
        uncapped_saving_ms: the rule's own estimate when the engine capped it (ms per step).
    """

    code: str
    name: str
    overlaps: str
    why: str
    estimated_saving_ms: float | None = None
    uncapped_saving_ms: float | None = None

    def to_dict(self) -> dict[str, Any]:
        return asdict(self)  # every field, in order: the schema's also_true entry

    @classmethod
    def from_dict(cls, d: dict[str, Any]) -> AlsoTrue:
        return cls(
            d["code"],
            d["name"],
            d["overlaps"],
            d["why"],
            d.get("estimated_saving_ms"),
            d.get("uncapped_saving_ms"),
        )


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
        findings: :class:`Finding` list, ranked by estimated saving (ms per step), largest
            first.
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
    #: ``{"by_category": [...], "top": [...]}``: kernel time per step by category and the top
    #: kernels (the table signals ``kernel_time_by_category`` and ``top_kernels`` of
    #: :mod:`tracedoc.signals.gpu`), so renderers need no frames; None without kernels
    kernels: dict[str, list[dict[str, Any]]] | None = None
    #: ``{"peak", "ops", "kernels"}``: the device's peak throughput (None: unknown device) and
    #: the op and kernel views with achieved TFLOP/s or TB/s, % of peak and bound (the table
    #: signals ``op_view`` and ``kernel_view`` of :mod:`tracedoc.signals.opview`); None without
    #: kernels
    op_view: dict[str, Any] | None = None

    #: the document kind the render registry dispatches on (:mod:`tracedoc.render`)
    KIND: ClassVar[str] = "report"

    def __repr__(self) -> str:
        from tracedoc.render import render

        return f"<Report {display_path(str(self.trace.get('path')))}: {render(self, 'summary').strip()}>"

    def print(self, console: Any = None, top: int | None = None, quiet: bool = False) -> None:
        """Print the terminal report (the one ``tracedoc analyze`` prints).

        Args:
            console: a :class:`rich.console.Console` (default: a new one on stdout).
            top: show only the first ``top`` findings.
            quiet: print only the closing summary line.
        """
        from rich.console import Console

        from tracedoc.render import render

        console = console or Console(highlight=False)
        if quiet:
            console.print(render(self, "summary", width=console.width).rstrip("\n"), markup=False, highlight=False)
        else:
            render(self, "text", console=console, top=top)

    def to_markdown(self) -> str:
        """The Markdown report (``--format markdown``)."""
        from tracedoc.render import render

        return render(self, "markdown")

    def _repr_markdown_(self) -> str:
        return self.to_markdown()

    def _repr_html_(self) -> str:
        """The findings as HTML for a notebook (no plots, so no plotly needed)."""
        from tracedoc.render import render

        return render(self, "fragment")

    @property
    def tables(self) -> Any:
        """The report as pandas DataFrames (steps, idle_ledger, findings, also_true, skipped,
        ops, kernels), columns named with their units: :class:`tracedoc.report.tables.ReportTables`."""
        from tracedoc.report.tables import report_tables

        if "_tables" not in self.__dict__:
            object.__setattr__(self, "_tables", report_tables(self))
        return self.__dict__["_tables"]

    def plot(self) -> Any:
        """The step-time breakdown of every step as a stacked plotly bar chart (ms per
        category and step). Needs the ``html`` extra (plotly).

        Raises:
            tracedoc.errors.TracedocError: plotly is not installed.
        """
        from tracedoc.render import render

        return render(self, "figure")

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
            "kernels": self.kernels,
            "op_view": self.op_view,
        }

    @classmethod
    def from_dict(cls, d: dict[str, Any]) -> Report:
        """The Report of :meth:`to_dict`'s output (e.g. a saved ``--format json`` report).

        ``tool`` is ignored (``to_dict`` writes the running version); the optional sections
        (those with a default here) take their defaults when absent.

        Raises:
            tracedoc.errors.TracedocError: not a report, a ``schema_version`` other than
                :data:`SCHEMA_VERSION` (or none), or a section missing or of the wrong shape.
        """
        check_header(d, "tracedoc report", SCHEMA_VERSION)
        try:
            rec = d.get("recoverable")
            return cls(
                trace=dict(d["trace"]),
                signals=dict(d["signals"]),
                signals_unavailable=dict(d["signals_unavailable"]),
                units=dict(d["units"]),
                steps=[dict(s) for s in d["steps"]],
                findings=[Finding.from_dict(f) for f in d["findings"]],
                skipped=[Skipped.from_dict(s) for s in d["skipped"]],
                rules_evaluated=list(d.get("rules_evaluated", [])),
                scopes=dict(d.get("scopes", {})),
                idle_ledger={k: dict(v) for k, v in d.get("idle_ledger", {}).items()},
                also_true=[AlsoTrue.from_dict(a) for a in d.get("also_true", [])],
                notes=list(d.get("notes", [])),
                recoverable=dict(rec) if rec is not None else None,
                kernels=_kernels_from(d.get("kernels")),
                op_view=_op_view_from(d.get("op_view")),
            )
        except KeyError as exc:
            raise TracedocError(f"not a tracedoc report: missing {one_line(repr(exc.args[0])[:60])}") from None
        except (TypeError, ValueError, AttributeError) as exc:
            raise TracedocError(f"not a tracedoc report: {one_line(str(exc))[:200]}") from None


class ManyTraceHooks:
    """The notebook hooks of the many-trace documents (:class:`tracedoc.report.ranks.MultiRankReport`
    and :class:`~tracedoc.report.ranks.MultiTraceReport`), as a :class:`Report` has them: a
    one-line ``repr()``, ``print()``, ``_repr_html_``/``_repr_markdown_``, ``tables`` and
    ``plot()``. Here, beside the Report's own, so the document module imports no renderer.
    A subclass gives ``_where()`` (what was analyzed) and ``_entries()`` (its traces)."""

    KIND: ClassVar[str]

    def _where(self) -> str:
        raise NotImplementedError

    def _entries(self) -> list[Any]:
        raise NotImplementedError

    def __repr__(self) -> str:
        from tracedoc.render import render

        summary = " ".join(render(self, "summary").split())  # one line, however it wraps
        return f"<{type(self).__name__} {display_path(self._where())}: {summary}>"

    def print(self, console: Any = None, quiet: bool = False) -> None:
        """Print the terminal report (the one ``tracedoc analyze FOLDER`` prints).

        Args:
            console: a :class:`rich.console.Console` (default: a new one on stdout).
            quiet: print only the closing summary line.
        """
        from rich.console import Console

        from tracedoc.render import render

        console = console or Console(highlight=False)
        if quiet:
            console.print(render(self, "summary").rstrip("\n"), markup=False, highlight=False)
        else:
            render(self, "text", console=console)

    def to_markdown(self) -> str:
        """The Markdown report (``--format markdown``)."""
        from tracedoc.render import render

        return render(self, "markdown")

    def _repr_markdown_(self) -> str:
        return self.to_markdown()

    def _repr_html_(self) -> str:
        """The summary, the table of traces and each trace's findings as HTML for a notebook
        (no plots, so no plotly needed): the ``fragment`` format of :func:`tracedoc.render.render`."""
        from tracedoc.render import render

        return render(self, "fragment")

    @property
    def tables(self) -> Any:
        """The report as pandas DataFrames, columns named with their units
        (:class:`tracedoc.report.tables.MultiReportTables`): ``ranks`` (one row per trace: step
        time, top finding and its saving), ``findings``, ``steps``, ``idle_ledger``, ... with
        ``rank``, ``label`` and ``path`` columns, and for a rank job the cross-rank tables
        (``rank_findings``, ``collectives``, ``collective_steps``, ``straggler``). Built from
        :meth:`to_dict`, so a document read back from its JSON gives the same tables."""
        from tracedoc.report.tables import multi_report_tables

        if "_tables" not in self.__dict__:
            self.__dict__["_tables"] = multi_report_tables(self)
        return self.__dict__["_tables"]

    def plot(self) -> Any:
        """The step time of every analyzed trace (``step_time_ms``, ms per step) as a plotly
        bar chart, one bar per rank (a rank job: the slowest rank in the palette's ``slowest``
        colour when it lags the median) or per trace. Returns the figure (``fig.show()`` shows
        it, ``fig.write_html(path)`` saves it). Needs the ``html`` extra (plotly).

        Raises:
            tracedoc.errors.TracedocError: plotly is not installed.
        """
        try:
            import plotly.graph_objects as go
        except ImportError:
            from tracedoc.errors import install_hint

            raise TracedocError(f"plot() needs plotly: {install_hint('html')}") from None
        from tracedoc.render.escape import plotly as _p
        from tracedoc.render.palette import colour

        rows = self.tables.ranks
        rows = rows[rows["error"].isna()]
        labels = list(rows["label"])
        if len(set(labels)) < len(labels):  # two files of one name: their paths tell them apart
            labels = [display_path(p) for p in rows["path"]]
        times = [None if t != t else float(t) for t in rows["step_time_ms"]]  # NaN: no step time
        rank_job = self.KIND == "ranks"
        s = getattr(self, "summary", None) or {}
        slowest = s.get("slowest_rank") if s.get("slowest_lag_ms") else None  # none: all alike
        fig = go.Figure(
            go.Bar(
                x=[_p(x) for x in labels],
                y=times,
                name="step time",
                marker_color=[colour("slowest" if lab == slowest else "rank") for lab in rows["label"]],
            )
        )
        fig.update_layout(yaxis_title="ms per step", title=f"Step time per {'rank' if rank_job else 'trace'}")
        fig.update_xaxes(type="category")
        return fig


#: The report schema versions :func:`read_report` reads (1: before ``also_true``).
READABLE_VERSIONS = (1, 2)


def read_report(d: Any) -> Report:
    """A saved report of any schema version this tracedoc reads (:data:`READABLE_VERSIONS`).

    Version 1 is read as version 2: its ``below_floor`` entries (``{"code", "name",
    "estimated_saving_ms"}``: rules whose condition held but whose saving was under the floor)
    become :class:`AlsoTrue` entries with ``overlaps="below floor"``, which is what version 2
    writes for them; nothing else changed between the two.

    Raises:
        tracedoc.errors.DocumentError: not a report, or a version other than 1 or 2.
        tracedoc.errors.TracedocError: a section missing or of the wrong shape.
    """
    if isinstance(d, dict) and d.get("schema_version") == 1 and type(d.get("schema_version")) is int:
        below = d.get("below_floor") or []
        if not isinstance(below, list) or not all(isinstance(b, dict) for b in below):
            raise DocumentError("not a tracedoc report: below_floor is not a list of objects")
        also = [
            {
                "code": b.get("code"),
                "name": b.get("name"),
                "overlaps": "below floor",
                "why": "its saving was under the floor (a schema 1 report)",
                "estimated_saving_ms": b.get("estimated_saving_ms"),
            }
            for b in below
        ]
        d = {k: v for k, v in d.items() if k != "below_floor"} | {"schema_version": SCHEMA_VERSION, "also_true": also}
    return Report.from_dict(d)


def _op_view_from(v: Any) -> dict[str, Any] | None:
    """The ``op_view`` section of a report dict (None, or absent in older reports, stays None).

    Raises:
        TypeError: it is not an object, or its ``ops``/``kernels`` are not lists of objects.
    """
    if v is None:
        return None
    if not isinstance(v, dict):
        raise TypeError("op_view is not an object")
    for key in ("ops", "kernels"):
        rows = v.get(key)
        if rows is not None and (not isinstance(rows, list) or not all(isinstance(r, dict) for r in rows)):
            raise TypeError(f"op_view.{key} is not a list of objects")
    if v.get("peak") is not None and not isinstance(v["peak"], dict):
        raise TypeError("op_view.peak is not an object")
    return dict(v)


def _kernels_from(k: Any) -> dict[str, list[dict[str, Any]]] | None:
    """The ``kernels`` section of a report dict (None stays None).

    Raises:
        TypeError: not an object of row lists.
    """
    if k is None:
        return None
    if not isinstance(k, dict):
        raise TypeError("kernels is not an object")
    return {str(name): [dict(r) for r in rows] for name, rows in k.items()}
