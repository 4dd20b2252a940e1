"""The ranks of one job and several unrelated traces (:mod:`tracedoc.report.ranks`) in the
terminal and in Markdown, and the closing summary line of a multi-rank report.

Paths, rank labels and errors come from the inputs: rich markup is escaped in the terminal
(:func:`~tracedoc.render.escape.markup`), and the Markdown puts them in code spans or through
:func:`~tracedoc.render.escape.markdown` (:mod:`tracedoc.render.escape`)."""

from __future__ import annotations

from pathlib import Path
from typing import TYPE_CHECKING, Any

from tracedoc.render.escape import code_span, markdown

if TYPE_CHECKING:
    from tracedoc.report.ranks import MultiRankReport, MultiTraceReport


def _fmt_ms(v: Any) -> str:
    return "n/a" if v is None else f"{v:.2f}"


def _fmt_share(v: Any) -> str:
    return "n/a" if v is None else f"{v:.1%}"


def render_text(mr: MultiRankReport, console: Any) -> None:
    """The human multi-rank report: one row per rank, then the cross-rank summary."""
    from rich.markup import escape
    from rich.table import Table

    from tracedoc.text import middle_ellipsis, plural

    s = mr.summary
    console.print(f"[bold]tracedoc[/] {escape(mr.directory)}: {plural(s['n_ranks'], 'trace')}")
    table = Table(show_edge=False, title="per rank", title_justify="left")
    # 80 columns: every column but the findings stays on one line; long file names are
    # shortened in the middle; under 100 columns the event count is left out
    wide = console.width >= 100
    file_w = max(10, console.width - (73 if wide else 62))
    cols = ("rank", "file", "events", "steps", "step ms", "GPU busy", "DataLoader", "findings")
    for col in cols if wide else [c for c in cols if c != "events"]:
        table.add_column(col, no_wrap=col != "findings", min_width=8 if col == "findings" else None)
    for r in mr.ranks:
        rep = r.report
        if rep is None:  # a failed rank: listed with its error in the summary
            continue
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
                    "    " + escape(" ".join([f["code"], f["name"], f"({f['severity']})"])) + ": "
                    f"{f['n_ranks']}/{plural(s['n_ranks'], 'rank')} " + escape(f"[{', '.join(f['ranks'])}]")
                )  # the brackets too: not a style tag
    if not s["findings"]:
        console.print("  [green]no findings on any rank[/]")
    _print_collectives(s, console)
    _print_exposed(s, console)
    _print_left_out(mr, console)


def _print_collectives(s: dict, console: Any) -> None:
    from rich.markup import escape

    from tracedoc.text import plural

    c = s.get("collectives")
    if not c:
        return
    console.print(
        f"\n[bold]collectives[/] ({c['n_matched']:,} matched across {plural(c['n_ranks'], 'rank')}, from {c['source']})"
    )
    if c["straggler"] is None:
        console.print("  no straggler: the matched collectives took equally long on every rank")
        return
    per_step = c.get("straggler_lag_ms_per_step")
    console.print(
        f"  straggler: [bold]{escape(c['straggler'])}[/] (arrived last in {c['straggler_last_share']:.0%} of them); "
        f"the others waited {c['straggler_lag_ms_total']:.2f} ms for it"
        + (f", {per_step:.2f} ms per step (median)" if per_step is not None else "")
    )
    for k in c["kinds"]:
        if k["straggler"]:
            console.print(
                f"    {escape(k['kind'])} x{k['count']}: last mostly {escape(k['straggler'])}, "
                f"lag {k['lag_ms_total']:.2f} ms in all (median {k['lag_ms_median']:.3f} ms)"
            )
    steps = [st for st in c["per_step"] if st["step"] is not None and st["straggler"]]
    if steps:
        console.print(
            "  per step: "
            + ", ".join(f"#{st['step']} {escape(st['straggler'])} {st['lag_ms']:.2f} ms" for st in steps[:12])
            + (" ..." if len(steps) > 12 else "")
        )
    for w in c["worst"][:3]:
        step = f" (step {w['step']})" if w["step"] is not None else ""
        console.print(
            f"  worst: {escape(w['kind'])} #{w['index']}{step}: {escape(w['straggler'])} {w['lag_ms']:.3f} ms late"
        )


def _print_exposed(s: dict, console: Any) -> None:
    from rich.markup import escape

    e = s.get("exposed_comm_ms")
    if e:
        console.print(
            "  exposed communication per step: " + ", ".join(f"{escape(k)} {_fmt_ms(v)} ms" for k, v in e.items())
        )


