"""Holistic Trace Analysis (HTA) critical path analysis over the fixture traces, for comparison.

What it measures: for every ``fixtures/*.pt.trace.json.gz`` it runs HTA's critical path
analysis (``TraceAnalysis.critical_path_analysis``, i.e.
``hta.analyzers.critical_path_analysis.CriticalPathAnalysis``) on each instance of a region
annotation and records, per instance: HTA's critical path length (the sum of the edge weights
on the longest path of HTA's CPU/GPU dependency graph, in µs), its breakdown by HTA's bound
type (``cpu_bound``, ``gpu_compute_bound``, ``gpu_communication_bound``,
``gpu_kernel_kernel_overhead``, ``gpu_kernel_launch_overhead``; ``CPGraph.summary()`` gives the
same numbers as percentages), the annotation's duration, the wall-clock span between the path's
first and last node and where span - length goes (``unweighted_wall_us``: HTA's zero-weight
edges, e.g. CPU gaps between top-level ops and zeroed blocking CUDA calls), the critical edge
types, the top critical events and the warnings HTA logged.
Region: every ``ProfilerStep`` instance when the trace has ``ProfilerStep#N`` annotations (the
first complete one, i.e. the first CPU-side step that is not the trailing step of a multi-step
trace, is flagged ``first_complete``); otherwise every instance of each CPU-side
``user_annotation`` name, plus the whole trace (HTA's ``annotation=""``, flagged
``first_complete``). ``instance_id`` is HTA's: a position among the events whose name contains
the annotation, in dataframe order, GPU-side ``gpu_user_annotation`` copies included (skipped
here). Traces HTA cannot load, and instances it cannot analyse, are recorded with the exception
type, a one-line message and the HTA source line that raised it.

How to run (HTA is not a tracedoc dependency, so this script is optional and runs with HTA's
own interpreter; it imports only the standard library and HTA, never tracedoc)::

    python3.11 -m venv /tmp/hta-venv
    /tmp/hta-venv/bin/pip install HolisticTraceAnalysis 'pandas<3'   # HTA 0.5.0 breaks on pandas 3
    /tmp/hta-venv/bin/python benchmarks/hta_critical_path.py /tmp/hta_out.json
    /tmp/hta-venv/bin/python benchmarks/hta_critical_path.py /tmp/hta_some.json --only v100 --max-instances 1

Each trace is copied alone into a temporary directory (HTA takes a directory, one file per rank)
and loaded with ``include_last_profiler_step=True`` (HTA's default drops every CPU event from the
last ``ProfilerStep`` on). The output JSON feeds the comparison table of tracedoc's critical path
/ bound-type attribution against HTA's.
"""

from __future__ import annotations

import argparse
import importlib.metadata
import json
import logging
import platform
import shutil
import sys
import tempfile
import time
import traceback
import warnings
from collections import Counter
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parent.parent
DEFAULT_FIXTURES = ROOT / "fixtures"
STEP_ANNOTATION = "ProfilerStep"
WHOLE_TRACE = ""  # HTA's critical_path_analysis treats annotation == "" as the whole trace
TOP_EVENTS = 5
MAX_USER_ANNOTATION_NAMES = 8


def one_line(exc: BaseException) -> dict[str, str]:
    """Exception type, its message on one line (capped) and the innermost frame that raised it."""
    msg = " ".join(str(exc).split()) or repr(exc)
    rec = {"type": type(exc).__name__, "message": msg[:400]}
    frames = traceback.extract_tb(exc.__traceback__)
    if frames:
        f = frames[-1]
        where = f.filename.split("site-packages/")[-1]
        rec["where"] = f"{where}:{f.lineno} {f.name}: {(f.line or '').strip()[:160]}"
    return rec


def version_of(dist: str) -> str | None:
    try:
        return importlib.metadata.version(dist)
    except importlib.metadata.PackageNotFoundError:
        return None


class WarningCapture(logging.Handler):
    """Collects the warnings and errors HTA logs, as counts of their first 100 characters."""

    def __init__(self) -> None:
        super().__init__(level=logging.WARNING)
        self.counts: Counter[str] = Counter()

    def emit(self, record: logging.LogRecord) -> None:
        try:
            text = " ".join(record.getMessage().split())
        except Exception:  # noqa: BLE001 - a malformed log call must not break the run
            text = str(record.msg)
        if text.startswith(("Parsed ", "Overall parsing", "leaving ")):
            return  # timing chatter, not a finding
        self.counts[f"{record.levelname}: {text[:100]}"] += 1

    def take(self) -> dict[str, int]:
        out = dict(self.counts.most_common(12))
        self.counts.clear()
        return out


