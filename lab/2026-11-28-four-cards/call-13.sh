#!/usr/bin/env bash
# The thirteenth device call, on a host of two H200 (the session of 12:06 UTC; only H200 kinds were lent): the GPU
# tests of the gate, its rounds and bisect on card 0 (the gate's looks and the paired session's measuring changed),
# then a paired noise file for the H200 learned from an A/A gate of every kernel at 4096 over both cards
# (lab/2026-11-28-gate-scale-on-the-gpu/run.sh learn-4096, MACHINE=nvidia-h200).
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
mkdir -p $jobs/pytest $jobs/learn
( export PYTHONPATH=/tmp/site CUDA_VISIBLE_DEVICES=0
  site=$(python3 -c 'import sysconfig; print(sysconfig.get_paths()["purelib"])')
  SGEMM_CUDA_SITE="$site:/tmp/site" timeout 100 python3 -m pytest -q -m gpu tests/gate tests/rounds tests/bisect \
      --durations=5 -p no:cacheprovider > $jobs/pytest/pytest-gpu.txt 2>&1
  echo "exit $?" >> $jobs/pytest/pytest-gpu.txt )
CARDS=0,1 MACHINE=nvidia-h200 LEARN_LIMIT_S=360 OUT=$jobs/learn timeout 420 \
    bash lab/2026-11-28-gate-scale-on-the-gpu/run.sh learn-4096 > $jobs/learn/run.log 2>&1
cp $jobs/learn/noise-nvidia-h200.json "$OUT/" 2>/dev/null
for job in pytest learn; do
    tar -czf "$OUT/$job.tar.gz" -C $jobs "$job"
done
echo "== pytest"; tail -n 12 $jobs/pytest/pytest-gpu.txt
echo "== learn"; grep -h -e ' gate ' -e 'noise:' $jobs/learn/summary.txt; tail -n 3 $jobs/learn/run.log
