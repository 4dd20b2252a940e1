"""The frame cache: the frames a trace loads, kept as Parquet so the next ``analyze`` of
the same file (other rules, other options) skips reading and decoding the JSON.

Layout: one entry per trace file, a folder named by a hash of the file's real path::

    <cache dir>/v3/<blake2b(realpath)[:32]>/
        tracedoc-entry     the marker: exactly MARKER_TEXT (format and version of an entry)
        manifest.json      key, content digest, trace-level fields, CRC-32 and size of every Parquet file
        ops.parquet  runtime.parquet  kernels.parquet  ...   one file per frame
        signals.json       the signal values computed on it (:class:`SignalStore`)
        report.json        its last report, with the settings it was made under (:class:`ReportStore`)

**Key.** An entry is used only when the file's real path, size in bytes and
``st_mtime_ns`` equal its key (a cheap first check: most rewrites change them), and the
SHA-256 of all of the file's bytes now equals the digest of the bytes the entry was built
from. That digest is computed while the trace is read anyway on a miss
(:func:`tracedoc.load.source.record_reads`: exactly the bytes parsed, so a file edited
during the read cannot pair old frames with new bytes); on a hit the file is hashed in a
second thread while the Parquet files are read, and the frames, like the stored signal
values, are used only after the digests agree. An edit that keeps size and mtime is thus
always caught, whichever bytes it touches. Its cost on the warm path is measured by
``benchmarks/cache_key.py``. The tracedoc version and the frame schema are part of the
key too, so an upgrade never reads an older layout.

**Trust.** An entry is rebuilt, never trusted, when its manifest is missing or not JSON,
its key or digest differs (stale), a Parquet file is missing or its CRC-32 or size differ
from the manifest (corrupt), or the frames read back lack a documented column. Every
file of an entry is read only when it is a regular file, with a size bound
(:func:`tracedoc.load.source.read_regular`): a FIFO or a device planted in an entry is
refused before it is read. Entries are written to a temporary folder and renamed into
place, so a crash or a concurrent writer never leaves half an entry under the final name.

**Ownership.** The cache removes only what it can prove it wrote: a real folder (not a
link) holding the marker file with exactly :data:`MARKER_TEXT`, and in it only the file
names it writes; a folder holding anything else is left as it is. Nothing else under the
cache folder is ever deleted, by eviction or by ``tracedoc cache clear``.

Only local regular files of at least :data:`MIN_BYTES` on disk are cached (not ``-``,
FIFOs or URLs): a smaller trace parses in well under a second, and caching it would
only add a write. The folder is kept under :data:`MAX_BYTES` (``TRACEDOC_CACHE_MAX_BYTES``)
by removing the least recently used entries after each write, and entries whose trace
file no longer exists. Needs ``pyarrow``
(``pip install 'tracedoc[cache]'``); without it :func:`default_cache` returns None and
nothing is cached.
"""

from __future__ import annotations

import functools
import hashlib
import os
import re
import stat
import tempfile
import time
import zlib
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any, Callable

from tracedoc._version import __version__
from tracedoc.load.source import DEFAULT_MAX_TRACE_BYTES, ReadRecord, file_sha256, read_regular, record_reads

if TYPE_CHECKING:
    from tracedoc.trace import Trace

#: Entry layout; v2 added the Record Window End instant to the manifest; v3 the marker file and
#: the full content digest (older layouts' folders are never read nor removed). Not bumped for a
#: change of frame columns (the ops frame's recorded inputs) nor for the manifest's
#: ``dropped_events``: the key holds a hash of every frame's columns
#: (:func:`tracedoc.load.shapes.all_frame_columns`), so an entry written with other columns is
#: stale and rewritten in place, where a new layout would leave the old folders on disk.
LAYOUT = "v3"
#: Traces smaller than this on disk are not cached (``TRACEDOC_CACHE_MIN_BYTES`` replaces it,
#: through :class:`tracedoc.settings.Environment`).
MIN_BYTES = 4 << 20
#: The cache folder is trimmed to this many bytes (least recently used entries go first).
MAX_BYTES = 8 << 30
#: The marker file of an entry, and its exact content: the format and its version.
MARKER = "tracedoc-entry"
MARKER_TEXT = b"tracedoc frame cache entry, format 1\n"
MANIFEST = "manifest.json"
#: Bound on a manifest or signal file read back (bytes). Both hold small JSON: 1.2 KB and 20 KB
#: for the 301 MB benchmark trace (trace metadata and signal tables grow little with the
#: trace); 64 MiB is far beyond any of ours.
MAX_DOC_BYTES = 64 << 20
#: Bound on one Parquet file read back: the default trace size limit, 1 GiB (a frame holds
#: less than the JSON it was decoded from; a larger file is not one this cache wrote).
MAX_FRAME_BYTES = DEFAULT_MAX_TRACE_BYTES
#: A temporary folder (a write in progress) older than this is a crashed write, removed by
#: eviction: writing an entry takes seconds, even for a multi-GB trace.
_TMP_STALE_S = 3600


