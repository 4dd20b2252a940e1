"""``tracedoc mcp``: tracedoc as a Model Context Protocol server, for coding agents.

Built on the official MCP Python SDK (``pip install 'tracedoc[mcp]'``; its ``MCPServer``), it
serves over stdio. The tools return the JSON report's structures (the same dicts as
``tracedoc analyze --format json``, ``tracedoc diff --format json``, ``tracedoc rules``):

- ``analyze(path, select=None, ignore=None)``: a trace file, or a folder of rank traces;
- ``explain_rule(rule)``: a rule's code, name, severity, condition, fix and documentation;
- ``list_signals()``: every signal's name, unit, scope and one-line summary;
- ``diff(before, after)``: what changed between two traces (or saved JSON reports);
- ``op_view(path)``: the op and kernel views (GPU time, achieved TFLOP/s or TB/s, % of peak).

**Confinement.** Every path a tool receives is resolved (symbolic links followed, ``..``
removed) and must then lie inside one of the roots the server was started with
(``--root``, repeatable; the working directory by default); otherwise the tool fails with
"outside the allowed roots" and reads nothing. A relative path is taken from the first root.
"""

from __future__ import annotations

import os
from pathlib import Path
from typing import Any

#: The server's name as clients see it.
SERVER_NAME = "tracedoc"


class OutsideRootsError(ValueError):
    """A tool was given a path outside the server's roots (the message names the path only)."""


def confine(path: str, roots: list[Path]) -> Path:
    """``path`` resolved, if it lies inside one of ``roots`` (already resolved).

    Raises:
        OutsideRootsError: it resolves outside every root, or it is empty or has a NUL byte.
    """
    if not isinstance(path, str) or not path or "\x00" in path:
        raise OutsideRootsError("a path must be a non-empty string")
    p = Path(path).expanduser()
    p = (p if p.is_absolute() else roots[0] / p).resolve()
    for root in roots:
        if p == root or p.is_relative_to(root):
            return p
    raise OutsideRootsError(f"{path!r} is outside the allowed roots")


def _analyze(path: Path, select: list[str] | None, ignore: list[str] | None) -> dict[str, Any]:
    from tracedoc.engine.rules import builtin_rules
    from tracedoc.settings import Settings

    settings = Settings.resolve(str(path), select=select, ignore=ignore)
    if path.is_dir():
        from tracedoc.ranks.executors import analyze_inputs

        report = analyze_inputs(
            [str(path)], settings, jobs=1, scheduler=None, ranks=None, follow_symlinks=False,
            cache_dir=None, progress=None, rules=builtin_rules(),
        )  # fmt: skip
        return report.to_dict()
    from tracedoc import pipeline

    return pipeline.analyze(str(path), settings).to_dict()


def _rule(name: str) -> dict[str, Any]:
    from tracedoc.engine.rules import builtin_rules

    for r in builtin_rules():
        if name in (r.code, r.name):
            return {
                "code": r.code,
                "name": r.name,
                "severity": str(r.severity),
                "summary": r.summary,
                "condition": r.condition.source,
                "message": r.message,
                "evidence": list(r.evidence),
                "fix": r.fix.to_dict(),
                "docs": dict(r.docs),
            }
    raise ValueError(f"no rule {name!r} (codes like TD101, or names like dataloader-stall)")


def _signals() -> list[dict[str, Any]]:
    from tracedoc.signals import SIGNALS

    return [{"name": s.name, "unit": s.unit, "scope": s.scope, "summary": s.summary} for s in SIGNALS.values()]


def _op_view(path: Path) -> dict[str, Any]:
    import tracedoc
    from tracedoc.signals import SignalContext, SignalUnavailable
    from tracedoc.signals.opview import device_peak

    ctx = SignalContext(tracedoc.load(str(path)))
    out: dict[str, Any] = {"trace": str(path)}
    peak = device_peak(ctx)
    out["device_peak"] = peak.to_dict() if peak is not None and hasattr(peak, "to_dict") else None
    for name in ("op_view", "kernel_view"):
        try:
            out[name] = ctx.get(name)
        except SignalUnavailable as exc:
            out[name] = None
            out[f"{name}_unavailable"] = str(exc)
    return out


def _anticipated(fn):
    """Turn tracedoc's expected failures (a path outside the roots, an unreadable trace, an
    unknown rule) into the SDK's ``ToolError``: the client gets ``is_error`` with the one-line
    message. Anything else stays a crash (the client sees only the tool's name)."""
    import functools

    from mcp.server.mcpserver.exceptions import ToolError

    from tracedoc.errors import TracedocError, one_line

    @functools.wraps(fn)
    def wrapper(*args, **kwargs):
        try:
            return fn(*args, **kwargs)
        except (TracedocError, ValueError, OSError) as exc:
            raise ToolError(one_line(str(exc))) from None

    return wrapper


def build_server(roots: list[str | os.PathLike[str]] | None = None):
    """The MCP server object (``mcp.server.mcpserver.MCPServer``) with tracedoc's tools.

    Args:
        roots: folders the tools may read (default: the working directory).

    Raises:
        ModuleNotFoundError: the ``mcp`` SDK is not installed.
        NotADirectoryError: a root is not a folder.
    """
    from mcp.server.mcpserver import MCPServer

    resolved = [Path(r).expanduser().resolve() for r in (roots or [os.getcwd()])]
    for r in resolved:
        if not r.is_dir():
            raise NotADirectoryError(f"--root {r}: not a folder")
    from tracedoc._version import __version__

    server = MCPServer(
        SERVER_NAME,
        version=__version__,
        instructions=(
            "Diagnose PyTorch Profiler (Kineto) traces: analyze a trace or a folder of ranks, "
            "explain a rule, list signals, diff two traces, show the op view. Paths must lie "
            "inside the server's roots: " + ", ".join(str(r) for r in resolved)
        ),
    )

    @server.tool()
    @_anticipated
    def analyze(path: str, select: list[str] | None = None, ignore: list[str] | None = None) -> dict[str, Any]:
        """Analyze a trace file (.json / .json.gz) or a folder of rank traces; returns the JSON
        report: findings ranked by saving (ms per step), evidence, fixes, idle ledger."""
        return _analyze(confine(path, resolved), select, ignore)

    @server.tool()
    @_anticipated
    def explain_rule(rule: str) -> dict[str, Any]:
        """A rule by code (TD101) or name (dataloader-stall): condition, fix, documentation."""
        return _rule(rule)

    @server.tool()
    @_anticipated
    def list_signals() -> list[dict[str, Any]]:
        """Every signal tracedoc measures: name, unit, scope, one-line summary."""
        return _signals()

    @server.tool()
    @_anticipated
    def diff(before: str, after: str) -> dict[str, Any]:
        """Compare two traces (or saved JSON reports): step time, breakdown, findings resolved,
        new and moved, and whether each predicted saving held."""
        from tracedoc.diff import diff as run_diff

        return run_diff(str(confine(before, resolved)), str(confine(after, resolved))).to_dict()

    @server.tool()
    @_anticipated
    def op_view(path: str) -> dict[str, Any]:
        """The top ops and kernels by GPU time per step, with achieved TFLOP/s or TB/s, % of the
        device's peak, arithmetic intensity and compute/memory bound (needs recorded shapes)."""
        return _op_view(confine(path, resolved))

    return server


def serve(roots: list[str] | None = None) -> None:
    """Run the server over stdio until the client closes it."""
    build_server(roots).run("stdio")
