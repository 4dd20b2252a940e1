"""The op and kernel views (a report's ``op_view`` section) as text, within 80 columns, and
Markdown. The JSON form is the section itself (:mod:`tracedoc.report.model`).

Each row's throughput is shown in the unit of its bound: TFLOP/s for a compute-bound op, TB/s
for a memory-bound one (its roofline, :mod:`tracedoc.signals.opview`); ``%pk`` is that figure
against the device's peak for the op's dtype. Names and shapes come from the trace: they are
escaped for the terminal (rich markup) and for Markdown.
"""

from __future__ import annotations

from typing import Any

from tracedoc.render.escape import markdown as markdown_text
from tracedoc.render.escape import visible

#: Text width of the op and shape columns (characters) in the 80-column table.
OP_WIDTH, SHAPE_WIDTH = 17, 13
_BOUND = {"compute": "comp", "memory": "mem"}


def _table(title: str, columns: list[tuple[str, int, str]]) -> Any:
    """A rich Table of fixed-width columns (``(name, width, justify)``; text cut with an
    ellipsis), one space between columns: 80 columns hold it."""
    from rich import box
    from rich.table import Table

    t = Table(
        title=title,
        title_justify="left",
        box=box.SIMPLE_HEAD,
        show_edge=False,
        pad_edge=False,
        padding=(0, 1),
        collapse_padding=True,
    )
    for name, width, justify in columns:
        t.add_column(name, min_width=width, max_width=width, no_wrap=True, overflow="ellipsis", justify=justify)
    return t


def _op_name(name: str) -> str:
    return name[6:] if name.startswith("aten::") else name


def first_shape(dims: str | None) -> str:
    """The first tensor input's dims of a recorded ``Input Dims`` text as ``32x64x56x56``
    (``-`` when none was recorded); more tensor inputs add ``,…``."""
    import json

    try:  # the document holds the recorded text (compact JSON); a renderer parses, never loads
        parsed = json.loads(dims) if dims else None
    except ValueError:
        parsed = None
    if not isinstance(parsed, list) or not parsed:
        return "-"
    shapes = [d for d in parsed if isinstance(d, list) and d]
    if not shapes:
        return "-"
    return "x".join(str(x) for x in shapes[0]) + (",…" if len(shapes) > 1 else "")


def throughput(row: dict[str, Any]) -> tuple[str, str]:
    """``(figure, %pk)`` of a view row: TFLOP/s when compute-bound (or when only FLOPs are
    known), TB/s when memory-bound; ``-`` when unknown."""
    pct = row.get("pct_of_peak")
    pct_s = f"{pct:.0f}%" if isinstance(pct, (int, float)) else "-"
    if row.get("bound") == "memory" and isinstance(row.get("tbps"), (int, float)):
        return f"{row['tbps']:.2f} TB/s", pct_s
    if isinstance(row.get("tflops"), (int, float)) and row["tflops"] > 0:
        return f"{row['tflops']:.1f} TF/s", pct_s
    if isinstance(row.get("tbps"), (int, float)):
        return f"{row['tbps']:.2f} TB/s", pct_s
    return "-", pct_s


def peak_line(section: dict[str, Any]) -> str:
    """One line naming the matched device peak, or saying it is unknown."""
    peak = section.get("peak")
    if not peak:
        return "device peak unknown: throughput is shown, % of peak and bound are not"
    flops = [f"{label} {peak[key]:g}" for key, label in (("bf16_tc", "bf16"), ("tf32_tc", "tf32"), ("fp32", "fp32"))
             if peak.get(key)]  # fmt: skip
    line = f"peak: {peak.get('name')}"
    if flops:
        line += ": " + ", ".join(flops) + " TFLOP/s"
    if peak.get("mem_tbs"):
        line += f"; {peak['mem_tbs']:g} TB/s"
    return line


def render_text(section: dict[str, Any] | None, console: Any, top: int = 10) -> None:
    """Print the op and kernel views on ``console`` (a rich Console), each table within 80
    columns: op, first input shape, dtype, calls and ms per step, throughput, % of peak, bound
    (``comp``: compute, ``mem``: memory)."""
    if not section:
        console.print("no op view: the trace has no GPU kernel in its step windows")
        return
    console.print(visible(peak_line(section)), markup=False, highlight=False)
    ops = _table(
        "top ops by GPU time per step",
        [("op", OP_WIDTH, "left"), ("shape", SHAPE_WIDTH, "left"), ("dtype", 5, "left"), ("calls", 5, "right"),
         ("ms", 6, "right"), ("achieved", 10, "right"), ("%pk", 4, "right"), ("bound", 5, "left")],
    )  # fmt: skip
    for r in (section.get("ops") or [])[:top]:
        fig, pct = throughput(r)
        ops.add_row(
            visible(_op_name(r["op"])), visible(first_shape(r.get("input_dims"))), visible(r.get("dtype") or "-"),
            f"{r['calls_per_step']:g}", f"{r['gpu_ms_per_step']:.3f}", fig, pct, _BOUND.get(r.get("bound"), "-"),
        )  # fmt: skip
    console.print(ops)
    kt = _table(
        "top kernels by GPU time per step",
        [("kernel", 22, "left"), ("op", 14, "left"), ("n", 5, "right"), ("ms", 6, "right"), ("occ%", 4, "right"),
         ("achieved", 10, "right"), ("%pk", 4, "right")],
    )  # fmt: skip
    for r in (section.get("kernels") or [])[:top]:
        fig, pct = throughput(r)
        occ = r.get("occupancy_pct")
        kt.add_row(
            visible(r["kernel"]), visible(_op_name(r.get("op") or "-")), f"{r['count_per_step']:g}",
            f"{r['gpu_ms_per_step']:.3f}", f"{occ:.0f}" if isinstance(occ, (int, float)) else "-", fig, pct,
        )  # fmt: skip
    console.print(kt)


def render_markdown(section: dict[str, Any] | None, top: int = 10) -> str:
    """The op and kernel views as two GitHub-flavoured Markdown tables."""
    if not section:
        return "No op view: the trace has no GPU kernel in its step windows.\n"
    out = [
        markdown_text(peak_line(section)),
        "",
        "| op | shape | dtype | calls/step | ms/step | achieved | % peak | bound |",
    ]
    out.append("|---|---|---|--:|--:|--:|--:|---|")
    for r in (section.get("ops") or [])[:top]:
        fig, pct = throughput(r)
        cells = [_op_name(r["op"]), first_shape(r.get("input_dims")), r.get("dtype") or "-"]
        out.append(
            "| " + " | ".join(markdown_text(c) for c in cells)
            + f" | {r['calls_per_step']:g} | {r['gpu_ms_per_step']:.3f} | {fig} | {pct} | {r.get('bound') or '-'} |"
        )  # fmt: skip
    out += [
        "",
        "| kernel | op | count/step | ms/step | occupancy % | achieved | % peak |",
        "|---|---|--:|--:|--:|--:|--:|",
    ]
    for r in (section.get("kernels") or [])[:top]:
        fig, pct = throughput(r)
        occ = r.get("occupancy_pct")
        out.append(
            f"| {markdown_text(r['kernel'])} | {markdown_text(_op_name(r.get('op') or '-'))} | {r['count_per_step']:g}"
            f" | {r['gpu_ms_per_step']:.3f} | {f'{occ:.0f}' if isinstance(occ, (int, float)) else '-'} | {fig} | {pct} |"
        )
    return "\n".join(out) + "\n"
