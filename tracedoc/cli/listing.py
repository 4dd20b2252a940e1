"""The listing commands: ``tracedoc rules``, ``tracedoc rule NAME`` and ``tracedoc signals``."""

from __future__ import annotations

import sys

import typer
from rich.console import Console
from rich.markup import escape
from rich.text import Text

from tracedoc.cli.common import Format, app, fail, list_format, md_table
from tracedoc.text import plain_rst

#: Narrowest last column (the summary, the definition) a table is laid out with; a console
#: narrower than the other columns and this gets one entry per block instead.
MIN_TEXT_COLUMN = 40


def definition(doc: str) -> str:
    """A signal's definition for the terminal: the first paragraph of its docstring (the first
    line alone can stop mid-sentence), reStructuredText markup shown as plain text."""
    return plain_rst(doc.strip().split("\n\n", 1)[0])


def print_listing(console: Console, header: list[str], rows: list[list[str]], meta_sep: str = " · ") -> None:
    """A listing whose last column is prose (a rule's summary, a signal's definition): a table
    where the console leaves that column :data:`MIN_TEXT_COLUMN` cells, else one block per row
    (the first column in bold, the short columns after it, the prose below with a hanging
    indent). Either way the prose breaks at spaces only, never inside a word."""
    from rich.table import Table

    fixed = [max(len(header[j]), *(len(r[j]) for r in rows)) for j in range(len(header) - 1)]
    if console.width - sum(fixed) - 3 * (len(header) - 1) >= MIN_TEXT_COLUMN:
        table = Table(show_edge=False, pad_edge=False)
        for j, col in enumerate(header):
            last = j == len(header) - 1
            table.add_column(col, no_wrap=not last, min_width=None if not last else MIN_TEXT_COLUMN)
        for row in rows:
            table.add_row(*(escape(c) for c in row))
        console.print(table)
        return
    for row in rows:
        head = Text(row[0], style="bold") + Text("  " + meta_sep.join(row[1:-1]), style="dim")
        head.no_wrap, head.overflow = True, "ellipsis"
        console.print(head)
        for line in Text(row[-1]).wrap(console, max(console.width - 4, 20)):
            line.rstrip()
            console.print(Text("    ") + line, no_wrap=True, overflow="ellipsis")


@app.command("rules")
def list_rules(
    format: Format = typer.Option(Format.text, "--format", "-f", help="Output format: text, json or markdown."),
) -> None:
    """List the rules: code, name, severity, fix safety, summary."""
    from tracedoc.engine.rules import builtin_rules

    list_format(format, "rules")
    rules = builtin_rules()
    if format is Format.json:
        import orjson

        sys.stdout.write(
            orjson.dumps(
                [
                    {
                        "code": r.code,
                        "name": r.name,
                        "severity": r.severity,
                        "summary": r.summary,
                        "condition": r.condition.source,
                        "fix": r.fix.to_dict(),
                    }
                    for r in rules
                ],
                option=orjson.OPT_INDENT_2,
            ).decode()
            + "\n"
        )
        return
    header = ["code", "name", "severity", "fix safety", "summary"]
    rows = [[r.code, r.name, r.severity, r.fix.safety, r.summary] for r in rules]
    if format is Format.markdown:
        sys.stdout.write(md_table(header, [[f"`{c}`" if j < 2 else c for j, c in enumerate(r)] for r in rows]))
        return
    print_listing(Console(highlight=False), header, [[*r[:4], plain_rst(r[4])] for r in rows])


@app.command("rule")
def explain_rule(
    name_or_code: str = typer.Argument(..., help="A rule code (TD101) or name (dataloader-stall)."),
) -> None:
    """Explain one rule: what it detects, why it matters, an example, the fix and its safety.

    Code (the example and the fix) is printed line for line, never re-wrapped.
    """
    from tracedoc.engine.rules import builtin_rules

    key = name_or_code.strip()
    rules = builtin_rules()
    matches = [r for r in rules if key.upper() == r.code or key == r.name]
    if not matches:
        import difflib

        close = difflib.get_close_matches(key, [r.code for r in rules] + [r.name for r in rules], n=1, cutoff=0.5)
        raise fail(f"no rule {key!r}" + (f"; did you mean {close[0]!r}?" if close else " (see `tracedoc rules`)"))
    r = matches[0]
    c = Console(highlight=False)
    c.print(f"[bold]{r.code} {r.name}[/] ({r.severity}): {escape(r.summary)}\n")
    c.print(f"[bold]condition[/]  {escape(r.condition.source)}", soft_wrap=True)
    if r.estimated_saving_ms is not None:
        c.print(
            f"[bold]estimated saving (ms/step)[/]  {escape(r.estimated_saving_ms.source)}: {escape(r.saving_basis)}"
        )
    for section, title in (
        ("what", "What it detects"),
        ("why", "Why it matters"),
        ("example", "Example"),
        ("fix", "Fix"),
        ("safety", "Fix safety"),
    ):
        c.print(f"\n[bold]{title}[/]" + (escape(f" [{r.fix.safety}]") if section == "safety" else ""))
        # the example and the fix are code: soft_wrap keeps each line whole (the terminal may
        # fold a long one visually, but no newline is inserted into it)
        c.print(escape(r.docs[section].strip("\n")), soft_wrap=section in ("example", "fix"))
    if r.fix.knobs:
        c.print(f"\n[bold]fix-loop knobs[/]  {', '.join(r.fix.knobs)}")


@app.command("signals")
def list_signals(
    format: Format = typer.Option(Format.text, "--format", "-f", help="Output format: text, json or markdown."),
) -> None:
    """List the signals rules can use, with units and definitions."""
    from tracedoc.signals import SIGNALS

    list_format(format, "signals")
    rows = [[name, sig.unit, sig.scope, sig.summary] for name, sig in sorted(SIGNALS.items())]
    if format is Format.json:
        import orjson

        data = [{"signal": n, "unit": u, "covers": c, "summary": d} for n, u, c, d in rows]
        sys.stdout.write(orjson.dumps(data, option=orjson.OPT_INDENT_2).decode() + "\n")
        return
    if format is Format.markdown:
        sys.stdout.write(
            md_table(["signal", "unit", "covers", "definition"], [[f"`{n}`", u, c, d] for n, u, c, d in rows])
        )
        return
    text_rows = [[name, sig.unit, sig.scope, definition(sig.doc)] for name, sig in sorted(SIGNALS.items())]
    print_listing(Console(highlight=False), ["signal", "unit", "covers", "definition"], text_rows)
