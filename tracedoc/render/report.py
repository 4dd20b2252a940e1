"""The single-trace Report in the terminal (rich) and in Markdown, and the wording every format
shares; :mod:`tracedoc.render` chooses the format.

The other formats live beside this module: :mod:`tracedoc.render.github` (workflow
annotations), :mod:`tracedoc.render.sarif` (SARIF 2.1.0) and :mod:`tracedoc.render.html`
(one self-contained page); JSON is the document's own ``to_dict``. The helpers here (:func:`summary_line`,
:func:`plural`, :func:`middle_ellipsis`) are shared by all of them, so every format says
the same thing.

Text taken from the trace (kernel and op names, paths, devices, skip reasons) is escaped for
the output it goes to (:mod:`tracedoc.render.escape`): the registry hands every renderer here a
document whose strings are all visible (no control, bidi or zero-width character, no line
break), rich markup is escaped where a string is markup (a kernel named ``[bold]`` prints as
it is), and the Markdown puts names in code spans (:func:`~tracedoc.render.escape.code_span`)
and other trace text through :func:`~tracedoc.render.escape.markdown`.

Terminal layout rules (issue 11): nothing is wider than the console; a line only ever
breaks at a space, never inside an identifier; names too long for their column are
shortened with a middle ellipsis (``cudnn::det…engine<…>(…)``); a legend entry is never
split; and the step-time bar draws each segment with its own glyph when there is no
colour (``NO_COLOR``, a pipe, CI), so it still reads.
"""

from __future__ import annotations

import re
from typing import TYPE_CHECKING, Any

from rich.console import Console, Group
from rich.padding import Padding
from rich.panel import Panel
from rich.table import Table
from rich.text import Text

from tracedoc.render.escape import code_span, markdown, markup
from tracedoc.text import middle_ellipsis, plural  # noqa: F401  (re-exported)

if TYPE_CHECKING:  # documents are read, never imported at run time (tracedoc.render)
    from tracedoc.report.model import Report

BREAKDOWN = (  # signal, label, colour, glyph without colour
    ("kernel_share", "kernel", "green", "█"),
    ("communication_share", "comm", "bright_green", "≈"),
    ("memcpy_share", "memcpy", "blue", "▓"),
    ("memset_share", "memset", "cyan", "▒"),
    ("runtime_share", "runtime", "magenta", "░"),
    ("dataloader_share", "DataLoader", "red", "D"),
    ("cpu_exec_share", "CPU exec", "yellow", "c"),
    ("other_share", "other", "white", "·"),
)
SEVERITY_STYLE = {"error": "bold red", "warning": "yellow", "info": "cyan"}
SAFETY_STYLE = {"safe": "green", "unsafe": "yellow", "display-only": "dim"}
SEVERITIES_DESC = ("error", "warning", "info")

#: How findings are ordered (``tracedoc.engine.rank_findings``); every format states it.
ORDER_NOTE = "ranked by estimated saving per step, largest first (then severity)"

#: Evidence table columns that hold trace names (shortened, middle ellipsis).
NAME_COLUMNS = ("kernel", "op", "copy", "name")


def short_name(name: str, limit: int = 70) -> str:
    """A kernel/op name for the terminal: no ``void``, template arguments and parameter
    lists collapsed to ``<…>``/``(…)``, at most ``limit`` characters (middle ellipsis).
    JSON, SARIF and HTML keep full names."""
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
    return middle_ellipsis("".join(out), limit)


_VENDOR_TWICE = re.compile(r"\b(AMD|NVIDIA|Intel)\s+\1\b", re.IGNORECASE)


def dedupe_vendor(text: str) -> str:
    """Collapse a doubled vendor (``"AMD AMD Radeon Graphics"`` -> ``"AMD Radeon Graphics"``);
    some messages put the vendor in front of a device name that already starts with it."""
    return _VENDOR_TWICE.sub(r"\1", text)


def device_label(dev: dict[str, Any] | None) -> str:
    """The primary device as a reader wants it: ``"Tesla V100-DGXS-32GB (31.74 GiB)"``.

    The marketing name already carries the vendor where it matters, so it is shown as
    the trace gives it (a doubled vendor collapsed): a ROCm device never reads
    ``AMD AMD Radeon Graphics``. ``"no GPU described"`` for None.
    """
    if not dev:
        return "no GPU described"
    name = str(dev.get("name") or "unnamed GPU")
    mem = dev.get("total_memory_bytes")
    return dedupe_vendor(name) + (f" ({mem / 2**30:.2f} GiB)" if mem else "")


