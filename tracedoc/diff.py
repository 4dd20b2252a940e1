"""Compare two analyses: did the step get faster, where did the time go, and were the
predicted savings right?

Inputs (each side detected on its own, see :func:`load_side`):

* a trace (``.json`` / ``.json.gz``): analyzed with the built-in rules;
* a saved report (``tracedoc analyze --format json`` output, ``schema_version`` 1 or 2);
* a fix-loop trial directory: its ``analysis.json``, else its ``trace.pt.trace.json.gz``.

Output: a :class:`DiffResult`, the comparison document (:mod:`tracedoc.report.comparison`,
importable from here too, with its :class:`StepTime` and :class:`Row`):
:meth:`DiffResult.to_dict` is the versioned JSON form, :meth:`DiffResult.from_dict` reads it
back, and :mod:`tracedoc.report.diff` renders it. The sides' whole reports stay here
(:class:`Side`); the document keeps each side's path, kind, device and step count.
Definitions:

* **step time**: each report's ``step_time_ms`` signal (mean window over complete
  steps, the TensorBoard plugin's definition); the *median* step is reported beside it
  because a handful of profiled steps with one stall moves the mean a lot, and the
  change carries its standard error (:func:`change_se_ms`).
* **breakdown**: ms per step of each step-time breakdown category,
  ``<category>_share * step_time_ms``.
* **idle ledger**: GPU idle ms per step by cause, when both reports carry
  ``idle_ledger`` (``{device: {cause: ms_per_step}}``).
* **findings** are matched by rule code: *resolved* (before only; a rule listed as also
  true after, its condition still holding, is not resolved), *new* (after only, and not
  also true before),
  *changed* (both, ranked or also true, and the severity differs or the estimated saving moved by more than
  :data:`SAVING_CHANGE_ABS_MS` and :data:`SAVING_CHANGE_REL` of its before value),
  *persisting* (both, unchanged).
* **predicted vs measured**, for each resolved finding: predicted = its
  ``estimated_saving_ms`` before; measured = step time before - after (mean, and median
  step); ratio = predicted / measured; error = (predicted - measured) / measured. Every
  finding resolved by the same change shares the same measured change.
* **the finding's own slice**: a finding's first claim (:mod:`tracedoc.engine.claims`:
  ``idle:<cause>``, ``busy`` or ``comm``) is the part of the step its fix removes; its
  size before minus after is ``measured_slice_saving_ms``, compared with the prediction the
  same way. It tells "the fix did not remove what the rule said" apart from "it did, and
  something else grew".
* **where the step change went** (``step_change_parts``): on a GPU trace a step is the
  primary device's busy time plus its idle ledger (``step_time_ms = gpu_busy_ms +
  sum(idle_<cause>_ms)``, exact per report), so the change of the mean step splits into
  the change of ``gpu_busy`` and of each idle cause. For each resolved finding,
  ``offset_ms`` = its slice's fall minus the step's fall (what the rest of the step gained),
  and ``offset_by`` the parts that grew, largest first.
"""

from __future__ import annotations

import os
import stat
import statistics
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from tracedoc.errors import TracedocError
from tracedoc.report.comparison import OFFSET_MIN_MS, SCHEMA_VERSION, DiffResult, Row, StepTime
from tracedoc.report.model import AlsoTrue, Finding, Report, read_report

