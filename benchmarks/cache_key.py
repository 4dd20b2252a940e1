"""The warm-path cost of the frame cache's content key (issue 21): full SHA-256 against the
sampled hash it replaced, interleaved, in the same run.

    python benchmarks/cache_key.py                    # bench-out/v100_resnet50_workers0_x10.json (301 MB)
    python benchmarks/cache_key.py --runs 7 --trace some.json --cold

Two caches of the same trace, each warmed once (a miss writes its entry and signal values):

* **full** (the key now): :class:`tracedoc.cache.FrameCache`; on a hit the whole file is
  hashed (SHA-256) in a second thread while the Parquet frames are read, and both the frames
  and the stored signal values are used only when the digests agree;
* **sampled** (the baseline, the key before): the same class with its content digest
  replaced by the sampled BLAKE2b of the first and last MiB and 64 blocks of 64 KiB
  (:func:`sampled_hash`, as it was), which misses edits of the bytes between.

Each run is a fresh process (``python -c``) that imports everything, then times, on a cache
hit: ``load`` (cache check and frames: the step the key changes) and ``load`` + the analysis
with the stored signal values (the warm ``analyze`` minus interpreter start and rendering).
Rounds alternate the order (full, sampled / sampled, full), so a slow spell of the shared
machine hits both alike. Prints every run, the medians and the ratio full / sampled of the
medians; also the time of the SHA-256 of the file alone (what the second thread hides).
With ``--cold``, the same for a miss (a fresh cache folder each run): the digest is computed
while the trace is read, the sampled hash by a separate read.
"""

from __future__ import annotations

import argparse
import hashlib
import json
import os
import statistics
import subprocess
import sys
import tempfile
from pathlib import Path

HERE = Path(__file__).resolve().parent
sys.path.insert(0, str(HERE))

_HEAD = 1 << 20
_BLOCK = 64 << 10
_BLOCKS = 64


def sampled_hash(path: str | os.PathLike[str]) -> str:
    """The content digest before issue 21: BLAKE2b-128 of the size, the first and last MiB and
    64 evenly spread 64 KiB blocks (at most 6 MiB read)."""
    size = os.stat(path).st_size
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


_CHILD = r"""
import json, sys, time
sys.path.insert(0, sys.argv[4])
variant, path, cdir = sys.argv[1:4]
import pandas, pyarrow.parquet  # imported untimed: both sides need them
from cache_key import sampled_hash
from tracedoc import pipeline
from tracedoc.cache import FrameCache
from tracedoc.config import Config
from tracedoc.load import load
from tracedoc.load.source import file_sha256
from tracedoc.settings import Environment, Settings

class Sampled(FrameCache):
    def content(self, p, read=None):
        return sampled_hash(p)

settings = Settings.from_config(Config(), env=Environment.read({}))
rules = settings.rules()
cache = (Sampled if variant == "sampled" else FrameCache)(cdir, min_bytes=0)
t0 = time.perf_counter()
trace = load(path, cache=cache)
t1 = time.perf_counter()
pipeline.analyze(trace, settings, rules=rules, signal_store=cache.signals(path))
t2 = time.perf_counter()
digest = time.perf_counter()
file_sha256(path)
digest = time.perf_counter() - digest
print(json.dumps({"last": cache.last, "load_s": t1 - t0, "warm_s": t2 - t0, "sha256_s": digest}))
"""


def _run(variant: str, trace: Path, cdir: Path) -> dict:
    out = subprocess.run(
        [sys.executable, "-c", _CHILD, variant, str(trace), str(cdir), str(HERE)],
        capture_output=True,
        text=True,
        check=True,
        cwd=HERE.parent,
    )
    return json.loads(out.stdout.strip().splitlines()[-1])


def _table(label: str, runs: dict[str, list[dict]], field: str) -> None:
    full = statistics.median(r[field] for r in runs["full"])
    base = statistics.median(r[field] for r in runs["sampled"])
    print(f"{label}: full {full:.3f} s, sampled {base:.3f} s, ratio full/sampled {full / base:.3f} (medians)")


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--trace", type=Path, help="trace file (default: the x10 benchmark trace, built if missing)")
    ap.add_argument("--runs", type=int, default=5, help="runs per side (default 5)")
    ap.add_argument("--cold", action="store_true", help="also time a miss (fresh cache folder each run)")
    a = ap.parse_args(argv)
    if a.trace is None:
        from run import DEFAULT_SOURCE, ensure_trace

        a.trace = ensure_trace(DEFAULT_SOURCE, 10, False)
    trace = a.trace.resolve()
    print(f"trace: {trace} ({trace.stat().st_size / 1e6:,.0f} MB), {a.runs} runs per side, interleaved")
    with tempfile.TemporaryDirectory(prefix="cache-key-") as tmp:
        dirs = {v: Path(tmp) / v for v in ("full", "sampled")}
        for v, d in dirs.items():  # warm each cache once: entry and signal values
            assert _run(v, trace, d)["last"] == "miss"
        runs: dict[str, list[dict]] = {"full": [], "sampled": []}
        for i in range(a.runs):
            for v in ("full", "sampled") if i % 2 == 0 else ("sampled", "full"):
                r = _run(v, trace, dirs[v])
                assert r["last"] == "hit", r
                runs[v].append(r)
                print(f"  warm {v:7s} load {r['load_s']:.3f} s, load+analysis {r['warm_s']:.3f} s")
        _table("warm load (cache check + frames)", runs, "load_s")
        _table("warm load + analysis with stored signals", runs, "warm_s")
        print(f"SHA-256 of the file alone: {statistics.median(r['sha256_s'] for r in runs['full']):.3f} s (median)")
        if a.cold:
            cold: dict[str, list[dict]] = {"full": [], "sampled": []}
            for i in range(a.runs):
                for v in ("full", "sampled") if i % 2 == 0 else ("sampled", "full"):
                    r = _run(v, trace, Path(tmp) / f"cold-{v}-{i}")
                    assert r["last"] == "miss", r
                    cold[v].append(r)
                    print(f"  cold {v:7s} load {r['load_s']:.3f} s, load+analysis {r['warm_s']:.3f} s")
            _table("cold load (miss: read, decode, write the entry)", cold, "load_s")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
