"""The wheel ships every package and data file: a package missing from pyproject.toml's list
works in an editable install (the tests' and CI's) and is absent from a built wheel."""

from __future__ import annotations

import fnmatch
import tomllib
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
PROJECT = tomllib.loads((ROOT / "pyproject.toml").read_text())["tool"]["setuptools"]


def _packages_on_disk() -> set[str]:
    pkg = ROOT / "tracedoc"
    return {
        ".".join(p.parent.relative_to(ROOT).parts) for p in pkg.rglob("__init__.py") if "__pycache__" not in p.parts
    }


def test_every_package_is_listed():
    missing = _packages_on_disk() - set(PROJECT["packages"])
    assert not missing, f"add to [tool.setuptools] packages: {sorted(missing)}"


def test_every_data_file_is_shipped():
    data = PROJECT.get("package-data", {})
    for pkg in _packages_on_disk():
        folder = ROOT.joinpath(*pkg.split("."))
        for f in folder.iterdir():
            if f.is_file() and f.suffix in (".toml", ".json", ".csv"):
                globs = data.get(pkg, [])
                assert any(fnmatch.fnmatch(f.name, g) for g in globs), f"{f.relative_to(ROOT)} is not in package-data"
