"""A tiny, whitelisted expression language for rule conditions and saving estimates.

Grammar: Python expression syntax restricted to numbers, booleans, signal names,
``and``/``or``/``not``, comparisons (``< <= > >= == !=``, chained), ``+ - * /``,
unary minus, parentheses and the functions ``min``, ``max`` (two or more arguments) and
``abs`` (one). It is parsed with :mod:`ast` and evaluated by walking the tree: no ``eval``,
no attribute access, no subscripts, no other names.

Bounds, checked before and while parsing so that a hostile rule file costs little:
at most :data:`MAX_EXPR_CHARS` characters, nesting at most :data:`MAX_EXPR_DEPTH` deep,
numeric constants finite and at most :data:`MAX_CONSTANT` in size, and every part made of
constants only (``1e15 * 1e15 * ...``, ``1 / 0``) folded at validation: it must give a finite
number.

Arithmetic is done in floats (integers, booleans and integer signals are converted first), so
an expression can overflow only to ``inf``, never raise ``OverflowError`` (integer products
grew without bound and failed only when converted, on a trace).
"""

from __future__ import annotations

import ast
import math
import operator
import sys
from typing import Any, Mapping

from tracedoc.errors import RuleError

_BINOPS = {ast.Add: operator.add, ast.Sub: operator.sub, ast.Mult: operator.mul, ast.Div: operator.truediv}
_CMPOPS = {
    ast.Lt: operator.lt,
    ast.LtE: operator.le,
    ast.Gt: operator.gt,
    ast.GtE: operator.ge,
    ast.Eq: operator.eq,
    ast.NotEq: operator.ne,
}
_FUNCS = {"min": min, "max": max, "abs": abs}
#: Allowed argument counts of each function: (fewest, most).
_ARITY = {"min": (2, 64), "max": (2, 64), "abs": (1, 1)}
#: Longest expression accepted (characters).
MAX_EXPR_CHARS = 2000
#: Deepest nesting of the expression tree accepted (a rule needs a handful of levels).
MAX_EXPR_DEPTH = 32
#: Largest magnitude of a numeric constant (rules compare with shares, milliseconds and counts;
#: 1e15 is far beyond any of them). Products of constants are bounded by folding (:meth:`Expr._fold`).
MAX_CONSTANT = 1e15


