#!/usr/bin/env bash
# Where do step g's L2 bytes beyond its tile arithmetic come from? Nsight Compute (--clock-control none), one launch
# each of cuBLAS and step g (fp16/wgmma_grouped_tma_store) at SHAPE (4096 cubed by default): L2 sectors split by the
# unit that sent them (the SMs' TEX/TMA path, the fabric between the two L2 partitions, ...), reads and writes, hits
# and misses, beside the total. The split counters are those this ncu lists for the GPU (ncu --query-metrics).
# Run from the repository root with .whl carried; results under $OUT. About a minute on a warm box.
set -uo pipefail
OUT=${OUT:-$PWD/out}
SCRATCH=${SCRATCH:-/tmp/l2-sources}
source lab/scratch-with-entries.sh /dev/null  # no entries: the catalogue as it is
ncu --query-metrics --chip gh100 > "$OUT/query-metrics.txt" 2>&1
# Every L2 sector counter split by source unit or node, plus the totals they should add up to.
metrics=$(grep -oE '^lts__t_(sectors|requests)_src(unit|node)_[a-z_]+' "$OUT/query-metrics.txt" | sort -u \
    | grep -vE '_(lookup|op_(atom|red))' | sed 's/$/.sum/' | paste -sd,)
metrics+=,lts__t_sectors.sum,lts__t_sectors_op_read.sum,lts__t_sectors_op_write.sum,lts__t_sectors_lookup_hit.sum
metrics+=,lts__t_sectors_lookup_miss.sum,lts__t_sectors_srcunit_tex_lookup_hit.sum
metrics+=,lts__t_sectors_srcunit_tex_lookup_miss.sum,dram__bytes_read.sum,dram__bytes_write.sum
metrics+=,gpu__time_duration.sum
echo "metrics: $metrics" >> "$OUT/summary.txt"
shape=${SHAPE:-4096x4096x4096}
for kernel in fp16/cublas fp16/wgmma_grouped_tma_store; do
    if [[ $kernel == */cublas ]]; then pick=(--kernel-name 'regex:^nvjet' --launch-count 1)
    else pick=(--kernel-name regex:gemm_wgmma_specialized --launch-count 1); fi
    label=${kernel//\//-}-${shape%%x*}
    SECONDS=0
    timeout 120 ncu --clock-control none --target-processes all "${pick[@]}" --metrics "$metrics" --csv \
        python3 -m sgemm check -k "$kernel" --shape "$shape" > "$OUT/ncu-$label.csv" 2> "$OUT/ncu-$label.log"
    echo "$kernel $shape: ncu exit $? after ${SECONDS} s" | tee -a "$OUT/summary.txt"
    grep '^"' "$OUT/ncu-$label.csv" | awk -F'","' 'NR > 1 {print $(NF-2), $(NF-1), $NF}' | tr -d '"' \
        | tee -a "$OUT/summary.txt"
done
