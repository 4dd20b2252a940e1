"""Hostile rule files (issue 9 item 10; item 9 for rule folders; issue 9 item 3's
``knobs = 5``): validated when loaded, the message names the rule file and the field, the
CLI exits 2 on one line before any trace is read, and every input is bounded."""

from __future__ import annotations

import os
import subprocess
import sys
import threading
import time
from pathlib import Path

import pytest
from helpers import rule_dict
from hypothesis import given, settings
from hypothesis import strategies as st
from tracebuilder import budget_rule_toml, dataloader_bound

from tracedoc import tomlfile as tomlfile_mod
from tracedoc.engine.expr import MAX_EXPR_DEPTH, Expr
from tracedoc.engine.rules import (
    MAX_DOTTED_PARTS,
    MAX_RULE_FILE_BYTES,
    builtin_rules,
    load_rule_file,
    load_rules,
    parse_rule,
    parse_toml,
)
from tracedoc.errors import RuleError


def run(*args, timeout=120):
    return subprocess.run(
        [sys.executable, "-m", "tracedoc", *map(str, args)], capture_output=True, text=True, timeout=timeout
    )


# ---- the examples of issue 9 item 10, and variants ---------------------------------------------


@pytest.mark.parametrize(
    "over, field, problem",
    [
        ({"condition": "min() > 1"}, "condition", "min() takes 2 to 64"),
        ({"estimated_saving_ms": "max(step_time_ms)"}, "estimated_saving_ms", "max() takes 2 to 64"),
        ({"condition": "abs() > 0"}, "condition", "abs() takes 1"),
        ({"message": "a { b"}, "message", "invalid template"),
        ({"message": "closing } alone"}, "message", "invalid template"),
        ({"message": "{step_time_ms:d} ms"}, "message", "not a numeric spec"),
        ({"message": "{step_time_ms:s}"}, "message", "not a numeric spec"),
        ({"message": "{step_time_ms:{step_count}}"}, "message", "nested fields"),
        ({"message": "{step_time_ms:{step_time_ms.__class__.__doc__[0]}^80}"}, "message", "nested fields"),
        ({"message": "{step_time_ms!r}"}, "message", "conversions"),
        ({"message": "{step_time_ms[0]}"}, "message", "not a signal name"),
        ({"message": "{step_time_ms:>999999999}"}, "message", "width above 200"),
        ({"message": "{step_time_ms:.999f}"}, "message", "precision above 20"),
        ({"message": "{0}"}, "message", "not a signal name"),
        ({"message": "{}"}, "message", "not a signal name"),
        ({"condition": "not " * 100_000 + "has_steps"}, "condition", "at most 2000"),
        ({"condition": "not " * (MAX_EXPR_DEPTH + 1) + "has_steps"}, "condition", "nested more than"),
        ({"condition": "step_time_ms > 1e999"}, "condition", "constant out of range"),
        ({"condition": "step_time_ms > " + "9" * 400}, "condition", "constant out of range"),
        ({"fix": {"summary": "f", "safety": "safe", "knobs": 5}}, "fix.knobs", "list of strings"),
        ({"fix": {"summary": "f", "safety": "safe", "knobs": [1]}}, "fix.knobs", "list of strings"),
        ({"evidence": "step_time_ms"}, "evidence", "list of strings"),
        ({"estimated_saving_ms": 5}, "estimated_saving_ms", "must be a string"),
        ({"saving_basis": ["x"]}, "saving_basis", "must be a string"),
        ({"docs": "none"}, "docs", "must be a table"),
        ({"tests": 3}, "tests", "array of tables"),
        ({"fix": "just do it"}, "fix", "must be a dict"),
        ({"condition": 1}, "condition", "must be a str"),
        ({"fix": {"summary": "f", "safety": "safe", "replay": "make_it_fast"}}, "fix.replay", "is not one of"),
        ({"fix": {"summary": "f", "safety": "safe", "replay": "\x1b[2J" * 400}}, "fix.replay", "is not one of"),
        ({"fix": {"summary": "f", "safety": "safe", "replay": ["foreach"]}}, "fix.replay", "is not one of"),
    ],
)
def test_bad_rule_named_with_its_field(over, field, problem):
    with pytest.raises(RuleError) as ei:
        parse_rule(rule_dict(**over), "my_rules/bad.toml")
    msg = str(ei.value)
    assert msg.startswith("my_rules/bad.toml: ") and field in msg and problem in msg, msg
    assert "\n" not in msg and len(msg) < 400