class Expr:
    """A parsed, validated expression.

    Attributes:
        source: the expression text.
        names: the signal names it reads.

    Raises:
        RuleError: on a syntax error or any construct outside the grammar.
    """

    def __init__(self, source: str) -> None:
        self.source = source
        if len(source) > MAX_EXPR_CHARS:
            raise RuleError(f"expression of {len(source)} characters: at most {MAX_EXPR_CHARS} are allowed")
        try:
            self._tree = ast.parse(source.strip(), mode="eval").body
        except SyntaxError as exc:
            raise RuleError(f"invalid expression {_short(source)}: {exc.msg}") from None
        except (RecursionError, MemoryError, ValueError):  # too deep for the parser; NUL bytes
            raise RuleError(f"invalid expression {_short(source)}: nested too deeply or not text") from None
        self.names: set[str] = set()
        self._check(self._tree, 1)
        self._fold(self._tree)

    def _fold(self, node: ast.AST) -> float | None:
        """The value of ``node`` when it is made of constants only (evaluated as
        :meth:`evaluate` would), else None. Called once on the checked tree (at most
        :data:`MAX_EXPR_DEPTH` deep).

        Raises:
            RuleError: a part made of constants only that divides by zero or whose value is
                not a finite number (``1e15 * 1e15 * ...`` past the float range).
        """
        if isinstance(node, ast.Constant):
            return float(node.value)
        if isinstance(node, ast.Name):
            return float(node.id == "True") if node.id in ("True", "False") else None
        if isinstance(node, ast.BoolOp):
            for v in node.values:
                self._fold(v)
            return None
        if isinstance(node, ast.UnaryOp):
            x = self._fold(node.operand)
            return None if x is None or isinstance(node.op, ast.Not) else -x
        if isinstance(node, ast.BinOp):
            a, b = self._fold(node.left), self._fold(node.right)
            if a is None or b is None:
                return None
            try:
                value = _BINOPS[type(node.op)](a, b)
            except ZeroDivisionError:
                raise RuleError(f"in {_short(self.source)}: a division by zero in constants") from None
            if not math.isfinite(value):
                raise RuleError(
                    f"in {_short(self.source)}: arithmetic on constants leaves the float range "
                    f"(magnitude above {sys.float_info.max:.4g})"
                )
            return value
        if isinstance(node, ast.Compare):
            for x in (node.left, *node.comparators):
                self._fold(x)
            return None
        if isinstance(node, ast.Call):
            args = [self._fold(a) for a in node.args]
            if any(a is None for a in args):
                return None
            return float(_FUNCS[node.func.id](*args))  # type: ignore[attr-defined]
        return None

    def _check(self, node: ast.AST, depth: int) -> None:
        if depth > MAX_EXPR_DEPTH:
            raise RuleError(f"in {_short(self.source)}: nested more than {MAX_EXPR_DEPTH} levels deep")
        deeper = depth + 1
        if isinstance(node, ast.Constant):
            if not isinstance(node.value, (int, float, bool)):
                raise RuleError(f"in {_short(self.source)}: only numbers and booleans are allowed as constants")
            if not isinstance(node.value, bool) and not abs(node.value) <= MAX_CONSTANT:  # also NaN/inf
                raise RuleError(f"in {_short(self.source)}: constant out of range (at most {MAX_CONSTANT:g})")
        elif isinstance(node, ast.Name):
            if node.id in ("True", "False"):
                return
            self.names.add(node.id)
        elif isinstance(node, ast.BoolOp):
            for v in node.values:
                self._check(v, deeper)
        elif isinstance(node, ast.UnaryOp) and isinstance(node.op, (ast.Not, ast.USub)):
            self._check(node.operand, deeper)
        elif isinstance(node, ast.BinOp) and type(node.op) in _BINOPS:
            self._check(node.left, deeper)
            self._check(node.right, deeper)
        elif isinstance(node, ast.Compare) and all(type(o) in _CMPOPS for o in node.ops):
            self._check(node.left, deeper)
            for c in node.comparators:
                self._check(c, deeper)
        elif (
            isinstance(node, ast.Call)
            and isinstance(node.func, ast.Name)
            and node.func.id in _FUNCS
            and not node.keywords
        ):
            lo, hi = _ARITY[node.func.id]
            if not lo <= len(node.args) <= hi or any(isinstance(a, ast.Starred) for a in node.args):
                want = f"{lo}" if lo == hi else f"{lo} to {hi}"
                raise RuleError(
                    f"in {_short(self.source)}: {node.func.id}() takes {want} argument(s), got {len(node.args)}"
                )
            for a in node.args:
                self._check(a, deeper)
        else:
            raise RuleError(f"in {_short(self.source)}: {type(node).__name__} is not allowed in rule expressions")

    def with_thresholds(self, thresholds: Mapping[str, float]) -> Expr:
        """A copy of this expression with the constants compared with the named signals replaced.

        ``Expr("dataloader_share > 0.05").with_thresholds({"dataloader_share": 0.10})`` is
        ``dataloader_share > 0.1``. Every comparison of the signal with a number is rewritten
        (it must be compared with exactly one number). This is how
        ``[tool.tracedoc.thresholds]`` overrides a rule's threshold without editing its file.

        Args:
            thresholds: signal name -> new number (int or float, not bool).

        Raises:
            RuleError: a value that is not a number, or a signal that this expression never
                compares with a number (the override would silently do nothing), or compares
            with more than one (which bound to move would be a guess).
        """
        for name, value in thresholds.items():
            if isinstance(value, bool) or not isinstance(value, (int, float)):
                raise RuleError(f"threshold for {name!r} must be a number, not {type(value).__name__}")
        tree = ast.parse(self.source.strip(), mode="eval")
        rewriter = _ThresholdRewriter(thresholds)
        tree = ast.fix_missing_locations(rewriter.visit(tree))
        twice = sorted(n for n, k in rewriter.done.items() if k > 1)
        if twice:
            raise RuleError(f"{', '.join(twice)} is compared with more than one number in {self.source!r}")
        missing = sorted(set(thresholds) - set(rewriter.done))
        if missing:
            raise RuleError(f"{', '.join(missing)} is not compared with a number in {self.source!r}")
        return Expr(ast.unparse(tree))

    def evaluate(self, values: Mapping[str, Any]) -> Any:
        """Evaluate with ``values`` (signal name -> value).

        Arithmetic is in floats (:func:`_as_float`): a result beyond the float range is
        ``inf``, never an ``OverflowError``.

        Raises:
            KeyError: a name is missing from ``values``.
            ZeroDivisionError: a division by zero.
        """
        return self._eval(self._tree, values)

    def _eval(self, node: ast.AST, v: Mapping[str, Any]) -> Any:
        if isinstance(node, ast.Constant):
            return node.value
        if isinstance(node, ast.Name):
            if node.id == "True":
                return True
            if node.id == "False":
                return False
            return v[node.id]
        if isinstance(node, ast.BoolOp):
            if isinstance(node.op, ast.And):
                result: Any = True
                for x in node.values:
                    result = self._eval(x, v)
                    if not result:
                        return result
                return result
            result = False
            for x in node.values:
                result = self._eval(x, v)
                if result:
                    return result
            return result
        if isinstance(node, ast.UnaryOp):
            x = self._eval(node.operand, v)
            return (not x) if isinstance(node.op, ast.Not) else -_as_float(x)
        if isinstance(node, ast.BinOp):
            return _BINOPS[type(node.op)](_as_float(self._eval(node.left, v)), _as_float(self._eval(node.right, v)))
        if isinstance(node, ast.Compare):
            left = self._eval(node.left, v)
            for op, comp in zip(node.ops, node.comparators, strict=False):
                right = self._eval(comp, v)
                if not _CMPOPS[type(op)](left, right):
                    return False
                left = right
            return True
        if isinstance(node, ast.Call):
            return _FUNCS[node.func.id](*(self._eval(a, v) for a in node.args))  # type: ignore[attr-defined]
        raise RuleError(f"cannot evaluate {type(node).__name__}")  # unreachable after _check


