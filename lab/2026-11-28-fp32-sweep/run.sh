#!/usr/bin/env bash
# Can a gemm_async configuration reach 85% of cuBLAS at 4096 and 8192 on an H100 (issue "ladders", FP32)? About
# 4 minutes on one GPU:
#   prepare  a copy of the checkout in /tmp/sweep with each candidate appended to its catalogue as a scratch entry
#            (the checkout itself is left as it is); needs no GPU, so it can be tried on a CPU box;
#   check    each candidate against FP64 at 4096x4096x4096, 1000x1028x517 and 1000x1028x516 (the kRowMajorA ones
#            need K % 4 == 0 and skip 517);
#   bench    `sgemm bench` of fp32/cublas, fp32/async_multistage (today's best) and the candidates at 4096 and 8192:
#            NVBench with L2 flushed, each case in its own measurement, and --versus-baseline (paired with cuBLAS in
#            one process, L2 warm and flushed).
# Steps as arguments (default: prepare check bench). Run from the repository root with .whl (the offline wheelhouse)
# carried; results under $OUT: summary.txt, check.txt, sweep.txt/.json/.log.
set -uo pipefail
OUT=${OUT:-$PWD/out}
SWEEP=${SWEEP:-/tmp/sweep}
mkdir -p "$OUT"
src=$PWD
steps=${*:-prepare check bench}

# label; gemm_async's template arguments; K multiple; then why it might beat async_multistage <128,128,8,16,128,8,8,4>.
candidates=(
    "sw;128, 128, 8, 16, 128, 8, 8, 4, kBlockSwizzle;1"   # the best step, blocks in strips of 16 rows: more L2 hits
    "k16;128, 128, 16, 16, 128, 8, 8, 4;1"   # BK 16 with the 2x16-lane warps that won at BK 8: half the barriers
    "k16_s3;128, 128, 16, 16, 128, 8, 8, 3;1"   # the same in 50 KB a block: three slices in flight is enough?
    "k16_sw;128, 128, 16, 16, 128, 8, 8, 4, kBlockSwizzle;1"   # half the barriers and the L2 block order
    "rowa;128, 128, 8, 16, 128, 8, 8, 4, kRowMajorA;4"   # A in 16-byte copies: 2 cp.async a slice, not 5
    "rowa_k16;128, 128, 16, 16, 128, 8, 8, 4, kRowMajorA;4"   # both: fewer copies and fewer barriers
    "t8x16;128, 256, 8, 16, 256, 8, 16, 4;1"   # 8x16 thread tiles on 2x16 lanes: 1.5x the FMAs per fragment read
    "t8x16_k16;128, 256, 16, 16, 256, 8, 16, 3;1"   # the same with half the barriers
    "t16x8;128, 128, 8, 32, 128, 16, 8, 4;1"   # 128 threads of 16x8: blocks of 4 warps, three an SM if <= 168 regs
    "b256;256, 128, 16, 16, 128, 8, 8, 3, kOneBlockAnSM;1"   # 16 warps in one block: 3/4 of the global loads an FMA
    "t8x16_sw;128, 256, 8, 16, 256, 8, 16, 4, kBlockSwizzle;1"   # 8x16 tiles, one block an SM: L2 order matters more?
)

if [[ " $steps " == *" prepare "* ]]; then
    rm -rf "$SWEEP" && mkdir -p "$SWEEP" && cp -r sgemm kernels benchmarks pyproject.toml asv.conf.json "$SWEEP/"
    for candidate in "${candidates[@]}"; do
        IFS=';' read -r label parameters k_multiple <<< "$candidate"
        cat >> "$SWEEP/sgemm/catalogue.toml" <<TOML

[[kernel]]
name = "fp32/sweep_$label"
technique = "scratch candidate for the FP32 ladder's 85% on sm_90"
source = "fp32_async.cu"
entry = "gemm_async<$parameters>"
multiple_of = { m = 1, n = 4, k = $k_multiple }
min_compute_capability = 80
TOML
    done
    echo "prepared $SWEEP with ${#candidates[@]} candidates" | tee -a "$OUT/summary.txt"
fi
sweep_kernels=()
for candidate in "${candidates[@]}"; do sweep_kernels+=(-k "fp32/sweep_${candidate%%;*}"); done

if [[ " $steps " == *" check "* || " $steps " == *" bench "* ]]; then
    ls .whl/*.whl | grep -v -e numpy- -e nvidia_ml_py- | xargs python3 -m pip install -q --no-index --no-deps \
        --no-compile --target /tmp/site 2>/dev/null
    export PYTHONPATH=/tmp/site PIP_NO_INDEX=1 PIP_FIND_LINKS=$src/.whl PYTHONUNBUFFERED=1
    site=$(python3 -c 'import sysconfig; print(sysconfig.get_paths()["purelib"])')
    export SGEMM_CUDA_SITE="$site:/tmp/site"
    nvidia-smi --query-gpu=index,name,driver_version,clocks.sm,clocks.max.sm,power.draw,power.limit,temperature.gpu \
        --format=csv | tee -a "$OUT/summary.txt"
    echo "checkout: $(git rev-parse --short HEAD 2>/dev/null || echo unknown)$(git diff --quiet 2>/dev/null || echo ' + uncommitted changes')" \
        | tee -a "$OUT/summary.txt"
    cd "$SWEEP"
fi
if [[ " $steps " == *" check "* ]]; then
    SECONDS=0
    python3 -m sgemm check "${sweep_kernels[@]}" --shape 4096x4096x4096 --shape 1000x1028x517 \
        --shape 1000x1028x516 > "$OUT/check.txt" 2>&1
    echo "check: exit $? after ${SECONDS} s: $(tail -n 1 "$OUT/check.txt")" | tee -a "$OUT/summary.txt"
fi
if [[ " $steps " == *" bench "* ]]; then
    SECONDS=0
    python3 -m sgemm bench -k fp32/cublas -k fp32/async_multistage "${sweep_kernels[@]}" --size 4096 --size 8192 \
        --versus-baseline --json "$OUT/sweep.json" > "$OUT/sweep.txt" 2> "$OUT/sweep.log"
    echo "bench: exit $? after ${SECONDS} s" | tee -a "$OUT/summary.txt"
    cat "$OUT/sweep.txt" | tee -a "$OUT/summary.txt"
fi
for candidate in "${candidates[@]}"; do
    IFS=';' read -r label parameters _ <<< "$candidate"
    echo "fp32/sweep_$label = gemm_async<$parameters>"
done | tee -a "$OUT/summary.txt"
cd "$src"
if [[ " $steps " == *" check "* || " $steps " == *" bench "* ]]; then
    nvidia-smi --query-gpu=clocks.sm,power.draw,temperature.gpu,clocks_throttle_reasons.active --format=csv \
        | tee -a "$OUT/summary.txt"
fi
