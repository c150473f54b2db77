#!/usr/bin/env bash
# The eighth device call, on a host of two GPUs (the session of 10:34 UTC; only H200 kinds were lent):
#   card 0   the Hopper ping-pong step, its GPU tests under a timeout then its bench (lab/2026-11-28-hopper-pingpong/
#            run.sh), then the FP32 winner's GPU tests and bench (lab/2026-11-28-fp32-sweep/promote.sh);
#   card 1   every GPU test on main, then the FP16 sweep's check and bench (lab/2026-11-28-fp16-sweep/run.sh).
# Carried: .whl. Each job's results come back as $OUT/<job>.tar.gz.
set -uo pipefail
OUT=${OUT:-$PWD/out}
mkdir -p "$OUT"
ls .whl/*.whl | grep -v -e numpy- -e nvidia_ml_py- | xargs python3 -m pip install -q --no-index --no-deps \
    --no-compile --target /tmp/site 2>/dev/null
nvidia-smi --query-gpu=index,name,driver_version,clocks.sm,power.draw,power.limit,temperature.gpu --format=csv \
    > "$OUT/cards.txt"
export PYTHONUNBUFFERED=1
jobs=/tmp/jobs
mkdir -p $jobs/pingpong $jobs/fp32 $jobs/pytest $jobs/fp16
(
    export CUDA_VISIBLE_DEVICES=0
    OUT=$jobs/pingpong timeout 300 bash lab/2026-11-28-hopper-pingpong/run.sh > $jobs/pingpong/run.log 2>&1
    OUT=$jobs/fp32 timeout 120 bash lab/2026-11-28-fp32-sweep/promote.sh > $jobs/fp32/run.log 2>&1
) &
(
    export CUDA_VISIBLE_DEVICES=1
    ( export PYTHONPATH=/tmp/site
      site=$(python3 -c 'import sysconfig; print(sysconfig.get_paths()["purelib"])')
      SGEMM_CUDA_SITE="$site:/tmp/site" timeout 130 python3 -m pytest -q -m gpu tests --durations=5 \
          -p no:cacheprovider > $jobs/pytest/pytest-gpu.txt 2>&1
      echo "exit $?" >> $jobs/pytest/pytest-gpu.txt )
    OUT=$jobs/fp16 CHECK_S=60 BENCH_S=260 timeout 400 bash lab/2026-11-28-fp16-sweep/run.sh > $jobs/fp16/run.log 2>&1
) &
wait
for job in pingpong fp32 pytest fp16; do
    tar -czf "$OUT/$job.tar.gz" -C $jobs "$job"
done
for job in pingpong fp32 fp16; do
    echo "== $job"; tail -n 30 $jobs/$job/summary.txt 2>/dev/null; tail -n 3 $jobs/$job/run.log
done
echo "== pytest"; tail -n 12 $jobs/pytest/pytest-gpu.txt
