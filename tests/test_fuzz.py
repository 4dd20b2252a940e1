"""Fuzzing the analyzer with mutations of the real traces in ``fixtures/`` (issue 9, "Done when").

Mutations (hypothesis strategies below): byte flips, insertions and truncation of the JSON
or of its gzip stream; in the parsed JSON, deleted keys, values swapped for other types,
huge and negative numbers, integers beyond 64 bits, step names beyond int64, duplicated
and dropped events, durations far longer than the trace (an unfinished or wrapped-around
record), times beyond the 64-bit nanosecond clock, names longer than the cut and runs of
tens of thousands of digits; and raw tokens no JSON encoder writes (``1e400``, 400-digit
integers, bytes that are not UTF-8, nesting deeper than 1,000, ``NaN``).

Asserted on every input:

* in process: the fast loader (one worker and the parallel decoder) and the reference
  loader agree -- identical frames and drops, or the identical one-line ``TraceLoadError``;
  a trace that loads has no absurd duration left, no name longer than the cut, and is
  analysed and its JSON report written without any exception or warning;
* through the CLI, in a subprocess under ``RLIMIT_AS``: exit code 0, 1 or 2 only, never a
  traceback or a ``RuntimeWarning``, exactly one stderr line on exit 2.

Bounded for CI: derandomized, small seed traces (25-85 KB of JSON), ``max_examples`` set
so both tests together take about two minutes on two busy cores. A longer, random
campaign: ``TRACEDOC_FUZZ_EXAMPLES=2000 pytest tests/test_fuzz.py`` (N in-process examples,
N/5 through the CLI, a new random seed each run).
"""

from __future__ import annotations

import copy
import gzip
import importlib
import json
import os
import resource
import subprocess
import sys
import tempfile
import warnings
from pathlib import Path

import numpy as np
import orjson
import pytest
from hypothesis import HealthCheck, example, given, settings
from hypothesis import strategies as st
from test_fast_loader import assert_same_trace

from tracedoc.engine import analyze_trace
from tracedoc.errors import TraceLoadError
from tracedoc.load import load
from tracedoc.load.build import ABSURD_DURATION_FACTOR, ABSURD_DURATION_MIN_US, NAME_MAX_CHARS
from tracedoc.render import render

FIXTURES = Path(__file__).resolve().parent.parent / "fixtures"
SEED_NAMES = (
    "cpu_only_gloo.pt.trace.json.gz",
    "mi250_toy_train.pt.trace.json.gz",
    "mi300x_torch_compile_triton.pt.trace.json.gz",
    "legacy_computeproperties.json.gz",
)
SEEDS = {n: gzip.decompress((FIXTURES / n).read_bytes()) for n in SEED_NAMES}
DOCS = {n: orjson.loads(raw) for n, raw in SEEDS.items()}
#: Address-space limit of the CLI subprocess: a gzip bomb or a runaway allocation fails
#: there instead of taking the machine (a normal analysis of these traces needs < 800 MB).
CLI_ADDRESS_SPACE = 1536 << 20
#: Examples per run; set ``TRACEDOC_FUZZ_EXAMPLES`` for a longer, non-derandomized campaign.
CAMPAIGN = int(os.environ.get("TRACEDOC_FUZZ_EXAMPLES", "0"))

EVENT_KEYS = ("ph", "cat", "name", "pid", "tid", "ts", "dur", "args", "id", "s")
ARG_KEYS = (
    "correlation",
    "External id",
    "device",
    "stream",
    "bytes",
    "Total Allocated",
    "Total Reserved",
    "Bytes",
    "Device Type",
    "Device Id",
    "blocks per SM",
    "est. achieved occupancy %",
)
TOP_KEYS = ("traceEvents", "deviceProperties", "computeProperties", "distributedInfo", "schemaVersion", "extra")
DEVICE_KEYS = ("id", "name", "totalGlobalMem", "computeMajor", "computeMinor", "numSms")

