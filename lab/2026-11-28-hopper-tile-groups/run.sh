#!/usr/bin/env bash
# Does the tile order's group size move the DRAM bytes of step g at 8192, and its speed alone at the power cap? Step g
# (groups of 8 cluster rows) beside groups of 4 and 16 (entries.toml, appended to a scratch copy of the checkout),
# FP16: `sgemm check` at 8192 and at 4352x4608x1088 (a partial group), `sgemm bench` at 8192 (NVBench, L2 flushed,
# one process), then Nsight Compute's DRAM and L2 bytes of one launch each (--clock-control none). Run from the
# repository root with .whl carried; results under $OUT. About 2 minutes.
set -uo pipefail
OUT=${OUT:-$PWD/out}
SCRATCH=${SCRATCH:-/tmp/tile-groups}
source lab/scratch-with-entries.sh lab/2026-11-28-hopper-tile-groups/entries.toml
kernels=(fp16/wgmma_grouped_tma_store fp16/wgmma_group_rows_4 fp16/wgmma_group_rows_16)
SECONDS=0
timeout 60 python3 -m sgemm check -k "${kernels[1]}" -k "${kernels[2]}" --shape 8192x8192x8192 \
    --shape 4352x4608x1088 --beta 0.5 > "$OUT/check.txt" 2>&1
checked=$?
echo "check: exit $checked after ${SECONDS} s: $(tail -n 1 "$OUT/check.txt")" | tee -a "$OUT/summary.txt"
[ "$checked" -eq 0 ] || exit 1
SECONDS=0
timeout 60 python3 -m sgemm bench -k fp16/cublas -k "${kernels[0]}" -k "${kernels[1]}" -k "${kernels[2]}" \
    --size 8192 > "$OUT/bench.txt" 2> "$OUT/bench.log"
echo "bench: exit $? after ${SECONDS} s" | tee -a "$OUT/summary.txt"
grep -A6 '^kernel ' "$OUT/bench.txt" | tee -a "$OUT/summary.txt"
for kernel in "${kernels[@]}"; do
    label=${kernel//\//-}
    timeout 40 ncu --clock-control none --target-processes all --kernel-name regex:gemm_wgmma_specialized \
        --launch-count 1 --metrics dram__bytes.sum,lts__t_bytes.sum,gpu__time_duration.sum,sm__cycles_elapsed.avg \
        --csv python3 -m sgemm check -k "$kernel" --shape 8192x8192x8192 > "$OUT/ncu-$label.csv" 2> /dev/null
    echo "$kernel: $(grep -E 'dram__bytes|lts__t_bytes|gpu__time_duration|sm__cycles_elapsed' "$OUT/ncu-$label.csv" \
        | awk -F'","' '{printf "%s %s %s; ", $(NF-2), $(NF-1), $NF}')" | tee -a "$OUT/summary.txt"
done
