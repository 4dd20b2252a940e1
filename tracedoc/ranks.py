"""Multi-rank analysis: a directory of per-rank traces, analyzed in parallel, with a
cross-rank summary.

Each trace file in the directory (``*.json``, ``*.json.gz``, ``*.gz``; not recursive) is
loaded and analyzed in a worker process (``jobs`` of them). A trace's rank is
``distributedInfo.rank`` when the trace carries it, else the number in its file name
(``rank-3.….pt.trace.json.gz``, ``…_rank_3…``, ``rank3…``), else unknown.

The summary compares the ranks:

* step time per rank, the median, and the slowest rank with how far it lags the
  median (ms and %): in synchronous data-parallel training every rank waits for the
  slowest at each collective, so the lag is time the other ranks lose per step;
* findings that hold on most ranks (more than half: a property of the job) versus on
  exactly one rank (a straggler: look at that machine, its data shard or its GPU).

JSON form (``schema_version`` 1, additive changes keep the version)::

    {"schema_version": 1, "kind": "multi-rank", "tool": {...}, "directory": str,
     "ranks": [{"rank": int | null, "rank_source": "distributedInfo" | "file name" | null,
                "path": str, "report": <the single-trace report document>}],
     "summary": {"n_ranks", "step_time_ms": {rank_label: ms | null}, "median_step_time_ms",
                 "slowest_rank", "slowest_step_time_ms", "slowest_lag_ms", "slowest_lag_pct",
                 "findings": [{"code", "name", "severity", "ranks": [...], "n_ranks", "scope":
                               "most" | "some" | "one"}]}}
"""

from __future__ import annotations

import os
import re
import statistics
from concurrent.futures import ProcessPoolExecutor
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Callable

from tracedoc import __version__
from tracedoc.errors import TracedocError, TraceLoadError
from tracedoc.report.model import SCHEMA_VERSION, Report

TRACE_SUFFIXES = (".json", ".gz")
_RANK_IN_NAME = re.compile(r"(?:^|[^a-z0-9])rank[-_]?(\d+)(?![0-9])", re.IGNORECASE)


def rank_from_filename(name: str) -> int | None:
    """The rank number in a file name: ``rank-3.…``, ``…_rank_3…``, ``rank3…``; else None."""
    m = _RANK_IN_NAME.search(name)
    return int(m.group(1)) if m else None


def find_traces(directory: Path) -> list[Path]:
    """Trace files directly inside ``directory`` (``*.json``, ``*.json.gz``, ``*.gz``), sorted.

    Raises:
        TraceLoadError: the directory holds no trace files.
    """
    files = sorted(
        p for p in directory.iterdir() if p.is_file() and not p.name.startswith(".") and p.name.endswith(TRACE_SUFFIXES)
    )
    if not files:
        raise TraceLoadError(str(directory), "directory holds no trace files (*.json, *.json.gz)")
    return files


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


@dataclass
class MultiRankReport:
    """Per-rank reports and the cross-rank summary of a directory of traces."""

    directory: str
    ranks: list[RankResult]
    summary: dict[str, Any] = field(default_factory=dict)

    def to_dict(self) -> dict[str, Any]:
        return {
            "schema_version": SCHEMA_VERSION,
            "kind": "multi-rank",
            "tool": {"name": "tracedoc", "version": __version__},
            "directory": self.directory,
            "ranks": [
                {
                    "rank": r.rank,
                    "rank_source": r.rank_source,
                    "path": r.path,
                    "report": r.report.to_dict() if r.report else None,
                }
                for r in self.ranks
            ],
            "summary": self.summary,
        }

    @property
    def findings(self) -> list:
        """Every finding of every rank (for the exit code)."""
        return [f for r in self.ranks if r.report for f in r.report.findings]