def default_cache_dir() -> Path:
    """The platform's user cache folder + ``tracedoc`` (platformdirs; on Linux
    ``$XDG_CACHE_HOME/tracedoc``, default ``~/.cache/tracedoc``). ``$TRACEDOC_CACHE_DIR``
    replaces it through :func:`default_cache` (read by :class:`tracedoc.settings.Environment`)."""
    try:
        import platformdirs

        return Path(platformdirs.user_cache_dir("tracedoc", appauthor=False))
    except ImportError:
        base = os.environ.get("XDG_CACHE_HOME") or os.path.join(os.path.expanduser("~"), ".cache")
        return Path(base) / "tracedoc"


def available() -> bool:
    """True when pyarrow (the Parquet engine) is installed (looked up, not imported:
    importing it costs about 0.2 s, paid only when an entry is read or written)."""
    import importlib.util

    return importlib.util.find_spec("pyarrow") is not None


def is_entry(folder: str | os.PathLike[str]) -> bool:
    """True when ``folder`` is one this cache wrote: a real folder (not a symbolic link)
    holding the regular file :data:`MARKER` with exactly :data:`MARKER_TEXT`."""
    folder = Path(folder)
    try:
        if not stat.S_ISDIR(os.lstat(folder).st_mode) or not stat.S_ISREG(os.lstat(folder / MARKER).st_mode):
            return False
        return read_regular(folder / MARKER, len(MARKER_TEXT)) == MARKER_TEXT
    except (OSError, ValueError):
        return False


_STORE_TMP = re.compile(r"(signals|report)\.json\.tmp\d+")


def _own_name(name: str) -> bool:
    """A file name this cache writes in an entry (the marker aside)."""
    from tracedoc.schema import FRAME_COLUMNS

    if name in (MANIFEST, SignalStore.NAME, ReportStore.NAME) or _STORE_TMP.fullmatch(name):
        return True
    return name.endswith(".parquet") and name[: -len(".parquet")] in FRAME_COLUMNS


def remove_entry(folder: str | os.PathLike[str]) -> bool:
    """Remove a folder this cache wrote (:func:`is_entry`): the files it writes there, then
    the marker and the folder. Anything else in it (a file of another name, a subfolder)
    leaves the folder where it is, with its marker. Returns True when the folder is gone."""
    folder = Path(folder)
    if not is_entry(folder):
        return False
    try:
        for f in os.scandir(folder):
            if _own_name(f.name) and not f.is_dir(follow_symlinks=False):
                os.unlink(f.path)
        if os.listdir(folder) != [MARKER]:
            return False
        os.unlink(folder / MARKER)
        os.rmdir(folder)
    except OSError:
        return False
    return True


def _folders(root: Path) -> list[os.DirEntry[str]]:
    """The real folders (not links) directly under ``root``; none when it is not a folder."""
    try:
        return [e for e in os.scandir(root) if e.is_dir(follow_symlinks=False)]
    except OSError:
        return []


def _entry_bytes(folder: str) -> int:
    """Bytes of the files directly in ``folder`` (an entry is flat), links not followed."""
    try:
        return sum(f.stat(follow_symlinks=False).st_size for f in os.scandir(folder))
    except OSError:
        return 0


def _frame(table, cols: list[tuple[str, str]]):
    """A pandas frame with the documented dtypes from a Parquet table whose string
    columns were read dictionary-encoded: each distinct string becomes one Python
    object, and the column is a numpy ``take`` of them (pandas' own conversion to
    ``object`` would build one string per row, about 1 s on a 300 MB trace)."""
    import numpy as np
    import pandas as pd
    import pyarrow as pa

    from tracedoc.trace import id_array

    data = {}
    for c, t in cols:
        col = table.column(c)
        if t == "category":
            data[c] = pd.Series(_text_values(col))
        elif t == "object":
            parts = []
            for arr in col.chunks:  # a row group each: its own dictionary
                if len(arr) == 0:
                    continue  # an empty frame's column has no type worth reading (pyarrow: null)
                if not pa.types.is_dictionary(arr.type) or arr.null_count:
                    raise ValueError(f"column {c}: not a null-free dictionary column")
                values = np.empty(len(arr.dictionary), dtype=object)
                values[:] = arr.dictionary.to_pylist()
                parts.append(values[arr.indices.to_numpy(zero_copy_only=False)])
            joined = np.concatenate(parts) if parts else np.empty(0, dtype=object)
            data[c] = pd.Series(joined, dtype=object)
        elif t == "int":
            data[c] = pd.Series(id_array(col.to_numpy()), copy=False)
        else:
            data[c] = pd.Series(col.to_numpy(), dtype=t)
    return pd.DataFrame(data)


