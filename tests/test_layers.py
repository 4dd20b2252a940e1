"""The import graph of the package (docs/architecture.md, "Layers, bottom up"): no import cycle
and no module importing a layer above its own, imports inside functions included (only imports
under ``if TYPE_CHECKING:``, for annotations, are left out). The graph is read from the source
with ``ast``; nothing is imported.

What the code still owes the picture is listed in ``KNOWN_CYCLES`` and ``KNOWN_UPWARD``, each
with its reason. The lists may only shrink: a new cycle or a new upward import fails, and so
does an entry that no longer exists (delete it)."""

from __future__ import annotations

import ast
from pathlib import Path

PKG = Path(__file__).resolve().parents[1] / "tracedoc"

#: Layer of each module, by the longest matching prefix (docs/architecture.md).
LAYERS = {
    "tracedoc._version": 0,
    "tracedoc.text": 0,
    "tracedoc.stats": 0,
    "tracedoc.errors": 0,
    "tracedoc.hostfacts": 0,
    "tracedoc.schema": 0,
    "tracedoc.heap": 0,  # glibc malloc_trim for the loader: no tracedoc imports
    "tracedoc.tomlfile": 0,  # bounded reading of user TOML (rules, pyproject): the errors only
    "tracedoc.perf": 1,  # op cost models and device peaks: plain data in, numbers out
    "tracedoc.trace": 1,
    "tracedoc.load": 1,
    "tracedoc.cache": 1,
    "tracedoc.signals": 2,
    "tracedoc.engine": 3,
    "tracedoc.config": 3,
    "tracedoc.report": 3,  # the documents (the engine builds Report; ranks, diff, fix-loop the others)
    "tracedoc.render": 3,  # their renderers: they import documents for annotations only (no cycle)
    "tracedoc.settings": 5,
    "tracedoc.pipeline": 5,
    "tracedoc.diff": 6,
    "tracedoc.progress": 6,  # the CLI's progress lines (they read the loader's gzip size hint)
    "tracedoc.ranks": 6,
    "tracedoc.fixloop": 6,
    "tracedoc.cli": 7,
    "tracedoc.__main__": 7,
    "tracedoc.profiler": 7,  # torch.profiler's on_trace_ready handler: public API beside the root
    "tracedoc": 7,  # the package root: the public API, lazily over every layer
}

#: Cycles still in the code (issue "One road in, one document model through, one door out").
KNOWN_CYCLES: set[frozenset[str]] = set()


def layer(mod: str) -> int:
    best = max((p for p in LAYERS if mod == p or mod.startswith(p + ".")), key=len)
    return LAYERS[best]


def modules() -> dict[str, Path]:
    out = {}
    for p in PKG.rglob("*.py"):
        parts = p.relative_to(PKG.parent).with_suffix("").parts
        name = ".".join(parts[:-1] if parts[-1] == "__init__" else parts)
        out[name] = p
    return out


def _type_checking_nodes(tree: ast.AST) -> set[int]:
    skip: set[int] = set()
    for n in ast.walk(tree):
        if isinstance(n, ast.If) and "TYPE_CHECKING" in ast.unparse(n.test):
            for m in n.body:
                skip.update(id(x) for x in ast.walk(m))
    return skip


def graph() -> dict[str, set[str]]:
    mods = modules()
    edges: dict[str, set[str]] = {}
    for name, path in mods.items():
        tree = ast.parse(path.read_text(encoding="utf-8"))
        skip = _type_checking_nodes(tree)
        pkg = name if path.name == "__init__.py" else name.rpartition(".")[0]
        out: set[str] = set()
        for n in ast.walk(tree):
            if id(n) in skip:
                continue
            targets: list[str] = []
            if isinstance(n, ast.ImportFrom):
                base = n.module or ""
                if n.level:
                    up = pkg.split(".")[: len(pkg.split(".")) - (n.level - 1)]
                    base = ".".join([*up, *([n.module] if n.module else [])])
                targets = [f"{base}.{a.name}" if f"{base}.{a.name}" in mods else base for a in n.names]
            elif isinstance(n, ast.Import):
                targets = [a.name for a in n.names]
            out.update(t for t in targets if t in mods and t != name)
        edges[name] = out
    return edges


def cycles(edges: dict[str, set[str]]) -> list[frozenset[str]]:
    """Strongly connected components of more than one module (Tarjan)."""
    index: dict[str, int] = {}
    low: dict[str, int] = {}
    stack: list[str] = []
    on: set[str] = set()
    out: list[frozenset[str]] = []

    def visit(v: str) -> None:
        index[v] = low[v] = len(index)
        stack.append(v)
        on.add(v)
        for w in edges.get(v, ()):
            if w not in index:
                visit(w)
                low[v] = min(low[v], low[w])
            elif w in on:
                low[v] = min(low[v], index[w])
        if low[v] == index[v]:
            comp = set()
            while True:
                w = stack.pop()
                on.discard(w)
                comp.add(w)
                if w == v:
                    break
            if len(comp) > 1:
                out.append(frozenset(comp))

    for v in sorted(edges):
        if v not in index:
            visit(v)
    return out


def test_no_import_cycle_but_the_known_ones():
    found = set(cycles(graph()))
    assert found - KNOWN_CYCLES == set(), "new import cycle"
    assert KNOWN_CYCLES - found == set(), "a known cycle is gone: delete it from KNOWN_CYCLES"


def test_no_module_imports_a_layer_above_its_own():
    edges = graph()
    upward = sorted(
        (a, b)
        for a, targets in edges.items()
        for b in targets
        if layer(b) > layer(a) and not any(a in c and b in c for c in KNOWN_CYCLES)
    )
    assert upward == [], upward


def test_the_graph_reader_sees_imports_inside_functions_and_skips_type_checking(tmp_path):
    edges = graph()
    # tracedoc.load.build imports plural inside a function (an error path): seen
    assert "tracedoc.text" in edges["tracedoc.load.build"]
    # render.report imports Report for annotations only (under TYPE_CHECKING): not an edge
    assert "tracedoc.report.model" not in edges["tracedoc.render.report"]


#: The modules the issue rewrote, where no function may pass MAX_FUNCTION_LINES (the loaders,
#: signals and the ledger are out of its scope).
REWRITTEN = ("cli", "pipeline.py", "settings.py", "report", "render", "ranks", "fixloop", "diff.py")
MAX_FUNCTION_LINES = 80


def test_no_function_over_80_lines_in_the_rewritten_modules():
    long = []
    for name in REWRITTEN:
        root = PKG / name
        for path in [root] if root.is_file() else sorted(root.rglob("*.py")):
            for n in ast.walk(ast.parse(path.read_text())):
                if isinstance(n, (ast.FunctionDef, ast.AsyncFunctionDef)):
                    lines = n.end_lineno - n.lineno + 1
                    if lines > MAX_FUNCTION_LINES:
                        long.append(f"{path.relative_to(PKG)}:{n.lineno} {n.name} ({lines} lines)")
    assert long == []
