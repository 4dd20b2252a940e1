"""The facts tracedoc reads about the machine it runs on: CPU cores, CPU flags, CPU model.

Every place that depends on the host reads it here, and nowhere else: the fix-loop's
``num_workers`` search (cores), whether AMP applies on the CPU (bf16 flags), the trace
metadata a workload records (:func:`tracedoc.fixloop.harness.host_info`), and how many
processes decode a large trace (:func:`tracedoc.load.fast.parallel_parts`).

Two environment variables replace the readings, for the process and every child it starts
(fix-loop trials inherit them):

- ``TRACEDOC_HOST_CORES``: a positive integer, the number of CPUs this process may use.
- ``TRACEDOC_HOST_CPU_FLAGS``: the CPU feature flags, separated by spaces or commas, as
  ``/proc/cpuinfo`` writes them (``""`` means none).

They exist so that a test, or a person asking "what would tracedoc do on a 16-core host with
AVX-512 BF16?", can set the facts both ways on any machine. The test suite sets them with
``pytest --host-cores N --host-bf16 yes|no`` (``tests/conftest.py``). Nothing here imports torch.
"""

from __future__ import annotations

import os
import platform
import re

from tracedoc.errors import HostFactError

#: Environment variable that replaces :func:`cpu_cores`' reading.
CORES_ENV = "TRACEDOC_HOST_CORES"
#: Environment variable that replaces :func:`cpu_flags`' reading.
FLAGS_ENV = "TRACEDOC_HOST_CPU_FLAGS"

#: CPU flags (``/proc/cpuinfo``) that mean the cores have bf16 matrix or dot-product units:
#: Intel AMX (``amx_bf16``, Sapphire Rapids and later) and AVX-512 BF16 (Cooper Lake and later;
#: AMD Zen 4 and later). Source: the Linux kernel's ``arch/x86/include/asm/cpufeatures.h`` names.
BF16_CPU_FLAGS = ("amx_bf16", "avx512_bf16")

#: Largest core count accepted from :data:`CORES_ENV` (an absurd value is an error, not a plan).
MAX_FORCED_CORES = 4096

_FLAG_RE = re.compile(r"[A-Za-z0-9_.]{1,64}")


def cpu_cores() -> int:
    """CPUs this process may run on: ``$TRACEDOC_HOST_CORES`` when set, else the size of the
    affinity mask (``os.sched_getaffinity``), else ``os.cpu_count()``, else 1.

    Raises:
        tracedoc.errors.HostFactError: (a ValueError) ``$TRACEDOC_HOST_CORES`` is not an integer in 1..:data:`MAX_FORCED_CORES`.
    """
    forced = os.environ.get(CORES_ENV)
    if forced is not None and forced.strip() != "":
        try:
            n = int(forced.strip())
        except ValueError:
            raise HostFactError(f"${CORES_ENV}={forced[:40]!r}: expected a whole number of CPUs") from None
        if not 1 <= n <= MAX_FORCED_CORES:
            raise HostFactError(f"${CORES_ENV}={n}: expected 1 to {MAX_FORCED_CORES} CPUs")
        return n
    try:
        return len(os.sched_getaffinity(0))
    except AttributeError:  # pragma: no cover - macOS, Windows
        return os.cpu_count() or 1


def cpu_flags() -> list[str]:
    """The CPU feature flags: ``$TRACEDOC_HOST_CPU_FLAGS`` when set (``""``: none), else the
    ``flags`` line of ``/proc/cpuinfo`` (x86) or its ``Features`` line (Arm); empty elsewhere.

    Raises:
        tracedoc.errors.HostFactError: (a ValueError) a forced flag is not 1-64 letters, digits, ``_`` or ``.``.
    """
    forced = os.environ.get(FLAGS_ENV)
    if forced is not None:
        flags = [f for f in re.split(r"[\s,]+", forced) if f]
        for f in flags:
            if not _FLAG_RE.fullmatch(f):
                raise HostFactError(f"${FLAGS_ENV}: {f[:40]!r} is not a CPU flag name")
        return flags
    text = _cpuinfo_field("flags") or _cpuinfo_field("Features") or ""
    return text.split()


def bf16_matrix_units(flags: list[str] | None = None) -> bool:
    """Whether ``flags`` (default :func:`cpu_flags`) include any of :data:`BF16_CPU_FLAGS`."""
    flags = cpu_flags() if flags is None else flags
    return any(f in flags for f in BF16_CPU_FLAGS)


def cpu_model() -> str:
    """The CPU's model name (``/proc/cpuinfo``), else ``platform.processor()`` or the machine type."""
    return _cpuinfo_field("model name") or platform.processor() or platform.machine()


def check() -> None:
    """Validate the forced host facts, if any, without reading the host.

    Raises:
        ValueError: one of the environment variables holds an invalid value.
    """
    if os.environ.get(CORES_ENV, "").strip():
        cpu_cores()
    if FLAGS_ENV in os.environ:
        cpu_flags()


def forced() -> dict[str, str]:
    """The host facts replaced through the environment: ``{variable: value}`` (empty if none)."""
    return {k: os.environ[k] for k in (CORES_ENV, FLAGS_ENV) if k in os.environ}


def _cpuinfo_field(name: str) -> str | None:
    try:
        with open("/proc/cpuinfo", encoding="utf-8", errors="replace") as fh:
            for line in fh:
                if line.split(":", 1)[0].strip() == name:
                    return line.split(":", 1)[1].strip()
    except OSError:
        pass
    return None
