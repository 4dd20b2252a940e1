"""Declarative rules: one TOML file per rule, validated at load time.

A rule file holds::

    code = "TD101"                 # stable code, letters + digits
    name = "dataloader-stall"      # stable kebab-case name (public interface)
    severity = "error"             # info < warning < error (tracedoc.report.model.Severity)
    summary = "one line"
    condition = "dataloader_share > 0.05"          # expression over signals
    message = "DataLoader {dataloader_share:.1%}"  # str.format template over signals
    estimated_saving_ms = "dataloader_ms"          # expression, ms per step
    saving_basis = "how the saving is estimated"
    evidence = ["dataloader_ms", ...]              # signals (scalars or tables) to attach
    [fix]      summary, safety ("safe" | "unsafe" | "display-only"), knobs = [...],
               replay = "<fix>"   # optional: a step-model fix (tracedoc.signals.stepmodel.FIXES)
               detail = "..."     # optional: a template over signals, like the message; when
                                  # every signal it names has a value, it replaces the summary
                                  # (a fix made concrete from the trace's own figures)
    [docs]     what, why, example, fix, safety
    [[tests]]  expect = "fire" | "pass" | "skip", signals = {...}, unavailable = [...]

Expressions use :mod:`tracedoc.engine.expr`; every name must be a registered signal.

Rule files are validated when they are loaded, before any trace is read; every error
names the file and the field. Bounds against hostile files: a rule file is a regular file
of at most :data:`MAX_RULE_FILE_BYTES`; no TOML key has more than :data:`MAX_DOTTED_PARTS`
dotted parts (Python's ``tomllib`` takes time quadratic in them); a message template has
at most :data:`MAX_TEMPLATE_FIELDS` fields, each a bare signal name with a numeric format
spec (no nested fields, no conversions, width at most :data:`MAX_FORMAT_WIDTH`, precision
at most :data:`MAX_FORMAT_PRECISION`, no integer-only presentation types: signal values
may be floats).
"""

from __future__ import annotations

import dataclasses
import functools
import math
import os
import re
import stat
import string
from dataclasses import dataclass, field
from importlib import resources
from pathlib import Path
from typing import Any, Callable

from tracedoc.engine.expr import Expr
from tracedoc.errors import RuleError, display_path

# The documents a rule produces live in tracedoc.report.model; re-exported here, where they
# were first defined, so ``from tracedoc.engine.rules import Finding, Fix, Skipped`` keeps working.
from tracedoc.report.model import Finding, Fix, Severity, Skipped
from tracedoc.signals import SIGNALS, SignalUnavailable
from tracedoc.tomlfile import (  # noqa: F401  (MAX_*: re-exported; the bounds of rule files)
    MAX_DOTTED_PARTS,
    MAX_RULE_FILE_BYTES,
    parse_toml,
    read_toml_text,
    rule_files,
)

#: The severities, least severe first (:class:`~tracedoc.report.model.Severity` members,
#: equal to their strings ``"info"``, ``"warning"``, ``"error"``).
SEVERITIES: tuple[Severity, ...] = tuple(Severity)
#: Fix safety levels, ordered (ruff's convention): display-only < unsafe < safe.
SAFETY_LEVELS = ("display-only", "unsafe", "safe")
_CODE_RE = re.compile(r"^[A-Z]+[0-9]+$")
_NAME_RE = re.compile(r"^[a-z0-9]+(-[a-z0-9]+)*$")
DOC_SECTIONS = ("what", "why", "example", "fix", "safety")

#: Longest message template (characters) and most replacement fields in it.
MAX_TEMPLATE_CHARS = 4000
MAX_TEMPLATE_FIELDS = 32
#: Largest width and precision in a template's format spec.
MAX_FORMAT_WIDTH = 200
MAX_FORMAT_PRECISION = 20
# the standard format spec (Python's "Format Specification Mini-Language")
_SPEC_RE = re.compile(
    r"^(?:(?P<fill>.)?(?P<align>[<>=^]))?(?P<sign>[-+ ])?(?P<z>z)?(?P<alt>\#)?(?P<zero>0)?"
    r"(?P<width>\d+)?(?P<grouping>[,_])?(?:\.(?P<precision>\d+))?(?P<type>[eEfFgGn%])?$",
    re.DOTALL,
)


