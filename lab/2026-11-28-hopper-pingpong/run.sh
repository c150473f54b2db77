#!/usr/bin/env bash
# The Hopper ladder's step past g, fp16/ and bf16/wgmma_pingpong (gemm_wgmma_specialized<T, 5, 2, kGroupedOrder |
# kTmaStore | kPingPong>), on an H100: its GPU tests first (FP64 at the edges of its shapes, alpha and beta; a kernel
# that is wrong is never timed), then `sgemm bench --versus-baseline` beside step g and cuBLAS at 4096 and 8192. The
# entries (entries.toml) are appended to a scratch copy of the checkout ($SCRATCH), not to its catalogue.
# Run from the repository root with .whl carried; results under $OUT. Under 5 minutes.
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
SCRATCH=${SCRATCH:-/tmp/pingpong}
rm -rf "$SCRATCH" && mkdir -p "$SCRATCH"
cp -r sgemm kernels benchmarks tests tools pyproject.toml asv.conf.json "$SCRATCH/"
cat lab/2026-11-28-hopper-pingpong/entries.toml >> "$SCRATCH/sgemm/catalogue.toml"
cd "$SCRATCH"
SECONDS=0
# A hang (a barrier phase never completing) is the likeliest way for this step to be wrong: the timeout ends it.
timeout 120 python3 -m pytest -q -m gpu tests/measuring/test_verify.py -k wgmma_pingpong -p no:cacheprovider -rs \
    > "$OUT/verify.txt" 2>&1
verified=$?
echo "GPU tests of the entries: exit $verified after ${SECONDS} s: $(tail -n 1 "$OUT/verify.txt")" \
    | tee -a "$OUT/summary.txt"
if [ "$verified" -ne 0 ]; then
    echo "not timed: the GPU tests did not pass" | tee -a "$OUT/summary.txt"
    exit 1
fi
SECONDS=0
timeout 170 python3 -m sgemm bench -k fp16/cublas -k bf16/cublas -k fp16/wgmma_grouped_tma_store \
    -k bf16/wgmma_grouped_tma_store -k fp16/wgmma_pingpong -k bf16/wgmma_pingpong \
    --size 4096 --size 8192 --versus-baseline --json "$OUT/bench.json" > "$OUT/bench.txt" 2> "$OUT/bench.log"
echo "bench: exit $? after ${SECONDS} s" | tee -a "$OUT/summary.txt"
grep -A16 '^kernel ' "$OUT/bench.txt" | tee -a "$OUT/summary.txt"
