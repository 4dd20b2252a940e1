"""An input-bound CPU workload: JPEG decoding and augmentation in the DataLoader feed a small CNN.

Baseline (every ``Config`` default): ``n_images`` synthetic 128x128 RGB images (smooth
gradients plus noise, so they compress like photographs) are encoded once, in memory, as
JPEG (pillow, quality 90). Each item is decoded from its JPEG bytes and augmented the way
an ImageNet-style pipeline does: ``RandomResizedCrop(96) -> RandomHorizontalFlip ->
ColorJitter(0.4, 0.4, 0.4) -> ToTensor -> Normalize``. The model is a 3-conv CNN
(16/32/64 channels, a stride-2 stem, ReLU, max-pool, global average pool, linear head),
cross-entropy, SGD, batch size 32, ``DataLoader(num_workers=0)``, PyTorch's default
intra-op threads (one per core).

On a 2-core machine the step waits on the DataLoader for about two thirds of its time, so
``dataloader-stall`` (TD101) fires and ``num_workers`` is the fix. A worker process alone
does not help there: with PyTorch's intra-op threads on both cores, the worker competes
with them (CPU oversubscription, ``cpu-oversubscription``, TD501), and
``num_threads = cores - workers`` is the second half of the fix.

How much there is to win depends on how the decoding compares with the training step. With
a stride-1 stem (``--set stem_stride=1``, the default before 2026-11-22) the CNN's step is
four times heavier: on a host without AMX (101 ms on two threads, 165 ms on one, against
46 ms of decoding per batch) the step is under 40% DataLoader, a worker has no idle core,
and the loop rightly keeps nothing. ``read_latency_ms`` puts each image behind a storage
read (a sleep, as from network storage), which a worker hides on any host. docs/fix-loop.md
has the runs.

Run it alone (writes DIR/trace.pt.trace.json.gz and DIR/result.json)::

    python -m tracedoc.fixloop.trial run workloads/input_bound.py --out DIR

or ``tracedoc fix-loop workloads/input_bound.py --device cpu``. See docs/fix-loop.md.
"""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path
from typing import Literal

from tracedoc.fixloop import harness


@dataclass(frozen=True)
class Config:
    """The knobs; defaults are the input-bound baseline. Step counts are at the end."""

    batch_size: int = 32
    num_workers: int = 0
    #: intra-op threads of the training process (``torch.set_num_threads``); 0 = PyTorch's default
    num_threads: int = 0
    set_to_none: bool = False
    channels_last: bool = False
    compile: bool = False
    amp: Literal["off", "bf16", "fp16"] = "off"
    device: str = "auto"
    #: channels of the first conv stage (then 2x, 4x)
    width: int = 16
    #: stride of the first conv (the stem); 2 halves each side of every later stage, as the
    #: stems of ResNet and most CNNs do; 1 = the CNN before 2026-11-22 (the fixture's)
    stem_stride: int = 2
    #: side of the stored JPEG images, and of the random crop fed to the model (pixels)
    image_size: int = 128
    crop_size: int = 96
    #: distinct JPEG images (the loader cycles through them)
    n_images: int = 256
    #: storage read latency per image (ms), as when files come from network storage;
    #: 0 = the JPEG bytes are read from memory
    read_latency_ms: float = 0.0
    seed: int = 0
    warmup_steps: int = 5
    profile_wait: int = 1
    profile_warmup: int = 1
    profile_active: int = 3
    timed_steps: int = 20
    repeats: int = 3


def encode_jpegs(n_images: int, size: int, seed: int = 0) -> list[bytes]:
    """``n_images`` synthetic ``size`` x ``size`` RGB images encoded as JPEG bytes (quality 90).

    Each image is a random colour gradient plus Gaussian noise (sd 12), clipped to uint8.
    """
    import io

    import numpy as np
    from PIL import Image

    rng = np.random.default_rng(seed)
    yy, xx = np.mgrid[0:size, 0:size].astype(np.float32) / size
    out = []
    for _ in range(n_images):
        a, b, c = rng.uniform(0, 255, size=(3, 3))
        img = a[None, None, :] + (b - a)[None, None, :] * xx[..., None] + (c - a)[None, None, :] * yy[..., None]
        img = np.clip(img + rng.normal(0, 12, size=img.shape), 0, 255).astype(np.uint8)
        buf = io.BytesIO()
        Image.fromarray(img).save(buf, format="JPEG", quality=90)
        out.append(buf.getvalue())
    return out


