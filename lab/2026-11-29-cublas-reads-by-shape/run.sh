#!/usr/bin/env bash
# Does cuBLAS read less than its tile arithmetic at every shape, or only at 4096 cubed? Nsight Compute
# (--clock-control none), one launch each of cuBLAS (the first nvjet kernel) and step g (fp16/wgmma_grouped_tma_store)
# at several shapes: the SMs' L2 read sectors, DRAM bytes read, the time, and the launch (kernel name in the CSV,
# grid, block, cluster). Run from the repository root with .whl carried; $OUT/probe.tar.gz and $OUT/summary.txt.
set -uo pipefail
OUT=${OUT:-$PWD/out}
SCRATCH=${SCRATCH:-/tmp/reads-by-shape}
source lab/scratch-with-entries.sh /dev/null
ncu=$(command -v ncu || echo /usr/local/cuda/bin/ncu)
metrics=lts__t_sectors_srcunit_tex_op_read.sum,dram__bytes_read.sum,gpu__time_duration.sum
mkdir -p /tmp/probe
for shape in ${SHAPES:-4096x4096x1024 4096x4096x4096 4096x4096x8192 2048x2048x4096 8192x8192x4096}; do
    for kernel in fp16/cublas fp16/wgmma_grouped_tma_store; do
        if [[ $kernel == */cublas ]]; then pick=regex:^nvjet; else pick=regex:gemm_wgmma_specialized; fi
        label=${kernel//\//-}-$shape
        timeout 60 "$ncu" --clock-control none --target-processes all --kernel-name "$pick" --launch-count 1 \
            --section LaunchStats --metrics "$metrics" --csv --page details \
            python3 -m sgemm check -k "$kernel" --shape "$shape" > "/tmp/probe/$label.csv" 2> "/tmp/probe/$label.err"
        echo "$kernel $shape: exit $?" | tee -a "$OUT/summary.txt"
    done
done
tar -czf "$OUT/probe.tar.gz" -C /tmp probe