def test_good_templates_still_render():
    rule = parse_rule(
        rule_dict(
            message="{step_time_ms:.1f} ms, {dataloader_share:.1%}, {step_count:,.0f} {{literal}} {step_time_ms:>8.2f}"
        ),
        "ok.toml",
    )
    values = {"step_time_ms": 12.345, "dataloader_share": 0.5, "step_count": 1234.0}
    assert rule.evaluate(values.__getitem__).message == "12.3 ms, 50.0%, 1,234 {literal}    12.35"
    assert len(builtin_rules()) >= 7  # every shipped rule passes the stricter checks


def count_calls(monkeypatch, owner, name: str) -> list[int]:
    """Wrap ``owner.name`` (a parser) so each call appends the length of its first argument to
    the returned list: a bound enforced before parsing leaves it empty."""
    real = getattr(owner, name)
    calls: list[int] = []

    def counting(text, *a, **kw):
        calls.append(len(text))
        return real(text, *a, **kw)

    monkeypatch.setattr(owner, name, counting)
    return calls


def test_expression_bounds_are_cheap(monkeypatch):
    """Huge expressions are refused before Python's parser sees them (no wall-clock bound:
    the parser is never called, which holds on any host)."""
    import tracedoc.engine.expr as expr_mod

    parsed = count_calls(monkeypatch, expr_mod.ast, "parse")
    for src in ("not " * 100_000 + "x", "(" * 100_000 + "x" + ")" * 100_000, "-" * 100_000 + "x"):
        with pytest.raises(RuleError, match="characters"):
            Expr(src)
    assert parsed == []
    with pytest.raises(RuleError):
        Expr("x\0")
    assert Expr("(" * 50 + "x" + ")" * 50).names == {"x"}  # parentheses alone add no depth


# ---- TOML: size and quadratic dotted keys ---------------------------------------------------------