#: A finding present on both sides is "changed" when its saving moved by more than both
#: of these (absolute ms per step, and a share of its before value), or its severity moved.
#: A project choice, not from a published source: wide enough that the step-to-step jitter
#: of a re-profiled, unchanged workload (a few % on the real V100 pair) is not a change.
SAVING_CHANGE_ABS_MS = 0.5
SAVING_CHANGE_REL = 0.10
#: A step whose time exceeds the median complete step by this factor is listed as an outlier
#: (a project choice; the steady steps of the real V100 traces stay within 1.07x their median).
OUTLIER_FACTOR = 1.2
#: Breakdown categories (the step-time breakdown's, in its priority order), then any extra
#: ``<category>_share`` the reports carry that is listed here.
BREAKDOWN_CATEGORIES = ("kernel", "memcpy", "memset", "runtime", "dataloader", "cpu_exec", "other", "communication")
TRIAL_ANALYSIS = "analysis.json"
TRIAL_TRACE = "trace.pt.trace.json.gz"
#: Saved reports larger than this (decompressed) are refused: a report is a few hundred kB,
#: and this bounds the memory a hostile file can take.
MAX_REPORT_BYTES = 64 << 20
_SNIFF_BYTES = 64 << 10


class DiffInputError(TracedocError):
    """One side of a diff cannot be used: the message names the path and the problem."""

    def __init__(self, path: str | os.PathLike[str], problem: str) -> None:
        self.path = str(path)
        super().__init__(f"{self.path}: {problem}")


@dataclass
class Side:
    """One analysed side of a diff.

    Attributes:
        path: what was given on the command line.
        kind: ``"trace"``, ``"report"`` or ``"trial"``.
        report: the side's report (a saved one read with
            :func:`~tracedoc.report.model.read_report`).
    """

    path: str
    kind: str
    report: Report


def _regular_file(path: Path) -> None:
    try:
        st = path.stat()
    except FileNotFoundError:
        raise DiffInputError(path, "no such file or directory") from None
    except OSError as exc:
        raise DiffInputError(path, f"cannot read ({exc.strerror or exc})") from None
    if not stat.S_ISREG(st.st_mode):
        raise DiffInputError(path, "not a regular file (a FIFO, device or socket)")


def _read_limited(path: Path, limit: int) -> bytes:
    """The file's bytes (gunzipped when it starts with the gzip magic), at most ``limit``.

    Raises:
        DiffInputError: more than ``limit`` bytes, or a corrupt/truncated gzip stream.
    """
    import gzip
    import zlib

    try:
        with open(path, "rb") as raw:
            gz = raw.read(2) == b"\x1f\x8b"
        with gzip.open(path, "rb") if gz else open(path, "rb") as fh:
            data = fh.read(limit + 1)
    except (EOFError, gzip.BadGzipFile, zlib.error) as exc:
        raise DiffInputError(path, f"corrupt or truncated gzip stream ({exc or type(exc).__name__})") from None
    except OSError as exc:
        raise DiffInputError(path, f"cannot read ({exc.strerror or exc})") from None
    if len(data) > limit:
        raise DiffInputError(path, f"a report larger than the {limit:,}-byte limit")
    return data


def _sniff_report(path: Path) -> Report | None:
    """The read report when ``path`` is a saved report, else None (a trace).

    The first :data:`_SNIFF_BYTES` (decompressed) decide when they can: ``"traceEvents"``
    means a trace; ``"schema_version"`` means a report. Otherwise a file of at most
    :data:`MAX_REPORT_BYTES` is parsed once and is a report when it is an object with
    ``schema_version`` and ``findings`` and no ``traceEvents`` (e.g. a report with
    sorted keys); anything else is handed to the trace loader, whose errors name the
    problem.
    """
    import gzip
    import zlib

    import orjson

    try:
        with open(path, "rb") as raw:
            gz = raw.read(2) == b"\x1f\x8b"
        with gzip.open(path, "rb") if gz else open(path, "rb") as fh:
            head = fh.read(_SNIFF_BYTES)
    except (EOFError, gzip.BadGzipFile, zlib.error, OSError):
        return None  # the trace loader reports it
    if not head.lstrip().startswith(b"{") or b'"traceEvents"' in head:
        return None
    if b'"schema_version"' in head:
        return _parse_report(path, _read_limited(path, MAX_REPORT_BYTES))
    if path.stat().st_size > MAX_REPORT_BYTES:
        return None
    try:
        data = orjson.loads(_read_limited(path, MAX_REPORT_BYTES))
    except (orjson.JSONDecodeError, DiffInputError):
        return None
    if isinstance(data, dict) and "schema_version" in data and "findings" in data and "traceEvents" not in data:
        return _as_report(data, path)
    return None