def summarize(ranks: list[RankResult]) -> dict[str, Any]:
    """The cross-rank summary (see the module docstring)."""
    n = len(ranks)
    step = {r.label: r.report.signals.get("step_time_ms") for r in ranks}
    known = {k: v for k, v in step.items() if isinstance(v, (int, float))}
    out: dict[str, Any] = {
        "n_ranks": n,
        "step_time_ms": {k: (round(v, 3) if v is not None else None) for k, v in step.items()},
    }
    if known:
        med = statistics.median(known.values())
        slow_label = max(known, key=lambda k: known[k])
        lag = known[slow_label] - med
        out.update(
            {
                "median_step_time_ms": round(med, 3),
                "slowest_rank": slow_label,
                "slowest_step_time_ms": round(known[slow_label], 3),
                "slowest_lag_ms": round(lag, 3),
                "slowest_lag_pct": round(100.0 * lag / med, 2) if med > 0 else None,
            }
        )
    else:
        out.update(
            {
                "median_step_time_ms": None,
                "slowest_rank": None,
                "slowest_step_time_ms": None,
                "slowest_lag_ms": None,
                "slowest_lag_pct": None,
            }
        )
    by_code: dict[str, dict[str, Any]] = {}
    for r in ranks:
        for f in r.report.findings:
            e = by_code.setdefault(f.code, {"code": f.code, "name": f.name, "severity": f.severity, "ranks": []})
            e["ranks"].append(r.label)
    findings = []
    for e in by_code.values():
        k = len(e["ranks"])
        e["n_ranks"] = k
        e["scope"] = "most" if k > n / 2 else ("one" if k == 1 else "some")
        findings.append(e)
    order = {"most": 0, "some": 1, "one": 2}
    out["findings"] = sorted(findings, key=lambda e: (order[e["scope"]], -e["n_ranks"], e["code"]))
    return out


def _sort_key(r: RankResult) -> tuple:
    return (r.rank is None, r.rank if r.rank is not None else 0, r.path)


def analyze_directory(
    directory: str | os.PathLike[str],
    jobs: int | None = None,
    select: list[str] | None = None,
    ignore: list[str] | None = None,
    progress: Callable[[str], None] | None = None,
    rule_paths: list[str] | None = None,
) -> MultiRankReport:
    """Analyze every trace in ``directory`` in ``jobs`` worker processes.

    Args:
        jobs: worker processes; default ``min(cpu count, number of traces)``. 1 runs in
            this process.
        rule_paths: extra rule files or folders, evaluated with the built-in rules.

    Raises:
        TraceLoadError: no trace files, a file that is not a readable trace (the first
            such file in name order, one line naming it), or two traces of the same rank.
        RuleError: a bad ``select``/``ignore`` selector or rule file.
    """
    d = Path(directory)
    files = find_traces(d)
    if jobs is None:
        jobs = min(os.cpu_count() or 1, len(files))
    jobs = max(1, min(jobs, len(files)))
    # fail fast on a bad selector or rule file, before any worker starts
    from tracedoc.engine.rules import load_rules, select_rules

    select_rules(load_rules(rule_paths), select, ignore)
    results: list[RankResult] = []
    if progress:
        progress(f"analyzing {len(files)} traces with {jobs} worker process{'es' if jobs > 1 else ''}")
    if jobs == 1:
        for i, f in enumerate(files):
            results.append(analyze_one(str(f), select, ignore, rule_paths=rule_paths))
            if progress:
                progress(f"analyzed {i + 1}/{len(files)} traces")
    else:
        with ProcessPoolExecutor(max_workers=jobs) as pool:
            futures = [pool.submit(analyze_one, str(f), select, ignore, 1, rule_paths) for f in files]
            for i, fut in enumerate(futures):
                results.append(fut.result())
                if progress:
                    progress(f"analyzed {i + 1}/{len(files)} traces")
    for r in results:  # files are in name order: report the first bad one
        if r.error:
            raise TraceLoadError(r.path, r.error[len(r.path) + 2 :] if r.error.startswith(r.path + ": ") else r.error)
    seen: dict[int, str] = {}
    for r in results:
        if r.rank is not None:
            if r.rank in seen:
                raise TraceLoadError(
                    r.path, f"rank {r.rank} again (also in {Path(seen[r.rank]).name}); one trace per rank expected"
                )
            seen[r.rank] = r.path
    results.sort(key=_sort_key)
    return MultiRankReport(directory=str(directory), ranks=results, summary=summarize(results))


def _fmt_ms(v: Any) -> str:
    return "n/a" if v is None else f"{v:.2f}"


def _fmt_share(v: Any) -> str:
    return "n/a" if v is None else f"{v:.1%}"


