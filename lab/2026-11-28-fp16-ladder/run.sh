#!/usr/bin/env bash
# Seed 001's FP16 mma.sync ladder continued (kernels/fp16_mma_pipelined.cu) on one GPU. Steps (arguments, default
# all), each under its own time limit so that one that overruns leaves the others' results:
#   tests     the GPU tests of the new kernels alone: each against FP64 at the edges of the shapes it claims, and
#             with alpha and beta (tests/measuring/test_verify.py);
#   ladder    `sgemm bench --versus-baseline` (verified first, then NVBench with the L2 flushed before every launch,
#             then paired with cuBLAS in one process, L2 warm and flushed) of fp16/cublas, fp16/mma_unrolled and each
#             new step, at 4096 and at 8192, one bench run per size;
#   variants  the tile configurations of variants.toml beside fp16/mma_grouped and fp16/cublas (NVBench alone),
#             appended to a scratch copy of the catalogue, so that the next run can choose among them.
# Run from the repository root with .whl (the offline wheelhouse) carried; results under $OUT. Limits in seconds:
# TESTS_S, LADDER_S (each size), VARIANTS_S.
set -uo pipefail
OUT=${OUT:-$PWD/out}
mkdir -p "$OUT"
src=$PWD
here=$src/lab/2026-11-28-fp16-ladder
steps=${*:-tests ladder variants}
ls .whl/*.whl | grep -v -e numpy- -e nvidia_ml_py- | xargs python3 -m pip install -q --no-index --no-deps \
    --no-compile --target /tmp/site 2>/dev/null
export PYTHONPATH=/tmp/site PIP_NO_INDEX=1 PIP_FIND_LINKS=$src/.whl PYTHONUNBUFFERED=1
site=$(python3 -c 'import sysconfig; print(sysconfig.get_paths()["purelib"])')
export SGEMM_CUDA_SITE="$site:/tmp/site"
summary=$OUT/summary.txt
nvidia-smi --query-gpu=index,name,driver_version,clocks.sm,clocks.max.sm,power.draw,power.limit,temperature.gpu \
    --format=csv | tee -a "$summary"
echo "checkout: $(git -C "$src" rev-parse --short HEAD 2>/dev/null || echo 'no git') $(git -C "$src" status \
    --porcelain 2>/dev/null | grep -q . && echo '(with uncommitted changes)')" | tee -a "$summary"
new="fp16/mma_async fp16/mma_async_k16 fp16/mma_wide fp16/mma_fragment_buffered fp16/mma_grouped"
kernels() { for name in "$@"; do printf -- '-k %s ' "$name"; done; }

if [[ " $steps " == *" tests "* ]]; then
    SECONDS=0
    timeout "${TESTS_S:-75}" python3 -m pytest -q -m gpu tests/measuring/test_verify.py -p no:cacheprovider \
        -k "mma_async or mma_wide or mma_fragment_buffered or mma_grouped" -rs > "$OUT/pytest-gpu.txt" 2>&1
    echo "GPU tests of the new kernels: exit $? after ${SECONDS} s: $(tail -n 1 "$OUT/pytest-gpu.txt")" \
        | tee -a "$summary"
    grep -E "FAILED|Error|error" "$OUT/pytest-gpu.txt" | head -n 20
fi
if [[ " $steps " == *" ladder "* ]]; then
    for size in 4096 8192; do
        SECONDS=0
        # shellcheck disable=SC2046  # one -k per kernel
        timeout "${LADDER_S:-130}" python3 -m sgemm bench $(kernels fp16/cublas fp16/mma_unrolled $new) \
            --size "$size" --versus-baseline --json "$OUT/ladder-$size.json" > "$OUT/ladder-$size.txt" \
            2> "$OUT/ladder-$size.log"
        echo "ladder at $size: exit $? after ${SECONDS} s" | tee -a "$summary"
        cat "$OUT/ladder-$size.txt" | tee -a "$summary"
    done
fi
if [[ " $steps " == *" variants "* ]]; then
    rm -rf /tmp/variants && mkdir /tmp/variants
    cp -r kernels sgemm benchmarks pyproject.toml asv.conf.json /tmp/variants/
    cat "$here/variants.toml" >> /tmp/variants/sgemm/catalogue.toml
    tried=$(grep '^name = ' "$here/variants.toml" | cut -d'"' -f2)
    SECONDS=0
    # shellcheck disable=SC2046,SC2086
    (cd /tmp/variants && timeout "${VARIANTS_S:-100}" python3 -m sgemm bench \
        $(kernels fp16/cublas fp16/mma_grouped $tried) --size 4096 --size 8192 --json "$OUT/variants.json" \
        > "$OUT/variants.txt" 2> "$OUT/variants.log")
    echo "variants: exit $? after ${SECONDS} s" | tee -a "$summary"
    cat "$OUT/variants.txt" | tee -a "$summary"
fi
nvidia-smi --query-gpu=clocks.sm,power.draw,temperature.gpu,clocks_throttle_reasons.active --format=csv \
    | tee -a "$summary"
