"""Write a Kineto-shaped trace of N small events, in steps, streaming (never the whole document in memory).

    python benchmarks/make_small_trace.py 4000000 bench-out/small-4m.json [--gzip] [--per-step 3000]

Each step is a ``ProfilerStep#k`` CPU annotation (``user_annotation``) and, inside it, groups of three
correlated events: a ``cpu_op`` (a few ``aten::`` names in turn, with an ``External id``), the
``cudaLaunchKernel`` runtime call it makes (``cuda_runtime``, ``correlation`` and ``External id``) and
the kernel it launches (``kernel``, on device 0 stream 7, same ``correlation`` and ``External id``,
starting after the launch). The top level carries ``schemaVersion``, ``deviceProperties`` (one V100)
and ``distributedInfo``, as Kineto writes them. ``N`` counts every event, annotations included (the
last step may be cut short to hit it exactly). Events are written as compact one-line JSON objects,
about 130 bytes each: the size per event of a trace of many small ops.

Memory: one batch of lines (a few MB) at a time, whatever ``N``.
"""

from __future__ import annotations

import argparse
import gzip
import sys

_OPS = ("aten::add", "aten::mul", "aten::relu", "aten::copy_", "aten::addmm", "aten::layer_norm")
_KERNELS = (
    "void at::native::vectorized_elementwise_kernel<4, at::native::CUDAFunctor_add<float>>",
    "void at::native::vectorized_elementwise_kernel<4, at::native::BinaryFunctor<float, float, float>>",
    "void at::native::vectorized_elementwise_kernel<4, at::native::clamp_min_scalar_kernel<float>>",
    "void at::native::unrolled_elementwise_kernel<at::native::direct_copy_kernel_cuda>",
    "ampere_sgemm_64x64_nn",
    "void at::native::vectorized_layer_norm_kernel<float, float>",
)
_HEAD = (
    b'{"schemaVersion":1,"deviceProperties":[{"id":0,"name":"Tesla V100-SXM2-32GB","totalGlobalMem":34089730048,'
    b'"computeMajor":7,"computeMinor":0,"maxThreadsPerBlock":1024,"maxThreadsPerMultiprocessor":2048,'
    b'"regsPerBlock":65536,"regsPerMultiprocessor":65536,"warpSize":32,"sharedMemPerBlock":49152,'
    b'"sharedMemPerMultiprocessor":98304,"numSms":80,"sharedMemPerBlockOptin":98304}],'
    b'"distributedInfo":{"backend":"nccl","rank":0,"world_size":1},"traceEvents":['
)
_TAIL = b'],"traceName":"small.json","displayTimeUnit":"ms"}'
PID, TID = 4242, 4242
T0 = 1_700_000_000_000  # µs, as Kineto's absolute clock


def events(n: int, per_step: int):
    """Yield the ``n`` event lines (bytes, no separators)."""
    written = 0
    step = 0
    t = T0
    ext = corr = 0
    while written < n:
        groups = min((per_step - 1) // 3, (n - written - 1) // 3)
        step_ts = t
        step_dur = groups * 10 + 5
        yield (
            f'{{"ph":"X","cat":"user_annotation","name":"ProfilerStep#{step}","pid":{PID},"tid":{TID},'
            f'"ts":{step_ts}.000,"dur":{step_dur}.000,"args":{{"External id":{ext}}}}}'
        ).encode()
        ext += 1
        written += 1
        for g in range(groups):
            op = g % len(_OPS)
            ts = step_ts + 2 + g * 10
            yield (
                f'{{"ph":"X","cat":"cpu_op","name":"{_OPS[op]}","pid":{PID},"tid":{TID},'
                f'"ts":{ts}.125,"dur":6.250,"args":{{"External id":{ext}}}}}'
            ).encode()
            yield (
                f'{{"ph":"X","cat":"cuda_runtime","name":"cudaLaunchKernel","pid":{PID},"tid":{TID},'
                f'"ts":{ts + 2}.500,"dur":3.125,"args":{{"External id":{ext},"correlation":{corr}}}}}'
            ).encode()
            yield (
                f'{{"ph":"X","cat":"kernel","name":"{_KERNELS[op]}","pid":0,"tid":7,'
                f'"ts":{ts + 6}.000,"dur":4.375,"args":{{"External id":{ext},"correlation":{corr},'
                f'"device":0,"stream":7}}}}'
            ).encode()
            ext += 1
            corr += 1
            written += 3
        while 0 < n - written < 3:  # pad to exactly n with annotations
            yield (
                f'{{"ph":"X","cat":"user_annotation","name":"pad","pid":{PID},"tid":{TID},'
                f'"ts":{step_ts + 1}.000,"dur":1.000}}'
            ).encode()
            written += 1
        step += 1
        t = step_ts + step_dur + 20


def build(n: int, out: str, compress: bool = False, per_step: int = 3000) -> int:
    """Write the trace of ``n`` events to ``out`` (gzipped when ``compress``); returns ``n``."""
    fh = gzip.open(out, "wb", compresslevel=6) if compress else open(out, "wb")  # noqa: SIM115
    count = 0
    with fh:
        fh.write(_HEAD)
        batch: list[bytes] = []
        for line in events(n, per_step):
            batch.append(line)
            if len(batch) >= 50_000:
                fh.write((b"," if count else b"") + b",\n".join(batch))
                count += len(batch)
                batch = []
        if batch:
            fh.write((b"," if count else b"") + b",\n".join(batch))
            count += len(batch)
        fh.write(_TAIL)
    return count


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("events", type=int)
    ap.add_argument("out")
    ap.add_argument("--gzip", action="store_true", help="gzip the output")
    ap.add_argument("--per-step", type=int, default=3000, help="events per ProfilerStep (default 3000)")
    a = ap.parse_args(argv)
    n = build(a.events, a.out, a.gzip, a.per_step)
    print(f"{a.out}: {n} events", file=sys.stderr)
    return 0


if __name__ == "__main__":
    sys.exit(main())
