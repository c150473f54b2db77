#!/usr/bin/env bash
# The FP32 cp.async steps past fp32/double_buffer_split_b on one GPU (an H100 for issue 35's FP32 goal), about 6 min:
#   1. the GPU tests of the new kernels alone (each against FP64 at the edges of its shapes, alpha and beta);
#   2. `sgemm bench` of each new step, double_buffer_split_b and cuBLAS at 4096 and 8192: NVBench, L2 flushed, each
#      case in its own measurement, and --versus-baseline (paired with cuBLAS in one process, L2 warm and flushed);
#   3. (sweep) two to four sm_90 tile configurations of gemm_async, each as a scratch catalogue entry in a copy of
#      the checkout, verified and timed the same way, so that the next change can pick fp32/async_warptile's
#      tuned_entries.90.
# Steps as arguments (default: tests bench sweep). Run from the repository root with .whl (the offline wheelhouse)
# carried; results under $OUT: summary.txt, pytest-gpu.txt, bench.txt/.json, sweep.txt/.json.
set -uo pipefail
OUT=${OUT:-$PWD/out}
mkdir -p "$OUT"
src=$PWD
steps=${*:-tests bench sweep}
ls .whl/*.whl | grep -v -e numpy- -e nvidia_ml_py- | xargs python3 -m pip install -q --no-index --no-deps \
    --no-compile --target /tmp/site 2>/dev/null
export PYTHONPATH=/tmp/site PIP_NO_INDEX=1 PIP_FIND_LINKS=$src/.whl PYTHONUNBUFFERED=1
site=$(python3 -c 'import sysconfig; print(sysconfig.get_paths()["purelib"])')
export SGEMM_CUDA_SITE="$site:/tmp/site"
nvidia-smi --query-gpu=index,name,driver_version,clocks.sm,clocks.max.sm,power.draw,power.limit,temperature.gpu \
    --format=csv | tee -a "$OUT/summary.txt"
echo "checkout: $(git rev-parse --short HEAD 2>/dev/null || echo unknown)$(git diff --quiet 2>/dev/null || echo ' + uncommitted changes')" \
    | tee -a "$OUT/summary.txt"
NEW=(fp32/async_double_buffer fp32/async_multistage fp32/async_warptile)
BENCH_KERNELS=(-k fp32/cublas -k fp32/double_buffer_split_b)
for kernel in "${NEW[@]}"; do BENCH_KERNELS+=(-k "$kernel"); done

if [[ " $steps " == *" tests "* ]]; then
    SECONDS=0
    python3 -m pytest -q -m gpu tests/measuring/test_verify.py -k async -p no:cacheprovider -rs \
        > "$OUT/pytest-gpu.txt" 2>&1
    echo "GPU tests of the new kernels: exit $? after ${SECONDS} s: $(tail -n 1 "$OUT/pytest-gpu.txt")" \
        | tee -a "$OUT/summary.txt"
fi
if [[ " $steps " == *" bench "* ]]; then
    SECONDS=0
    python3 -m sgemm bench "${BENCH_KERNELS[@]}" --size 4096 --size 8192 --versus-baseline --json "$OUT/bench.json" \
        > "$OUT/bench.txt" 2> "$OUT/bench.log"
    echo "bench: exit $? after ${SECONDS} s" | tee -a "$OUT/summary.txt"
    cat "$OUT/bench.txt" | tee -a "$OUT/summary.txt"
fi
if [[ " $steps " == *" sweep "* ]]; then
    # Each candidate a scratch entry in a copy of the checkout (the checkout itself is left as it is). The first is
    # fp32/async_warptile's sm_90 entry as the catalogue has it, timed again beside the others in this process.
    rm -rf /tmp/sweep && mkdir /tmp/sweep && cp -r sgemm kernels benchmarks pyproject.toml asv.conf.json /tmp/sweep/
    candidates=(
        "k16_s4 128, 128, 16, 32, 64, 8, 8, 4"   # the catalogue's sm_90 entry
        "k16_s3 128, 128, 16, 32, 64, 8, 8, 3"   # one stage less: 50 KB a block
        "k8_w64x32_s3 128, 128, 8, 64, 32, 8, 8, 3"   # 8 x 4 lanes a warp, three stages
        "k8_128x256_s3 128, 256, 8, 64, 64, 8, 16, 3"   # 8x16 a thread: one block an SM, more FMAs a fragment
    )
    sweep_kernels=()
    for candidate in "${candidates[@]}"; do
        label=${candidate%% *} parameters=${candidate#* }
        cat >> /tmp/sweep/sgemm/catalogue.toml <<TOML

[[kernel]]
name = "fp32/sweep_$label"
technique = "scratch candidate for fp32/async_warptile on sm_90"
source = "fp32_async.cu"
entry = "gemm_async<$parameters>"
multiple_of = { m = 1, n = 4, k = 1 }
min_compute_capability = 80
TOML
        sweep_kernels+=(-k "fp32/sweep_$label")
    done
    cd /tmp/sweep
    SECONDS=0
    python3 -m sgemm check "${sweep_kernels[@]}" --shape 4096x4096x4096 --shape 1000x1028x517 > "$OUT/sweep-check.txt" 2>&1
    echo "sweep check: exit $? after ${SECONDS} s: $(tail -n 1 "$OUT/sweep-check.txt")" | tee -a "$OUT/summary.txt"
    SECONDS=0
    python3 -m sgemm bench -k fp32/cublas "${sweep_kernels[@]}" --size 4096 --size 8192 --versus-baseline \
        --json "$OUT/sweep.json" > "$OUT/sweep.txt" 2> "$OUT/sweep.log"
    echo "sweep bench: exit $? after ${SECONDS} s" | tee -a "$OUT/summary.txt"
    cat "$OUT/sweep.txt" | tee -a "$OUT/summary.txt"
    for candidate in "${candidates[@]}"; do echo "fp32/sweep_${candidate%% *} = gemm_async<${candidate#* }>"; done \
        | tee -a "$OUT/summary.txt"
    cd "$src"
fi
nvidia-smi --query-gpu=clocks.sm,power.draw,temperature.gpu,clocks_throttle_reasons.active --format=csv \
    | tee -a "$OUT/summary.txt"
