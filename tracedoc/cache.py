"""The frame cache: the frames a trace loads, kept as Parquet so the next ``analyze`` of
the same file (other rules, other options) skips reading and decoding the JSON.

Layout: one entry per trace file, a folder named by a hash of the file's real path::

    <cache dir>/v1/<blake2b(realpath)[:32]>/
        manifest.json      key, trace-level fields, CRC-32 and size of every Parquet file
        ops.parquet  runtime.parquet  kernels.parquet  ...   one file per frame

**Key.** An entry is used only when all of these equal the file now: its real path, its
size in bytes, its ``st_mtime_ns``, and a *sampled content hash*: BLAKE2b-128 over the
file's first MiB, last MiB and 64 blocks of 64 KiB spread evenly between them (at most
about 6 MiB read, whatever the file size). Hashing all of a 300 MB trace takes about as
long as a cached analysis itself (measured in ``docs/scale.md``), so the hash is sampled:
size and mtime catch every ordinary rewrite, the sample catches a rewrite that kept
both (``cp -p``, a restored backup) whenever it changed any sampled byte. An edit that
keeps size and mtime and touches only unsampled bytes is not detected; ``--no-cache``
or ``tracedoc cache clear`` is the remedy. The tracedoc version and the frame schema
are part of the key too, so an upgrade never reads an older layout.

**Trust.** An entry is rebuilt, never trusted, when its manifest is missing or not
JSON, its key differs (stale), a Parquet file is missing or its CRC-32 or size differ
from the manifest (corrupt), or the frames read back lack a documented column.
Entries are written to a temporary folder and renamed into place, so a crash or a
concurrent writer never leaves half an entry under the final name.

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
import shutil
import stat
import tempfile
import zlib
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any, Callable

from tracedoc._version import __version__

if TYPE_CHECKING:
    from tracedoc.trace import Trace

#: Entry layout; v2 added the Record Window End instant to the manifest (older entries miss).
LAYOUT = "v2"
#: Traces smaller than this on disk are not cached (``TRACEDOC_CACHE_MIN_BYTES`` replaces it,
#: through :class:`tracedoc.settings.Environment`).
MIN_BYTES = 4 << 20
#: The cache folder is trimmed to this many bytes (least recently used entries go first).
MAX_BYTES = 8 << 30
_HEAD = 1 << 20
_BLOCK = 64 << 10
_BLOCKS = 64


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


def sampled_hash(path: str | os.PathLike[str], size: int) -> str:
    """BLAKE2b-128 (hex) of the first and last MiB and 64 evenly spread 64 KiB blocks.

    Reads at most ``2 MiB + 64 * 64 KiB`` (6 MiB), so its cost does not grow with the file.
    """
    h = hashlib.blake2b(digest_size=16)
    h.update(size.to_bytes(8, "little"))
    with open(path, "rb") as fh:
        if size <= 2 * _HEAD + _BLOCKS * _BLOCK:
            h.update(fh.read())
            return h.hexdigest()
        h.update(fh.read(_HEAD))
        span = size - 2 * _HEAD - _BLOCK
        for i in range(_BLOCKS):
            fh.seek(_HEAD + span * i // (_BLOCKS - 1))
            h.update(fh.read(_BLOCK))
        fh.seek(size - _HEAD)
        h.update(fh.read(_HEAD))
    return h.hexdigest()


def _frame(table, cols: list[tuple[str, str]]):
    """A pandas frame with the documented dtypes from a Parquet table whose string
    columns were read dictionary-encoded: each distinct string becomes one Python
    object, and the column is a numpy ``take`` of them (pandas' own conversion to
    ``object`` would build one string per row, about 1 s on a 300 MB trace)."""
    import numpy as np
    import pandas as pd
    import pyarrow as pa

    data = {}
    for c, t in cols:
        col = table.column(c)
        if t == "object":
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
        else:
            data[c] = pd.Series(col.to_numpy(), dtype=t)
    return pd.DataFrame(data)


def _crc(path: Path) -> tuple[int, int]:
    crc, n = 0, 0
    with open(path, "rb") as fh:
        while chunk := fh.read(8 << 20):
            crc = zlib.crc32(chunk, crc)
            n += len(chunk)
    return crc, n


@dataclass
class CacheInfo:
    """What ``tracedoc cache info`` prints: folder, entries, bytes on disk."""

    directory: str
    entries: int
    bytes: int
    available: bool


class FrameCache:
    """A Parquet frame cache in ``directory`` (see the module docstring for key and layout).

    Args:
        directory: the cache folder; created on the first write.
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

    # -- key ---------------------------------------------------------------------------------
    def key(self, path: str | os.PathLike[str]) -> dict[str, Any] | None:
        """The entry key of a local regular file, or None when it cannot be cached."""
        p = str(path)
        if p == "-" or "://" in p:
            return None
        try:
            st = os.stat(p)
        except OSError:
            return None
        if not stat.S_ISREG(st.st_mode) or st.st_size < self.min_bytes:
            return None
        from tracedoc.schema import FRAME_COLUMNS

        schema = hashlib.blake2b(repr(FRAME_COLUMNS).encode(), digest_size=8).hexdigest()
        return {
            "layout": LAYOUT,
            "tracedoc": __version__,
            "schema": schema,
            "path": os.path.realpath(p),
            "size": st.st_size,
            "mtime_ns": st.st_mtime_ns,
            "content_hash": sampled_hash(p, st.st_size),
        }

    def entry_dir(self, key: dict[str, Any]) -> Path:
        """The folder of ``key``'s entry (one per real path)."""
        name = hashlib.blake2b(key["path"].encode(), digest_size=16).hexdigest()
        return self.directory / LAYOUT / name

    # -- read --------------------------------------------------------------------------------
    def get(self, key: dict[str, Any], path: str) -> Trace | None:
        """The cached trace for ``key``, or None (sets :attr:`last` to why)."""
        import orjson

        d = self.entry_dir(key)
        try:
            manifest = orjson.loads((d / "manifest.json").read_bytes())
        except FileNotFoundError:
            self.last = "miss"
            return None
        except (OSError, orjson.JSONDecodeError):
            self.last = "corrupt"
            return None
        if not isinstance(manifest, dict) or manifest.get("key") != key:
            self.last = "stale"
            return None
        try:
            trace = self._read(d, manifest, path)
        except Exception:  # any damage: rebuild, never trust
            self.last = "corrupt"
            return None
        self.last = "hit"
        try:
            os.utime(d / "manifest.json")  # recently used: evicted last
        except OSError:
            pass
        return trace

    def _read(self, d: Path, manifest: dict[str, Any], path: str) -> Trace:
        import pyarrow as pa
        import pyarrow.parquet as pq

        from tracedoc.schema import FRAME_COLUMNS
        from tracedoc.trace import Device, Trace

        frames = {}
        for kind, cols in FRAME_COLUMNS.items():
            f = d / f"{kind}.parquet"
            crc, size = manifest["files"][kind]
            raw = f.read_bytes()
            if len(raw) != size or zlib.crc32(raw) != crc:
                raise ValueError(f"{f}: checksum mismatch")
            strings = [c for c, t in cols if t == "object"]
            table = pq.read_table(pa.BufferReader(raw), read_dictionary=strings)
            if table.column_names != [c for c, _ in cols]:
                raise ValueError(f"{f}: columns differ")
            df = _frame(table, cols)
            frames[kind] = df
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
            record_window_end_us=t.get("record_window_end_us"),
            **frames,
        )

    # -- write -------------------------------------------------------------------------------
    def put(self, key: dict[str, Any], trace: Trace) -> bool:
        """Write ``trace``'s frames under ``key`` (atomically); False when it cannot be cached
        (a column pyarrow cannot store, a read-only or full disk): the analysis goes on."""
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
            files = {}
            for kind in FRAME_COLUMNS:
                f = tmp / f"{kind}.parquet"
                pq.write_table(pa.Table.from_pandas(getattr(trace, kind), preserve_index=False), f)
                files[kind] = list(_crc(f))
            manifest = {
                "key": key,
                "files": files,
                "trace": {
                    "devices": [dv.to_dict() for dv in trace.devices],
                    "origin_us": trace.origin_us,
                    "span_us": trace.span_us,
                    "n_events": trace.n_events,
                    "metadata": trace.metadata,
                    "record_window_end_us": trace.record_window_end_us,
                },
            }
            (tmp / "manifest.json").write_bytes(orjson.dumps(manifest, option=orjson.OPT_NON_STR_KEYS))
            if final.exists():
                shutil.rmtree(final, ignore_errors=True)
            os.replace(tmp, final)
        except Exception:
            shutil.rmtree(tmp, ignore_errors=True)
            return False
        self.evict(keep=final)
        return True

    def evict(self, keep: Path | None = None) -> int:
        """Remove entries whose trace file is gone, then the least recently used ones until
        the folder holds at most ``max_bytes``; returns how many were removed."""
        import orjson

        root = self.directory / LAYOUT
        entries = []
        for e in root.iterdir() if root.is_dir() else []:
            if not e.is_dir() or e.name.startswith("."):
                continue
            try:
                m = e / "manifest.json"
                used = m.stat().st_mtime
                size = sum(f.stat().st_size for f in e.iterdir())
                source = orjson.loads(m.read_bytes())["key"]["path"]
            except (OSError, ValueError, KeyError, TypeError):
                used, size, source = 0.0, 0, None
            entries.append((used, size, e, source))
        removed = 0
        total = sum(x[1] for x in entries)
        for _used, size, e, source in sorted(entries, key=lambda x: x[0]):
            gone = source is None or not os.path.exists(source)
            if e != keep and (gone or total > self.max_bytes):
                shutil.rmtree(e, ignore_errors=True)
                total -= size
                removed += 1
        return removed

    def load(self, path: str | os.PathLike[str], build: Callable[[], Trace]) -> Trace:
        """The trace at ``path`` from the cache, else ``build()`` it and cache the result.

        Errors from ``build`` (a bad trace) propagate unchanged; nothing is cached for them.
        """
        key = self.key(path)
        if key is None:
            self.last = "off"
            return build()
        hit = self.get(key, str(path))
        if hit is not None:
            return hit
        trace = build()
        self.put(key, trace)
        return trace

    def signals(self, path: str | os.PathLike[str]) -> SignalStore | None:
        """The :class:`SignalStore` of the trace at ``path``, or None when it is not cacheable."""
        key = self.key(path)
        return SignalStore(self, key) if key is not None else None

    # -- maintenance -------------------------------------------------------------------------
    def info(self) -> CacheInfo:
        """Entries and bytes under the cache folder."""
        root = self.directory / LAYOUT
        entries, size = 0, 0
        if root.is_dir():
            for e in root.iterdir():
                if e.is_dir() and not e.name.startswith("."):
                    entries += 1
                for f in e.rglob("*") if e.is_dir() else [e]:
                    try:
                        size += f.stat().st_size if f.is_file() else 0
                    except OSError:
                        pass
        return CacheInfo(str(self.directory), entries, size, available())

    def clear(self) -> int:
        """Remove every entry; returns how many were removed. Only tracedoc's own layout
        folder (``v1/``) is deleted, never anything else under the cache folder."""
        root = self.directory / LAYOUT
        if not root.is_dir():
            return 0
        n = sum(1 for e in root.iterdir() if e.is_dir() and not e.name.startswith("."))
        shutil.rmtree(root)
        return n


