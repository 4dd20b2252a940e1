"""``[tool.tracedoc]`` in ``pyproject.toml``: project defaults for ``tracedoc analyze``.

Found as ruff finds ``[tool.ruff]``: the closest ``pyproject.toml`` that has a
``[tool.tracedoc]`` table, searching upward from the trace's directory, then upward
from the current directory. Options given on the command line win over the file.

    [tool.tracedoc]
    select = ["TD1", "TD301"]        # codes, code prefixes or names
    ignore = ["TD202"]
    fail-on = "warning"              # info | warning | error
    rules = ["ci/budgets"]           # extra rule files or folders, relative to this file
    strict = false                   # an incomplete analysis (a skipped rule) fails

    [tool.tracedoc.thresholds]       # per-rule threshold overrides
    TD101 = { dataloader_share = 0.10 }

A threshold override replaces the number that the rule's condition compares with that
signal (:meth:`tracedoc.engine.expr.Expr.with_thresholds`); the rule files stay as
they are.
"""

from __future__ import annotations

import dataclasses
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from tracedoc.errors import RuleError, TracedocError

KEYS = ("select", "ignore", "fail-on", "rules", "strict", "thresholds")
LEVELS = ("info", "warning", "error")


class ConfigError(TracedocError):
    """A malformed ``[tool.tracedoc]`` table (exit code 2); the message names the file."""


@dataclass
class Config:
    """The settings of one ``[tool.tracedoc]`` table (all optional).

    Attributes:
        path: the pyproject.toml it came from (None: no file found).
        select, ignore: rule selectors (code, code prefix or name).
        fail_on: severity at or above which ``analyze`` exits 1.
        rules: extra rule files or folders, resolved against the file's directory.
        strict: an incomplete analysis (a selected rule skipped) is a failure.
        thresholds: rule code or name -> {signal: number}.
    """

    path: Path | None = None
    select: list[str] | None = None
    ignore: list[str] | None = None
    fail_on: str | None = None
    rules: list[Path] = field(default_factory=list)
    strict: bool = False
    thresholds: dict[str, dict[str, float]] = field(default_factory=dict)


#: Largest ``pyproject.toml`` read (bytes). Why 1 MiB: the file is read whenever a trace is
#: analysed below it, whatever else it configures, so the bound must pass every real project
#: file (they run to tens of KB) while keeping the parse small; the other bounds (dotted keys,
#: nesting) are those of rule files (:func:`tracedoc.tomlfile.parse_toml`).
MAX_PYPROJECT_BYTES = 1 << 20


def _read_pyproject(pyproject: Path) -> dict[str, Any]:
    """Read and parse a ``pyproject.toml`` within the bounds of rule files (a regular file
    of at most :data:`MAX_PYPROJECT_BYTES`, UTF-8, keys of at most 32 dotted parts, nesting
    ``tomllib`` can take).

    Raises:
        ConfigError: one line naming the file: not a regular file, unreadable, too large, not
            UTF-8, a bound exceeded, or invalid TOML.
    """
    from tracedoc.errors import display_path
    from tracedoc.tomlfile import parse_toml, read_toml_text

    try:
        text = read_toml_text(pyproject, MAX_PYPROJECT_BYTES, "pyproject.toml", hint=None)
        return parse_toml(text, display_path(pyproject), MAX_PYPROJECT_BYTES, "pyproject.toml")
    except RuleError as exc:
        raise ConfigError(str(exc)) from None


def _has_table(pyproject: Path) -> dict[str, Any] | None:
    """The ``[tool.tracedoc]`` table of a ``pyproject.toml``, None when it has none.

    Raises:
        ConfigError: the file cannot be read or parsed within the bounds (:func:`_read_pyproject`).
    """
    data = _read_pyproject(pyproject)
    tool = data.get("tool")
    table = tool.get("tracedoc") if isinstance(tool, dict) else None
    return table if isinstance(table, dict) else None


