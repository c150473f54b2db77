#!/usr/bin/env bash
# The stream-K step and step g against cuBLAS, sustained at the power cap over five processes
# (tools/acceptance/sustained.py: NVBench with at least 10 s of launches a case, then paired after 10 s of warm-up,
# L2 flushed), one run a CARD:PRECISION[:SIZE] argument, all at once (default "0:fp16 1:bf16"; SIZE defaults to
# $SIZE, else 8192), each kernel against cuBLAS on its own card: on a host of four, "0:fp16:8192 1:bf16:8192
# 2:fp16:4096 3:bf16:4096" is the whole of the issue's table. The entries (entries.toml) are appended to a scratch
# copy of the checkout ($SCRATCH). Run from the repository root with .whl carried; results under $OUT. About 7
# minutes.
set -uo pipefail
OUT=${OUT:-$PWD/out}
SCRATCH=${SCRATCH:-/tmp/stream-k}
source lab/scratch-with-entries.sh lab/2026-11-28-hopper-stream-k/entries.toml
pids=()
[ $# -gt 0 ] || set -- 0:fp16 1:bf16
for run in "$@"; do
    IFS=: read -r card precision size <<< "$run"
    size=${size:-${SIZE:-8192}}
    timeout 580 python3 -m tools.acceptance.sustained "$precision/wgmma_stream_k" \
        "$precision/wgmma_grouped_tma_store" --size "$size" --processes 5 --seconds 10 --device "$card" \
        --json "$OUT/sustained-$precision-$size.json" > "$OUT/sustained-$precision-$size.txt" 2>&1 &
    pids+=($!)
done
for pid in "${pids[@]}"; do wait "$pid"; echo "process $pid: exit $?" | tee -a "$OUT/summary.txt"; done
cat "$OUT"/sustained-*.txt | tee -a "$OUT/summary.txt"
