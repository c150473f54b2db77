#!/usr/bin/env bash
# The twentieth device call, on a host of four cards: three A/A gates of the Hopper ladder at 8192 at once, timing
# forced, one per card 0-2 (run.sh aa, judged with the noise file main holds for the card); at the same time the
# common.cuh edit gated at 4096 on card 3 alone (run.sh 4). When its A/A gate ends, card 0 gates the tile-order
# change (run.sh tile), card 1 the 800-cycle epilogue spin (run.sh spin), and card 2 asks whether the tile order
# shows only when the flush leaves the card idle (tile-order-flush/run.sh: ab_events with fill, memset, and memset
# followed by 450 us of idle, two processes each kernel, the SM clock and power read while timed).
# Carried: .whl, .bundle/main.bundle. Each job's results come back as $OUT/<job>.tar.gz.
jobs=/tmp/jobs20
source lab/2026-11-28-four-cards/prologue.sh
gates=lab/2026-11-28-gate-scale-on-the-gpu/run.sh
mkdir -p $jobs/aa0 $jobs/aa1 $jobs/aa2 $jobs/common $jobs/tile $jobs/spin $jobs/flush
CARD=0 AA_LIMIT_S=240 OUT=$jobs/aa0 bash $gates aa > $jobs/aa0/run.log 2>&1 \
    && CARD=0 TILE_LIMIT_S=250 OUT=$jobs/tile bash $gates tile > $jobs/tile/run.log 2>&1 &
CARD=1 AA_LIMIT_S=240 OUT=$jobs/aa1 bash $gates aa > $jobs/aa1/run.log 2>&1 \
    && CARD=1 SPIN_LIMIT_S=250 OUT=$jobs/spin bash $gates spin > $jobs/spin/run.log 2>&1 &
CARD=2 AA_LIMIT_S=240 OUT=$jobs/aa2 bash $gates aa > $jobs/aa2/run.log 2>&1 \
    && CUDA_VISIBLE_DEVICES=2 REPEATS=2 EVENT_FLUSHES="fill memset memset+idle" PAIRED_FLUSHES="" OUT=$jobs/flush \
        timeout 240 bash lab/2026-11-28-tile-order-flush/run.sh > $jobs/flush/run.log 2>&1 &
CARD=3 COMMON_LIMIT_S=480 OUT=$jobs/common bash $gates 4 > $jobs/common/run.log 2>&1 &
wait
pack aa0 aa1 aa2 common tile spin flush
for job in aa0 aa1 aa2 common tile spin; do
    echo "== $job"; grep -h ' gate ' $jobs/$job/summary.txt | sed 's/ (cards.*): exit/: exit/'
done
for report in /tmp/keep-*/*.md; do
    echo "== $report"; grep -h -e '^- Base' "$report"
    grep -h 'NOT POWERED\|REGRESSION\|IMPROVEMENT\|AMBIGUOUS\|outlier' "$report" | cut -c1-240 | head -12
done
echo "== flush"; cat $jobs/flush/tile-flush/summary.txt
