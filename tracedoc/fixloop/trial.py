"""Subprocess entry point of one trial: ``python -m tracedoc.fixloop.trial``.

``describe WORKLOAD``
    prints the workload's :class:`~tracedoc.fixloop.workload.WorkloadSpec` as JSON.
``run WORKLOAD --out DIR [--config FILE] [--set KNOB=VALUE ...]``
    runs the workload once with that configuration (defaults, then the file's values,
    then the ``--set`` ones), writes ``DIR/config.json`` (the full configuration) and
    ``DIR/result.json`` (the measurements, with ``"status": "ok"``; or ``"oom"`` /
    ``"crashed"`` and ``"error"``).

Exit status: 0 ok, 1 crashed, 2 bad arguments or workload, 3 out of memory.

The workload's own output at import goes to stderr (``describe`` prints only the JSON
line on stdout); no bytecode is written (``sys.dont_write_bytecode``). ``run`` checks
what ``run()`` returned (:func:`tracedoc.fixloop.workload.validate_result`): a wrong
type, a string or non-finite throughput is a crashed trial with the reason. ``--token``
is copied into ``result.json`` so the caller knows the file is from this run.
"""

from __future__ import annotations

import argparse
import contextlib
import dataclasses
import json
import os
import sys
import traceback
from pathlib import Path

sys.dont_write_bytecode = True  # nothing written beside the workload (no __pycache__)

from tracedoc.fixloop.workload import (  # noqa: E402
    WorkloadError,
    describe_module,
    load_module,
    strict_json,
    validate_result,
)

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
    path.parent.mkdir(parents=True, exist_ok=True)  # the workload may have deleted its folder
    tmp = path.with_name(path.name + ".tmp")
    tmp.write_text(json.dumps(strict_json(data), indent=2, allow_nan=False, default=str) + "\n", encoding="utf-8")
    os.replace(tmp, path)


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
    p_run.add_argument("--token", default=None, help="copied into result.json (the caller's run id)")
    args = parser.parse_args(argv)

    out = Path(os.path.abspath(args.out)) if args.cmd == "run" else None  # a chdir in the workload
    extra = {"token": args.token} if getattr(args, "token", None) else {}
    try:
        with contextlib.redirect_stdout(sys.stderr):  # prints at import must not spoil describe's JSON
            module = load_module(args.workload)
        spec = describe_module(module, args.workload)
        if args.cmd == "describe":
            print(json.dumps(spec.to_dict()))
            return EXIT_OK
        values = spec.defaults()
        if args.config:
            loaded = json.loads(Path(args.config).read_text(encoding="utf-8"))
            if not isinstance(loaded, dict):
                raise ValueError(f"{args.config}: expected a JSON object of Config values")
            values.update({k: spec.fields[k].coerce(v) for k, v in loaded.items() if k in spec.fields})
        values = spec.apply_sets(values, args.sets)
        config = module.Config(**values)
    except (WorkloadError, ValueError, TypeError, OSError) as exc:
        print(f"error: {exc}", file=sys.stderr)
        if out is not None and out.is_dir():
            _write_json(out / "result.json", {"status": "crashed", "error": f"bad workload: {exc}", **extra})
        return EXIT_USAGE
    except Exception as exc:  # noqa: BLE001 - the workload's own top-level code failed
        traceback.print_exc()
        print(f"error: importing the workload failed: {type(exc).__name__}: {exc}", file=sys.stderr)
        if out is not None and out.is_dir():
            why = f"importing the workload failed: {type(exc).__name__}: {_first(exc)}"
            _write_json(out / "result.json", {"status": "crashed", "error": why, **extra})
        return EXIT_USAGE

    assert out is not None
    out.mkdir(parents=True, exist_ok=True)
    _write_json(out / "config.json", dataclasses.asdict(config))
    try:
        raw = module.run(config, out)
        validate_result(raw)
        result = dict(raw)
    except WorkloadError as exc:
        error = f"run() returned a bad result: {exc}"
        print(f"error: {error}", file=sys.stderr)
        _write_json(out / "result.json", {"status": "crashed", "error": error, **extra})
        return EXIT_CRASHED
    except BaseException as exc:  # noqa: BLE001 - every failure is reported, then re-classified
        if isinstance(exc, KeyboardInterrupt):
            raise
        traceback.print_exc()
        status = "oom" if is_oom(exc) else "crashed"
        error = f"{type(exc).__name__}: {_first(exc)}".rstrip(": ")
        _write_json(out / "result.json", {"status": status, "error": error, **extra})
        return EXIT_OOM if status == "oom" else EXIT_CRASHED
    result["status"] = "ok"
    result.update(extra)
    _write_json(out / "result.json", result)
    print(json.dumps({k: result.get(k) for k in ("samples_per_s", "step_time_ms")}))
    return EXIT_OK


def _first(exc: BaseException) -> str:
    text = str(exc).strip()
    return text.splitlines()[0][:300] if text else ""


if __name__ == "__main__":
    sys.exit(main())
