"""The fix-loop summary document: :class:`FixLoopSummary`, what ``tracedoc fix-loop`` writes
as ``summary.json`` (and renders as ``summary.md`` and the terminal table).

:func:`tracedoc.fixloop.loop.build_summary` builds it from a finished (or interrupted)
loop; the renderers of :mod:`tracedoc.fixloop.summary` read it. ``to_dict`` is the JSON form
(strict JSON: the builder has already replaced every non-finite number by ``null``) and the
``from_dict`` classmethod reverses it exactly:
``FixLoopSummary.from_dict(json.loads(json.dumps(s.to_dict()))) == s``. The top level is
typed; a trial, the A/B rounds, the device and the options stay plain JSON data, as the
file holds them. This module never imports :mod:`tracedoc.fixloop`.

JSON schema (``schema_version`` 5, :data:`SCHEMA_VERSION`: A/B rounds, ``inconclusive``,
``warnings``; 3 replaced a trial's ``prediction_ratio`` by ``prediction_error``; 4 keeps every
finished measurement: each trial's ``profiled_run`` (the profiled run's samples/s and step ms
per repeat, also of an ``interrupted`` trial), and a round cut short keeps its finished half in
``ab.unpaired``; 5 adds the baseline's ``repeats_check`` (whether its timed windows agree, and
the extra measure-only runs made when they did not: ``samples_per_s_repeats`` then holds all
its windows) and ``ab.warmup_steps`` (the warm-up both sides of the A/B runs had, when the loop
raised it for a knob with a one-off cost such as ``compile``)). A schema-4 summary is still
read (:data:`READABLE_VERSIONS`): it lacks only those keys, and ``to_dict`` writes it as 5::

    {"schema_version": 5, "tool": {"name": "tracedoc", "command": "fix-loop", "version": str},
     "workload": str, "out_dir": str,
     "device": {"type", "name", "bf16_supported", "torch", ...},
     "options": {"max_trials", "unsafe_fixes", "device", "sets", "min_gain", "ab_rounds",
                 "max_rounds", "n_cpus"},
     "noise_rule": str,
     "baseline": {"config", "samples_per_s", "step_time_ms", "status"} | null,
     "final": {"config", "samples_per_s", "step_time_ms", "speedup", "trial", "changes": [str]} | null,
     "trials": [{"index", "change", "status", "config", "samples_per_s", "step_time_ms", "speedup",
                 "predicted_saving_ms", "measured_saving_ms", "prediction_error", "decision",
                 "error", "ab", "trace_diff", "profiled_run": {"samples_per_s": [float],
                 "step_time_ms": [float]} | null,
                 "repeats_check": {"verdict", "usable", "n", "median", "cv", "low", "high",
                                   "confidence", "reason", "extra": {"samples_per_s": [float],
                                   "step_time_ms": [float]}} | null,   # the baseline's (5)
                 ...}],   # tracedoc.fixloop.loop.TrialRecord
       # "ab": {"rounds", "incumbent": {...}, "candidate": {...}, "warmup_steps" (5, when raised),
       #        "unpaired": [{"side", "round", "samples_per_s", "step_time_ms"}]}  # only while
       #        a round is half done (an interrupt, the other side failed, a full disk)
     "not_applicable": [{"knob", "reason"}], "skipped": [{"code", "name", "knob", "reason"}],
     "warnings": [str], "stop_reason": str, "interrupted": bool, "signal": int | null,
     "started_at": str, "wall_s": float}

A trial's ``prediction_error`` is ``(predicted - measured) / measured``, the one convention
of every predicted-against-measured figure in tracedoc. ``trials[0]`` is the baseline;
``final`` is the incumbent, ``null`` only when the baseline itself failed.

:meth:`FixLoopSummary.from_dict` reads a summary of a ``schema_version`` in
:data:`READABLE_VERSIONS` only (any other, or none, raises :class:`tracedoc.report.ranks.DocumentError`, one line). Unlike the analysis
report, ``tool.version`` is kept: a summary records a run, and the version that ran it.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any, ClassVar

from tracedoc.report.header import check_header, shape_error

SCHEMA_VERSION = 5
#: The versions :meth:`FixLoopSummary.from_dict` reads: 5 only added keys to 4 (a trial's
#: ``repeats_check``, ``ab.warmup_steps``), which readers take with ``.get``.
READABLE_VERSIONS = (4, 5)

_WHAT = "tracedoc fix-loop summary"


@dataclass
class FixLoopSummary:
    """A fix-loop run: its trials, the configuration it ended with, why it stopped.

    Attributes:
        version: the tracedoc version that ran it (JSON: ``tool.version``).
        workload: the workload file, as given.
        out_dir: where the trials and the summary are.
        device: the device the baseline ran on (``type``, ``name``, ``bf16_supported``,
            ``torch`` ...).
        options: the loop's options (:class:`tracedoc.fixloop.loop.LoopOptions`, and ``n_cpus``).
        noise_rule: the keep rule, in words.
        baseline: the baseline's ``config``, ``samples_per_s``, ``step_time_ms`` and
            ``status`` (None before it ran).
        final: the incumbent: ``config``, ``samples_per_s``, ``step_time_ms``, ``speedup``,
            ``trial`` and the kept ``changes`` (None when the baseline failed).
        trials: one dict per trial (:meth:`tracedoc.fixloop.loop.TrialRecord.to_dict`), the
            baseline first.
        not_applicable: ``{"knob", "reason"}`` of knobs that do not apply on the device.
        skipped: ``{"code", "name", "knob", "reason"}`` of fixes not tried.
        warnings: measurements that could not decide, one sentence each.
        stop_reason: why the loop stopped (``"running"`` while it runs).
        interrupted: stopped by Ctrl-C, SIGTERM or SIGHUP.
        signal: the signal number that stopped it (None: none, or Ctrl-C).
        started_at: local start time, ``%Y-%m-%dT%H:%M:%S%z``.
        wall_s: seconds from the start to this summary, to 0.1 s.
    """

    KIND: ClassVar[str] = "fixloop"

    version: str
    workload: str
    out_dir: str
    device: dict[str, Any]
    options: dict[str, Any]
    noise_rule: str
    baseline: dict[str, Any] | None
    final: dict[str, Any] | None
    trials: list[dict[str, Any]] = field(default_factory=list)
    not_applicable: list[dict[str, Any]] = field(default_factory=list)
    skipped: list[dict[str, Any]] = field(default_factory=list)
    warnings: list[str] = field(default_factory=list)
    stop_reason: str = "running"
    interrupted: bool = False
    signal: int | None = None
    started_at: str = ""
    wall_s: float = 0.0

    def to_dict(self) -> dict[str, Any]:
        """The versioned JSON form, ``summary.json`` (see the module docstring)."""
        return {
            "schema_version": SCHEMA_VERSION,
            "tool": {"name": "tracedoc", "command": "fix-loop", "version": self.version},
            "workload": self.workload,
            "out_dir": self.out_dir,
            "device": self.device,
            "options": self.options,
            "noise_rule": self.noise_rule,
            "baseline": self.baseline,
            "final": self.final,
            "trials": self.trials,
            "not_applicable": self.not_applicable,
            "skipped": self.skipped,
            "warnings": self.warnings,
            "stop_reason": self.stop_reason,
            "interrupted": self.interrupted,
            "signal": self.signal,
            "started_at": self.started_at,
            "wall_s": self.wall_s,
        }

    @classmethod
    def from_dict(cls, d: dict[str, Any]) -> FixLoopSummary:
        """The FixLoopSummary of :meth:`to_dict`'s output (a saved ``summary.json``).

        Raises:
            tracedoc.report.ranks.DocumentError: not a fix-loop summary of a version in
                :data:`READABLE_VERSIONS`, or a field missing or of the wrong shape (one line).
        """
        v = d.get("schema_version") if isinstance(d, dict) else None
        check_header(d, _WHAT, v if type(v) is int and v in READABLE_VERSIONS else SCHEMA_VERSION)
        try:
            base, final = d["baseline"], d["final"]
            return cls(
                version=str(d["tool"]["version"]),
                workload=d["workload"],
                out_dir=d["out_dir"],
                device=dict(d["device"]),
                options=dict(d["options"]),
                noise_rule=d["noise_rule"],
                baseline=dict(base) if base is not None else None,
                final=dict(final) if final is not None else None,
                trials=[dict(t) for t in d["trials"]],
                not_applicable=[dict(n) for n in d["not_applicable"]],
                skipped=[dict(s) for s in d["skipped"]],
                warnings=list(d["warnings"]),
                stop_reason=d["stop_reason"],
                interrupted=d["interrupted"],
                signal=d["signal"],
                started_at=d["started_at"],
                wall_s=d["wall_s"],
            )
        except (KeyError, TypeError, ValueError, AttributeError) as exc:
            raise shape_error(_WHAT, exc) from None


def as_dict(summary: FixLoopSummary | dict[str, Any]) -> dict[str, Any]:
    """The summary's JSON form: the document's ``to_dict()``, or a dict as given (a saved
    ``summary.json``)."""
    return summary if isinstance(summary, dict) else summary.to_dict()
