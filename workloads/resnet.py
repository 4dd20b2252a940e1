"""ResNet-18 on synthetic CIFAR-like data: the walkthrough's starting point, as a tracedoc workload.

Baseline (every ``Config`` default): random uint8 32x32x3 images with 10 classes (no
download), PIL transforms ``Resize(224) -> ToTensor -> Normalize(0.5, 0.5)``,
``torchvision.models.resnet18(weights=None, num_classes=10)``, cross-entropy, SGD (lr 0.001,
momentum 0.9), batch size 32, ``DataLoader(num_workers=0)``, fp32, eager.

Run it alone (writes DIR/trace.pt.trace.json.gz and DIR/result.json)::

    python -m tracedoc.fixloop.trial run workloads/resnet.py --out DIR --set image_size=32

or let ``tracedoc fix-loop workloads/resnet.py`` tune it. See docs/fix-loop.md.
"""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path
from typing import Literal

from tracedoc.fixloop import harness


@dataclass(frozen=True)
class Config:
    """The knobs; defaults are the walkthrough's baseline. Step counts are at the end."""

    batch_size: int = 32
    num_workers: int = 0
    pin_memory: bool = False
    non_blocking: bool = False
    #: "float32": normalised on the host and copied as fp32; "uint8": copied as uint8
    #: (4x fewer bytes) and converted/normalised on the device.
    input_dtype: Literal["float32", "uint8"] = "float32"
    set_to_none: bool = False
    amp: Literal["off", "bf16", "fp16"] = "off"
    compile: bool = False
    channels_last: bool = False
    image_size: int = 224
    device: str = "auto"
    #: distinct synthetic images (the loader cycles through them)
    n_images: int = 1024
    seed: int = 0
    warmup_steps: int = 5
    profile_wait: int = 1
    profile_warmup: int = 1
    profile_active: int = 3
    timed_steps: int = 20
    repeats: int = 3


class SyntheticCIFAR:
    """A map-style dataset of ``length`` items cycling over ``n_images`` random uint8 HWC images.

    Items go through ``transform`` as PIL images, like torchvision's CIFAR10.
    """

    def __init__(self, n_images: int, length: int, transform, seed: int = 0) -> None:
        import numpy as np

        rng = np.random.default_rng(seed)
        self.images = rng.integers(0, 256, size=(n_images, 32, 32, 3), dtype=np.uint8)
        self.labels = rng.integers(0, 10, size=n_images).tolist()
        self.length = length
        self.transform = transform

    def __len__(self) -> int:
        return self.length

    def __getitem__(self, index: int):
        from PIL import Image

        i = index % len(self.images)
        return self.transform(Image.fromarray(self.images[i])), self.labels[i]


def run(config: Config, out_dir: str | Path) -> dict:
    """Train ResNet-18 for ``harness.Steps.total`` steps; return :func:`harness.measure`'s result.

    Raises:
        ValueError: an unknown ``amp`` or ``input_dtype`` value.
        torch.cuda.OutOfMemoryError: the batch does not fit (the trial reports ``oom``).
    """
    import torch
    import torchvision
    from torchvision import transforms

    torch.manual_seed(config.seed)
    device = harness.resolve_device(config.device)
    dev_type = torch.device(device).type
    steps = harness.Steps.from_config(config)

    resize = transforms.Resize(config.image_size)
    if config.input_dtype == "float32":
        tf = transforms.Compose([resize, transforms.ToTensor(), transforms.Normalize((0.5,) * 3, (0.5,) * 3)])
    elif config.input_dtype == "uint8":
        tf = transforms.Compose([resize, transforms.PILToTensor()])
    else:
        raise ValueError(f"input_dtype must be float32 or uint8, not {config.input_dtype!r}")
    dataset = SyntheticCIFAR(config.n_images, steps.total * config.batch_size, tf, seed=config.seed)
    loader = torch.utils.data.DataLoader(
        dataset,
        batch_size=config.batch_size,
        shuffle=True,
        num_workers=config.num_workers,
        pin_memory=config.pin_memory and dev_type == "cuda",
        drop_last=True,
        generator=torch.Generator().manual_seed(config.seed),
    )
    batches = iter(loader)

    memory_format = torch.channels_last if config.channels_last else torch.contiguous_format
    model = torchvision.models.resnet18(weights=None, num_classes=10).to(device, memory_format=memory_format)
    criterion = torch.nn.CrossEntropyLoss()
    optimizer = torch.optim.SGD(model.parameters(), lr=0.001, momentum=0.9)
    forward = torch.compile(model) if config.compile else model

    if config.amp == "off":
        autocast_dtype = None
    elif config.amp in ("bf16", "fp16"):
        autocast_dtype = torch.bfloat16 if config.amp == "bf16" else torch.float16
    else:
        raise ValueError(f"amp must be off, bf16 or fp16, not {config.amp!r}")
    scaler = torch.amp.GradScaler(dev_type, enabled=config.amp == "fp16")

    def step() -> None:
        images, labels = next(batches)
        images = images.to(device, non_blocking=config.non_blocking)
        labels = labels.to(device, non_blocking=config.non_blocking)
        if config.input_dtype == "uint8":
            images = images.float().div_(255).sub_(0.5).div_(0.5)  # ToTensor + Normalize(0.5, 0.5)
        images = images.contiguous(memory_format=memory_format)
        optimizer.zero_grad(set_to_none=config.set_to_none)
        with torch.autocast(dev_type, dtype=autocast_dtype, enabled=autocast_dtype is not None):
            loss = criterion(forward(images), labels)
        scaler.scale(loss).backward()
        scaler.step(optimizer)
        scaler.update()

    model.train()
    return harness.measure(
        step,
        batch_size=config.batch_size,
        device=device,
        out_dir=out_dir,
        steps=steps,
        dataloader_workers=config.num_workers,
        amp=config.amp,
    )
