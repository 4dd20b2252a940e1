"""``tracedoc cache info`` and ``tracedoc cache clear``: the frame cache."""

from __future__ import annotations

from pathlib import Path
from typing import Optional

import typer

from tracedoc.cli.common import app, funnel

cache_app = typer.Typer(help="The frame cache: Parquet copies of loaded traces (see docs/scale.md).")
app.add_typer(cache_app, name="cache")


@cache_app.command("info")
def cache_info(
    trace: Optional[str] = typer.Argument(
        None,
        help="Also say what the cache holds for this trace (frames, signal values, report) and "
        "whether `tracedoc analyze TRACE`, with no options, would read each, or why not.",
    ),
    cache_dir: Optional[Path] = typer.Option(None, "--cache-dir", help="Cache folder."),
) -> None:
    """Print the cache folder, its entries and their size; with a trace, what it holds for it."""
    from tracedoc.cache import FrameCache, default_cache
    from tracedoc.errors import display_path, install_hint, one_line

    i = FrameCache(_folder(cache_dir)).info()
    print(f"{display_path(i.directory)}: {i.entries} entr{'y' if i.entries == 1 else 'ies'}, {i.bytes / 1e6:,.1f} MB")
    if not i.available:
        print(f"pyarrow is not installed: nothing is cached ({install_hint('cache')})")
    if trace is None:
        return
    from tracedoc.cli.analyze import default_settings

    with funnel(trace, "check what the cache holds for it", "checking what the cache holds for it"):
        settings = default_settings(trace)
        cache = default_cache(cache_dir, env=settings.env)  # the cache `analyze` would use
        parts = cache.explain(trace, settings) if cache is not None else {"frames": "not cached: no pyarrow"}
    print(f"{display_path(trace)}:")
    for part, status in parts.items():
        print(f"  {part + ':':9s}{one_line(status)}")


@cache_app.command("clear")
def cache_clear(cache_dir: Optional[Path] = typer.Option(None, "--cache-dir", help="Cache folder.")) -> None:
    """Remove every cache entry."""
    from tracedoc.cache import FrameCache

    c = FrameCache(_folder(cache_dir))
    n = c.clear()
    print(f"removed {n} entr{'y' if n == 1 else 'ies'} from {c.directory}")


def _folder(cache_dir: Optional[Path]) -> Optional[str | Path]:
    """``--cache-dir``, else ``$TRACEDOC_CACHE_DIR`` (None: the platform's default).

    Raises:
        typer.Exit: 2, after one line, when a ``TRACEDOC_*`` variable holds a bad value.
    """
    from tracedoc.settings import Environment

    with funnel("environment", "read the environment", "reading the environment"):
        return cache_dir if cache_dir is not None else Environment.read().cache_dir