def sym_name(sym_table: list[str], idx: Any) -> str:
    try:
        return str(sym_table[int(idx)])
    except (ValueError, TypeError, IndexError):
        return ""


def enumerate_instances(trace_df: Any, sym_index: dict[str, int], sym_table: list[str], annotation: str) -> list[dict]:
    """The annotation instances exactly as HTA numbers them.

    HTA matches every symbol containing ``annotation`` and takes ``instance_id`` as a position in
    the trace dataframe's row order (not sorted by time, and GPU-side ``gpu_user_annotation``
    copies count too), so the instance ids are recomputed here the same way.
    """
    ids = [v for k, v in sym_index.items() if annotation in k]
    ann = trace_df[trace_df["name"].isin(ids)]
    out = []
    for pos, row in enumerate(ann.itertuples(index=False)):
        cat = sym_name(sym_table, row.cat)
        out.append(
            {
                "instance_id": pos,
                "name": sym_name(sym_table, row.name),
                "cat": cat,
                "side": "gpu" if cat.startswith("gpu_") else "cpu",
                "ts_us": int(row.ts),
                "dur_us": int(row.dur),
            }
        )
    return out


def mark_first_complete(instances: list[dict]) -> int | None:
    """First complete ProfilerStep: CPU side, positive duration, and not the trailing step of a
    multi-step trace (Kineto cuts the last step at the profiler stop; HTA drops it by default)."""
    cpu = sorted((i for i in instances if i["side"] == "cpu" and i["dur_us"] > 0), key=lambda i: i["ts_us"])
    candidates = cpu[:-1] if len(cpu) >= 2 else cpu
    if not candidates:
        return None
    return int(candidates[0]["instance_id"])


def unweighted_wall(cp_graph: Any) -> tuple[dict[str, float], list[dict[str, Any]]]:
    """Where the path's wall-clock span exceeds its length: the wall time of each critical edge minus
    its weight, summed by cause, and the zero-weighted blocking calls with the most wall time.

    HTA gives 0 weight to dependency edges (the gap between consecutive top-level CPU ops of a thread),
    to GPU->CPU / GPU->GPU sync edges, and to the CPU span of blocking CUDA calls
    (``CPGraph.BLOCKING_SYNC_CALLS``: cudaDeviceSynchronize, cudaStreamSynchronize, cudaEventQuery,
    cudaEventSynchronize, cudaMemcpy, cudaMemcpyAsync).
    """
    from hta.analyzers.critical_path_analysis import CPEdgeType

    by_cause: Counter[str] = Counter()
    blocking: Counter[str] = Counter()
    path = cp_graph.critical_path_nodes
    for u, v in zip(path, path[1:], strict=False):
        e = cp_graph.edges[u, v]["object"]
        src, dst = cp_graph.node_list[u], cp_graph.node_list[v]
        gap = float(dst.ts - src.ts) - float(e.weight)
        if gap <= 0:
            continue
        if e.type == CPEdgeType.DEPENDENCY:
            cause = "cpu_gap_between_top_level_ops"
        elif e.type == CPEdgeType.SYNC_DEPENDENCY:
            cause = "sync_dependency"
        elif e.type == CPEdgeType.OPERATOR_KERNEL and src.is_blocking:
            cause = "blocking_sync_call_zeroed"
            blocking[cp_graph._get_node_name(src.ev_idx)] += gap
        else:
            cause = str(e.type.value)
        by_cause[cause] += gap
    top = [{"name": n[:80], "wall_us": w} for n, w in blocking.most_common(TOP_EVENTS)]
    return dict(by_cause), top


