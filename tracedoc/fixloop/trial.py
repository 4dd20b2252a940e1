"""Subprocess entry point of one trial: ``python -m tracedoc.fixloop.trial``.

``describe WORKLOAD``
    prints the workload's :class:`~tracedoc.fixloop.workload.WorkloadSpec` as JSON.
``run WORKLOAD --out DIR [--config FILE] [--set KNOB=VALUE ...]``
    runs the workload once with that configuration (defaults, then the file's values,
    then the ``--set`` ones), writes ``DIR/config.json`` (the full configuration) and
    ``DIR/result.json`` (the measurements, with ``"status": "ok"``; or ``"oom"`` /
    ``"crashed"`` and ``"error"``).

Exit status: 0 ok, 1 crashed, 2 bad arguments or workload, 3 out of memory.
"""

from __future__ import annotations

import argparse
import dataclasses
import json
import sys
import traceback
from pathlib import Path

from tracedoc.fixloop.workload import WorkloadError, describe_module, load_module

EXIT_OK, EXIT_CRASHED, EXIT_USAGE, EXIT_OOM = 0, 1, 2, 3

_OOM_TEXT = ("out of memory", "outofmemoryerror", "cuda error: out of memory", "hip out of memory")


def is_oom(exc: BaseException) -> bool:
    """Whether ``exc`` means the run ran out of memory (``MemoryError``, torch's
    ``OutOfMemoryError`` on any device, or an "out of memory" runtime error)."""
    if isinstance(exc, MemoryError) or type(exc).__name__ == "OutOfMemoryError":
        return True
    text = str(exc).lower()
    return any(t in text for t in _OOM_TEXT)


def _write_json(path: Path, data: dict) -> None:
    path.write_text(json.dumps(data, indent=2, sort_keys=False) + "\n", encoding="utf-8")


def main(argv: list[str] | None = None) -> int:
    """Run the ``describe`` or ``run`` sub-command; returns the exit status."""
    parser = argparse.ArgumentParser(prog="python -m tracedoc.fixloop.trial", description=__doc__.splitlines()[0])
    sub = parser.add_subparsers(dest="cmd", required=True)
    p_desc = sub.add_parser("describe", help="print the workload's Config fields as JSON")
    p_desc.add_argument("workload")
    p_run = sub.add_parser("run", help="run the workload once and write config.json, result.json, the trace")
    p_run.add_argument("workload")
    p_run.add_argument("--out", required=True, help="trial directory")
    p_run.add_argument("--config", help="JSON file of Config values")
    p_run.add_argument("--set", dest="sets", action="append", default=[], metavar="KNOB=VALUE")
    args = parser.parse_args(argv)

    try:
        module = load_module(args.workload)
        spec = describe_module(module, args.workload)
        if args.cmd == "describe":
            print(json.dumps(spec.to_dict()))
            return EXIT_OK
        values = spec.defaults()
        if args.config:
            loaded = json.loads(Path(args.config).read_text(encoding="utf-8"))
            values.update({k: spec.fields[k].coerce(v) for k, v in loaded.items() if k in spec.fields})
        values = spec.apply_sets(values, args.sets)
    except (WorkloadError, ValueError, OSError) as exc:
        print(f"error: {exc}", file=sys.stderr)
        return EXIT_USAGE

    out = Path(args.out)
    out.mkdir(parents=True, exist_ok=True)
    config = module.Config(**values)
    _write_json(out / "config.json", dataclasses.asdict(config))
    try:
        result = dict(module.run(config, out))
    except BaseException as exc:  # noqa: BLE001 - every failure is reported, then re-classified
        if isinstance(exc, KeyboardInterrupt):
            raise
        traceback.print_exc()
        status = "oom" if is_oom(exc) else "crashed"
        error = f"{type(exc).__name__}: {str(exc).strip().splitlines()[0] if str(exc).strip() else ''}".rstrip(": ")
        _write_json(out / "result.json", {"status": status, "error": error})
        return EXIT_OOM if status == "oom" else EXIT_CRASHED
    result["status"] = "ok"
    _write_json(out / "result.json", result)
    print(json.dumps({k: result.get(k) for k in ("samples_per_s", "step_time_ms")}))
    return EXIT_OK


if __name__ == "__main__":
    sys.exit(main())
