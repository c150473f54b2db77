#!/usr/bin/env bash
# The sixth device call on a host of four GPUs (the host's cores shared), after call 5's findings were fixed (the
# energy feed's queue bound, the unpaired gate's machine file, the sandboxed rounds' compile cache):
#   card 0   the job sandbox: a paired round, NVBench through asv continuous, and the fixed-round gate with and
#            without the sandbox, three runs each (lab/2026-11-28-sandbox-gpu/run.sh paired nvbench timing);
#   card 1   every GPU test of main;
#   card 2   the energy readings (lab/2026-11-28-energy-track/run.sh), stacks dumped every 30 s should one wait;
#   card 3   the FP32 ladder (lab/2026-11-28-fp32-ladder/run.sh).
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
mkdir -p $jobs/sandbox $jobs/tests $jobs/energy $jobs/fp32
CUDA_VISIBLE_DEVICES=0 KERNEL_FILE=kernels/fp16_wmma.cu GATE_LIMIT_S=200 OUT=$jobs/sandbox timeout 470 \
    bash lab/2026-11-28-sandbox-gpu/run.sh paired timing nvbench > $jobs/sandbox/run.log 2>&1 &
(
    export CUDA_VISIBLE_DEVICES=1 PYTHONPATH=/tmp/site
    export SGEMM_CUDA_SITE="$(python3 -c 'import sysconfig; print(sysconfig.get_paths()["purelib"])'):/tmp/site"
    SECONDS=0
    timeout 420 python3 -m pytest -q -m gpu tests -p no:cacheprovider --durations=5 > $jobs/tests/pytest-gpu.txt 2>&1
    echo "GPU tests: exit $? after ${SECONDS} s: $(tail -n 1 $jobs/tests/pytest-gpu.txt)" > $jobs/tests/summary.txt
) &
CUDA_VISIBLE_DEVICES=2 DUMP_S=30 ENERGY_S=300 OUT=$jobs/energy timeout 460 bash lab/2026-11-28-energy-track/run.sh \
    > $jobs/energy/run.log 2>&1 &
CUDA_VISIBLE_DEVICES=3 OUT=$jobs/fp32 timeout 460 bash lab/2026-11-28-fp32-ladder/run.sh > $jobs/fp32/run.log 2>&1 &
wait
for job in sandbox tests energy fp32; do
    tar -czf "$OUT/$job.tar.gz" -C $jobs "$job"
done
for job in sandbox tests energy fp32; do
    echo "== $job"; tail -n 25 $jobs/$job/summary.txt 2>/dev/null; tail -n 3 $jobs/$job/run.log
done
