#!/usr/bin/env bash
# The stream-K step and step g against cuBLAS, sustained at the power cap over five processes
# (tools/acceptance/sustained.py: NVBench with at least 10 s of launches a case, then paired after 10 s of warm-up,
# L2 flushed), one run a CARD:PRECISION[:SIZE] argument, all at once (default "0:fp16 1:bf16"; SIZE defaults to
# $SIZE, else 8192), each kernel against cuBLAS on its own card: on a host of four, "0:fp16:8192 1:bf16:8192
# 2:fp16:4096 3:bf16:4096" is the whole of the issue's table. The entries (entries.toml) are appended to a scratch
# copy of the checkout ($SCRATCH). Run from the repository root with .whl carried; results under $OUT. About 7
# minutes.
set -uo pipefail
OUT=${OUT:-$PWD/out}
mkdir -p "$OUT"
ls .whl/*.whl | grep -v -e numpy- -e nvidia_ml_py- | xargs python3 -m pip install -q --no-index --no-deps \
    --no-compile --target /tmp/site 2>/dev/null
site=$(python3 -c 'import sysconfig; print(sysconfig.get_paths()["purelib"])')
export SGEMM_CUDA_SITE="$site:/tmp/site" PYTHONUNBUFFERED=1
nvidia-smi --query-gpu=index,name,driver_version,clocks.sm,power.draw,power.limit,temperature.gpu --format=csv \
    | tee "$OUT/summary.txt"
echo "checkout: $(git rev-parse --short HEAD) $(git status --porcelain | wc -l) changed files" | tee -a "$OUT/summary.txt"
SCRATCH=${SCRATCH:-/tmp/stream-k}
rm -rf "$SCRATCH" && mkdir -p "$SCRATCH"
cp -r sgemm kernels benchmarks tests tools pyproject.toml asv.conf.json "$SCRATCH/"
cat lab/2026-11-28-hopper-stream-k/entries.toml >> "$SCRATCH/sgemm/catalogue.toml"
cd "$SCRATCH"
export PYTHONPATH="$SCRATCH:/tmp/site"
pids=()
[ $# -gt 0 ] || set -- 0:fp16 1:bf16
for run in "$@"; do
    IFS=: read -r card precision size <<< "$run"
    size=${size:-${SIZE:-8192}}
    timeout 580 python3 -m tools.acceptance.sustained "$precision/wgmma_stream_k" \
        "$precision/wgmma_grouped_tma_store" --size "$size" --processes 5 --seconds 10 --device "$card" \
        --json "$OUT/sustained-$precision-$size.json" > "$OUT/sustained-$precision-$size.txt" 2>&1 &
    pids+=($!)
done
for pid in "${pids[@]}"; do wait "$pid"; echo "process $pid: exit $?" | tee -a "$OUT/summary.txt"; done
cat "$OUT"/sustained-*.txt | tee -a "$OUT/summary.txt"
