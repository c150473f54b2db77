#!/usr/bin/env bash
# One device call on a host of four H100s, one job a card, at once (the host's 64 cores shared):
#   card 0  every GPU test of main (the measuring code changed since they last ran), then the tile-order change gated
#           with default options (lab/2026-11-28-gate-scale-on-the-gpu/run.sh tile);
#   card 1  where the paired timer's idle time goes (lab/2026-11-28-paired-timer-idle/run.sh);
#   card 2  the job sandbox's GPU trial, a paired gate inside it and the busy-card refusal
#           (lab/2026-11-28-sandbox-gpu/run.sh trial paired busy);
#   card 3  one commit's history on one GPU (lab/2026-11-28-history-sharding/run.sh 1).
# Carried: .whl, .bundle/main.bundle, .deb (bubblewrap's package). Each job's results come back as $OUT/<job>.tar.gz.
set -uo pipefail
OUT=${OUT:-$PWD/out}
mkdir -p "$OUT"
ls .whl/*.whl | grep -v -e numpy- -e nvidia_ml_py- | xargs python3 -m pip install -q --no-index --no-deps \
    --no-compile --target /tmp/site 2>/dev/null
nvidia-smi --query-gpu=index,name,driver_version,clocks.sm,power.draw,power.limit,temperature.gpu --format=csv \
    > "$OUT/cards.txt"
export PYTHONUNBUFFERED=1
mkdir -p /tmp/jobs
(
    export CUDA_VISIBLE_DEVICES=0
    SECONDS=0
    PYTHONPATH=/tmp/site:$PWD timeout 200 python3 -m pytest -q -m gpu tests -p no:cacheprovider \
        > /tmp/jobs/pytest-gpu.txt 2>&1
    echo "GPU tests: exit $? after ${SECONDS} s: $(tail -n 1 /tmp/jobs/pytest-gpu.txt)" > /tmp/jobs/tests-summary.txt
    CARD=0 TILE_LIMIT_S=300 OUT=/tmp/jobs/tile timeout 340 bash lab/2026-11-28-gate-scale-on-the-gpu/run.sh tile \
        > /tmp/jobs/tile.log 2>&1
    cp /tmp/jobs/pytest-gpu.txt /tmp/jobs/tests-summary.txt /tmp/jobs/tile.log /tmp/jobs/tile/ 2>/dev/null
) &
CUDA_VISIBLE_DEVICES=1 OUT=/tmp/jobs timeout 560 bash lab/2026-11-28-paired-timer-idle/run.sh > /tmp/jobs/idle.log 2>&1 &
CUDA_VISIBLE_DEVICES=2 OUT=/tmp/jobs/sandbox timeout 560 bash lab/2026-11-28-sandbox-gpu/run.sh trial paired busy \
    > /tmp/jobs/sandbox.log 2>&1 &
CUDA_VISIBLE_DEVICES=3 OUT=/tmp/jobs/sharding HISTORY_TIMEOUT_S=500 timeout 560 \
    bash lab/2026-11-28-history-sharding/run.sh 1 > /tmp/jobs/sharding.log 2>&1 &
wait
cp /tmp/jobs/idle.log /tmp/jobs/timer-idle/ 2>/dev/null
cp /tmp/jobs/sandbox.log /tmp/jobs/sandbox/ 2>/dev/null
cp /tmp/jobs/sharding.log /tmp/jobs/sharding/ 2>/dev/null
for job in tile timer-idle sandbox sharding; do
    [ -d /tmp/jobs/$job ] && tar -czf "$OUT/$job.tar.gz" -C /tmp/jobs "$job"
done
cat /tmp/jobs/tests-summary.txt /tmp/jobs/tile/summary.txt /tmp/jobs/sandbox/summary.txt \
    /tmp/jobs/sharding/summary.txt 2>/dev/null | tail -n 60
head -c 3000 /tmp/jobs/timer-idle/probe.jsonl 2>/dev/null
