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

A glob's matches follow the same rules, each in the folder it lies in (hidden names aside:
a glob matches them only when its pattern names them), so ``'traces/*'`` skips the FIFO
that ``traces/`` skips (issue 21). A file named again, under the same or another name (a
symlink, a hard link, ``./a.json``), is read once; another name of it is skipped, and said.

A ``**`` component matches any number of folders (``'runs/**/*.pt.trace.json.gz'``): the
folders are walked without following symlinks to folders (each one met is skipped, and said,
so a link loop cannot make the walk endless), hidden folders are left out unless the pattern
names one, a folder that cannot be listed is skipped and said, and a walk of more than
:data:`MAX_GLOB_FOLDERS` folders is refused. Its files are taken or skipped as any glob's.

A TensorBoard log directory (``LOGDIR/plugins/profile/<run>/*.pt.trace.json.gz``) that holds
no trace itself is read from its newest run (the run whose newest trace was written last);
when it has several runs, :func:`tensorboard_run` gives the one-line note that says which was
read. (``tensorboard_trace_handler`` writes ``LOGDIR/<worker>.<ts>.pt.trace.json`` directly:
that is a plain folder of traces.) A Nsight Systems, Nsight Compute or XPlane file in a folder
is skipped with its format named (:func:`tracedoc.load.source.foreign_format`).
"""

from __future__ import annotations

import fnmatch
import glob
import os
import re
import stat
from dataclasses import dataclass, field
from pathlib import Path

from tracedoc.errors import TraceLoadError
from tracedoc.load.source import foreign_format

#: Folders a ``**`` glob may walk before it is refused (a pattern rooted too high).
MAX_GLOB_FOLDERS = 10_000
#: Where TensorBoard's profile plugin keeps its runs, under the log directory.
TENSORBOARD_PROFILE = ("plugins", "profile")

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


def _why_not_taken(p: str, name: str, root: str, follow_symlinks: bool) -> tuple[str | None, bool]:
    """Why the entry ``p`` (file name ``name``) of the folder ``root`` (a real path) is not
    taken as a trace: ``(reason, False)``; ``(None, followed)`` when it is taken, ``followed``
    telling whether it is a symlink to outside ``root`` taken because of ``follow_symlinks``.

    One rule for a folder's entries and a glob's matches (hidden entries aside: a folder
    skips them, a glob matches them only when its pattern names them): special files
    (reading a FIFO blocks until a writer comes), subfolders, names without a trace suffix,
    symlinks leaving the folder unless followed."""
    followed = False
    if os.path.islink(p):
        target = os.path.realpath(p)
        if os.path.commonpath([root, target]) != root:
            if not follow_symlinks:
                return "symlink to a path outside the folder (use --follow-symlinks)", False
            followed = True
    try:
        mode = os.stat(p).st_mode  # follows the link: the kind of what would be read
    except OSError as exc:
        return f"cannot stat ({exc.strerror or exc})", False
    if stat.S_ISDIR(mode):
        return "subfolder (folders are read one level deep)", False
    kind = _file_kind(mode)
    if kind:
        return kind, False
    if not is_trace_name(name):
        what = foreign_format(name)
        if what:
            return f"{what}, not a Kineto JSON trace", False
        if name.lower().endswith(TRACE_SUFFIXES):
            return "upper-case suffix (only .json, .json.gz, .gz are read)", False
        return "not a trace file name (*.json, *.json.gz, *.gz)", False
    return None, followed


def _take(p: str, name: str, root: str, out: Discovery, follow_symlinks: bool) -> None:
    """Add ``p`` to ``out.files``, or to ``out.skipped`` with its reason (:func:`_why_not_taken`)."""
    why, followed = _why_not_taken(p, name, root, follow_symlinks)
    if why:
        out.skipped.append((p, why))
        return
    if followed:
        out.followed.append(p)
    out.files.append(p)


def _scan_local_folder(d: Path, out: Discovery, follow_symlinks: bool) -> None:
    """A folder's entries, one level deep; a TensorBoard log directory without a trace of its
    own is read from its newest run (:func:`tensorboard_run`)."""
    root = os.path.realpath(d)
    try:
        entries = sorted(os.scandir(d), key=lambda e: e.name)
    except OSError as exc:
        raise TraceLoadError(str(d), f"cannot list folder ({exc.strerror or exc})") from None
    n_files, n_skipped = len(out.files), len(out.skipped)
    for e in entries:
        p = os.path.join(str(d), e.name)
        if e.name.startswith("."):
            out.skipped.append((p, "hidden"))
        else:
            _take(p, e.name, root, out, follow_symlinks)
    if len(out.files) > n_files:
        return
    tb = tensorboard_run(d)
    if tb is not None:
        plugins = os.path.join(str(d), TENSORBOARD_PROFILE[0])
        out.skipped[n_skipped:] = [(p, why) for p, why in out.skipped[n_skipped:] if p != plugins]
        _scan_local_folder(tb[0], out, follow_symlinks)


def _trace_mtimes(folder: str) -> list[int]:
    """The mtimes (ns) of the regular trace files directly in ``folder`` (symlinks not followed)."""
    try:
        with os.scandir(folder) as it:
            return [
                e.stat(follow_symlinks=False).st_mtime_ns
                for e in it
                if not e.name.startswith(".") and is_trace_name(e.name) and e.is_file(follow_symlinks=False)
            ]
    except OSError:
        return []


def tensorboard_run(folder: str | os.PathLike[str]) -> tuple[Path, str | None] | None:
    """The run to read in a TensorBoard log directory: ``(run folder, note)``, the note a
    line saying which run was read when there are several (else None).

    ``folder`` is a log directory (``LOGDIR/plugins/profile/<run>/``) or its
    ``plugins/profile`` folder, with no trace file of its own; its runs are the non-hidden
    subfolders (not symlinks) that hold trace files; the newest is the one whose newest trace
    was written last (then the name, last first). None when ``folder`` is not such a folder.
    """
    d = Path(folder)
    if _trace_mtimes(str(d)):
        return None
    profile = d.joinpath(*TENSORBOARD_PROFILE)
    if not profile.is_dir():
        if (d.parent.name, d.name) != TENSORBOARD_PROFILE:
            return None
        profile = d
    try:
        with os.scandir(profile) as it:
            subs = [e for e in it if not e.name.startswith(".") and e.is_dir(follow_symlinks=False)]
    except OSError:
        return None
    runs = sorted(((max(m), e.name) for e in subs if (m := _trace_mtimes(e.path))), reverse=True)
    if not runs:
        return None
    newest = profile / runs[0][1]
    note = None
    if len(runs) > 1:
        note = (
            f"{d}: TensorBoard log directory with {len(runs)} runs; read the newest, {runs[0][1]} "
            f"(name another run's folder, e.g. {profile / runs[1][1]}, to read it)"
        )
    return newest, note


def _match_parts(names: list[str], pats: list[str]) -> bool:
    """``names`` (a relative path's components) match ``pats`` (a pattern's): ``**`` matches
    any number of components, not hidden ones; another pattern component matches one name
    (:func:`fnmatch.fnmatchcase`), a hidden one only when the pattern component starts with a dot."""
    if not pats:
        return not names
    p = pats[0]
    if p == "**":
        for k in range(len(names) + 1):
            if _match_parts(names[k:], pats[1:]):
                return True
            if k < len(names) and names[k].startswith("."):
                return False
        return False
    if not names or (names[0].startswith(".") and not p.startswith(".")):
        return False
    return fnmatch.fnmatchcase(names[0], p) and _match_parts(names[1:], pats[1:])


def _recursive_matches(pattern: str, out: Discovery) -> list[str]:
    """The files a pattern with a ``**`` component matches (see the module docstring): the
    folders from the pattern's literal leading part down are walked, symlinks to folders
    and folders that cannot be listed skipped (and said).

    Raises:
        TraceLoadError: more than :data:`MAX_GLOB_FOLDERS` folders walked.
    """
    parts = pattern.split("/")
    k = next(i for i, c in enumerate(parts) if _GLOB_CHARS.search(c))
    base = "/".join(parts[:k]) or ("/" if pattern.startswith("/") else "")
    pats = parts[k:]
    root = base or "."
    hidden_named = any(c.startswith(".") for c in pats)
    matches: list[str] = []
    walked = 0

    def unlisted(exc: OSError) -> None:
        out.skipped.append((str(exc.filename or root), f"cannot list folder ({exc.strerror or exc})"))

    for dirpath, dirnames, filenames in os.walk(root, onerror=unlisted, followlinks=False):
        walked += 1
        if walked > MAX_GLOB_FOLDERS:
            raise TraceLoadError(pattern, f"** walks more than {MAX_GLOB_FOLDERS:,} folders; start it lower")
        rel = os.path.relpath(dirpath, root)
        prefix = [] if rel == "." else rel.split(os.sep)
        keep = []
        for name in sorted(dirnames):
            full = os.path.join(dirpath, name)
            if name.startswith(".") and not hidden_named:
                continue
            if os.path.islink(full):
                out.skipped.append((full, "symlink to a folder (** does not follow them)"))
            else:
                keep.append(name)
        dirnames[:] = keep
        for name in filenames:
            if _match_parts([*prefix, name], pats):
                matches.append(os.path.join(base, *prefix, name) if base else os.path.join(*prefix, name))
    return sorted(matches)


def _scan_glob(pattern: str, out: Discovery, follow_symlinks: bool) -> None:
    """A glob's matches, each taken or skipped as a folder's entry is (:func:`_why_not_taken`),
    its folder being the one it lies in; a matched folder is skipped, not read. A ``**``
    component matches folders at any depth (:func:`_recursive_matches`)."""
    if "**" in pattern.split("/"):
        matches = _recursive_matches(pattern, out)
    else:
        matches = sorted(glob.glob(pattern))
    if not matches:
        raise TraceLoadError(pattern, "no file matches this pattern")
    for m in matches:
        if os.path.isdir(m):
            out.skipped.append((m, "subfolder matched by the pattern (name the folder itself)"))
        else:
            _take(m, os.path.basename(m), os.path.realpath(os.path.dirname(m) or "."), out, follow_symlinks)


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
                what = foreign_format(name)
                out.skipped.append(
                    (
                        f,
                        f"{what}, not a Kineto JSON trace"
                        if what
                        else "not a trace file name (*.json, *.json.gz, *.gz)",
                    )
                )
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
        TraceLoadError: a path that does not exist, a glob that matches nothing, a ``**``
            glob that walks more than :data:`MAX_GLOB_FOLDERS` folders, or no trace file at
            all among the inputs (naming the input and what was skipped).
    """
    out = Discovery()
    for raw in inputs:
        s = str(raw)
        if has_protocol(s):
            _scan_remote(s, out)
            continue
        if _GLOB_CHARS.search(s) and not os.path.lexists(s):
            _scan_glob(s, out, follow_symlinks)
            continue
        p = Path(s)
        if p.is_dir():
            out.folders += 1
            _scan_local_folder(p, out, follow_symlinks)
        elif os.path.lexists(s):
            out.files.append(s)  # named explicitly: taken as given (the loader reads FIFOs once)
        else:
            raise TraceLoadError(s, "no such file or directory")
    _drop_repeats(out)
    if not out.files:
        where = ", ".join(map(str, inputs))
        extra = f"; skipped {len(out.skipped)}: " + describe_skipped(out.skipped) if out.skipped else ""
        raise TraceLoadError(where, "no trace files (*.json, *.json.gz)" + extra)
    return out


def _identity(path: str) -> tuple | str:
    """What makes two names one file: device and inode for a local path (a symlink, a hard link,
    ``./a.json`` and ``a.json`` alike), else the name itself (URLs, ``-``, a path stat fails on)."""
    if path == "-" or has_protocol(path):
        return path
    try:
        st = os.stat(path)
    except OSError:
        return path
    return (st.st_dev, st.st_ino)


def _drop_repeats(out: Discovery) -> None:
    """Keep one name of each file in ``out.files``: the first, unless it is a symlink and a later
    one is not (the file's own name may carry its rank). The other names of the same file
    (:func:`_identity`) are skipped, and said: read twice it would be two traces of one rank
    (and a FIFO read twice waits forever for a second writer)."""
    first: dict[tuple | str, int] = {}
    unique: list[str] = []
    for f in out.files:
        key = _identity(f)
        if key not in first:
            first[key] = len(unique)
            unique.append(f)
            continue
        kept = unique[first[key]]
        if f == kept:
            continue
        if os.path.islink(kept) and not os.path.islink(f):  # the file's own name, not an alias
            unique[first[key]], f, kept = f, kept, f
        out.skipped.append((f, f"the same file as {kept}"))
        if f in out.followed:  # not read: not followed
            out.followed.remove(f)
    out.files = unique


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
