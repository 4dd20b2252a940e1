"""Impossible values that passed, and rule and project files that broke the analysis (issue 21).

Each class is checked from its general rule with hypothesis, on the small real traces of
``fixtures/`` (the seeds of ``tests/test_fuzz.py``):

* a duration more than twice the window of the other events is dropped by both loaders,
  counted once, and the analysis is that of the trace without it; a duration within the
  window is kept;
* a time beyond the 64-bit nanosecond clock is dropped; no finite value in any numeric field
  leaks a numpy ``RuntimeWarning`` or raises, and both loaders agree;
* names longer than ``NAME_MAX_CHARS`` are cut to a recognisable head with a marker, in both
  loaders, and nothing longer reaches the report;
* an expression over constants and signals either fails validation (naming the rule file
  and field) or evaluates without ``OverflowError`` for any signal values;
* a ``pyproject.toml`` with too many dotted key parts or too deep nesting is one error line
  naming the file, before ``tomllib`` spends its gigabytes.
"""

from __future__ import annotations

import ast
import copy
import gzip
import json
import math
import os
import resource
import subprocess
import sys
import warnings
from pathlib import Path

import orjson
import pandas as pd
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from test_fast_loader import assert_same_trace
from tracebuilder import budget_rule_toml, dataloader_bound

from tracedoc.config import ConfigError, load_config
from tracedoc.engine import analyze_trace
from tracedoc.engine.expr import MAX_CONSTANT, Expr
from tracedoc.engine.rules import MAX_DOTTED_PARTS, load_rule_file
from tracedoc.errors import RuleError, TraceLoadError
from tracedoc.load import load
from tracedoc.load.build import (
    ABSURD_DURATION_FACTOR,
    ABSURD_DURATION_MIN_US,
    CLOCK_MAX_US,
    DROP_ABSURD_DURATION,
    DROP_TIME_OUT_OF_RANGE,
    NAME_MAX_CHARS,
    cap_name,
)
from tracedoc.render import render
from tracedoc.trace import FRAME_COLUMNS

FIXTURES = Path(__file__).resolve().parent.parent / "fixtures"
SEED_NAMES = (
    "cpu_only_gloo.pt.trace.json.gz",
    "mi250_toy_train.pt.trace.json.gz",
    "mi300x_torch_compile_triton.pt.trace.json.gz",
    "legacy_computeproperties.json.gz",
)
DOCS = {n: orjson.loads(gzip.decompress((FIXTURES / n).read_bytes())) for n in SEED_NAMES}
#: Longest a cut name can be: the head and the marker (``…[name cut: N chars, #8 hex]``).
CAPPED_MAX = NAME_MAX_CHARS + len("…[name cut: 999,999,999,999 chars, #00000000]")
SETTINGS = dict(
    deadline=None,
    derandomize=True,
    database=None,
    suppress_health_check=[HealthCheck.too_slow, HealthCheck.data_too_large, HealthCheck.function_scoped_fixture],
)

KIND_FRAMES = ("ops", "runtime", "kernels", "memcpys", "memsets", "syncs")
#: One event of each kind the loaders keep with a duration: (cat, name, args).
KINDS = {
    "op": ("cpu_op", "aten::absurd", {}),
    "runtime": ("cuda_runtime", "cudaLaunchKernel", {"correlation": 9_999_999}),
    "kernel": ("kernel", "absurd_kernel", {"device": 0, "stream": 7, "correlation": 9_999_999}),
    "memcpy": ("gpu_memcpy", "Memcpy HtoD (Pageable -> Device)", {"device": 0, "stream": 7, "bytes": 4096}),
    "memset": ("gpu_memset", "Memset (Device)", {"device": 0, "stream": 7, "bytes": 4096}),
    "sync": ("cuda_sync", "Event Sync", {"device": 0, "stream": 7}),
}


def _write(tmp_path: Path, doc: dict, name: str) -> Path:
    p = tmp_path / name
    p.write_bytes(orjson.dumps(doc))
    return p


def _both(p: Path):
    """(fast, reference) traces; they must agree (frames, drops and all)."""
    fast, ref = load(p), load(p, engine="reference")
    assert_same_trace(fast, ref)
    assert fast.dropped_events == ref.dropped_events
    return fast, ref