HOSTILE_VALUES = st.sampled_from(
    [
        None,
        True,
        False,
        "",
        "x",
        "0x0",
        "stream 7",
        "12",
        "-5",
        "1e400",
        "ProfilerStep#99999999999999999999",
        "ProfilerStep#3",
        "Optimizer.zero_grad#SGD.zero_grad",
        "[memory]",
        "kernel",
        "cpu_op",
        "gpu_memcpy",
        "X",
        "i",
        "\u0000\u001b[31m",
        0,
        -1,
        1,
        -1.5,
        1e-300,
        1e308,
        -1e308,
        2**53 + 1,
        2**63,
        -(2**63) - 1,
        2**64,
        2**70,
        -(2**70),
        10**30,
        5e15,  # an unfinished record: its end near int64's maximum of ns
        2**64 / 1000,  # a record wrapped around 64 bits of ns
        9.3e15,  # beyond the 64-bit nanosecond clock
        "k" * (NAME_MAX_CHARS + 5),
        "7" * 60_000,  # once scanned per digit by the fast loader's pre-scan
        [],
        [1, 2],
        {},
        {"a": 1},
        {"ph": "X"},
    ]
)
RAW_TOKENS = st.sampled_from(
    [b"1e400", b"-1E+400", b"9" * 400, b'"\xff\xfe"', b'"\xed\xa0\x80"', b"[" * 1100 + b"]" * 1100, b"NaN", b"-"]
)


@st.composite
def mutated_json(draw) -> bytes:
    name = draw(st.sampled_from(SEED_NAMES))
    doc = copy.deepcopy(DOCS[name])
    for _ in range(draw(st.integers(1, 4))):
        events = doc.get("traceEvents")
        target_kind = draw(st.sampled_from(["event", "event", "args", "top", "device", "events"]))
        if target_kind in ("event", "args") and isinstance(events, list) and events:
            ev = events[draw(st.integers(0, len(events) - 1))]
            if not isinstance(ev, dict):
                continue
            if target_kind == "args":
                if not isinstance(ev.get("args"), dict):
                    ev["args"] = {}
                target, keys = ev["args"], ARG_KEYS
            else:
                target, keys = ev, EVENT_KEYS
        elif target_kind == "device":
            props = doc.get("deviceProperties") or doc.get("computeProperties")
            if not isinstance(props, list) or not props or not isinstance(props[0], dict):
                continue
            target, keys = props[0], DEVICE_KEYS
        elif target_kind == "events" and isinstance(events, list) and events:
            i = draw(st.integers(0, len(events) - 1))
            op = draw(st.sampled_from(["dup", "drop", "swap_type"]))
            if op == "dup":
                events.insert(i, copy.deepcopy(events[i]))
            elif op == "drop":
                del events[i]
            else:
                events[i] = copy.deepcopy(draw(HOSTILE_VALUES))  # never the shared constant
            continue
        else:
            target, keys = doc, TOP_KEYS
        key = draw(st.sampled_from(keys))
        if draw(st.integers(0, 3)) == 0:
            target.pop(key, None)
        else:
            # a copy: a later mutation of this case must not change the strategy's own constants
            target[key] = copy.deepcopy(draw(HOSTILE_VALUES))
    raw = json.dumps(doc).encode()
    if draw(st.integers(0, 3)) == 0:  # a raw token no JSON encoder writes, after a comma
        commas = [i for i in range(len(raw)) if raw[i : i + 2] == b", "]
        if commas:
            at = commas[draw(st.integers(0, len(commas) - 1))] + 2
            raw = raw[:at] + b'"zz": ' + draw(RAW_TOKENS) + b", " + raw[at:]
    return raw