def _as_float(x: Any) -> Any:
    """An int or bool operand as a float (an int beyond the float range as +-inf), so that
    arithmetic never builds huge integers nor raises ``OverflowError``; other values as they are."""
    if isinstance(x, int):
        try:
            return float(x)
        except OverflowError:
            return math.inf if x > 0 else -math.inf
    return x


def _short(source: str, limit: int = 80) -> str:
    """``repr`` of an expression, cut to ``limit`` characters for one-line messages."""
    return repr(source if len(source) <= limit else source[:limit] + "...")


def _is_number(node: ast.AST) -> bool:
    if isinstance(node, ast.UnaryOp) and isinstance(node.op, ast.USub):
        node = node.operand
    return isinstance(node, ast.Constant) and isinstance(node.value, (int, float)) and not isinstance(node.value, bool)


class _ThresholdRewriter(ast.NodeTransformer):
    """Replace the number compared with a signal, in ``signal OP number`` or
    ``number OP signal`` (also inside chained comparisons)."""

    def __init__(self, new: Mapping[str, float]) -> None:
        self.new = new
        self.done: dict[str, int] = {}

    def visit_Compare(self, node: ast.Compare) -> ast.AST:
        self.generic_visit(node)
        operands = [node.left, *node.comparators]
        for i, operand in enumerate(operands):
            if isinstance(operand, ast.Name) and operand.id in self.new:
                for j in (i - 1, i + 1):
                    if 0 <= j < len(operands) and _is_number(operands[j]):
                        operands[j] = ast.Constant(self.new[operand.id])
                        self.done[operand.id] = self.done.get(operand.id, 0) + 1
        node.left, node.comparators = operands[0], operands[1:]
        return node
