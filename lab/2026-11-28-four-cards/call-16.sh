#!/usr/bin/env bash
# The sixteenth device call, on a host of two H200: the best step of the FP16 mma.sync ladder
# (fp16/mma_fragment_buffered) and of the FP32 ladder (fp32/async_thread_tile_16x8) each slowed by about 0.6%,
# gated with default options at 4096 and 8192 on card 0, and each slowdown read by the independent cold-L2 timer on
# card 1 (lab/2026-11-28-gate-scale-on-the-gpu/run.sh ladders).
# Carried: .whl, .bundle/main.bundle. The phase's results come back as $OUT/ladders.tar.gz.
set -uo pipefail
OUT=${OUT:-$PWD/out}
mkdir -p "$OUT"
nvidia-smi --query-gpu=index,name,driver_version,clocks.sm,power.draw,power.limit,temperature.gpu --format=csv \
    > "$OUT/cards.txt"
jobs=/tmp/jobs16
mkdir -p $jobs/ladders
CARD=0 EVENTS_CARD=1 LADDERS_LIMIT_S=330 OUT=$jobs/ladders timeout 420 \
    bash lab/2026-11-28-gate-scale-on-the-gpu/run.sh ladders > $jobs/ladders/run.log 2>&1
tar -czf "$OUT/ladders.tar.gz" -C $jobs ladders
grep -h -e ' gate ' -e 'events ' $jobs/ladders/summary.txt | cut -c1-400
for report in /tmp/keep-ladders/*.md; do
    grep -h -e '^## GEMM gate' -e '^- Base' -e 'REGRESSION\|NOT POWERED\|AMBIGUOUS\|IMPROVEMENT' "$report" | cut -c1-400
done
tail -n 5 $jobs/ladders/run.log
