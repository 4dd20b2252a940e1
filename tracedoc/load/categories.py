"""Category and runtime-name normalisation, done once at load time.

PyTorch's Kineto exporter renamed its event categories over the years
(PyTorch 1.8-1.10 wrote ``Operator``/``Kernel``/``Runtime``/``Memcpy``/``Memset``;
later versions write ``cpu_op``/``kernel``/``cuda_runtime``/... ). ROCm builds keep
the CUDA category names but use ``hip*`` runtime call names. Everything downstream
of the loader sees only the canonical names defined here.
"""

from __future__ import annotations

import re

#: Canonical event kinds the loader sorts events into.
KIND_OP = "op"  # CPU ops and CPU-side annotations
KIND_RUNTIME = "runtime"  # CUDA/HIP runtime and driver API calls
KIND_KERNEL = "kernel"
KIND_MEMCPY = "memcpy"
KIND_MEMSET = "memset"
KIND_SYNC = "sync"  # cuda_sync events (GPU-side waits recorded by newer Kineto)
KIND_GPU_ANNOTATION = "gpu_annotation"
KIND_IGNORED = "ignored"

#: lower-cased trace category -> (canonical category, kind)
CATEGORY_MAP: dict[str, tuple[str, str]] = {
    "operator": ("cpu_op", KIND_OP),
    "cpu_op": ("cpu_op", KIND_OP),
    "user_annotation": ("user_annotation", KIND_OP),
    "python_function": ("python_function", KIND_OP),
    "kernel": ("kernel", KIND_KERNEL),
    "runtime": ("cuda_runtime", KIND_RUNTIME),
    "cuda_runtime": ("cuda_runtime", KIND_RUNTIME),
    "cuda_driver": ("cuda_driver", KIND_RUNTIME),
    "hip_runtime": ("cuda_runtime", KIND_RUNTIME),
    "privateuse1_runtime": ("cuda_runtime", KIND_RUNTIME),
    # MTIA (Meta's accelerator): host runtime calls keep their own category so the loader can
    # name the device; "mtia_ccp_events" are its on-device kernels (kineto ActivityType
    # MTIA_CCP_EVENTS, "MTIA ondevice CCP events", later aliased to CONCURRENT_KERNEL).
    "mtia_runtime": ("mtia_runtime", KIND_RUNTIME),
    "mtia_ccp_events": ("kernel", KIND_KERNEL),
    "memcpy": ("gpu_memcpy", KIND_MEMCPY),
    "gpu_memcpy": ("gpu_memcpy", KIND_MEMCPY),
    "memset": ("gpu_memset", KIND_MEMSET),
    "gpu_memset": ("gpu_memset", KIND_MEMSET),
    "cuda_sync": ("cuda_sync", KIND_SYNC),
    "gpu_user_annotation": ("gpu_user_annotation", KIND_GPU_ANNOTATION),
}


def normalize_category(cat: str | None) -> tuple[str, str]:
    """Map a raw ``cat`` value to ``(canonical_category, kind)``.

    Unknown or missing categories map to ``("other", KIND_IGNORED)``.
    """
    if not cat:
        return ("other", KIND_IGNORED)
    return CATEGORY_MAP.get(cat.lower(), (cat.lower(), KIND_IGNORED))


# Runtime call classes. Sources: CUDA Runtime/Driver API and HIP API names as they
# appear in Kineto traces (cudaLaunchKernel, cuLaunchKernel, hipLaunchKernel,
# hipExtModuleLaunchKernel, cudaGraphLaunch, ...).
_RUNTIME_CLASSES: list[tuple[str, re.Pattern[str]]] = [
    (
        "launch",
        re.compile(
            r"^(cuda|hip)(LaunchKernel|LaunchKernelExC|LaunchCooperativeKernel|ExtLaunchKernel|ExtModuleLaunchKernel|ModuleLaunchKernel|GraphLaunch)|^cu(LaunchKernel|LaunchKernelEx|LaunchCooperativeKernel|GraphLaunch)|^hipLaunch|^cudaLaunch"
        ),
    ),
    ("memcpy", re.compile(r"^(cuda|hip|cu)Memcpy")),
    ("memset", re.compile(r"^(cuda|hip|cu)Memset")),
    (
        "sync",
        re.compile(
            r"^(cuda|hip|cu)(DeviceSynchronize|StreamSynchronize|EventSynchronize|CtxSynchronize|StreamWaitEvent)"
        ),
    ),
]


def classify_runtime(name: str) -> str:
    """Classify a runtime/driver call name as launch, memcpy, memset, sync or other."""
    for label, pattern in _RUNTIME_CLASSES:
        if pattern.search(name):
            return label
    return "other"


_MEMCPY_RE = re.compile(r"Memcpy\s+(\w+)(?:\s*\((\w+)\s*->\s*(\w+)\))?")


def parse_memcpy_name(name: str) -> tuple[str, str, str]:
    """Split a Kineto memcpy name into ``(copy_kind, src_memory, dst_memory)``.

    ``"Memcpy HtoD (Pageable -> Device)"`` -> ``("HtoD", "Pageable", "Device")``.
    Parts that are absent are returned as ``"unknown"``.
    """
    m = _MEMCPY_RE.search(name)
    if not m:
        return ("unknown", "unknown", "unknown")
    return (m.group(1), m.group(2) or "unknown", m.group(3) or "unknown")
