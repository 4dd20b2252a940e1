"""`tracedoc fix-loop`: apply the top finding's fix as a knob change, re-measure, keep or revert.

The loop never edits a workload's source. A workload is a Python file with a frozen
``Config`` dataclass of knobs and a ``run(config, out_dir)`` function (see
``docs/fix-loop.md`` and :mod:`tracedoc.fixloop.workload`). Each trial runs the workload
in a fresh subprocess (:mod:`tracedoc.fixloop.runner`), the trace is analyzed with
:func:`tracedoc.analyze`, and :func:`tracedoc.fixloop.noise.decide` keeps a change only
when its throughput gain exceeds the measured run-to-run noise.

Modules:
    knobs    -- the knob table (safety, devices it applies to, searched values)
    workload -- the workload contract: describe a workload, coerce ``--set`` values
    harness  -- torch-side helper a workload can use: warm-up, profile, timed windows
    trial    -- subprocess entry point (``python -m tracedoc.fixloop.trial``)
    runner   -- runs one trial in a subprocess with a timeout and classifies the result
    proctree -- every process a trial starts (cgroup, /proc tree, environment marker), ended
    files    -- every write of the loop: atomic, folders made again, bounded logs, full disk
    noise    -- the keep/revert rule
    loop     -- the decisions: which fix to try next, what to keep
    summary  -- the summary data and its table / JSON / Markdown renderers
    command  -- the typer command ``fix_loop``

Nothing here imports torch at import time.
"""

from __future__ import annotations

__all__ = ["FixLoop", "LoopOptions", "decide"]


def __getattr__(name: str):  # lazy: keep ``import tracedoc.fixloop`` light
    if name in ("FixLoop", "LoopOptions"):
        from tracedoc.fixloop import loop

        return getattr(loop, name)
    if name == "decide":
        from tracedoc.fixloop.noise import decide

        return decide
    raise AttributeError(name)