def _text_values(col):
    """The ``Categorical`` of a recorded-input column (:mod:`tracedoc.load.shapes`) from its
    Parquet column: dictionary-encoded strings with nulls, or the null type when every cell is
    missing. Rebuilt by :func:`tracedoc.trace.text_categorical`, so the categories take the one
    form a fresh load gives (the distinct texts present, sorted) whatever the row groups held.

    Raises:
        ValueError: a column of another type (not one this cache wrote).
    """
    import numpy as np
    import pyarrow as pa
    import pyarrow.compute as pc

    from tracedoc.trace import text_categorical

    parts = []
    for arr in col.chunks:
        if len(arr) == 0:
            continue
        if pa.types.is_null(arr.type):
            parts.append(np.full(len(arr), None, dtype=object))
            continue
        if not pa.types.is_dictionary(arr.type) or not pa.types.is_string(arr.dictionary.type):
            raise ValueError("a recorded-input column: not dictionary-encoded strings")
        values = np.empty(len(arr.dictionary) + 1, dtype=object)  # the last one, None, is for nulls
        values[:-1] = arr.dictionary.to_pylist()
        codes = pc.fill_null(arr.indices, -1).to_numpy(zero_copy_only=False)
        parts.append(values[codes])
    return text_categorical(np.concatenate(parts) if parts else np.empty(0, dtype=object))


def _counts(value: Any) -> dict[str, int]:
    """``Trace.dropped_events`` from a manifest: reason -> count, entries of other types left out."""
    if not isinstance(value, dict):
        return {}
    return {k: v for k, v in value.items() if isinstance(k, str) and type(v) is int}


@dataclass
class CacheInfo:
    """What ``tracedoc cache info`` prints: folder, entries, bytes on disk (of entries this
    cache wrote, :func:`is_entry`; nothing else under the folder is counted)."""

    directory: str
    entries: int
    bytes: int
    available: bool


