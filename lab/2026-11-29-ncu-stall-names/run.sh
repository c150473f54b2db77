#!/usr/bin/env bash
# Two jobs of one device call (run from the repository root, .whl carried):
#   1. every GPU test at the checkout (pytest -m gpu), into $OUT/pytest-gpu.txt;
#   2. the names this Nsight Compute gives the tensor pipes and the warp stall reasons on this GPU, before any code
#      reads them: the metric list filtered to them ($OUT/metric-names.txt), and one launch of a Hopper step and of a
#      mma.sync step at 4096 profiled with the compute and warp-state sections, details and raw pages
#      ($OUT/profiles.tar.gz), with --clock-control none.
set -uo pipefail
OUT=${OUT:-$PWD/out}
mkdir -p "$OUT"
ls .whl/*.whl | grep -v -e numpy- -e nvidia_ml_py- | xargs python3 -m pip install -q --no-index --no-deps \
    --no-compile --target /tmp/site 2>/dev/null
site=$(python3 -c 'import sysconfig; print(sysconfig.get_paths()["purelib"])')
export SGEMM_CUDA_SITE="$site:/tmp/site" PYTHONUNBUFFERED=1
say() { echo "$(date -u +%H:%M:%S) $*" | tee -a "$OUT/summary.txt"; }
nvidia-smi --query-gpu=index,name,driver_version,clocks.sm,power.draw,power.limit,temperature.gpu --format=csv \
    | tee -a "$OUT/summary.txt"
say "checkout: $(git rev-parse --short HEAD) $(git status --porcelain | wc -l) changed files"

SECONDS=0
PYTHONPATH=/tmp/site timeout 200 python3 -m pytest -q -m gpu tests -p no:cacheprovider > "$OUT/pytest-gpu.txt" 2>&1
say "pytest -m gpu: exit $? after ${SECONDS} s: $(tail -n 1 "$OUT/pytest-gpu.txt")"

ncu=$(command -v ncu || ls /usr/local/cuda*/bin/ncu 2>/dev/null | head -n 1)
say "ncu: $ncu ($("$ncu" --version | tail -n 1))"
{
    "$ncu" --list-sections
    echo "== base metrics matching tensor, pipe or stall"
    "$ncu" --query-metrics --device 0 | grep -i -E 'tensor|pipe_|stall|warp_issue'
    echo "== suffixes of the tensor pipe metrics"
    for name in $("$ncu" --query-metrics --device 0 | awk '{print $1}' | grep -i -E '^sm__pipe.*tensor|^sm__inst_executed_pipe.*tensor'); do
        "$ncu" --query-metrics-mode suffix --metrics "$name" --device 0 | grep -E 'pct_of_peak|\.avg|\.sum' | head -n 8
    done
} > "$OUT/metric-names.txt" 2>&1
say "metric names: $(wc -l < "$OUT/metric-names.txt") lines"

mkdir -p /tmp/profiles
for kernel in fp16/wgmma_lean_loop fp16/mma_fragment_buffered; do
    template=$(python3 -c "from sgemm import catalogue; print(catalogue.load_catalogue()['$kernel'].entry.partition('<')[0].strip())")
    for page in details raw; do
        extra=()
        [[ $page == details ]] && extra=(--print-details all)
        timeout 120 "$ncu" --clock-control none --target-processes all --kernel-name "regex:$template" \
            --launch-count 1 --section ComputeWorkloadAnalysis --section WarpStateStats --section SpeedOfLight \
            --csv --page $page "${extra[@]}" python3 -m sgemm check -k $kernel --shape 4096x4096x4096 \
            > "/tmp/profiles/${kernel//\//-}-$page.csv" 2> "/tmp/profiles/${kernel//\//-}-$page.err"
        say "profile $kernel $page: exit $?, $(wc -l < "/tmp/profiles/${kernel//\//-}-$page.csv") lines"
    done
done
tar -czf "$OUT/profiles.tar.gz" -C /tmp profiles