def analyse_instance(
    analyzer: Any, rank: int, annotation: str, instance_id: int, capture: WarningCapture
) -> dict[str, Any]:
    """Run HTA's critical path analysis on one instance and summarise the CPGraph."""
    t0 = time.perf_counter()
    rec: dict[str, Any] = {}
    try:
        res = analyzer.critical_path_analysis(rank=rank, annotation=annotation, instance_id=instance_id)
        if res is None:
            raise LookupError(f"HTA returned None (annotation {annotation!r} not found)")
        cp_graph, ok = res
        rec["success"] = bool(ok)
        if not ok:
            raise RuntimeError("HTA critical_path() returned False (longest path not feasible)")
        edf = cp_graph.get_critical_path_breakdown()
        if edf is None or len(edf) == 0:
            raise RuntimeError("empty critical path breakdown")
        total = float(edf["duration"].sum())
        by_bound = edf.groupby("bound_by")["duration"].sum()
        nodes = [cp_graph.node_list[n] for n in cp_graph.critical_path_nodes]
        clipped = cp_graph.trace_df
        unweighted, blocking = unweighted_wall(cp_graph)
        rec.update(
            {
                "critical_path_length_us": total,
                # HTA's summary(): per bound type; "" = zero-weight dependency / sync edges
                "breakdown_us": {(k or "dependency_zero_weight"): float(v) for k, v in by_bound.items()},
                "breakdown_pct": {
                    (k or "dependency_zero_weight"): (float(v) / total * 100 if total else 0.0)
                    for k, v in by_bound.items()
                },
                "critical_path_span_us": float(max(n.ts for n in nodes) - min(n.ts for n in nodes)),
                "critical_path_start_us": int(min(n.ts for n in nodes)),
                "critical_path_end_us": int(max(n.ts for n in nodes)),
                # span - length, by cause (0-weight edges that still take wall time)
                "unweighted_wall_us": unweighted,
                "zeroed_blocking_calls": blocking,
                "critical_edge_types": {str(k): int(v) for k, v in edf["type"].value_counts().items()},
                "critical_edges": len(edf),
                "graph_nodes": cp_graph.number_of_nodes(),
                "graph_edges": cp_graph.number_of_edges(),
                "clipped_events": len(clipped),
                "clipped_window_us": [int(clipped["ts"].min()), int((clipped["ts"] + clipped["dur"]).max())],
                "top_critical_events": [
                    {"name": str(r.s_name)[:80], "bound_by": str(r.bound_by), "duration_us": float(r.duration)}
                    for r in edf[edf["duration"] > 0].nlargest(TOP_EVENTS, "duration").itertuples(index=False)
                ],
            }
        )
    except Exception as exc:  # noqa: BLE001 - any HTA failure is a result to record
        rec["error"] = one_line(exc)
    rec["hta_warnings"] = capture.take()
    rec["seconds"] = round(time.perf_counter() - t0, 2)
    return rec


def choose_regions(trace_df: Any, sym_index: dict[str, int], sym_table: list[str]) -> list[str]:
    """ProfilerStep when present; otherwise each CPU-side user_annotation name, then the whole trace."""
    if any(k.startswith(STEP_ANNOTATION) for k in sym_index):
        return [STEP_ANNOTATION]
    ua = sym_index.get("user_annotation")
    names: list[str] = []
    if ua is not None:
        rows = trace_df[trace_df["cat"] == ua].sort_values("ts")
        for idx in rows["name"]:
            name = sym_name(sym_table, idx)
            if name and name not in names:
                names.append(name)
    return names[:MAX_USER_ANNOTATION_NAMES] + [WHOLE_TRACE]


