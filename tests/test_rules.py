"""Rule files: their own pass/fail cases (ids carry the code, so `pytest -k TD101` selects
one rule), the meta-test that every rule has both, and the expression evaluator."""

from __future__ import annotations

import pytest
from helpers import rule_dict
from tracebuilder import budget_rule_toml

from tracedoc.engine import rank_findings
from tracedoc.engine.expr import Expr
from tracedoc.engine.rules import (
    DOC_SECTIONS,
    Finding,
    Fix,
    Skipped,
    builtin_rules,
    load_rule_file,
    parse_rule,
    select_rules,
)
from tracedoc.errors import RuleError
from tracedoc.signals import SignalUnavailable

RULES = builtin_rules()
CASES = [(r, i, case) for r in RULES for i, case in enumerate(r.tests)]


def getter(case):
    values = dict(case.get("signals", {}))
    unavailable = set(case.get("unavailable", []))

    def get(name):
        if name in unavailable or name not in values:
            raise SignalUnavailable("not in this case")
        return values[name]

    return get


@pytest.mark.parametrize("rule,i,case", CASES, ids=[f"{r.code}-{r.name}-{c['expect']}{i}" for r, i, c in CASES])
def test_rule_case(rule, i, case):
    out = rule.evaluate(getter(case))
    expect = case["expect"]
    if expect == "fire":
        assert isinstance(out, Finding)
        assert out.code == rule.code and out.name == rule.name
        assert out.estimated_saving_ms == pytest.approx(case["saving"], abs=1e-3)
        assert "{" not in out.message  # every template field was filled
    elif expect == "pass":
        assert out is None
    else:
        assert isinstance(out, Skipped) and out.reason


def test_the_public_rules():
    assert {r.name: r.code for r in RULES} == {
        "dataloader-stall": "TD101",
        "pageable-h2d-copy": "TD102",
        "h2d-copy-share": "TD103",
        "blocking-sync": "TD104",
        "host-bound-cpu-work": "TD105",
        "launch-bound-gpu-idle": "TD201",
        "zero-grad-kernels": "TD202",
        "launch-bound-compiled": "TD203",
        "no-tensor-core-use": "TD301",
        "low-gpu-memory-use": "TD401",
        "allocator-churn": "TD402",
        "exposed-communication": "TD601",
        "warmup-in-profile": "TD701",
        "step-time-outlier": "TD702",
        "single-tensor-optimizer": "TD210",
        "unfused-attention": "TD310",
        "cpu-oversubscription": "TD501",
        "cpu-dispatch-overhead": "TD502",
        "cpu-fp32-matmul-bf16-capable": "TD503",
        "memory-bound-elementwise": "TD204",
        "gemm-below-peak": "TD302",
        "layout-transposes": "TD320",
    }
    safety = {r.name: r.fix.safety for r in RULES}
    assert safety["dataloader-stall"] == safety["pageable-h2d-copy"] == safety["h2d-copy-share"] == "safe"
    assert safety["no-tensor-core-use"] == safety["low-gpu-memory-use"] == "unsafe"


@pytest.mark.parametrize("rule", RULES, ids=[r.code for r in RULES])
def test_every_rule_has_fire_pass_and_skip_cases_and_docs(rule):
    expects = {c["expect"] for c in rule.tests}
    assert {"fire", "pass", "skip"} <= expects
    assert all("saving" in c for c in rule.tests if c["expect"] == "fire"), "fire cases state the saving"
    assert sum(c["expect"] == "fire" for c in rule.tests) >= 2, "a fire case at the threshold boundary too"
    for section in DOC_SECTIONS:
        assert rule.docs[section].strip()
    assert "estimate" in (rule.saving_basis + rule.docs["why"]).lower(), "the docs say the saving is an estimate"
    assert rule.fix.knobs or rule.fix.safety == "display-only", "a fix maps to a workload knob unless it is advice"


