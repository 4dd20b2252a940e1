"""The knob table: each knob's fix-safety level, the devices it applies to, and how its value is chosen.

Safety levels follow the project's ordered scale (from ruff's fix safety):
``display-only`` < ``unsafe`` < ``safe``. A *safe* knob gives the same training results
(num_workers, pin_memory, non_blocking, input_dtype, set_to_none, channels_last,
compile); an *unsafe* one changes the numerics or dynamics of training (batch_size
changes the optimisation; amp changes the arithmetic). The loop applies safe knobs by
default and unsafe ones only with ``--unsafe-fixes``; display-only fixes are never applied.

How a value is chosen (``search``):

``target``
    a single target value (``True`` for the boolean knobs, ``"uint8"`` for
    input_dtype, the AMP dtype the device supports for amp). Tried once.
``workers``
    1, 2, 4, 8, ... and the CPU count itself, never above the CPU count; the next value
    above the current one is tried while the previous step was kept ("stop when it stops
    helping"). When the finding names a worker count (:func:`suggested_value`: TD101
    dataloader-stall's ``DataLoader(num_workers=N)``, the workers that keep up plus one),
    the first step goes straight to the smallest searched value at or above it, capped at
    the CPU count (on a CPU-only run at the CPU count minus one: see
    :func:`propose_value`), and goes on upward from there while kept. One worker on a
    16-core H100 host, where TD101 said 4, lost in the noise (0.85x) and stopped the
    search (issue 22).
``double``
    the current value doubled, while the previous doubling was kept and did not run out
    of memory; capped at :data:`MAX_BATCH_SIZE`.
``values``
    the next value after the current one in a declared list (workload ``KNOBS``).
``threads``
    intra-op threads (``num_threads``; 0 means PyTorch's default, one per core): the CPU
    count minus the configuration's DataLoader workers, at least 1, so that threads plus
    workers do not exceed the cores (see the ``cpu-oversubscription`` rule, TD501).
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from typing import Any

from tracedoc import hostfacts

SAFETY_ORDER = {"display-only": 0, "unsafe": 1, "safe": 2}

#: Upper bound of the batch-size search (memory, not this cap, is the usual limit).
MAX_BATCH_SIZE = 8192

#: Evidence keys in which a finding names the value of a knob it suggests
#: (:func:`suggested_value`). ``dataloader_workers_suggested`` is the signal TD101's fix text
#: fills in (``tracedoc.signals.steps.dataloader_workers_suggested``).
SUGGESTED_EVIDENCE = {"num_workers": "dataloader_workers_suggested"}

#: Warm-up steps at least, before the timed window of an A/B run in which a knob with a
#: one-off cost is on (either side: both get the same warm-up, so the comparison stays
#: symmetric). ``compile``: each A/B run is a fresh process that compiles again. On the
#: H100 run of issue 22 (fixtures/gpu_runs/h100_fixloop/, trial 2) the compiled ResNet-18
#: timed 42-60 ms per step in the profiled run's windows, which start after 10 steps
#: (5 warm-up and 5 profiled), the same as eager; the A/B runs, timed after the 5 warm-up
#: steps alone, measured 134-324 ms per step (0.25x). 20 is twice the 10 steps seen to be
#: enough there.
WARMUP_STEPS = {"compile": 20}


@dataclass(frozen=True)
class Knob:
    """One knob the loop can change.

    Attributes:
        name: the ``Config`` field name.
        safety: ``"safe"`` or ``"unsafe"`` (see the module docstring).
        devices: device types it applies to (``"cpu"``, ``"cuda"``); ``None`` means all.
        search: ``"target"``, ``"workers"``, ``"double"`` or ``"values"``.
        target: the value for ``search="target"`` (``"amp"`` is resolved per device).
        values: the ordered values for ``search="values"``.
        why_not: why it does not apply on the other devices (shown to the user).
    """

    name: str
    safety: str
    devices: frozenset[str] | None = None
    search: str = "target"
    target: Any = True
    values: tuple[Any, ...] = ()
    why_not: str = ""
    cpu_if_bf16: bool = False

    def applies_to(self, device_type: str, device: dict[str, Any] | None = None) -> bool:
        """Whether the knob does anything on ``device_type`` (``"cpu"``, ``"cuda"``, ...).

        A knob with ``cpu_if_bf16`` (``amp``) also applies on a CPU whose ``device`` info
        says ``bf16_supported`` (the harness reads it from the CPU flags ``amx_bf16`` /
        ``avx512_bf16``).
        """
        if self.devices is None or device_type in self.devices:
            return True
        return self.cpu_if_bf16 and device_type == "cpu" and bool((device or {}).get("bf16_supported"))


_CUDA = frozenset({"cuda"})

#: The built-in knob table. A workload's ``KNOBS`` may add entries or override these.
KNOB_TABLE: dict[str, Knob] = {
    k.name: k
    for k in [
        Knob("num_workers", "safe", None, "workers"),
        Knob(
            "pin_memory",
            "safe",
            _CUDA,
            "target",
            True,
            why_not="page-locked host memory only speeds up host-to-device copies",
        ),
        Knob(
            "non_blocking",
            "safe",
            _CUDA,
            "target",
            True,
            why_not="there is no host-to-device copy to overlap on the CPU",
        ),
        Knob(
            "input_dtype",
            "safe",
            _CUDA,
            "target",
            "uint8",
            why_not="a smaller input dtype only shrinks the host-to-device copy",
        ),
        Knob("num_threads", "safe", None, "threads"),
        Knob("set_to_none", "safe", None, "target", True),
        Knob("channels_last", "safe", None, "target", True),
        Knob("compile", "safe", None, "target", True),
        Knob("batch_size", "unsafe", None, "double"),
        Knob(
            "amp",
            "unsafe",
            _CUDA,
            "target",
            "amp",
            why_not="AMP on the CPU needs bf16 matrix units (AMX or AVX-512 BF16 in the CPU flags), "
            "which this CPU lacks; fp16 autocast does not speed up the CPU",
            cpu_if_bf16=True,
        ),
    ]
}


def cpu_count() -> int:
    """CPUs this process may run on (:func:`tracedoc.hostfacts.cpu_cores`)."""
    return hostfacts.cpu_cores()


def worker_values(n_cpus: int) -> list[int]:
    """The num_workers values searched: powers of two below ``n_cpus``, then ``n_cpus``."""
    values, v = [], 1
    while v < n_cpus:
        values.append(v)
        v *= 2
    values.append(max(n_cpus, 1))
    return values


def resolve_knob(name: str, field_type: str, workload_knobs: dict[str, dict], fix_safety: str | None) -> Knob | None:
    """The :class:`Knob` for ``name``: the workload's ``KNOBS`` entry, else the built-in
    table, else a knob derived from the ``Config`` field type.

    A derived knob takes its safety from the finding's ``fix.safety`` (unknown knobs are
    no safer than the rule says); a bool field is set to ``True``, an int field is
    doubled, and any other type needs declared ``values`` (``None`` is returned).
    """
    declared = workload_knobs.get(name)
    base = KNOB_TABLE.get(name)
    if declared is not None:
        if "devices" in declared:
            devices = frozenset(declared["devices"]) if declared["devices"] else None
        else:
            devices = base.devices if base else None
        values = tuple(declared.get("values") or ())
        return Knob(
            name=name,
            safety=declared.get("safety", base.safety if base else (fix_safety or "unsafe")),
            devices=devices,
            search="values" if values else (base.search if base else _default_search(field_type)),
            target=declared.get("target", base.target if base else True),
            values=values,
            why_not=declared.get("why_not", base.why_not if base else ""),
        )
    if base is not None:
        return base
    search = _default_search(field_type)
    if search is None:
        return None
    return Knob(name=name, safety=fix_safety or "unsafe", search=search, target=True)


def _default_search(field_type: str) -> str | None:
    return {"bool": "target", "int": "double"}.get(field_type)


def suggested_value(name: str, evidence: dict[str, Any] | None) -> int | None:
    """The value of knob ``name`` that a finding's ``evidence`` suggests, or None.

    ``num_workers``: the evidence's ``dataloader_workers_suggested`` when it has one; else,
    from its ``dataloader_ms`` and ``step_time_ms`` (TD101's evidence), the same signal's
    formula, ``ceil(dataloader_ms / (step_time_ms - dataloader_ms)) + 1`` (the workers that
    keep up with the rest of the step, plus one for jitter:
    ``tracedoc.signals.steps.dataloader_workers_keep_up``). Anything else: None.
    """
    key = SUGGESTED_EVIDENCE.get(name)
    ev = evidence or {}

    def number(v: Any) -> float | None:
        ok = isinstance(v, (int, float)) and not isinstance(v, bool) and math.isfinite(v)
        return float(v) if ok else None

    if key is None:
        return None
    direct = number(ev.get(key))
    if direct is not None:
        return int(direct) if direct >= 1 else None
    if name == "num_workers":
        dl, step = number(ev.get("dataloader_ms")), number(ev.get("step_time_ms"))
        if dl is not None and step is not None and dl > 0 and step - dl > 0:
            return math.ceil(dl / (step - dl)) + 1
    return None


def warmup_for(configs: list[dict[str, Any]], current: int) -> int:
    """Warm-up steps for A/B runs of ``configs``: ``current``, raised to :data:`WARMUP_STEPS`
    of every knob that is on (``True``) in any of them."""
    need = [steps for name, steps in WARMUP_STEPS.items() if any(c.get(name) is True for c in configs)]
    return max([int(current), *need])


def propose_value(
    knob: Knob,
    current: Any,
    device: dict[str, Any],
    n_cpus: int,
    exhausted: bool,
    config: dict[str, Any] | None = None,
    suggested: int | None = None,
) -> Any | None:
    """The next value of ``knob`` to try from ``current``, or ``None`` when there is none.

    Args:
        knob: the knob.
        current: its value in the incumbent configuration.
        device: the resolved device of the baseline trial (``type``, ``bf16_supported``).
        n_cpus: CPUs available (bounds the workers and threads searches).
        exhausted: the knob's search already stopped (a step was reverted or failed).
        config: the whole configuration the value goes into (``threads`` reads its
            ``num_workers``).
        suggested: the value the finding suggests (:func:`suggested_value`). The
            ``workers`` search then starts at the smallest searched value at or above it,
            capped at ``n_cpus`` on a GPU and at ``n_cpus - 1`` (at least 1) on a CPU-only
            run (``device["type"] == "cpu"``): there each worker decodes on a core of its
            own and the training process needs one too (TD101's CPU replay gives the
            workers cores of their own); when the cap is not a searched value, the largest
            searched value below it. Only a step up from ``current`` is proposed.
    """
    if knob.search == "target":
        target = knob.target
        if target == "amp":
            target = "bf16" if device.get("bf16_supported") else "fp16"
        return None if current == target else target
    if knob.search == "threads":
        workers = int((config or {}).get("num_workers") or 0)
        target = max(1, n_cpus - workers)
        effective = int(current) if current else n_cpus
        return None if effective == target else target
    if exhausted:
        return None
    if knob.search == "workers":
        values = worker_values(n_cpus)
        above = [v for v in values if v > int(current)]
        if suggested is not None and suggested > 1:
            cap = max(1, n_cpus - 1) if device.get("type") == "cpu" else max(1, n_cpus)
            start = min(int(suggested), cap)
            at = [v for v in values if v >= start and v <= cap] or [v for v in values if v <= cap][-1:]
            if at and at[0] > int(current):
                return at[0]
        return above[0] if above else None
    if knob.search == "double":
        nxt = max(int(current), 1) * 2
        return nxt if nxt <= MAX_BATCH_SIZE else None
    if knob.search == "values":
        values = list(knob.values)
        if current in values:
            i = values.index(current) + 1
            return values[i] if i < len(values) else None
        return values[0] if values else None
    return None


def thread_companion(
    name: str, value: Any, config: dict[str, Any], n_cpus: int, device_type: str, fields: Any
) -> tuple[str, Any, int] | None:
    """The ``num_threads`` change that goes with ``num_workers = value`` on a CPU run, or None.

    On the CPU the training process's intra-op threads (``num_threads``; 0: one per CPU) and
    the DataLoader workers share the cores. When ``threads + value`` would exceed ``n_cpus``,
    the worker change alone oversubscribes them: OpenMP intra-op threads wait at every barrier
    for a descheduled sibling, and on this project's 2-core machine one worker beside two
    threads ran at 0.95x (TD501's docs). So the loop applies
    ``num_threads = max(1, n_cpus - value)`` with it in the same trial, the fix the CPU step
    model replays (:mod:`tracedoc.signals.cpumodel`, the ``dataloader`` fix). A workload without
    a ``num_threads`` field, a GPU run, or threads that already fit get None.

    Returns:
        ``("num_threads", old, new)``: the field, its value in ``config`` and the new value.
    """
    if name != "num_workers" or device_type != "cpu" or "num_threads" not in fields:
        return None
    current = config.get("num_threads") or 0
    threads = int(current) if current else n_cpus
    if threads + int(value) <= n_cpus:
        return None
    new = max(1, n_cpus - int(value))
    return None if new == threads else ("num_threads", current, new)


def allowed(safety: str, unsafe_fixes: bool) -> bool:
    """Whether a knob of this safety level may be applied (safe always; unsafe with ``--unsafe-fixes``)."""
    level = SAFETY_ORDER.get(safety, 0)
    return level >= SAFETY_ORDER["safe"] or (unsafe_fixes and level >= SAFETY_ORDER["unsafe"])
