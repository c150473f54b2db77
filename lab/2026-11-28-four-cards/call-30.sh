#!/usr/bin/env bash
# On a host of four H200, right after call 29: is call 29's FP32 mean (+0.016%, its interval holding 0 by 0.0006
# point) a bias of the timer toward the head, or sampling? 16 more processes of the same case and length, to be read
# with call 29's 20 (the device time left allowed 16).
# Carried: .whl. Results: $OUT/bias.tar.gz.
jobs=/tmp/jobs30
source lab/2026-11-28-four-cards/prologue.sh
mkdir -p $jobs/bias
export PYTHONPATH=/tmp/site:$src
timeout 300 python3 -m tools.acceptance.timer_bias --processes 16 --case fp32/warptile:4096 --seconds 50 \
    --gpus all --out $jobs/bias/bias-fp32-warptile-4096.json > $jobs/bias/bias-fp32.log 2>&1
echo "exit $?" >> $jobs/bias/bias-fp32.log
pack bias
tail -n 2 $jobs/bias/bias-fp32.log | cut -c1-400
