"""Shared fixtures: where the real traces live.

The real traces the tests use are copied into the repository's ``fixtures/`` (source,
commit and license in ``fixtures/PROVENANCE.md``), so a fresh clone runs every test
with nothing beside it. A missing fixture is a failure, never a skip.
"""

from __future__ import annotations

import os
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


# ---- host facts: forced for the whole run, or per test ----------------------------------------
#
# A test never depends on the CPU it happens to run on. Where the product reads the host
# (cores, bf16 flags) the suite can force both facts for the whole run, fix-loop trials
# included (they inherit the environment):
#
#     pytest --host-cores 2 --host-bf16 no
#     pytest --host-cores 16 --host-bf16 yes
#
# and a single test forces them with the ``host_facts`` fixture.

#: a CPU flag set with bf16 units (AVX-512 BF16) and one without, for --host-bf16 and host_facts
BF16_FLAGS = "fpu sse2 avx2 avx512f avx512_bf16"
NO_BF16_FLAGS = "fpu sse2 avx2 avx512f"


def pytest_addoption(parser):
    group = parser.getgroup("tracedoc host facts")
    group.addoption("--host-cores", type=int, default=None, help="force the CPU count tracedoc reads")
    group.addoption("--host-bf16", choices=("yes", "no"), default=None, help="force whether the CPU has bf16 units")


def pytest_configure(config):
    from tracedoc import hostfacts

    cores, bf16 = config.getoption("--host-cores"), config.getoption("--host-bf16")
    if cores is not None:
        os.environ[hostfacts.CORES_ENV] = str(cores)
    if bf16 is not None:
        os.environ[hostfacts.FLAGS_ENV] = BF16_FLAGS if bf16 == "yes" else NO_BF16_FLAGS


def pytest_report_header(config):
    from tracedoc import hostfacts

    forced = hostfacts.forced()
    told = ", ".join(f"{k}={v!r}" for k, v in forced.items()) or "none forced"
    return f"host facts: {hostfacts.cpu_cores()} cores, bf16 units {hostfacts.bf16_matrix_units()} ({told})"


@pytest.fixture
def host_facts(monkeypatch):
    """Force the host facts for one test: ``host_facts(cores=16, bf16=True)``.

    Sets the :mod:`tracedoc.hostfacts` environment variables (restored after the test), so
    the child processes a test starts see the same facts.
    """
    from tracedoc import hostfacts

    def force(cores: int | None = None, bf16: bool | None = None) -> None:
        if cores is not None:
            monkeypatch.setenv(hostfacts.CORES_ENV, str(cores))
        if bf16 is not None:
            monkeypatch.setenv(hostfacts.FLAGS_ENV, BF16_FLAGS if bf16 else NO_BF16_FLAGS)

    return force
