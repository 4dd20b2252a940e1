"""Helpers shared by the test modules (import them as ``from helpers import ...``;
``conftest.py`` puts this folder on ``sys.path``)."""

from __future__ import annotations

import io
import json
import math
from typing import Any

from tracedoc.engine.rules import DOC_SECTIONS
from tracedoc.report.model import Finding, Report


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


JSON_TYPES = (dict, list, str, int, float, bool, type(None))


def not_plain_json(x: Any, path: str = "$") -> list[str]:
    """Where ``x`` holds anything but plain JSON data (a tuple, a numpy scalar, an enum, a
    non-string key, a NaN or an infinity)."""
    out = [] if type(x) in JSON_TYPES else [f"{path}: {type(x).__name__}"]
    if isinstance(x, float) and not math.isfinite(x):
        out.append(f"{path}: {x}")
    if isinstance(x, dict):
        for k, v in x.items():
            if type(k) is not str:
                out.append(f"{path}: key {k!r}")
            out += not_plain_json(v, f"{path}.{k}")
    elif isinstance(x, (list, tuple)):
        for i, v in enumerate(x):
            out += not_plain_json(v, f"{path}[{i}]")
    return out


def through_json(d: dict[str, Any]) -> dict[str, Any]:
    """``d`` after a round trip through JSON text (NaN refused)."""
    return json.loads(json.dumps(d, allow_nan=False))


def report_of(findings: list[dict]) -> Report:
    """The Report the analyzer gives a trial: these findings (their JSON form)."""
    return Report(
        trace={},
        signals={},
        signals_unavailable={},
        units={},
        steps=[],
        findings=[
            Finding.from_dict({"severity": "warning", "message": "", "saving_basis": "", "evidence": {}, **f})
            for f in findings
        ],
        skipped=[],
    )


def terminal_console(width: int, colour: bool) -> tuple[Any, io.StringIO]:
    """A rich Console writing into a buffer, as a terminal of ``width`` columns with (truecolor)
    or without colour would get it; returns ``(console, buffer)``."""
    from rich.console import Console

    buf = io.StringIO()
    console = Console(
        file=buf,
        width=width,
        color_system="truecolor" if colour else None,
        force_terminal=colour,
        no_color=not colour,
        highlight=False,
    )
    return console, buf


def chromium() -> str:
    """The headless browser the page tests use (Debian's chromium; `make test` installs it)."""
    import shutil

    exe = shutil.which("chromium") or shutil.which("chromium-browser")
    assert exe, "chromium is missing: `make test` installs it (apt-get install chromium)"
    return exe


def headless_chromium_args(exe: str, profile: Any) -> list[str]:
    """The headless Chromium command line the page tests start with (no sandbox, no GPU, no
    first-run or background traffic, a fresh profile folder); the caller adds its own flags."""
    return [
        exe,
        "--headless",
        "--no-sandbox",
        "--disable-gpu",
        "--no-first-run",
        "--disable-background-networking",
        "--disable-component-update",
        "--disable-sync",
        f"--user-data-dir={profile}",
    ]
