#!/usr/bin/env bash
# The second device call on a host of four H100s, one job a card, at once (the host's 64 cores shared):
#   card 0  the FP16 mma.sync ladder's new steps: GPU tests, NVBench and paired against cuBLAS, tile variants
#           (lab/2026-11-28-fp16-ladder/run.sh);
#   card 1  the FP32 ladder's new steps (lab/2026-11-28-fp32-ladder/run.sh), where it exists;
#   card 2  the joules-per-GEMM track (lab/2026-11-28-energy-track/run.sh), then why the gate and the cold-L2 timer
#           disagree on the tile order (lab/2026-11-28-tile-order-flush/run.sh);
#   card 3  the paired timer after the SciPy fix (probe.py and timer_bias, lab/2026-11-28-paired-timer-idle/run.sh
#           with PROBES=short), then the job sandbox (lab/2026-11-28-sandbox-gpu/run.sh trial paired busy).
# Carried: .whl, .bundle/main.bundle, .deb. Each job's results come back as $OUT/<job>.tar.gz.
set -uo pipefail
OUT=${OUT:-$PWD/out}
mkdir -p "$OUT"
ls .whl/*.whl | grep -v -e numpy- -e nvidia_ml_py- | xargs python3 -m pip install -q --no-index --no-deps \
    --no-compile --target /tmp/site 2>/dev/null
nvidia-smi --query-gpu=index,name,driver_version,clocks.sm,power.draw,power.limit,temperature.gpu --format=csv \
    > "$OUT/cards.txt"
export PYTHONUNBUFFERED=1
jobs=/tmp/jobs
mkdir -p $jobs
CUDA_VISIBLE_DEVICES=0 OUT=$jobs/fp16-ladder timeout 560 bash lab/2026-11-28-fp16-ladder/run.sh \
    > $jobs/fp16-ladder.log 2>&1 &
if [ -f lab/2026-11-28-fp32-ladder/run.sh ]; then
    CUDA_VISIBLE_DEVICES=1 OUT=$jobs/fp32-ladder timeout 560 bash lab/2026-11-28-fp32-ladder/run.sh \
        > $jobs/fp32-ladder.log 2>&1 &
fi
(
    export CUDA_VISIBLE_DEVICES=2
    OUT=$jobs/energy timeout 330 bash lab/2026-11-28-energy-track/run.sh > $jobs/energy.log 2>&1
    OUT=$jobs timeout 230 bash lab/2026-11-28-tile-order-flush/run.sh > $jobs/tile-flush.log 2>&1
) &
(
    export CUDA_VISIBLE_DEVICES=3
    PROBES=short OUT=$jobs timeout 300 bash lab/2026-11-28-paired-timer-idle/run.sh > $jobs/idle.log 2>&1
    OUT=$jobs/sandbox timeout 250 bash lab/2026-11-28-sandbox-gpu/run.sh trial paired busy > $jobs/sandbox.log 2>&1
) &
wait
for job in fp16-ladder fp32-ladder energy tile-flush timer-idle sandbox; do
    [ -f $jobs/$job.log ] && mkdir -p $jobs/$job && cp $jobs/$job.log $jobs/$job/
    [ -d $jobs/$job ] && tar -czf "$OUT/$job.tar.gz" -C $jobs "$job"
done
cp $jobs/idle.log $jobs/timer-idle/ 2>/dev/null && tar -czf "$OUT/timer-idle.tar.gz" -C $jobs timer-idle
for job in fp16-ladder fp32-ladder energy sandbox; do
    echo "== $job"; tail -n 25 $jobs/$job/summary.txt 2>/dev/null
done
echo "== tile-flush"; cat $jobs/tile-flush/summary.txt 2>/dev/null
echo "== timer"; tail -n 2 $jobs/timer-idle/bias-*.log 2>/dev/null | cut -c1-400