class FrameCache:
    """A Parquet frame cache in ``directory`` (see the module docstring for key and layout).

    Args:
        directory: the cache folder; created on the first write.
        min_bytes: traces smaller on disk are not cached (default :data:`MIN_BYTES`).
        max_bytes: the folder is trimmed to this many bytes (default :data:`MAX_BYTES`).
    """

    def __init__(
        self,
        directory: str | os.PathLike[str] | None = None,
        min_bytes: int = MIN_BYTES,
        max_bytes: int = MAX_BYTES,
    ) -> None:
        self.directory = Path(directory) if directory is not None else default_cache_dir()
        self.min_bytes = min_bytes
        self.max_bytes = max_bytes
        #: what the last :meth:`load` did: ``"hit"``, ``"miss"``, ``"stale"``, ``"corrupt"`` or ``"off"``.
        self.last: str = "off"
        # real path -> (key, content digest) of the trace the last load() returned for it
        self._loaded: dict[str, tuple[dict[str, Any], str]] = {}

    # -- key ---------------------------------------------------------------------------------
    def key(self, path: str | os.PathLike[str]) -> dict[str, Any] | None:
        """The entry key of a local regular file (from its ``stat``; nothing is read), or None
        when it cannot be cached. The content digest is checked apart (:meth:`content`)."""
        p = str(path)
        if p == "-" or "://" in p:
            return None
        try:
            st = os.stat(p)
        except OSError:
            return None
        if not stat.S_ISREG(st.st_mode) or st.st_size < self.min_bytes:
            return None
        from tracedoc.load.shapes import all_frame_columns

        schema = hashlib.blake2b(repr(all_frame_columns()).encode(), digest_size=8).hexdigest()
        return {
            "layout": LAYOUT,
            "tracedoc": __version__,
            "schema": schema,
            "path": os.path.realpath(p),
            "size": st.st_size,
            "mtime_ns": st.st_mtime_ns,
        }

    def content(self, path: str | os.PathLike[str], read: ReadRecord | None = None) -> str:
        """The content digest an entry is checked against: SHA-256 (hex) of all of the file's
        bytes, taken from ``read`` (the record of the read the trace was built from) when
        given, else computed by reading the file now.

        Raises:
            OSError: the file cannot be read. ValueError: it is not a regular file.
        """
        return read.sha256 if read is not None else file_sha256(path)

    def entry_dir(self, key: dict[str, Any]) -> Path:
        """The folder of ``key``'s entry (one per real path)."""
        name = hashlib.blake2b(key["path"].encode(), digest_size=16).hexdigest()
        return self.directory / LAYOUT / name

    # -- read --------------------------------------------------------------------------------
    def get(self, key: dict[str, Any], path: str) -> Trace | None:
        """The cached trace for ``key``, or None (sets :attr:`last` to why). The file is
        hashed in a second thread while the frames are read; they are returned only when
        its digest equals the entry's."""
        from concurrent.futures import ThreadPoolExecutor

        import orjson

        d = self.entry_dir(key)
        try:
            manifest = orjson.loads(read_regular(d / MANIFEST, MAX_DOC_BYTES))
        except FileNotFoundError:
            self.last = "miss"
            return None
        except (OSError, ValueError):  # orjson.JSONDecodeError is a ValueError
            self.last = "corrupt"
            return None
        if not isinstance(manifest, dict) or manifest.get("key") != key:
            self.last = "stale"
            return None
        with ThreadPoolExecutor(1) as pool:
            digest = pool.submit(self.content, path)
            try:
                trace = self._read(d, manifest, path) if is_entry(d) else None
            except Exception:  # any damage: rebuild, never trust
                trace = None
            try:
                now = digest.result()
            except (OSError, ValueError):
                now = None
        if now is None or now != manifest.get("content"):
            self.last = "stale"
            return None
        if trace is None:
            self.last = "corrupt"
            return None
        self.last = "hit"
        self._loaded[key["path"]] = (key, now)
        try:
            os.utime(d / MANIFEST)  # recently used: evicted last
        except OSError:
            pass
        return trace

    def _read(self, d: Path, manifest: dict[str, Any], path: str) -> Trace:
        import pyarrow as pa
        import pyarrow.parquet as pq

        from tracedoc.load.shapes import all_frame_columns
        from tracedoc.trace import Device, Trace

        frames = {}
        for kind, cols in all_frame_columns().items():
            f = d / f"{kind}.parquet"
            crc, size = manifest["files"][kind]
            raw = read_regular(f, min(size, MAX_FRAME_BYTES))
            if len(raw) != size or zlib.crc32(raw) != crc:
                raise ValueError(f"{f}: checksum mismatch")
            strings = [c for c, t in cols if t in ("object", "category")]
            table = pq.read_table(pa.BufferReader(raw), read_dictionary=strings)
            if table.column_names != [c for c, _ in cols]:
                raise ValueError(f"{f}: columns differ")
            frames[kind] = _frame(table, cols)
            del table, raw
            pa.default_memory_pool().release_unused()  # the pool keeps freed pages: give them back
        t = manifest["trace"]
        devices = [
            Device(
                id=x["id"],
                name=x["name"],
                total_memory_bytes=x["total_memory_bytes"],
                compute_capability=tuple(x["compute_capability"]) if x["compute_capability"] else None,
                num_sms=x["num_sms"],
                vendor=x["vendor"],
            )
            for x in t["devices"]
        ]
        return Trace(
            path=path,
            devices=devices,
            origin_us=float(t["origin_us"]),
            span_us=float(t["span_us"]),
            n_events=int(t["n_events"]),
            metadata=t["metadata"],
            dropped_events=_counts(t.get("dropped_events")),
            record_window_end_us=t.get("record_window_end_us"),
            **frames,
        )

    # -- write -------------------------------------------------------------------------------
    def put(self, key: dict[str, Any], content: str, trace: Trace) -> bool:
        """Write ``trace``'s frames under ``key`` and the ``content`` digest of the bytes they
        were built from (atomically); False when it cannot be cached (a column pyarrow cannot
        store, a read-only or full disk, a folder of that name this cache did not write):
        the analysis goes on."""
        import orjson
        import pyarrow as pa
        import pyarrow.parquet as pq

        from tracedoc.schema import FRAME_COLUMNS

        final = self.entry_dir(key)
        try:
            final.parent.mkdir(parents=True, exist_ok=True)
            tmp = Path(tempfile.mkdtemp(prefix=".tmp-", dir=final.parent))
        except OSError:
            return False
        try:
            (tmp / MARKER).write_bytes(MARKER_TEXT)  # first: even a crashed write is provably ours
            files = {}
            for kind in FRAME_COLUMNS:
                sink = pa.BufferOutputStream()
                pq.write_table(pa.Table.from_pandas(getattr(trace, kind), preserve_index=False), sink)
                raw = sink.getvalue()
                (tmp / f"{kind}.parquet").write_bytes(raw)
                files[kind] = [zlib.crc32(raw), raw.size]
                del sink, raw
                pa.default_memory_pool().release_unused()  # the pool keeps freed pages: give them back
            manifest = {
                "key": key,
                "content": content,
                "files": files,
                "trace": {
                    "devices": [dv.to_dict() for dv in trace.devices],
                    "origin_us": trace.origin_us,
                    "span_us": trace.span_us,
                    "n_events": trace.n_events,
                    "metadata": trace.metadata,
                    "dropped_events": trace.dropped_events,
                    "record_window_end_us": trace.record_window_end_us,
                },
            }
            (tmp / MANIFEST).write_bytes(orjson.dumps(manifest, option=orjson.OPT_NON_STR_KEYS))
            if os.path.lexists(final) and not remove_entry(final):
                raise FileExistsError(f"{final} is not an entry of this cache")
            os.replace(tmp, final)
        except Exception:
            if not remove_entry(tmp):
                try:
                    os.rmdir(tmp)  # empty when even the marker could not be written
                except OSError:
                    pass
            return False
        self.evict(keep=final)
        return True

    def evict(self, keep: Path | None = None) -> int:
        """Remove entries (only this cache's, :func:`is_entry`) whose trace file is gone or whose
        manifest is unreadable, then the least recently used ones until the entries hold at
        most ``max_bytes``, and temporary folders of writes that crashed over an hour ago;
        returns how many entries were removed."""
        import orjson

        root = self.directory / LAYOUT
        entries = []
        for e in _folders(root):
            if e.name.startswith("."):  # a write in progress, or one a crash left
                try:
                    if time.time() - os.lstat(Path(e.path) / MARKER).st_mtime > _TMP_STALE_S:
                        remove_entry(e.path)
                except OSError:
                    pass
                continue
            if not is_entry(e.path):
                continue  # not ours: never removed, nor counted
            try:
                m = Path(e.path) / MANIFEST
                used = m.stat().st_mtime
                source = orjson.loads(read_regular(m, MAX_DOC_BYTES))["key"]["path"]
            except (OSError, ValueError, KeyError, TypeError):
                used, source = 0.0, None
            entries.append((used, _entry_bytes(e.path), Path(e.path), source))
        removed = 0
        total = sum(x[1] for x in entries)
        for _used, size, e, source in sorted(entries, key=lambda x: x[0]):
            gone = not isinstance(source, str) or not os.path.exists(source)
            if e != keep and (gone or total > self.max_bytes) and remove_entry(e):
                total -= size
                removed += 1
        return removed

    def load(self, path: str | os.PathLike[str], build: Callable[[], Trace]) -> Trace:
        """The trace at ``path`` from the cache, else ``build()`` it and cache the result,
        under the digest of the bytes ``build`` read (recorded as it read them: a ``build``
        that reads the file other than through :func:`tracedoc.load.source.read_trace_bytes`
        is not cached).

        Errors from ``build`` (a bad trace) propagate unchanged; nothing is cached for them.
        """
        key = self.key(path)
        if key is None:
            self.last = "off"
            return build()
        self._loaded.pop(key["path"], None)
        hit = self.get(key, str(path))
        if hit is not None:
            return hit
        with record_reads() as reads:
            trace = build()
        read = next((r for r in reversed(reads) if r.path == key["path"]), None)
        if read is not None:
            key = {**key, "size": read.size, "mtime_ns": read.mtime_ns}  # the file as it was read
            content = self.content(path, read)
            self._loaded[key["path"]] = (key, content)
            self.put(key, content, trace)
        return trace

    def signals(self, path: str | os.PathLike[str]) -> SignalStore | None:
        """The :class:`SignalStore` of the trace at ``path``, or None when it is not cacheable.
        After :meth:`load` of that path it belongs to the trace load returned (its key and
        digest, even when the file changed since); otherwise the file is hashed now."""
        key = self.key(path)
        if key is None:
            return None
        loaded = self._loaded.get(key["path"])
        if loaded is not None:
            return SignalStore(self, *loaded)
        try:
            return SignalStore(self, key, self.content(path))
        except (OSError, ValueError):
            return None

    def reports(self, path: str | os.PathLike[str], settings: Any) -> ReportStore | None:
        """The :class:`ReportStore` of the trace at ``path`` analysed under ``settings`` (a
        :class:`tracedoc.settings.Settings`), or None when the trace is not cacheable or its
        rule files cannot be hashed. Nothing is read here but ``stat`` and the rule files."""
        key = self.key(path)
        if key is None:
            return None
        rules = _rule_files_digest(tuple(str(p) for p in settings.rule_paths))
        if rules is None:
            return None
        inputs = hashlib.blake2b(f"{settings!r}\0{rules}".encode(), digest_size=16).hexdigest()
        return ReportStore(self, key, inputs)

    # -- maintenance -------------------------------------------------------------------------
    def explain(self, path: str | os.PathLike[str], settings: Any) -> dict[str, str]:
        """What this cache holds for the trace at ``path`` and whether ``analyze`` under
        ``settings`` (a :class:`tracedoc.settings.Settings`) would use it now, part by part: a
        dict ``{"frames": ..., "signals": ..., "report": ...}`` of one-line reasons (a part
        absent when the frames are not there to check it against). ``"current"`` means the part
        would be read. A stamp that differs names what differs (the code, the interpreter's or
        a library's version, the settings or rule files, the trace's bytes), so a warm run that
        analysed again can be told apart from one that read the stored report. Reads the file
        once to hash it (the check a run makes), when an entry exists. Never raises for a bad
        entry: a file that does not parse is reported as such.
        """
        p = str(path)
        key = self.key(p)
        if key is None:
            if p == "-" or "://" in p or not os.path.isfile(p):
                return {"frames": "not cached: not a local regular file"}
            return {"frames": f"not cached: smaller than the cache's {self.min_bytes:,} bytes"}
        entry = self.entry_dir(key)
        manifest = _read_doc(entry / MANIFEST)
        if manifest is None:
            return {"frames": "none stored"}
        if not isinstance(manifest, dict) or not is_entry(entry):
            return {"frames": "unreadable entry (it will be rebuilt)"}
        old = manifest.get("key")
        if old != key:
            fields = sorted(k for k in key if not isinstance(old, dict) or old.get(k) != key[k])
            return {"frames": f"stale: {', '.join(fields)} changed since it was written"}
        try:
            content = self.content(p)
        except (OSError, ValueError) as exc:
            return {"frames": f"cannot read the trace: {exc}"}
        if manifest.get("content") != content:
            return {"frames": "stale: the trace's bytes changed since it was written"}
        out = {"frames": "current"}
        # each store's own stamp, as its get() compares it
        doc = _read_doc(entry / SignalStore.NAME)
        stamp = doc.get("stamp") if isinstance(doc, dict) else None
        if doc is None:
            out["signals"] = "none stored"
        elif not isinstance(stamp, dict):
            out["signals"] = "unreadable (it will be rewritten)"
        else:
            out["signals"] = _stamp_difference(stamp, SignalStore(self, key, content).stamp)
            if out["signals"] == "current":
                n = len(doc["values"]) if isinstance(doc.get("values"), dict) else 0
                out["signals"] = f"current ({n} values)"
        store = self.reports(p, settings)
        doc = _read_doc(entry / ReportStore.NAME)
        stamp = doc.get("stamp") if isinstance(doc, dict) else None
        if doc is None:
            out["report"] = "none stored"
        elif store is None:
            out["report"] = "not used: the rule files cannot be hashed"
        elif not isinstance(stamp, dict) or not isinstance(doc.get("report"), dict):
            out["report"] = "unreadable (it will be rewritten)"
        else:
            out["report"] = _stamp_difference(stamp, {**store.stamp, "content": content})
        return out

    def info(self) -> CacheInfo:
        """Entries this cache wrote (:func:`is_entry`) and their bytes on disk."""
        entries, size = 0, 0
        for e in _folders(self.directory / LAYOUT):
            if not e.name.startswith(".") and is_entry(e.path):
                entries += 1
                size += _entry_bytes(e.path)
        return CacheInfo(str(self.directory), entries, size, available())

    def clear(self) -> int:
        """Remove every entry this cache wrote (:func:`remove_entry`), and the layout folder
        when that leaves it empty; returns how many entries were removed. Nothing it cannot
        prove it wrote is removed: other folders and files under the cache folder stay."""
        root = self.directory / LAYOUT
        n = sum(remove_entry(e.path) and not e.name.startswith(".") for e in _folders(root))
        try:
            root.rmdir()
        except OSError:
            pass
        return n


