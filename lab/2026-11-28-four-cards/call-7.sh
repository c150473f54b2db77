#!/usr/bin/env bash
# The seventh device call, on a host of two GPUs (no four-GPU host was lent then; the host's cores shared):
#   card 0   NVBench in the sandbox after its machine file became writable (lab/2026-11-28-sandbox-gpu/run.sh
#            nvbench), then the FP32 sweep (lab/2026-11-28-fp32-sweep/run.sh);
#   card 1   one commit's history on one GPU with energy charged at 8192 (SGEMM_ENERGY_SIZES=8192,
#            lab/2026-11-28-history-sharding/run.sh 1): the estimate's error at every line after the changes of
#            e079115, the energy track on the site (its cross-GPU page kept).
# Carried: .whl, .bundle/main.bundle, .deb, .npm-cache. Each job's results come back as $OUT/<job>.tar.gz.
set -uo pipefail
OUT=${OUT:-$PWD/out}
mkdir -p "$OUT"
ls .whl/*.whl | grep -v -e numpy- -e nvidia_ml_py- | xargs python3 -m pip install -q --no-index --no-deps \
    --no-compile --target /tmp/site 2>/dev/null
nvidia-smi --query-gpu=index,name,driver_version,clocks.sm,power.draw,power.limit,temperature.gpu --format=csv \
    > "$OUT/cards.txt"
export PYTHONUNBUFFERED=1
jobs=/tmp/jobs
mkdir -p $jobs/nvbench $jobs/fp32 $jobs/history
(
    export CUDA_VISIBLE_DEVICES=0
    KERNEL_FILE=kernels/fp16_wmma.cu GATE_LIMIT_S=200 OUT=$jobs/nvbench timeout 230 \
        bash lab/2026-11-28-sandbox-gpu/run.sh nvbench > $jobs/nvbench/run.log 2>&1
    OUT=$jobs/fp32 timeout 300 bash lab/2026-11-28-fp32-sweep/run.sh > $jobs/fp32/run.log 2>&1
) &
(
    CUDA_VISIBLE_DEVICES=1 SGEMM_ENERGY_SIZES=8192 HISTORY_TIMEOUT_S=490 OUT=$jobs/history timeout 515 \
        bash lab/2026-11-28-history-sharding/run.sh 1 > $jobs/history/run.log 2>&1
    cp /tmp/hist-html/gpus/index.html $jobs/history/cross-gpu.html 2>/dev/null
) &
wait
for job in nvbench fp32 history; do
    tar -czf "$OUT/$job.tar.gz" -C $jobs "$job"
done
for job in nvbench fp32 history; do
    echo "== $job"; tail -n 30 $jobs/$job/summary.txt 2>/dev/null; tail -n 3 $jobs/$job/run.log
done
