#!/usr/bin/env bash
# Do 128 x 320 tiles, as cuBLAS runs at 8192, buy speed at the power cap? PRECISION/wgmma_wide_tile (entries.toml,
# appended to a scratch copy of the checkout's catalogue) against PRECISION/wgmma_lean_loop (the same kernel with
# 128 x 256 tiles and four stages) and cuBLAS: its GPU tests first (FP64 at the edges of the shapes it claims, N
# any multiple of 8, so partial tiles in N; alpha and beta), then tools/acceptance/sustained.py at SIZE (8192 by
# default; NVBench with L2 flushed, each case at least SECONDS_A_CASE of launches, then paired), PROCESSES
# processes. Run from the repository root with .whl carried; results under $OUT. The kernel's variant is not in
# main: wide-tile.patch adds it to the scratch copy.
set -uo pipefail
OUT=${OUT:-$PWD/out}
SCRATCH=${SCRATCH:-/tmp/wide-tile}
PROCESSES=${PROCESSES:-4}
SECONDS_A_CASE=${SECONDS_A_CASE:-6}
SIZE=${SIZE:-8192}
PRECISION=${PRECISION:-fp16}
SUSTAINED_TIMEOUT_S=${SUSTAINED_TIMEOUT_S:-300}
source lab/scratch-with-entries.sh lab/2026-11-29-wide-tile/entries.toml
# The kernel's 320-column variant, the catalogue's tma_overhangs_n and the resource check's rule for it, as measured
# (against main at dc9311f; the run itself had them in its working tree, not as a patch).
patch -p1 -s < "$CHECKOUT/lab/2026-11-29-wide-tile/wide-tile.patch" || { echo "the patch does not apply"; exit 1; }
SECONDS=0
timeout 150 python3 -m pytest -q -m gpu tests/measuring/test_verify.py -k wgmma_wide_tile -p no:cacheprovider -rs \
    > "$OUT/verify.txt" 2>&1
verified=$?
echo "GPU tests of the entries: exit $verified after ${SECONDS} s: $(tail -n 1 "$OUT/verify.txt")" \
    | tee -a "$OUT/summary.txt"
[ "$verified" -eq 0 ] || { grep -E "^E |Error" "$OUT/verify.txt" | head -n 20 | tee -a "$OUT/summary.txt";
                           echo "not timed: the checks did not pass" | tee -a "$OUT/summary.txt"; exit 1; }
SECONDS=0
timeout "$SUSTAINED_TIMEOUT_S" python3 -m tools.acceptance.sustained "$PRECISION/wgmma_wide_tile" \
    "$PRECISION/wgmma_lean_loop" --size "$SIZE" --processes "$PROCESSES" --seconds "$SECONDS_A_CASE" \
    --json "$OUT/sustained-$PRECISION-$SIZE.json" > "$OUT/sustained-$PRECISION-$SIZE.txt" 2>&1
echo "sustained $PRECISION $SIZE: exit $? after ${SECONDS} s" | tee -a "$OUT/summary.txt"
tail -n 12 "$OUT/sustained-$PRECISION-$SIZE.txt" | tee -a "$OUT/summary.txt"