#: What a differing field of a store's stamp means, in the order :func:`_stamp_difference` asks.
_STAMP_FIELDS = (
    ("key", "stored for another version of the file"),
    ("code", "stored by other code (another tracedoc version or a changed file)"),
    ("libraries", "stored for other library versions"),
    ("inputs", "stored for other settings or rule files"),
    ("content", "stored for other bytes of the trace"),
)


def _stamp_difference(stored: dict[str, Any], now: dict[str, Any]) -> str:
    """``"current"``, or which field of a store's stamp (:class:`SignalStore`,
    :class:`ReportStore`; ``now`` is the stamp it would write) differs from ``stored``'s: the
    first that does, in :data:`_STAMP_FIELDS` order, in one line; the libraries by name."""
    for field, why in _STAMP_FIELDS:
        if field not in now or stored.get(field) == now[field]:
            continue
        libs, was = now[field], stored.get(field)
        if field == "libraries" and isinstance(was, dict):
            changed = [
                f"{k} {was.get(k)} (now {libs.get(k)})"
                for k in sorted(set(libs) | set(was))
                if was.get(k) != libs.get(k)
            ]
            return f"{why}: " + ", ".join(changed)
        return why
    return "current"


def _read_doc(path: Path) -> Any:
    """The JSON document of a store file (:class:`SignalStore`, :class:`ReportStore`), read as a
    regular file of at most :data:`MAX_DOC_BYTES`; None when it is missing, not such a file, or
    not JSON."""
    import orjson

    try:
        return orjson.loads(read_regular(path, MAX_DOC_BYTES))
    except (OSError, ValueError):  # orjson.JSONDecodeError is a ValueError
        return None


