"""Shared fixtures: where the real traces live.

The real traces the tests use are copied into the repository's ``fixtures/`` (source,
commit and license in ``fixtures/PROVENANCE.md``), so a fresh clone runs every test
with nothing beside it. A missing fixture is a failure, never a skip.
"""

from __future__ import annotations

import sys
from pathlib import Path

import pytest

sys.path.insert(0, str(Path(__file__).parent))

REPO = Path(__file__).resolve().parent.parent
FIXTURES = REPO / "fixtures"
#: Real GPU traces from other projects (every ``*.gz`` in fixtures/ but our own CPU recording).
REAL_TRACES = sorted(p.name for p in FIXTURES.glob("*.json.gz") if not p.name.startswith("cpu_resnet18"))


def real_trace(name: str) -> Path:
    """Path of a real trace in ``fixtures/``.

    Raises:
        FileNotFoundError: the fixture is missing (a broken checkout, not a reason to skip).
    """
    p = FIXTURES / name
    if not p.exists():
        raise FileNotFoundError(f"fixture {name} is missing from {FIXTURES}")
    return p


@pytest.fixture
def fixtures_dir() -> Path:
    return FIXTURES