def _parse_report(path: Path, raw: bytes) -> Report:
    import orjson

    try:
        data = orjson.loads(raw)
    except orjson.JSONDecodeError as exc:
        raise DiffInputError(path, f"invalid JSON report ({exc})") from None
    return _as_report(data, path)


def validate_report(data: Any, path: str | os.PathLike[str]) -> dict[str, Any]:
    """Check that ``data`` is a single-trace report dict (``Report.to_dict()`` layout).

    Returns:
        ``data`` itself.

    Raises:
        DiffInputError: a multi-rank report, an unknown schema version, or a field of
            the wrong type.
    """
    if not isinstance(data, dict):
        raise DiffInputError(path, f"a report must be a JSON object, not {type(data).__name__}")
    if "ranks" in data and "signals" not in data:
        raise DiffInputError(path, "a multi-rank report; diff compares single-trace reports")
    if data.get("schema_version") not in (1, 2):
        raise DiffInputError(
            path, f"unsupported report schema_version {data.get('schema_version')!r} (expected 1 or 2)"
        )
    for key, typ in (("signals", dict), ("findings", list), ("steps", list), ("trace", dict)):
        if not isinstance(data.get(key), typ):
            raise DiffInputError(path, f"report field {key!r} is missing or not a {typ.__name__}")
    for i, f in enumerate(data["findings"]):
        if not isinstance(f, dict) or not isinstance(f.get("code"), str) or not isinstance(f.get("name"), str):
            raise DiffInputError(path, f"report finding #{i} has no string 'code' and 'name'")
        for key in ("severity", "base_severity", "message", "saving_basis"):
            if f.get(key) is not None and not isinstance(f[key], str):
                raise DiffInputError(path, f"report finding #{i}: {key!r} is not a string")
        saving = f.get("estimated_saving_ms")
        if saving is not None and (isinstance(saving, bool) or not isinstance(saving, (int, float))):
            raise DiffInputError(path, f"report finding #{i}: 'estimated_saving_ms' is not a number")
    st = data["signals"].get("step_time_ms")
    if st is not None and (isinstance(st, bool) or not isinstance(st, (int, float))):
        raise DiffInputError(path, "report signal 'step_time_ms' is not a number")
    for i, s in enumerate(data["steps"]):
        if not isinstance(s, dict) or _num(s.get("step_time_ms")) is None:
            raise DiffInputError(path, f"report step #{i} has no numeric 'step_time_ms'")
    n = data["signals"].get("step_count")
    if n is not None and (isinstance(n, bool) or not isinstance(n, int)):
        raise DiffInputError(path, "report signal 'step_count' is not an integer")
    ledger = data.get("idle_ledger")
    if ledger is not None and not (isinstance(ledger, dict) and all(isinstance(v, dict) for v in ledger.values())):
        raise DiffInputError(path, "report field 'idle_ledger' is not {device: {cause: ms}}")
    return data


def _as_report(data: Any, path: str | os.PathLike[str]) -> Report:
    """:func:`validate_report`, then the :class:`Report` it holds.

    Raises:
        DiffInputError: what either found wrong, naming ``path``.
    """
    validate_report(data, path)
    try:
        return read_report(data)
    except TracedocError as exc:
        raise DiffInputError(path, str(exc)) from None


def _read_report(path: Path) -> Report:
    return _parse_report(path, _read_limited(path, MAX_REPORT_BYTES))


def _analyze_trace(path: Path) -> Report:
    from tracedoc import pipeline

    return pipeline.analyze(path)  # the project's [tool.tracedoc], as `tracedoc analyze`


