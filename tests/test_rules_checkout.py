"""The built-in rules are found from a source checkout that is on PYTHONPATH but not installed.

There the package ``tracedoc.builtin_rules`` (pyproject maps it to the top-level ``rules/``
folder) does not exist. On the lent H100 the fix-loop failed with "No module named
'tracedoc.builtin_rules'" for this reason, before the fallback to ``rules/`` existed.
"""

from __future__ import annotations

from importlib import resources
from pathlib import Path

from tracedoc.engine import rules as rules_mod

ROOT = Path(__file__).resolve().parents[1]


def test_checkout_without_the_package_reads_the_rules_folder(monkeypatch):
    real_files = resources.files

    def files(name):
        if name == "tracedoc.builtin_rules":
            raise ModuleNotFoundError(f"No module named {name!r}")
        return real_files(name)

    rules_mod._builtin_rules.cache_clear()
    monkeypatch.setattr(rules_mod.resources, "files", files)
    try:
        codes = [r.code for r in rules_mod.builtin_rules()]
    finally:
        rules_mod._builtin_rules.cache_clear()
    on_disk = sorted(p.name.split("_", 1)[0] for p in (ROOT / "rules").glob("*.toml"))
    assert codes == on_disk
    assert len(codes) > 10
