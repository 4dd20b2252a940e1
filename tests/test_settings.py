"""Settings: every analysis option in one picklable object, resolved once from the command line
over [tool.tracedoc] (issue "One road in, one document model through, one door out")."""

from __future__ import annotations

import dataclasses
import pickle

import pytest

from tracedoc.config import ConfigError
from tracedoc.settings import Environment, Settings


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
    s = Settings.resolve(trace)
    assert s.env.no_config and dataclasses.replace(s, env=Environment()) == Settings()
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


def test_environment_is_read_once_into_the_settings_and_validated():
    from tracedoc.errors import SettingsError
    from tracedoc.settings import Environment

    env = Environment.read(
        {
            "TRACEDOC_MAX_TRACE_BYTES": "16M",
            "TRACEDOC_CACHE_MIN_BYTES": "0",
            "TRACEDOC_CACHE_DIR": "/tmp/c",
            "TRACEDOC_NO_CONFIG": "yes",
            "TRACEDOC_DEBUG": "",  # empty: unset
            "TRACEDOC_NO_PROGRESS": "Off",
        }
    )
    assert env == Environment(max_trace_bytes=16 << 20, cache_min_bytes=0, cache_dir="/tmp/c", no_config=True)
    assert Environment.read({}) == Environment()
    s = Settings.from_config(__import__("tracedoc.config").config.Config(), env=env)
    assert s.max_trace_bytes == 16 << 20 and s.env is env  # the variable reaches the loader as an argument
    assert (
        Settings.from_config(__import__("tracedoc.config").config.Config(), env=env, max_trace_bytes=5).max_trace_bytes
        == 5
    )
    for name, value, says in (
        ("TRACEDOC_MAX_TRACE_BYTES", "lots", "invalid size"),
        ("TRACEDOC_CACHE_MAX_BYTES", "0", "must be positive"),
        ("TRACEDOC_NO_CONFIG", "maybe", "expected 1 or 0"),
    ):
        with pytest.raises(SettingsError, match=f"^\\${name}: .*{says}"):
            Environment.read({name: value})


def test_no_config_variable_is_honoured_by_resolve(tmp_path):
    from tracedoc.settings import Environment

    trace = write_project(tmp_path, '[tool.tracedoc]\nselect = ["TD1"]\n')
    assert Settings.resolve(trace, env=Environment()).select == ("TD1",)
    s = Settings.resolve(trace, env=Environment(no_config=True))
    assert s.select is None and s.config_path is None


def test_a_bad_variable_is_one_line_naming_it(tmp_path):
    import os
    import subprocess
    import sys
    from pathlib import Path

    p = Path(__file__).resolve().parents[1] / "fixtures" / "cpu_only_gloo.pt.trace.json.gz"
    env = {**os.environ, "TRACEDOC_CACHE_MIN_BYTES": "4 apples"}
    r = subprocess.run(
        [sys.executable, "-m", "tracedoc", "analyze", str(p)], capture_output=True, text=True, env=env, timeout=120
    )
    assert r.returncode == 2 and r.stdout == ""
    assert r.stderr.strip().splitlines() == [
        "tracedoc: error: $TRACEDOC_CACHE_MIN_BYTES: invalid size '4 apples': expected bytes, or a number with K, "
        "M, G or T"
    ]


def test_no_module_reads_a_tracedoc_variable_behind_the_settings_back():
    """Only settings.Environment reads TRACEDOC_* variables, apart from the documented
    exceptions (settings module docstring): host facts, the fix-loop's instruction to its
    workload, and TRACEDOC_DEBUG in the CLI's error funnel."""
    import ast
    from pathlib import Path

    allowed = {"settings.py", "hostfacts.py", "fixloop/harness.py", "fixloop/runner.py", "cli/common.py"}
    pkg = Path(__file__).resolve().parents[1] / "tracedoc"
    offenders = []
    for path in sorted(pkg.rglob("*.py")):
        rel = path.relative_to(pkg).as_posix()
        if rel in allowed:
            continue
        for node in ast.walk(ast.parse(path.read_text())):
            key = None
            if isinstance(node, ast.Call) and ast.unparse(node.func) in ("os.environ.get", "os.getenv") and node.args:
                key = node.args[0]
            elif isinstance(node, ast.Subscript) and ast.unparse(node.value) == "os.environ":
                key = node.slice
            if key is not None and ("TRACEDOC" in ast.unparse(key) or ast.unparse(key).endswith("_ENV")):
                offenders.append(f"{rel}:{node.lineno}: {ast.unparse(node)}")
    assert offenders == []