def load_side(path: str | os.PathLike[str]) -> Side:
    """Analyse or read one side of a diff, detecting what ``path`` is.

    * a directory: a fix-loop trial directory; its ``analysis.json`` when present, else
      its ``trace.pt.trace.json.gz`` is analyzed;
    * a plain JSON file whose top holds ``schema_version`` and no ``traceEvents``: a
      saved report;
    * any other file: a trace, analyzed with the built-in rules.

    Raises:
        DiffInputError: missing path, a FIFO or other special file, a directory that is
            not a trial, a malformed report.
        tracedoc.errors.TraceLoadError: a trace that cannot be read (one-line message).
    """
    p = Path(path)
    if p.is_dir():
        analysis, trace = p / TRIAL_ANALYSIS, p / TRIAL_TRACE
        if analysis.exists():
            _regular_file(analysis)
            return Side(str(path), "trial", _read_report(analysis))
        if trace.exists():
            _regular_file(trace)
            return Side(str(path), "trial", _analyze_trace(trace))
        raise DiffInputError(path, f"a directory without {TRIAL_ANALYSIS} or {TRIAL_TRACE} (not a fix-loop trial)")
    _regular_file(p)
    saved = _sniff_report(p)
    if saved is not None:
        return Side(str(path), "report", saved)
    return Side(str(path), "trace", _analyze_trace(p))


def _coerce(report: Any, label: str) -> Report:
    """``report`` as a :class:`Report`: a Report as is; a dict read as a saved report (any
    schema :func:`~tracedoc.report.model.read_report` reads), named ``label`` in errors.

    Raises:
        TypeError: neither a Report nor a dict.
        DiffInputError: a dict that is not a readable report.
    """
    if isinstance(report, Report):
        return report
    if isinstance(report, dict):
        return _as_report(report, label)
    raise TypeError(f"expected a Report or its to_dict() form, got {type(report).__name__}")


def _num(v: Any) -> float | None:
    return float(v) if isinstance(v, (int, float)) and not isinstance(v, bool) else None


def _signal(report: Report, name: str) -> float | None:
    return _num(report.signals.get(name))


def complete_step_times(report: Report) -> list[float]:
    """Window length (ms) of each complete step of a report: the first ``step_count`` rows
    of ``steps`` (tracedoc drops incomplete steps only at the tail), or every row when the
    trace has no steps."""
    times = [float(s["step_time_ms"]) for s in report.steps]
    n = report.signals.get("step_count")
    if isinstance(n, int) and not isinstance(n, bool) and 0 < n <= len(times):
        times = times[:n]
    return times


def change_se_ms(before_steps: list[float], after_steps: list[float]) -> float | None:
    """Standard error of the difference of two mean step times (Welch):
    ``sqrt(var_b / n_b + var_a / n_a)`` with sample variances; None with fewer than two
    steps on a side. It says how far the measured change can move by which steps
    happened to be profiled (about 95% of such moves fall within 2 SE)."""
    if len(before_steps) < 2 or len(after_steps) < 2:
        return None
    var_b, var_a = statistics.variance(before_steps), statistics.variance(after_steps)
    return (var_b / len(before_steps) + var_a / len(after_steps)) ** 0.5


def _part_ms(report: Report, part: str) -> float | None:
    return _signal(report, "gpu_busy_ms" if part == "gpu_busy" else f"idle_{part}_ms")


def _ledger_causes(report: Report) -> list[str]:
    """The idle-ledger causes a report carries, in its order (every device has the same keys)."""
    if not report.idle_ledger:
        return []
    return [str(k) for k in next(iter(report.idle_ledger.values()))]


def step_change_parts(before: Report, after: Report) -> list[dict[str, Any]]:
    """The change of the mean step split into the primary device's busy time and idle causes.

    Args:
        before, after: two reports.

    Returns:
        ``[{"name", "before_ms", "after_ms", "change_ms"}]``: ``gpu_busy`` first, then the
        idle-ledger causes in the before report's order (ms per step), or ``[]`` when a side
        has no idle ledger, or lacks ``gpu_busy_ms`` or a cause's ``idle_<cause>_ms`` (a
        CPU-only trace). The changes add up to the change of ``step_time_ms`` (to
        rounding), because each report's step is its busy time plus its idle ledger.
    """
    causes = _ledger_causes(before)
    if not causes or _ledger_causes(after) != causes:
        return []
    rows = []
    for part in ("gpu_busy", *causes):
        vb, va = _part_ms(before, part), _part_ms(after, part)
        if vb is None or va is None:
            return []
        rows.append(Row.measured(part, vb, va).to_dict())
    return rows


