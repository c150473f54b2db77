#!/usr/bin/env bash
# The one step the report at ecf65b3 shows slower than the step above it with no reading in call 4's folder
# (bf16/wgmma_lean_loop), and cuBLAS's BF16 launch, read as counters.sh reads the others; $OUT/counters-bf16.tar.gz.
set -uo pipefail
OUT=${OUT:-$PWD/out}
SCRATCH=/tmp/bf16-lean source lab/scratch-with-entries.sh /dev/null
timeout 150 python3 -m tools.acceptance.ladder_counters /tmp/counters --seed hopper --kernel bf16/wgmma_lean_loop \
    >> "$OUT/counters.txt" 2>&1
echo "bf16/wgmma_lean_loop: exit $?" | tee -a "$OUT/summary.txt"
ncu=$(command -v ncu || echo /usr/local/cuda/bin/ncu)
for size in 4096 8192; do
    timeout 120 "$ncu" --clock-control none --target-processes all --kernel-name regex:nvjet --launch-count 1 \
        --section SpeedOfLight --section ComputeWorkloadAnalysis --section MemoryWorkloadAnalysis \
        --section WarpStateStats --section LaunchStats --csv --page details --print-details all \
        python3 -m sgemm check -k bf16/cublas --shape ${size}x${size}x${size} > /tmp/counters/bf16-cublas-$size.csv
    echo "bf16/cublas at $size: exit $?" | tee -a "$OUT/summary.txt"
done
tar -czf "$OUT/counters-bf16.tar.gz" -C /tmp counters
