"""When to show progress for long loads (one transient status line on stderr, drawn by
:func:`tracedoc.cli.common.progress_line`).

Shown only when stderr is a terminal, the output is not JSON, and no ``CI``
environment variable is set (CI logs are not terminals, but some runners fake one),
and only for inputs large enough to take a noticeable time. Everywhere else the
callback is ``None`` and nothing is printed.
"""

from __future__ import annotations

import os
import sys
from pathlib import Path

#: Inputs smaller than this load in well under a second: no progress line.
MIN_BYTES = 32 << 20


def wanted(json_output: bool, stream=None, off: bool = False) -> bool:
    """Whether a progress display is appropriate (terminal, not JSON, not CI, not ``off``:
    ``$TRACEDOC_NO_PROGRESS`` as :class:`tracedoc.settings.Environment` read it)."""
    stream = stream if stream is not None else sys.stderr
    if json_output or off or os.environ.get("CI"):
        return False
    try:
        return bool(stream.isatty())
    except (AttributeError, ValueError):
        return False


def input_bytes(path: Path) -> int:
    """JSON bytes of a trace file (a gzipped one's uncompressed size, from its trailer),
    or of all files directly in a directory."""
    from tracedoc.load.source import gzip_size_hint, is_gzip

    def one(p: Path) -> int:
        return gzip_size_hint(p) if is_gzip(p) else p.stat().st_size

    try:
        if path.is_dir():
            return sum(one(p) for p in path.iterdir() if p.is_file())
        return one(path)
    except OSError:
        return 0
