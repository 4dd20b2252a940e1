"""The frame cache removes only what it can prove it wrote (issue 21, "The frame cache").

The rule: whatever else lies under the cache folder (folders without the marker, a marker
with other bytes, a link to a real entry, files of any name beside or inside an entry),
eviction, ``FrameCache.clear`` and ``tracedoc cache clear`` leave every byte of it, and
remove the entries the cache wrote.
"""

from __future__ import annotations

import os
import shutil
from pathlib import Path

from conftest import FIXTURES
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from typer.testing import CliRunner

from tracedoc.cache import LAYOUT, MANIFEST, MARKER, MARKER_TEXT, FrameCache, is_entry
from tracedoc.cli import app
from tracedoc.load import load

REAL = FIXTURES / "v100_resnet50_workers0.pt.trace.json.gz"
runner = CliRunner()

_NAMES = st.sampled_from(["a", "data", "0123456789abcdef0123456789abcdef", ".hidden", "ops.parquet", MARKER])
#: names the cache never writes in an entry
_FOREIGN_IN_ENTRY = st.sampled_from(["notes.txt", "x.parquet", "signals.json.bak", "manifest.json~", "sub"])
#: marker contents that are not exactly the cache's: other versions, truncations, extensions
_BAD_MARKERS = st.one_of(
    st.binary(max_size=64).filter(lambda b: b != MARKER_TEXT),
    st.just(MARKER_TEXT[:-1]),
    st.just(MARKER_TEXT + b"x"),
    st.just(MARKER_TEXT.replace(b"1", b"2")),
)


def _snapshot(root: Path) -> dict[str, bytes | str]:
    """Every path under ``root`` (links not followed) with its bytes, its link target or 'dir'."""
    out: dict[str, bytes | str] = {}
    for dirpath, dirnames, filenames in os.walk(root):
        for n in dirnames + filenames:
            p = Path(dirpath) / n
            rel = str(p.relative_to(root))
            out[rel] = "link:" + os.readlink(p) if p.is_symlink() else "dir" if p.is_dir() else p.read_bytes()
    return out


def _plant(layout: Path, outside: Path, plan: list[tuple[str, str, bytes]]) -> None:
    """Put foreign things into the layout folder: for each (name, kind, payload) a folder with
    no marker, a folder with a wrong marker, or a link to a folder holding a true marker."""
    for i, (name, kind, payload) in enumerate(plan):
        d = layout / f"{name}{i}"
        if kind == "link":
            target = outside / f"t{i}"
            target.mkdir(parents=True)
            (target / MARKER).write_bytes(MARKER_TEXT)
            (target / MANIFEST).write_bytes(payload)
            d.symlink_to(target, target_is_directory=True)
            continue
        d.mkdir()
        (d / MANIFEST).write_bytes(payload)
        (d / "ops.parquet").write_bytes(payload)
        if kind == "bad-marker":
            (d / MARKER).write_bytes(payload)


def _entry(cache: FrameCache, tmp: Path, name: str) -> Path:
    p = tmp / f"{name}.json.gz"
    shutil.copy(REAL, p)
    load(p, cache=cache)
    entry = cache.entry_dir(cache.key(p))
    assert is_entry(entry)
    return entry


@settings(max_examples=15, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(
    plan=st.lists(
        st.tuples(_NAMES, st.sampled_from(["no-marker", "bad-marker", "link"]), _BAD_MARKERS), min_size=1, max_size=5
    ),
    extra=_FOREIGN_IN_ENTRY,
    how=st.sampled_from(["evict", "clear", "cli"]),
)
def test_only_entries_the_cache_wrote_are_ever_removed(tmp_path_factory, plan, extra, how):
    tmp = tmp_path_factory.mktemp("own")
    cdir = tmp / "cache"
    cache = FrameCache(cdir, min_bytes=0)
    mine = _entry(cache, tmp, "mine")
    kept = _entry(cache, tmp, "kept")
    layout = cdir / LAYOUT
    _plant(layout, tmp / "outside", plan)
    (layout / "loose-file").write_bytes(b"user data")
    if extra == "sub":
        (kept / extra).mkdir()
        (kept / extra / MANIFEST).write_bytes(b"not the cache's")
    else:
        (kept / extra).write_bytes(b"user data")
    ours = (str(mine.relative_to(cdir)), str(kept.relative_to(cdir)))
    foreign = {k: v for k, v in _snapshot(cdir).items() if not k.startswith(ours) or extra in k}
    outside_before = _snapshot(tmp / "outside")

    if how == "evict":
        (tmp / "mine.json.gz").unlink()  # its trace is gone: the entry must go
        (tmp / "kept.json.gz").unlink()
        cache.max_bytes = 1
        cache.evict()
    elif how == "clear":
        cache.clear()
    else:
        r = runner.invoke(app, ["cache", "clear", "--cache-dir", str(cdir)])
        assert r.exit_code == 0, r.output

    after = _snapshot(cdir)
    for path, content in foreign.items():
        assert after.get(path) == content, f"{path} was changed or removed"
    assert _snapshot(tmp / "outside") == outside_before
    assert not mine.exists()  # the cache's own entry is removed
    # the entry holding a file the cache did not write stays, with that file
    assert is_entry(kept) and sorted(os.listdir(kept)) == sorted([MARKER, extra])


def test_a_folder_named_like_an_entry_but_not_marked_is_neither_read_nor_replaced(tmp_path):
    p = tmp_path / "t.json.gz"
    shutil.copy(REAL, p)
    cache = FrameCache(tmp_path / "c", min_bytes=0)
    d = cache.entry_dir(cache.key(p))
    d.mkdir(parents=True)
    (d / "precious.txt").write_bytes(b"keep me")
    fresh = load(p, cache=cache)
    assert cache.last == "miss" and fresh.n_events > 0
    assert (d / "precious.txt").read_bytes() == b"keep me" and not is_entry(d)
    assert cache.clear() == 0 and (d / "precious.txt").read_bytes() == b"keep me"
