#!/usr/bin/env bash
# The eleventh device call, on a host of two H200 (only H200 kinds were lent this session): two A/A gates of the 14
# Hopper cases and the two cuBLAS controls at 8192, timing forced, at once, one a card
# (lab/2026-11-28-gate-scale-on-the-gpu/run.sh aa, CARD=0 and CARD=1), then the same gate over both cards with
# --gpus all (run.sh aa-all, CARDS=0,1). With call 10's gate: four A/A gates, 64 cases.
# Carried: .whl, .bundle/main.bundle. Each job's results come back as $OUT/<job>.tar.gz.
set -uo pipefail
OUT=${OUT:-$PWD/out}
mkdir -p "$OUT"
ls .whl/*.whl | grep -v -e numpy- -e nvidia_ml_py- | xargs python3 -m pip install -q --no-index --no-deps \
    --no-compile --target /tmp/site 2>/dev/null
nvidia-smi --query-gpu=index,name,driver_version,clocks.sm,power.draw,power.limit,temperature.gpu --format=csv \
    > "$OUT/cards.txt"
export PYTHONUNBUFFERED=1
jobs=/tmp/jobs
mkdir -p $jobs/aa0 $jobs/aa1 $jobs/aa-all
for card in 0 1; do
    CARD=$card AA_LIMIT_S=200 OUT=$jobs/aa$card timeout 240 bash lab/2026-11-28-gate-scale-on-the-gpu/run.sh aa \
        > $jobs/aa$card/run.log 2>&1 &
done
wait
CARDS=0,1 AA_LIMIT_S=160 OUT=$jobs/aa-all timeout 190 bash lab/2026-11-28-gate-scale-on-the-gpu/run.sh aa-all \
    > $jobs/aa-all/run.log 2>&1
for job in aa0 aa1 aa-all; do
    tar -czf "$OUT/$job.tar.gz" -C $jobs "$job"
done
for job in aa0 aa1 aa-all; do
    echo "== $job"; grep -h ' gate ' $jobs/$job/summary.txt | sed 's/ (cards.*): exit/: exit/'
done
for report in /tmp/keep-*/*.md; do echo "== $report"; grep -h -e '^## GEMM gate' -e '^- Base' "$report"; done
