"""The ``analyze`` command's many-traces path, kept here so ``tracedoc/cli/`` only
dispatches: several files, a glob (``**`` too), a folder (ranks of one job, unrelated
traces, or a TensorBoard log directory: its newest run), or an fsspec URL of a folder."""

from __future__ import annotations

import os
from pathlib import Path
from typing import TYPE_CHECKING, Callable

from tracedoc.ranks.discover import _GLOB_CHARS, has_protocol, tensorboard_run
from tracedoc.ranks.summary import MultiRankReport, MultiTraceReport

if TYPE_CHECKING:
    from tracedoc.settings import Settings


def wants_many(paths: list[str], ranks: bool | None = None, scheduler: str | None = None) -> bool:
    """True when the inputs need the many-traces path: more than one input, a folder, a
    glob that is not an existing file name, a URL naming a folder or a glob, ``--ranks``
    or ``--scheduler``. A single trace file (or URL of one) keeps the single-trace report."""
    if len(paths) != 1 or ranks or scheduler:
        return True
    p = paths[0]
    if has_protocol(p):
        if _GLOB_CHARS.search(p.split("://", 1)[1]):
            return True
        from tracedoc.load.remote import list_remote

        return list_remote(p)[1]
    if p == "-":
        return False
    return os.path.isdir(p) or (bool(_GLOB_CHARS.search(p)) and not os.path.lexists(p))


def analyze_many(
    paths: list[str],
    settings: Settings,
    *,
    rules: list,
    jobs: int | None,
    scheduler: str | None,
    ranks: bool | None,
    follow_symlinks: bool,
    cache_dir: str | None,
    progress: Callable[[str], None] | None,
) -> MultiRankReport | MultiTraceReport:
    """Run :func:`tracedoc.ranks.executors.analyze_inputs` and warn on stderr (one line each)
    about failed traces, skipped entries, followed symlinks and the report's notes.

    ``settings`` (selectors, strictness, floors, the size limit) and ``rules`` (parsed, with the
    ``[tool.tracedoc]`` threshold overrides applied) reach every rank's analysis, as they reach
    a single trace's (as arguments: no environment side channel)."""
    from rich.markup import escape

    from tracedoc.ranks.discover import describe_skipped
    from tracedoc.ranks.executors import analyze_inputs
    from tracedoc.render.escape import OneLineConsole
    from tracedoc.text import plural

    report = analyze_inputs(
        paths,
        settings,
        jobs=jobs,
        scheduler=scheduler,
        ranks=ranks,
        follow_symlinks=follow_symlinks,
        cache_dir=cache_dir,
        progress=progress,
        rules=rules,
    )
    # a TensorBoard log directory of several runs: which run was read, first among the notes
    report.notes[:0] = [tb[1] for tb in map(_tensorboard, paths) if tb is not None and tb[1]]
    err = OneLineConsole(stderr=True, highlight=False, soft_wrap=True)
    n_all = len(report.failed) + (len(report.ranks) if isinstance(report, MultiRankReport) else len(report.traces))
    for r in report.failed:
        err.print(
            f"tracedoc: warning: {len(report.failed)} of {plural(n_all, 'trace')} failed: {escape(r.error or r.path)}"
        )
    if report.skipped:
        err.print(f"tracedoc: warning: skipped {len(report.skipped)}: {escape(describe_skipped(report.skipped, 5))}")
    for p in report.followed:
        err.print(f"tracedoc: warning: followed symlink outside the folder: {escape(p)}")
    for note in report.notes:  # retried traces, duplicate ranks
        err.print(f"tracedoc: warning: {escape(note)}")
    return report


def _tensorboard(path: str) -> tuple[Path, str | None] | None:
    """:func:`tracedoc.ranks.discover.tensorboard_run` of a local folder input (else None)."""
    if has_protocol(path) or not os.path.isdir(path):
        return None
    return tensorboard_run(path)


def progress_path(paths: list[str]) -> Path:
    """The path the progress display sizes the work by (the first input)."""
    return Path(paths[0])