def find_config(start: Path | None) -> tuple[Path, dict[str, Any]] | None:
    """The closest ``pyproject.toml`` with a ``[tool.tracedoc]`` table, upward from
    ``start`` (a trace file or a directory), then upward from the CWD; None when none has one.

    Raises:
        ConfigError: a ``pyproject.toml`` on the way that cannot be read or parsed within the
            bounds of :func:`_read_pyproject` (one line naming that file).
    """
    starts = []
    if start is not None:
        s = Path(start).absolute()
        starts.append(s if s.is_dir() else s.parent)
    starts.append(Path.cwd())
    for base in starts:
        for d in (base, *base.parents):
            candidate = d / "pyproject.toml"
            if candidate.is_file():
                table = _has_table(candidate)
                if table is not None:
                    return candidate, table
    return None


def _str_list(value: Any, key: str, src: Path) -> list[str]:
    if isinstance(value, str):
        value = [value]
    if not isinstance(value, list) or not all(isinstance(v, str) for v in value):
        raise ConfigError(f"{src}: [tool.tracedoc] {key} must be a list of strings")
    return [p.strip() for v in value for p in v.split(",") if p.strip()]


def parse_config(table: dict[str, Any], src: Path) -> Config:
    """Validate a ``[tool.tracedoc]`` table.

    Raises:
        ConfigError: an unknown key or a value of the wrong type.
    """
    unknown = sorted(set(table) - set(KEYS))
    if unknown:
        raise ConfigError(f"{src}: unknown [tool.tracedoc] key {unknown[0]!r} (known: {', '.join(KEYS)})")
    cfg = Config(path=src)
    if "select" in table:
        cfg.select = _str_list(table["select"], "select", src)
    if "ignore" in table:
        cfg.ignore = _str_list(table["ignore"], "ignore", src)
    if "fail-on" in table:
        if table["fail-on"] not in LEVELS:
            raise ConfigError(f"{src}: [tool.tracedoc] fail-on must be one of {', '.join(LEVELS)}")
        cfg.fail_on = table["fail-on"]
    if "rules" in table:
        cfg.rules = [src.parent / p for p in _str_list(table["rules"], "rules", src)]
    if "strict" in table:
        if not isinstance(table["strict"], bool):
            raise ConfigError(f"{src}: [tool.tracedoc] strict must be true or false")
        cfg.strict = table["strict"]
    th = table.get("thresholds", {})
    if not isinstance(th, dict) or not all(isinstance(v, dict) for v in th.values()):
        raise ConfigError(f"{src}: [tool.tracedoc.thresholds] maps a rule to {{signal = number}}")
    cfg.thresholds = {str(k): dict(v) for k, v in th.items()}
    return cfg


def load_config(start: Path | None) -> Config:
    """The :class:`Config` that applies to a trace at ``start`` (empty when no file has one).
    (``TRACEDOC_NO_CONFIG=1``, which ignores every file, is honoured by
    :meth:`tracedoc.settings.Settings.resolve`.)"""
    found = find_config(start)
    if found is None:
        return Config()
    return parse_config(found[1], found[0])


def apply_thresholds(rules: list, thresholds: dict[str, dict[str, float]], src: Path | None = None) -> list:
    """The rules with each override applied to its condition (other rules unchanged).

    Raises:
        ConfigError: an override for a rule that does not exist, or one the condition
            cannot take (see :meth:`~tracedoc.engine.expr.Expr.with_thresholds`).
    """
    where = f"{src}: " if src else ""
    by_key = {r.code: r for r in rules} | {r.name: r for r in rules}
    out = list(rules)
    for key, values in thresholds.items():
        rule = by_key.get(key) or by_key.get(key.upper())
        if rule is None:
            raise ConfigError(f"{where}[tool.tracedoc.thresholds] names no rule {key!r}")
        try:
            new = dataclasses.replace(rule, condition=rule.condition.with_thresholds(values))
        except RuleError as exc:
            raise ConfigError(f"{where}[tool.tracedoc.thresholds] {key}: {exc}") from None
        out[out.index(rule)] = new
    return out
