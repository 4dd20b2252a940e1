"""Build a large Kineto trace by repeating a real one end to end, ids kept unique.

    python benchmarks/make_trace.py ../shared/traces/v100_resnet50_workers0.pt.trace.json.gz 10 bench-out/x10.json [--gzip]

Each repeat k (0-based) is the source's events with
  * every timestamp (``ts``, ``args["external ts"]``) shifted by ``k * (span + 1 ms)``
    so the repeats follow one another;
  * ``args.correlation``, ``args["External id"]``/``["external id"]`` and flow ``id``
    offset by ``k * (max id + 1)`` so kernels still link to their own runtime call only;
  * ``ProfilerStep#N`` renumbered to ``N + k * (max step + 1)``.
Metadata events (``ph == "M"``) are written once. The output is streamed repeat by
repeat, so building a multi-GB trace needs memory for one repeat only.
"""

from __future__ import annotations

import argparse
import copy
import gzip
import re
import sys

import orjson

_STEP = re.compile(r"^ProfilerStep#(\d+)$")
_ID_ARGS = ("correlation", "External id", "external id")


def _read(path: str) -> dict:
    with open(path, "rb") as fh:
        head = fh.read(2)
    opener = gzip.open if head == b"\x1f\x8b" else open
    with opener(path, "rb") as fh:
        return orjson.loads(fh.read())


def build(src: str, repeats: int, out: str, compress: bool = False) -> int:
    """Write ``src`` repeated ``repeats`` times to ``out``; returns the number of events."""
    doc = _read(src)
    events = doc.pop("traceEvents")
    tss = [e["ts"] for e in events if isinstance(e.get("ts"), (int, float)) and e.get("ph") != "M"]
    ends = [e["ts"] + e.get("dur", 0) for e in events if isinstance(e.get("ts"), (int, float)) and e.get("ph") != "M"]
    shift = (max(ends) - min(tss)) + 1000
    if all(isinstance(t, int) for t in tss):
        shift = int(shift)
    max_id = 0
    max_step = 0
    for e in events:
        a = e.get("args") or {}
        for k in _ID_ARGS:
            if isinstance(a.get(k), int):
                max_id = max(max_id, a[k])
        if isinstance(e.get("id"), int):
            max_id = max(max_id, e["id"])
        m = _STEP.match(str(e.get("name", "")))
        if m:
            max_step = max(max_step, int(m.group(1)))
    id_step, step_step = max_id + 1, max_step + 1
    head = orjson.dumps(doc)[:-1]  # '{...' without the closing brace
    fh = gzip.open(out, "wb", compresslevel=6) if compress else open(out, "wb")
    n = 0
    with fh:
        fh.write(b'{"traceEvents":[')
        first = True
        for k in range(repeats):
            chunk = []
            for e in events:
                if e.get("ph") == "M":
                    if k:
                        continue
                    chunk.append(e)
                    continue
                if k:
                    e = copy.deepcopy(e)
                    if isinstance(e.get("ts"), (int, float)):
                        e["ts"] += k * shift
                    if isinstance(e.get("id"), int):
                        e["id"] += k * id_step
                    a = e.get("args")
                    if isinstance(a, dict):
                        for key in _ID_ARGS:
                            if isinstance(a.get(key), int):
                                a[key] += k * id_step
                        if isinstance(a.get("external ts"), (int, float)):
                            a["external ts"] += k * shift
                    m = _STEP.match(str(e.get("name", "")))
                    if m:
                        e["name"] = f"ProfilerStep#{int(m.group(1)) + k * step_step}"
                chunk.append(e)
            body = orjson.dumps(chunk)[1:-1]
            if body:
                if not first:
                    fh.write(b",")
                fh.write(body)
                first = False
            n += len(chunk)
        fh.write(b"]")
        if len(head) > 1:
            fh.write(b"," + head[1:])
        fh.write(b"}")
    return n


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("source")
    ap.add_argument("repeats", type=int)
    ap.add_argument("out")
    ap.add_argument("--gzip", action="store_true", help="gzip the output")
    a = ap.parse_args(argv)
    n = build(a.source, a.repeats, a.out, a.gzip)
    print(f"{a.out}: {n} events", file=sys.stderr)
    return 0


if __name__ == "__main__":
    sys.exit(main())
