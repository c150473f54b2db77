#!/usr/bin/env bash
# The tenth device call, on a host of two H200 (only H200 kinds were lent this session):
#   card 0   one commit's history on one GPU (lab/2026-11-28-history-sharding/run.sh 1), main at the commit call 9
#            sharded over two; then the two runs compared (`run.sh compare 1 2`, call 9's results carried in .hist/);
#   card 1   an A/A gate of the 14 Hopper cases and the two cuBLAS controls at 8192, timing forced
#            (lab/2026-11-28-gate-scale-on-the-gpu/run.sh aa, CARD=1). The history's card is its own; the two jobs
#            share the host's 32 cores, which the history's wall time is stated beside.
# Carried: .whl, .bundle/main.bundle, .npm-cache, .hist. Each job's results come back as $OUT/<job>.tar.gz.
set -uo pipefail
OUT=${OUT:-$PWD/out}
mkdir -p "$OUT"
ls .whl/*.whl | grep -v -e numpy- -e nvidia_ml_py- | xargs python3 -m pip install -q --no-index --no-deps \
    --no-compile --target /tmp/site 2>/dev/null
nvidia-smi --query-gpu=index,name,driver_version,clocks.sm,power.draw,power.limit,temperature.gpu --format=csv \
    > "$OUT/cards.txt"
export PYTHONUNBUFFERED=1
jobs=/tmp/jobs
mkdir -p $jobs/history $jobs/aa
(
    export CUDA_VISIBLE_DEVICES=0
    OUT=$jobs/history HISTORY_TIMEOUT_S=480 timeout 510 bash lab/2026-11-28-history-sharding/run.sh 1 \
        > $jobs/history/run.log 2>&1
    OUT=$jobs/history timeout 40 bash lab/2026-11-28-history-sharding/run.sh compare 1 2 > $jobs/history/compare.log 2>&1
) &
(
    CARD=1 AA_LIMIT_S=470 OUT=$jobs/aa timeout 530 bash lab/2026-11-28-gate-scale-on-the-gpu/run.sh aa \
        > $jobs/aa/run.log 2>&1
) &
wait
for job in history aa; do
    tar -czf "$OUT/$job.tar.gz" -C $jobs "$job"
done
echo "== history"; tail -n 12 $jobs/history/summary.txt; tail -n 3 $jobs/history/run.log
echo "== aa"; tail -n 8 $jobs/aa/summary.txt; tail -n 3 $jobs/aa/run.log