def _findings(trace) -> list:
    d = analyze_trace(trace).to_dict()
    return [(f["code"], f["estimated_saving_ms"]) for f in d["findings"]]


def _same_frames(a, b) -> None:
    """Same frames, origin, span, devices and metadata (not the event count or the drops)."""
    for kind in FRAME_COLUMNS:
        pd.testing.assert_frame_equal(getattr(a, kind), getattr(b, kind), check_exact=True, obj=kind)
    assert (a.origin_us, a.span_us, a.devices, a.metadata) == (b.origin_us, b.span_us, b.devices, b.metadata)


def _window(t) -> float:
    """The window the trace's events span (µs from its origin): first timestamp to the latest end
    or timestamp of any event, instants included."""
    ends = [float(getattr(t, k)["end_us"].max()) for k in KIND_FRAMES if len(getattr(t, k))]
    ends += [float(t.memory["ts_us"].max())] if len(t.memory) else []
    return max(ends)


def _event(kind: str, ts: float, dur: float) -> dict:
    cat, name, args = KINDS[kind]
    return {"ph": "X", "cat": cat, "name": name, "pid": 0, "tid": 7, "ts": ts, "dur": dur, "args": dict(args)}


# ---- a duration longer than the rest of the trace ---------------------------------------------


@settings(max_examples=30, **SETTINGS)
@given(
    seed=st.sampled_from(SEED_NAMES),
    kind=st.sampled_from(sorted(KINDS)),
    at=st.floats(0.0, 1.0),
    factor=st.floats(ABSURD_DURATION_FACTOR * 1.01, 1e9) | st.sampled_from([1.8e16 / 1e6, 1e9]),
)
def test_absurd_duration_dropped_counted_and_analysis_unchanged(tmp_path, seed, kind, at, factor):
    """Rule: an event lasting over ABSURD_DURATION_MIN_US (1 s) and more than ABSURD_DURATION_FACTOR
    times the window of the other events (first timestamp to latest end) is dropped by both loaders, counted once, and everything else
    -- frames, origin, span, findings -- is as if it were not there."""
    doc = DOCS[seed]
    base_path = _write(tmp_path, doc, "base.json")
    base, _ = _both(base_path)
    assert base.dropped_events == {}
    mutated = copy.deepcopy(doc)
    # the new event starts inside the baseline's window, which is then the window of its others
    window = _window(base)
    ts, dur = base.origin_us + at * window, max(factor * window, ABSURD_DURATION_MIN_US * factor / 2)
    mutated["traceEvents"].append(_event(kind, ts, dur))
    fast, ref = _both(_write(tmp_path, mutated, "base.json"))  # same name: same path in the Trace
    # an end past the clock's range is counted under that reason, the first that applies
    assert fast.dropped_events == {DROP_ABSURD_DURATION if ts + dur <= CLOCK_MAX_US else DROP_TIME_OUT_OF_RANGE: 1}
    _same_frames(fast, base)
    assert fast.n_events == base.n_events + 1
    assert _findings(fast) == _findings(base)


@settings(max_examples=20, **SETTINGS)
@given(seed=st.sampled_from(SEED_NAMES), kind=st.sampled_from(sorted(KINDS)), frac=st.floats(0.0, 1.0))
def test_duration_within_the_window_is_kept(tmp_path, seed, kind, frac):
    """Rule, the other side: a duration no longer than the window of the other events stays."""
    base, _ = _both(_write(tmp_path, DOCS[seed], "base.json"))
    mutated = copy.deepcopy(DOCS[seed])
    mutated["traceEvents"].append(_event(kind, base.origin_us, frac * base.span_us))
    fast, _ = _both(_write(tmp_path, mutated, "m.json"))
    assert fast.dropped_events == {}
    assert fast.span_us == base.span_us


@settings(max_examples=15, **SETTINGS)
@given(seed=st.sampled_from(SEED_NAMES), kind=st.sampled_from(sorted(KINDS)), frac=st.floats(0.0, 1.0))
def test_duration_under_a_second_is_kept_however_long_the_rest(tmp_path, seed, kind, frac):
    """Rule, the floor: a duration of at most ABSURD_DURATION_MIN_US is never absurd, even many times
    a small trace's window (a small or sparse trace may record little besides one long event)."""
    base, _ = _both(_write(tmp_path, DOCS[seed], "base.json"))
    mutated = copy.deepcopy(DOCS[seed])
    mutated["traceEvents"].append(_event(kind, base.origin_us, frac * ABSURD_DURATION_MIN_US))
    fast, _ = _both(_write(tmp_path, mutated, "m.json"))
    assert fast.dropped_events == {}


