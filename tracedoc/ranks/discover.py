"""Discovery and rank detection: which inputs are traces, which were skipped and why, and
which rank each trace is.

Inputs are paths (files or folders), shell-style globs (``'traces/*.json.gz'``) and
fsspec URLs (``s3://bucket/job/``, ``file:///...``, ``memory://...``). A folder is read
one level deep; what is not taken as a trace is *said*, never silently dropped:

* hidden entries (``.name``), subfolders, FIFOs, sockets and devices (reading a FIFO
  would block, a device may never end: issue 9, item 9);
* names that do not end in ``.json``, ``.json.gz`` or ``.gz`` (``*.JSON`` included:
  the suffix match is case-sensitive, as it always was, and now reported);
* a symbolic link whose target lies outside the folder, unless ``follow_symlinks``
  (then it is taken and the report says it was followed).
"""

from __future__ import annotations

import glob
import os
import re
import stat
from dataclasses import dataclass, field
from pathlib import Path

from tracedoc.errors import TraceLoadError

TRACE_SUFFIXES = (".json", ".gz")
_RANK_IN_NAME = re.compile(r"(?:^|[^a-z0-9])rank[-_]?(\d+)(?![0-9])", re.IGNORECASE)
_GLOB_CHARS = re.compile(r"[*?\[]")
_PROTOCOL = re.compile(r"^[a-zA-Z][a-zA-Z0-9+.-]*://")


def rank_from_filename(name: str) -> int | None:
    """The rank number in a file name: ``rank-3.…``, ``…_rank_3…``, ``rank3…``; else None."""
    m = _RANK_IN_NAME.search(name)
    return int(m.group(1)) if m else None


def has_protocol(path: str) -> bool:
    """True for an fsspec URL such as ``s3://b/k`` or ``file:///tmp/x`` (read through fsspec)."""
    return bool(_PROTOCOL.match(path))


def is_trace_name(name: str) -> bool:
    """True when a file name ends in ``.json``, ``.json.gz`` or ``.gz`` (case-sensitive)."""
    return name.endswith(TRACE_SUFFIXES)


@dataclass
class Discovery:
    """The trace files found for a list of inputs.

    Attributes:
        files: trace paths or URLs, in input order, each folder's files sorted by name.
        skipped: ``(path, reason)`` for every folder entry that was not taken.
        followed: symlinks that point outside their folder and were followed.
        folders: how many inputs were folders (for the rank-mode decision).
    """

    files: list[str] = field(default_factory=list)
    skipped: list[tuple[str, str]] = field(default_factory=list)
    followed: list[str] = field(default_factory=list)
    folders: int = 0


def _file_kind(mode: int) -> str | None:
    if stat.S_ISFIFO(mode):
        return "a FIFO"
    if stat.S_ISSOCK(mode):
        return "a socket"
    if stat.S_ISCHR(mode) or stat.S_ISBLK(mode):
        return "a device"
    if not stat.S_ISREG(mode):
        return "not a regular file"
    return None


def _scan_local_folder(d: Path, out: Discovery, follow_symlinks: bool) -> None:
    root = os.path.realpath(d)
    try:
        entries = sorted(os.scandir(d), key=lambda e: e.name)
    except OSError as exc:
        raise TraceLoadError(str(d), f"cannot list folder ({exc.strerror or exc})") from None
    for e in entries:
        p = os.path.join(str(d), e.name)
        if e.name.startswith("."):
            out.skipped.append((p, "hidden"))
            continue
        if e.is_symlink():
            target = os.path.realpath(p)
            inside = os.path.commonpath([root, target]) == root
            if not inside and not follow_symlinks:
                out.skipped.append((p, "symlink to a path outside the folder (use --follow-symlinks)"))
                continue
            if not inside:
                out.followed.append(p)
        try:
            mode = os.stat(p).st_mode  # follows the link: the kind of what would be read
        except OSError as exc:
            out.skipped.append((p, f"cannot stat ({exc.strerror or exc})"))
            continue
        if stat.S_ISDIR(mode):
            out.skipped.append((p, "subfolder (folders are read one level deep)"))
            continue
        kind = _file_kind(mode)
        if kind:
            out.skipped.append((p, kind))
            continue
        if not is_trace_name(e.name):
            low = e.name.lower()
            why = (
                "upper-case suffix (only .json, .json.gz, .gz are read)"
                if low.endswith(TRACE_SUFFIXES)
                else "not a trace file name (*.json, *.json.gz, *.gz)"
            )
            out.skipped.append((p, why))
            continue
        out.files.append(p)


def _scan_remote(url: str, out: Discovery) -> None:
    from tracedoc.load.remote import list_remote

    files, folder = list_remote(url)
    if folder:
        out.folders += 1
        for f in files:
            name = f.rstrip("/").rsplit("/", 1)[-1]
            if name.startswith("."):
                out.skipped.append((f, "hidden"))
            elif not is_trace_name(name):
                out.skipped.append((f, "not a trace file name (*.json, *.json.gz, *.gz)"))
            else:
                out.files.append(f)
    else:
        out.files.extend(files)


def discover(inputs: list[str], follow_symlinks: bool = False) -> Discovery:
    """Expand paths, globs, folders and URLs into trace files (see the module docstring).

    Args:
        inputs: what the user named, in order.
        follow_symlinks: take symlinks in a folder that point outside it.

    Raises:
        TraceLoadError: a path that does not exist, a glob that matches nothing, or no
            trace file at all among the inputs (naming the input and what was skipped).
    """
    out = Discovery()
    for raw in inputs:
        s = str(raw)
        if has_protocol(s):
            _scan_remote(s, out)
            continue
        if _GLOB_CHARS.search(s) and not os.path.lexists(s):
            matches = sorted(glob.glob(s))
            if not matches:
                raise TraceLoadError(s, "no file matches this pattern")
            for m in matches:
                if os.path.isdir(m):
                    out.skipped.append((m, "subfolder matched by the pattern (name the folder itself)"))
                else:
                    out.files.append(m)
            continue
        p = Path(s)
        if p.is_dir():
            out.folders += 1
            _scan_local_folder(p, out, follow_symlinks)
        elif os.path.lexists(s):
            out.files.append(s)  # named explicitly: taken as given (the loader reads FIFOs once)
        else:
            raise TraceLoadError(s, "no such file or directory")
    seen: set[str] = set()
    unique = []
    for f in out.files:
        if f not in seen:
            seen.add(f)
            unique.append(f)
    out.files = unique
    if not out.files:
        where = ", ".join(map(str, inputs))
        extra = f"; skipped {len(out.skipped)}: " + describe_skipped(out.skipped) if out.skipped else ""
        raise TraceLoadError(where, "no trace files (*.json, *.json.gz)" + extra)
    return out


def describe_skipped(skipped: list[tuple[str, str]], limit: int = 3) -> str:
    """One line naming up to ``limit`` skipped entries and why (``a (hidden), b (a FIFO), +2 more``)."""
    parts = [f"{Path(p).name} ({why})" for p, why in skipped[:limit]]
    if len(skipped) > limit:
        parts.append(f"+{len(skipped) - limit} more")
    return ", ".join(parts)


def find_traces(directory: Path) -> list[Path]:
    """Trace files directly inside ``directory`` (``*.json``, ``*.json.gz``, ``*.gz``), sorted.

    Hidden entries, subfolders, special files and symlinks to outside the folder are left
    out (:func:`discover` says which and why).

    Raises:
        TraceLoadError: the directory holds no trace files.
    """
    return [Path(f) for f in discover([str(directory)]).files]
