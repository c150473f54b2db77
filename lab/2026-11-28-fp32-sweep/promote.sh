#!/usr/bin/env bash
# The sweep's winner, fp32/async_thread_tile_16x8 (gemm_async<128, 128, 8, 32, 128, 16, 8, 4>), as a catalogue entry
# on an H100: its GPU tests (FP64 at the edges of its shapes, alpha and beta), then `sgemm bench --versus-baseline`
# beside fp32/async_multistage and cuBLAS at 4096 and 8192. Run from the repository root with .whl carried; results
# under $OUT. About a minute and a half.
set -uo pipefail
OUT=${OUT:-$PWD/out}
mkdir -p "$OUT"
ls .whl/*.whl | grep -v -e numpy- -e nvidia_ml_py- | xargs python3 -m pip install -q --no-index --no-deps \
    --no-compile --target /tmp/site 2>/dev/null
export PYTHONPATH=/tmp/site PYTHONUNBUFFERED=1
site=$(python3 -c 'import sysconfig; print(sysconfig.get_paths()["purelib"])')
export SGEMM_CUDA_SITE="$site:/tmp/site"
nvidia-smi --query-gpu=name,driver_version,clocks.sm,power.draw,power.limit,temperature.gpu --format=csv \
    | tee "$OUT/summary.txt"
echo "checkout: $(git rev-parse --short HEAD) $(git status --porcelain | wc -l) changed files" | tee -a "$OUT/summary.txt"
SECONDS=0
timeout 40 python3 -m pytest -q -m gpu tests/measuring/test_verify.py -k async_thread_tile -p no:cacheprovider -rs \
    > "$OUT/verify.txt" 2>&1
echo "GPU tests of the entry: exit $? after ${SECONDS} s: $(tail -n 1 "$OUT/verify.txt")" | tee -a "$OUT/summary.txt"
SECONDS=0
timeout 70 python3 -m sgemm bench -k fp32/cublas -k fp32/async_multistage -k fp32/async_thread_tile_16x8 \
    --size 4096 --size 8192 --versus-baseline --json "$OUT/bench.json" > "$OUT/bench.txt" 2> "$OUT/bench.log"
echo "bench: exit $? after ${SECONDS} s" | tee -a "$OUT/summary.txt"
grep -A8 '^kernel ' "$OUT/bench.txt" | tee -a "$OUT/summary.txt"
