"""``tracedoc diff A B``: what changed between two analyses, and whether a prediction held."""

from __future__ import annotations

import sys
from pathlib import Path
from typing import Optional

import typer
from rich.console import Console

from tracedoc.cli.common import Format, app, funnel, list_format

FORMAT = typer.Option(Format.text, "--format", "-f", help="Output format: text, json or markdown.")
FAIL_ON_REGRESSION = typer.Option(
    None, "--fail-on-regression", metavar="PCT", min=0.0, help="Exit 1 when the step time grew by more than PCT %."
)


@app.command("diff")
def diff_command(
    before: Path = typer.Argument(..., help="Before: a trace, a saved JSON report, or a fix-loop trial directory."),
    after: Path = typer.Argument(..., help="After: a trace, a saved JSON report, or a fix-loop trial directory."),
    format: Format = FORMAT,
    fail_on_regression: Optional[float] = FAIL_ON_REGRESSION,
) -> None:
    """Compare two analyses: step time, breakdown, findings, predicted vs measured savings."""
    list_format(format, "diff")
    with funnel(f"{before} / {after}", "compare", "comparing"):
        from tracedoc.diff import diff

        result = diff(before, after)
    from tracedoc.render import render

    if format is Format.text:
        render(result, "text", console=Console(highlight=False))
    else:
        sys.stdout.write(render(result, format.value))
    raise typer.Exit(1 if fail_on_regression is not None and result.regressed(fail_on_regression) else 0)
