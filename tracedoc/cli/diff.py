"""``tracedoc diff A B``: what changed between two analyses, and whether a prediction held."""

from __future__ import annotations

import sys
from pathlib import Path
from typing import Any, Optional

import typer
from rich.console import Console
from rich.markup import escape

from tracedoc.cli.common import Format, app, err_console, funnel, list_format

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
    raise typer.Exit(_regression_exit(result, fail_on_regression))


def _regression_exit(result: Any, pct: Optional[float]) -> int:
    """The exit code of ``--fail-on-regression PCT``: 1, after one stderr line saying why
    (:func:`tracedoc.diff.regression_reason`: ``step time +25.9% > 5% (...)``), when the step time
    grew by more than PCT %; else 0 (with a warning line when the step time of a side is unknown,
    so the gate could not be checked)."""
    if pct is None:
        return 0
    from tracedoc.diff import regression_reason

    reason = regression_reason(result, pct)
    if reason is not None:
        err_console.print(f"tracedoc: regression: {escape(reason)}", soft_wrap=True)
        return 1
    st = result.step_time
    if st.change_pct_unrounded is None and st.change_pct is None:
        err_console.print(
            "tracedoc: warning: --fail-on-regression not checked: the step time of a side is unknown", soft_wrap=True
        )
    return 0