@functools.lru_cache(maxsize=1)
def signal_code_hash() -> str:
    """A hash of what computes signals: tracedoc's version and every file of
    ``tracedoc/signals`` (code and pattern tables). Stored signal values are used only
    under the same hash, so a change to any signal invalidates them."""
    h = hashlib.blake2b(__version__.encode(), digest_size=16)
    root = Path(__file__).parent / "signals"
    for f in sorted(root.glob("*")):
        if f.suffix in (".py", ".toml"):
            h.update(f.name.encode())
            h.update(f.read_bytes())
    return h.hexdigest()


class SignalStore:
    """The computed signal values of one cached trace, stored beside its frames.

    A second ``analyze`` of the same trace, with other rules, selections or floors,
    seeds the analysis with these values instead of computing them again from the
    frames. The file carries the trace's cache key and :func:`signal_code_hash`; a file
    whose stamp differs, or that does not parse, is ignored (and rewritten), never trusted.
    Only values that survive a JSON round trip unchanged are stored (no NaN).
    """

    NAME = "signals.json"

    def __init__(self, cache: FrameCache, key: dict[str, Any]) -> None:
        self.path = cache.entry_dir(key) / self.NAME
        self.stamp = {"key": key, "code": signal_code_hash()}

    def get(self) -> dict[str, Any] | None:
        """``{"values", "errors", "idle_ledger"}`` when a current file exists, else None."""
        import orjson

        try:
            doc = orjson.loads(self.path.read_bytes())
        except (OSError, orjson.JSONDecodeError):
            return None
        if not isinstance(doc, dict) or doc.get("stamp") != self.stamp:
            return None
        if not all(isinstance(doc.get(k), dict) for k in ("values", "errors", "idle_ledger")):
            return None
        return doc

    def put(self, values: dict[str, Any], errors: dict[str, str], idle_ledger: dict[str, Any]) -> bool:
        """Store the values (atomically); False when the entry folder cannot be written."""
        import orjson

        def round_trips(v: Any) -> bool:
            try:
                return orjson.loads(orjson.dumps(v)) == v
            except (TypeError, orjson.JSONEncodeError):
                return False

        kept = {k: v for k, v in values.items() if round_trips(v)}
        doc = {"stamp": self.stamp, "values": kept, "errors": dict(errors), "idle_ledger": idle_ledger}
        if not round_trips(idle_ledger):
            return False
        try:
            self.path.parent.mkdir(parents=True, exist_ok=True)
            tmp = self.path.with_suffix(f".tmp{os.getpid()}")
            tmp.write_bytes(orjson.dumps(doc))
            os.replace(tmp, self.path)
        except OSError:
            return False
        return True


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
