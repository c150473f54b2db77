#!/usr/bin/env bash
# Why the gate and the independent cold-L2 timer disagree on the tile-order change (kGroupRows 8 -> 4 in
# kernels/wgmma_specialized.cu) at 4096: the gate read +0.16% (FP16) and +0.21% (BF16), tools.acceptance.ab_events
# +0.75%. Two things differ between them: how L2 is flushed (the paired timer: cudaMemsetAsync; ab_events: a CuPy
# fill kernel) and how launches are grouped (paired blocks of several launches of one build; ab_events alternates the
# builds every launch). Each of the four combinations, twice, on one card (CUDA_VISIBLE_DEVICES, else card 0):
# ab_events with --flush-with fill|memset, and the paired timer (probe.py --trees) with --flush-with fill|memset|kernel
# (a 16-byte-store kernel of the probe's own).
# REPEATS (2), EVENT_FLUSHES (fill memset; also memset+idle: the card idle IDLE_US after the memset, the duty cycle
# of fill without its traffic) and PAIRED_FLUSHES (fill memset kernel; also timer: the timer's own, and
# read) choose what runs. Run from the repository root with .whl carried; results under $OUT/tile-flush/.
set -uo pipefail
OUT=${OUT:-$PWD/out}/tile-flush
mkdir -p "$OUT"
src=$PWD
[ -d /tmp/site/asv ] || ls .whl/*.whl | grep -v -e numpy- -e nvidia_ml_py- \
    | xargs python3 -m pip install -q --no-index --no-deps --no-compile --target /tmp/site 2>/dev/null
export PYTHONPATH=/tmp/site:$src PYTHONUNBUFFERED=1
trees=/tmp/tile-flush-trees
rm -rf $trees && mkdir -p $trees/main/sgemm $trees/tile/sgemm  # a tree: kernels/ and sgemm/catalogue.toml
for tree in main tile; do cp -r kernels $trees/$tree/ && cp sgemm/catalogue.toml $trees/$tree/sgemm/; done
python3 - $trees/tile/kernels/wgmma_specialized.cu <<'PY'
import pathlib, sys
p = pathlib.Path(sys.argv[1]); t = p.read_text()
old = "        constexpr int kGroupRows = 8;\n"
assert t.count(old) == 1, "the tile order's line is not where it was"
p.write_text(t.replace(old, "        constexpr int kGroupRows = 4;\n"))
PY
for kernel in fp16/wgmma_grouped_tma_store bf16/wgmma_grouped_tma_store; do
    for repeat in $(seq "${REPEATS:-2}"); do
        for how in ${EVENT_FLUSHES-fill memset}; do
            # memset+idle: cudaMemsetAsync, then the card left idle IDLE_US (default 450: about what fill takes)
            idle=() && [[ $how == *+idle ]] && idle=(--idle-us "${IDLE_US:-450}")
            timeout 90 python3 -m tools.acceptance.ab_events $trees/main $trees/tile $kernel 4096 --flush-l2 \
                --flush-with "${how%+idle}" "${idle[@]}" >> "$OUT/events.jsonl" 2>> "$OUT/events.err"
        done
        for how in ${PAIRED_FLUSHES-fill memset kernel}; do
            timeout 90 python3 lab/2026-11-28-paired-timer-idle/probe.py $kernel 4096 --trees $trees/main $trees/tile \
                --flush-with $how >> "$OUT/paired.jsonl" 2>> "$OUT/paired.err"
        done
    done
done
python3 - "$OUT" <<'PY' | tee -a "$OUT/summary.txt"
import json, pathlib, sys
out = pathlib.Path(sys.argv[1])
for name in ("events", "paired"):
    path = out / f"{name}.jsonl"
    for line in path.read_text().splitlines() if path.exists() else []:
        d = json.loads(line)
        print(name, d.get("kernel") or d.get("case"), d["l2"], f"idle {d.get('idle_us', 0)} us", f"{d['ratio']:.4f}",
              d.get("interval", ""), f"SM {d.get('sm_clock_mhz_median')} MHz, {d.get('power_w_median')} W",
              f"base {d['base_us']:.1f} us, flush {d['flush_us_a_launch']:.1f} us a launch" if "base_us" in d else "")
PY