def _print_left_out(mr: Any, console: Any) -> None:
    from rich.markup import escape

    for r in mr.failed:
        console.print(f"[red]failed[/]: {escape(r.error or r.path)}")
    if mr.skipped:
        console.print(
            f"skipped {len(mr.skipped)}: " + escape(", ".join(f"{Path(p).name} ({why})" for p, why in mr.skipped))
        )
    for p in mr.followed:
        console.print(f"followed symlink outside the folder: {escape(p)}")
    for note in mr.notes:  # retried traces, duplicate ranks
        console.print(f"note: {escape(note)}")


def render_multi_text(mt: MultiTraceReport, console: Any) -> None:
    """One full single-trace report per trace, each under a rule naming the file; then
    what failed and what was skipped."""
    from rich.markup import escape

    from tracedoc.render.report import ConsoleRenderer

    console.print(f"[bold]tracedoc[/]: {len(mt.traces)} unrelated trace{'s' if len(mt.traces) != 1 else ''}")
    for r in mt.traces:
        console.rule(escape(r.path))
        ConsoleRenderer(console).render(r.report)
    _print_left_out(mt, console)


def render_multi_markdown(mt: MultiTraceReport) -> str:
    """The Markdown report of each trace, one after another."""
    from tracedoc.render.report import MarkdownRenderer

    parts = [MarkdownRenderer().render(r.report) for r in mt.traces]
    tail = _md_left_out(mt)
    return "\n".join(parts) + ("\n" + "\n".join(tail) + "\n" if tail else "")


def _md_left_out(mr: Any) -> list[str]:
    """Markdown list items: the traces that failed and the entries skipped."""
    tail = [f"- failed: {code_span(r.path)}: {markdown(r.error)}" for r in mr.failed]
    tail += [f"- skipped: {code_span(p)} ({markdown(why)})" for p, why in mr.skipped]
    return tail + [f"- note: {markdown(n)}" for n in mr.notes]


def render_markdown(mr: MultiRankReport) -> str:
    """A Markdown multi-rank summary."""
    from tracedoc.text import plural

    s = mr.summary
    lines = [
        f"# tracedoc multi-rank report: {code_span(mr.directory)}",
        "",
        "| rank | file | step time (ms) | GPU busy | findings |",
        "|---|---|---|---|---|",
    ]
    for r in mr.ranks:
        rep = r.report
        if rep is None:  # a failed rank: listed under "failed"
            continue
        codes = ", ".join(f.code for f in rep.findings) or "-"
        file = code_span(Path(r.path).name).replace("|", "\\|")  # a cell: GFM splits on any |
        lines.append(
            f"| {r.rank if r.rank is not None else '?'} | {file} | "
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
            f"- median step time {_fmt_ms(s['median_step_time_ms'])} ms; slowest {markdown(s['slowest_rank'])} "
            f"at {s['slowest_step_time_ms']:.2f} ms{lag}"
        )
    c = s.get("collectives")
    if c and c["straggler"]:
        per_step = c.get("straggler_lag_ms_per_step")
        lines.append(
            f"- straggler (from {plural(c['n_matched'], 'matched collective')}): {markdown(c['straggler'])}, arrived last in "
            f"{c['straggler_last_share']:.0%}; others waited {c['straggler_lag_ms_total']:.2f} ms"
            + (f" ({per_step:.2f} ms per step)" if per_step is not None else "")
        )
    for f in s["findings"]:
        lines.append(
            f"- {markdown(f['code'])} {code_span(f['name'])} ({markdown(f['severity'])}): "
            f"on {f['n_ranks']}/{plural(s['n_ranks'], 'rank')} "
            f"({f['scope']}): {markdown(', '.join(f['ranks']))}"
        )
    lines += _md_left_out(mr)
    return "\n".join(lines) + "\n"


def multi_summary(mr: MultiRankReport) -> str:
    """The closing line of a multi-rank report: traces, findings in all, traces that failed."""
    from tracedoc.text import plural

    n_findings = sum(len(r.report.findings) for r in mr.ranks if r.report)
    n_err = sum(1 for r in mr.ranks if r.error)
    line = f"{plural(len(mr.ranks), 'trace')}: {plural(n_findings, 'finding')} in all"
    return line + (f"; {plural(n_err, 'trace')} could not be analyzed" if n_err else "")
