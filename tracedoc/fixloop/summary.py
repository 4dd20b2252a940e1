"""The fix-loop summary: plain data, written as JSON and Markdown, rendered as a rich table.

``summary.json`` (``schema_version`` 1)::

    {"schema_version": 1, "tool": {...}, "workload": str, "out_dir": str,
     "device": {"type", "name", "bf16_supported", "torch"},
     "options": {...}, "noise_rule": str,
     "baseline": {"config", "samples_per_s", "step_time_ms"},
     "final": {"config", "samples_per_s", "step_time_ms", "speedup", "trial", "changes": [str]},
     "trials": [{"index", "change", "status", "samples_per_s", "step_time_ms", "speedup",
                 "predicted_saving_ms", "measured_saving_ms", "decision", "error", ...}],
     "not_applicable": [{"knob", "reason"}], "skipped": [{"code", "name", "knob", "reason"}],
     "stop_reason": str, "interrupted": bool, "started_at", "wall_s"}

``trials[0]`` is the baseline. ``final`` is the incumbent (the last kept trial, or the
baseline); it is ``null`` only when the baseline itself failed.
"""

from __future__ import annotations

import json
import os
import time
from pathlib import Path
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:  # pragma: no cover
    from rich.table import Table

    from tracedoc.fixloop.loop import FixLoop

SCHEMA_VERSION = 1

NOISE_RULE = (
    "keep a change only if median(candidate samples/s) - median(incumbent samples/s) > "
    "max(k * max(range of either trial's repeats), min_gain * median(incumbent))"
)

COLUMNS = ("#", "change", "step ms", "samples/s", "speedup", "status", "predicted ms", "measured ms")


def _version() -> str:
    try:
        from importlib.metadata import version

        return version("tracedoc")
    except Exception:  # noqa: BLE001 - not installed (PYTHONPATH checkout)
        return "0+unknown"


def build_summary(loop: FixLoop) -> dict[str, Any]:
    """Collect the loop's state into the summary dict described in the module docstring."""
    records = loop.records
    baseline = records[0] if records else None
    inc = loop.incumbent
    final = None
    if inc is not None:
        kept = [r.change for r in records[1:] if r.status == "kept"]
        final = {
            "config": inc.config,
            "samples_per_s": inc.samples_per_s,
            "step_time_ms": inc.step_time_ms,
            "speedup": inc.speedup,
            "trial": inc.index,
            "changes": kept,
        }
    return {
        "schema_version": SCHEMA_VERSION,
        "tool": {"name": "tracedoc", "command": "fix-loop", "version": _version()},
        "workload": loop.workload,
        "out_dir": str(loop.out_dir),
        "device": loop.device,
        "options": {
            "max_trials": loop.options.max_trials,
            "unsafe_fixes": loop.options.unsafe_fixes,
            "device": loop.options.device,
            "sets": list(loop.options.sets),
            "min_gain": loop.options.min_gain,
            "noise_k": loop.options.noise_k,
            "n_cpus": loop.n_cpus,
        },
        "noise_rule": NOISE_RULE,
        "baseline": None
        if baseline is None
        else {
            "config": baseline.config,
            "samples_per_s": baseline.samples_per_s,
            "step_time_ms": baseline.step_time_ms,
            "status": baseline.status,
        },
        "final": final,
        "trials": [r.to_dict() for r in records],
        "not_applicable": loop.not_applicable,
        "skipped": loop.skipped,
        "stop_reason": loop.stop_reason or "running",
        "interrupted": loop.interrupted,
        "started_at": time.strftime("%Y-%m-%dT%H:%M:%S%z", time.localtime(loop.started)),
        "wall_s": round(time.time() - loop.started, 1),
    }


def _atomic_write(path: Path, text: str) -> None:
    tmp = path.with_name(path.name + ".tmp")
    tmp.write_text(text, encoding="utf-8")
    os.replace(tmp, path)


def write_summary(out_dir: Path, summary: dict[str, Any]) -> None:
    """Write ``summary.json``, ``summary.md`` and ``final_config.json`` (each replaced atomically)."""
    out_dir.mkdir(parents=True, exist_ok=True)
    _atomic_write(out_dir / "summary.json", json.dumps(summary, indent=2) + "\n")
    _atomic_write(out_dir / "summary.md", render_markdown(summary))
    if summary.get("final") is not None:
        _atomic_write(out_dir / "final_config.json", json.dumps(summary["final"]["config"], indent=2) + "\n")


def _num(value: float | None, digits: int = 1, signed: bool = False) -> str:
    if value is None:
        return "-"
    return f"{value:+.{digits}f}" if signed else f"{value:.{digits}f}"


def rows(summary: dict[str, Any]) -> list[list[str]]:
    """The table's rows as text, one per trial, in :data:`COLUMNS` order."""
    out = []
    for t in summary["trials"]:
        speed = "-" if t.get("speedup") is None else f"{t['speedup']:.2f}x"
        out.append(
            [
                str(t["index"]),
                t["change"],
                _num(t.get("step_time_ms")),
                _num(t.get("samples_per_s")),
                speed,
                t["status"],
                _num(t.get("predicted_saving_ms"), signed=False),
                _num(t.get("measured_saving_ms"), signed=True),
            ]
        )
    return out


