"""Discovery and rank detection: which files of a directory are traces, and which rank each is."""

from __future__ import annotations

import re
from pathlib import Path

from tracedoc.errors import TraceLoadError

TRACE_SUFFIXES = (".json", ".gz")
_RANK_IN_NAME = re.compile(r"(?:^|[^a-z0-9])rank[-_]?(\d+)(?![0-9])", re.IGNORECASE)


def rank_from_filename(name: str) -> int | None:
    """The rank number in a file name: ``rank-3.…``, ``…_rank_3…``, ``rank3…``; else None."""
    m = _RANK_IN_NAME.search(name)
    return int(m.group(1)) if m else None


def find_traces(directory: Path) -> list[Path]:
    """Trace files directly inside ``directory`` (``*.json``, ``*.json.gz``, ``*.gz``), sorted.

    Raises:
        TraceLoadError: the directory holds no trace files.
    """
    files = sorted(
        p for p in directory.iterdir() if p.is_file() and not p.name.startswith(".") and p.name.endswith(TRACE_SUFFIXES)
    )
    if not files:
        raise TraceLoadError(str(directory), "directory holds no trace files (*.json, *.json.gz)")
    return files
