#!/usr/bin/env bash
# Two tools' first runs on a GPU: tools/acceptance/ladder_counters.py (Nsight Compute, --clock-control none, one
# launch a step of the Hopper ladder at 4096 in PRECISION) into $OUT/counters.tar.gz, for `sgemm report --counters`;
# then tools/acceptance/sustained.py with cuBLAS and every kernel paired in one session a process: the Hopper
# ladder's two best steps against cuBLAS at SIZE, PROCESSES processes of SECONDS_A_CASE a case. Run from the
# repository root with .whl carried; results under $OUT. About 8 minutes with the defaults; COUNTERS=0 skips the
# profiles.
set -uo pipefail
OUT=${OUT:-$PWD/out}
SCRATCH=${SCRATCH:-/tmp/one-session}
PROCESSES=${PROCESSES:-5}
SECONDS_A_CASE=${SECONDS_A_CASE:-10}
SIZE=${SIZE:-4096}
PRECISION=${PRECISION:-fp16}
source lab/scratch-with-entries.sh /dev/null
SECONDS=0
[ "${COUNTERS:-1}" = 0 ] || {
timeout 170 python3 -m tools.acceptance.ladder_counters /tmp/counters --seed hopper --size 4096 \
    --precision "$PRECISION" > "$OUT/counters.txt" 2>&1
echo "ladder_counters: exit $? after ${SECONDS} s, $(ls /tmp/counters | wc -l) files" | tee -a "$OUT/summary.txt"
tar -czf "$OUT/counters.tar.gz" -C /tmp counters
}
SECONDS=0
timeout 390 python3 -m tools.acceptance.sustained "$PRECISION/wgmma_lean_loop" "$PRECISION/wgmma_grouped_tma_store" \
    --size "$SIZE" --processes "$PROCESSES" --seconds "$SECONDS_A_CASE" \
    --json "$OUT/sustained-$PRECISION-$SIZE.json" > "$OUT/sustained-$PRECISION-$SIZE.txt" 2>&1
echo "sustained $PRECISION $SIZE: exit $? after ${SECONDS} s" | tee -a "$OUT/summary.txt"
tail -n 14 "$OUT/sustained-$PRECISION-$SIZE.txt" | tee -a "$OUT/summary.txt"
