#!/usr/bin/env bash
# Where might step g's joules go at 8192? Nsight Compute's counters (--clock-control none) of one launch each of
# cuBLAS, step g (fp16/wgmma_grouped_tma_store) and the stream-K step (entries of lab/2026-11-28-hopper-stream-k,
# appended to a scratch copy), FP16 at 8192: its launch (grid, block, registers, shared memory), its instructions, its
# tensor-path operations, its shared-memory, L2 and DRAM traffic and its cycles, so that each can be set beside the
# others per GEMM. KERNELS (names) and SHAPE (MxNxK) choose others. Run from the repository root with .whl carried;
# results under $OUT. Under a minute on a warm box.
set -uo pipefail
OUT=${OUT:-$PWD/out}
SCRATCH=${SCRATCH:-/tmp/counters}
source lab/scratch-with-entries.sh lab/2026-11-28-hopper-stream-k/entries.toml
# Launch statistics, throughput and memory tables by section (names ncu knows on every architecture), then a few
# counters by name.
sections=(--section LaunchStats --section SpeedOfLight --section MemoryWorkloadAnalysis
          --section ComputeWorkloadAnalysis --section InstructionStats)
metrics=smsp__inst_executed.sum,l1tex__data_pipe_lsu_wavefronts_mem_shared.sum
metrics+=,sm__ops_path_tensor_src_fp16_dst_fp32.sum,lts__t_bytes.sum,dram__bytes.sum,sm__cycles_elapsed.avg
metrics+=,sm__cycles_active.avg,gpu__time_duration.sum
for kernel in ${KERNELS:-fp16/cublas fp16/wgmma_grouped_tma_store fp16/wgmma_stream_k}; do
    shape=${SHAPE:-8192x8192x8192}
    label=${kernel//\//-}-${shape%%x*}
    # cuBLAS 13's Hopper kernels are named nvjet_...; two launches, in case the FP64 reference's matches too.
    if [[ $kernel == */cublas ]]; then pick=(--kernel-name 'regex:^nvjet' --launch-count 2)
    else pick=(--kernel-name regex:gemm_wgmma_specialized --launch-count 1); fi
    SECONDS=0
    timeout 100 ncu --clock-control none --target-processes all "${pick[@]}" "${sections[@]}" --metrics "$metrics" \
        --csv --page details python3 -m sgemm check -k "$kernel" --shape "$shape" > "$OUT/ncu-$label.csv" \
        2> "/tmp/ncu-$label.log"
    status=$?
    if [ "$status" -ne 0 ]; then  # a counter this ncu does not know ends the whole run: the sections alone then
        timeout 100 ncu --clock-control none --target-processes all "${pick[@]}" "${sections[@]}" --csv --page details \
            python3 -m sgemm check -k "$kernel" --shape "$shape" > "$OUT/ncu-$label.csv" 2>> "/tmp/ncu-$label.log"
        status="$status, sections alone $?"
    fi
    echo "$kernel $shape: ncu exit $status after ${SECONDS} s, $(wc -l < "$OUT/ncu-$label.csv") lines;" \
        "$(grep -c "No kernels were profiled" "$OUT/ncu-$label.csv") without a kernel" | tee -a "$OUT/summary.txt"
done
python3 - "$OUT" <<'PY' | tee -a "$OUT/summary.txt"
import csv, glob, sys
wanted = ("launch__grid_size", "launch__block_size", "launch__registers_per_thread", "smsp__inst_executed.sum",
          "l1tex__data_pipe_lsu_wavefronts_mem_shared.sum", "sm__ops_path_tensor_src_fp16_dst_fp32.sum",
          "lts__t_bytes.sum", "dram__bytes.sum", "sm__cycles_elapsed.avg", "sm__cycles_active.avg",
          "gpu__time_duration.sum")
for path in sorted(glob.glob(f"{sys.argv[1]}/ncu-*.csv")):
    rows = [row for row in csv.reader(line for line in open(path) if line.startswith('"'))]
    if not rows:
        print(path, "no rows"); continue
    head = rows[0]
    at = {name: head.index(name) for name in ("ID", "Kernel Name", "Metric Name", "Metric Unit", "Metric Value")
          if name in head}
    for row in rows[1:]:
        if row[at["Metric Name"]] in wanted or row[at["Metric Name"]].startswith(("Grid Size", "Block Size",
                                                                                  "Registers", "Shared Memory")):
            print(path.rsplit("/", 1)[1], row[at["ID"]], row[at["Kernel Name"]][:60], row[at["Metric Name"]],
                  row[at["Metric Unit"]], row[at["Metric Value"]])
PY
