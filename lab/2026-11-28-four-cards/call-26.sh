#!/usr/bin/env bash
# For the next host of four H100s, after call 25's two parts (written 2026-11-28 on the CPU box; not yet run), in
# three parts, one device command each, each packing its results before the command's 600 s (call 27 lost a whole
# call by packing only at its end):
#   call-26.sh learn  (carry .whl, .bundle, .hist with learn4096-a.tar.gz and learn4096-b.tar.gz): the Hopper ladder
#       and its controls at 8192 learned the same way (25 rounds over the four cards, cut at 480 s; a cut learn keeps
#       its rounds, call 28), `sgemm noise` over them and call 25's rounds: the whole file, $OUT/noise-*.json, and
#       $OUT/learn8192.tar.gz (keep it in .hist/ for the next two parts);
#   call-26.sh gates  (carry .whl, .bundle, .hist): judged with that file, three A/A gates of the Hopper ladder at 8192
#       at once, one per card 0-2 (card 0 then gates the tile-order change with default options), while card 3 reads
#       the tile-order change with the independent timer in both regimes (memset back to back, at the cap; memset
#       then 450 us idle, off it), three processes a kernel at 4096;
#   call-26.sh gpus4  (carry .whl, .bundle, .hist): the same A/A gate with --gpus 4.
# Results: $OUT/<job>.tar.gz.
part=${1:?usage: call-26.sh learn|gates|gpus4}
jobs=/tmp/jobs26
source lab/2026-11-28-four-cards/prologue.sh
gates=lab/2026-11-28-gate-scale-on-the-gpu/run.sh
noise=$jobs/learn8192/noise-${MACHINE:-nvidia-h100-80gb-hbm3}.json  # MACHINE=nvidia-h200 for four H200s, as in call-25.sh
if [[ $part != learn ]]; then
    mkdir -p $jobs && tar -xzf .hist/learn8192.tar.gz -C $jobs
fi
case $part in
learn)
    mkdir -p $jobs/learn8192
    for half in a b; do
        mkdir -p /tmp/call25$half && tar -xzf .hist/learn4096-$half.tar.gz -C /tmp/call25$half \
            && tar -xzf /tmp/call25$half/learn4096-$half/phaselearn-4096.tar.gz -C /tmp/call25$half
    done
    CARDS=0,1,2,3 LEARN_ROUNDS=25 LEARN_LIMIT_S=480 OUT=$jobs/learn8192 \
        LEARNED_FROM="/tmp/call25a/rounds-learn-4096 /tmp/call25b/rounds-learn-4096" \
        timeout 520 bash $gates learn-8192 > $jobs/learn8192/run.log 2>&1
    cp $noise "$OUT/" 2>/dev/null
    done_jobs=(learn8192)
    ;;
gates)
    mkdir -p $jobs/aa0 $jobs/aa1 $jobs/aa2 $jobs/events $jobs/tile
    CARD=0 AA_LIMIT_S=260 NOISE=$noise OUT=$jobs/aa0 timeout 280 bash $gates aa > $jobs/aa0/run.log 2>&1 \
        && CARD=0 TILE_LIMIT_S=180 OUT=$jobs/tile timeout 200 bash $gates tile > $jobs/tile/run.log 2>&1 &
    for card in 1 2; do
        CARD=$card AA_LIMIT_S=260 NOISE=$noise OUT=$jobs/aa$card timeout 280 bash $gates aa > $jobs/aa$card/run.log 2>&1 &
    done
    for how in memset memset+idle; do
        CARD=3 EVENTS_FLUSH=$how SIZES=4096 OUT=$jobs/events timeout 200 bash $gates events-tile >> $jobs/events/run.log 2>&1
    done &
    wait
    done_jobs=(aa0 aa1 aa2 events tile)
    ;;
gpus4)
    mkdir -p $jobs/gpus4
    CARDS=0,1,2,3 AA_LIMIT_S=300 NOISE=$noise OUT=$jobs/gpus4 timeout 320 bash $gates aa-all > $jobs/gpus4/run.log 2>&1
    done_jobs=(gpus4)
    ;;
*)
    echo "call-26.sh: unknown part '$part' (learn, gates or gpus4)" >&2; exit 2 ;;
esac
pack "${done_jobs[@]}"
for job in "${done_jobs[@]}"; do
    echo "== $job"; grep -h -e ' gate ' -e 'noise:' -e 'events ' $jobs/$job/summary.txt | cut -c1-220
done
