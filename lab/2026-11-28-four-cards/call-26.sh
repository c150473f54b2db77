#!/usr/bin/env bash
# For the next host of four H100s, after call 25 (written 2026-11-28 on the CPU box; not yet run), with call 25's
# learn4096.tar.gz in .hist/: the Hopper ladder and its controls at 8192 learned the same way (25 rounds over the four
# cards, run.sh learn-8192, with call 25's rounds), giving the whole file; then, judged with it, three A/A gates of
# the Hopper ladder at 8192 at once, one per card 0-2 (card 0 then gates the tile-order change with default
# options), while card 3 reads the tile-order change with the independent timer in both regimes (memset back to
# back, at the cap; memset then 450 us idle, off it), three processes a kernel at 4096; then the A/A gate with
# --gpus 4.
# Carried: .whl, .bundle/main.bundle, .hist. Results: $OUT/<job>.tar.gz and the noise file.
jobs=/tmp/jobs26
source lab/2026-11-28-four-cards/prologue.sh
gates=lab/2026-11-28-gate-scale-on-the-gpu/run.sh
mkdir -p $jobs/learn8192 $jobs/aa0 $jobs/aa1 $jobs/aa2 $jobs/events $jobs/gpus4 $jobs/tile /tmp/call25
tar -xzf .hist/learn4096.tar.gz -C /tmp/call25 && tar -xzf /tmp/call25/learn4096/phaselearn-4096.tar.gz -C /tmp/call25
CARDS=0,1,2,3 LEARN_ROUNDS=25 LEARN_LIMIT_S=200 LEARNED_FROM=/tmp/call25/rounds-learn-4096 OUT=$jobs/learn8192 \
    timeout 230 bash $gates learn-8192 > $jobs/learn8192/run.log 2>&1
noise=$jobs/learn8192/noise-nvidia-h100-80gb-hbm3.json
cp $noise "$OUT/" 2>/dev/null
CARD=0 AA_LIMIT_S=150 NOISE=$noise OUT=$jobs/aa0 timeout 180 bash $gates aa > $jobs/aa0/run.log 2>&1 \
    && CARD=0 TILE_LIMIT_S=100 OUT=$jobs/tile timeout 130 bash $gates tile > $jobs/tile/run.log 2>&1 &
for card in 1 2; do
    CARD=$card AA_LIMIT_S=150 NOISE=$noise OUT=$jobs/aa$card timeout 180 bash $gates aa > $jobs/aa$card/run.log 2>&1 &
done
for how in memset memset+idle; do
    CARD=3 EVENTS_FLUSH=$how SIZES=4096 OUT=$jobs/events timeout 130 bash $gates events-tile >> $jobs/events/run.log 2>&1
done &
wait
CARDS=0,1,2,3 AA_LIMIT_S=90 NOISE=$noise OUT=$jobs/gpus4 timeout 110 bash $gates aa-all > $jobs/gpus4/run.log 2>&1
pack learn8192 aa0 aa1 aa2 events gpus4 tile
for job in learn8192 aa0 aa1 aa2 events gpus4 tile; do
    echo "== $job"; grep -h -e ' gate ' -e 'noise:' -e 'events ' $jobs/$job/summary.txt | cut -c1-220
done
