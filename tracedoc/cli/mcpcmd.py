"""``tracedoc mcp``: serve tracedoc's tools to coding agents over MCP (stdio)."""

from __future__ import annotations

from pathlib import Path
from typing import List, Optional

import typer

from tracedoc.cli.common import app, fail
from tracedoc.errors import install_hint


@app.command("mcp")
def mcp_command(
    root: Optional[List[Path]] = typer.Option(
        None,
        "--root",
        help="A folder the tools may read (repeatable; default: the working directory). "
        "Paths outside every root are refused.",
    ),
) -> None:
    """Serve tracedoc as an MCP server over stdio: analyze, explain_rule, list_signals, diff, op_view."""
    from tracedoc.mcpserver import serve

    try:
        import mcp  # noqa: F401
    except ModuleNotFoundError:
        raise fail(f"tracedoc mcp needs the MCP SDK: {install_hint('mcp')}") from None
    for r in root or []:
        if not r.is_dir():
            raise fail(f"--root {r}: not a folder")
    serve([str(r) for r in root] if root else None)