def _write_doc(entry: Path, name: str, data: bytes) -> bool:
    """Write a store file ``entry / name`` atomically (a temporary file of this process, then
    a rename); False when it cannot be written."""
    try:
        tmp = entry / f"{name}.tmp{os.getpid()}"
        tmp.write_bytes(data)
        os.replace(tmp, entry / name)
    except OSError:
        return False
    return True


@functools.lru_cache(maxsize=1)
def package_code_hash() -> str:
    """A hash of all of tracedoc's code: its version and every ``.py`` and ``.toml`` file of
    the package (signals, the peak table and cost models they read, rules, engine, report model).
    Stored signal values and reports are used only under the same hash: any change to what
    makes them invalidates them."""
    h = hashlib.blake2b(__version__.encode(), digest_size=16)
    root = Path(__file__).parent
    for f in sorted(root.rglob("*")):
        if f.suffix in (".py", ".toml") and "__pycache__" not in f.parts:
            h.update(str(f.relative_to(root)).encode())
            h.update(f.read_bytes())
    return h.hexdigest()


class SignalStore:
    """The computed signal values of one cached trace, stored beside its frames.

    A second ``analyze`` of the same trace, with other rules, selections or floors,
    seeds the analysis with these values instead of computing them again from the
    frames. The file carries the trace's cache key, its content digest and
    :func:`package_code_hash` (the signals read the peak table and the op cost models of
    ``tracedoc/perf`` too, so a hash of ``tracedoc/signals`` alone missed changes to them); a
    file whose stamp differs, or that does not parse, is
    ignored (and rewritten), never trusted. It is written only into an entry this cache
    wrote (:func:`is_entry`). Only values that survive a JSON round trip unchanged are
    stored (no NaN).
    """

    NAME = "signals.json"

    def __init__(self, cache: FrameCache, key: dict[str, Any], content: str) -> None:
        self.entry = cache.entry_dir(key)
        self.path = self.entry / self.NAME
        self.stamp = {"key": key, "content": content, "code": package_code_hash()}

    def get(self) -> dict[str, Any] | None:
        """``{"values", "errors", "idle_ledger"}`` when a current file exists, else None."""
        doc = _read_doc(self.path)
        if not isinstance(doc, dict) or doc.get("stamp") != self.stamp:
            return None
        if not all(isinstance(doc.get(k), dict) for k in ("values", "errors", "idle_ledger")):
            return None
        return doc

    def put(self, values: dict[str, Any], errors: dict[str, str], idle_ledger: dict[str, Any]) -> bool:
        """Store the values (atomically); False when there is no entry of this cache to store
        them in, or it cannot be written."""
        import orjson

        def round_trips(v: Any) -> bool:
            try:
                return orjson.loads(orjson.dumps(v)) == v
            except (TypeError, orjson.JSONEncodeError):
                return False

        kept = {k: v for k, v in values.items() if round_trips(v)}
        doc = {"stamp": self.stamp, "values": kept, "errors": dict(errors), "idle_ledger": idle_ledger}
        if not round_trips(idle_ledger) or not is_entry(self.entry):
            return False
        return _write_doc(self.entry, self.NAME, orjson.dumps(doc))