@dataclass
class Rule:
    """A loaded, validated rule (see the module docstring for the file format)."""

    code: str
    name: str
    severity: Severity
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
    #: the ``[fix] detail`` template (None: the summary is the fix's whole text)
    fix_detail: str | None = None

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
                estimate = float(self.estimated_saving_ms.evaluate(values))
            except ZeroDivisionError:
                estimate = math.nan
            # an estimate beyond the float range (huge signal values) is no estimate
            saving = max(0.0, round(estimate, 3)) if math.isfinite(estimate) else None
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
            self._concrete_fix(get),
            claims=self.claims,
        )

    def _concrete_fix(self, get: Callable[[str], Any]) -> Fix:
        """The fix, with its summary replaced by the ``[fix] detail`` template filled in when
        every signal the template names has a value on this trace (else the summary stays)."""
        if self.fix_detail is None:
            return self.fix
        names = {f for _, f, _, _ in string.Formatter().parse(self.fix_detail) if f}
        values: dict[str, Any] = {}
        for n in names:
            try:
                values[n] = get(n)
            except SignalUnavailable:
                return self.fix
            if values[n] is None:
                return self.fix
        return dataclasses.replace(self.fix, summary=self.fix_detail.format_map(values))


def check_template(message: str, src: str, field_name: str = "message") -> set[str]:
    """Validate a ``str.format`` message template; returns the signal names it uses.

    Each replacement field must be a bare name (no attribute or index access: only
    signals may appear), with no conversion (``!r``) and a numeric format spec without
    nested fields, of bounded width and precision.

    Raises:
        RuleError: naming the rule file and the field.
    """
    where = f"{src}: '{field_name}'"
    if len(message) > MAX_TEMPLATE_CHARS:
        raise RuleError(f"{where} is {len(message)} characters long; at most {MAX_TEMPLATE_CHARS} are allowed")
    try:
        parts = list(string.Formatter().parse(message))
    except ValueError as exc:
        raise RuleError(f"{where}: invalid template ({exc}); write a literal brace as {{{{ or }}}}") from None
    names: set[str] = set()
    n_fields = 0
    for _, fname, spec, conv in parts:
        if fname is None:
            continue
        n_fields += 1
        if n_fields > MAX_TEMPLATE_FIELDS:
            raise RuleError(f"{where} has more than {MAX_TEMPLATE_FIELDS} fields")
        if not fname.isidentifier():
            raise RuleError(f"{where}: field {{{fname[:40]}}} is not a signal name (only bare signal names may appear)")
        if conv:
            raise RuleError(f"{where}: field {{{fname}!{conv}}}: conversions are not allowed")
        if spec and ("{" in spec or "}" in spec):
            raise RuleError(f"{where}: field {{{fname}}}: nested fields in a format spec are not allowed")
        m = _SPEC_RE.match(spec or "")
        if not m:
            raise RuleError(
                f"{where}: field {{{fname}}}: format spec {spec[:40]!r} is not a numeric spec "
                "(e.g. .1f, .1%, ,.0f; integer types such as d do not take float signals)"
            )
        if m.group("width") and int(m.group("width")) > MAX_FORMAT_WIDTH:
            raise RuleError(f"{where}: field {{{fname}}}: width above {MAX_FORMAT_WIDTH}")
        if m.group("precision") and int(m.group("precision")) > MAX_FORMAT_PRECISION:
            raise RuleError(f"{where}: field {{{fname}}}: precision above {MAX_FORMAT_PRECISION}")
        names.add(fname)
    return names


