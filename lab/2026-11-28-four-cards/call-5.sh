#!/usr/bin/env bash
# The fifth device call on a host of four GPUs (the host's cores shared; call 4 was the regrouping's history alone,
# `lab/2026-11-28-restructure-on-the-gpu/run.sh history` over every card):
#   card 0   the job sandbox on the GPU (lab/2026-11-28-sandbox-gpu/run.sh trial paired busy timing, the scratch
#            commit touching kernels/fp16_wmma.cu: two cases), then the sandbox's tests with bubblewrap on a host whose
#            cgroup v2 may delegate memory and pids;
#   card 1   every GPU test of main, then one energy reading at a time with every thread's stack dumped each 30 s
#            (lab/2026-11-28-energy-track/run.sh, DUMP_S=30): where the reading waits;
#   card 2   the FP16 mma.sync ladder at 4096 and 8192 (lab/2026-11-28-fp16-ladder/run.sh ladder);
#   card 3   an NVBench case in the sandbox (lab/2026-11-28-sandbox-gpu/run.sh nvbench, a folder of its own).
# Carried: .whl, .bundle/main.bundle, .deb. Each job's results come back as $OUT/<job>.tar.gz.
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
mkdir -p $jobs/sandbox $jobs/tests $jobs/energy $jobs/fp16 $jobs/nvbench
(
    export CUDA_VISIBLE_DEVICES=0
    KERNEL_FILE=kernels/fp16_wmma.cu GATE_LIMIT_S=100 OUT=$jobs/sandbox timeout 440 \
        bash lab/2026-11-28-sandbox-gpu/run.sh trial paired busy timing > $jobs/sandbox/run.log 2>&1
    echo "sandbox script: exit $?" >> $jobs/sandbox/run.log
    mkdir -p /tmp/bw && dpkg -x "$(ls .deb/bubblewrap_*.deb | head -n 1)" /tmp/bw
    PATH=/tmp/bw/usr/bin:$PATH PYTHONPATH=/tmp/site SGEMM_REQUIRE_SANDBOX=1 timeout 90 python3 -m pytest -q -rs \
        -p no:cacheprovider tests/ci/test_job_sandbox.py > $jobs/sandbox/pytest-sandbox.txt 2>&1
    echo "sandbox tests: exit $?: $(tail -n 1 $jobs/sandbox/pytest-sandbox.txt)" >> $jobs/sandbox/run.log
) &
(
    export CUDA_VISIBLE_DEVICES=1 PYTHONPATH=/tmp/site
    export SGEMM_CUDA_SITE="$(python3 -c 'import sysconfig; print(sysconfig.get_paths()["purelib"])'):/tmp/site"
    SECONDS=0
    timeout 300 python3 -m pytest -q -m gpu tests -p no:cacheprovider > $jobs/tests/pytest-gpu.txt 2>&1
    echo "GPU tests: exit $? after ${SECONDS} s: $(tail -n 1 $jobs/tests/pytest-gpu.txt)" > $jobs/tests/summary.txt
    DUMP_S=30 ENERGY_S=150 OUT=$jobs/energy timeout 200 bash lab/2026-11-28-energy-track/run.sh \
        > $jobs/energy/run.log 2>&1
) &
CUDA_VISIBLE_DEVICES=2 OUT=$jobs/fp16 timeout 480 bash lab/2026-11-28-fp16-ladder/run.sh ladder \
    > $jobs/fp16/run.log 2>&1 &
CUDA_VISIBLE_DEVICES=3 KERNEL_FILE=kernels/fp16_wmma.cu GATE_LIMIT_S=400 LAB_DIR=/var/lib/sgemm-sandbox-nvbench \
    OUT=$jobs/nvbench timeout 480 bash lab/2026-11-28-sandbox-gpu/run.sh nvbench > $jobs/nvbench/run.log 2>&1 &
wait
for job in sandbox tests energy fp16 nvbench; do
    tar -czf "$OUT/$job.tar.gz" -C $jobs "$job"
done
for job in sandbox tests energy fp16 nvbench; do
    echo "== $job"; tail -n 25 $jobs/$job/summary.txt 2>/dev/null; tail -n 3 $jobs/$job/run.log
done
