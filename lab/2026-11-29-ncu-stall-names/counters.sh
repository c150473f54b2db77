#!/usr/bin/env bash
# The H200 ladder report's Nsight Compute readings again, now with the tensor pipe and the stall reasons
# (ladder_counters with --print-details all and the WarpStateStats section): the steps of
# lab/2026-11-29-h200-report/counters.sh, and cuBLAS's own launch at 4096 and 8192 read the same way for comparison
# (fp16-cublas-SIZE.csv, the first nvjet kernel). Run from the repository root with .whl carried; $OUT/counters.tar.gz.
set -uo pipefail
OUT=${OUT:-$PWD/out}
SCRATCH=${SCRATCH:-/tmp/h200-report} OUT=$OUT bash lab/2026-11-29-h200-report/counters.sh
export SGEMM_CUDA_SITE="$(python3 -c 'import sysconfig; print(sysconfig.get_paths()["purelib"])'):/tmp/site"
export PYTHONPATH=/tmp/site
ncu=$(command -v ncu || echo /usr/local/cuda/bin/ncu)
for size in 4096 8192; do
    timeout 120 "$ncu" --clock-control none --target-processes all --kernel-name regex:nvjet --launch-count 1 \
        --section SpeedOfLight --section ComputeWorkloadAnalysis --section MemoryWorkloadAnalysis \
        --section WarpStateStats --section LaunchStats --csv --page details --print-details all \
        python3 -m sgemm check -k fp16/cublas --shape ${size}x${size}x${size} > /tmp/counters/fp16-cublas-$size.csv
    echo "fp16/cublas at $size: exit $?" | tee -a "$OUT/summary.txt"
done
tar -czf "$OUT/counters.tar.gz" -C /tmp counters
