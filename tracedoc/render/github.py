"""``--format github``: GitHub Actions workflow commands, one annotation per finding.

Each finding becomes ``::error``, ``::warning`` or ``::notice`` (for ``info``) with the
trace as ``file`` and the rule as ``title``; the message holds the finding, its saving
and the fix. Escaping follows GitHub's ``@actions/core`` toolkit (the documented
workflow-command encoding, :func:`tracedoc.render.escape.workflow_data` and
:func:`~tracedoc.render.escape.workflow_property`): in the message ``%``, CR and LF become
``%25``, ``%0D``, ``%0A``; in a property value ``:`` and ``,`` also become ``%3A`` and ``%2C``.
Trace text (the file name, a skip reason) is made visible first
(:func:`~tracedoc.render.escape.visible`), so no line break or control character of its own
reaches the log: every line that starts with ``::`` is one of these annotations. A skipped
rule is a ``::notice``; the last line is the plain summary line.

For several unrelated traces (``--format github`` on a folder, a glob or several files) the
annotations of every trace come in one stream, each with its trace as ``file`` and the trace's
file name leading its title (``a.pt.trace.json.gz: TD101 dataloader-stall``), so the list of
annotations says which benchmark each belongs to; a trace that could not be analyzed is an
``::error`` with its one-line error.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

from tracedoc.render.escape import visible
from tracedoc.render.escape import workflow_data as escape_data
from tracedoc.render.escape import workflow_property as escape_property
from tracedoc.render.report import dedupe_vendor, summary_line

__all__ = ["LEVEL", "GithubRenderer", "annotation", "escape_data", "escape_property"]

LEVEL = {"error": "error", "warning": "warning", "info": "notice"}


def annotation(level: str, message: str, **props: str) -> str:
    """One workflow command line: ``::level k=v,k=v::message`` (escaped)."""
    p = ",".join(f"{k}={escape_property(v)}" for k, v in props.items())
    return f"::{level}{' ' + p if p else ''}::{escape_data(message)}"


class GithubRenderer:
    """Findings of a :class:`~tracedoc.report.model.Report` as workflow annotations."""

    def lines(self, report: Any, path: str | None = None, named: bool = False) -> list[str]:
        """The annotation lines of one report (``path`` overrides the trace path; ``named``:
        each title starts with the trace's file name, for one stream of several traces)."""
        file = visible(path or report.trace["path"])
        lead = f"{Path(file).name}: " if named else ""
        out = []
        for f in report.findings:
            saving = "" if f.estimated_saving_ms is None else f" (~{f.estimated_saving_ms:.1f} ms/step)"
            msg = f"{f.message}\nFix [{f.fix.safety}]: {f.fix.summary}"
            out.append(annotation(LEVEL[f.severity], msg, file=file, title=f"{lead}{f.code} {f.name}{saving}"))
        for k in report.skipped:
            out.append(
                annotation(
                    "notice",
                    f"skipped: {visible(dedupe_vendor(k.reason))}",
                    file=file,
                    title=f"{lead}{k.code} {k.name}",
                )
            )
        return out

    def failure(self, path: str, error: str | None) -> str:
        """The ``::error`` of a trace that could not be analyzed."""
        file = visible(path)
        return annotation(
            "error", visible(error or "could not be analyzed"), file=file, title=f"{Path(file).name}: not analyzed"
        )

    def render(self, report: Any) -> str:
        """The annotations and the summary line, newline-terminated."""
        return "\n".join([*self.lines(report), summary_line(report)]) + "\n"
