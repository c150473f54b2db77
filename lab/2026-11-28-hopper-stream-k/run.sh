#!/usr/bin/env bash
# The Hopper ladder's stream-K step, fp16/ and bf16/wgmma_stream_k (gemm_wgmma_specialized<T, 4, 2, kGroupedOrder |
# kTmaStore | kStreamK>), on one GPU: its GPU tests first (FP64 at the edges of its shapes, alpha and beta), then
# `sgemm check` at shapes whose tiles leave a partial last round on a 132-SM GPU (where tiles are split and joined),
# with beta too (a kernel that is wrong is never timed), then `sgemm bench --versus-baseline` beside step g and cuBLAS
# at 4096 and 8192, then every GPU test of the checkout. The entries (entries.toml) are appended to a scratch copy
# of the checkout ($SCRATCH), not to its catalogue. Run from the repository root with .whl carried; results under
# $OUT. About 5 minutes.
set -uo pipefail
OUT=${OUT:-$PWD/out}
SCRATCH=${SCRATCH:-/tmp/stream-k}
source lab/scratch-with-entries.sh lab/2026-11-28-hopper-stream-k/entries.toml
SECONDS=0
# A hang (a flag never raised) is the likeliest way for this step to be wrong: the timeouts end it.
timeout 150 python3 -m pytest -q -m gpu tests/measuring/test_verify.py -k wgmma_stream_k -p no:cacheprovider -rs \
    > "$OUT/verify.txt" 2>&1
verified=$?
echo "GPU tests of the entries: exit $verified after ${SECONDS} s: $(tail -n 1 "$OUT/verify.txt")" \
    | tee -a "$OUT/summary.txt"
# 4096 and 8192 (256 and 1,024 cluster tiles), 2304x2560x1088 (90 tiles, each split: fewer than two rounds on 66
# clusters) and 6400x4352x4160 (425 tiles, K steps not a multiple of anything): the tiles split and joined.
SECONDS=0
for beta in 0 0.5; do
    timeout 120 python3 -m sgemm check -k fp16/wgmma_stream_k -k bf16/wgmma_stream_k --shape 4096x4096x4096 \
        --shape 8192x8192x8192 --shape 2304x2560x1088 --shape 6400x4352x4160 --alpha 1.5 --beta $beta \
        >> "$OUT/check.txt" 2>&1
    checked=$?
    echo "sgemm check, beta $beta: exit $checked after ${SECONDS} s" | tee -a "$OUT/summary.txt"
    [ "$checked" -eq 0 ] || verified=1
done
cat "$OUT/check.txt" | tee -a "$OUT/summary.txt"
if [ "$verified" -ne 0 ]; then
    echo "not timed: the checks did not pass" | tee -a "$OUT/summary.txt"
    exit 1
fi
SECONDS=0
timeout 200 python3 -m sgemm bench -k fp16/cublas -k bf16/cublas -k fp16/wgmma_grouped_tma_store \
    -k bf16/wgmma_grouped_tma_store -k fp16/wgmma_stream_k -k bf16/wgmma_stream_k \
    --size 4096 --size 8192 --versus-baseline > "$OUT/bench.txt" 2> "$OUT/bench.log"
echo "bench: exit $? after ${SECONDS} s" | tee -a "$OUT/summary.txt"
grep -A16 '^kernel ' "$OUT/bench.txt" | tee -a "$OUT/summary.txt"
cd "$CHECKOUT"
export PYTHONPATH=/tmp/site
SECONDS=0
timeout 200 python3 -m pytest -q -m gpu tests -p no:cacheprovider > "$OUT/pytest-gpu.txt" 2>&1
echo "every GPU test of the checkout: exit $? after ${SECONDS} s: $(tail -n 1 "$OUT/pytest-gpu.txt")" \
    | tee -a "$OUT/summary.txt"
