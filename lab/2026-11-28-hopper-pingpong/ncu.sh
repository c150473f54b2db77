#!/usr/bin/env bash
# Nsight Compute's reading of the ping-pong step beside step g at 8192 (FP16), and of the FP16 mma.sync ladder's
# best step at 4096: one launch each, profiled as `sgemm check` runs it (FP64 reference beside it), with the card's
# clocks left alone (--clock-control none). Throughput, memory traffic (L2 bytes, hit rate, DRAM bytes), the pipes
# and the warps' stalls: where the energy of a step that did not pay goes. Run from the repository root with .whl
# carried; results under $OUT. About a minute.
set -uo pipefail
OUT=${OUT:-$PWD/out}
mkdir -p "$OUT"
ls .whl/*.whl | grep -v -e numpy- -e nvidia_ml_py- | xargs python3 -m pip install -q --no-index --no-deps \
    --no-compile --target /tmp/site 2>/dev/null
export PYTHONPATH=/tmp/site PYTHONUNBUFFERED=1
site=$(python3 -c 'import sysconfig; print(sysconfig.get_paths()["purelib"])')
export SGEMM_CUDA_SITE="$site:/tmp/site"
echo "checkout: $(git rev-parse --short HEAD) $(git status --porcelain | wc -l) changed files" | tee -a "$OUT/summary.txt"
ncu --version | tail -n 1 | tee -a "$OUT/summary.txt"
profile() {  # kernel, shape, the NVRTC function's name
    local label=${1//\//-}-${2%%x*}
    SECONDS=0
    timeout 100 ncu --clock-control none --target-processes all --kernel-name "regex:$3" --launch-count 1 \
        --section SpeedOfLight --section MemoryWorkloadAnalysis --section ComputeWorkloadAnalysis \
        --section WarpStateStats --section LaunchStats --section Occupancy \
        --metrics lts__t_bytes.sum,dram__bytes.sum,lts__t_sector_hit_rate.pct,sm__cycles_elapsed.avg.per_second \
        --csv --page details python3 -m sgemm check -k "$1" --shape "$2" > "$OUT/ncu-$label.csv" 2> "$OUT/ncu-$label.log"
    echo "$1 $2: exit $? after ${SECONDS} s, $(grep -c . "$OUT/ncu-$label.csv") lines" | tee -a "$OUT/summary.txt"
}
profile fp16/wgmma_grouped_tma_store 8192x8192x8192 gemm_wgmma_specialized
profile fp16/wgmma_pingpong 8192x8192x8192 gemm_wgmma_specialized
profile fp16/mma_fragment_buffered 4096x4096x4096 gemm_mma_pipelined
for file in "$OUT"/ncu-*.csv; do
    echo "== $file"
    grep -E '"(Duration|SM Frequency|Compute \(SM\) Throughput|Memory Throughput|L2 Hit Rate|lts__t_bytes.sum|dram__bytes.sum|Registers Per Thread|Achieved Occupancy|Issue Slots Busy|Warp Cycles Per Issued Instruction)"' "$file" \
        | awk -F'","' '{print $(NF-2) " " $(NF-1) " " $NF}'
done | tee -a "$OUT/summary.txt"
