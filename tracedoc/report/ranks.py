"""The many-trace documents: :class:`MultiRankReport` (the ranks of one job, with the
cross-rank summary) and :class:`MultiTraceReport` (unrelated traces, one report each), and
the per-trace entry both hold, :class:`RankEntry`.

Each has ``to_dict`` (JSON-safe plain data) and a ``from_dict`` classmethod that reverses it
exactly: ``X.from_dict(json.loads(json.dumps(x.to_dict()))) == x``. A document holds what its
JSON holds, nothing more: the per-rank collective timings (numpy arrays), the worker's
timings and a trace's ``world_size`` stay in :class:`tracedoc.ranks.job.RankResult`, the
worker's result that :mod:`tracedoc.ranks` computes the documents from. This module never
imports :mod:`tracedoc.ranks`.

JSON schema (``schema_version`` 2, the single-trace report's, :data:`SCHEMA_VERSION`;
additive changes keep the version)::

    {"schema_version": 2, "kind": "multi-rank", "tool": {"name": "tracedoc", "version": str},
     "directory": str,
     "ranks": [{"rank": int | null, "rank_source": "distributedInfo" | "file name" | null,
                "path": str, "report": <the single-trace report document> | null}],
     "summary": {"n_ranks", "step_time_ms": {rank_label: ms | null}, "median_step_time_ms",
                 "slowest_rank", "slowest_step_time_ms", "slowest_lag_ms", "slowest_lag_pct",
                 "findings": [{"code", "name", "severity", "ranks": [...], "n_ranks", "scope":
                               "most" | "some" | "one"}],
                 "exposed_comm_ms": {rank_label: ms | null} (when the signal exists),
                 "collectives": <tracedoc.ranks.summary.compare_collectives> | null,
                 "straggler": rank_label | null},
     "failed": [{"path", "error"}], "skipped": [{"path", "reason"}],
     "followed_symlinks": [path], "notes": [str] (only when there are any),
     "run": {"executor", "workers" | "scheduler", "seconds"}}

    {"schema_version": 2, "kind": "multi-trace", "tool": {...}, "inputs": [str],
     "traces": [{"path", "report"}], "failed", "skipped", "followed_symlinks", "notes", "run"}

``from_dict`` reads a document of this ``schema_version`` and ``kind`` only (anything else
raises :class:`DocumentError`, one line); it ignores ``tool`` (written anew by ``to_dict``).

In a notebook both documents work as a :class:`~tracedoc.report.model.Report` does:
``repr()`` is one line, ``print()`` the terminal report, ``_repr_html_``/``_repr_markdown_``
render them, ``tables`` gives pandas DataFrames (:class:`tracedoc.report.tables.MultiReportTables`)
and ``plot()`` returns a plotly figure of the step time per trace.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, ClassVar

from tracedoc._version import __version__
from tracedoc.errors import DocumentError, TracedocError
from tracedoc.report.header import check_header, shape_error
from tracedoc.report.model import SCHEMA_VERSION as REPORT_SCHEMA_VERSION
from tracedoc.report.model import ManyTraceHooks, Report

#: Version of both many-trace documents: the single-trace report's, which they embed.
SCHEMA_VERSION = REPORT_SCHEMA_VERSION


@dataclass
class RankEntry:
    """One trace of a many-trace document: its report, or the one-line error that stopped it.

    Attributes:
        path: the trace path or URL.
        rank: ``distributedInfo.rank``, else the rank in the file name, else None (always None
            in a :class:`MultiTraceReport`, whose JSON has no rank).
        rank_source: ``"distributedInfo"``, ``"file name"`` or None.
        report: the single-trace report (None for a failed trace).
        error: ``"<path>: <problem>"``, one line, for a failed trace (else None).
    """

    path: str
    rank: int | None = None
    rank_source: str | None = None
    report: Report | None = None
    error: str | None = None

    @property
    def label(self) -> str:
        """``rank N``, or the file name when the rank is unknown."""
        return f"rank {self.rank}" if self.rank is not None else Path(self.path).name

    @classmethod
    def of(cls, r: Any) -> RankEntry:
        """The entry of one analyzed rank: a :class:`RankEntry` as it is, or anything with
        ``path``, ``rank``, ``rank_source`` and ``report`` (a
        :class:`tracedoc.ranks.job.RankResult`), copied without what the JSON does not hold."""
        if isinstance(r, cls):
            return r
        return cls(path=r.path, rank=r.rank, rank_source=r.rank_source, report=r.report)

    @classmethod
    def trace_of(cls, r: Any) -> RankEntry:
        """The entry of one unrelated trace (a :class:`MultiTraceReport`'s): path and report
        only, as its JSON holds them."""
        return cls(path=r.path, report=r.report)

    @classmethod
    def failure_of(cls, r: Any) -> RankEntry:
        """The entry of a failed trace: path and error only, as the ``failed`` JSON holds them."""
        return cls(path=r.path, error=r.error)


def _report_or_none(d: dict[str, Any] | None) -> Report | None:
    if d is None:
        return None
    try:
        return Report.from_dict(d)
    except DocumentError:
        raise
    except TracedocError as exc:  # the embedded report's own one-line message
        raise DocumentError(f"a trace's report: {exc}") from None


def _tail(rep: MultiRankReport | MultiTraceReport) -> dict[str, Any]:
    """What both many-trace documents end with: what failed, what was skipped, the symlinks
    followed, the notes (only when there are any) and how it ran."""
    notes = {"notes": list(rep.notes)} if rep.notes else {}  # only when there is something to say
    return {
        "failed": [{"path": r.path, "error": r.error} for r in rep.failed],
        "skipped": [{"path": p, "reason": why} for p, why in rep.skipped],
        "followed_symlinks": list(rep.followed),
        **notes,
        "run": rep.run,
    }


def _read_tail(d: dict[str, Any]) -> dict[str, Any]:
    """The keyword arguments of :func:`_tail`'s part of a document."""
    return {
        "failed": [RankEntry(path=f["path"], error=f["error"]) for f in d["failed"]],
        "skipped": [(s["path"], s["reason"]) for s in d["skipped"]],
        "followed": list(d["followed_symlinks"]),
        "notes": [str(n) for n in d.get("notes", [])],
        "run": dict(d["run"]),
    }


def _header(kind: str) -> dict[str, Any]:
    return {"schema_version": SCHEMA_VERSION, "kind": kind, "tool": {"name": "tracedoc", "version": __version__}}


def _all_findings(entries: list[RankEntry]) -> list:
    return [f for r in entries if r.report for f in r.report.findings]


@dataclass(repr=False)
class MultiRankReport(ManyTraceHooks):
    """Per-rank reports and the cross-rank summary of the ranks of one job.

    Attributes:
        directory: what was analyzed (the folder, or the inputs joined by spaces).
        ranks: the analyzed ranks, in rank order (:class:`RankEntry`; anything with the same
            attributes, such as a :class:`tracedoc.ranks.job.RankResult`, is taken as its entry).
        summary: the cross-rank summary (:func:`tracedoc.ranks.summary.summarize`; plain JSON
            data, see the module docstring).
        failed: traces that could not be analyzed (each with its one-line ``error``).
        skipped: ``(path, reason)`` of folder entries not taken as traces.
        followed: symlinks to outside the folder that were followed (``--follow-symlinks``).
        run: how it ran (executor, workers or scheduler, seconds): timings, not part of the
            comparison between executors.
        notes: one line each, what the reader must know about how the traces were taken
            (traces retried after their worker process died; several traces of one rank).
    """

    KIND: ClassVar[str] = "ranks"

    directory: str
    ranks: list[RankEntry]
    summary: dict[str, Any] = field(default_factory=dict)
    failed: list[RankEntry] = field(default_factory=list)
    skipped: list[tuple[str, str]] = field(default_factory=list)
    followed: list[str] = field(default_factory=list)
    run: dict[str, Any] = field(default_factory=dict)
    notes: list[str] = field(default_factory=list)

    def __post_init__(self) -> None:
        self.ranks = [RankEntry.of(r) for r in self.ranks]
        self.failed = [RankEntry.failure_of(r) for r in self.failed]
        self.skipped = [(str(p), str(why)) for p, why in self.skipped]

    @property
    def findings(self) -> list:
        """Every finding of every rank (for the exit code)."""
        return _all_findings(self.ranks)

    def _where(self) -> str:
        return self.directory

    def _entries(self) -> list[RankEntry]:
        return self.ranks

    def to_dict(self) -> dict[str, Any]:
        """The versioned JSON form (``kind: "multi-rank"``, see the module docstring)."""
        ranks = [
            {
                "rank": r.rank,
                "rank_source": r.rank_source,
                "path": r.path,
                "report": r.report.to_dict() if r.report else None,
            }
            for r in self.ranks
        ]
        return {
            **_header("multi-rank"),
            "directory": self.directory,
            "ranks": ranks,
            "summary": self.summary,
            **_tail(self),
        }

    @classmethod
    def from_dict(cls, d: dict[str, Any]) -> MultiRankReport:
        """The MultiRankReport of :meth:`to_dict`'s output (``tool`` is ignored).

        Raises:
            DocumentError: not a multi-rank report of this :data:`SCHEMA_VERSION`, or a field
                missing or of the wrong shape (one line).
        """
        what = "tracedoc multi-rank report"
        check_header(d, what, SCHEMA_VERSION, "multi-rank")
        try:
            ranks = [
                RankEntry(
                    path=r["path"],
                    rank=r["rank"],
                    rank_source=r["rank_source"],
                    report=_report_or_none(r["report"]),
                )
                for r in d["ranks"]
            ]
            return cls(directory=d["directory"], ranks=ranks, summary=dict(d["summary"]), **_read_tail(d))
        except (KeyError, TypeError, ValueError, AttributeError) as exc:
            raise shape_error(what, exc) from None


@dataclass(repr=False)
class MultiTraceReport(ManyTraceHooks):
    """One report per trace, for traces that are not the ranks of one job.

    Attributes: as :class:`MultiRankReport`, with ``inputs`` (as given) instead of
    ``directory`` and ``traces`` (each :class:`RankEntry` holding a path and a report)
    instead of ``ranks``, and no summary.
    """

    KIND: ClassVar[str] = "traces"

    inputs: list[str]
    traces: list[RankEntry]
    failed: list[RankEntry] = field(default_factory=list)
    skipped: list[tuple[str, str]] = field(default_factory=list)
    followed: list[str] = field(default_factory=list)
    run: dict[str, Any] = field(default_factory=dict)
    notes: list[str] = field(default_factory=list)

    def __post_init__(self) -> None:
        self.traces = [RankEntry.trace_of(r) for r in self.traces]
        self.failed = [RankEntry.failure_of(r) for r in self.failed]
        self.skipped = [(str(p), str(why)) for p, why in self.skipped]

    @property
    def findings(self) -> list:
        """Every finding of every trace (for the exit code)."""
        return _all_findings(self.traces)

    def _where(self) -> str:
        return " ".join(self.inputs)

    def _entries(self) -> list[RankEntry]:
        return self.traces

    def to_dict(self) -> dict[str, Any]:
        """The versioned JSON form (``kind: "multi-trace"``, see the module docstring)."""
        traces = [{"path": r.path, "report": r.report.to_dict()} for r in self.traces]
        return {**_header("multi-trace"), "inputs": list(self.inputs), "traces": traces, **_tail(self)}

    @classmethod
    def from_dict(cls, d: dict[str, Any]) -> MultiTraceReport:
        """The MultiTraceReport of :meth:`to_dict`'s output (``tool`` is ignored).

        Raises:
            DocumentError: not a multi-trace report of this :data:`SCHEMA_VERSION`, or a field
                missing or of the wrong shape (one line).
        """
        what = "tracedoc multi-trace report"
        check_header(d, what, SCHEMA_VERSION, "multi-trace")
        try:
            traces = [RankEntry(path=t["path"], report=_report_or_none(t["report"])) for t in d["traces"]]
            return cls(inputs=list(d["inputs"]), traces=traces, **_read_tail(d))
        except (KeyError, TypeError, ValueError, AttributeError) as exc:
            raise shape_error(what, exc) from None
