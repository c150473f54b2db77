#!/usr/bin/env bash
# Where the paired timer's idle GPU time goes, on one card (CUDA_VISIBLE_DEVICES, else card 0): probe.py's A/A round
# of a Hopper case at 8192 and an FP32 case at 4096, as a gate's round runs it and changed one thing at a time (L2
# warm, four blocks queued ahead, 50 ms blocks, garbage collection off), then tools.acceptance.timer_bias's 20
# processes a case (PROBES=short: the first two probes a case only). Run from the repository root with .whl carried;
# results under $OUT/timer-idle/.
set -uo pipefail
OUT=${OUT:-$PWD/out}/timer-idle
mkdir -p "$OUT"
src=$PWD
[ -d /tmp/site/asv ] || ls .whl/*.whl | grep -v -e numpy- -e nvidia_ml_py- \
    | xargs python3 -m pip install -q --no-index --no-deps --no-compile --target /tmp/site 2>/dev/null
export PYTHONPATH=/tmp/site:$src PYTHONUNBUFFERED=1
probe() { timeout 60 python3 lab/2026-11-28-paired-timer-idle/probe.py "$@" >> "$OUT/probe.jsonl" 2>> "$OUT/probe.err"; }
for case in "fp16/wgmma_grouped_tma_store 8192" "fp32/warptile 4096"; do
    probe $case
    probe $case --warm
    [ "${PROBES:-all}" = short ] && continue  # the round as a gate runs it, L2 flushed and warm: nothing else
    probe $case --ahead 4
    probe $case --block-s 0.05
    probe $case --no-gc
    probe $case
done
for case in fp16/wgmma_grouped_tma_store:8192 fp32/warptile:4096; do
    timeout 200 python3 -m tools.acceptance.timer_bias --processes 20 --case $case \
        > "$OUT/bias-${case//[\/:]/-}.log" 2>&1
done
