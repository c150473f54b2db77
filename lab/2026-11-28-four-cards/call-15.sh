#!/usr/bin/env bash
# The fifteenth device call, on a host of two H200: an A/A gate of every kernel at 4096, timing forced, over both
# cards, judged with the shipped noise/nvidia-h200.json (run.sh aa-4096, learned from call 13's gate, not this one);
# then the timer's bias on the FP32 case (fp32/warptile at 4096, L2 flushed, 20 processes of 16 s, one a card at
# once); last the energy test in its new form and the gate's GPU tests on card 0.
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
jobs=/tmp/jobs15
mkdir -p $jobs/aa4096 $jobs/bias $jobs/pytest
CARDS=0,1 AA_LIMIT_S=240 NOISE=$src/noise/nvidia-h200.json OUT=$jobs/aa4096 timeout 280 \
    bash lab/2026-11-28-gate-scale-on-the-gpu/run.sh aa-4096 > $jobs/aa4096/run.log 2>&1
( export PYTHONPATH=/tmp/site:$src
  timeout 200 python3 -m tools.acceptance.timer_bias --processes 20 --case fp32/warptile:4096 --seconds 16 \
      --gpus all --out $jobs/bias/bias-fp32-warptile-4096.json > $jobs/bias/bias.log 2>&1
  echo "exit $?" >> $jobs/bias/bias.log )
( export PYTHONPATH=/tmp/site CUDA_VISIBLE_DEVICES=0
  site=$(python3 -c 'import sysconfig; print(sysconfig.get_paths()["purelib"])')
  SGEMM_CUDA_SITE="$site:/tmp/site" timeout 90 python3 -m pytest -q -m gpu tests/measuring/test_energy.py tests/gate \
      -p no:cacheprovider > $jobs/pytest/pytest-gpu.txt 2>&1
  echo "exit $?" >> $jobs/pytest/pytest-gpu.txt )
for job in aa4096 bias pytest; do
    tar -czf "$OUT/$job.tar.gz" -C $jobs "$job"
done
echo "== aa4096"; grep -h ' gate ' $jobs/aa4096/summary.txt | sed 's/ (cards.*): exit/: exit/'
for report in /tmp/keep-aa-4096/*.md; do grep -h -e '^## GEMM gate' -e '^- Base' "$report"; grep -h 'NOT POWERED\|REGRESSION\|IMPROVEMENT\|AMBIGUOUS' "$report" | cut -c1-300; done
echo "== bias"; tail -n 3 $jobs/bias/bias.log
echo "== pytest"; tail -n 3 $jobs/pytest/pytest-gpu.txt