@pytest.mark.parametrize(
    "text, problem, before_parse",
    [
        ("a" + ".a" * 4000 + " = 1\n", "dotted parts", True),  # 8 KB: about 1 s in tomllib, 20 s at 40 KB
        ("[" + ".".join(['"k"'] * 100) + "]\nx = 1\n", "dotted parts", True),
        ("x = " + "[" * 5000 + "]" * 5000 + "\n", "nested too deeply", False),
        ("code = = 1\n", "invalid TOML", False),
        ("# padding\n" * (MAX_RULE_FILE_BYTES // 10 + 1), "larger than", True),
    ],
    ids=["long_dotted_key", "long_quoted_table", "deep_arrays", "syntax", "too_large"],
)
def test_toml_bounds(monkeypatch, text, problem, before_parse):
    """The costly shapes (quadratic dotted keys, oversize files) are refused before tomllib
    parses them; the rest are tomllib's own errors, reported as one RuleError."""

    parsed = count_calls(monkeypatch, tomlfile_mod.tomllib, "loads")
    with pytest.raises(RuleError, match=problem):
        parse_toml(text, "r.toml")
    assert (parsed == []) is before_parse


# ---- rule files and folders: regular files only; exit 2 before the trace is read ---------------


def test_cli_bad_rule_exits_2_before_reading_the_trace(tmp_path):
    bad = tmp_path / "bad.toml"
    bad.write_text(budget_rule_toml(120).replace("{step_time_ms:.1f}", "{step_time_ms:d}"))
    # the trace argument is a FIFO nobody writes to: reading it would block
    fifo = tmp_path / "never.fifo"
    os.mkfifo(fifo)
    r = run("analyze", fifo, "--rules", bad, timeout=60)
    assert r.returncode == 2, r.stderr
    assert r.stderr.count("\n") == 1 and "bad.toml" in r.stderr and "'message'" in r.stderr
    assert "cannot analyze" not in r.stderr and "never.fifo" not in r.stderr


def test_fifo_in_a_rules_folder_refused_without_blocking(tmp_path):
    rules = tmp_path / "rules"
    rules.mkdir()
    (rules / "budget.toml").write_text(budget_rule_toml(120))
    os.mkfifo(rules / "pipe.toml")
    trace = dataloader_bound().write(tmp_path / "t.json")
    r = run("analyze", trace, "--rules", rules, timeout=60)
    assert r.returncode == 2 and r.stderr.count("\n") == 1
    assert "pipe.toml" in r.stderr and "not a regular file" in r.stderr


@pytest.mark.parametrize("dev", ["/dev/zero", "/dev/urandom"])
def test_device_as_rule_file_refused(tmp_path, dev):
    link = tmp_path / "dev.toml"
    link.symlink_to(dev)
    with pytest.raises(RuleError, match="not a regular file"):  # refused from stat(), never opened
        load_rules([tmp_path])


def test_oversized_and_non_utf8_rule_files(tmp_path):
    big = tmp_path / "big.toml"
    big.write_text("# x\n" * (MAX_RULE_FILE_BYTES // 4 + 1))
    with pytest.raises(RuleError, match="big.toml: rule file larger than 64 KiB"):
        load_rule_file(big)
    bad = tmp_path / "latin1.toml"
    bad.write_bytes(budget_rule_toml(1).encode().replace(b"budget", b"budg\xe9t"))
    with pytest.raises(RuleError, match="latin1.toml: not UTF-8"):
        load_rule_file(bad)


def test_rule_file_name_escaped(tmp_path):
    p = tmp_path / "evil\nname\x1b.toml"
    p.write_text("code = ")
    with pytest.raises(RuleError) as ei:
        load_rule_file(p)
    assert "\n" not in str(ei.value) and "\x1b" not in str(ei.value) and "evil\\nname\\x1b.toml" in str(ei.value)


def test_rules_folder_parsed_once(tmp_path, monkeypatch):
    import importlib

    rules_mod = importlib.import_module("tracedoc.engine.rules")
    folder = tmp_path / "rules"
    folder.mkdir()
    (folder / "budget.toml").write_text(budget_rule_toml(120))
    reads: list[Path] = []
    real = rules_mod.read_toml_text
    monkeypatch.setattr(rules_mod, "read_toml_text", lambda p: reads.append(p) or real(p))
    rules_mod._load_rule_file_cached.cache_clear()
    for _ in range(8):  # as a rank directory does, once per rank
        assert [r.code for r in load_rules([folder])][-1] == "CI1"
    assert len(reads) == 1
    (folder / "budget.toml").write_text(budget_rule_toml(99))  # edited: read again
    os.utime(folder / "budget.toml", ns=(time.time_ns(), time.time_ns() + 10**9))
    assert "99" in load_rules([folder])[-1].condition.source and len(reads) == 2


def test_loading_rules_never_blocks_on_a_fifo_rule_file(tmp_path):
    os.mkfifo(tmp_path / "r.toml")
    done = threading.Event()

    def attempt():
        try:
            load_rule_file(tmp_path / "r.toml")
        except RuleError:
            done.set()

    t = threading.Thread(target=attempt, daemon=True)
    t.start()
    t.join(5)
    assert done.is_set()


# ---- the dotted-key scan: the same verdict as counting the parts (issue 21) ---------------------

_BARE = st.text(alphabet="abcXYZ019_-", min_size=1, max_size=6)
_QUOTED = st.text(alphabet="ab .c", max_size=5).map(lambda t: f'"{t}"') | st.text(alphabet="ab .c", max_size=5).map(
    lambda t: f"'{t}'"
)


@settings(max_examples=60, deadline=None, derandomize=True, database=None)
@given(
    parts=st.lists(_BARE | _QUOTED, min_size=1, max_size=70),
    dot=st.sampled_from([".", " . ", "\t.", ". "]),
    form=st.sampled_from(["{} = 1\n", "[{}]\nx = 1\n", "[[{}]]\nx = 1\n", "t = {{ {} = 1 }}\n"]),
    before=st.sampled_from(["", "# c\n", "x = 'a.b'\n", "y = 1\n" * 3]),
    run=st.integers(0, 70_000),
)
def test_dotted_key_scan_counts_parts(parts, dot, form, before, run):
    """Rule: a key or table header of more than MAX_DOTTED_PARTS dotted parts (bare or quoted,
    with or without blanks around the dots) is refused before tomllib runs, and one of at most
    MAX_DOTTED_PARTS is not; a run of tens of thousands of letters before it changes nothing
    (the scan reads such a run once: the first version read it once per letter)."""
    text = "z" * run + " = 0\n" + before + form.format(dot.join(parts))
    if len(text) > MAX_RULE_FILE_BYTES:
        text = before + form.format(dot.join(parts))
    try:
        parse_toml(text, "r.toml")
    except RuleError as exc:
        if "dotted parts" in str(exc):
            assert len(parts) > MAX_DOTTED_PARTS, text[-400:]
            return
        assert len(parts) <= MAX_DOTTED_PARTS  # tomllib's own error (a repeated table, say)
        return
    assert len(parts) <= MAX_DOTTED_PARTS
