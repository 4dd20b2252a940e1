"""Helpers shared by the test modules (import them as ``from helpers import ...``;
``conftest.py`` puts this folder on ``sys.path``)."""

from __future__ import annotations

from typing import Any

from tracedoc.engine.rules import DOC_SECTIONS


def rule_dict(**over: Any) -> dict[str, Any]:
    """A minimal valid rule as the dict a rule file parses to (code ``X1``, name ``x-rule``,
    condition ``step_time_ms > 1``, every docs section), with the fields in ``over`` replaced:
    the starting point of the rule-validation tests, which break one field at a time."""
    d: dict[str, Any] = {
        "code": "X1",
        "name": "x-rule",
        "severity": "info",
        "summary": "s",
        "condition": "step_time_ms > 1",
        "message": "m",
        "fix": {"summary": "f", "safety": "safe"},
        "docs": {s: "d" for s in DOC_SECTIONS},
    }
    d.update(over)
    return d