def _str_list(data: dict, key: str, src: str, where: str = "") -> tuple[str, ...]:
    """``data[key]`` as a tuple of strings (absent: empty).

    Raises:
        RuleError: not a list of strings.
    """
    v = data.get(key, [])
    if not isinstance(v, list) or not all(isinstance(x, str) for x in v):
        raise RuleError(f"{src}: '{where}{key}' must be a list of strings")
    return tuple(v)


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
    condition = _expr(_req(data, "condition", str, src), src, "condition")
    message = _req(data, "message", str, src)
    check_template(message, src)
    saving_src = data.get("estimated_saving_ms")
    if saving_src is not None and not isinstance(saving_src, str):
        raise RuleError(f"{src}: 'estimated_saving_ms' must be a string (an expression)")
    saving = _expr(saving_src, src, "estimated_saving_ms") if saving_src is not None else None
    if not isinstance(data.get("saving_basis", ""), str):
        raise RuleError(f"{src}: 'saving_basis' must be a string")
    evidence = _str_list(data, "evidence", src)
    fix_d = _req(data, "fix", dict, src)
    safety = _req(fix_d, "safety", str, src + " [fix]")
    if safety not in SAFETY_LEVELS:
        raise RuleError(f"{src}: fix.safety must be one of {', '.join(SAFETY_LEVELS)}")
    replay = fix_d.get("replay")
    if replay is not None:
        from tracedoc.signals.stepmodel import REPLAY_NAMES

        if not isinstance(replay, str) or replay not in REPLAY_NAMES:
            shown = replay[:40] if isinstance(replay, str) else type(replay).__name__
            raise RuleError(f"{src}: fix.replay {shown!r} is not one of {', '.join(REPLAY_NAMES)}")
    fix = Fix(_req(fix_d, "summary", str, src + " [fix]"), safety, _str_list(fix_d, "knobs", src, "fix."), replay)
    detail = fix_d.get("detail")
    if detail is not None and not isinstance(detail, str):
        raise RuleError(f"{src}: fix.detail must be a string (a template)")
    detail_names = check_template(detail, src, "fix.detail") if detail is not None else set()
    docs = data.get("docs", {})
    if not isinstance(docs, dict):
        raise RuleError(f"{src}: 'docs' must be a table")
    tests = data.get("tests", [])
    if not isinstance(tests, list) or not all(isinstance(t, dict) for t in tests):
        raise RuleError(f"{src}: 'tests' must be an array of tables ([[tests]])")
    missing_docs = [s for s in DOC_SECTIONS if not isinstance(docs.get(s), str) or not docs[s].strip()]
    if missing_docs:
        raise RuleError(f"{src}: [docs] lacks {', '.join(missing_docs)}")
    rule = Rule(
        code=code,
        name=name,
        severity=Severity(severity),
        summary=_req(data, "summary", str, src),
        condition=condition,
        message=message,
        estimated_saving_ms=saving,
        saving_basis=str(data.get("saving_basis", "")),
        evidence=evidence,
        fix=fix,
        docs=docs,
        tests=list(tests),
        source=src,
        claims=_claims(data.get("claims", "step"), src),
        fix_detail=detail,
    )
    for n in rule.required_signals | set(rule.evidence) | detail_names:
        if not n.isidentifier():
            raise RuleError(f"{src}: {n!r} is not a signal name")
        if n not in SIGNALS:
            raise RuleError(f"{src}: unknown signal {n!r}")
    for n in rule.required_signals | detail_names:
        if SIGNALS[n].unit == "table":
            raise RuleError(f"{src}: table signal {n!r} can only be evidence")
    return rule


def _expr(source: str, src: str, field_name: str) -> Expr:
    """Parse a rule expression, naming the file and the field in any error."""
    try:
        return Expr(source)
    except RuleError as exc:
        raise RuleError(f"{src}: '{field_name}': {exc}") from None


@functools.lru_cache(maxsize=256)
def _load_rule_file_cached(path: str, _ino: int, _mtime_ns: int, _size: int) -> Rule:
    p = Path(path)
    shown = display_path(p)
    return parse_rule(parse_toml(read_toml_text(p), shown), shown)


