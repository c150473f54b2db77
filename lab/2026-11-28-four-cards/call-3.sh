#!/usr/bin/env bash
# The third device call on a host of four H100s (the host's 64 cores shared):
#   card 0   which L2 flush exposes the tile-order change in the paired timer (lab/2026-11-28-tile-order-flush/run.sh,
#            paired only: the timer's own byte-store kernel, cudaMemsetAsync, CuPy's fill, 16-byte loads), then the
#            tile-order change gated with default options (lab/2026-11-28-gate-scale-on-the-gpu/run.sh tile);
#   card 1   an A/A gate of the Hopper ladder at 8192, timing forced (run.sh aa);
#   cards 2, 3  one commit's history sharded over two GPUs (lab/2026-11-28-history-sharding/run.sh 2).
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
mkdir -p $jobs/tile $jobs/aa
(
    export CUDA_VISIBLE_DEVICES=0
    REPEATS=1 EVENT_FLUSHES="" PAIRED_FLUSHES="timer memset fill read timer fill" OUT=$jobs timeout 200 \
        bash lab/2026-11-28-tile-order-flush/run.sh > $jobs/tile-flush.log 2>&1
    CARD=0 TILE_LIMIT_S=300 OUT=$jobs/tile timeout 330 bash lab/2026-11-28-gate-scale-on-the-gpu/run.sh tile \
        > $jobs/tile/run.log 2>&1
) &
CARD=1 AA_LIMIT_S=480 OUT=$jobs/aa timeout 530 bash lab/2026-11-28-gate-scale-on-the-gpu/run.sh aa \
    > $jobs/aa/run.log 2>&1 &
CUDA_VISIBLE_DEVICES=2,3 OUT=$jobs/sharding HISTORY_TIMEOUT_S=480 timeout 530 \
    bash lab/2026-11-28-history-sharding/run.sh 2 > $jobs/sharding.log 2>&1 &
wait
cp $jobs/tile-flush.log $jobs/tile-flush/ 2>/dev/null
cp $jobs/sharding.log $jobs/sharding/ 2>/dev/null
for job in tile-flush tile aa sharding; do
    [ -d $jobs/$job ] && tar -czf "$OUT/$job.tar.gz" -C $jobs "$job"
done
for job in tile-flush tile aa sharding; do echo "== $job"; tail -n 30 $jobs/$job/summary.txt 2>/dev/null; done
