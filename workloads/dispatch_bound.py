"""An eager-overhead-bound CPU workload: a deep stack of tiny ops per step.

48 residual blocks ``x + Linear(GELU(Linear(LayerNorm(x))))`` at width 32 and batch 8,
data generated in-process (no DataLoader). Each op does a few thousand floating-point
operations, so the step's CPU time goes to Python, the dispatcher and each op's fixed
cost rather than to arithmetic: the ``cpu-dispatch-overhead`` rule (TD502) fires, and
``torch.compile`` (knob ``compile``, which fuses the element-wise ops into a few
generated C++ kernels) is the fix. ``batch_size`` (unsafe) amortises the overhead over
more samples; ``amp=bf16`` (unsafe) is offered by TD503 only on a CPU with bf16 matrix
units (AMX / AVX-512 BF16).

Run it alone::

    python -m tracedoc.fixloop.trial run workloads/dispatch_bound.py --out DIR
"""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path
from typing import Literal

from tracedoc.fixloop import harness


@dataclass(frozen=True)
class Config:
    """The knobs (defaults: the dispatch-bound baseline) and the step counts."""

    batch_size: int = 8
    width: int = 32
    depth: int = 48
    #: intra-op threads (``torch.set_num_threads``); 0 = PyTorch's default
    num_threads: int = 0
    set_to_none: bool = False
    amp: Literal["off", "bf16", "fp16"] = "off"
    compile: bool = False
    device: str = "cpu"
    seed: int = 0
    warmup_steps: int = 5
    profile_wait: int = 1
    profile_warmup: int = 1
    profile_active: int = 3
    timed_steps: int = 30
    repeats: int = 3


def build_model(width: int, depth: int, n_classes: int = 10):
    """``depth`` residual blocks ``x + Linear(GELU(Linear(LayerNorm(x))))`` and a classifier head."""
    import torch
    from torch import nn

    class Block(nn.Module):
        def __init__(self) -> None:
            super().__init__()
            self.norm = nn.LayerNorm(width)
            self.fc1 = nn.Linear(width, width)
            self.fc2 = nn.Linear(width, width)

        def forward(self, x: torch.Tensor) -> torch.Tensor:
            return x + self.fc2(torch.nn.functional.gelu(self.fc1(self.norm(x))))

    return nn.Sequential(*[Block() for _ in range(depth)], nn.LayerNorm(width), nn.Linear(width, n_classes))


def run(config: Config, out_dir: str | Path) -> dict:
    """Train the block stack for ``harness.Steps.total`` steps; return :func:`harness.measure`'s result.

    Raises:
        ValueError: an unknown ``amp`` value or a negative ``num_threads``.
    """
    import torch

    harness.set_intra_op_threads(config.num_threads)
    torch.manual_seed(config.seed)
    device = harness.resolve_device(config.device)
    dev_type = torch.device(device).type
    model = build_model(config.width, config.depth).to(device)
    forward = torch.compile(model) if config.compile else model
    optimizer = torch.optim.SGD(model.parameters(), lr=0.01, momentum=0.9)
    criterion = torch.nn.CrossEntropyLoss()
    n_batches = 8
    inputs = torch.randn(n_batches, config.batch_size, config.width, device=device)
    targets = torch.randint(0, 10, (n_batches, config.batch_size), device=device)
    if config.amp not in ("off", "bf16", "fp16"):
        raise ValueError(f"amp must be off, bf16 or fp16, not {config.amp!r}")
    autocast_dtype = {"off": None, "bf16": torch.bfloat16, "fp16": torch.float16}[config.amp]
    counter = [0]

    def step() -> None:
        i = counter[0] % n_batches
        counter[0] += 1
        optimizer.zero_grad(set_to_none=config.set_to_none)
        with torch.autocast(dev_type, dtype=autocast_dtype, enabled=autocast_dtype is not None):
            loss = criterion(forward(inputs[i]), targets[i])
        loss.backward()
        optimizer.step()

    model.train()
    steps = harness.Steps.from_config(config)
    return harness.measure(
        step, batch_size=config.batch_size, device=device, out_dir=out_dir, steps=steps, amp=config.amp
    )