#: The distributions whose versions a stored report's stamp holds: the interpreter aside, those
#: that compute its figures (a new pandas or numpy may round a sum differently).
STAMPED_LIBRARIES = ("numpy", "pandas", "msgspec", "orjson", "pyarrow")


@functools.lru_cache(maxsize=1)
def library_versions() -> dict[str, str | None]:
    """The Python version and the installed versions of :data:`STAMPED_LIBRARIES` (None when
    one is not installed), read from their metadata: nothing is imported."""
    import sys
    from importlib import metadata

    out: dict[str, str | None] = {"python": sys.version.split()[0]}
    for name in STAMPED_LIBRARIES:
        try:
            out[name] = metadata.version(name)
        except metadata.PackageNotFoundError:
            out[name] = None
    return out


#: Bounds on the rule files hashed into a stored report's stamp: more files or bytes than
#: this and no report is stored or read (the analysis runs as usual).
MAX_RULE_FILES = 1000
MAX_RULE_BYTES = 16 << 20


def _rule_files_digest(paths: tuple[str, ...]) -> str | None:
    """A digest of the names and bytes of the rule files the rule ``paths`` name, listed as the
    rules engine lists them (:func:`tracedoc.tomlfile.rule_files`: a file, or a folder's
    ``*.toml`` files); None when a path is missing, a file cannot be read as a regular file, or
    the bounds are passed: then no report is stored or read, and the rules load (and fail) as
    usual."""
    from tracedoc.errors import RuleError
    from tracedoc.tomlfile import rule_files

    try:
        found = rule_files(list(paths))
    except (RuleError, OSError):
        return None
    if len(found) > MAX_RULE_FILES:
        return None
    h = hashlib.blake2b(digest_size=16)
    total = 0
    for f in found:
        try:
            data = read_regular(f, MAX_RULE_BYTES)
        except (OSError, ValueError):
            return None
        total += len(data)
        if total > MAX_RULE_BYTES:
            return None
        h.update(str(f).encode() + b"\0")
        h.update(len(data).to_bytes(8, "little"))
        h.update(data)
    return h.hexdigest()


