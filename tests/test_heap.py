"""tracedoc.heap: glibc's allocator settings, and nothing anywhere else (issue 24)."""

from __future__ import annotations

import platform

from tracedoc import heap


def _glibc() -> bool:
    return platform.system() == "Linux" and platform.libc_ver()[0] == "glibc"


def test_no_op_without_glibc(monkeypatch):
    monkeypatch.setattr(heap, "_libc", lambda: None)
    assert heap.fix_mmap_threshold() is False
    assert heap.release_free_memory() is False


def test_calls_reach_the_c_library(monkeypatch):
    calls = []

    class FakeLibc:
        def mallopt(self, param, value):
            calls.append(("mallopt", param, value))
            return 1

        def malloc_trim(self, pad):
            calls.append(("malloc_trim", pad))
            return 0

    monkeypatch.setattr(heap, "_libc", FakeLibc)
    assert heap.fix_mmap_threshold() is True
    assert heap.release_free_memory() is False  # nothing returned
    assert calls == [("mallopt", -3, heap.MMAP_THRESHOLD_BYTES), ("malloc_trim", 0)]


def test_a_libc_without_the_calls_is_a_no_op(monkeypatch):
    monkeypatch.setattr(heap, "_libc", lambda: object())
    assert heap.fix_mmap_threshold() is False
    assert heap.release_free_memory() is False


def test_the_real_c_library():
    # glibc takes the threshold; any other C library is left alone
    assert heap.fix_mmap_threshold() is _glibc()
    assert heap.release_free_memory() in (True, False)
