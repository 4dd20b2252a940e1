"""Peak throughput of known GPUs and the roofline of one op against it.

The figures live in ``peaks.toml`` beside this module, one row per product and form factor,
each with its source (the vendor's datasheet or whitepaper), its clock and form factor, and
dense (non-sparse) rates only. :func:`match_device` finds the row of a trace's device from the
name Kineto records in ``deviceProperties`` (``"NVIDIA H100 80GB HBM3"``, ``"Tesla
V100-SXM2-32GB"``, ``"AMD Instinct MI300X"``) and, where the name cannot tell form factors apart,
from the recorded properties (``numSms``, ``computeMajor``/``computeMinor``,
``totalGlobalMem``; the legacy ``multiProcessorCount``/``major``/``minor`` too). An unknown or
ambiguous device gives ``None``: the peak is unknown, and nothing is guessed.

:func:`tracedoc.perf.flops.roofline` places one op (its :class:`~tracedoc.perf.flops.OpCost`
and measured time) on the roofline model (Williams, Waterman and Patterson, "Roofline: an insightful visual
performance model for multicore architectures", CACM 52(4), 2009): attainable throughput is
``min(peak compute, intensity * peak bandwidth)``; the ridge point ``peak compute / peak
bandwidth`` (FLOP/byte) separates memory-bound ops (intensity below it) from compute-bound ones.
"""

from __future__ import annotations

import functools
import re
import tomllib
from dataclasses import dataclass
from importlib import resources
from typing import Any

__all__ = ["DevicePeak", "devices", "match_device"]

_RATE_FIELDS = ("fp64", "fp64_tc", "fp32", "fp32_tc", "tf32_tc", "fp16_tc", "bf16_tc", "fp8_tc", "fp4_tc", "int8_tc")

#: Spellings of a dtype accepted by :meth:`DevicePeak.peak_tflops`.
_DTYPE_ALIASES = {
    "fp64": "fp64",
    "float64": "fp64",
    "double": "fp64",
    "fp32": "fp32",
    "float32": "fp32",
    "float": "fp32",
    "tf32": "tf32",
    "fp16": "fp16",
    "float16": "fp16",
    "half": "fp16",
    "bf16": "bf16",
    "bfloat16": "bf16",
    "fp8": "fp8",
    "fp4": "fp4",
    "int8": "int8",
}


@dataclass(frozen=True)
class DevicePeak:
    """One product's dense peak rates (TFLOP/s; int8 in TOPS) and memory bandwidth (TB/s).

    ``fp64``/``fp32`` are the vector (CUDA-core, SIMD) rates; the ``*_tc`` ones the tensor-core
    (NVIDIA) or matrix-core (AMD) rates; ``fp32_tc`` is AMD's matrix FP32 on chips without
    TF32. ``None``: the product lacks the rate or its source does not print it."""

    id: str
    name: str
    vendor: str
    source: str
    mem_tbs: float | None
    fp64: float | None = None
    fp64_tc: float | None = None
    fp32: float | None = None
    fp32_tc: float | None = None
    tf32_tc: float | None = None
    fp16_tc: float | None = None
    bf16_tc: float | None = None
    fp8_tc: float | None = None
    fp4_tc: float | None = None
    int8_tc: float | None = None
    clock: str = ""
    note: str = ""

    def peak_tflops(self, dtype: str, tensor_cores: bool) -> float | None:
        """The dense peak for ``dtype`` (``"fp32"``, ``"bf16"``, ``"fp8"``...; the canonical
        names of :attr:`OpCost.dtype` or torch's spellings).

        With ``tensor_cores``: fp32 means TF32 tensor cores (AMD chips without TF32: matrix
        FP32), fp64 the FP64 tensor/matrix rate, fp16/bf16/fp8/fp4/int8 their tensor rates.
        Without: fp64 and fp32 are the vector rates, and fp16/bf16 are given the FP32 vector
        rate (PyTorch's elementwise kernels compute in fp32; packed half math may be up to 2x
        faster); other dtypes have no vector peak here (``None``)."""
        d = _DTYPE_ALIASES.get(dtype.lower()) if isinstance(dtype, str) else None
        if d is None:
            return None
        if tensor_cores:
            if d in ("fp32", "tf32"):
                return self.tf32_tc if self.tf32_tc is not None else self.fp32_tc
            return getattr(self, f"{d}_tc", None)
        if d == "fp64":
            return self.fp64
        if d in ("fp32", "fp16", "bf16"):
            return self.fp32
        return None


@dataclass(frozen=True)
class _Row:
    peak: DevicePeak
    family: re.Pattern[str]
    form: re.Pattern[str] | None
    exclude: re.Pattern[str] | None
    compute: tuple[int, int] | None
    sms: int | None
    mem_gb: tuple[float, float] | None
    generic: bool

    def figures(self) -> tuple[Any, ...]:
        return (self.peak.mem_tbs, *(getattr(self.peak, f) for f in _RATE_FIELDS))


def _num(v: object) -> float | None:
    return float(v) if isinstance(v, (int, float)) and not isinstance(v, bool) else None


