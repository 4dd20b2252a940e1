"""The comparison document of ``tracedoc diff``: :class:`DiffResult`, with its
:class:`StepTime` and :class:`Row` parts.

:mod:`tracedoc.diff` computes it (every definition is in that module's docstring) and the
renderers of :mod:`tracedoc.report.diff` read it. Each class has ``to_dict`` (JSON-safe plain
data) and a ``from_dict`` classmethod that reverses it exactly:
``DiffResult.from_dict(json.loads(json.dumps(r.to_dict()))) == r``. A document holds the
figures its JSON shows (ms rounded to 3 decimals, percentages to 2), rounded once when it is
built (:meth:`StepTime.measured`, :meth:`Row.measured`), so a document read back is the one
written. This module never imports :mod:`tracedoc.diff`.

JSON schema (``schema_version`` 1, :data:`SCHEMA_VERSION`; additive changes keep it)::

    {"schema_version": 1,
     "before": {"path", "kind": "trace" | "report" | "trial", "device", "step_count"},
     "after": {...},
     "step_time_ms": {"before", "after", "change_ms", "change_pct", "change_se_ms",
                      "median_before", "median_after", "median_change_ms",
                      "change_pct_unrounded"},
     "breakdown_ms": [{"name", "before_ms", "after_ms", "change_ms"}],
     "idle_ledger_ms": {device: [{"name", "before_ms", "after_ms", "change_ms"}]},
     "resolved": [{"code", "name", "severity", "status", "predicted_saving_ms", ...}],
                  # tracedoc.diff.predicted_vs_measured's rows
     "new": [{"code", "name", "severity", "estimated_saving_ms", "message"}],
     "changed": [{"code", "name", "severity_before", "severity_after",
                  "saving_before_ms", "saving_after_ms", "message_after"}],
     "persisting": [...as changed...],
     "outlier_steps": {"before": [{"step", "step_time_ms", "excess_ms", "top_category",
                                   "top_category_excess_ms"}], "after": [...]},
     "step_change_parts": [{"name", "before_ms", "after_ms", "change_ms"}]}

``step_time_ms.change_pct_unrounded`` (added with this module; additive) is ``change_pct``
before rounding: ``--fail-on-regression`` compares it, so a document read back decides a
regression as the one computed did. A document written before it was added reads with it
None, and :meth:`DiffResult.regressed` then uses ``change_pct``.

One ratio convention, as everywhere in tracedoc: a prediction's ``error`` is
``(predicted - measured) / measured`` and its ``ratio`` is ``predicted / measured``.

:meth:`DiffResult.from_dict` reads a document of this ``schema_version`` only (any other, or
none, raises :class:`tracedoc.report.ranks.DocumentError`, one line).
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any, ClassVar

from tracedoc.report.header import check_header, shape_error

#: Version of :meth:`DiffResult.to_dict`'s layout (additive changes keep it).
#: Parts that moved less than this (ms per step) are left out of ``offset_by`` (a prediction
#: offset by another part of the step is named only when that part moved this much).
OFFSET_MIN_MS = 0.5

SCHEMA_VERSION = 1

_WHAT = "tracedoc comparison"


def _round(v: float | None, nd: int = 3) -> float | None:
    return None if v is None else round(v, nd)


def _diff(before: float | None, after: float | None) -> float | None:
    return None if before is None or after is None else after - before


def _ratio(a: float | None, b: float | None) -> float | None:
    return None if a is None or b is None or b == 0 else a / b


@dataclass
class StepTime:
    """Step time before and after (ms per step), as the JSON shows it: ms rounded to 3
    decimals, ``change_pct`` to 2. Build it with :meth:`measured` from the unrounded figures.

    Attributes:
        before, after: the mean step (the reports' ``step_time_ms``; None when unknown).
        change_ms: after - before (negative means faster), from the unrounded figures.
        change_pct: (after - before) / before * 100 (positive means slower).
        change_se: the standard error of ``change_ms`` (Welch), None with fewer than two
            steps on a side (JSON: ``change_se_ms``).
        median_before, median_after, median_change_ms: the same on the median complete step.
        change_pct_unrounded: ``change_pct`` before rounding (what :meth:`DiffResult.regressed`
            compares).
    """

    before: float | None
    after: float | None
    change_ms: float | None
    change_pct: float | None
    change_se: float | None
    median_before: float | None
    median_after: float | None
    median_change_ms: float | None
    change_pct_unrounded: float | None = None

    @classmethod
    def measured(
        cls,
        before: float | None,
        after: float | None,
        median_before: float | None,
        median_after: float | None,
        change_se: float | None = None,
    ) -> StepTime:
        """The StepTime of unrounded figures (ms), each rounded once, the changes computed
        before rounding."""
        r = _ratio(_diff(before, after), before)
        pct = None if r is None else 100.0 * r
        return cls(
            before=_round(before),
            after=_round(after),
            change_ms=_round(_diff(before, after)),
            change_pct=_round(pct, 2),
            change_se=_round(change_se),
            median_before=_round(median_before),
            median_after=_round(median_after),
            median_change_ms=_round(_diff(median_before, median_after)),
            change_pct_unrounded=pct,
        )

    def to_dict(self) -> dict[str, Any]:
        """The ``step_time_ms`` object of the JSON form (ms; ``change_pct`` in %)."""
        return {
            "before": self.before,
            "after": self.after,
            "change_ms": self.change_ms,
            "change_pct": self.change_pct,
            "change_se_ms": self.change_se,
            "median_before": self.median_before,
            "median_after": self.median_after,
            "median_change_ms": self.median_change_ms,
            "change_pct_unrounded": self.change_pct_unrounded,
        }

    @classmethod
    def from_dict(cls, d: dict[str, Any]) -> StepTime:
        """The StepTime of :meth:`to_dict`'s output (``change_se_ms`` and
        ``change_pct_unrounded`` may be absent)."""
        return cls(
            before=d["before"],
            after=d["after"],
            change_ms=d["change_ms"],
            change_pct=d["change_pct"],
            change_se=d.get("change_se_ms"),
            median_before=d["median_before"],
            median_after=d["median_after"],
            median_change_ms=d["median_change_ms"],
            change_pct_unrounded=d.get("change_pct_unrounded"),
        )


@dataclass
class Row:
    """One category (or cause) before and after, ms per step, as the JSON shows it (rounded
    to 3 decimals; ``change`` = after - before from the unrounded figures). Build it with
    :meth:`measured`."""

    name: str
    before: float | None
    after: float | None
    change: float | None

    @classmethod
    def measured(cls, name: str, before: float | None, after: float | None) -> Row:
        """The Row of unrounded figures (ms per step, None when unknown)."""
        return cls(name, _round(before), _round(after), _round(_diff(before, after)))

    def to_dict(self) -> dict[str, Any]:
        """``{"name", "before_ms", "after_ms", "change_ms"}`` (ms per step, None when unknown)."""
        return {"name": self.name, "before_ms": self.before, "after_ms": self.after, "change_ms": self.change}

    @classmethod
    def from_dict(cls, d: dict[str, Any]) -> Row:
        return cls(d["name"], d["before_ms"], d["after_ms"], d["change_ms"])


@dataclass
class DiffResult:
    """The comparison of two analyses (see :mod:`tracedoc.diff` for every definition).

    Attributes:
        before, after: ``{"path", "kind", "device", "step_count"}`` of each side.
        step_time: step time before and after (:class:`StepTime`).
        breakdown: ms per step by breakdown category (:class:`Row` list).
        idle_ledger: ``{device: [Row per cause]}``; empty unless both reports have one.
        resolved, new, changed, persisting: findings by status (dicts, see the module
            docstring; a resolved one is :func:`tracedoc.diff.predicted_vs_measured`'s row).
        outlier_steps: ``{"before": [...], "after": [...]}``: complete steps longer than
            :data:`tracedoc.diff.OUTLIER_FACTOR` x the median, with the category that grew most.
        step_change_parts: :func:`tracedoc.diff.step_change_parts` (``[]`` without a GPU ledger).
    """

    KIND: ClassVar[str] = "comparison"

    before: dict[str, Any]
    after: dict[str, Any]
    step_time: StepTime
    breakdown: list[Row]
    idle_ledger: dict[str, list[Row]] = field(default_factory=dict)
    resolved: list[dict[str, Any]] = field(default_factory=list)
    new: list[dict[str, Any]] = field(default_factory=list)
    changed: list[dict[str, Any]] = field(default_factory=list)
    persisting: list[dict[str, Any]] = field(default_factory=list)
    outlier_steps: dict[str, list[dict[str, Any]]] = field(default_factory=dict)
    step_change_parts: list[dict[str, Any]] = field(default_factory=list)

    def regressed(self, pct: float) -> bool:
        """True when the step time grew by more than ``pct`` percent (the unrounded change;
        the rounded ``change_pct`` for a document written before it was kept)."""
        st = self.step_time
        c = st.change_pct_unrounded if st.change_pct_unrounded is not None else st.change_pct
        return c is not None and c > pct

    def to_dict(self) -> dict[str, Any]:
        """The versioned JSON form (see the module docstring)."""
        return {
            "schema_version": SCHEMA_VERSION,
            "before": self.before,
            "after": self.after,
            "step_time_ms": self.step_time.to_dict(),
            "breakdown_ms": [r.to_dict() for r in self.breakdown],
            "idle_ledger_ms": {d: [r.to_dict() for r in rows] for d, rows in self.idle_ledger.items()},
            "resolved": self.resolved,
            "new": self.new,
            "changed": self.changed,
            "persisting": self.persisting,
            "outlier_steps": self.outlier_steps,
            "step_change_parts": self.step_change_parts,
        }

    @classmethod
    def from_dict(cls, d: dict[str, Any]) -> DiffResult:
        """The DiffResult of :meth:`to_dict`'s output (e.g. a saved ``tracedoc diff -f json``).

        Raises:
            tracedoc.report.ranks.DocumentError: not a comparison of this
                :data:`SCHEMA_VERSION`, or a field missing or of the wrong shape (one line).
        """
        check_header(d, _WHAT, SCHEMA_VERSION)
        try:
            return cls(
                before=dict(d["before"]),
                after=dict(d["after"]),
                step_time=StepTime.from_dict(d["step_time_ms"]),
                breakdown=[Row.from_dict(r) for r in d["breakdown_ms"]],
                idle_ledger={str(k): [Row.from_dict(r) for r in rows] for k, rows in d["idle_ledger_ms"].items()},
                resolved=[dict(x) for x in d["resolved"]],
                new=[dict(x) for x in d["new"]],
                changed=[dict(x) for x in d["changed"]],
                persisting=[dict(x) for x in d["persisting"]],
                outlier_steps={k: [dict(x) for x in v] for k, v in d["outlier_steps"].items()},
                step_change_parts=[dict(x) for x in d["step_change_parts"]],
            )
        except (KeyError, TypeError, ValueError, AttributeError) as exc:
            raise shape_error(_WHAT, exc) from None
