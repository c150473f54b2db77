#!/usr/bin/env bash
# On a host of four H200 (the H200 counterpart of call 26 without the tile-order and events jobs, which are the
# H100's questions; call 27 brought nothing back, so this one stands alone): the Hopper ladder and its controls at
# 8192 learned with 25 rounds over the four cards (entries of 24 degrees of freedom at 8192); then, judged with it and
# the gate's default options (--extra-rounds 30 since c989e1f), three A/A gates of the Hopper ladder at 8192 at once,
# one per card 0-2, while card 3 stays idle; then the same A/A gate with --gpus 4.
# Carried: .whl, .bundle/main.bundle. Results: $OUT/<job>.tar.gz and the noise file.
jobs=/tmp/jobs28
source lab/2026-11-28-four-cards/prologue.sh
gates=lab/2026-11-28-gate-scale-on-the-gpu/run.sh
mkdir -p $jobs/learn8192 $jobs/aa0 $jobs/aa1 $jobs/aa2 $jobs/gpus4
CARDS=0,1,2,3 MACHINE=nvidia-h200 LEARN_ROUNDS=25 LEARN_LIMIT_S=200 OUT=$jobs/learn8192 \
    timeout 230 bash $gates learn-8192 > $jobs/learn8192/run.log 2>&1
noise=$jobs/learn8192/noise-nvidia-h200.json
cp $noise "$OUT/" 2>/dev/null
pack learn8192
for card in 0 1 2; do
    CARD=$card AA_LIMIT_S=150 NOISE=$noise OUT=$jobs/aa$card timeout 170 bash $gates aa > $jobs/aa$card/run.log 2>&1 &
done
wait
pack aa0 aa1 aa2
CARDS=0,1,2,3 AA_LIMIT_S=90 NOISE=$noise OUT=$jobs/gpus4 timeout 110 bash $gates aa-all > $jobs/gpus4/run.log 2>&1
pack gpus4
for job in learn8192 aa0 aa1 aa2 gpus4; do
    echo "== $job"; grep -h -e ' gate ' -e 'noise:' $jobs/$job/summary.txt | cut -c1-220
done