def test_absurd_duration_no_longer_passes_the_gate(tmp_path):
    """The issue's case end to end: an unfinished kernel (its end near int64's maximum of ns) made
    every share about 0, "No findings", exit 0. Now the gate fails as without it, with one
    warning line."""
    b = dataloader_bound()
    plain = b.write(tmp_path / "plain.json")
    b.kernel("unfinished", 100.0, 110.0, 5e15)
    absurd = b.write(tmp_path / "absurd.json")
    runs = [
        subprocess.run(
            [sys.executable, "-m", "tracedoc", "analyze", str(p), "--fail-on", "warning", "-f", "json"],
            capture_output=True,
            text=True,
            timeout=120,
        )
        for p in (plain, absurd)
    ]
    assert [r.returncode for r in runs] == [1, 1], [r.stderr for r in runs]
    assert runs[0].stderr == ""
    assert runs[1].stderr.count("\n") == 1 and DROP_ABSURD_DURATION in runs[1].stderr
    a, b2 = (json.loads(r.stdout) for r in runs)
    assert [f["code"] for f in a["findings"]] == [f["code"] for f in b2["findings"]] != []
    assert b2["trace"]["dropped_events"] == {DROP_ABSURD_DURATION: 1}


# ---- huge finite values: dropped when impossible, never a RuntimeWarning ----------------------

NUMERIC_FIELDS = (
    "ts",
    "dur",
    "args.bytes",
    "args.correlation",
    "args.External id",
    "args.Total Allocated",
    "args.Total Reserved",
    "args.Bytes",
    "args.blocks per SM",
    "args.warps per SM",
    "args.est. achieved occupancy %",
)
#: Finite floats of every magnitude, the extremes included.
FINITE = st.floats(allow_nan=False, allow_infinity=False) | st.sampled_from(
    [1.7976931348623157e308, -1.7976931348623157e308, 1e300, 1e154, 2**64 / 1000, CLOCK_MAX_US * 1.0001]
)


def _analysis_warnings(p: Path) -> list[str]:
    """Load with both loaders and analyse and render the trace, recording every warning."""
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        try:
            fast, _ = _both(p)
        except TraceLoadError as exc:  # every profiler event impossible: an error, as documented
            assert "impossible values" in str(exc)
            return [str(w.message) for w in caught]
        report = analyze_trace(fast)
        render(report, "text")
        json.loads(render(report, "json"))
    return [f"{w.category.__name__}: {w.message} ({w.filename}:{w.lineno})" for w in caught]


@settings(max_examples=40, **SETTINGS)
@given(
    seed=st.sampled_from(SEED_NAMES),
    field=st.sampled_from(NUMERIC_FIELDS),
    value=FINITE,
    pick=st.integers(0, 10**6),
)
def test_huge_finite_values_no_runtime_warning(tmp_path, seed, field, value, pick):
    """Rule: any finite number in any numeric field of any kept event loads identically in both
    loaders and is analysed and rendered without a warning (nothing on stderr) or an exception."""
    doc = copy.deepcopy(DOCS[seed])
    kept = [e for e in doc["traceEvents"] if e.get("ph") == "X" or e.get("name") == "[memory]"]
    ev = kept[pick % len(kept)]
    if field.startswith("args."):
        ev.setdefault("args", {})[field[5:]] = value
    else:
        ev[field] = value
    assert _analysis_warnings(_write(tmp_path, doc, "t.json")) == []


