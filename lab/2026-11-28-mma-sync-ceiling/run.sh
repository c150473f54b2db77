#!/usr/bin/env bash
# The mma.sync ceiling (ceiling.py) and, on the same card in the same call, the catalogue's best mma.sync step beside
# cuBLAS by `sgemm bench --versus-baseline` at 4096, so that the step's FLOP a cycle can be set against the ceiling's.
# Run from the repository root on a GPU box with .whl (the offline wheelhouse) carried; results under $OUT.
set -uo pipefail
OUT=${OUT:-$PWD/out}
mkdir -p "$OUT"
nvidia-smi --query-gpu=index,name,driver_version,clocks.sm,power.draw,power.limit,temperature.gpu --format=csv \
    | tee "$OUT/cards.txt"
git rev-parse --short HEAD 2>/dev/null | sed 's/^/checkout: /' | tee -a "$OUT/cards.txt"
timeout "${CEILING_S:-150}" python3 lab/2026-11-28-mma-sync-ceiling/ceiling.py --seconds 2 2>&1 | tee "$OUT/ceiling.txt"
if compgen -G ".whl/*.whl" > /dev/null; then
    ls .whl/*.whl | grep -v -e numpy- -e nvidia_ml_py- | xargs python3 -m pip install -q --no-index --no-deps \
        --no-compile --target /tmp/site 2>/dev/null
    export PYTHONPATH=/tmp/site
fi
timeout "${BENCH_S:-200}" python3 -m sgemm bench -k fp16/cublas -k "${KERNEL:-fp16/mma_fragment_buffered}" \
    --size 4096 --versus-baseline --json "$OUT/bench.json" 2>&1 | tee "$OUT/bench.txt"
nvidia-smi --query-gpu=index,clocks.sm,power.draw,temperature.gpu --format=csv | tee -a "$OUT/cards.txt"
