#!/usr/bin/env bash
# The seventh device call on a host of four GPUs (the host's cores shared):
#   card 0   NVBench in the sandbox after its machine file became writable (lab/2026-11-28-sandbox-gpu/run.sh nvbench);
#   card 1   the FP32 sweep (lab/2026-11-28-fp32-sweep/run.sh);
#   card 2   the FP16 sweep (lab/2026-11-28-fp16-sweep/run.sh);
#   card 3   one commit's history on one GPU with energy charged at 8192 (SGEMM_ENERGY_SIZES=8192,
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
mkdir -p $jobs/nvbench $jobs/fp32 $jobs/fp16 $jobs/history
CUDA_VISIBLE_DEVICES=0 KERNEL_FILE=kernels/fp16_wmma.cu GATE_LIMIT_S=400 OUT=$jobs/nvbench timeout 470 \
    bash lab/2026-11-28-sandbox-gpu/run.sh nvbench > $jobs/nvbench/run.log 2>&1 &
CUDA_VISIBLE_DEVICES=1 OUT=$jobs/fp32 timeout 480 bash lab/2026-11-28-fp32-sweep/run.sh > $jobs/fp32/run.log 2>&1 &
CUDA_VISIBLE_DEVICES=2 OUT=$jobs/fp16 timeout 480 bash lab/2026-11-28-fp16-sweep/run.sh > $jobs/fp16/run.log 2>&1 &
(
    CUDA_VISIBLE_DEVICES=3 SGEMM_ENERGY_SIZES=8192 HISTORY_TIMEOUT_S=470 OUT=$jobs/history timeout 500 \
        bash lab/2026-11-28-history-sharding/run.sh 1 > $jobs/history/run.log 2>&1
    cp /tmp/hist-html/gpus/index.html $jobs/history/cross-gpu.html 2>/dev/null
) &
wait
for job in nvbench fp32 fp16 history; do
    tar -czf "$OUT/$job.tar.gz" -C $jobs "$job"
done
for job in nvbench fp32 fp16 history; do
    echo "== $job"; tail -n 30 $jobs/$job/summary.txt 2>/dev/null; tail -n 3 $jobs/$job/run.log
done
