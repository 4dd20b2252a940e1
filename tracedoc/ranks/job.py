"""The per-rank job: load and analyze one trace in a worker; the result crosses processes as data."""

from __future__ import annotations

import os
from dataclasses import dataclass
from pathlib import Path

from tracedoc.errors import TracedocError
from tracedoc.ranks.discover import rank_from_filename
from tracedoc.report.model import Report


@dataclass
class RankResult:
    """One rank's analysis (or the one-line error that stopped it)."""

    path: str
    rank: int | None = None
    rank_source: str | None = None
    report: Report | None = None
    error: str | None = None

    @property
    def label(self) -> str:
        return f"rank {self.rank}" if self.rank is not None else Path(self.path).name


def analyze_one(
    path: str,
    select: list[str] | None = None,
    ignore: list[str] | None = None,
    decode_workers: int | None = None,
    rule_paths: list[str] | None = None,
) -> RankResult:
    """Load and analyze one rank's trace; errors come back as data (they cross processes).

    ``decode_workers`` is passed to :func:`tracedoc.load.load` (1 inside a worker pool:
    the ranks already use the CPUs); ``rule_paths`` are extra rule files or folders
    (:func:`tracedoc.engine.rules.load_rules`)."""
    from tracedoc.engine import analyze_trace, load_rules
    from tracedoc.load import load

    out = RankResult(path=path)
    try:
        trace = load(path, workers=decode_workers)
        report = analyze_trace(trace, rules=load_rules(rule_paths), select=select, ignore=ignore)
    except TracedocError as exc:
        out.error = str(exc)
        return out
    except MemoryError:
        out.error = f"{path}: out of memory while analyzing"
        return out
    except Exception as exc:  # never a traceback for a bad trace
        if os.environ.get("TRACEDOC_DEBUG"):
            raise
        out.error = f"{path}: cannot analyze ({type(exc).__name__}: {exc})"
        return out
    if trace.rank is not None:
        out.rank, out.rank_source = trace.rank, "distributedInfo"
    else:
        r = rank_from_filename(Path(path).name)
        if r is not None:
            out.rank, out.rank_source = r, "file name"
    out.report = report
    return out
