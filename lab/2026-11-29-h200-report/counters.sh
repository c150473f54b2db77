#!/usr/bin/env bash
# Nsight Compute's reading (--clock-control none, one launch inside `sgemm check`) of every ladder step the H200
# report shows slower than the step above it, at its seed's sizes, into $OUT/counters.tar.gz for
# `sgemm report --counters`. Run from the repository root with .whl carried. About 5 minutes.
set -uo pipefail
OUT=${OUT:-$PWD/out}
SCRATCH=${SCRATCH:-/tmp/h200-report}
source lab/scratch-with-entries.sh /dev/null
profile() {  # SEED KERNEL...
    local seed=$1; shift
    SECONDS=0
    timeout 150 python3 -m tools.acceptance.ladder_counters /tmp/counters --seed "$seed" \
        $(printf -- '--kernel %s ' "$@") >> "$OUT/counters.txt" 2>&1
    echo "seed $seed: exit $? after ${SECONDS} s" | tee -a "$OUT/summary.txt"
}
profile 001 fp32/warptile fp16/mma_naive fp16/mma_unrolled
profile 002 fp32/naive_cols4 fp32/smem_tile_16_padded fp32/reg_tile_4x4_k32 fp32/reg_tile_4x4_k32_transposed_b
profile 003 fp32/naive_16 fp32/naive_8 fp32/smem_tile_16 fp32/smem_tile_8 fp32/smem_ilp8
profile 004 fp32/bounds_checked
profile cutlass fp32/async_warptile
profile ampere fp16/mma_wide fp16/mma_grouped
profile hopper fp16/wgmma_tma_wide fp16/wgmma_persistent fp16/wgmma_lean_loop fp16/wgmma_grouped_tma_store \
    bf16/wgmma_tma_wide bf16/wgmma_persistent bf16/wgmma_grouped_tma_store
echo "$(ls /tmp/counters | wc -l) readings" | tee -a "$OUT/summary.txt"
tar -czf "$OUT/counters.tar.gz" -C /tmp counters
