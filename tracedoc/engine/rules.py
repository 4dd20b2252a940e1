"""Declarative rules: one TOML file per rule, validated at load time.

A rule file holds::

    code = "TD101"                 # stable code, letters + digits
    name = "dataloader-stall"      # stable kebab-case name (public interface)
    severity = "error"             # info < warning < error
    summary = "one line"
    condition = "dataloader_share > 0.05"          # expression over signals
    message = "DataLoader {dataloader_share:.1%}"  # str.format template over signals
    estimated_saving_ms = "dataloader_ms"          # expression, ms per step
    saving_basis = "how the saving is estimated"
    evidence = ["dataloader_ms", ...]              # signals (scalars or tables) to attach
    [fix]      summary, safety ("safe" | "unsafe" | "display-only"), knobs = [...]
    [docs]     what, why, example, fix, safety
    [[tests]]  expect = "fire" | "pass" | "skip", signals = {...}, unavailable = [...]

Expressions use :mod:`tracedoc.engine.expr`; every name must be a registered signal.
"""

from __future__ import annotations

import re
import string
from dataclasses import dataclass, field
from importlib import resources
from pathlib import Path
from typing import Any, Callable

import tomllib

from tracedoc.engine.expr import Expr
from tracedoc.errors import RuleError
from tracedoc.signals import SIGNALS, SignalUnavailable

SEVERITIES = ("info", "warning", "error")
#: Fix safety levels, ordered (ruff's convention): display-only < unsafe < safe.
SAFETY_LEVELS = ("display-only", "unsafe", "safe")
_CODE_RE = re.compile(r"^[A-Z]+[0-9]+$")
_NAME_RE = re.compile(r"^[a-z0-9]+(-[a-z0-9]+)*$")
DOC_SECTIONS = ("what", "why", "example", "fix", "safety")


@dataclass(frozen=True)
class Fix:
    """The change that addresses a finding: text, safety level, workload knobs it maps to."""

    summary: str
    safety: str
    knobs: tuple[str, ...] = ()

    def to_dict(self) -> dict[str, Any]:
        return {"summary": self.summary, "safety": self.safety, "knobs": list(self.knobs)}


@dataclass
class Finding:
    """A rule that fired on a trace."""

    code: str
    name: str
    severity: str
    message: str
    estimated_saving_ms: float | None
    saving_basis: str
    evidence: dict[str, Any]
    fix: Fix
    claims: tuple[str, ...] = ("step",)
    #: the rule's own estimate before the engine capped it to the slices still unclaimed
    #: (None when the estimate was granted whole)
    uncapped_saving_ms: float | None = None

    def to_dict(self) -> dict[str, Any]:
        return {
            "code": self.code,
            "name": self.name,
            "severity": self.severity,
            "message": self.message,
            "estimated_saving_ms": self.estimated_saving_ms,
            "saving_basis": self.saving_basis,
            "claims": list(self.claims),
            "uncapped_saving_ms": self.uncapped_saving_ms,
            "evidence": self.evidence,
            "fix": self.fix.to_dict(),
        }


@dataclass
class Skipped:
    """A rule that could not be evaluated on a trace, and why."""

    code: str
    name: str
    reason: str

    def to_dict(self) -> dict[str, Any]:
        return {"code": self.code, "name": self.name, "reason": self.reason}