@settings(max_examples=25, **SETTINGS)
@given(seed=st.sampled_from(SEED_NAMES), beyond=st.floats(1.0001, 1e290), neg=st.booleans(), pick=st.integers(0, 10**6))
def test_time_beyond_the_clock_dropped(tmp_path, seed, beyond, neg, pick):
    """Rule: a ts beyond 2**63 ns (either sign) cannot come from Kineto's clock: dropped, counted."""
    doc = copy.deepcopy(DOCS[seed])
    kept = [
        e
        for e in doc["traceEvents"]
        if e.get("ph") == "X" and str(e.get("cat")).lower() in ("cpu_op", "operator", "kernel")
    ]
    ev = kept[pick % len(kept)]
    ev["ts"] = (-1 if neg else 1) * CLOCK_MAX_US * beyond
    ev["dur"] = 0
    fast, _ = _both(_write(tmp_path, doc, "t.json"))
    assert fast.dropped_events == {DROP_TIME_OUT_OF_RANGE: 1}
    assert fast.n_events == len(doc["traceEvents"])


def test_huge_values_through_the_cli_no_warning_lines(tmp_path):
    """The CLI's stderr: nothing but the one warning about the dropped events."""
    b = dataloader_bound()
    b.op("aten::far", 1.7e308, 1.0)
    b.memcpy("HtoD", "Pageable", 1e308, 120.0, 130.0, 5.0)
    p = b.write(tmp_path / "t.json")
    r = subprocess.run(
        [sys.executable, "-m", "tracedoc", "analyze", str(p)], capture_output=True, text=True, timeout=120
    )
    assert r.returncode in (0, 1), r.stderr
    assert r.stderr.count("\n") == 1 and "dropped impossible values" in r.stderr, r.stderr
    assert "Warning" not in r.stderr


# ---- names: cut where they are loaded, recognisable ------------------------------------------

NAME_CHARS = st.characters(blacklist_categories=("Cs",))


@settings(max_examples=25, **SETTINGS)
@given(
    head=st.text(NAME_CHARS, min_size=0, max_size=40),
    length=st.integers(0, 3 * NAME_MAX_CHARS) | st.sampled_from([NAME_MAX_CHARS, NAME_MAX_CHARS + 1]),
    fill=NAME_CHARS,
)
def test_names_capped_in_both_loaders(tmp_path, head, length, fill):
    """Rule: a name of at most NAME_MAX_CHARS characters is kept whole; a longer one becomes its
    first NAME_MAX_CHARS characters and a marker with its length; both loaders agree."""
    name = (head + fill * length)[: max(length, len(head))]
    doc = copy.deepcopy(DOCS["mi250_toy_train.pt.trace.json.gz"])
    kernels = [e for e in doc["traceEvents"] if e.get("cat") == "kernel"]
    ops = [e for e in doc["traceEvents"] if e.get("cat") == "cpu_op"]
    kernels[0]["name"] = ops[0]["name"] = name
    fast, _ = _both(_write(tmp_path, doc, "t.json"))
    for frame in (fast.kernels, fast.ops):
        got = [n for n in frame["name"] if n.startswith(name[:NAME_MAX_CHARS])]
        assert got, "the name is recognisable by its head"
        if len(name) <= NAME_MAX_CHARS:
            assert name in got
        else:
            cut = got[0]
            assert cut.startswith(name[:NAME_MAX_CHARS]) and cut != name
            assert f"…[name cut: {len(name):,} chars, #" in cut and len(cut) <= CAPPED_MAX
        assert max(map(len, frame["name"])) <= CAPPED_MAX


@settings(max_examples=15, **SETTINGS)
@given(common=st.integers(NAME_MAX_CHARS, 2 * NAME_MAX_CHARS), a=NAME_CHARS, b=NAME_CHARS)
def test_long_names_that_differ_after_the_cut_stay_apart(common, a, b):
    """Rule: two names cut to the same head stay distinct (the marker holds a hash of the whole)."""
    x, y = "k" * common + a, "k" * common + b
    assert (cap_name(x) == cap_name(y)) == (x == y)


def test_megabyte_names_never_reach_the_report(tmp_path):
    """Names of megabytes: every string of the JSON report is at most the cut length."""
    b = dataloader_bound()
    b.kernel("volta_" + "x" * (1 << 21), 100.0, 110.0, 300.0)
    b.op("aten::" + "y" * (1 << 21), 120.0, 5.0)
    p = b.write(tmp_path / "t.json")
    r = subprocess.run(
        [sys.executable, "-m", "tracedoc", "analyze", str(p), "-f", "json"], capture_output=True, text=True, timeout=300
    )
    assert r.returncode in (0, 1), r.stderr
    strings: list[str] = []

    def walk(v):
        if isinstance(v, str):
            strings.append(v)
        elif isinstance(v, dict):
            for k, x in v.items():
                walk(k)
                walk(x)
        elif isinstance(v, list):
            for x in v:
                walk(x)

    walk(json.loads(r.stdout))
    assert max(map(len, strings)) <= CAPPED_MAX