def analyse_trace(path: Path, max_instances: int, capture: WarningCapture) -> dict[str, Any]:
    from hta.trace_analysis import TraceAnalysis

    out: dict[str, Any] = {"file": path.name, "bytes": path.stat().st_size}
    t0 = time.perf_counter()
    with tempfile.TemporaryDirectory(prefix="hta_cp_") as tmp:
        shutil.copy2(path, Path(tmp) / path.name)
        try:
            analyzer = TraceAnalysis(trace_dir=tmp, include_last_profiler_step=True)
            # the rank comes from the trace's distributedInfo (HTA defaults to 0 without it)
            rank = analyzer.t.get_ranks()[0]
            trace_df = analyzer.t.get_trace(rank)
        except Exception as exc:  # noqa: BLE001
            out["status"] = "load_failed"
            out["error"] = one_line(exc)
            out["hta_warnings"] = capture.take()
            out["seconds"] = round(time.perf_counter() - t0, 2)
            return out
        out["rank"] = int(rank)
        out["load_seconds"] = round(time.perf_counter() - t0, 2)
        out["load_warnings"] = capture.take()
        sym_index = analyzer.t.symbol_table.get_sym_id_map()
        sym_table = analyzer.t.symbol_table.get_sym_table()
        out["events_after_hta_filter"] = len(trace_df)
        out["has_cuda_sync_events"] = "cuda_sync" in sym_index
        out["cuda_sync_event_names"] = sorted(
            n for n in ("Context Sync", "Stream Sync", "Event Sync", "Stream Wait Event") if n in sym_index
        )
        out["gpu_kernels"] = int((trace_df["stream"] >= 0).sum())
        out["regions"] = []
        for annotation in choose_regions(trace_df, sym_index, sym_table):
            region: dict[str, Any] = {"annotation": annotation, "instances": []}
            if annotation == WHOLE_TRACE:
                whole = {"instance_id": 0, "name": "<whole trace>", "cat": "", "side": "cpu"}
                whole["ts_us"] = int(trace_df["ts"].min())
                # not trace_df["end"]: HTA re-bases "ts" to the trace start but leaves "end" absolute
                whole["dur_us"] = int((trace_df["ts"] + trace_df["dur"]).max() - trace_df["ts"].min())
                instances = [whole]
                first = 0
            else:
                instances = enumerate_instances(trace_df, sym_index, sym_table, annotation)
                first = mark_first_complete(instances) if annotation == STEP_ANNOTATION else None
            region["first_complete_instance_id"] = first
            done = 0
            for inst in instances:
                rec = dict(inst)
                rec["first_complete"] = inst["instance_id"] == first
                if inst["side"] != "cpu":
                    rec["skipped"] = "GPU-side gpu_user_annotation copy: HTA would clip CPU events to its GPU window"
                elif inst["dur_us"] <= 0:
                    rec["skipped"] = "zero-duration annotation"
                elif max_instances and done >= max_instances and not rec["first_complete"]:
                    rec["skipped"] = f"--max-instances {max_instances}"
                else:
                    rec.update(analyse_instance(analyzer, rank, annotation, int(inst["instance_id"]), capture))
                    done += 1
                region["instances"].append(rec)
            out["regions"].append(region)
    ok = [i for r in out["regions"] for i in r["instances"] if "critical_path_length_us" in i]
    out["status"] = "ok" if ok else "no_instance_analysed"
    out["seconds"] = round(time.perf_counter() - t0, 2)
    return out


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("out", type=Path, help="output JSON path")
    ap.add_argument("--fixtures", type=Path, default=DEFAULT_FIXTURES, help="directory of *.pt.trace.json.gz")
    ap.add_argument("--only", action="append", default=[], help="substring of trace file names to keep (repeatable)")
    ap.add_argument("--max-instances", type=int, default=0, help="instances per region (0 = all)")
    ap.add_argument("--verbose", action="store_true", help="let HTA's own log handlers print warnings")
    args = ap.parse_args(argv)

    try:
        import hta  # noqa: F401
    except ImportError:
        print("HTA is not installed in this interpreter: pip install HolisticTraceAnalysis", file=sys.stderr)
        return 2

    warnings.simplefilter("ignore", FutureWarning)  # HTA 0.5.0's pandas chained-assignment warnings
    warnings.simplefilter("ignore", DeprecationWarning)
    hta_logger = logging.getLogger("hta")
    if not args.verbose:
        hta_logger.propagate = False  # HTA logs timing chatter at WARNING through the root logger
        for h in hta_logger.handlers:
            h.setLevel(logging.ERROR)
    capture = WarningCapture()
    hta_logger.addHandler(capture)
    if hta_logger.level == logging.NOTSET or hta_logger.level > logging.WARNING:
        hta_logger.setLevel(logging.WARNING)

    paths = sorted(args.fixtures.glob("*.pt.trace.json.gz"))
    if args.only:
        paths = [p for p in paths if any(s in p.name for s in args.only)]
    result: dict[str, Any] = {
        "tool": "HolisticTraceAnalysis critical_path_analysis",
        "hta_version": version_of("HolisticTraceAnalysis"),
        "pandas_version": version_of("pandas"),
        "networkx_version": version_of("networkx"),
        "python": platform.python_version(),
        "generated_utc": time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime()),
        "units": "microseconds; ts_us relative to the trace start (HTA rounds float timestamps: ts up, end down)",
        "settings": {
            "include_last_profiler_step": True,
            "rank": "the trace's own",
            "max_instances": args.max_instances,
        },
        "traces": {},
    }
    for path in paths:
        print(f"[hta] {path.name} ...", file=sys.stderr, flush=True)
        rec = analyse_trace(path, args.max_instances, capture)
        result["traces"][path.name] = rec
        print(f"[hta] {path.name}: {rec['status']} in {rec['seconds']} s", file=sys.stderr, flush=True)
    args.out.parent.mkdir(parents=True, exist_ok=True)
    args.out.write_text(json.dumps(result, indent=1, sort_keys=False) + "\n")
    print(f"[hta] wrote {args.out}", file=sys.stderr)
    return 0


if __name__ == "__main__":
    sys.exit(main())
