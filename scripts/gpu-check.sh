#!/usr/bin/env bash
# Everything that needs a GPU, in one go: correctness of every kernel, the GPU tests, a benchmark table, and a
# short asv run on the current interpreter. Run it whenever kernels or measurement code change.
# Usage: scripts/gpu-check.sh [OUTPUT_DIR]        (logs and asv results land there; default ./gpu-check)
set -uo pipefail
out=$(realpath -m "${1:-gpu-check}")
mkdir -p "$out"
cd "$(dirname "$0")/.."
export PYTHONUNBUFFERED=1
status=0
step() { echo "== $*"; "$@" || status=1; }

step python3 -m sgemm check --shape 1024x1024x1024 --shape 1000x1028x516 --shape 127x132x68 2>&1 | tee "$out/check.txt"
step python3 -m pytest -q -m gpu tests 2>&1 | tee "$out/pytest-gpu.txt"
step python3 -m sgemm bench --json "$out/bench.json" 2>&1 | tee "$out/bench.txt"
if command -v asv >/dev/null || python3 -c 'import asv' 2>/dev/null; then
    machine=$(python3 -c 'from sgemm.machine import detect_identity, machine_name; print(machine_name(detect_identity()))')
    step python3 -m sgemm machine
    step python3 -m asv run --python=same --set-commit-hash "$(git rev-parse HEAD)" --machine "$machine" \
        --record-samples --show-stderr 2>&1 | tail -n 80 | tee "$out/asv.txt"
    tar -czf "$out/asv-results.tar.gz" results
fi
exit $status
