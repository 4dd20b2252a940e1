"""Host facts (cores, bf16 flags) are read in one place and can be forced both ways on any host."""

from __future__ import annotations

import subprocess
import sys

import pytest

from tracedoc import hostfacts
from tracedoc.fixloop import knobs
from tracedoc.load import fast


class _Sized:
    """Stands for a trace buffer of ``n`` bytes (parallel_parts reads only its length)."""

    def __init__(self, n: int) -> None:
        self.n = n

    def __len__(self) -> int:
        return self.n


@pytest.mark.parametrize("cores", [2, 16])
def test_forced_cores_drive_the_worker_search_and_the_decoder(host_facts, cores):
    host_facts(cores=cores)
    assert hostfacts.cpu_cores() == cores
    assert knobs.cpu_count() == cores
    assert knobs.worker_values(knobs.cpu_count())[-1] == cores
    assert fast.parallel_parts(_Sized(fast.PARALLEL_MIN_BYTES * 16)) == (
        cores if sys.platform.startswith("linux") else 1
    )


@pytest.mark.parametrize("bf16", [True, False])
def test_forced_bf16_flags_decide_cpu_amp(host_facts, bf16):
    host_facts(bf16=bf16)
    assert hostfacts.bf16_matrix_units() is bf16
    amp = knobs.KNOB_TABLE["amp"]
    assert amp.applies_to("cpu", {"bf16_supported": hostfacts.bf16_matrix_units()}) is bf16
    assert amp.applies_to("cuda", {}) is True  # the GPU does not depend on the CPU flags


@pytest.mark.parametrize("bf16", [True, False])
def test_harness_reports_the_forced_facts(host_facts, bf16):
    pytest.importorskip("torch")
    from tracedoc.fixloop import harness

    host_facts(cores=16, bf16=bf16)
    assert harness.device_info("cpu")["bf16_supported"] is bf16
    info = harness.host_info(dataloader_workers=3)
    assert info["cpu_cores"] == 16 and info["bf16_matrix_units"] is bf16
    assert ("avx512_bf16" in info["cpu_flags"]) is bf16


def test_empty_flag_list_means_no_flags(monkeypatch):
    monkeypatch.setenv(hostfacts.FLAGS_ENV, "")
    assert hostfacts.cpu_flags() == [] and not hostfacts.bf16_matrix_units()
    monkeypatch.setenv(hostfacts.FLAGS_ENV, " avx2, amx_bf16 ")
    assert hostfacts.cpu_flags() == ["avx2", "amx_bf16"] and hostfacts.bf16_matrix_units()


@pytest.mark.parametrize(
    "var, value, problem",
    [
        (hostfacts.CORES_ENV, "two", "whole number"),
        (hostfacts.CORES_ENV, "0", "1 to"),
        (hostfacts.CORES_ENV, "99999999", "1 to"),
        (hostfacts.FLAGS_ENV, "avx2 \x1b]0;pwned\x07", "not a CPU flag"),
    ],
)
def test_bad_forced_facts_are_one_line_errors(monkeypatch, var, value, problem):
    monkeypatch.setenv(var, value)
    with pytest.raises(ValueError, match=problem):
        hostfacts.check()
    r = subprocess.run(
        [sys.executable, "-m", "tracedoc", "rules"],
        capture_output=True,
        text=True,
        timeout=120,
        stdin=subprocess.DEVNULL,
    )
    assert r.returncode == 2 and r.stdout == ""
    assert r.stderr.count("\n") == 1 and var in r.stderr and "\x1b" not in r.stderr, r.stderr
    # the line is about the variable, as every other bad TRACEDOC_* value is: no exception name
    assert r.stderr.startswith(f"tracedoc: error: ${var}") and "Error" not in r.stderr, r.stderr


def test_unforced_reads_the_host(monkeypatch):
    monkeypatch.delenv(hostfacts.CORES_ENV, raising=False)
    monkeypatch.delenv(hostfacts.FLAGS_ENV, raising=False)
    assert hostfacts.forced() == {}
    assert hostfacts.cpu_cores() >= 1
    assert isinstance(hostfacts.cpu_flags(), list)