def _claim_ms(report: Report, claim: str) -> float | None:
    """Size (ms per step) of one claim pool on a report's signals; None for ``step`` or unknown."""
    if claim.startswith("idle:"):
        return _signal(report, f"idle_{claim[len('idle:') :]}_ms")
    comm = _signal(report, "exposed_comm_kernel_ms")
    if claim == "comm":
        return comm
    if claim == "busy":
        busy = _signal(report, "gpu_busy_ms")
        return None if busy is None else max(busy - (comm or 0.0), 0.0)
    return None


#: A predicted range meets a measured value that lies in it widened by this share at each end
#: (issue "A model of the step": ``[low * (1 - w), high * (1 + w)]``).
RANGE_WIDENING = 0.25


def _meets_range(low: float | None, high: float | None, measured: float | None) -> bool | None:
    """Whether ``measured`` lies in ``[low, high]`` widened by :data:`RANGE_WIDENING` of each
    end's size (``low - w * |low|`` to ``high + w * |high|``, so a bound below 0 widens outwards
    too); a single prediction is the range ``[high, high]``. None when either side is unknown."""
    if high is None or measured is None:
        return None
    lo = high if low is None else min(low, high)
    return lo - RANGE_WIDENING * abs(lo) <= measured <= high + RANGE_WIDENING * abs(high)


def _own_slice(finding: Finding, b: Report, a: Report, pred: float | None) -> dict[str, Any]:
    """The finding's own slice: its first claim, unless that is the whole ``step``."""
    claim = finding.claims[0] if finding.claims and finding.claims[0] != "step" else None
    before = _claim_ms(b, claim) if claim else None
    after = _claim_ms(a, claim) if claim else None
    fell = None if before is None or after is None else before - after
    return {
        "slice": claim,
        "slice_before_ms": _round(before),
        "slice_after_ms": _round(after),
        "measured_slice_saving_ms": _round(fell),
        "ratio_slice": _round(_ratio(pred, fell), 4),
        "error_slice": _round(_ratio(None if pred is None or fell is None else pred - fell, fell), 4),
    }


def _offset(row: dict[str, Any], parts: list[dict[str, Any]]) -> tuple[float | None, list[dict[str, Any]]]:
    """What the rest of the step gained while the finding's slice fell, and by which parts."""
    fell, measured, claim = row["measured_slice_saving_ms"], row["measured_saving_ms"], row["slice"]
    if fell is None or measured is None or not parts:
        return None, []
    own = claim[len("idle:") :] if claim and claim.startswith("idle:") else ("gpu_busy" if claim == "busy" else None)
    grew = [
        {"name": p["name"], "change_ms": p["change_ms"]}
        for p in parts
        if p["name"] != own and p["change_ms"] is not None and p["change_ms"] >= OFFSET_MIN_MS
    ]
    grew.sort(key=lambda p: -p["change_ms"])
    return _round(fell - measured), grew


def _round(v: float | None, nd: int = 3) -> float | None:
    return None if v is None else round(v, nd)


def _ratio(a: float | None, b: float | None) -> float | None:
    return None if a is None or b is None or b == 0 else a / b


def _side_info(side: Side) -> dict[str, Any]:
    dev = side.report.trace.get("device")
    return {
        "path": side.path,
        "kind": side.kind,
        "device": dev.get("name") if isinstance(dev, dict) else None,
        "step_count": side.report.signals.get("step_count"),
    }


