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

A many-trace report (:class:`~tracedoc.report.ranks.MultiRankReport`, the ranks of one job, or
:class:`~tracedoc.report.ranks.MultiTraceReport`, unrelated traces) has
:class:`MultiReportTables`: the same per-trace tables, every trace's rows one after another in
the document's order, each row led by ``rank`` (the process rank; None for unrelated traces),
``label`` (``"rank N"``, or the file name when the rank is unknown: the key of the cross-rank
summary) and ``path``; in ``findings`` the finding's own place in its report is
``finding_rank`` (1: the largest saving). Besides them:

- ``ranks``: one row per trace (the failed ones last, with their ``error``): ``rank``,
  ``label``, ``path``, ``step_time_ms``, ``n_findings``, ``top_code``, ``top_name``,
  ``top_severity``, ``top_saving_ms``, ``top_saving_share`` (the first finding's), ``error``;
  for a rank job also ``exposed_comm_ms`` where the summary has it;
- for a rank job only: ``rank_findings`` (the cross-rank summary's findings: ``code``, ``name``,
  ``severity``, ``n_ranks``, ``scope`` -- ``"most"``, ``"some"`` or ``"one"`` --, ``ranks``, a
  list of labels), ``collectives`` (per collective kind: ``kind``, ``count`` matched per rank,
  ``straggler``, ``lag_ms_total`` over the window, ``lag_ms_median`` per collective,
  ``counts_differ``), ``collective_steps`` (per step: ``step``, ``straggler``, ``lag_ms``, the
  wait it caused in that step) and ``straggler`` (per rank with collectives: ``label``,
  ``last_count``, the collectives it arrived last at, ``caused_wait_ms_total``, the others'
  wait it caused over the window, ``is_straggler``); empty with their columns when fewer than
  two ranks have collectives.
"""

from __future__ import annotations

from pathlib import Path
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


def _frame(name: str, rows: list[dict], columns: dict[str, tuple[str, ...]] = COLUMNS):
    import pandas as pd

    cols = list(columns[name])
    extra = [c for r in rows for c in r if c not in cols]
    cols += list(dict.fromkeys(extra))
    return pd.DataFrame(rows, columns=cols)


#: The columns that lead every per-trace table of a many-trace report.
_WHO = ("rank", "label", "path")

#: Columns of each table of a many-trace report, in order (the empty table has them too).
MULTI_COLUMNS: dict[str, tuple[str, ...]] = {
    "ranks": (
        *_WHO,
        "step_time_ms",
        "n_findings",
        "top_code",
        "top_name",
        "top_severity",
        "top_saving_ms",
        "top_saving_share",
        "error",
    ),  # fmt: skip
    "findings": (*_WHO, "finding_rank", *COLUMNS["findings"][1:]),
    **{name: (*_WHO, *cols) for name, cols in COLUMNS.items() if name != "findings"},
}

#: The tables only a rank job (``kind: "multi-rank"``) has: its cross-rank summary.
RANK_JOB_COLUMNS: dict[str, tuple[str, ...]] = {
    "rank_findings": ("code", "name", "severity", "n_ranks", "scope", "ranks"),
    "collectives": ("kind", "count", "straggler", "lag_ms_total", "lag_ms_median", "counts_differ"),
    "collective_steps": ("step", "straggler", "lag_ms"),
    "straggler": ("label", "last_count", "caused_wait_ms_total", "is_straggler"),
}


class MultiReportTables:
    """The tables of a many-trace document (a rank job's or unrelated traces'); each
    attribute is built on first use.

    Attributes: ``ranks``, ``findings``, ``steps``, ``idle_ledger``, ``also_true``, ``skipped``,
    ``ops``, ``kernels`` and, for a rank job, ``rank_findings``, ``collectives``,
    ``collective_steps``, ``straggler`` (pandas DataFrames; see the module docstring).
    ``names`` lists the ones this document has; any other name is an AttributeError.
    """

    def __init__(self, doc: dict[str, Any]) -> None:
        self._doc = doc
        self._rank_job = doc.get("kind") == "multi-rank"
        self._columns = {**MULTI_COLUMNS, **(RANK_JOB_COLUMNS if self._rank_job else {})}
        self.names = tuple(self._columns)
        self._built: dict[str, Any] = {}
        entries = doc.get("ranks") if self._rank_job else doc.get("traces")
        self._entries: list[dict[str, Any]] = [e for e in entries or [] if isinstance(e, dict)]
        self._per_trace: list[tuple[dict[str, Any], ReportTables]] = [
            (self._who(e), ReportTables(e["report"])) for e in self._entries if isinstance(e.get("report"), dict)
        ]

    def __getattr__(self, name: str):
        if name.startswith("_") or name not in self._columns:
            raise AttributeError(name)
        if name not in self._built:
            rows = getattr(self, f"_rows_{name}")() if hasattr(type(self), f"_rows_{name}") else self._stack(name)
            frame = _frame(name, rows, self._columns)
            if "rank" in frame.columns:  # whole ranks, also beside a missing one (not 0.0 and NaN)
                frame["rank"] = frame["rank"].astype("Int64")
            self._built[name] = frame
        return self._built[name]

    def __repr__(self) -> str:
        return f"<MultiReportTables: {', '.join(self.names)}>"

    def __dir__(self):
        return sorted(set(super().__dir__()) | set(self._columns))

    def _who(self, e: dict[str, Any]) -> dict[str, Any]:
        rank = e.get("rank") if self._rank_job else None
        path = str(e.get("path"))
        return {"rank": rank, "label": f"rank {rank}" if rank is not None else Path(path).name, "path": path}

    def _stack(self, name: str) -> list[dict[str, Any]]:
        """Every trace's rows of the single-report table ``name``, each led by who it is."""
        rows = []
        for who, tables in self._per_trace:
            for r in getattr(tables, f"_rows_{name}")():
                if name == "findings":
                    r = {"finding_rank": r.pop("rank"), **r}
                rows.append({**who, **r})
        return rows

    def _rows_ranks(self) -> list[dict[str, Any]]:
        summary = self._doc.get("summary") or {}
        exposed = summary.get("exposed_comm_ms") if isinstance(summary, dict) else None
        rows = []
        for e in self._entries:
            report = e.get("report") if isinstance(e.get("report"), dict) else {}
            who = self._who(e)
            step = (report.get("signals") or {}).get("step_time_ms")
            step = step if isinstance(step, (int, float)) and not isinstance(step, bool) else None
            findings = report.get("findings") or []
            top = findings[0] if findings and isinstance(findings[0], dict) else {}
            saving = top.get("estimated_saving_ms")
            row = {
                **who,
                "step_time_ms": step,
                "n_findings": len(findings),
                "top_code": top.get("code"),
                "top_name": top.get("name"),
                "top_severity": top.get("severity"),
                "top_saving_ms": saving,
                "top_saving_share": saving / step if step and isinstance(saving, (int, float)) else None,
                "error": None,
            }
            if isinstance(exposed, dict):
                row["exposed_comm_ms"] = exposed.get(who["label"])
            rows.append(row)
        for f in self._doc.get("failed") or []:
            path = str(f.get("path"))
            rows.append(
                {"rank": None, "label": Path(path).name, "path": path, "n_findings": 0, "error": f.get("error")}
            )
        return rows

    def _summary(self, key: str) -> Any:
        summary = self._doc.get("summary") or {}
        return summary.get(key) if isinstance(summary, dict) else None

    def _rows_rank_findings(self) -> list[dict[str, Any]]:
        return [dict(f) for f in self._summary("findings") or [] if isinstance(f, dict)]

    def _rows_collectives(self) -> list[dict[str, Any]]:
        c = self._summary("collectives") or {}
        return [dict(k) for k in c.get("kinds") or [] if isinstance(k, dict)]

    def _rows_collective_steps(self) -> list[dict[str, Any]]:
        c = self._summary("collectives") or {}
        return [dict(s) for s in c.get("per_step") or [] if isinstance(s, dict)]

    def _rows_straggler(self) -> list[dict[str, Any]]:
        c = self._summary("collectives") or {}
        last = c.get("last_count") or {}
        caused = c.get("caused_wait_ms") or {}
        return [
            {
                "label": label,
                "last_count": last.get(label),
                "caused_wait_ms_total": caused.get(label),
                "is_straggler": label == c.get("straggler"),
            }
            for label in dict.fromkeys([*last, *caused])
        ]


def report_tables(report: Any) -> ReportTables:
    """The :class:`ReportTables` of a :class:`~tracedoc.report.model.Report` (or of its
    JSON document, a dict)."""
    return ReportTables(report if isinstance(report, dict) else report.to_dict())


def multi_report_tables(report: Any) -> MultiReportTables:
    """The :class:`MultiReportTables` of a :class:`~tracedoc.report.ranks.MultiRankReport` or
    :class:`~tracedoc.report.ranks.MultiTraceReport` (or of its JSON document, a dict)."""
    return MultiReportTables(report if isinstance(report, dict) else report.to_dict())
