#!/usr/bin/env bash
# The energy track on one H100: fp16/bf16 cuBLAS and fp16/bf16 wgmma_grouped_tma_store at 4096 and 8192, each charged
# three times in a row with the history's settings (joules per GEMM, implied watts, window, error bound, flags, wall
# time against the cost formula), then the GPU tests of the energy reading. About 2-3 minutes on an idle H100.
# Run from the repository root with .whl (the offline wheelhouse) carried. Results under $OUT.
set -uo pipefail
OUT=${OUT:-$PWD/out}
mkdir -p "$OUT"
src=$PWD
ls .whl/*.whl | grep -v -e numpy- -e nvidia_ml_py- | xargs python3 -m pip install -q --no-index --no-deps \
    --no-compile --target /tmp/site 2>/dev/null
export PYTHONPATH=$src:/tmp/site PIP_NO_INDEX=1 PIP_FIND_LINKS=$src/.whl PYTHONUNBUFFERED=1
site=$(python3 -c 'import sysconfig; print(sysconfig.get_paths()["purelib"])')
export SGEMM_CUDA_SITE="$site:/tmp/site"
nvidia-smi --query-gpu=index,name,driver_version,clocks.sm,power.draw,power.limit,temperature.gpu --format=csv \
    | tee -a "$OUT/summary.txt"
echo "checkout: $(git rev-parse --short HEAD 2>/dev/null) $(git status --porcelain 2>/dev/null | wc -l) changed files" \
    | tee -a "$OUT/summary.txt"

SECONDS=0
timeout "${ENERGY_S:-360}" python3 lab/2026-11-28-energy-track/energy_track.py "$OUT" > "$OUT/energy.log" 2>&1
echo "energy readings: exit $? after ${SECONDS} s" | tee -a "$OUT/summary.txt"
cat "$OUT/energy.md" >> "$OUT/summary.txt" 2>/dev/null || tail -n 20 "$OUT/energy.log" >> "$OUT/summary.txt"

SECONDS=0
timeout 150 python3 -m pytest -q -rs -p no:cacheprovider tests/measuring/test_energy.py \
    > "$OUT/pytest-energy.txt" 2>&1
echo "energy tests (the GPU one and the simulated ones): exit $? after ${SECONDS} s: $(tail -n 1 "$OUT/pytest-energy.txt")" \
    | tee -a "$OUT/summary.txt"
nvidia-smi --query-gpu=clocks.sm,power.draw,temperature.gpu --format=csv,noheader | sed 's/^/after: /' \
    | tee -a "$OUT/summary.txt"
cat "$OUT/summary.txt"