class ReportStore:
    """The report of one cached trace under one set of analysis settings, stored beside its
    frames (``report.json``), so an ``analyze`` that changes nothing reads it back instead of
    loading and analysing the trace (issue 24: the warm path).

    The stamp holds everything a report depends on:

    * the trace: its cache key (real path, size, mtime) and the SHA-256 of all its bytes,
      checked against the file as it is now, as the frames are (module docstring);
    * the code: :func:`package_code_hash`, every file of the package, and the versions of the
      interpreter and the libraries that compute the figures (:func:`library_versions`);
    * the analysis: the whole :class:`tracedoc.settings.Settings` (selectors, rule paths,
      thresholds, floors, size limit, ``TRACEDOC_*`` variables), and the names and bytes of
      the rule files its rule paths hold (:func:`_rule_files_digest`).

    The content digest is computed only once everything else in the stamp matches, so a run
    with other settings does not hash the file for it. The store holds the report as a dict (the
    CLI stores one only when ``Report.from_dict(d).to_dict() == d``, and reads it back through
    ``Report.from_dict``), and only in an entry this cache wrote (:func:`is_entry`); a file
    whose stamp differs, or that does not parse, is ignored and replaced, never trusted.
    """

    NAME = "report.json"

    def __init__(self, cache: FrameCache, key: dict[str, Any], inputs: str) -> None:
        self.cache = cache
        self.key = key
        self.entry = cache.entry_dir(key)
        self.path = self.entry / self.NAME
        self.stamp = {"key": key, "code": package_code_hash(), "inputs": inputs, "libraries": library_versions()}

    def get(self, path: str | os.PathLike[str]) -> dict[str, Any] | None:
        """The stored report (the dict of ``Report.to_dict``), or None when there is none for
        this stamp or the trace's bytes changed. Its ``trace["path"]`` is ``path`` as given
        now (another spelling of the same real path shares the entry)."""
        doc = _read_doc(self.path)
        if not isinstance(doc, dict) or not isinstance(doc.get("report"), dict):
            return None
        stamp, report = doc.get("stamp"), doc["report"]
        if not isinstance(stamp, dict) or {k: stamp.get(k) for k in self.stamp} != self.stamp:
            return None
        if not isinstance(report.get("trace"), dict):
            return None
        try:
            if self.cache.content(path) != stamp.get("content"):
                return None
        except (OSError, ValueError):
            return None
        report["trace"]["path"] = str(path)  # the key is the real path; the run names it as given
        return report

    def put(self, report: dict[str, Any]) -> bool:
        """Store ``report`` (a ``Report.to_dict``, made JSON-safe by the caller) atomically,
        under the digest of the bytes it was built from; False when that digest is not known
        (the trace was not loaded through this cache), it is not JSON, or there is no entry of
        this cache to store it in."""
        import orjson

        loaded = self.cache._loaded.get(self.key["path"])
        if loaded is None or loaded[0] != self.key or not is_entry(self.entry):
            return False
        try:
            data = orjson.dumps({"stamp": {**self.stamp, "content": loaded[1]}, "report": report})
        except (TypeError, orjson.JSONEncodeError):
            return False
        return _write_doc(self.entry, self.NAME, data)


def default_cache(
    directory: str | os.PathLike[str] | None = None, enabled: bool = True, env: Any = None
) -> FrameCache | None:
    """The CLI's cache: a :class:`FrameCache` in ``directory`` (default: ``env.cache_dir``,
    else :func:`default_cache_dir`), or None when disabled or pyarrow is missing.

    Args:
        env: a :class:`tracedoc.settings.Environment` (its ``cache_dir``, ``cache_min_bytes``
            and ``cache_max_bytes`` replace the defaults); None: the defaults.
    """
    if not enabled or not available():
        return None
    kw: dict[str, Any] = {}
    if env is not None:
        directory = directory if directory is not None else env.cache_dir
        if env.cache_min_bytes is not None:
            kw["min_bytes"] = env.cache_min_bytes
        if env.cache_max_bytes is not None:
            kw["max_bytes"] = env.cache_max_bytes
    return FrameCache(directory, **kw)
