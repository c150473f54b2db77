#!/usr/bin/env bash
# A sweep of gemm_mma_pipelined configurations past fp16/mma_fragment_buffered (candidates.txt, or the file CANDIDATES
# names: one a line, with why),
# each a scratch catalogue entry "fp16/sweep_<label>" appended to a copy of the checkout ($SCRATCH), so that the
# checkout's own catalogue is left as it is. Steps (arguments; default: check bench):
#   compile   every candidate compiled with NVRTC for sm_90 (no GPU needed): registers, shared memory, spills, and the
#             SASS instruction mix where nvdisasm is found (compile.py);
#   check     `sgemm check` of every candidate against FP64 at 4096x4096x4096 and at 1000x1032x520 (M of no tile, N
#             and K multiples of 8 but of no tile or slice: every edge of the shapes the kernel claims), there also
#             with alpha 0.5 and beta 1;
#   bench     `sgemm bench --versus-baseline` of fp16/cublas, fp16/mma_fragment_buffered and every candidate at 4096
#             and 8192: NVBench with the L2 flushed, each case in its own measurement, then paired with cuBLAS in
#             one process (L2 warm and flushed).
# Run from the repository root with .whl (the offline wheelhouse) carried; results under $OUT. About 4 minutes on an
# H100 (limits in seconds: CHECK_S, BENCH_S).
# Other ladders' candidates: TEMPLATE and SOURCE (the kernel template and its file), PRECISIONS ("fp16", or e.g.
# "fp16 bf16" for an entry whose template takes {input}), ENTRY_LINES (more TOML lines, e.g. grid = "persistent"),
# MULTIPLE_OF, CHECK_SHAPES (the first also checked with alpha and beta) and BASELINES (kernels benched beside them).
set -uo pipefail
OUT=${OUT:-$PWD/out}
SCRATCH=${SCRATCH:-/tmp/fp16-sweep}
PYTHON=${PYTHON:-python3}
mkdir -p "$OUT"
src=$PWD
here=$src/lab/2026-11-28-fp16-sweep
steps=${*:-check bench}
TEMPLATE=${TEMPLATE:-gemm_mma_pipelined} SOURCE=${SOURCE:-fp16_mma_pipelined.cu} PRECISIONS=${PRECISIONS:-fp16}
MULTIPLE_OF=${MULTIPLE_OF:-"{ m = 1, n = 8, k = 8 }"} ENTRY_LINES=${ENTRY_LINES:-}
read -r -a check_shapes <<< "${CHECK_SHAPES:-1000x1032x520 4096x4096x4096}"
read -r -a baselines <<< "${BASELINES:-fp16/cublas fp16/mma_fragment_buffered}"
read -r -a precisions <<< "$PRECISIONS"
summary=$OUT/summary.txt
if compgen -G ".whl/*.whl" > /dev/null; then
    ls .whl/*.whl | grep -v -e numpy- -e nvidia_ml_py- | xargs "$PYTHON" -m pip install -q --no-index --no-deps \
        --no-compile --target /tmp/site 2>/dev/null
    export PYTHONPATH=/tmp/site PIP_NO_INDEX=1 PIP_FIND_LINKS=$src/.whl
    site=$("$PYTHON" -c 'import sysconfig; print(sysconfig.get_paths()["purelib"])')
    export SGEMM_CUDA_SITE="$site:/tmp/site"
fi
export PYTHONUNBUFFERED=1
if command -v nvidia-smi > /dev/null; then
    nvidia-smi --query-gpu=index,name,driver_version,clocks.sm,clocks.max.sm,power.draw,power.limit,temperature.gpu \
        --format=csv | tee -a "$summary"
fi
echo "checkout: $(git -C "$src" rev-parse --short HEAD 2>/dev/null || echo 'no git')$(git -C "$src" status \
    --porcelain 2>/dev/null | grep -q . && echo ' (with uncommitted changes)')" | tee -a "$summary"

# The scratch copy: the package, its kernels and asv's files, and one entry a candidate after the catalogue's own.
rm -rf "$SCRATCH" && mkdir -p "$SCRATCH"
cp -r kernels sgemm benchmarks pyproject.toml asv.conf.json "$SCRATCH"/
candidates=()
while IFS=';' read -r label arguments target why; do
    [[ -z $label || $label == \#* ]] && continue
    label=${label// /} target=${target// /} arguments=${arguments# } why=${why# }
    if [[ $target == - ]]; then launch='min_compute_capability = 80'; else launch="target = \"$target\""; fi
    if (( ${#precisions[@]} == 1 )); then
        name="${precisions[0]}/sweep_$label" precision_line=""
    else
        name="sweep_$label" precision_line="precisions = [$(printf '"%s", ' "${precisions[@]}" | sed 's/, $//')]"
    fi
    cat >> "$SCRATCH/sgemm/catalogue.toml" <<TOML

[[kernel]]
name = "$name"
$precision_line
technique = "scratch candidate: $why"
source = "$SOURCE"
entry = "$TEMPLATE<$arguments>"
multiple_of = $MULTIPLE_OF
$launch
$ENTRY_LINES
sizes = [4096, 8192]
TOML
    for precision in "${precisions[@]}"; do candidates+=("$precision/sweep_$label"); done
    echo "$name = $TEMPLATE<$arguments> ($target): $why" | tee -a "$summary"
done < "${CANDIDATES:-$here/candidates.txt}"
selected=()
for name in "${candidates[@]}"; do selected+=(-k "$name"); done
shapes=()
for shape in "${check_shapes[@]}"; do shapes+=(--shape "$shape"); done

cd "$SCRATCH" || exit 1
if [[ " $steps " == *" compile "* ]]; then
    SECONDS=0
    # The copy's package and kernels, not whatever sgemm the interpreter has installed.
    PYTHONPATH="$SCRATCH${PYTHONPATH:+:$PYTHONPATH}" "$PYTHON" "$here/compile.py" "${candidates[@]}" \
        > "$OUT/compile.txt" 2>&1
    echo "compile: exit $? after ${SECONDS} s" | tee -a "$summary"
    cat "$OUT/compile.txt" | tee -a "$summary"
fi
if [[ " $steps " == *" check "* ]]; then
    SECONDS=0
    timeout "${CHECK_S:-90}" "$PYTHON" -m sgemm check "${selected[@]}" "${shapes[@]}" > "$OUT/check.txt" 2>&1
    echo "check: exit $? after ${SECONDS} s: $(tail -n 1 "$OUT/check.txt")" | tee -a "$summary"
    SECONDS=0
    timeout "${CHECK_S:-90}" "$PYTHON" -m sgemm check "${selected[@]}" --shape "${check_shapes[0]}" --alpha 0.5 --beta 1 \
        > "$OUT/check-beta.txt" 2>&1
    echo "check with alpha and beta: exit $? after ${SECONDS} s: $(tail -n 1 "$OUT/check-beta.txt")" \
        | tee -a "$summary"
fi
if [[ " $steps " == *" bench "* ]]; then
    SECONDS=0
    bench_baselines=()
    for name in "${baselines[@]}"; do bench_baselines+=(-k "$name"); done
    timeout "${BENCH_S:-250}" "$PYTHON" -m sgemm bench "${bench_baselines[@]}" "${selected[@]}" \
        --size 4096 --size 8192 --versus-baseline --json "$OUT/bench.json" > "$OUT/bench.txt" 2> "$OUT/bench.log"
    echo "bench: exit $? after ${SECONDS} s" | tee -a "$summary"
    cat "$OUT/bench.txt" | tee -a "$summary"
fi
cd "$src" || exit 1
if command -v nvidia-smi > /dev/null; then
    nvidia-smi --query-gpu=clocks.sm,power.draw,temperature.gpu,clocks_throttle_reasons.active --format=csv \
        | tee -a "$summary"
fi
