"""``--format sarif``: the report as a SARIF 2.1.0 log (OASIS Static Analysis Results
Interchange Format, https://docs.oasis-open.org/sarif/sarif/v2.1.0/), for code-scanning
dashboards.

One run; ``tool.driver.rules`` describes every evaluated rule (id = code, name, summary,
fix as help, default level); each finding is a ``result`` on the trace file with level
``error``/``warning``/``note`` (``info`` is SARIF's ``note``) and its saving, evidence and
fix in ``properties``. Rules that were skipped are ``toolExecutionNotifications`` of the
invocation, so a reader sees that the analysis was incomplete. The tests validate the
output against the official schema (``fixtures/schemas/sarif-schema-2.1.0.json``).

Several traces (the ranks of a job, or unrelated traces: a folder of benchmarks) are one log
with one run: one artifact per trace, and each result's location names its trace's artifact
(``uri`` and ``index``); a trace that could not be analyzed is an ``error`` notification
naming it, and the run's ``executionSuccessful`` stays true (the others were analyzed).

SARIF is structured: the encoder escapes what JSON must, and the document's data (evidence,
properties) is kept as it is. Trace text in a message a viewer shows (a trace path, a skip
reason) goes through :func:`tracedoc.render.escape.sarif_text` (visible, embedded-link brackets
escaped); a trace path in a URI is percent-encoded from its bytes, so a file name that is not
valid UTF-8 keeps its bytes.
"""

from __future__ import annotations

import os
from pathlib import Path
from typing import Any
from urllib.parse import quote

from tracedoc._version import __version__
from tracedoc.render.escape import json_text, sarif_text
from tracedoc.render.report import dedupe_vendor

LEVEL = {"error": "error", "warning": "warning", "info": "note"}
SCHEMA_URI = "https://json.schemastore.org/sarif-2.1.0.json"


def artifact_uri(path: str) -> str:
    """A URI reference for a trace path: relative paths stay relative (percent-encoded),
    absolute ones become ``file://`` URIs; the path's bytes are encoded (``os.fsencode``), so
    a name that is not valid UTF-8 keeps them."""
    p = Path(path)
    return p.as_uri() if p.is_absolute() else quote(os.fsencode(p.as_posix()))


def _failure(path: str, error: str) -> dict[str, Any]:
    """The ``error`` notification of a trace that could not be analyzed, located on it."""
    return {
        "level": "error",
        "message": {"text": f"{sarif_text(path)} could not be analyzed: {sarif_text(error)}"},
        "locations": [{"physicalLocation": {"artifactLocation": {"uri": artifact_uri(path)}}}],
    }


class SarifRenderer:
    """A :class:`~tracedoc.report.model.Report` (or several, e.g. the ranks of a job) as
    one SARIF 2.1.0 log."""

    def to_dict(
        self, reports: list[Any], rules: list[Any] | None = None, failed: list[tuple[str, str]] | None = None
    ) -> dict[str, Any]:
        """The SARIF log as a dict. ``rules``: the Rule objects the analysis evaluated, for
        the rules' descriptions (a code without one, or every code when None, gets a minimal
        descriptor: renderers read documents and do not load rules themselves). ``failed``:
        ``(path, error)`` of the traces that could not be analyzed."""
        codes: list[str] = []
        for rep in reports:
            for c in [*rep.rules_evaluated, *(f.code for f in rep.findings), *(k.code for k in rep.skipped)]:
                if c not in codes:
                    codes.append(c)
        meta = {r.code: r for r in rules or ()}
        names = {}
        for rep in reports:
            names |= {f.code: f.name for f in rep.findings} | {k.code: k.name for k in rep.skipped}
        descriptors = []
        for c in codes:
            r = meta.get(c)
            d: dict[str, Any] = {"id": c, "name": r.name if r else names.get(c, c)}
            if r is not None:
                d["shortDescription"] = {"text": r.summary}
                d["help"] = {"text": f"Fix [{r.fix.safety}]: {r.fix.summary}"}
                d["defaultConfiguration"] = {"level": LEVEL[r.severity]}
                d["properties"] = {"fix_safety": r.fix.safety, "condition": r.condition.source}
            descriptors.append(d)
        index = {c: i for i, c in enumerate(codes)}
        results, notes, artifacts = [], [], []
        for i, rep in enumerate(reports):
            uri = artifact_uri(rep.trace["path"])
            artifacts.append({"location": {"uri": uri}})
            loc = [{"physicalLocation": {"artifactLocation": {"uri": uri, "index": i}}}]
            for f in rep.findings:
                results.append(
                    {
                        "ruleId": f.code,
                        "ruleIndex": index[f.code],
                        "level": LEVEL[f.severity],
                        "message": {"text": f"{f.message} Fix [{f.fix.safety}]: {f.fix.summary}"},
                        "locations": loc,
                        "properties": {
                            "estimated_saving_ms": f.estimated_saving_ms,
                            "saving_basis": f.saving_basis,
                            "evidence": f.evidence,
                            "fix": {**f.fix.to_dict(), "text": f.fix.summary},
                        },
                    }
                )
            for k in rep.skipped:
                notes.append(
                    {
                        "level": "warning",
                        "message": {
                            "text": f"{k.code} {k.name} skipped on {sarif_text(rep.trace['path'])}: "
                            f"{sarif_text(dedupe_vendor(k.reason))}"
                        },
                        "associatedRule": {"id": k.code, "index": index[k.code]},
                    }
                )
        notes += [_failure(path, error) for path, error in failed or ()]
        return {
            "$schema": SCHEMA_URI,
            "version": "2.1.0",
            "runs": [
                {
                    "tool": {
                        "driver": {
                            "name": "tracedoc",
                            "version": __version__,
                            "semanticVersion": __version__,
                            "rules": descriptors,
                        }
                    },
                    "invocations": [{"executionSuccessful": True, "toolExecutionNotifications": notes}],
                    "artifacts": artifacts,
                    "results": results,
                }
            ],
        }

    def render(
        self, reports: list[Any], rules: list[Any] | None = None, failed: list[tuple[str, str]] | None = None
    ) -> str:
        """The SARIF JSON text of ``reports`` (one artifact each: a trace, or each rank of a job)
        and of the ``failed`` traces (``(path, error)``)."""
        return json_text(self.to_dict(reports, rules, failed))