@functools.cache
def _rows() -> tuple[_Row, ...]:
    text = resources.files("tracedoc.perf").joinpath("peaks.toml").read_text(encoding="utf-8")
    rows = []
    for d in tomllib.loads(text)["device"]:
        peak = DevicePeak(
            id=d["id"],
            name=d["name"],
            vendor=d["vendor"],
            source=d["source"],
            mem_tbs=_num(d.get("mem_tbs")),
            clock=d.get("clock", ""),
            note=d.get("note", ""),
            **{f: _num(d.get(f)) for f in _RATE_FIELDS},
        )
        rows.append(
            _Row(
                peak=peak,
                family=re.compile(d["family"]),
                form=re.compile(d["form"]) if "form" in d else None,
                exclude=re.compile(d["exclude"]) if "exclude" in d else None,
                compute=tuple(d["compute"]) if "compute" in d else None,  # type: ignore[arg-type]
                sms=d.get("sms"),
                mem_gb=tuple(d["mem_gb"]) if "mem_gb" in d else None,  # type: ignore[arg-type]
                generic=bool(d.get("generic", False)),
            )
        )
    return tuple(rows)


def devices() -> tuple[DevicePeak, ...]:
    """Every known device, in the data's order."""
    return tuple(r.peak for r in _rows())


def _int_prop(props: dict[str, Any], *keys: str) -> int | None:
    for k in keys:
        v = props.get(k)
        if type(v) is int and 0 <= v < 1 << 50:
            return v
    return None


@dataclass(frozen=True)
class _Facts:
    compute: tuple[int, int] | None
    sms: int | None
    mem_gb: float | None


def _compute_capability(p: dict[str, Any]) -> tuple[int, int] | None:
    major, minor = _int_prop(p, "computeMajor", "major"), _int_prop(p, "computeMinor", "minor")
    if major is not None and minor is not None:
        return major, minor
    cc = p.get("compute_capability")
    if isinstance(cc, (tuple, list)) and len(cc) == 2 and all(type(v) is int for v in cc):
        return cc[0], cc[1]
    if isinstance(cc, (str, float)) and not isinstance(cc, bool):
        found = re.fullmatch(r"\s*(\d{1,3})\.(\d{1,3})\s*", str(cc))
        if found:
            return int(found.group(1)), int(found.group(2))
    return None


def _facts(name: str, props: object) -> _Facts:
    """What the properties say: Kineto's keys (``computeMajor``/``computeMinor``, ``numSms``,
    ``totalGlobalMem``), the legacy ``major``/``minor``/``multiProcessorCount``, or the
    snake-case ``compute_capability`` (``(9, 0)`` or ``"9.0"``), ``num_sms``,
    ``total_memory_bytes``."""
    p = props if isinstance(props, dict) else {}
    sms = _int_prop(p, "numSms", "multiProcessorCount", "num_sms")
    mem = _int_prop(p, "totalGlobalMem", "total_memory_bytes")
    mem_gb = mem / 1e9 if mem else None
    if mem_gb is None:
        hint = re.search(r"(\d{2,3})\s*gb?\b", name)
        mem_gb = float(hint.group(1)) if hint else None
    return _Facts(_compute_capability(p), sms, mem_gb)


def _fits(row: _Row, f: _Facts) -> bool:
    if row.sms is not None and f.sms is not None and row.sms != f.sms:
        return False
    if row.compute is not None and f.compute is not None and row.compute != f.compute:
        return False
    if row.mem_gb is not None and f.mem_gb is not None and not row.mem_gb[0] <= f.mem_gb <= row.mem_gb[1]:
        return False
    return True


#: Names that say nothing of the model (ROCm before 6 reports gfx90a GCDs as "AMD Radeon
#: Graphics"): these alone are matched by properties (vendor, compute capability, SM/CU count,
#: memory), among the rows marked ``generic``.
_GENERIC = re.compile(r"^(amd radeon graphics|amd instinct|nvidia graphics device|device \d+|)$")


def _one(rows: list[_Row]) -> DevicePeak | None:
    """The row, when the candidates all carry the same figures (else ambiguous: ``None``)."""
    if not rows or len({r.figures() for r in rows}) != 1:
        return None
    return rows[0].peak


def match_device(name: str, props: dict[str, Any] | None = None) -> DevicePeak | None:
    """The known device a trace's ``deviceProperties`` entry describes, or ``None``.

    ``name`` is the recorded name; ``props`` the rest of the entry (optional). Rows whose family
    pattern matches the name are candidates; those whose form pattern also matches are
    preferred; the properties then rule out rows whose SM count, compute capability or memory
    size disagree (with no ``totalGlobalMem``, a ``"80GB"`` in the name stands in). When what
    is left carries different figures -- the name and properties cannot tell the form factors
    apart -- the answer is ``None``, never a guess."""
    if not isinstance(name, str) or len(name) > 300:
        return None
    low = " ".join(name.lower().replace("_", " ").split())
    f = _facts(low, props)
    rows = [r for r in _rows() if r.family.search(low) and not (r.exclude and r.exclude.search(low))]
    if rows:
        formed = [r for r in rows if r.form and r.form.search(low)]
        fitting = [r for r in formed if _fits(r, f)]
        if not fitting:
            fitting = [r for r in rows if _fits(r, f)]
        return _one(fitting)
    if _GENERIC.match(low) and f.compute is not None and f.sms is not None:
        vendor = "amd" if low.startswith("amd") else "nvidia" if low.startswith("nvidia") else None
        cands = [
            r
            for r in _rows()
            if r.generic and (vendor is None or r.peak.vendor == vendor) and r.sms == f.sms and r.compute == f.compute
        ]
        return _one([r for r in cands if _fits(r, f)])
    return None
