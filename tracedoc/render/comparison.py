"""The comparison of ``tracedoc diff`` (:class:`tracedoc.report.comparison.DiffResult`) in the
terminal (rich) and in Markdown; JSON is its ``to_dict``. :mod:`tracedoc.render` chooses.

The renderers read the document's attributes (its sides, findings by status and outlier steps
are plain JSON data in the document itself, so those are read by key). Paths, devices, rule
names and cause names come from the inputs: rich markup is escaped before rich renders them,
and the Markdown puts them in code spans or through :func:`tracedoc.render.escape.markdown`.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from rich.console import Console
from rich.markup import escape
from rich.table import Table

from tracedoc.render.escape import code_span, markdown
from tracedoc.report.comparison import OFFSET_MIN_MS
from tracedoc.text import plural

if TYPE_CHECKING:
    from tracedoc.report.comparison import DiffResult, Row


def _ms(v: float | None, signed: bool = False) -> str:
    if v is None:
        return "n/a"
    return f"{v:+.1f}" if signed else f"{v:.1f}"


def _ratio(v: float | None) -> str:
    return "n/a" if v is None else f"{v:.2f}"


def _pct(v: float | None) -> str:
    return "n/a" if v is None else f"{v:+.1f}%"


def _se(v: float | None) -> str:
    return "" if v is None else f" ± {v:.1f}"


def predicted_cell(r: dict[str, Any]) -> str:
    """The predicted saving of a resolved row: the replayed saving (with its range's low end
    where it has one) and the slice beside it, e.g. ``58.9 (50.0-58.9; slice 58.7)``; just the
    saving when the finding was not replayed."""
    pred, low, sl = r.get("predicted_saving_ms"), r.get("predicted_low_ms"), r.get("predicted_slice_ms")
    if pred is None or sl is None:
        return _ms(pred)
    span = f"{_ms(low)}-{_ms(pred)}; " if low is not None and low < pred else ""
    return f"{_ms(pred)} ({span}slice {_ms(sl)})"


def offset_sentence(r: dict[str, Any]) -> str | None:
    """Plain text: how a resolved finding's own slice moved and what else grew, or None when
    there is nothing to say (no slice measured); the parts that grew are named when the rest of
    the step gained :data:`tracedoc.report.comparison.OFFSET_MIN_MS` or more."""
    fell, offset = r.get("measured_slice_saving_ms"), r.get("offset_ms")
    if fell is None or r.get("measured_saving_ms") is None:
        return None
    text = f"{r['code']} {r['name']}: its slice ({r['slice']}) fell {_ms(fell)} ms of the {_ms(r['predicted_saving_ms'])} predicted"
    if offset is None or offset < OFFSET_MIN_MS:
        return text + f"; the step fell {_ms(r['measured_saving_ms'])} ms"
    grew = ", ".join(f"{p['name']} {_ms(p['change_ms'], True)}" for p in r.get("offset_by") or [])
    return (
        text + f"; the step fell {_ms(r['measured_saving_ms'])} ms, because the rest of the step grew "
        f"{_ms(offset)} ms" + (f" ({grew})" if grew else "")
    )


def _e(v: Any) -> str:
    """Text from an input (codes, names, severities), escaped for rich markup."""
    return escape(str(v))


def _side(d: dict[str, Any]) -> str:
    dev = f", {d['device']}" if d.get("device") else ""
    n = d.get("step_count")
    return f"{d['path']} ({d['kind']}{dev}, {plural(n, 'step') if isinstance(n, int) else 'steps unknown'})"


def _md_row(r: Row) -> str:
    """One category (or cause) before and after as a Markdown table row."""
    return f"| {markdown(r.name)} | {_ms(r.before)} | {_ms(r.after)} | {_ms(r.change, True)} |"


def _md_finding(r: dict[str, Any], cell: bool = False) -> str:
    """A finding of a comparison in Markdown: its code and, in a code span, its name (``|``
    escaped in a table ``cell``: GFM splits cells on it even inside a code span)."""
    name = code_span(r["name"])
    return f"{markdown(r['code'])} {name.replace('|', chr(92) + '|') if cell else name}"


class MarkdownDiffRenderer:
    """A Markdown summary: step time, breakdown and idle-ledger tables, findings, and
    predicted vs measured savings (for a pull request or a CI job summary)."""

    def render(self, result: DiffResult) -> str:
        """The Markdown text, ending with a newline; times in ms per step."""
        d, st = result, result.step_time
        lines = [
            "# tracedoc diff",
            "",
            f"- before: {code_span(_side(d.before))}",
            f"- after: {code_span(_side(d.after))}",
            f"- step time: {_ms(st.before)} ms -> {_ms(st.after)} ms "
            f"({_ms(st.change_ms, True)}{_se(st.change_se)} ms, {_pct(st.change_pct)}); median step "
            f"{_ms(st.median_before)} -> {_ms(st.median_after)} ms",
            "",
            "## Step-time breakdown (ms per step)",
            "",
            "| category | before | after | change |",
            "|---|---|---|---|",
        ]
        lines += [_md_row(r) for r in d.breakdown]
        for dev, rows in d.idle_ledger.items():
            lines += [
                "",
                f"## GPU idle ledger, {markdown(dev)} (ms per step)",
                "",
                "| cause | before | after | change |",
            ]
            lines.append("|---|---|---|---|")
            lines += [_md_row(r) for r in rows]
        lines += ["", "## Resolved findings: predicted vs measured saving (ms per step)", ""]
        if d.resolved:
            lines += [
                "| finding | predicted | its slice fell | ratio | measured (mean step) | ratio "
                "| measured (median step) | ratio |",
                "|---|---|---|---|---|---|---|---|",
            ]
            for r in d.resolved:
                lines.append(
                    f"| {_md_finding(r, cell=True)} | {predicted_cell(r)} "
                    f"| {_ms(r.get('measured_slice_saving_ms'))} | {_ratio(r.get('ratio_slice'))} "
                    f"| {_ms(r['measured_saving_ms'])} | {_ratio(r['ratio'])} "
                    f"| {_ms(r['measured_saving_median_ms'])} | {_ratio(r['ratio_median'])} |"
                )
            lines += [""] + [f"- {markdown(t, line_start=True)}" for t in map(offset_sentence, d.resolved) if t]
        else:
            lines.append("None.")
        lines += ["", "## New findings", ""]
        lines += [
            f"- {_md_finding(r)} ({markdown(r['severity'])}, est. saving {_ms(r['estimated_saving_ms'])} ms)"
            for r in d.new
        ] or ["None."]
        lines += ["", "## Changed findings", ""]
        lines += [
            f"- {_md_finding(r)}: {markdown(r['severity_before'])} -> {markdown(r['severity_after'])}, est. saving "
            f"{_ms(r['saving_before_ms'])} -> {_ms(r['saving_after_ms'])} ms"
            for r in d.changed
        ] or ["None."]
        if d.persisting:
            lines += ["", "Unchanged: " + ", ".join(_md_finding(r) for r in d.persisting)]
        for side in ("before", "after"):
            for o in d.outlier_steps.get(side, []):
                lines.append(
                    f"\nOutlier step {markdown(o['step'])} ({side}): {_ms(o['step_time_ms'])} ms, "
                    f"{_ms(o['excess_ms'], True)} ms over the median step, mostly {markdown(o['top_category'])} "
                    f"({_ms(o['top_category_excess_ms'], True)} ms)."
                )
        return "\n".join(lines) + "\n"


def shows_zero(v: float | None) -> bool:
    """Whether a figure reads 0.0 in the tables (ms with one decimal): under 0.05 in size.
    None (unknown) is not zero."""
    return v is not None and abs(v) < 0.05


def zero_rows(rows: list[Row]) -> list[Row]:
    """The rows that are zero on both sides (:func:`shows_zero` before and after): the terminal
    tables leave them out and name them on one line under the table."""
    return [r for r in rows if shows_zero(r.before) and shows_zero(r.after)]


class TextDiffRenderer:
    """The terminal view: step time, breakdown and idle-ledger tables (rows zero on both sides
    left out, named under the table), findings by status, predicted vs measured savings with
    ratios, outlier steps."""

    def __init__(self, console: Console) -> None:
        self.console = console

    def _print_change_table(self, title: str, first: str, rows: list[Row]) -> None:
        """The table of the rows not zero on both sides, then one dim line naming the others."""
        hidden = zero_rows(rows)
        self.console.print(self._change_table(title, first, [r for r in rows if r not in hidden]))
        if hidden:
            names = ", ".join(str(r.name) for r in hidden)
            self.console.print(f"  [dim]not shown, 0.0 on both sides: {escape(names)}[/]")

    @staticmethod
    def _change_table(title: str, first: str, rows: list[Row]) -> Table:
        t = Table(title=title, title_justify="left", show_edge=False)
        t.add_column(first)
        for col in ("before", "after", "change"):
            t.add_column(col, justify="right")
        for r in rows:
            c = r.change
            style = "" if c is None or abs(c) < 0.05 else ("red" if c > 0 else "green")
            t.add_row(
                escape(str(r.name)),
                _ms(r.before),
                _ms(r.after),
                f"[{style}]{_ms(c, True)}[/]" if style else _ms(c, True),
            )
        return t

    def render(self, result: DiffResult) -> None:
        """Print the comparison on the console; times in ms per step."""
        c = self.console
        d, st = result, result.step_time
        c.print("[bold]tracedoc diff[/]")
        c.print(f"  before: {escape(_side(d.before))}")
        c.print(f"  after:  {escape(_side(d.after))}")
        change = st.change_ms
        style = "red" if change is not None and change > 0 else "green"
        c.print(
            f"  step time [bold]{_ms(st.before)} ms -> {_ms(st.after)} ms[/] "
            f"[{style}]({_ms(change, True)}{_se(st.change_se)} ms, {_pct(st.change_pct)})[/]   median step "
            f"{_ms(st.median_before)} -> {_ms(st.median_after)} ms ({_ms(st.median_change_ms, True)} ms)"
        )
        c.print()
        self._print_change_table("step-time breakdown (ms per step)", "category", d.breakdown)
        for dev, rows in d.idle_ledger.items():
            c.print()
            self._print_change_table(f"GPU idle ledger, {escape(dev)} (ms per step)", "cause", rows)
        c.print()
        if d.resolved:
            t = Table(
                title="resolved: predicted vs measured saving (ms per step)", title_justify="left", show_edge=False
            )
            for col in ("finding", "predicted", "slice fell", "step fell", "median step"):
                t.add_column(col, justify="left" if col == "finding" else "right")

            def cell(v: float | None, ratio: float | None, se: float | None = None) -> str:
                spread = "" if se is None or v is None else f"±{se:.1f}"
                return f"{_ms(v)}{spread} ({_ratio(ratio)})" if v is not None else "n/a"

            for r in d.resolved:
                t.add_row(
                    f"{_e(r['code'])} {_e(r['name'])}",
                    predicted_cell(r),
                    cell(r.get("measured_slice_saving_ms"), r.get("ratio_slice")),
                    cell(r["measured_saving_ms"], r["ratio"], r.get("measured_saving_se_ms")),
                    cell(r["measured_saving_median_ms"], r["ratio_median"]),
                )
            c.print(t)
            c.print(
                "  [dim]predicted = the step model's replayed saving (its range; the slice, the upper bound); "
                "slice fell = the finding's own slice of the step (its first claim), before - after; "
                "step fell = step time before - after (mean of complete steps ± its standard error; median "
                "step beside it); (ratio) = predicted / measured[/]"
            )
            for text in map(offset_sentence, d.resolved):
                if text:
                    c.print(f"  {escape(text)}")
        else:
            c.print("[dim]No finding resolved.[/]")
        for r in d.new:
            c.print(
                f"[yellow]new[/]      {_e(r['code'])} {_e(r['name'])} ({_e(r['severity'])}), "
                f"est. saving {_ms(r['estimated_saving_ms'])} ms"
            )
        for r in d.changed:
            c.print(
                f"[cyan]changed[/]  {_e(r['code'])} {_e(r['name'])}: {_e(r['severity_before'])} -> {_e(r['severity_after'])}, "
                f"est. saving {_ms(r['saving_before_ms'])} -> {_ms(r['saving_after_ms'])} ms"
            )
        for r in d.persisting:
            c.print(f"[dim]same     {_e(r['code'])} {_e(r['name'])}, est. saving {_ms(r['saving_after_ms'])} ms[/]")
        for side in ("before", "after"):
            for o in d.outlier_steps.get(side, []):
                c.print(
                    f"[dim]outlier step {_e(o['step'])} ({side}): {_ms(o['step_time_ms'])} ms, "
                    f"{_ms(o['excess_ms'], True)} ms over the median step, mostly {escape(str(o['top_category']))} "
                    f"({_ms(o['top_category_excess_ms'], True)} ms)[/]"
                )
