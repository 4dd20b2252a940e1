"""A launch-overhead-bound workload: a deep stack of small Linear/LayerNorm/GELU blocks at a small batch.

Each block runs a handful of tiny kernels, so on a GPU the time goes to launching them
(the GPU idles between kernels) and not to computing: the ``launch-bound-gpu-idle``
rule fires, and ``torch.compile`` (which fuses the element-wise kernels and can use
CUDA graphs) is the fix; a larger batch is the unsafe alternative. The data is
synthetic and generated on the device, so there is no DataLoader (and no
num_workers/pin_memory knob: the loop reports them as absent).

Run it alone::

    python -m tracedoc.fixloop.trial run workloads/launch_bound.py --out DIR
"""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path
from typing import Literal

from tracedoc.fixloop import harness


@dataclass(frozen=True)
class Config:
    """The knobs (defaults: the launch-bound baseline) and the step counts."""

    batch_size: int = 16
    width: int = 256
    depth: int = 24
    set_to_none: bool = False
    amp: Literal["off", "bf16", "fp16"] = "off"
    compile: bool = False
    device: str = "auto"
    seed: int = 0
    warmup_steps: int = 10
    profile_wait: int = 1
    profile_warmup: int = 2
    profile_active: int = 5
    timed_steps: int = 100
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
        ValueError: an unknown ``amp`` value.
    """
    import torch

    torch.manual_seed(config.seed)
    device = harness.resolve_device(config.device)
    dev_type = torch.device(device).type
    model = build_model(config.width, config.depth).to(device)
    forward = torch.compile(model) if config.compile else model
    optimizer = torch.optim.SGD(model.parameters(), lr=0.01, momentum=0.9)
    criterion = torch.nn.CrossEntropyLoss()
    n_batches = 8  # a few distinct batches, generated once on the device
    inputs = torch.randn(n_batches, config.batch_size, config.width, device=device)
    targets = torch.randint(0, 10, (n_batches, config.batch_size), device=device)
    if config.amp not in ("off", "bf16", "fp16"):
        raise ValueError(f"amp must be off, bf16 or fp16, not {config.amp!r}")
    autocast_dtype = {"off": None, "bf16": torch.bfloat16, "fp16": torch.float16}[config.amp]
    scaler = torch.amp.GradScaler(dev_type, enabled=config.amp == "fp16")
    counter = [0]

    def step() -> None:
        i = counter[0] % n_batches
        counter[0] += 1
        optimizer.zero_grad(set_to_none=config.set_to_none)
        with torch.autocast(dev_type, dtype=autocast_dtype, enabled=autocast_dtype is not None):
            loss = criterion(forward(inputs[i]), targets[i])
        scaler.scale(loss).backward()
        scaler.step(optimizer)
        scaler.update()

    model.train()
    steps = harness.Steps.from_config(config)
    return harness.measure(step, batch_size=config.batch_size, device=device, out_dir=out_dir, steps=steps)