def _breakdown(b: Report, a: Report) -> list[Row]:
    rows = []
    for cat in BREAKDOWN_CATEGORIES:
        vals = []
        for r in (b, a):
            share, st = _signal(r, f"{cat}_share"), _signal(r, "step_time_ms")
            vals.append(None if share is None or st is None else share * st)
        if vals[0] is not None or vals[1] is not None:
            rows.append(Row.measured(cat, vals[0], vals[1]))
    return rows


def _ledger(b: Report, a: Report) -> dict[str, list[Row]]:
    lb, la = b.idle_ledger, a.idle_ledger
    if not lb or not la:
        return {}
    out: dict[str, list[Row]] = {}
    for dev in list(lb) + [d for d in la if d not in lb]:
        cb, ca = lb.get(dev) or {}, la.get(dev) or {}
        causes = list(cb) + [c for c in ca if c not in cb]
        out[str(dev)] = [Row.measured(c, _num(cb.get(c)), _num(ca.get(c))) for c in causes]
    return out


def _outliers(report: Report) -> list[dict[str, Any]]:
    times = complete_step_times(report)
    if len(times) < 3:
        return []
    med_t = statistics.median(times)
    rows = report.steps[: len(times)]
    cats = [k for k in rows[0] if k.endswith("_ms") and k != "step_time_ms"]
    med = {k: statistics.median(_num(r.get(k)) or 0.0 for r in rows) for k in cats}
    out = []
    for r in rows:
        t = float(r["step_time_ms"])
        if t > OUTLIER_FACTOR * med_t:
            excess = {k: (_num(r.get(k)) or 0.0) - med[k] for k in cats}
            top = max(excess, key=excess.get) if excess else None
            out.append(
                {
                    "step": r.get("step"),
                    "step_time_ms": _round(t),
                    "excess_ms": _round(t - med_t),
                    "top_category": top[: -len("_ms")] if top else None,
                    "top_category_excess_ms": _round(excess[top]) if top else None,
                }
            )
    return out