@st.composite
def mutated_bytes(draw) -> bytes:
    raw = bytearray(SEEDS[draw(st.sampled_from(SEED_NAMES))])
    for _ in range(draw(st.integers(1, 6))):
        op = draw(st.sampled_from(["flip", "flip", "insert", "truncate", "delete"]))
        pos = draw(st.integers(0, max(len(raw) - 1, 0)))
        if op == "flip" and raw:
            raw[pos] = draw(st.integers(0, 255))
        elif op == "insert":
            raw[pos:pos] = draw(st.binary(min_size=1, max_size=8))
        elif op == "truncate":
            del raw[pos:]
        elif op == "delete":
            del raw[pos : pos + draw(st.integers(1, 64))]
    return bytes(raw)


@st.composite
def mutated_gzip(draw) -> bytes:
    data = bytearray(gzip.compress(SEEDS[draw(st.sampled_from(SEED_NAMES))]))
    op = draw(st.sampled_from(["flip", "truncate", "trailer", "append"]))
    if op == "flip":
        for _ in range(draw(st.integers(1, 4))):
            data[draw(st.integers(0, len(data) - 1))] = draw(st.integers(0, 255))
    elif op == "truncate":
        del data[draw(st.integers(0, len(data) - 1)) :]
    elif op == "trailer":  # a size field claiming up to 4 GiB
        data[-4:] = draw(st.integers(0, 2**32 - 1)).to_bytes(4, "little")
    else:
        data += draw(st.sampled_from([b"\0" * 9, gzip.compress(b" "), b"junk"]))
    return bytes(data)


@st.composite
def hostile_trace(draw) -> bytes:
    kind = draw(st.sampled_from(["json", "json", "json", "bytes", "gzip"]))
    if kind == "json":
        raw = draw(mutated_json())
        return gzip.compress(raw, compresslevel=1) if draw(st.booleans()) else raw
    return draw(mutated_bytes() if kind == "bytes" else mutated_gzip())


def _outcome(path: str, **kw):
    try:
        return load(path, **kw)
    except TraceLoadError as exc:
        msg = str(exc)
        assert "\n" not in msg and msg.startswith(path + ": "), msg
        return msg


def _write(data: bytes) -> str:
    fd, path = tempfile.mkstemp(suffix=".json", prefix="fuzz-")
    with os.fdopen(fd, "wb") as fh:
        fh.write(data)
    return path


# the examples the fuzz campaign of issue 9 reported, always run first
ISSUE_EXAMPLES = [
    gzip.compress(b"{}")[:-4] + b"\xff\xff\xff\x7f" + bytes(20),  # 42-byte corrupt gzip
    SEEDS["mi250_toy_train.pt.trace.json.gz"].replace(
        b'"name": "ProfilerStep#', b'"name": "ProfilerStep#9999999999', 1
    ),
    SEEDS["cpu_only_gloo.pt.trace.json.gz"].replace(b'"rank": 0', b'"rank": ' + str(2**70).encode(), 1),
    SEEDS["cpu_only_gloo.pt.trace.json.gz"][:-1] + b', "x": "\xff"}',
]


