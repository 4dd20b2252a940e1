"""``[tool.tracedoc]`` discovery and parsing, and threshold overrides as a rewrite of the
comparison constants in a rule's condition (``Expr.with_thresholds``)."""

from __future__ import annotations

import pytest

from tracedoc.config import ConfigError, apply_thresholds, find_config, load_config, parse_config
from tracedoc.engine.expr import Expr
from tracedoc.engine.rules import builtin_rules
from tracedoc.errors import RuleError


def test_with_thresholds_replaces_the_compared_constant():
    e = Expr("dataloader_share > 0.05 and step_time_ms > 10")
    new = e.with_thresholds({"dataloader_share": 0.10})
    assert new.source == "dataloader_share > 0.1 and step_time_ms > 10"
    assert e.source == "dataloader_share > 0.05 and step_time_ms > 10"  # the original is untouched
    values = {"dataloader_share": 0.07, "step_time_ms": 20}
    assert e.evaluate(values) is True and new.evaluate(values) is False
    # the constant on the left, and a negative one
    assert Expr("0.5 < x").with_thresholds({"x": 0.25}).evaluate({"x": 0.3}) is True
    assert Expr("x > -1").with_thresholds({"x": 2}).source == "x > 2"


@pytest.mark.parametrize(
    "source, new, expected",
    [
        ("x > 1", {"y": 1}, "y is not compared with a number"),
        ("x > y", {"x": 1}, "x is not compared with a number"),
        ("0.05 < x < 0.5", {"x": 0.2}, "x is compared with more than one number"),
        ("x > 1", {"x": "0.5"}, "must be a number, not str"),
        ("x > 1", {"x": True}, "must be a number, not bool"),
    ],
)
def test_with_thresholds_errors(source, new, expected):
    with pytest.raises(RuleError, match=expected):
        Expr(source).with_thresholds(new)


def test_apply_thresholds_on_builtin_rules_by_code_or_name():
    rules = builtin_rules()
    td101 = next(r for r in rules if r.code == "TD101")
    assert td101.condition.source == "dataloader_share > 0.05"  # the rule file's threshold
    out = apply_thresholds(rules, {"dataloader-stall": {"dataloader_share": 0.2}})
    new = next(r for r in out if r.code == "TD101")
    assert new.condition.source == "dataloader_share > 0.2" and new.message == td101.message
    assert td101.condition.source == "dataloader_share > 0.05"  # built-in rule objects unchanged
    assert [r.code for r in out] == [r.code for r in rules]
    with pytest.raises(ConfigError, match="names no rule 'TD000'"):
        apply_thresholds(rules, {"TD000": {"x": 1}})


def test_find_config_upward_then_cwd(tmp_path, monkeypatch):
    monkeypatch.delenv("TRACEDOC_NO_CONFIG", raising=False)
    (tmp_path / "a" / "b").mkdir(parents=True)
    (tmp_path / "pyproject.toml").write_text('[tool.tracedoc]\nselect = ["TD1"]\n')
    (tmp_path / "a" / "pyproject.toml").write_text("[tool.other]\nx = 1\n")  # no table: keep looking
    trace = tmp_path / "a" / "b" / "t.json"
    path, table = find_config(trace)
    assert path == tmp_path / "pyproject.toml" and table == {"select": ["TD1"]}
    cfg = load_config(trace)
    assert cfg.select == ["TD1"] and cfg.path == tmp_path / "pyproject.toml"
    monkeypatch.setenv("TRACEDOC_NO_CONFIG", "1")  # honoured where the settings are resolved
    from tracedoc.settings import Settings

    s = Settings.resolve(trace)
    assert s.select is None and s.config_path is None


def test_parse_config_values(tmp_path):
    src = tmp_path / "pyproject.toml"
    cfg = parse_config(
        {"select": ["TD101,TD202", "TD3"], "rules": "ci", "strict": True, "fail-on": "error"},
        src,
    )
    assert cfg.select == ["TD101", "TD202", "TD3"] and cfg.rules == [tmp_path / "ci"]
    assert cfg.strict is True and cfg.fail_on == "error"
    for bad, msg in (
        ({"select": 5}, "select must be a list of strings"),
        ({"strict": "yes"}, "strict must be true or false"),
        ({"thresholds": {"TD101": 0.1}}, "maps a rule to"),
    ):
        with pytest.raises(ConfigError, match=msg):
            parse_config(bad, src)
