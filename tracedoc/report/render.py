"""Renderers: a Report to the terminal (rich), JSON or Markdown. Selected by ``--format``.

Text taken from the trace (kernel and op names, paths) is escaped before rich sees
it, so a kernel named ``[bold]`` prints as it is.
"""

from __future__ import annotations

from typing import Any

import orjson
from rich.console import Console, Group
from rich.markup import escape
from rich.panel import Panel
from rich.table import Table
from rich.text import Text

from tracedoc.report.model import Report

BREAKDOWN = (  # signal, label, colour
    ("kernel_share", "kernel", "green"),
    ("communication_share", "comm", "bright_green"),
    ("memcpy_share", "memcpy", "blue"),
    ("memset_share", "memset", "cyan"),
    ("runtime_share", "runtime", "magenta"),
    ("dataloader_share", "DataLoader", "red"),
    ("cpu_exec_share", "CPU exec", "yellow"),
    ("other_share", "other", "white"),
)
SEVERITY_STYLE = {"error": "bold red", "warning": "yellow", "info": "cyan"}
SAFETY_STYLE = {"safe": "green", "unsafe": "yellow", "display-only": "dim"}


def _fmt(v: Any) -> str:
    if isinstance(v, bool) or v is None:
        return str(v)
    if isinstance(v, float):
        if abs(v) >= 1e6:
            return f"{v:,.0f}"
        return f"{v:.4g}"
    return str(v)


def short_name(name: str, limit: int = 70) -> str:
    """A kernel/op name for the terminal: no ``void``, template arguments and parameter
    lists collapsed to ``<…>``/``(…)``, at most ``limit`` characters. JSON keeps full names."""
    n = name[5:] if name.startswith("void ") else name
    out, depth = [], 0
    for ch in n:
        if ch in "<(":
            if depth == 0:
                out.append(ch + "…" + (">" if ch == "<" else ")"))
            depth += 1
        elif ch in ">)":
            depth = max(depth - 1, 0)
        elif depth == 0:
            out.append(ch)
    n = "".join(out)
    return n if len(n) <= limit else n[: limit - 1] + "…"


def ledger_line(led: dict[str, float]) -> str:
    """One device's idle ledger on one line: total, then each non-zero cause, largest first (ms per step)."""
    total = sum(led.values())
    parts = [f"{k.replace('_', ' ')} {v:.1f}" for k, v in sorted(led.items(), key=lambda kv: -kv[1]) if v >= 0.05]
    return f"{total:.1f} ms/step = " + (" + ".join(parts) if parts else "0")


def _fmt_evidence(name: str, v: Any) -> str:
    if isinstance(v, float) and name.endswith("_share"):
        return f"{v:.1%}"
    if isinstance(v, (int, float)) and (name.endswith("_bytes") or name.endswith("bytes_per_step")):
        return f"{v:,.0f} B"
    return _fmt(v)


class JsonRenderer:
    """The versioned JSON report (``to_dict()`` of a Report or a multi-rank report),
    one document on stdout."""

    def render(self, report: Report) -> str:
        return orjson.dumps(report.to_dict(), option=orjson.OPT_INDENT_2 | orjson.OPT_SERIALIZE_NUMPY).decode()


class MarkdownRenderer:
    """A Markdown summary: trace, breakdown table, findings with fixes."""

    def render(self, report: Report) -> str:
        t, s = report.trace, report.signals
        dev = t["device"]["name"] if t["device"] else "no GPU described"
        lines = [
            f"# tracedoc report: `{t['path']}`",
            "",
            f"- device: {dev}",
            f"- steps: {s.get('step_count')} averaged (of {t['n_steps']}), step time {_fmt(s.get('step_time_ms'))} ms",
            "",
            "| category | share of step |",
            "|---|---|",
        ]
        for key, label, _ in BREAKDOWN:
            v = s.get(key)
            lines.append(f"| {label} | {'n/a' if v is None else f'{v:.1%}'} |")
        for dev, led in report.idle_ledger.items():
            lines += ["", f"GPU idle on `{dev}`: {ledger_line(led)}"]
        for note in report.notes:
            lines += ["", f"> **Note:** {note}"]
        lines += ["", "## Findings", ""]
        if not report.findings:
            lines.append("No findings.")
        for i, f in enumerate(report.findings, 1):
            saving = "n/a" if f.estimated_saving_ms is None else f"{f.estimated_saving_ms:.1f} ms/step"
            lines += [
                f"### {i}. {f.code} `{f.name}` ({f.severity}, est. saving {saving})",
                "",
                f.message,
                "",
                f"**Fix** ({f.fix.safety}): {f.fix.summary}",
                "",
            ]
        if report.skipped:
            lines += ["## Skipped rules", ""]
            lines += [f"- {k.code} `{k.name}`: {k.reason}" for k in report.skipped]
        return "\n".join(lines) + "\n"