@settings(
    max_examples=CAMPAIGN or 120,
    deadline=None,
    derandomize=not CAMPAIGN,
    database=None,
    suppress_health_check=[HealthCheck.too_slow, HealthCheck.data_too_large, HealthCheck.large_base_example],
)
@given(hostile_trace())
@example(ISSUE_EXAMPLES[0])
@example(ISSUE_EXAMPLES[1])
@example(ISSUE_EXAMPLES[2])
@example(ISSUE_EXAMPLES[3])
def test_fuzz_loaders_agree_and_analysis_never_raises(data):
    fast_mod = importlib.import_module("tracedoc.load.fast")
    path = _write(data)
    saved = fast_mod.PARALLEL_MIN_BYTES
    try:
        one = _outcome(path, workers=1)
        ref = _outcome(path, engine="reference")
        fast_mod.PARALLEL_MIN_BYTES = 64  # decode these small traces in 2 forked parts too
        two = _outcome(path, workers=2)
    finally:
        fast_mod.PARALLEL_MIN_BYTES = saved
        os.unlink(path)
    if isinstance(ref, str):
        assert one == ref and two == ref
        return
    assert not isinstance(one, str), one
    assert not isinstance(two, str), two
    assert_same_trace(one, ref)
    assert_same_trace(two, ref)
    assert_no_absurd_duration(one)
    for frame in ("ops", "runtime", "kernels", "memcpys", "memsets", "syncs", "steps"):
        names = getattr(one, frame)["name"]
        assert not len(names) or max(map(len, names)) <= NAME_MAX_CHARS + 60, frame
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        report = analyze_trace(one)
        out = json.loads(render(report, "json"))
        render(report, "text")
    assert not caught, [f"{w.category.__name__}: {w.message} ({w.filename}:{w.lineno})" for w in caught]
    assert out["trace"]["n_events"] == ref.n_events
    for f in out["findings"]:  # no impossible figure reported as a fact
        assert f["estimated_saving_ms"] is None or f["estimated_saving_ms"] >= 0


def assert_no_absurd_duration(trace) -> None:
    """The loader's rule, checked on its output: the event that ends last lasts at most 1 s or
    ABSURD_DURATION_FACTOR times the window of the others (first timestamp to their latest end
    or timestamp), unless it has no other event or that window is empty."""
    frames = ("ops", "runtime", "kernels", "memcpys", "memsets", "syncs")
    ts = np.concatenate([getattr(trace, f)["ts_us"].to_numpy() for f in frames] + [trace.memory["ts_us"].to_numpy()])
    dur = np.concatenate([getattr(trace, f)["dur_us"].to_numpy() for f in frames] + [np.zeros(len(trace.memory))])
    if len(ts) < 2:
        return
    end = ts + dur
    last = int(np.argmax(end))
    window = max(float(ts.max()), float(np.delete(end, last).max())) - float(ts.min())
    assert window <= 0 or dur[last] <= max(ABSURD_DURATION_FACTOR * window, ABSURD_DURATION_MIN_US), (dur[last], window)


def _limit_memory():
    resource.setrlimit(resource.RLIMIT_AS, (CLI_ADDRESS_SPACE, CLI_ADDRESS_SPACE))


@pytest.mark.skipif(not sys.platform.startswith("linux"), reason="RLIMIT_AS as Linux enforces it")
@settings(
    max_examples=CAMPAIGN // 5 or 25,
    deadline=None,
    derandomize=not CAMPAIGN,
    database=None,
    suppress_health_check=[HealthCheck.too_slow, HealthCheck.data_too_large, HealthCheck.large_base_example],
)
@given(hostile_trace(), st.sampled_from(["text", "json"]))
@example(ISSUE_EXAMPLES[0], "text")
@example(ISSUE_EXAMPLES[2], "json")
def test_fuzz_cli_exit_codes_one_line_bounded_memory(data, fmt):
    path = _write(data)
    try:
        r = subprocess.run(
            [sys.executable, "-m", "tracedoc", "analyze", path, "--format", fmt],
            capture_output=True,
            text=True,
            timeout=120,
            preexec_fn=_limit_memory,
            env={**os.environ, "OPENBLAS_NUM_THREADS": "1"},
        )
    finally:
        os.unlink(path)
    assert r.returncode in (0, 1, 2), (r.returncode, r.stderr[-2000:])
    assert "Traceback" not in r.stderr and "out of memory" not in r.stderr, r.stderr[-2000:]
    assert "Warning" not in r.stderr, r.stderr[-2000:]  # a numpy RuntimeWarning line
    if r.returncode == 2:
        assert r.stderr.count("\n") == 1 and r.stderr.startswith("tracedoc: error: "), r.stderr
        assert "cannot analyze" not in r.stderr and "cannot write the report" not in r.stderr, r.stderr
    elif fmt == "json":
        json.loads(r.stdout)
