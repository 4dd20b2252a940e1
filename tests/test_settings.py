"""Settings: every analysis option in one picklable object, resolved once from the command line
over [tool.tracedoc] (issue "One road in, one document model through, one door out")."""

from __future__ import annotations

import pickle

import pytest

from tracedoc.config import ConfigError
from tracedoc.settings import Settings


def write_project(tmp_path, body: str):
    (tmp_path / "pyproject.toml").write_text(body)
    (tmp_path / "runs").mkdir()
    return tmp_path / "runs" / "t.json"


def test_resolve_reads_the_project_file_and_explicit_options_win(tmp_path, monkeypatch):
    monkeypatch.delenv("TRACEDOC_NO_CONFIG", raising=False)
    trace = write_project(
        tmp_path,
        '[tool.tracedoc]\nselect = ["TD1"]\nignore = ["TD102"]\nfail-on = "warning"\nrules = ["budgets"]\n'
        "[tool.tracedoc.thresholds]\nTD101 = { dataloader_share = 0.5 }\n",
    )
    s = Settings.resolve(trace)
    assert s.select == ("TD1",) and s.ignore == ("TD102",) and s.fail_on == "warning"
    assert s.rule_paths == (str(tmp_path / "budgets"),)
    assert s.threshold_map == {"TD101": {"dataloader_share": 0.5}}
    assert s.config_path == str(tmp_path / "pyproject.toml")
    o = Settings.resolve(trace, select=["TD3"], fail_on="error", rule_paths=["more"], max_trace_bytes=10)
    assert o.select == ("TD3",) and o.ignore == ("TD102",) and o.fail_on == "error"
    assert o.rule_paths == (str(tmp_path / "budgets"), "more") and o.max_trace_bytes == 10
    # one object, sent to workers: hashable and picklable, equal after the round trip
    assert pickle.loads(pickle.dumps(o)) == o and hash(o) == hash(pickle.loads(pickle.dumps(o)))


def test_no_config_and_a_bad_one(tmp_path, monkeypatch):
    trace = write_project(tmp_path, '[tool.tracedoc]\nfail-on = "sometimes"\n')
    monkeypatch.setenv("TRACEDOC_NO_CONFIG", "1")
    assert Settings.resolve(trace) == Settings()
    monkeypatch.delenv("TRACEDOC_NO_CONFIG")
    with pytest.raises(ConfigError, match="pyproject.toml.*fail-on"):
        Settings.resolve(trace)


def test_rules_apply_the_overrides_and_check_the_selectors():
    s = Settings(thresholds=(("TD101", (("dataloader_share", 0.5),)),))
    td101 = next(r for r in s.rules() if r.code == "TD101")
    default = next(r for r in Settings().rules() if r.code == "TD101")
    # a 40% DataLoader share fires the built-in rule (above 5%), not the overridden one (above 50%)
    assert default.condition.evaluate({"dataloader_share": 0.4})
    assert not td101.condition.evaluate({"dataloader_share": 0.4})
    from tracedoc.errors import RuleError

    with pytest.raises(RuleError, match="no rule matches 'TD999'"):
        Settings(select=("TD999",)).rules()