def _final_line(summary: dict[str, Any]) -> str:
    final = summary.get("final")
    if final is None:
        return f"No result: {summary.get('stop_reason')}."
    changes = ", ".join(final["changes"]) or "none kept"
    return (
        f"Final: {_num(final['samples_per_s'])} samples/s, {final['speedup']:.2f}x the baseline "
        f"(trial {final['trial']}; changes: {changes}). Stopped: {summary.get('stop_reason')}."
    )


def render_markdown(summary: dict[str, Any]) -> str:
    """The summary as a Markdown document (table, final result, notes, the noise rule)."""
    dev = summary.get("device") or {}
    lines = [
        f"# tracedoc fix-loop: `{Path(summary['workload']).name}`",
        "",
        f"Device: {dev.get('name', '?')} ({dev.get('type', '?')}), torch {dev.get('torch', '?')}. "
        f"Savings are ms per step of the incumbent; predicted = the finding's estimated saving, "
        f"measured = incumbent step time - candidate step time (per sample when the batch size changes).",
        "",
        "| " + " | ".join(COLUMNS) + " |",
        "|" + "|".join("---:" if c not in ("change", "status") else "---" for c in COLUMNS) + "|",
    ]
    for row in rows(summary):
        lines.append("| " + " | ".join(cell.replace("|", "\\|") for cell in row) + " |")
    lines += ["", _final_line(summary), ""]
    errors = [t for t in summary["trials"] if t.get("error")]
    if errors:
        lines += (
            ["## Failed trials", ""] + [f"- trial {t['index']} ({t['status']}): {t['error']}" for t in errors] + [""]
        )
    if summary.get("not_applicable"):
        lines += ["## Not applicable on this device", ""]
        lines += [f"- `{n['knob']}`: {n['reason']}" for n in summary["not_applicable"]] + [""]
    if summary.get("skipped"):
        lines += ["## Fixes not tried", ""]
        lines += [f"- {s['code']} {s['name']} -> `{s['knob']}`: {s['reason']}" for s in summary["skipped"]] + [""]
    opts = summary["options"]
    lines += [
        "## Keep rule",
        "",
        f"{summary['noise_rule']}; here k = {opts['noise_k']}, min_gain = {opts['min_gain']:.0%}.",
        "",
    ]
    if summary.get("final") is not None:
        lines += ["## Final configuration", "", "```json", json.dumps(summary["final"]["config"], indent=2), "```", ""]
    return "\n".join(lines)


def render_table(summary: dict[str, Any], width: int | None = None) -> Table:
    """The summary as a rich :class:`~rich.table.Table` (trace text escaped).

    Fits ``width`` columns (default: the terminal's, 80 when not a terminal): light column
    rules, every column but "change" kept on one line (two-word headers stack), so numbers
    and statuses are never cut; a long change wraps at its spaces, and a word of it too
    long for the column is shortened in the middle (``samples_p…knob_name:``).
    """
    from rich import box
    from rich.console import Console
    from rich.markup import escape
    from rich.table import Table

    from tracedoc.report.render import middle_ellipsis

    style = {
        "kept": "green",
        "baseline": "bold",
        "reverted": "yellow",
        "crashed": "red",
        "oom": "red",
        "timeout": "red",
        "interrupted": "magenta",
    }
    table = Table(
        title=f"tracedoc fix-loop: {escape(Path(summary['workload']).name)}",
        caption=escape(_final_line(summary)),
        box=box.SIMPLE_HEAD,
        pad_edge=False,
        collapse_padding=True,
    )
    body = rows(summary)
    heads = [c.replace(" ms", "\nms") if c in ("step ms", "predicted ms", "measured ms") else c for c in COLUMNS]
    fixed = sum(
        max(max(len(h) for h in heads[j].split("\n")), *(len(r[j]) for r in body)) if body else len(heads[j])
        for j in range(len(COLUMNS))
        if COLUMNS[j] != "change"
    )
    change_w = max(14, (width or Console().width) - fixed - 2 * (len(COLUMNS) - 1) - 2)
    for col in COLUMNS:
        table.add_column(
            heads[COLUMNS.index(col)],
            justify="left" if col in ("change", "status") else "right",
            no_wrap=col != "change",
            min_width=14 if col == "change" else None,
            overflow="fold",
        )
    for row in body:
        status = row[5]
        row[1] = " ".join(middle_ellipsis(w, change_w) for w in row[1].split(" "))
        row = [escape(c) for c in row]
        row[5] = f"[{style.get(status, '')}]{row[5]}[/]" if style.get(status) else row[5]
        table.add_row(*row)
    return table


def render_notes(summary: dict[str, Any]) -> list[str]:
    """Plain-text notes printed under the table: failures, not-applicable knobs, fixes not tried."""
    notes = [f"trial {t['index']} {t['status']}: {t['error']}" for t in summary["trials"] if t.get("error")]
    notes += [f"{n['knob']}: {n['reason']}" for n in summary.get("not_applicable") or []]
    notes += [f"{s['code']} {s['name']} -> {s['knob']}: {s['reason']}" for s in summary.get("skipped") or []]
    return notes
