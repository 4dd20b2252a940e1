"""``tracedoc ops TRACE``: the op and kernel views (achieved TFLOP/s or TB/s against the
device's peak, :mod:`tracedoc.signals.opview`)."""

from __future__ import annotations

import sys
from pathlib import Path

import typer

from tracedoc.cli.common import Color, Format, app, funnel, list_format, make_console

FORMAT = typer.Option(Format.text, "--format", "-f", help="Output format: text, json or markdown.")


@app.command("ops")
def ops_command(
    trace: Path = typer.Argument(..., help="A trace file (.json or .json.gz), recorded with record_shapes=True."),
    format: Format = FORMAT,
    top: int = typer.Option(10, "--top", min=1, max=1000, help="Rows of each view."),
) -> None:
    """Show the top ops and kernels by GPU time per step: achieved TFLOP/s or TB/s, % of the
    device's peak, compute/memory bound (FLOPs need recorded shapes)."""
    list_format(format, "ops")
    from tracedoc import pipeline
    from tracedoc.render.opview import render_markdown, render_text
    from tracedoc.settings import Settings

    with funnel(str(trace), "analyze", "analyzing"):
        report = pipeline.analyze(str(trace), Settings.resolve(str(trace)))
    section = report.op_view
    if format is Format.json:
        import orjson

        from tracedoc.render.escape import json_safe

        body = {"trace": report.trace.get("path"), **(section or {"peak": None, "ops": [], "kernels": []})}
        if section is not None:
            body = {**body, "ops": section["ops"][:top], "kernels": section["kernels"][:top]}
        sys.stdout.write(orjson.dumps(json_safe(body), option=orjson.OPT_INDENT_2).decode() + "\n")
    elif format is Format.markdown:
        sys.stdout.write(render_markdown(section, top=top))
    else:
        render_text(section, make_console(Color.auto), top=top)