class ConsoleRenderer:
    """The human report: header, step-time breakdown bar, ranked findings, skipped rules."""

    def __init__(self, console: Console) -> None:
        self.console = console

    def render(self, report: Report) -> None:
        c = self.console
        t, s = report.trace, report.signals
        dev = t["device"]
        dev_txt = (
            f"{escape(dev['name'])} ({_fmt((dev['total_memory_bytes'] or 0) / 2**30)} GiB"
            + (f", {escape(t['primary_device'])}" if t.get("primary_device") else "")
            + ")"
            if dev
            else "no GPU described"
        )
        if t["has_steps"]:
            steps_txt = (
                f"{s.get('step_count')} of {t['n_steps']} ProfilerSteps averaged, "
                f"step time [bold]{s['step_time_ms']:.2f} ms[/]"
            )
        else:
            steps_txt = f"no ProfilerStep annotations: the whole trace ({t['span_ms']:.1f} ms) is one window"
        c.print(f"[bold]tracedoc[/] {escape(t['path'])}")
        c.print(
            f"  device: {dev_txt}   events: {t['n_events']:,}"
            + (f"   rank: {t['rank']}" if t["rank"] is not None else "")
        )
        c.print(f"  {steps_txt}")
        c.print(self._bar(s))
        for dev, led in report.idle_ledger.items():
            c.print(f"  [bold]GPU idle ({escape(dev)})[/] {escape(ledger_line(led))}")
        for note in report.notes:
            c.print(f"  [yellow]note:[/] {escape(note)}")
        if not report.findings:
            c.print("\n[green]No findings.[/]")
        for i, f in enumerate(report.findings, 1):
            c.print(self._finding(i, f))
        if report.below_floor:
            names = ", ".join(f"{f.code} ({f.estimated_saving_ms:.2f} ms)" for f in report.below_floor)
            c.print(f"\n[dim]Below the saving floor (not listed): {escape(names)}[/]")
        if report.skipped:
            c.print("\n[dim]Skipped rules:[/]")
            for k in report.skipped:
                c.print(f"  [dim]{k.code} {k.name}: {escape(k.reason)}[/]")

    def _bar(self, s: dict[str, Any], width: int = 50) -> Group:
        bar = Text("  ")
        legend = Text("  ")
        cum, drawn = 0.0, 0
        for key, label, colour in BREAKDOWN:
            v = s.get(key) or 0.0
            cum += v
            n = int(round(cum * width)) - drawn  # cumulative rounding: the bar is exactly `width`
            drawn += n
            bar.append("█" * n, style=colour)
            if v >= 0.0005:
                legend.append("■ ", style=colour)
                legend.append(f"{label} {v:.1%}  ")
        return Group(Text("\n  step-time breakdown", style="bold"), bar, legend)

    def _finding(self, i: int, f) -> Panel:
        saving = "n/a" if f.estimated_saving_ms is None else f"~{f.estimated_saving_ms:.1f} ms/step"
        title = (
            f"[bold]#{i}[/] [{SEVERITY_STYLE[f.severity]}]{f.severity}[/] "
            f"[bold]{f.code} {f.name}[/]  est. saving [bold]{saving}[/]"
        )
        parts: list[Any] = [Text(f.message)]
        scalars = {k: v for k, v in f.evidence.items() if not isinstance(v, list)}
        if scalars:
            parts.append(
                Text("evidence: " + ", ".join(f"{k}={_fmt_evidence(k, v)}" for k, v in scalars.items()), style="dim")
            )
        for k, rows in f.evidence.items():
            if isinstance(rows, list) and rows:
                table = Table(title=k, title_justify="left", show_edge=False, pad_edge=False, expand=False)
                for col in rows[0]:
                    table.add_column(col, overflow="fold")
                for r in rows:
                    table.add_row(
                        *(
                            escape(short_name(str(r.get(col))) if col in ("kernel", "op") else _fmt(r.get(col)))
                            for col in rows[0]
                        )
                    )
                parts.append(table)
        parts.append(Text.assemble(("fix ", "bold"), (f"[{f.fix.safety}] ", SAFETY_STYLE[f.fix.safety]), f.fix.summary))
        return Panel(Group(*parts), title=title, title_align="left", border_style=SEVERITY_STYLE[f.severity])