# ---- rule expressions: constants that leave the float range -----------------------------------

SIGNALS = ("a", "b", "c")
CONSTANTS = st.integers(-int(MAX_CONSTANT), int(MAX_CONSTANT)) | st.floats(-MAX_CONSTANT, MAX_CONSTANT)


def _expr_text():
    leaf = st.one_of(CONSTANTS.map(repr), st.sampled_from(SIGNALS))

    def extend(sub):
        return st.one_of(
            st.tuples(sub, st.sampled_from(["+", "-", "*", "/"]), sub).map(lambda t: f"({t[0]} {t[1]} {t[2]})"),
            sub.map(lambda s: f"(-{s})"),
            st.tuples(st.sampled_from(["min", "max"]), sub, sub).map(lambda t: f"{t[0]}({t[1]}, {t[2]})"),
            sub.map(lambda s: f"abs({s})"),
        )

    arith = st.recursive(leaf, extend, max_leaves=24)
    return st.tuples(arith, st.sampled_from(["<", ">", "==", ">="]), arith).map(lambda t: f"{t[0]} {t[1]} {t[2]}")


SIGNAL_VALUES = st.one_of(
    st.floats(allow_nan=False, allow_infinity=False), st.integers(-(2**63), 2**63 - 1), st.booleans()
)


_FUNCS = {"__builtins__": {}, "min": min, "max": max, "abs": abs}


def _constant_parts(tree: ast.AST):
    """Every sub-expression made of constants only."""
    for node in ast.walk(tree):
        if isinstance(node, (ast.BinOp, ast.UnaryOp, ast.Call)) and not any(
            isinstance(n, ast.Name) and n.id not in ("min", "max", "abs") for n in ast.walk(node)
        ):
            yield node


@settings(max_examples=300, **SETTINGS)
@given(src=_expr_text(), values=st.fixed_dictionaries({s: SIGNAL_VALUES for s in SIGNALS}))
def test_expressions_fail_at_validation_or_never_overflow(src, values):
    """Rule: an expression is refused when any part made of constants only divides by zero or
    leaves the float range; an accepted one evaluates for any signal values (floats of any
    magnitude, int64 integers, booleans) without an OverflowError."""
    tree = ast.parse(src, mode="eval")
    bad_constants = False
    for node in _constant_parts(tree):
        try:
            with warnings.catch_warnings():
                warnings.simplefilter("ignore")
                v = float(eval(compile(_floats(node), "<c>", "eval"), dict(_FUNCS)))
        except (ZeroDivisionError, OverflowError):
            bad_constants = True
            break
        if not math.isfinite(v):
            bad_constants = True
            break
    try:
        e = Expr(src)
    except RuleError as exc:
        assert bad_constants, exc
        assert "division by zero" in str(exc) or "float range" in str(exc)
        return
    assert not bad_constants, src
    try:
        e.evaluate(values)
    except ZeroDivisionError:
        pass


def _floats(node: ast.AST) -> ast.Expression:
    """A copy of ``node`` with every number a float (as the evaluator computes), ready to compile."""
    node = copy.deepcopy(node)
    for n in ast.walk(node):
        if isinstance(n, ast.Constant) and isinstance(n.value, (int, float)) and not isinstance(n.value, bool):
            n.value = float(n.value)
    return ast.fix_missing_locations(ast.Expression(node))


