#!/usr/bin/env bash
# On a host of four H200: the counterbalanced timer's bias, as issue 31 asks it (20 processes a case, L2 flushed, a
# Hopper case at 8192 and an FP32 case at 4096), one process a card at once. The FP32 case's blocks vary 1.2-1.6%
# a pair on this GPU (lab/2026-11-28-gate-scale-on-the-gpu, section 6): its processes run 50 s, which the record
# estimated an interval of ±0.02% needs; the Hopper case's 20 s, as call 12 ran it.
# Carried: .whl. Results: $OUT/bias.tar.gz.
jobs=/tmp/jobs29
source lab/2026-11-28-four-cards/prologue.sh
mkdir -p $jobs/bias
export PYTHONPATH=/tmp/site:$src
timeout 340 python3 -m tools.acceptance.timer_bias --processes 20 --case fp32/warptile:4096 --seconds 50 \
    --gpus all --out $jobs/bias/bias-fp32-warptile-4096.json > $jobs/bias/bias-fp32.log 2>&1
echo "exit $?" >> $jobs/bias/bias-fp32.log
timeout 150 python3 -m tools.acceptance.timer_bias --processes 20 --case fp16/wgmma_grouped_tma_store:8192 \
    --seconds 20 --gpus all --out $jobs/bias/bias-hopper-8192.json > $jobs/bias/bias-hopper.log 2>&1
echo "exit $?" >> $jobs/bias/bias-hopper.log
pack bias
for log in $jobs/bias/*.log; do echo "== $log"; tail -n 4 $log; done