def render_text(mr: MultiRankReport, console: Any) -> None:
    """The human multi-rank report: one row per rank, then the cross-rank summary."""
    from rich.markup import escape
    from rich.table import Table

    from tracedoc.report.render import middle_ellipsis, plural

    s = mr.summary
    console.print(f"[bold]tracedoc[/] {escape(mr.directory)}: {plural(s['n_ranks'], 'trace')}")
    table = Table(show_edge=False, title="per rank", title_justify="left")
    # 80 columns: every column but the findings stays on one line; long file names are
    # shortened in the middle (both the rank prefix and the suffix stay readable)
    # shortened in the middle; under 100 columns the event count is left out
    wide = console.width >= 100
    file_w = max(10, console.width - (73 if wide else 62))
    cols = ("rank", "file", "events", "steps", "step ms", "GPU busy", "DataLoader", "findings")
    for col in cols if wide else [c for c in cols if c != "events"]:
        table.add_column(col, no_wrap=col != "findings", min_width=8 if col == "findings" else None)
    for r in mr.ranks:
        rep = r.report
        codes = " ".join(f.code for f in rep.findings) or "-"
        table.add_row(
            str(r.rank) if r.rank is not None else "?",
            escape(middle_ellipsis(Path(r.path).name, file_w)),
            *([f"{rep.trace['n_events']:,}"] if wide else []),
            str(rep.signals.get("step_count")),
            _fmt_ms(rep.signals.get("step_time_ms")),
            _fmt_share(rep.signals.get("gpu_busy_share")),
            _fmt_share(rep.signals.get("dataloader_share")),
            escape(codes),
        )
    console.print(table)
    console.print("\n[bold]cross-rank summary[/]")
    if s.get("slowest_rank") is not None:
        console.print(
            f"  median step time {s['median_step_time_ms']:.2f} ms; slowest: {escape(s['slowest_rank'])} "
            f"at {s['slowest_step_time_ms']:.2f} ms, [bold]{s['slowest_lag_ms']:.2f} ms "
            f"({s['slowest_lag_pct']:.1f}%)[/] behind the median"
            if s.get("slowest_lag_pct") is not None
            else f"  slowest: {escape(s['slowest_rank'])} at {s['slowest_step_time_ms']:.2f} ms"
        )
    else:
        console.print("  no rank has a step time")
    groups = (
        ("most", "findings on most ranks (the job)"),
        ("some", "findings on some ranks"),
        ("one", "findings on one rank only (a straggler?)"),
    )
    for scope, title in groups:
        items = [f for f in s["findings"] if f["scope"] == scope]
        if items:
            console.print(f"  {title}:")
            for f in items:
                console.print(
                    f"    {f['code']} {f['name']} ({f['severity']}): {f['n_ranks']}/{s['n_ranks']} ranks "
                    + escape(f"[{', '.join(f['ranks'])}]")
                )  # the brackets too: not a style tag
    if not s["findings"]:
        console.print("  [green]no findings on any rank[/]")


def render_markdown(mr: MultiRankReport) -> str:
    """A Markdown multi-rank summary."""
    s = mr.summary
    lines = [
        f"# tracedoc multi-rank report: `{mr.directory}`",
        "",
        "| rank | file | step time (ms) | GPU busy | findings |",
        "|---|---|---|---|---|",
    ]
    for r in mr.ranks:
        rep = r.report
        codes = ", ".join(f.code for f in rep.findings) or "-"
        lines.append(
            f"| {r.rank if r.rank is not None else '?'} | `{Path(r.path).name}` | "
            f"{_fmt_ms(rep.signals.get('step_time_ms'))} | {_fmt_share(rep.signals.get('gpu_busy_share'))} | {codes} |"
        )
    lines += ["", "## Cross-rank summary", ""]
    if s.get("slowest_rank") is not None:
        lag = (
            f", {s['slowest_lag_ms']:.2f} ms ({s['slowest_lag_pct']:.1f}%) behind the median"
            if s.get("slowest_lag_pct") is not None
            else ""
        )
        lines.append(
            f"- median step time {_fmt_ms(s['median_step_time_ms'])} ms; slowest {s['slowest_rank']} "
            f"at {s['slowest_step_time_ms']:.2f} ms{lag}"
        )
    for f in s["findings"]:
        lines.append(
            f"- {f['code']} `{f['name']}` ({f['severity']}): on {f['n_ranks']}/{s['n_ranks']} ranks "
            f"({f['scope']}): {', '.join(f['ranks'])}"
        )
    return "\n".join(lines) + "\n"
