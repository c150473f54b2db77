#!/usr/bin/env bash
# The Hopper ladder's 2x2-cluster step, fp16/ and bf16/wgmma_cluster_2x2 (gemm_wgmma_specialized<T, 4, 2,
# kGroupedOrder | kTmaStore, 2>), on one GPU: its GPU tests first (FP64 at the edges of its shapes, alpha and beta; a
# kernel that is wrong is never timed), how many of its clusters the GPU holds at once beside step g's, then `sgemm
# bench --versus-baseline` beside step g and cuBLAS at 4096 and 8192, then Nsight Compute's L2 and DRAM bytes of one
# launch of each at 8192 (FP16, --clock-control none). The entries (entries.toml) are appended to a scratch copy of
# the checkout ($SCRATCH), not to its catalogue. Run from the repository root with .whl carried; results under $OUT.
# About 4 minutes.
set -uo pipefail
OUT=${OUT:-$PWD/out}
SCRATCH=${SCRATCH:-/tmp/cluster-2x2}
source lab/scratch-with-entries.sh lab/2026-11-28-hopper-cluster-2x2/entries.toml
SECONDS=0
# A hang (a multicast that never lands, a barrier phase never completing) is the likeliest way for this step to be
# wrong: the timeout ends it.
timeout 150 python3 -m pytest -q -m gpu tests/measuring/test_verify.py tests/measuring/test_launch.py \
    -k "wgmma_cluster_2x2 or persistent_grid" -p no:cacheprovider -rs > "$OUT/verify.txt" 2>&1
verified=$?
echo "GPU tests of the entries: exit $verified after ${SECONDS} s: $(tail -n 1 "$OUT/verify.txt")" \
    | tee -a "$OUT/summary.txt"
if [ "$verified" -ne 0 ]; then
    echo "not timed: the GPU tests did not pass" | tee -a "$OUT/summary.txt"
    exit 1
fi
python3 - <<'PY' 2>&1 | tee -a "$OUT/summary.txt"
from sgemm.catalogue import get_kernel
from sgemm.measuring import launch
from sgemm.measuring.build import compiled
from sgemm.measuring.resources import launch_geometry
for name in ("fp16/wgmma_grouped_tma_store", "fp16/wgmma_cluster_2x2"):
    kernel = get_kernel(name)
    geometry = launch_geometry(kernel)
    blocks = launch.resident_blocks(kernel, geometry, launch._function(compiled(kernel), kernel, geometry))
    print(f"{name}: clusters of {list(geometry.cluster)}: {blocks} blocks at once; grid at 8192: "
          f"{kernel.grid(geometry, 8192, 8192, blocks)}")
PY
SECONDS=0
timeout 200 python3 -m sgemm bench -k fp16/cublas -k bf16/cublas -k fp16/wgmma_grouped_tma_store \
    -k bf16/wgmma_grouped_tma_store -k fp16/wgmma_cluster_2x2 -k bf16/wgmma_cluster_2x2 \
    --size 4096 --size 8192 --versus-baseline --json "$OUT/bench.json" > "$OUT/bench.txt" 2> "$OUT/bench.log"
echo "bench: exit $? after ${SECONDS} s" | tee -a "$OUT/summary.txt"
grep -A16 '^kernel ' "$OUT/bench.txt" | tee -a "$OUT/summary.txt"
profile() {  # kernel, shape
    local label=${1//\//-}-${2%%x*}
    SECONDS=0
    timeout 100 ncu --clock-control none --target-processes all --kernel-name "regex:gemm_wgmma_specialized" \
        --launch-count 1 --section SpeedOfLight --section MemoryWorkloadAnalysis --section LaunchStats \
        --metrics lts__t_bytes.sum,dram__bytes.sum,lts__t_sector_hit_rate.pct,sm__cycles_elapsed.avg.per_second \
        --csv --page details python3 -m sgemm check -k "$1" --shape "$2" > "$OUT/ncu-$label.csv" 2> "$OUT/ncu-$label.log"
    echo "$1 $2: exit $? after ${SECONDS} s, $(grep -c . "$OUT/ncu-$label.csv") lines" | tee -a "$OUT/summary.txt"
}
if command -v ncu > /dev/null; then
    profile fp16/wgmma_grouped_tma_store 8192x8192x8192
    profile fp16/wgmma_cluster_2x2 8192x8192x8192
    for file in "$OUT"/ncu-*.csv; do
        echo "== $file"
        grep -E '"(Duration|SM Frequency|Memory Throughput|L2 Hit Rate|lts__t_bytes.sum|dram__bytes.sum|Grid Size|Cluster Size)"' "$file" \
            | awk -F'","' '{print $(NF-2) " " $(NF-1) " " $NF}'
    done | tee -a "$OUT/summary.txt"
fi
