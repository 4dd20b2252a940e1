"""Shared fixtures: where the real traces live (skip cleanly when absent)."""

from __future__ import annotations

import sys
from pathlib import Path

import pytest

sys.path.insert(0, str(Path(__file__).parent))

REPO = Path(__file__).resolve().parent.parent
SHARED_TRACES = REPO.parent / "shared" / "traces"


def real_trace(name: str) -> Path:
    """Path of a real trace in ../shared/traces, or skip the test when it is absent."""
    p = SHARED_TRACES / name
    if not p.exists():
        pytest.skip(f"real trace {name} not available (../shared/traces absent)")
    return p


@pytest.fixture
def shared_traces() -> Path:
    if not SHARED_TRACES.is_dir():
        pytest.skip("../shared/traces absent")
    return SHARED_TRACES