@dataclass
class Rule:
    """A loaded, validated rule (see the module docstring for the file format)."""

    code: str
    name: str
    severity: str
    summary: str
    condition: Expr
    message: str
    estimated_saving_ms: Expr | None
    saving_basis: str
    evidence: tuple[str, ...]
    fix: Fix
    docs: dict[str, str]
    tests: list[dict[str, Any]] = field(default_factory=list)
    source: str = ""
    claims: tuple[str, ...] = ("step",)

    @property
    def message_names(self) -> set[str]:
        return {f for _, f, _, _ in string.Formatter().parse(self.message) if f}

    @property
    def required_signals(self) -> set[str]:
        """Signals that must be available to evaluate the rule."""
        names = set(self.condition.names) | self.message_names
        if self.estimated_saving_ms is not None:
            names |= self.estimated_saving_ms.names
        return names

    def evaluate(self, get: Callable[[str], Any]) -> Finding | Skipped | None:
        """Evaluate with ``get(name) -> value`` (raises SignalUnavailable for missing signals).

        Returns a Finding when the condition holds, None when it does not, and a
        Skipped when a required signal is unavailable.
        """
        values: dict[str, Any] = {}
        for n in sorted(self.required_signals):
            try:
                values[n] = get(n)
            except SignalUnavailable as exc:
                return Skipped(self.code, self.name, f"needs {n}: {exc}")
            if values[n] is None:
                return Skipped(self.code, self.name, f"needs {n}: no value")
        try:
            fired = bool(self.condition.evaluate(values))
        except ZeroDivisionError:
            return Skipped(self.code, self.name, "condition divides by zero on this trace")
        if not fired:
            return None
        saving = None
        if self.estimated_saving_ms is not None:
            try:
                saving = max(0.0, round(float(self.estimated_saving_ms.evaluate(values)), 3))
            except ZeroDivisionError:
                saving = None
        evidence: dict[str, Any] = {}
        for n in self.evidence:
            try:
                v = get(n)
            except SignalUnavailable:
                continue
            evidence[n] = round(v, 6) if isinstance(v, float) else v
        return Finding(
            self.code,
            self.name,
            self.severity,
            self.message.format_map(values),
            saving,
            self.saving_basis,
            evidence,
            self.fix,
            claims=self.claims,
        )


def _req(data: dict, key: str, typ: type, src: str) -> Any:
    if key not in data:
        raise RuleError(f"{src}: missing '{key}'")
    if not isinstance(data[key], typ):
        raise RuleError(f"{src}: '{key}' must be a {typ.__name__}")
    return data[key]


#: What a finding's saving may be taken from (see tracedoc.engine.claims): a slice of the
#: idle ledger, compute-busy GPU time, exposed communication, or the step as a whole.
CLAIM_POOLS = ("busy", "comm", "step")


def _claims(value: Any, src: str) -> tuple[str, ...]:
    """Validate a rule's ``claims``: one pool or a list of them (``idle:<cause>``, ``busy``, ``comm``, ``step``)."""
    from tracedoc.signals.ledger import LEDGER_KEYS

    items = [value] if isinstance(value, str) else value
    if not isinstance(items, list) or not items or not all(isinstance(x, str) for x in items):
        raise RuleError(f"{src}: 'claims' must be a string or a non-empty list of strings")
    allowed = {*CLAIM_POOLS, *(f"idle:{k}" for k in LEDGER_KEYS)}
    for x in items:
        if x not in allowed:
            raise RuleError(f"{src}: claims {x!r} is not one of {', '.join(sorted(allowed))}")
    return tuple(items)


def parse_rule(data: dict[str, Any], src: str) -> Rule:
    """Validate one rule's TOML table.

    Raises:
        RuleError: missing or mistyped keys, bad code/name/severity/safety, an
            expression outside the grammar, or a name that is not a signal.
    """
    code = _req(data, "code", str, src)
    name = _req(data, "name", str, src)
    if not _CODE_RE.match(code):
        raise RuleError(f"{src}: code {code!r} must be capital letters then digits, e.g. TD101")
    if not _NAME_RE.match(name):
        raise RuleError(f"{src}: name {name!r} must be kebab-case")
    severity = _req(data, "severity", str, src)
    if severity not in SEVERITIES:
        raise RuleError(f"{src}: severity must be one of {', '.join(SEVERITIES)}")
    condition = Expr(_req(data, "condition", str, src))
    message = _req(data, "message", str, src)
    saving_src = data.get("estimated_saving_ms")
    saving = Expr(saving_src) if isinstance(saving_src, str) else None
    fix_d = _req(data, "fix", dict, src)
    safety = _req(fix_d, "safety", str, src + " [fix]")
    if safety not in SAFETY_LEVELS:
        raise RuleError(f"{src}: fix.safety must be one of {', '.join(SAFETY_LEVELS)}")
    fix = Fix(_req(fix_d, "summary", str, src + " [fix]"), safety, tuple(fix_d.get("knobs", [])))
    docs = data.get("docs", {})
    missing_docs = [s for s in DOC_SECTIONS if not isinstance(docs.get(s), str) or not docs[s].strip()]
    if missing_docs:
        raise RuleError(f"{src}: [docs] lacks {', '.join(missing_docs)}")
    rule = Rule(
        code=code,
        name=name,
        severity=severity,
        summary=_req(data, "summary", str, src),
        condition=condition,
        message=message,
        estimated_saving_ms=saving,
        saving_basis=str(data.get("saving_basis", "")),
        evidence=tuple(data.get("evidence", [])),
        fix=fix,
        docs=docs,
        tests=list(data.get("tests", [])),
        source=src,
        claims=_claims(data.get("claims", "step"), src),
    )
    for n in rule.required_signals | set(rule.evidence):
        if not n.isidentifier():
            raise RuleError(f"{src}: {n!r} is not a signal name")
        if n not in SIGNALS:
            raise RuleError(f"{src}: unknown signal {n!r}")
    for n in rule.required_signals:
        if SIGNALS[n].unit == "table":
            raise RuleError(f"{src}: table signal {n!r} can only be evidence")
    return rule


