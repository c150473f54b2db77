#!/usr/bin/env bash
# Do fewer instructions in step g's K loop buy speed at the power cap? fp16/wgmma_lean_loop (step g with the wgmma
# descriptors built once and offset, kDescriptorOffsets; entries.toml, appended to a scratch copy of the checkout):
# its GPU tests (FP64 at the edges of its shapes, alpha and beta), then tools/acceptance/sustained.py against step g
# and cuBLAS at SIZE in PRECISION (8192, fp16 by default; NVBench with L2 flushed, each case at least SECONDS_A_CASE
# of launches, then paired), PROCESSES processes, then (unless INSTRUCTIONS=0) Nsight Compute's instruction count of
# one launch at 4096 (--clock-control none). Run from the repository root with .whl carried; results under $OUT.
# About 4 minutes with the defaults.
set -uo pipefail
OUT=${OUT:-$PWD/out}
SCRATCH=${SCRATCH:-/tmp/lean-loop}
PROCESSES=${PROCESSES:-3}
SECONDS_A_CASE=${SECONDS_A_CASE:-5}
SIZE=${SIZE:-8192}
PRECISION=${PRECISION:-fp16}
SUSTAINED_TIMEOUT_S=${SUSTAINED_TIMEOUT_S:-300}
source lab/scratch-with-entries.sh lab/2026-11-29-hopper-lean-loop/entries.toml
SECONDS=0
timeout 90 python3 -m pytest -q -m gpu tests/measuring/test_verify.py -k wgmma_lean_loop -p no:cacheprovider -rs \
    > "$OUT/verify.txt" 2>&1
verified=$?
echo "GPU tests of the entries: exit $verified after ${SECONDS} s: $(tail -n 1 "$OUT/verify.txt")" \
    | tee -a "$OUT/summary.txt"
[ "$verified" -eq 0 ] || { echo "not timed: the checks did not pass" | tee -a "$OUT/summary.txt"; exit 1; }
SECONDS=0
timeout "$SUSTAINED_TIMEOUT_S" python3 -m tools.acceptance.sustained "$PRECISION/wgmma_lean_loop" \
    "$PRECISION/wgmma_grouped_tma_store" --size "$SIZE" --processes "$PROCESSES" --seconds "$SECONDS_A_CASE" \
    --json "$OUT/sustained-$PRECISION-$SIZE.json" > "$OUT/sustained-$PRECISION-$SIZE.txt" 2>&1
echo "sustained $PRECISION $SIZE: exit $? after ${SECONDS} s" | tee -a "$OUT/summary.txt"
tail -n 12 "$OUT/sustained-$PRECISION-$SIZE.txt" | tee -a "$OUT/summary.txt"
[ "${INSTRUCTIONS:-1}" = 1 ] || exit 0  # INSTRUCTIONS=0 skips the count
for kernel in fp16/wgmma_lean_loop fp16/wgmma_grouped_tma_store; do
    timeout 40 ncu --clock-control none --target-processes all --kernel-name regex:gemm_wgmma_specialized \
        --launch-count 1 --metrics smsp__inst_executed.sum,gpu__time_duration.sum,sm__cycles_active.avg --csv \
        python3 -m sgemm check -k "$kernel" --shape 4096x4096x4096 > "/tmp/ncu.csv" 2> /dev/null
    echo "$kernel 4096: $(grep -E 'inst_executed|gpu__time_duration|cycles_active' /tmp/ncu.csv \
        | awk -F'","' '{printf "%s %s %s; ", $(NF-2), $(NF-1), $NF}')" | tee -a "$OUT/summary.txt"
done
