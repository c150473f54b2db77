#!/usr/bin/env bash
# Everything that needs a GPU, in one go: every GPU test (each kernel against FP64 at the edges of the shapes it
# claims), an asv run on the current interpreter, and the seed ladder report made from that run.
# Run it whenever kernels or measurement code change.
# Usage: scripts/gpu-check.sh [OUTPUT_DIR]        (logs, asv results and the report land there; default ./gpu-check)
#   ASV_BENCH=regex  limits the asv run (default: every benchmark; e.g. 'Gemm.track_tflops' measures every case once)
#   GPU_TESTS=0      leaves the GPU tests out (when they run elsewhere)
set -uo pipefail
out=$(realpath -m "${1:-gpu-check}")
mkdir -p "$out"
cd "$(dirname "$0")/.."
export PYTHONUNBUFFERED=1
# asv's benchmark processes see ASV_PYTHONPATH, not PYTHONPATH: this checkout's package, where it is not installed.
export ASV_PYTHONPATH="$PWD${ASV_PYTHONPATH:+:$ASV_PYTHONPATH}"
status=0
step() { echo "== $* ($(date -u +%H:%M:%S))"; "$@"; }

if [ "${GPU_TESTS:-1}" != 0 ]; then
    step python3 -m pytest -q -m gpu tests 2>&1 | tee "$out/pytest-gpu.txt" || status=1
fi
if python3 -c 'import asv' 2>/dev/null; then
    machine=$(python3 -c 'from sgemm.results.machine import detect_identity, machine_name; print(machine_name(detect_identity()))')
    step python3 -m sgemm machine || status=1
    bench=()
    if [ -n "${ASV_BENCH:-}" ]; then
        bench=(--bench "$ASV_BENCH")
    else
        # As `sgemm history` runs it: its benchmarks named to asv (every track of each case, the GPU's facts and the
        # resource suite; no process for the crosses that are no case), every case measured in one process, and
        # each also against its build at the catalogue's [suite] reference.
        while read -r pattern; do bench+=(--bench "$pattern"); done < <(python3 -c 'import pathlib, sgemm.history.run as h
print("\n".join(h.case_patterns(h.suite_cases(pathlib.Path("."))) + h.other_patterns(pathlib.Path("."))))')
        export SGEMM_RUN_CASES SGEMM_REFERENCE_TREE
        SGEMM_RUN_CASES=$(python3 -c 'import json, pathlib, sgemm.history.run as h
print(json.dumps([[c.kernel, *c.shape] for c in h.suite_cases(pathlib.Path("."))]))')
        SGEMM_REFERENCE_TREE=$(python3 -c 'import pathlib, sgemm.history.run as h
print(h.reference_tree(pathlib.Path("."), pathlib.Path(".asv/history")) or "")')
    fi
    SECONDS=0
    step python3 -m asv run --python=same --set-commit-hash "$(git rev-parse HEAD)" --machine "$machine" \
        --record-samples --show-stderr "${bench[@]}" 2>&1 | tee "$out/asv.txt" | tail -n 60 || status=1
    echo "asv run: ${SECONDS} s" | tee -a "$out/asv.txt"
    step python3 -m sgemm report --results results --machine "$machine" --out "$out/report" || status=1
    tar -czf "$out/asv-results.tar.gz" results
fi
exit $status