@settings(max_examples=20, **SETTINGS)
@given(n=st.integers(1, 30), as_int=st.booleans(), signal_first=st.booleans())
def test_rule_file_with_constants_past_float_range_names_the_file(tmp_path, n, as_int, signal_first):
    """Rule: a product of n constants of 1e15 is refused at load, naming the file and the field,
    exactly when it leaves the float range (n >= 21); with the signal first it is no constant
    part and evaluates to inf at worst, never an OverflowError."""
    c = "1000000000000000" if as_int else "1e15"
    product = " * ".join([c] * n)
    cond = f"step_time_ms * {product} > 1" if signal_first else f"{product} * step_time_ms > 1"
    rule = tmp_path / "big.toml"
    rule.write_text(budget_rule_toml(1.0, code="BIG1").replace("step_time_ms > 1.0", cond, 1))
    overflows = not signal_first and n * 15 > math.log10(sys.float_info.max)
    try:
        loaded = load_rule_file(rule)
    except RuleError as exc:
        assert overflows, exc
        assert str(exc).startswith(f"{rule}: 'condition': ") and "float range" in str(exc)
        return
    assert not overflows
    assert loaded.condition.evaluate({"step_time_ms": 1e300}) is True


# ---- pyproject.toml: the bounds of rule files --------------------------------------------------


@settings(max_examples=20, **SETTINGS)
@given(parts=st.integers(1, 4000), depth=st.integers(0, 3000), where=st.sampled_from(["key", "header", "nest"]))
def test_pyproject_bounds(tmp_path, parts, depth, where):
    """Rule: a pyproject.toml key of more than MAX_DOTTED_PARTS dotted parts, or nesting the TOML
    parser cannot take, is a ConfigError naming the file; within the bounds the file is read."""
    if where == "key":
        body = "[tool.other]\n" + ".".join(["a"] * parts) + " = 1\n"
        bad = parts > MAX_DOTTED_PARTS
    elif where == "header":
        body = "[" + ".".join(["t"] * parts) + "]\nx = 1\n"
        bad = parts > MAX_DOTTED_PARTS
    else:
        body = "[tool.other]\nx = " + "[" * depth + "]" * depth + "\n"
        bad = None  # the parser's own limit: either outcome, but never another exception
    sub = tmp_path / f"p{parts}-{depth}-{where}"
    sub.mkdir()
    (sub / "pyproject.toml").write_text(body + '[tool.tracedoc]\nselect = ["TD1"]\n')
    try:
        cfg = load_config(sub / "t.json")
    except ConfigError as exc:
        assert bad is not False, exc
        assert str(exc).startswith(f"{sub / 'pyproject.toml'}: ") and "\n" not in str(exc)
        return
    assert bad is not True
    assert cfg.select == ["TD1"]


def _limit_memory():
    resource.setrlimit(resource.RLIMIT_AS, (1 << 30, 1 << 30))


@pytest.mark.skipif(not sys.platform.startswith("linux"), reason="RLIMIT_AS as Linux enforces it")
@pytest.mark.parametrize(
    "body, problem",
    [
        ("[tool.other]\na" + ".a" * 20_000 + " = 1\n", "dotted parts"),  # 34 s and 1.5 GB in tomllib
        ("[tool.other]\nx = " + "[" * 5000 + "]" * 5000 + "\n", "nested too deeply"),
        (b"[tool.tracedoc]\nselect = ['\xff']\n", "not UTF-8"),
        ("[tool.tracedoc\n", "invalid TOML"),
        ("[tool.tracedoc.thresholds]\nTD101 = { dataloader_share = 1" + "0" * 5000 + " }\n", "invalid TOML"),
        ("[tool.tracedoc.thresholds]\nTD101 = { dataloader_share = 1" + "0" * 300 + " }\n", "out of range"),
    ],
)
def test_bad_pyproject_one_line_exit_2_under_a_memory_limit(tmp_path, body, problem):
    """Any problem in a pyproject.toml: exit 2, one line naming the file, never the trace."""
    pyproject = tmp_path / "pyproject.toml"
    pyproject.write_bytes(body if isinstance(body, bytes) else body.encode())
    trace = dataloader_bound().write(tmp_path / "dl.json")
    r = subprocess.run(
        [sys.executable, "-m", "tracedoc", "analyze", str(trace)],
        capture_output=True,
        text=True,
        timeout=120,
        cwd=tmp_path,
        preexec_fn=_limit_memory,
        env={**os.environ, "OPENBLAS_NUM_THREADS": "1"},
    )
    assert r.returncode == 2 and r.stderr.count("\n") == 1, r.stderr[-2000:]
    assert str(pyproject) in r.stderr and problem in r.stderr, r.stderr
    assert "cannot analyze" not in r.stderr and "Traceback" not in r.stderr
