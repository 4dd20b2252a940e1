#!/usr/bin/env python3
"""Re-run the notebook session of docs/python-api.md and rewrite its outputs.

Each ```python cell is executed in one shared namespace, in order, from the repository
root; the ```text cell right after it is replaced by what the cell printed, followed by
the repr of its last expression (as a notebook shows it; a DataFrame with every column,
at most 120 characters a line). Run it after a change that alters what tracedoc prints:

    .venv/bin/python docs/regenerate_python_api.py
"""

from __future__ import annotations

import ast
import contextlib
import io
import os
import re
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
DOC = ROOT / "docs" / "python-api.md"
CELL = re.compile(r"```python\n(.*?)```\n```text\n(.*?)```\n", re.S)


def run_cell(code: str, ns: dict) -> str:
    tree = ast.parse(code)
    last = tree.body.pop() if tree.body and isinstance(tree.body[-1], ast.Expr) else None
    out = io.StringIO()
    with contextlib.redirect_stdout(out):
        exec(compile(tree, "<cell>", "exec"), ns)
        if last is not None:
            value = eval(compile(ast.Expression(last.value), "<cell>", "eval"), ns)
            if value is not None:
                print(repr(value))
    return "".join(line.rstrip() + "\n" for line in out.getvalue().splitlines())


def main() -> None:
    os.chdir(ROOT)
    import pandas as pd

    # a DataFrame as a notebook shows it: every column (Jupyter renders it as an HTML table);
    # plain text at 120 columns at most, so the Markdown stays readable
    pd.set_option("display.max_columns", None)
    pd.set_option("display.width", 120)
    ns: dict = {}
    text = DOC.read_text(encoding="utf-8")
    text = CELL.sub(lambda m: f"```python\n{m.group(1)}```\n```text\n{run_cell(m.group(1), ns)}```\n", text)
    DOC.write_text(text, encoding="utf-8")


if __name__ == "__main__":
    main()