def test_budget_rule_from_a_user_file(tmp_path):
    p = tmp_path / "budget.toml"
    p.write_text(budget_rule_toml(120))
    rule = load_rule_file(p)
    assert rule.evaluate(lambda n: 130.0).message == "step time 130.0 ms exceeds the 120 ms budget"
    assert rule.evaluate(lambda n: 100.0) is None


@pytest.mark.parametrize(
    "src,problem",
    [
        ("__import__('os').system('x')", "not allowed"),
        ("step_time_ms.real > 1", "not allowed"),
        ("[1][0] > 0", "not allowed"),
        ("'a' == 'a'", "constants"),
        ("step_time_ms >", "invalid expression"),
        ("lambda: 1", "not allowed"),
    ],
)
def test_expression_whitelist(src, problem):
    with pytest.raises(RuleError, match=problem):
        Expr(src)


def test_expression_evaluation():
    e = Expr("a > 0.5 and not b or min(a, c) * 2 >= 3 - 1 and 0 < a <= 1")
    assert e.names == {"a", "b", "c"}
    assert e.evaluate({"a": 0.7, "b": False, "c": 5}) is True
    assert e.evaluate({"a": 0.2, "b": False, "c": 5}) is False
    assert Expr("-x / 4 + abs(y)").evaluate({"x": 2, "y": -1}) == 0.5


@pytest.mark.parametrize(
    "over,problem",
    [
        ({"condition": "no_such_signal > 1"}, "unknown signal"),
        ({"message": "{no_such_signal}"}, "unknown signal"),
        ({"message": "{step_time_ms.__class__}"}, "not a signal name"),
        ({"condition": "top_h2d_copies > 1"}, "table signal"),
        ({"severity": "fatal"}, "severity"),
        ({"name": "Not_Kebab"}, "kebab-case"),
        ({"code": "td-1"}, "code"),
        ({"fix": {"summary": "f", "safety": "maybe"}}, "fix.safety"),
        ({"docs": {"what": "only this"}}, "lacks"),
        ({"fix": {"summary": "f", "safety": "safe", "detail": "{no_such_signal:.1f}"}}, "unknown signal"),
        ({"fix": {"summary": "f", "safety": "safe", "detail": "{step_time_ms!r}"}}, "fix.detail"),
        ({"fix": {"summary": "f", "safety": "safe", "detail": "{top_h2d_copies}"}}, "table signal"),
        ({"fix": {"summary": "f", "safety": "safe", "detail": 5}}, "fix.detail must be a string"),
    ],
)
def test_rule_validation(over, problem):
    with pytest.raises(RuleError, match=problem):
        parse_rule(rule_dict(**over), "test.toml")


def test_select_and_ignore_by_code_prefix_and_name():
    names = lambda rs: [r.name for r in rs]  # noqa: E731
    assert names(select_rules(RULES, ["TD1"])) == [
        "dataloader-stall",
        "pageable-h2d-copy",
        "h2d-copy-share",
        "blocking-sync",
        "host-bound-cpu-work",
    ]
    assert names(select_rules(RULES, ["no-tensor-core-use", "TD401"])) == ["no-tensor-core-use", "low-gpu-memory-use"]
    assert "dataloader-stall" not in names(select_rules(RULES, None, ["TD101"]))
    with pytest.raises(RuleError, match="no rule matches"):
        select_rules(RULES, ["TD999"])


def test_ranking_by_estimated_saving():
    fix = Fix("f", "safe")
    fs = [
        Finding("A1", "a", "info", "", None, "", {}, fix),
        Finding("B1", "b", "info", "", 5.0, "", {}, fix),
        Finding("C1", "c", "error", "", 50.0, "", {}, fix),
        Finding("D1", "d", "error", "", 5.0, "", {}, fix),
    ]
    assert [f.code for f in rank_findings(fs)] == ["C1", "D1", "B1", "A1"]
