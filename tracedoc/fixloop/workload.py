"""The workload contract, and the light-weight description of a workload the loop works with.

A workload is a Python file that defines:

``Config``
    a frozen :func:`dataclasses.dataclass` whose fields are the knobs, each with a
    default (the baseline). Field types must be ``bool``, ``int``, ``float``, ``str`` or
    a ``typing.Literal`` of strings. A field named ``device`` (``"auto"``, ``"cpu"``,
    ``"cuda"``, ...) receives ``--device``.
``run(config, out_dir) -> dict``
    runs the workload under ``torch.profiler``, writes the trace to ``out_dir`` and
    returns its measurements (see :data:`RESULT_KEYS`).
``KNOBS`` (optional)
    a dict ``{knob: {"safety": "safe"|"unsafe", "devices": [...], "values": [...]}}``
    that declares knobs the built-in table (:mod:`tracedoc.fixloop.knobs`) does not
    know, or overrides an entry of it.

The file should import torch inside ``run`` rather than at module level, so that
describing it (``python -m tracedoc.fixloop.trial describe``) stays fast; importing
torch at the top works too, only slower.
"""

from __future__ import annotations

import dataclasses
import importlib.util
import math
import sys
import typing
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from tracedoc.errors import TracedocError

#: Keys of the dict ``run`` returns. ``samples_per_s`` and ``step_time_ms`` hold one value
#: per repeat of the timed window; ``trace`` is the trace's file name inside ``out_dir``;
#: ``device`` is ``{"type": "cpu"|"cuda"|..., "name": str, "bf16_supported": bool}``.
RESULT_KEYS = ("samples_per_s", "step_time_ms", "batch_size", "trace", "device")

#: Largest number of repeats a result may hold (a bound on what is read back).
MAX_REPEATS = 10_000

_TRUE = {"1", "true", "yes", "on", "y", "t"}
_FALSE = {"0", "false", "no", "off", "n", "f"}


class WorkloadError(TracedocError):
    """The workload file cannot be loaded, or does not follow the contract (exit code 2)."""


@dataclass(frozen=True)
class FieldSpec:
    """One ``Config`` field: its name, type name, default and (for Literal fields) choices."""

    name: str
    type: str  # "bool" | "int" | "float" | "str"
    default: Any
    choices: tuple[str, ...] | None = None

    def coerce(self, raw: Any) -> Any:
        """Convert ``raw`` (a ``--set`` string or a JSON value) to this field's type.

        Raises:
            ValueError: the value does not fit the type or is not one of the choices.
        """
        if self.type == "bool":
            if isinstance(raw, bool):
                return raw
            text = str(raw).strip().lower()
            if text in _TRUE:
                return True
            if text in _FALSE:
                return False
            raise ValueError(f"{self.name} takes true/false, not {raw!r}")
        if self.type == "int":
            if isinstance(raw, bool):
                raise ValueError(f"{self.name} takes an integer, not {raw!r}")
            try:
                return int(str(raw).strip())
            except ValueError:
                raise ValueError(f"{self.name} takes an integer, not {raw!r}") from None
        if self.type == "float":
            try:
                return float(str(raw).strip())
            except ValueError:
                raise ValueError(f"{self.name} takes a number, not {raw!r}") from None
        value = str(raw)
        if self.choices is not None and value not in self.choices:
            raise ValueError(f"{self.name} takes one of {', '.join(self.choices)}, not {raw!r}")
        return value


@dataclass(frozen=True)
class WorkloadSpec:
    """What the loop needs to know about a workload without importing torch.

    Attributes:
        path: the workload file.
        fields: the ``Config`` fields by name, in declaration order.
        knobs: the workload's optional ``KNOBS`` declarations.
    """

    path: str
    fields: dict[str, FieldSpec]
    knobs: dict[str, dict[str, Any]] = field(default_factory=dict)

    def defaults(self) -> dict[str, Any]:
        """The baseline configuration: every field at its default."""
        return {name: f.default for name, f in self.fields.items()}

    def to_dict(self) -> dict[str, Any]:
        """JSON-safe form (what ``trial describe`` prints)."""
        return {
            "path": self.path,
            "fields": [dataclasses.asdict(f) for f in self.fields.values()],
            "knobs": self.knobs,
        }

    @classmethod
    def from_dict(cls, data: dict[str, Any]) -> WorkloadSpec:
        """Inverse of :meth:`to_dict`."""
        fields = {}
        for item in data["fields"]:
            choices = item.get("choices")
            fields[item["name"]] = FieldSpec(
                item["name"], item["type"], item["default"], tuple(choices) if choices else None
            )
        return cls(path=data["path"], fields=fields, knobs=dict(data.get("knobs") or {}))

    def apply_sets(self, config: dict[str, Any], assignments: list[str]) -> dict[str, Any]:
        """Return ``config`` with ``KNOB=VALUE`` assignments applied, each value typed by its field.

        Raises:
            WorkloadError: an assignment has no ``=``, names no ``Config`` field, or has a
                value of the wrong type.
        """
        out = dict(config)
        for item in assignments:
            name, sep, raw = item.partition("=")
            name = name.strip()
            if not sep or not name:
                raise WorkloadError(f"bad --set {item!r}: expected KNOB=VALUE")
            if name not in self.fields:
                known = ", ".join(self.fields)
                raise WorkloadError(f"bad --set {item!r}: the workload's Config has no {name!r} (has: {known})")
            try:
                out[name] = self.fields[name].coerce(raw)
            except ValueError as exc:
                raise WorkloadError(f"bad --set {item!r}: {exc}") from None
        return out


