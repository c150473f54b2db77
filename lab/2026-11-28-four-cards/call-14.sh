#!/usr/bin/env bash
# The fourteenth device call, on a host of two H200: the H200's paired noise file completed at 8192 (an A/A gate of
# the Hopper ladder and its controls, 6 rounds, over both cards: run.sh learn-8192, with call 13's rounds at 4096),
# then two A/A gates of the Hopper ladder at 8192 judged with that file, timing forced, at once, one a card
# (run.sh aa, NOISE=the file): gates other than the ones it was learned from. Last, every GPU test on card 0.
# Carried: .whl, .bundle/main.bundle. Each job's results come back as $OUT/<job>.tar.gz.
set -uo pipefail
OUT=${OUT:-$PWD/out}
mkdir -p "$OUT"
src=$PWD
ls .whl/*.whl | grep -v -e numpy- -e nvidia_ml_py- | xargs python3 -m pip install -q --no-index --no-deps \
    --no-compile --target /tmp/site 2>/dev/null
nvidia-smi --query-gpu=index,name,driver_version,clocks.sm,power.draw,power.limit,temperature.gpu --format=csv \
    > "$OUT/cards.txt"
export PYTHONUNBUFFERED=1
jobs=/tmp/jobs
mkdir -p $jobs/learn $jobs/aa0 $jobs/aa1 $jobs/pytest
CARDS=0,1 MACHINE=nvidia-h200 LEARN_LIMIT_S=190 OUT=$jobs/learn \
    LEARNED_FROM=$src/lab/2026-11-28-four-cards/call-13/learn/phase/rounds-learn-4096 timeout 230 \
    bash lab/2026-11-28-gate-scale-on-the-gpu/run.sh learn-8192 > $jobs/learn/run.log 2>&1
noise=$jobs/learn/noise-nvidia-h200.json
cp $noise "$OUT/"
for card in 0 1; do
    CARD=$card AA_LIMIT_S=170 NOISE=$noise OUT=$jobs/aa$card timeout 200 \
        bash lab/2026-11-28-gate-scale-on-the-gpu/run.sh aa > $jobs/aa$card/run.log 2>&1 &
done
wait
( export PYTHONPATH=/tmp/site CUDA_VISIBLE_DEVICES=0
  site=$(python3 -c 'import sysconfig; print(sysconfig.get_paths()["purelib"])')
  SGEMM_CUDA_SITE="$site:/tmp/site" timeout 130 python3 -m pytest -q -m gpu tests --durations=5 \
      -p no:cacheprovider > $jobs/pytest/pytest-gpu.txt 2>&1
  echo "exit $?" >> $jobs/pytest/pytest-gpu.txt )
for job in learn aa0 aa1 pytest; do
    tar -czf "$OUT/$job.tar.gz" -C $jobs "$job"
done
for job in learn aa0 aa1; do
    echo "== $job"; grep -h -e ' gate ' -e 'noise:' $jobs/$job/summary.txt | sed 's/ (cards.*): exit/: exit/'
done
for report in /tmp/keep-aa-*/*.md; do echo "== $report"; grep -h -e '^## GEMM gate' -e '^- Base' -e 'SAME\|NOT POWERED\|REGRESSION\|IMPROVEMENT\|AMBIGUOUS' "$report" | head -24; done
echo "== pytest"; tail -n 4 $jobs/pytest/pytest-gpu.txt
