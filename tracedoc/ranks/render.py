"""Text and Markdown views of a multi-rank report."""

from __future__ import annotations

from pathlib import Path
from typing import Any

from tracedoc.ranks.summary import MultiRankReport


def _fmt_ms(v: Any) -> str:
    return "n/a" if v is None else f"{v:.2f}"


def _fmt_share(v: Any) -> str:
    return "n/a" if v is None else f"{v:.1%}"


def render_text(mr: MultiRankReport, console: Any) -> None:
    """The human multi-rank report: one row per rank, then the cross-rank summary."""
    from rich.markup import escape
    from rich.table import Table

    s = mr.summary
    console.print(f"[bold]tracedoc[/] {escape(mr.directory)}: {s['n_ranks']} traces")
    table = Table(show_edge=False, title="per rank", title_justify="left")
    for col in ("rank", "file", "events", "steps", "step time (ms)", "GPU busy", "DataLoader", "findings"):
        table.add_column(col)
    for r in mr.ranks:
        rep = r.report
        codes = " ".join(f.code for f in rep.findings) or "-"
        table.add_row(
            str(r.rank) if r.rank is not None else "?",
            escape(Path(r.path).name),
            f"{rep.trace['n_events']:,}",
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