def _positive_numbers(result: dict[str, Any], key: str) -> list[float]:
    values = result.get(key)
    if values is None:
        raise WorkloadError(f"{key} is missing")
    if isinstance(values, (int, float)) and not isinstance(values, bool):
        values = [values]
    if not isinstance(values, (list, tuple)):
        raise WorkloadError(f"{key} must be a list of numbers (one per repeat), not a {type(values).__name__}")
    if not values:
        raise WorkloadError(f"{key} is empty")
    if len(values) > MAX_REPEATS:
        raise WorkloadError(f"{key} has {len(values)} values (at most {MAX_REPEATS})")
    out = []
    for v in values:
        if isinstance(v, bool) or not isinstance(v, (int, float)):
            raise WorkloadError(f"{key} must hold numbers, not {type(v).__name__} {str(v)[:40]!r}")
        v = float(v)
        if not math.isfinite(v) or v <= 0:
            raise WorkloadError(f"{key} must be finite and > 0, got {v!r}")
        out.append(v)
    return out


def strict_json(value: Any) -> Any:
    """``value`` with every NaN/inf float replaced by ``None`` and dict keys made strings, so
    ``json.dumps(..., allow_nan=False)`` accepts it (RFC 8259 has no NaN or Infinity).

    Recurses through dicts, lists and tuples (tuples become lists); other values pass unchanged.
    """
    if isinstance(value, float):
        return value if math.isfinite(value) else None
    if isinstance(value, dict):
        return {str(k): strict_json(v) for k, v in value.items()}
    if isinstance(value, (list, tuple)):
        return [strict_json(v) for v in value]
    return value


def validate_result(result: Any) -> dict[str, Any]:
    """Check what a workload's ``run`` returned (or its ``result.json``) and return the clean fields.

    Returns:
        ``{"samples_per_s": [float > 0], "step_time_ms": [float > 0], "batch_size": int | None,
        "device": dict}``; a single number is read as one repeat.

    Raises:
        WorkloadError: not a dict; ``samples_per_s`` or ``step_time_ms`` missing, not a list
            of numbers (a string such as ``"987"`` is refused, not read as digits), empty,
            or holding a value that is zero, negative, NaN or infinite; ``batch_size``
            not a positive integer; ``device`` not a dict.
    """
    if not isinstance(result, dict):
        raise WorkloadError(f"run() must return a dict, not a {type(result).__name__}")
    samples = _positive_numbers(result, "samples_per_s")
    step_ms = _positive_numbers(result, "step_time_ms")
    batch = result.get("batch_size")
    if batch is not None and (isinstance(batch, bool) or not isinstance(batch, int) or batch <= 0):
        raise WorkloadError(f"batch_size must be a positive integer, not {str(batch)[:40]!r}")
    device = result.get("device") if result.get("device") is not None else {}
    if not isinstance(device, dict):
        raise WorkloadError(f"device must be a dict, not a {type(device).__name__}")
    trace = result.get("trace")
    if trace is not None and not isinstance(trace, str):
        raise WorkloadError(f"trace must be a file name, not a {type(trace).__name__}")
    return {"samples_per_s": samples, "step_time_ms": step_ms, "batch_size": batch, "device": dict(device)}


def load_module(path: str | Path):
    """Import a workload file as a fresh module named ``tracedoc_workload``.

    Raises:
        WorkloadError: the file does not exist or lacks ``Config``/``run``. Exceptions
            raised by the file's own top-level code propagate unchanged.
    """
    path = Path(path)
    if not path.is_file():
        raise WorkloadError(f"{path}: workload file not found")
    spec = importlib.util.spec_from_file_location("tracedoc_workload", path)
    if spec is None or spec.loader is None:
        raise WorkloadError(f"{path}: not a Python file")
    module = importlib.util.module_from_spec(spec)
    sys.modules["tracedoc_workload"] = module  # dataclasses resolve annotations through it
    spec.loader.exec_module(module)
    if not dataclasses.is_dataclass(getattr(module, "Config", None)):
        raise WorkloadError(f"{path}: defines no dataclass named Config")
    if not callable(getattr(module, "run", None)):
        raise WorkloadError(f"{path}: defines no function run(config, out_dir)")
    return module


def describe_module(module, path: str | Path) -> WorkloadSpec:
    """Build the :class:`WorkloadSpec` of a loaded workload module.

    Raises:
        WorkloadError: a ``Config`` field has no default or an unsupported type.
    """
    config_cls = module.Config
    hints = typing.get_type_hints(config_cls)
    fields: dict[str, FieldSpec] = {}
    for f in dataclasses.fields(config_cls):
        if f.default is dataclasses.MISSING:
            raise WorkloadError(f"{path}: Config.{f.name} has no default")
        hint = hints.get(f.name, type(f.default))
        choices = None
        if typing.get_origin(hint) is typing.Literal:
            choices = tuple(str(c) for c in typing.get_args(hint))
            type_name = "str"
        elif hint in (bool, int, float, str):
            type_name = hint.__name__
        else:
            raise WorkloadError(f"{path}: Config.{f.name} has type {hint!r}; use bool, int, float, str or Literal")
        fields[f.name] = FieldSpec(f.name, type_name, f.default, choices)
    knobs = getattr(module, "KNOBS", None) or {}
    return WorkloadSpec(path=str(path), fields=fields, knobs={k: dict(v) for k, v in knobs.items()})
