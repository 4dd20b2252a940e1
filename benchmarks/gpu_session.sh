#!/usr/bin/env bash
# One lent-GPU session: record the ResNet-18 walkthrough, then run the fix-loop from its baseline.
# Run from the repository root on the GPU machine; writes everything under ${OUT:-/tmp/gpu-out}.
#   bash benchmarks/gpu_session.sh [total seconds, default 540]   (SKIP_RECORDINGS=1: the fix-loop only)
# Wheels for what the machine lacks (orjson, msgspec, platformdirs) are installed from .whl/ if present.
set -u
TOTAL=${1:-540}
OUT=${OUT:-/tmp/gpu-out}
mkdir -p "$OUT"
start=$(date +%s)
if ls .whl/*.whl >/dev/null 2>&1; then
  python3 -m pip install -q --no-index --no-deps --no-compile --no-cache-dir --upgrade --target /tmp/site .whl/*.whl || exit 1
  export PYTHONPATH=/tmp/site:$PWD
else
  export PYTHONPATH=$PWD
fi
export PYTHONUNBUFFERED=1 TRACEDOC_RECORD_SHAPES=1
W=/tmp/gpu-work
rm -rf "$W" && mkdir -p "$W"
{
  date -u; nvidia-smi; nproc; df -h /dev/shm
  python3 -c "import torch, torchvision, sys; print(sys.version); print('torch', torch.__version__, 'cuda', torch.version.cuda, 'cudnn', torch.backends.cudnn.version(), 'torchvision', torchvision.__version__)"
  python3 -m tracedoc --version
} >"$W/env.txt" 2>&1
cat "$W/env.txt"
echo "== walkthrough recordings"
[ -n "${SKIP_RECORDINGS:-}" ] || timeout -s TERM $((TOTAL * 45 / 100)) python3 benchmarks/gpu_walkthrough.py --out "$W/rec" --device cuda --timeout 150 2>&1 | tee "$W/rec.log"
left=$((TOTAL - ($(date +%s) - start) - 25))
echo "== fix-loop, ${left}s left"
if [ "$left" -gt 60 ]; then
  timeout -s TERM -k 20 "$left" python3 -m tracedoc fix-loop workloads/resnet.py --device cuda --unsafe-fixes \
    --max-trials 6 --max-rounds 5 --timeout 150 --out "$W/fl" 2>&1 | tee "$W/fl.log"
fi
# the device tool brings back at most 8 files of 16 MiB: one tar, in 15 MiB pieces
tar cf - -C /tmp gpu-work | split -b 15m - "$OUT/gpu-work.tar."
ls -la "$OUT"
