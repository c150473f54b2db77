#!/usr/bin/env bash
# The ninth device call, on a host of two GPUs (only H200 kinds were lent this session):
#   cards 0 and 1   one commit's history sharded over both (lab/2026-11-28-history-sharding/run.sh 2): its wall
#                   time and the estimate's error at every line after e8b0470; the one-GPU run is the next call's;
#   then card 0     Nsight Compute on the ping-pong step, step g and the FP16 mma.sync step
#                   (lab/2026-11-28-hopper-pingpong/ncu.sh);
#   and card 1      the paired timer's A/A spread with 16-second rounds, six processes
#                   (`tools.acceptance.timer_bias --seconds 16`): how much of the processes' spread is sampling.
# Carried: .whl, .bundle/main.bundle, .npm-cache. Each job's results come back as $OUT/<job>.tar.gz.
set -uo pipefail
OUT=${OUT:-$PWD/out}
mkdir -p "$OUT"
ls .whl/*.whl | grep -v -e numpy- -e nvidia_ml_py- | xargs python3 -m pip install -q --no-index --no-deps \
    --no-compile --target /tmp/site 2>/dev/null
nvidia-smi --query-gpu=index,name,driver_version,clocks.sm,power.draw,power.limit,temperature.gpu --format=csv \
    > "$OUT/cards.txt"
export PYTHONUNBUFFERED=1
jobs=/tmp/jobs
mkdir -p $jobs/history $jobs/ncu $jobs/bias
OUT=$jobs/history HISTORY_TIMEOUT_S=330 timeout 360 bash lab/2026-11-28-history-sharding/run.sh 2 \
    > $jobs/history/run.log 2>&1
(
    CUDA_VISIBLE_DEVICES=0 OUT=$jobs/ncu timeout 170 bash lab/2026-11-28-hopper-pingpong/ncu.sh > $jobs/ncu/run.log 2>&1
) &
(
    export CUDA_VISIBLE_DEVICES=1 PYTHONPATH=/tmp/site
    site=$(python3 -c 'import sysconfig; print(sysconfig.get_paths()["purelib"])')
    SGEMM_CUDA_SITE="$site:/tmp/site" timeout 190 python3 -m tools.acceptance.timer_bias --processes 6 \
        --case fp32/warptile:4096 --seconds 16 --out $jobs/bias/verdicts.json > $jobs/bias/bias.log 2>&1
    echo "exit $?" >> $jobs/bias/bias.log
) &
wait
for job in history ncu bias; do
    tar -czf "$OUT/$job.tar.gz" -C $jobs "$job"
done
echo "== history"; tail -n 30 $jobs/history/summary.txt; tail -n 3 $jobs/history/run.log
echo "== ncu"; tail -n 40 $jobs/ncu/summary.txt; tail -n 3 $jobs/ncu/run.log
echo "== bias"; cat $jobs/bias/bias.log