def _fmt(v: Any) -> str:
    if isinstance(v, bool) or v is None:
        return str(v)
    if isinstance(v, float):
        if abs(v) >= 1e6:
            return f"{v:,.0f}"
        return f"{v:.4g}"
    return str(v)


def ledger_parts(led: dict[str, float]) -> list[str]:
    """One device's idle-ledger causes as ``"cause ms"`` pieces, largest first (ms per step;
    causes under 0.05 ms are left out)."""
    return [f"{k.replace('_', ' ')} {v:.1f}" for k, v in sorted(led.items(), key=lambda kv: -kv[1]) if v >= 0.05]


def ledger_line(led: dict[str, float]) -> str:
    """One device's idle ledger on one line: total, then each non-zero cause, largest first (ms per step)."""
    parts = ledger_parts(led)
    return f"{sum(led.values()):.1f} ms/step = " + (" + ".join(parts) if parts else "0")


def fmt_evidence(name: str, v: Any) -> str:
    """An evidence value for reading: ``_share`` as a percentage, bytes with separators."""
    if isinstance(v, float) and name.endswith("_share"):
        return f"{v:.1%}"
    if isinstance(v, (int, float)) and not isinstance(v, bool) and "bytes" in name:
        return f"{v:,.0f} B"
    return _fmt(v)


_fmt_evidence = fmt_evidence  # the name earlier callers used


def column_label(col: str) -> str:
    """An evidence-table header for reading: ``ms_per_step`` -> ``ms/step``."""
    return col.replace("_per_", "/")


def replay_line(f: Any) -> str:
    """One line on a replayed finding's saving, e.g. ``saving replayed by the step model: 58.9 ms
    per step (range 50.0-58.9); its slice, the upper bound: 58.7 ms`` (no trace text in it)."""
    rng = ""
    if f.replayed_low_ms is not None and f.replayed_low_ms < f.replayed_saving_ms:
        rng = f" (range {f.replayed_low_ms:.1f}-{f.replayed_saving_ms:.1f})"
    sl = "" if f.slice_saving_ms is None else f"; its slice, the upper bound: {f.slice_saving_ms:.1f} ms"
    return f"saving replayed by the step model ({f.fix.replay}): {f.replayed_saving_ms:.1f} ms per step{rng}{sl}"


def severity_counts(findings: list[Any]) -> dict[str, int]:
    """``{"error": n, "warning": n, "info": n}`` over ``findings``."""
    counts = dict.fromkeys(SEVERITIES_DESC, 0)
    for f in findings:
        counts[f.severity] = counts.get(f.severity, 0) + 1
    return counts


def recoverable_ms(report: Report) -> float:
    """The headline, ms per step: the step model's replay of every replayed finding's fix
    together (``report.recoverable``), never more than it; on a trace the model cannot replay,
    the sum of the findings' granted savings, capped at the step time (findings claim disjoint
    slices of the step: the idle ledger, docs/architecture.md)."""
    rec = getattr(report, "recoverable", None)
    if rec is not None:
        return float(rec["ms"])
    total = sum(f.estimated_saving_ms or 0.0 for f in report.findings)
    step = report.signals.get("step_time_ms")
    return min(total, step) if isinstance(step, (int, float)) and step > 0 else total


def summary_line(report: Report, width: int | None = None) -> str:
    """The closing line of every format, e.g.
    ``4 findings (1 error, 2 warnings, 1 info); ~99.6 ms of a 177.6 ms step (56%) recoverable``
    (the headline, :func:`recoverable_ms`; findings the step model did not replay are counted
    after it, their savings not in it).

    With ``width`` (a terminal's columns) a line that would not fit says the same more
    briefly (``...; ~99.6 ms/step (56%) recoverable``) so it stays one line."""
    n = len(report.findings)
    if not n:
        out = "No findings"
    else:
        c = severity_counts(report.findings)
        parts = [
            plural(c["error"], "error"),
            plural(c["warning"], "warning"),
            f"{c['info']} info",
        ]
        parts = [p for p, k in zip(parts, SEVERITIES_DESC, strict=True) if c[k]]
        out = f"{plural(n, 'finding')} ({', '.join(parts)})"
        saved = recoverable_ms(report)
        step = report.signals.get("step_time_ms")
        if any(f.estimated_saving_ms is not None for f in report.findings):
            rec = getattr(report, "recoverable", None)
            rest = len(rec["not_replayed"]) if rec else 0
            tail = f" (fixes replayed together; {plural(rest, 'finding')} not replayed)" if rest else ""
            if isinstance(step, (int, float)) and step > 0:
                full = f"{out}; ~{saved:.1f} ms of a {step:.1f} ms step ({saved / step:.0%}) recoverable{tail}"
                brief = f"{out}; ~{saved:.1f} ms/step ({saved / step:.0%}) recoverable"
                out = full if width is None or len(full) <= width else brief
            else:
                out += f"; ~{saved:.1f} ms per step recoverable"
    return out