def load_rule_file(path: str | Path) -> Rule:
    """Load and validate one rule file (errors name the file)."""
    p = Path(path)
    try:
        data = tomllib.loads(p.read_text(encoding="utf-8"))
    except (OSError, tomllib.TOMLDecodeError, UnicodeDecodeError) as exc:
        raise RuleError(f"{p}: {exc}") from None
    return parse_rule(data, str(p))


def builtin_rules() -> list[Rule]:
    """The rules shipped in the top-level ``rules/`` folder (package ``tracedoc.builtin_rules``)."""
    root = resources.files("tracedoc.builtin_rules")
    rules = []
    for entry in sorted(root.iterdir(), key=lambda e: e.name):
        if entry.name.endswith(".toml"):
            try:
                data = tomllib.loads(entry.read_text(encoding="utf-8"))
            except tomllib.TOMLDecodeError as exc:
                raise RuleError(f"rules/{entry.name}: {exc}") from None
            rules.append(parse_rule(data, f"rules/{entry.name}"))
    codes = [r.code for r in rules]
    names = [r.name for r in rules]
    if len(set(codes)) != len(codes) or len(set(names)) != len(names):
        raise RuleError("rules/: duplicate rule code or name")
    return sorted(rules, key=lambda r: r.code)


def rule_files(paths: list[str | Path]) -> list[Path]:
    """Expand rule paths: a file is itself, a directory is its ``*.toml`` files (sorted).

    Raises:
        RuleError: a path that does not exist.
    """
    files: list[Path] = []
    for p in map(Path, paths):
        if p.is_dir():
            files.extend(sorted(p.glob("*.toml")))
        elif p.is_file():
            files.append(p)
        else:
            raise RuleError(f"{p}: no such file or directory")
    return files


def load_rules(extra: list[str | Path] | None = None) -> list[Rule]:
    """The built-in rules plus the rule files (or folders of them) in ``extra``.

    Raises:
        RuleError: a malformed rule file, a missing path, or a code or name that repeats
            another rule's.
    """
    rules = builtin_rules()
    taken = {r.code for r in rules} | {r.name for r in rules}
    for path in rule_files(extra or []):
        rule = load_rule_file(path)
        if rule.code in taken or rule.name in taken:
            raise RuleError(f"{path}: rule {rule.code} {rule.name} repeats an existing rule's code or name")
        taken |= {rule.code, rule.name}
        rules.append(rule)
    return rules


def select_rules(rules: list[Rule], select: list[str] | None = None, ignore: list[str] | None = None) -> list[Rule]:
    """Filter rules by code, code prefix (``TD1``) or name, ruff-style.

    Raises:
        RuleError: a selector that matches no rule.
    """

    def matches(rule: Rule, sel: str) -> bool:
        return sel == rule.name or rule.code.startswith(sel.upper())

    for sel in (select or []) + (ignore or []):
        if not any(matches(r, sel) for r in rules):
            raise RuleError(f"no rule matches {sel!r} (see `tracedoc rules`)")
    out = [r for r in rules if not select or any(matches(r, s) for s in select)]
    return [r for r in out if not any(matches(r, s) for s in (ignore or []))]