class JpegDataset:
    """A map-style dataset of ``length`` items cycling over in-memory JPEG images.

    ``__getitem__`` first sleeps ``read_latency_ms`` (a storage read that holds no core),
    then decodes the JPEG with pillow and applies ``transform``; labels are
    ``index % 10``.
    """

    def __init__(self, jpegs: list[bytes], length: int, transform, read_latency_ms: float = 0.0) -> None:
        self.jpegs = jpegs
        self.length = length
        self.transform = transform
        self.read_latency_s = read_latency_ms / 1000.0

    def __len__(self) -> int:
        return self.length

    def __getitem__(self, index: int):
        import io
        import time

        from PIL import Image

        if self.read_latency_s > 0:
            time.sleep(self.read_latency_s)  # the storage read: the process waits, the cores are free
        data = self.jpegs[index % len(self.jpegs)]
        with Image.open(io.BytesIO(data)) as img:
            image = img.convert("RGB")
        return self.transform(image), index % 10


def build_model(width: int = 16, n_classes: int = 10, stem_stride: int = 2):
    """The 3-conv CNN: three ``Conv3x3 -> ReLU -> MaxPool2`` stages (``width``, 2x, 4x channels),
    global average pooling and a linear classifier. The first conv has stride ``stem_stride``.

    Raises:
        ValueError: ``stem_stride`` below 1.
    """
    from torch import nn

    if stem_stride < 1:
        raise ValueError(f"stem_stride must be >= 1, not {stem_stride}")

    def stage(c_in: int, c_out: int, stride: int = 1) -> nn.Sequential:
        conv = nn.Conv2d(c_in, c_out, 3, stride=stride, padding=1)
        return nn.Sequential(conv, nn.ReLU(inplace=True), nn.MaxPool2d(2))

    w = width
    return nn.Sequential(
        stage(3, w, stem_stride),
        stage(w, 2 * w),
        stage(2 * w, 4 * w),
        nn.AdaptiveAvgPool2d(1),
        nn.Flatten(),
        nn.Linear(4 * w, n_classes),
    )


def run(config: Config, out_dir: str | Path) -> dict:
    """Train the CNN for ``harness.Steps.total`` steps; return :func:`harness.measure`'s result.

    Raises:
        ValueError: an unknown ``amp`` value, a negative ``num_threads`` or ``read_latency_ms``.
    """
    import torch
    from torchvision import transforms

    if config.read_latency_ms < 0:
        raise ValueError(f"read_latency_ms must be >= 0, not {config.read_latency_ms}")
    harness.set_intra_op_threads(config.num_threads)
    torch.manual_seed(config.seed)
    device = harness.resolve_device(config.device)
    dev_type = torch.device(device).type
    steps = harness.Steps.from_config(config)

    tf = transforms.Compose(
        [
            transforms.RandomResizedCrop(config.crop_size, antialias=True),
            transforms.RandomHorizontalFlip(),
            transforms.ColorJitter(0.4, 0.4, 0.4),
            transforms.ToTensor(),
            transforms.Normalize((0.485, 0.456, 0.406), (0.229, 0.224, 0.225)),
        ]
    )
    jpegs = encode_jpegs(config.n_images, config.image_size, config.seed)
    dataset = JpegDataset(jpegs, steps.total * config.batch_size, tf, config.read_latency_ms)
    loader = torch.utils.data.DataLoader(
        dataset,
        batch_size=config.batch_size,
        shuffle=True,
        num_workers=config.num_workers,
        persistent_workers=config.num_workers > 0,
        drop_last=True,
        generator=torch.Generator().manual_seed(config.seed),
    )
    batches = iter(loader)

    memory_format = torch.channels_last if config.channels_last else torch.contiguous_format
    model = build_model(config.width, stem_stride=config.stem_stride).to(device, memory_format=memory_format)
    criterion = torch.nn.CrossEntropyLoss()
    optimizer = torch.optim.SGD(model.parameters(), lr=0.01, momentum=0.9)
    forward = torch.compile(model) if config.compile else model
    if config.amp not in ("off", "bf16", "fp16"):
        raise ValueError(f"amp must be off, bf16 or fp16, not {config.amp!r}")
    autocast_dtype = {"off": None, "bf16": torch.bfloat16, "fp16": torch.float16}[config.amp]
    scaler = torch.amp.GradScaler(dev_type, enabled=config.amp == "fp16")

    def step() -> None:
        images, labels = next(batches)
        images = images.to(device).contiguous(memory_format=memory_format)
        labels = labels.to(device)
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