def _md_cell(v: Any) -> str:
    return str(v).replace("|", "\\|").replace("\n", " ")


def md_table(rows: list[dict[str, Any]], name_limit: int | None = None) -> list[str]:
    """A list of dict rows as GitHub-flavoured Markdown table lines (pipes escaped): names in
    code spans, other text through :func:`~tracedoc.render.escape.markdown`, numbers formatted."""
    cols = list(rows[0])
    out = ["| " + " | ".join(markdown(column_label(c)) for c in cols) + " |", "|" + "---|" * len(cols)]
    for r in rows:
        cells = []
        for c in cols:
            v = r.get(c)
            if c in NAME_COLUMNS and v is not None:
                text = short_name(str(v), name_limit) if name_limit is not None and c == "kernel" else str(v)
                cells.append(_md_cell(code_span(text)))
            else:
                cells.append(markdown(v) if isinstance(v, str) else _md_cell(fmt_evidence(c, v)))  # | escaped
        out.append("| " + " | ".join(cells) + " |")
    return out


class MarkdownRenderer:
    """A Markdown report: trace, breakdown table, findings with evidence (tables too) and
    fixes, skipped rules, the closing summary line."""

    def render(self, report: Report) -> str:
        """The Markdown text, ending in a newline."""
        t, s = report.trace, report.signals
        lines = [
            f"# tracedoc report: {code_span(t['path'])}",
            "",
            f"- device: {markdown(device_label(t['device']))}",
            f"- events: {t['n_events']:,}",
        ]
        if t["has_steps"]:
            lines.append(
                f"- steps: {s.get('step_count')} of {t['n_steps']} ProfilerSteps averaged, "
                f"step time {_fmt(s.get('step_time_ms'))} ms"
            )
        else:
            lines.append(f"- no ProfilerStep annotations: the whole trace ({t['span_ms']:.1f} ms) is one window")
        lines += ["", "## Step-time breakdown", "", "| category | share of step |", "|---|---|"]
        for key, label, _, _ in BREAKDOWN:
            v = s.get(key)
            lines.append(f"| {label} | {'n/a' if v is None else f'{v:.1%}'} |")
        for dev, led in report.idle_ledger.items():
            lines += ["", f"GPU idle on {code_span(dev)}: {ledger_line(led)}"]
        for note in report.notes:
            lines += ["", f"> **Note:** {markdown(note)}"]
        if report.steps:
            lines += ["", "Per step (ms):", ""] + md_table(report.steps)
        lines += ["", "## Findings", "", f"Findings are {ORDER_NOTE}.", ""]
        if not report.findings:
            lines.append("No findings.")
        for i, f in enumerate(report.findings, 1):
            saving = "n/a" if f.estimated_saving_ms is None else f"{f.estimated_saving_ms:.1f} ms/step"
            head = f"### {i}. {markdown(f.code)} {code_span(f.name)} ({f.severity}, est. saving {saving})"
            lines += [head, "", f.message, ""]
            if f.replayed_saving_ms is not None:
                lines += [replay_line(f), ""]
            scalars = {k: v for k, v in f.evidence.items() if not isinstance(v, list)}
            if scalars:
                lines += ["Evidence:", ""]
                lines += [
                    f"- {code_span(k)} = {markdown(v) if isinstance(v, str) else fmt_evidence(k, v)}"
                    for k, v in scalars.items()
                ]
                lines.append("")
            for k, rows in f.evidence.items():
                if isinstance(rows, list) and rows and isinstance(rows[0], dict):
                    lines += [f"{code_span(k)}:", ""] + md_table(rows, name_limit=100) + [""]
            if f.saving_basis:
                lines += [f"Saving estimate: {f.saving_basis}", ""]
            lines += [f"**Fix** ({f.fix.safety}): {f.fix.summary}", ""]
        if report.also_true:
            lines += ["## Also true (not ranked)", ""]
            lines += [f"- {markdown(a.code)} {code_span(a.name)}: {a.why}" for a in report.also_true]
            lines.append("")
        if report.skipped:
            lines += ["## Skipped rules", ""]
            lines += [
                f"- {markdown(k.code)} {code_span(k.name)}: {markdown(dedupe_vendor(k.reason))}" for k in report.skipped
            ]
            lines.append("")
        lines += ["---", "", f"**{summary_line(report)}**"]
        return "\n".join(lines) + "\n"