def predicted_vs_measured(before: Any, after: Any, names: list[str] | None = None) -> list[dict[str, Any]]:
    """Predicted saving beside the measured step-time change, per finding of ``before``.

    Args:
        before, after: two reports (:class:`tracedoc.report.model.Report`, or a saved
            report's dict form, read with :func:`~tracedoc.report.model.read_report`), e.g. a
            fix-loop trial's incumbent and candidate.
        names: only findings with these rule names or codes (e.g. the finding a trial
            applied); default every finding of ``before``.

    Returns:
        one dict per finding, in ``before``'s rank order: ``code``, ``name``, ``severity``,
        ``status`` (``"resolved"`` when the rule no longer fires after, else
        ``"persisting"``), ``predicted_saving_ms`` (its ``estimated_saving_ms`` before: the
        step model's replayed saving where the rule declares a replay), ``predicted_slice_ms``
        (the granted slice beside the replay, the upper bound; None without a replay),
        ``predicted_low_ms`` (the low end of the replayed range, where the fix has one),
        ``meets_range`` (the median-step change lies in ``[low, predicted]`` widened by 25%
        at each end, :data:`RANGE_WIDENING`),
        ``measured_saving_ms`` (step time before - after, ms; mean over complete steps),
        ``measured_saving_se_ms`` (its standard error, :func:`change_se_ms`),
        ``ratio`` (predicted / measured, None when measured is 0 or unknown),
        ``error`` ((predicted - measured) / measured), the same three on the median
        step (``measured_saving_median_ms``, ``ratio_median``, ``error_median``),
        ``saving_basis``, ``estimated_saving_after_ms`` (None when resolved), the
        finding's own slice (``slice``: its first claim; ``slice_before_ms``,
        ``slice_after_ms``, ``measured_slice_saving_ms``, ``ratio_slice``, ``error_slice``;
        None where the slice is ``step`` or not measured), and ``offset_ms`` /
        ``offset_by`` (see the module docstring; None / ``[]`` without a GPU ledger).

    Raises:
        TypeError: an argument is neither a Report nor a dict.
        DiffInputError: a dict that is not a readable report.
    """
    b, a = _coerce(before, "before"), _coerce(after, "after")
    sb, sa = _signal(b, "step_time_ms"), _signal(a, "step_time_ms")
    measured = None if sb is None or sa is None else sb - sa
    tb, ta = complete_step_times(b), complete_step_times(a)
    measured_med = statistics.median(tb) - statistics.median(ta) if tb and ta else None
    se = change_se_ms(tb, ta)
    after_by_code = {f.code: f for f in a.findings}
    parts = step_change_parts(b, a)
    wanted = set(names) if names else None
    out = []
    for f in b.findings:
        if wanted is not None and f.code not in wanted and f.name not in wanted:
            continue
        pred = _num(f.estimated_saving_ms)
        later = after_by_code.get(f.code)
        err = _ratio(None if pred is None or measured is None else pred - measured, measured)
        err_med = _ratio(None if pred is None or measured_med is None else pred - measured_med, measured_med)
        row = {
            "code": f.code,
            "name": f.name,
            "severity": f.severity.value,
            "status": "persisting" if later is not None else "resolved",
            "predicted_saving_ms": _round(pred),
            "predicted_slice_ms": _round(_num(f.slice_saving_ms)),
            "predicted_low_ms": _round(_num(f.replayed_low_ms)),
            "measured_saving_ms": _round(measured),
            "measured_saving_se_ms": _round(se),
            "ratio": _round(_ratio(pred, measured), 4),
            "error": _round(err, 4),
            "measured_saving_median_ms": _round(measured_med),
            "ratio_median": _round(_ratio(pred, measured_med), 4),
            "error_median": _round(err_med, 4),
            "saving_basis": f.saving_basis,
            "estimated_saving_after_ms": _round(_num(later.estimated_saving_ms)) if later else None,
        }
        row["meets_range"] = _meets_range(row["predicted_low_ms"], pred, measured_med)
        row.update(_own_slice(f, b, a, pred))
        row["offset_ms"], row["offset_by"] = _offset(row, parts)
        out.append(row)
    return out


@dataclass(frozen=True)
class _Entry:
    """A rule's line on one side: a ranked finding, or an also-true rule (no severity; its
    ``why`` stands for the message)."""

    code: str
    name: str
    severity: str | None
    saving_ms: float | None
    message: str

    @classmethod
    def of(cls, x: Finding | AlsoTrue) -> _Entry:
        if isinstance(x, Finding):
            return cls(x.code, x.name, x.severity.value, _num(x.estimated_saving_ms), x.message)
        return cls(x.code, x.name, None, _num(x.estimated_saving_ms), x.why)


def _moved(fb: _Entry, fa: _Entry) -> bool:
    if fb.severity != fa.severity:
        return True
    sb, sa = fb.saving_ms, fa.saving_ms
    if (sb is None) != (sa is None):
        return True
    if sb is None or sa is None:
        return False
    d = abs(sa - sb)
    return d > SAVING_CHANGE_ABS_MS and d > SAVING_CHANGE_REL * abs(sb)


def _change_row(before: _Entry, after: _Entry) -> dict[str, Any]:
    return {
        "code": before.code,
        "name": before.name,
        "severity_before": before.severity,
        "severity_after": after.severity,
        "saving_before_ms": _round(before.saving_ms),
        "saving_after_ms": _round(after.saving_ms),
        "message_after": after.message,
    }


