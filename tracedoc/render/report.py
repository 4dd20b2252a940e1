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

Terminal layout rules (issues 11 and 22): nothing is wider than the console; a line only ever
breaks at a space, never inside an identifier, and a wrapped line keeps a hanging indent;
names too long for their column are shortened with a middle ellipsis
(``cudnn::det…engine<…>(…)``), paths and Python frames from the left with their file and line
number kept (``…/models/videomae.py(443)``, :func:`~tracedoc.text.left_ellipsis_path`); an
evidence table never squeezes a column to nothing (numbers keep their width, text columns share
the rest, and a table that cannot fit is shown as ``column: value`` records); numbers are
right-aligned with one precision per column and never in scientific notation; a legend entry
is never split; the skipped rules are one folded line unless ``--show-skipped``; a trace
without iterations says "per window", not "per step"; and the step-time bar draws each segment
with its own glyph when there is no colour (``NO_COLOR``, a pipe, CI), so it still reads.
"""

from __future__ import annotations

import contextlib
import math
import re
from collections.abc import Iterator
from contextvars import ContextVar
from typing import TYPE_CHECKING, Any

from rich.console import Console, Group
from rich.panel import Panel
from rich.table import Table
from rich.text import Text

from tracedoc.render.escape import code_span, markdown, markup, terminal
from tracedoc.text import left_ellipsis_path, middle_ellipsis, plural  # noqa: F401  (re-exported)

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

#: Display options of the terminal report that the command line sets (:func:`terminal_options`)
#: around its call of the render registry, whose ``text`` adapter passes ``console`` and ``top``
#: only: ``show_skipped`` (list every skipped rule, not one folded line) and ``config`` (the
#: ``(path, keys)`` of a ``[tool.tracedoc]`` table that changed the analysis, for the header).
TERMINAL_OPTIONS: ContextVar[dict[str, Any] | None] = ContextVar("tracedoc_terminal_options", default=None)


@contextlib.contextmanager
def terminal_options(show_skipped: bool = False, config: tuple[str, tuple[str, ...]] | None = None) -> Iterator[None]:
    """Within the block, a :class:`ConsoleRenderer` made without these options takes them."""
    token = TERMINAL_OPTIONS.set({"show_skipped": show_skipped, "config": config})
    try:
        yield
    finally:
        TERMINAL_OPTIONS.reset(token)


def windowed(report: Report) -> bool:
    """Whether no iteration was found in the trace (no ``ProfilerStep``, none inferred from
    repeated optimizer steps: ``step_count`` 0), so every "per step" figure is per profiled window."""
    return not report.trace.get("has_steps") and not report.signals.get("step_count")


def per_unit(report: Report) -> str:
    """``"step"``, or ``"window"`` for a trace without iterations (:func:`windowed`)."""
    return "window" if windowed(report) else "step"


def order_note(report: Report) -> str:
    """:data:`ORDER_NOTE` for ``report`` (per window where it has no steps)."""
    return ORDER_NOTE.replace("per step", f"per {per_unit(report)}")


_PER_STEP = re.compile(r"\b(?:per (?:complete )?step|ms/step|of the step)\b")


def per_window(text: str, report: Report) -> str:
    """``text`` (a rule's message, a note) with "per step", "ms/step" and "of the step" said per
    window where ``report`` has no iterations (:func:`windowed`); as it is otherwise."""
    if not windowed(report):
        return text

    def sub(m: re.Match) -> str:
        return {"ms/step": "ms/window", "of the step": "of the window"}.get(m.group(0), "per window")

    return _PER_STEP.sub(sub, text)


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
    """A value for reading; a float with four significant digits, never in scientific notation
    (``1.5e-05`` reads ``0.000015``; a magnitude under 5e-7 reads ``0``; a million and up with
    separators and no fraction)."""
    if isinstance(v, bool) or v is None:
        return str(v)
    if isinstance(v, float):
        if not math.isfinite(v):
            return str(v)
        if abs(v) >= 1e6:
            return f"{v:,.0f}"
        if abs(v) < 5e-7:
            return "0"
        decimals = min(max(3 - math.floor(math.log10(abs(v))), 0), 6)
        out = f"{v:.{decimals}f}"
        return out.rstrip("0").rstrip(".") if "." in out else out
    return str(v)


def ledger_parts(led: dict[str, float]) -> list[str]:
    """One device's idle-ledger causes as ``"cause ms"`` pieces, largest first (ms per step;
    causes under 0.05 ms are left out)."""
    return [f"{k.replace('_', ' ')} {v:.1f}" for k, v in sorted(led.items(), key=lambda kv: -kv[1]) if v >= 0.05]


def ledger_line(led: dict[str, float], unit: str = "step") -> str:
    """One device's idle ledger on one line: total, then each non-zero cause, largest first (ms
    per step; ``unit`` ``"window"`` for a trace without iterations)."""
    parts = ledger_parts(led)
    return f"{sum(led.values()):.1f} ms/{unit} = " + (" + ".join(parts) if parts else "0")


def fmt_evidence(name: str, v: Any) -> str:
    """An evidence value for reading: ``_share`` as a percentage, bytes with separators."""
    if isinstance(v, float) and name.endswith("_share"):
        return f"{v:.1%}"
    if isinstance(v, (int, float)) and not isinstance(v, bool) and "bytes" in name:
        return f"{v:,.0f} B"
    return _fmt(v)


_fmt_evidence = fmt_evidence  # the name earlier callers used


def column_label(col: str, unit: str = "step") -> str:
    """An evidence-table header for reading: ``ms_per_step`` -> ``ms/step`` (``ms/window`` with
    ``unit`` ``"window"``), ``per_step`` -> ``per step``."""
    label = col.replace("_per_", "/")
    if label == "per_step":
        label = "per step"
    return label.replace("step", unit) if unit != "step" else label


def replay_line(f: Any, unit: str = "step") -> str:
    """One line on a replayed finding's saving, e.g. ``saving replayed by the step model: 58.9 ms
    per step (range 50.0-58.9); its slice, the upper bound: 58.7 ms`` (no trace text in it)."""
    rng = ""
    if f.replayed_low_ms is not None and f.replayed_low_ms < f.replayed_saving_ms:
        rng = f" (range {f.replayed_low_ms:.1f}-{f.replayed_saving_ms:.1f})"
    sl = "" if f.slice_saving_ms is None else f"; its slice, the upper bound: {f.slice_saving_ms:.1f} ms"
    return f"saving replayed by the step model ({f.fix.replay}): {f.replayed_saving_ms:.1f} ms per {unit}{rng}{sl}"


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
    after it, their savings not in it); ``of a 987.4 ms window`` for a trace without iterations.

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
            unit = per_unit(report)
            if isinstance(step, (int, float)) and step > 0:
                full = f"{out}; ~{saved:.1f} ms of a {step:.1f} ms {unit} ({saved / step:.0%}) recoverable{tail}"
                brief = f"{out}; ~{saved:.1f} ms/{unit} ({saved / step:.0%}) recoverable"
                out = full if width is None or len(full) <= width else brief
            else:
                out += f"; ~{saved:.1f} ms per {unit} recoverable"
    return out


def _md_cell(v: Any) -> str:
    return str(v).replace("|", "\\|").replace("\n", " ")


def md_table(rows: list[dict[str, Any]], name_limit: int | None = None, unit: str = "step") -> list[str]:
    """A list of dict rows as GitHub-flavoured Markdown table lines (pipes escaped): names in
    code spans, other text through :func:`~tracedoc.render.escape.markdown`, numbers formatted."""
    cols = list(rows[0])
    out = ["| " + " | ".join(markdown(column_label(c, unit)) for c in cols) + " |", "|" + "---|" * len(cols)]
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
        lines += ["", "## Step-time breakdown", "", f"| category | share of {per_unit(report)} |", "|---|---|"]
        for key, label, _, _ in BREAKDOWN:
            v = s.get(key)
            lines.append(f"| {label} | {'n/a' if v is None else f'{v:.1%}'} |")
        unit = per_unit(report)
        for dev, led in report.idle_ledger.items():
            lines += ["", f"GPU idle on {code_span(dev)}: {ledger_line(led, unit)}"]
        for note in report.notes:
            lines += ["", f"> **Note:** {markdown(per_window(note, report))}"]
        if report.steps:
            lines += ["", "Per step (ms):", ""] + md_table(report.steps)
        lines += ["", "## Findings", "", f"Findings are {order_note(report)}.", ""]
        if not report.findings:
            lines.append("No findings.")
        for i, f in enumerate(report.findings, 1):
            saving = "n/a" if f.estimated_saving_ms is None else f"{f.estimated_saving_ms:.1f} ms/{unit}"
            head = f"### {i}. {markdown(f.code)} {code_span(f.name)} ({f.severity}, est. saving {saving})"
            lines += [head, "", per_window(f.message, report), ""]
            if f.replayed_saving_ms is not None:
                lines += [replay_line(f, unit), ""]
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
                    lines += [f"{code_span(k)}:", ""] + md_table(rows, name_limit=100, unit=unit) + [""]
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


def _pack(items: list[Text], width: int, indent: int = 2, sep: str = "  ", hang: int | None = None) -> list[Text]:
    """Lay out unbreakable pieces on lines of at most ``width`` cells: a piece moves whole to
    the next line rather than being split (a legend entry keeps its label and number); lines
    after the first start at ``hang`` (default ``indent``), a hanging indent."""
    hang = indent if hang is None else hang
    lines: list[Text] = []
    cur = Text(" " * indent)
    start = used = indent
    for it in items:
        w = it.cell_len
        if used > start and used + len(sep) + w > width:
            lines.append(cur)
            cur, start = Text(" " * hang), hang
            used = start
        if used > start:
            cur.append(sep)
            used += len(sep)
        cur.append_text(it)
        used += w
    lines.append(cur)
    for ln in lines:
        ln.no_wrap = True
        ln.overflow = "ellipsis"
    return lines


def code_ranges(codes: list[str]) -> str:
    """Rule codes with runs of consecutive numbers joined: ``TD101, TD102, TD103, TD210`` ->
    ``TD101-103, TD210`` (a run stays within one prefix)."""
    out: list[str] = []
    run: list[tuple[str, int, str]] = []

    def flush() -> None:
        if run:
            first, last = run[0][2], run[-1][2]
            out.append(first if len(run) == 1 else f"{first}-{last[len(run[-1][0]) :]}")
            run.clear()

    for code in codes:
        m = re.fullmatch(r"(\D*)(\d+)", code)
        if m is None:
            flush()
            out.append(code)
            continue
        prefix, num = m.group(1), int(m.group(2))
        if run and (prefix != run[-1][0] or num != run[-1][1] + 1 or len(m.group(2)) != len(str(run[-1][1]))):
            flush()
        run.append((prefix, num, code))
    flush()
    return ", ".join(out)


def skipped_line(report: Report) -> str:
    """The skipped rules folded into one line: ``17 rules not applicable here: TD101-105, TD210;
    --show-skipped to list them`` (the codes are the report's, sorted)."""
    codes = sorted({k.code for k in report.skipped})
    n = len(report.skipped)
    verb = "rule not applicable here" if n == 1 else "rules not applicable here"
    return f"{n} {verb}: {code_ranges(codes)}; --show-skipped to list them"


def _column_format(col: str, values: list[Any]) -> tuple[bool, Any]:
    """``(numeric, format)`` for an evidence-table column: a numeric column (every value a
    number or None) gets one precision for all its cells (shares as percentages, bytes with
    separators, whole numbers without a fraction, other numbers with 1-3 decimals chosen from the
    column's range), never scientific notation."""
    nums = [v for v in values if v is not None]
    if not nums or not all(isinstance(v, (int, float)) and not isinstance(v, bool) for v in nums):
        return False, None
    if not all(math.isfinite(v) for v in nums):
        return True, _fmt
    if col == "share" or col.endswith("_share"):
        return True, lambda v: f"{v:.1%}"
    if "bytes" in col:
        return True, lambda v: f"{v:,.0f} B"
    if all(float(v).is_integer() for v in nums):
        return True, lambda v: f"{int(v):,}"
    big = max(abs(v) for v in nums)
    small = min((abs(v) for v in nums if v), default=1.0)
    decimals = 3 if small < 0.01 else (1 if big >= 100 and small >= 1 else 2)
    return True, lambda v: f"{v:,.{decimals}f}"


def _shorten(col: str, text: str, width: int) -> str:
    """A trace name cut to ``width``: a path or Python frame from the left (its file name and
    line number kept, :func:`~tracedoc.text.left_ellipsis_path`), anything else in the middle."""
    if col not in NAME_COLUMNS:
        return left_ellipsis_path(text, width)
    return middle_ellipsis(text, width)


def _widths(natural: list[int], mins: list[int], text_cols: list[int], avail: int) -> list[int] | None:
    """Column widths within ``avail`` cells (separators counted): the numbers' whole; each text
    column its minimum, and what is left shared between them in proportion to what each still
    lacks (a long path gets more than a short name); None when even the minimums do not fit."""
    widths = list(natural)
    seps = 3 * (len(natural) - 1)
    if sum(natural) + seps <= avail:
        return widths
    budget = avail - seps - sum(w for j, w in enumerate(natural) if j not in text_cols)
    if budget < sum(mins[j] for j in text_cols):
        return None
    for j in text_cols:
        widths[j] = mins[j]
    extra = budget - sum(mins[j] for j in text_cols)
    lack = {j: natural[j] - mins[j] for j in text_cols}
    total = sum(lack.values())
    for j in text_cols:
        widths[j] += extra * lack[j] // total if total else 0
    left = budget - sum(widths[j] for j in text_cols)
    for j in sorted(text_cols, key=lambda j: -lack[j]):  # the rounding remainder, longest first
        give = min(left, natural[j] - widths[j])
        widths[j] += give
        left -= give
    return widths


class ConsoleRenderer:
    """The human report: header, step-time breakdown bar, ranked findings, skipped rules (one
    folded line unless ``show_skipped``), and a closing summary line (:func:`summary_line`).

    Args:
        console: where to print; its ``width`` sets the layout (80 and up are clean; see
            the module docstring) and its colour system decides between coloured and
            glyph-per-segment bars.
        top: show only the first ``top`` findings (None: all); the summary line still
            counts all of them.
        quiet: print the summary line only.
        show_skipped: list every skipped rule with its reason (None: as :func:`terminal_options`
            says, else False: one line of their codes).
        config: ``(path, keys)`` of the ``[tool.tracedoc]`` table that changed the analysis,
            named in the header (None: as :func:`terminal_options` says).
    """

    def __init__(
        self,
        console: Console,
        top: int | None = None,
        quiet: bool = False,
        show_skipped: bool | None = None,
        config: tuple[str, tuple[str, ...]] | None = None,
    ) -> None:
        opts = TERMINAL_OPTIONS.get() or {}
        self.console = console
        self.top = top
        self.quiet = quiet
        self.show_skipped = bool(opts.get("show_skipped")) if show_skipped is None else show_skipped
        self.config = opts.get("config") if config is None else config
        self.unit = "step"

    @property
    def _colour(self) -> bool:
        return self.console.color_system is not None and not self.console.no_color

    def _hang(self, text: Text, indent: int = 2, hang: int = 4) -> None:
        """Print ``text`` wrapped at spaces within the console, its first line at ``indent`` and
        the others at ``hang`` (a hanging indent)."""
        w = self.console.width
        lines = list(text.wrap(self.console, max(w - indent, 10)))
        if len(lines) > 1:  # the rest again, narrower
            start = len(lines[0].plain)
            start += len(text.plain[start:]) - len(text.plain[start:].lstrip())
            lines = [lines[0], *text[start:].wrap(self.console, max(w - hang, 10))]
        for i, ln in enumerate(lines):
            ln.rstrip()
            line = Text(" " * (indent if i == 0 else hang)) + ln
            line.no_wrap, line.overflow = True, "ellipsis"
            self.console.print(line)

    def render(self, report: Report) -> None:
        """Print the report to the console."""
        c = self.console
        if self.quiet:
            c.print(Text(summary_line(report, c.width)))
            return
        self.unit = per_unit(report)
        self._header(report)
        self._findings(report)
        self._tail(report)
        c.print()
        c.print(Text(summary_line(report, c.width), style="bold"))

    def _header(self, report: Report) -> None:
        c, w = self.console, self.console.width
        t, s = report.trace, report.signals
        c.print(Text.assemble(("tracedoc ", "bold"), left_ellipsis_path(str(t["path"]), max(w - 9, 10))))
        head = [Text(f"device: {device_label(t['device'])}"), Text(f"events: {t['n_events']:,}")]
        if t["rank"] is not None:
            head.append(Text(f"rank: {t['rank']}"))
        for ln in _pack(head, w, sep="   ", hang=4):
            c.print(ln)
        if self.config:
            path, keys = self.config
            sets = f" [tool.tracedoc] sets {', '.join(keys)}"
            shown = left_ellipsis_path(terminal(path), max(w - len("  config: ") - len(sets), 24))
            self._hang(Text(f"config: {shown}{sets}"))
        if t["has_steps"]:
            time_txt = (
                Text.assemble("step time ", (f"{s['step_time_ms']:.2f} ms", "bold"))
                if s.get("step_time_ms") is not None
                else Text("no step time")
            )
            self._hang(Text(f"{s.get('step_count')} of {plural(t['n_steps'], 'ProfilerStep')} averaged, ") + time_txt)
        elif windowed(report):
            self._hang(Text(f"no ProfilerStep annotations: the whole trace ({t['span_ms']:.1f} ms) is one window"))
        else:
            step = s.get("step_time_ms")
            self._hang(
                Text(
                    f"no ProfilerStep annotations: {plural(s.get('step_count') or 0, 'iteration')} inferred (see note)"
                )
                + (Text.assemble(", step time ", (f"{step:.2f} ms", "bold")) if step is not None else Text())
            )
        c.print(self._bar(s, w))
        for dev, led in report.idle_ledger.items():
            causes = [Text(p) for p in ledger_parts(led)]
            head_t = Text(f"GPU idle ({dev}) {sum(led.values()):.1f} ms/{self.unit} = ", style="bold")
            for ln in _pack([head_t + causes[0], *causes[1:]] if causes else [head_t], w, sep=" · ", hang=4):
                c.print(ln)
        for note in report.notes:
            self._hang(Text.assemble(("note: ", "yellow"), per_window(note, report)))

    def _findings(self, report: Report) -> None:
        c = self.console
        shown = report.findings if self.top is None else report.findings[: self.top]
        if not report.findings:
            c.print(Text("\nNo findings.", style="green"))
        else:
            c.print()
            self._hang(Text(f"{plural(len(report.findings), 'finding')}, {order_note(report)}:", style="bold"), 0, 2)
        for i, f in enumerate(shown, 1):
            c.print(self._finding(i, f, c.width, report))
        if len(shown) < len(report.findings):
            rest = len(report.findings) - len(shown)
            c.print(Text(f"  … {plural(rest, 'more finding')} not shown (--top {self.top})", style="dim"))

    def _tail(self, report: Report) -> None:
        c = self.console
        if report.also_true:
            c.print(Text("\nAlso true (not ranked):", style="dim"))
            for a in report.also_true:
                self._hang(Text(f"{a.code} {a.name}: {per_window(a.why, report)}", style="dim"))
        if report.skipped and self.show_skipped:
            c.print(Text("\nSkipped rules:", style="dim"))
            for k in report.skipped:
                self._hang(Text(f"{k.code} {k.name}: {dedupe_vendor(k.reason)}", style="dim"))
        elif report.skipped:
            c.print()
            self._hang(Text(skipped_line(report), style="dim"), 0, 2)

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
        title = "step-time breakdown" if self.unit == "step" else "time breakdown of the window"
        return Group(Text(f"\n  {title}", style="bold"), bar, *_pack(entries, width))

    def _table(self, key: str, rows: list[dict[str, Any]], avail: int) -> Table | Group:
        """An evidence table within ``avail`` cells: numbers right-aligned with one precision per
        column, names and paths shortened to share what is left; where even that cannot fit,
        each row as ``column: value`` lines."""
        cols = list(rows[0])
        headers = [column_label(c, self.unit) for c in cols]
        kinds = [_column_format(c, [r.get(c) for r in rows]) for c in cols]
        cells = [
            [
                ("" if r.get(c) is None else fmt(r.get(c)))
                if numeric
                else ("" if r.get(c) is None else short_name(str(r[c]), 200) if c == "kernel" else str(r[c]))
                for c, (numeric, fmt) in zip(cols, kinds, strict=True)
            ]
            for r in rows
        ]
        natural = [max(len(headers[j]), *(len(row[j]) for row in cells)) for j in range(len(cols))]
        text_cols = [j for j, (numeric, _) in enumerate(kinds) if not numeric]
        widths = None
        for least in (12, 6):  # a roomy minimum for names, else a tight one, else records
            mins = [min(natural[j], max(len(headers[j]), least)) for j in range(len(cols))]
            widths = widths or _widths(natural, mins, text_cols, avail)
        if widths is None:
            return self._records(key, headers, cells, avail)
        for row in cells:
            for j in text_cols:
                row[j] = _shorten(cols[j], row[j], widths[j])
        table = Table(title=key, title_justify="left", show_edge=False, pad_edge=False, expand=False)
        for j, h in enumerate(headers):
            justify = "right" if kinds[j][0] else "left"
            table.add_column(h, no_wrap=True, overflow="ellipsis", width=widths[j], justify=justify)
        for row in cells:
            table.add_row(*(markup(x) for x in row))
        return table

    @staticmethod
    def _records(key: str, headers: list[str], cells: list[list[str]], avail: int) -> Group:
        """A table too wide for ``avail`` cells as records: a ``column: value`` line per cell."""
        parts: list[Any] = [Text(key, style="italic")]
        for i, row in enumerate(cells):
            for j, (h, v) in enumerate(zip(headers, row, strict=True)):
                lead = f"{i + 1}. " if j == 0 else "   "
                line = Text(lead + f"{h}: ") + Text(left_ellipsis_path(v, max(avail - len(lead) - len(h) - 2, 8)))
                line.no_wrap, line.overflow = True, "ellipsis"
                parts.append(line)
        return Group(*parts)

    def _finding(self, i: int, f, width: int, report: Report | None = None) -> Panel:
        unit = self.unit
        saving = "n/a" if f.estimated_saving_ms is None else f"~{f.estimated_saving_ms:.1f} ms/{unit}"
        title = Text.assemble(
            (f"#{i} ", "bold"),
            (f.severity, SEVERITY_STYLE[f.severity]),
            (f" {f.code} {f.name}", "bold"),
            f" · saving {saving}",
        )
        inner = width - 4  # border and padding
        parts: list[Any] = [Text(per_window(f.message, report) if report is not None else f.message)]
        if f.replayed_saving_ms is not None:
            parts.append(Text(replay_line(f, unit), style="dim"))
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
