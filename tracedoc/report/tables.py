"""``report.tables``: a report as pandas DataFrames, for notebooks.

Column names carry their units: ``_ms`` (milliseconds per step unless the name says
otherwise), ``_us`` (microseconds), ``_share`` (a fraction of the step, 0..1), ``_pct``
(percent), ``_per_step`` (counts per step), ``_tflops`` (10^12 FLOP/s), ``_tbps``
(10^12 bytes/s), ``_gflop`` (10^9 FLOP per call), ``_mbytes`` (10^6 bytes per call).
Each table is built from the report's JSON document (:meth:`Report.to_dict`), so a report
read back from a saved JSON file gives the same tables.

Tables (each a DataFrame, empty with its columns when the report has no such rows):

- ``steps``: one row per step window: ``step``, ``step_time_ms``, and the breakdown
  ``kernel_ms``, ``memcpy_ms``, ... as the JSON report's ``steps``;
- ``idle_ledger``: one row per (device, cause): ``device``, ``cause``, ``idle_ms`` (per step),
  ``idle_share`` (of the mean step);
- ``findings``: ``rank``, ``code``, ``name``, ``severity``, ``saving_ms``, ``saving_share``,
  ``replayed_saving_ms``, ``slice_saving_ms``, ``fix``, ``fix_safety``, ``message``;
- ``also_true``: ``code``, ``name``, ``overlaps``, ``saving_ms``, ``uncapped_saving_ms``, ``why``;
- ``skipped``: ``code``, ``name``, ``reason``;
- ``ops`` and ``kernels``: the op and kernel views (:mod:`tracedoc.signals.opview`), where
  the report has them, with ``_ms_per_step``/``_us``/``_tflops``/``_tbps``/``_pct`` columns.
"""

from __future__ import annotations

from typing import Any

#: Columns of each table, in order (the empty table has them too).
COLUMNS: dict[str, tuple[str, ...]] = {
    "steps": ("step", "step_time_ms"),
    "idle_ledger": ("device", "cause", "idle_ms", "idle_share"),
    "findings": (
        "rank",
        "code",
        "name",
        "severity",
        "saving_ms",
        "saving_share",
        "replayed_saving_ms",
        "slice_saving_ms",
        "fix",
        "fix_safety",
        "message",
    ),  # fmt: skip
    "also_true": ("code", "name", "overlaps", "saving_ms", "uncapped_saving_ms", "why"),
    "skipped": ("code", "name", "reason"),
    "ops": (
        "op",
        "input_dims",
        "dtype",
        "kind",
        "calls_per_step",
        "kernels_per_call",
        "gpu_ms_per_step",
        "mean_us",
        "gflop",
        "mbytes",
        "achieved_tflops",
        "achieved_tbps",
        "peak_pct",
        "flop_per_byte",
        "bound",
    ),  # fmt: skip
    "kernels": (
        "kernel",
        "op",
        "count_per_step",
        "gpu_ms_per_step",
        "mean_us",
        "occupancy_pct",
        "achieved_tflops",
        "achieved_tbps",
        "peak_pct",
        "flop_per_byte",
        "bound",
    ),  # fmt: skip
}

#: JSON names of the view fields -> column names that carry their unit.
_VIEW_RENAME = {
    "tflops": "achieved_tflops",
    "tbps": "achieved_tbps",
    "pct_of_peak": "peak_pct",
    "intensity": "flop_per_byte",
}


class ReportTables:
    """The tables of one report document; each attribute is built on first use.

    Attributes: ``steps``, ``idle_ledger``, ``findings``, ``also_true``, ``skipped``, ``ops``,
    ``kernels`` (pandas DataFrames; see the module docstring). ``names`` lists them.
    """

    names = tuple(COLUMNS)

    def __init__(self, doc: dict[str, Any]) -> None:
        self._doc = doc
        self._built: dict[str, Any] = {}

    def __getattr__(self, name: str):
        if name.startswith("_") or name not in COLUMNS:
            raise AttributeError(name)
        if name not in self._built:
            self._built[name] = _frame(name, getattr(self, f"_rows_{name}")())
        return self._built[name]

    def __repr__(self) -> str:
        return f"<ReportTables: {', '.join(self.names)}>"

    def __dir__(self):
        return sorted(set(super().__dir__()) | set(COLUMNS))

    def _mean_step_ms(self) -> float | None:
        times = [s.get("step_time_ms") for s in self._doc.get("steps") or [] if isinstance(s, dict)]
        times = [t for t in times if isinstance(t, (int, float))]
        return sum(times) / len(times) if times else None

    def _rows_steps(self) -> list[dict]:
        return [dict(s) for s in self._doc.get("steps") or [] if isinstance(s, dict)]

    def _rows_idle_ledger(self) -> list[dict]:
        step = self._mean_step_ms()
        rows = []
        for device, causes in (self._doc.get("idle_ledger") or {}).items():
            for cause, ms in (causes or {}).items():
                share = ms / step if step and isinstance(ms, (int, float)) else None
                rows.append({"device": device, "cause": cause, "idle_ms": ms, "idle_share": share})
        return rows

    def _rows_findings(self) -> list[dict]:
        step = self._mean_step_ms()
        rows = []
        for i, f in enumerate(self._doc.get("findings") or [], 1):
            saving = f.get("estimated_saving_ms")
            fix = f.get("fix") or {}
            rows.append(
                {
                    "rank": i,
                    "code": f.get("code"),
                    "name": f.get("name"),
                    "severity": f.get("severity"),
                    "saving_ms": saving,
                    "saving_share": saving / step if step and isinstance(saving, (int, float)) else None,
                    "replayed_saving_ms": f.get("replayed_saving_ms"),
                    "slice_saving_ms": f.get("slice_saving_ms"),
                    "fix": fix.get("summary"),
                    "fix_safety": fix.get("safety"),
                    "message": f.get("message"),
                }
            )
        return rows

    def _rows_also_true(self) -> list[dict]:
        return [
            {
                "code": a.get("code"),
                "name": a.get("name"),
                "overlaps": a.get("overlaps"),
                "saving_ms": a.get("estimated_saving_ms"),
                "uncapped_saving_ms": a.get("uncapped_saving_ms"),
                "why": a.get("why"),
            }
            for a in self._doc.get("also_true") or []
        ]

    def _rows_skipped(self) -> list[dict]:
        return [
            {"code": s.get("code"), "name": s.get("name"), "reason": s.get("reason")}
            for s in self._doc.get("skipped") or []
        ]

    def _view(self, key: str) -> list[dict]:
        section = self._doc.get("op_view") or {}
        rows = section.get(key) if isinstance(section, dict) else None
        return [{_VIEW_RENAME.get(k, k): v for k, v in r.items()} for r in rows or []]

    def _rows_ops(self) -> list[dict]:
        return self._view("ops")

    def _rows_kernels(self) -> list[dict]:
        return self._view("kernels")


def _frame(name: str, rows: list[dict]):
    import pandas as pd

    cols = list(COLUMNS[name])
    extra = [c for r in rows for c in r if c not in cols]
    cols += list(dict.fromkeys(extra))
    return pd.DataFrame(rows, columns=cols)


def report_tables(report: Any) -> ReportTables:
    """The :class:`ReportTables` of a :class:`~tracedoc.report.model.Report` (or of its
    JSON document, a dict)."""
    return ReportTables(report if isinstance(report, dict) else report.to_dict())