def load_rule_file(path: str | Path) -> Rule:
    """Load and validate one rule file (errors name the file).

    Parsed once per file version: a file already loaded, unchanged since (same inode,
    modification time and size), is not read again, so calling :func:`load_rules` once per
    rank costs a ``stat`` per file.

    Raises:
        RuleError: not a regular file, too large, not UTF-8, invalid TOML, or an invalid rule.
    """
    p = Path(path)
    try:
        st = os.stat(p)
    except OSError as exc:
        raise RuleError(f"{display_path(p)}: cannot read ({exc.strerror or exc})") from None
    if not stat.S_ISREG(st.st_mode):
        raise RuleError(f"{display_path(p)}: not a regular file; rule files must be regular .toml files")
    return _load_rule_file_cached(str(p), st.st_ino, st.st_mtime_ns, st.st_size)


def builtin_rules() -> list[Rule]:
    """The rules shipped in the top-level ``rules/`` folder (package ``tracedoc.builtin_rules``).

    An installed tracedoc reads them from the package; a source checkout on ``PYTHONPATH``
    (not installed) has no such package, and reads the ``rules/`` folder beside ``tracedoc/``.
    Parsed once per process; each call returns a new list of the same rules.
    """
    return list(_builtin_rules())


@functools.lru_cache(maxsize=1)
def _builtin_rules() -> tuple[Rule, ...]:
    try:
        root = resources.files("tracedoc.builtin_rules")
    except ModuleNotFoundError:  # a checkout on PYTHONPATH: the folder the package maps to
        root = Path(__file__).resolve().parents[2] / "rules"
    rules = []
    for entry in sorted(root.iterdir(), key=lambda e: e.name):
        if entry.name.endswith(".toml"):
            src = f"rules/{entry.name}"
            rules.append(parse_rule(parse_toml(entry.read_text(encoding="utf-8"), src), src))
    codes = [r.code for r in rules]
    names = [r.name for r in rules]
    if len(set(codes)) != len(codes) or len(set(names)) != len(names):
        raise RuleError("rules/: duplicate rule code or name")
    return tuple(sorted(rules, key=lambda r: r.code))


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
            raise RuleError(
                f"{display_path(path)}: rule {rule.code} {rule.name} repeats an existing rule's code or name"
            )
        taken |= {rule.code, rule.name}
        rules.append(rule)
    return rules


def _closest_hint(selector: str, rules: list[Rule]) -> str:
    """``"; did you mean 'TD101'?"`` for the rule code or name closest to ``selector``
    (difflib, cutoff 0.5; a selector starting upper-case is compared upper-cased, as codes
    are), else a pointer to ``tracedoc rules``."""
    import difflib

    names = [r.name for r in rules] + [r.code for r in rules]
    key = selector.upper() if selector[:1].isupper() else selector
    close = difflib.get_close_matches(key, names, n=1, cutoff=0.5)
    return f"; did you mean {close[0]!r}?" if close else " (see `tracedoc rules`)"


def select_rules(rules: list[Rule], select: list[str] | None = None, ignore: list[str] | None = None) -> list[Rule]:
    """Filter rules by code, code prefix (``TD1``) or name, ruff-style.

    Raises:
        RuleError: a selector that matches no rule, with the closest code or name as a hint
            (``difflib.get_close_matches``, cutoff 0.5; "did you mean 'TD101'?").
    """

    def matches(rule: Rule, sel: str) -> bool:
        return sel == rule.name or rule.code.startswith(sel.upper())

    for sel in (select or []) + (ignore or []):
        if not any(matches(r, sel) for r in rules):
            raise RuleError(f"no rule matches {sel!r}{_closest_hint(sel, rules)}")
    out = [r for r in rules if not select or any(matches(r, s) for s in select)]
    return [r for r in out if not any(matches(r, s) for s in (ignore or []))]