def _pack(items: list[Text], width: int, indent: int = 2, sep: str = "  ") -> list[Text]:
    """Lay out unbreakable pieces on lines of at most ``width`` cells: a piece moves whole to
    the next line rather than being split (a legend entry keeps its label and number)."""
    lines: list[Text] = []
    cur = Text(" " * indent)
    used = indent
    for it in items:
        w = it.cell_len
        if used > indent and used + len(sep) + w > width:
            lines.append(cur)
            cur, used = Text(" " * indent), indent
        if used > indent:
            cur.append(sep)
            used += len(sep)
        cur.append_text(it)
        used += w
    lines.append(cur)
    for ln in lines:
        ln.no_wrap = True
        ln.overflow = "ellipsis"
    return lines


class ConsoleRenderer:
    """The human report: header, step-time breakdown bar, ranked findings, skipped rules,
    and a closing summary line (:func:`summary_line`).

    Args:
        console: where to print; its ``width`` sets the layout (80 and up are clean; see
            the module docstring) and its colour system decides between coloured and
            glyph-per-segment bars.
        top: show only the first ``top`` findings (None: all); the summary line still
            counts all of them.
        quiet: print the summary line only.
    """

    def __init__(self, console: Console, top: int | None = None, quiet: bool = False) -> None:
        self.console = console
        self.top = top
        self.quiet = quiet

    @property
    def _colour(self) -> bool:
        return self.console.color_system is not None and not self.console.no_color

    def render(self, report: Report) -> None:
        """Print the report to the console."""
        c = self.console
        if self.quiet:
            c.print(Text(summary_line(report, c.width)))
            return
        w = c.width
        t, s = report.trace, report.signals
        if t["has_steps"]:
            steps_txt = [
                Text(f"{s.get('step_count')} of {plural(t['n_steps'], 'ProfilerStep')} averaged,"),
                Text.assemble("step time ", (f"{s['step_time_ms']:.2f} ms", "bold"))
                if s.get("step_time_ms") is not None
                else Text("no step time"),
            ]
        else:
            steps_txt = [Text(f"no ProfilerStep annotations: the whole trace ({t['span_ms']:.1f} ms) is one window")]
        c.print(Text.assemble(("tracedoc ", "bold"), middle_ellipsis(str(t["path"]), max(w - 9, 10))))
        head = [Text(f"device: {device_label(t['device'])}"), Text(f"events: {t['n_events']:,}")]
        if t["rank"] is not None:
            head.append(Text(f"rank: {t['rank']}"))
        for ln in _pack(head, w, sep="   "):
            c.print(ln)
        c.print(Text("  ") + Text(" ").join(steps_txt))
        c.print(self._bar(s, w))
        for dev, led in report.idle_ledger.items():
            total = sum(led.values())
            causes = [Text(p) for p in ledger_parts(led)]
            head = Text(f"GPU idle ({dev}) {total:.1f} ms/step = ", style="bold")
            parts = [head + causes[0], *causes[1:]] if causes else [head]
            for ln in _pack(parts, w, sep=" · "):
                c.print(ln)
        for note in report.notes:
            c.print(Text("  ") + Text("note: ", style="yellow") + Text(note))
        shown = report.findings if self.top is None else report.findings[: self.top]
        if not report.findings:
            c.print(Text("\nNo findings.", style="green"))
        else:
            c.print(Text(f"\n{plural(len(report.findings), 'finding')}, {ORDER_NOTE}:", style="bold"))
        for i, f in enumerate(shown, 1):
            c.print(self._finding(i, f, w))
        if len(shown) < len(report.findings):
            rest = len(report.findings) - len(shown)
            c.print(Text(f"  … {plural(rest, 'more finding')} not shown (--top {self.top})", style="dim"))
        if report.also_true:
            c.print(Text("\nAlso true (not ranked):", style="dim"))
            for a in report.also_true:
                c.print(Padding(Text(f"{a.code} {a.name}: {a.why}", style="dim"), (0, 0, 0, 2)))
        if report.skipped:
            c.print(Text("\nSkipped rules:", style="dim"))
            for k in report.skipped:
                c.print(Padding(Text(f"{k.code} {k.name}: {dedupe_vendor(k.reason)}", style="dim"), (0, 0, 0, 2)))
        c.print()
        c.print(Text(summary_line(report, w), style="bold"))

    def _bar(self, s: dict[str, Any], width: int) -> Group:
        bar_w = max(10, min(50, width - 4))
        bar = Text("  ")
        entries: list[Text] = []
        cum, drawn = 0.0, 0
        colour = self._colour
        for key, label, style, glyph in BREAKDOWN:
            v = s.get(key) or 0.0
            cum += v
            n = int(round(cum * bar_w)) - drawn  # cumulative rounding: the bar is exactly `bar_w`
            drawn += n
            g = "█" if colour else glyph
            bar.append(g * n, style=style if colour else "")
            if v >= 0.0005:
                entries.append(Text.assemble(("■" if colour else glyph, style if colour else ""), f" {label} {v:.1%}"))
        bar.no_wrap = True
        return Group(Text("\n  step-time breakdown", style="bold"), bar, *_pack(entries, width))

    def _table(self, key: str, rows: list[dict[str, Any]], avail: int) -> Table:
        cols = list(rows[0])
        headers = [column_label(c) for c in cols]
        cells = [
            [
                (short_name(str(r.get(c)), 200) if c == "kernel" else str(r.get(c)))
                if c in NAME_COLUMNS
                else fmt_evidence(c, r.get(c))
                for c in cols
            ]
            for r in rows
        ]
        widths = [max(len(headers[j]), *(len(row[j]) for row in cells)) for j in range(len(cols))]
        seps = 3 * (len(cols) - 1)
        name_idx = [j for j, c in enumerate(cols) if c in NAME_COLUMNS]
        fixed = sum(widths[j] for j in range(len(cols)) if j not in name_idx)
        budget = avail - fixed - seps
        if name_idx:  # share what is left between the name columns; a short one gives the rest away
            need = sorted(name_idx, key=lambda j: widths[j])
            for k, j in enumerate(need):
                share = max(budget // (len(need) - k), len(headers[j]), 6)
                widths[j] = min(widths[j], share)
                budget -= widths[j]
            for row in cells:
                for j in name_idx:
                    row[j] = middle_ellipsis(row[j], widths[j])
        table = Table(title=key, title_justify="left", show_edge=False, pad_edge=False, expand=False)
        for j, h in enumerate(headers):
            table.add_column(h, no_wrap=True, overflow="ellipsis", max_width=widths[j])
        for row in cells:
            table.add_row(*(markup(x) for x in row))
        return table

    def _finding(self, i: int, f, width: int) -> Panel:
        saving = "n/a" if f.estimated_saving_ms is None else f"~{f.estimated_saving_ms:.1f} ms/step"
        title = Text.assemble(
            (f"#{i} ", "bold"),
            (f.severity, SEVERITY_STYLE[f.severity]),
            (f" {f.code} {f.name}", "bold"),
            f" · saving {saving}",
        )
        inner = width - 4  # border and padding
        parts: list[Any] = [Text(f.message)]
        if f.replayed_saving_ms is not None:
            parts.append(Text(replay_line(f), style="dim"))
        scalars = {k: v for k, v in f.evidence.items() if not isinstance(v, list)}
        if scalars:
            parts.append(
                Text("evidence: " + ", ".join(f"{k}={fmt_evidence(k, v)}" for k, v in scalars.items()), style="dim")
            )
        for k, rows in f.evidence.items():
            if isinstance(rows, list) and rows and isinstance(rows[0], dict):
                parts.append(self._table(k, rows, inner))
        parts.append(Text.assemble(("fix ", "bold"), (f"[{f.fix.safety}] ", SAFETY_STYLE[f.fix.safety]), f.fix.summary))
        return Panel(Group(*parts), title=title, title_align="left", border_style=SEVERITY_STYLE[f.severity])