def compare(before: Side, after: Side) -> DiffResult:
    """Compare two loaded sides (see the module docstring for the definitions)."""
    b, a = before.report, after.report
    tb, ta = complete_step_times(b), complete_step_times(a)
    step_time = StepTime.measured(
        _signal(b, "step_time_ms"),
        _signal(a, "step_time_ms"),
        statistics.median(tb) if tb else None,
        statistics.median(ta) if ta else None,
        change_se_ms(tb, ta),
    )
    ranked_after = {f.code: _Entry.of(f) for f in a.findings}
    # a rule whose condition still holds but is listed as also true is not resolved
    later_by_code = {x.code: _Entry.of(x) for x in a.also_true} | ranked_after
    seen_before = {f.code for f in b.findings} | {x.code for x in b.also_true}
    pvm = {p["code"]: p for p in predicted_vs_measured(b, a)}
    resolved, changed, persisting = [], [], []
    for f in b.findings:
        later = later_by_code.get(f.code)
        if later is None:
            resolved.append(pvm[f.code])
            continue
        (changed if _moved(_Entry.of(f), later) else persisting).append(_change_row(_Entry.of(f), later))
    ranked_before = {f.code for f in b.findings}
    for x in b.also_true:  # also true before, ranked after: its saving grew
        later = ranked_after.get(x.code)
        if later is not None and x.code not in ranked_before:
            changed.append(_change_row(_Entry.of(x), later))
    new = [
        {
            "code": f.code,
            "name": f.name,
            "severity": f.severity.value,
            "estimated_saving_ms": _round(_num(f.estimated_saving_ms)),
            "message": f.message,
        }
        for f in a.findings
        if f.code not in seen_before
    ]
    return DiffResult(
        before=_side_info(before),
        after=_side_info(after),
        step_time=step_time,
        breakdown=_breakdown(b, a),
        idle_ledger=_ledger(b, a),
        resolved=resolved,
        new=new,
        changed=changed,
        persisting=persisting,
        outlier_steps={"before": _outliers(b), "after": _outliers(a)},
        step_change_parts=step_change_parts(b, a),
    )


def _pct_text(value: float, limit: float) -> str:
    """``value`` (a percentage) with one decimal, or more where one would hide that it differs
    from ``limit`` (``+5.04%`` against 5%, never ``+5.0% > 5%``)."""
    for nd in range(1, 5):
        text = f"{value:+.{nd}f}"
        if float(text) != limit:
            return text
    return f"{value:+g}"


def regression_reason(result: DiffResult, pct: float) -> str | None:
    """Why ``tracedoc diff --fail-on-regression PCT`` fails, as one line for stderr, e.g.
    ``"step time +25.9% > 5% (54.2 ms -> 68.2 ms per step)"``; None when it passes
    (:meth:`DiffResult.regressed` is false: the step time grew by ``pct`` % or less, or the change
    is unknown)."""
    if not result.regressed(pct):
        return None
    st = result.step_time
    change = st.change_pct_unrounded if st.change_pct_unrounded is not None else st.change_pct
    ms = (
        f" ({st.before:.1f} ms -> {st.after:.1f} ms per step)" if st.before is not None and st.after is not None else ""
    )
    return f"step time {_pct_text(change, pct)}% > {pct:g}%{ms}"


def diff(before: str | os.PathLike[str], after: str | os.PathLike[str]) -> DiffResult:
    """Load both sides (:func:`load_side`) and :func:`compare` them.

    Raises:
        DiffInputError, tracedoc.errors.TraceLoadError: bad input, one line naming the path.
    """
    return compare(load_side(before), load_side(after))


def compare_reports(before: Any, after: Any) -> DiffResult:
    """:func:`compare` for two in-memory reports (``Report`` objects, or saved reports' dicts).

    Raises:
        TypeError: an argument is neither a Report nor a dict.
        DiffInputError: a dict that is not a readable report.
    """
    return compare(
        Side("before", "report", _coerce(before, "before")), Side("after", "report", _coerce(after, "after"))
    )


__all__ = [
    "SCHEMA_VERSION",
    "DiffInputError",
    "DiffResult",
    "Row",
    "Side",
    "StepTime",
    "compare",
    "compare_reports",
    "change_se_ms",
    "complete_step_times",
    "diff",
    "load_side",
    "predicted_vs_measured",
    "regression_reason",
    "validate_report",
]
