#!/usr/bin/env bash
# For the next host of four H100s (written 2026-11-28 on the CPU box; not yet run): the H100's paired noise file
# learned again, with entries an outlier round cannot hide in (lab/2026-11-28-gate-outlier-rounds: an entry from
# fewer than nine rounds keeps any disturbed round it was given). This call: an A/A gate of every kernel at 4096,
# timing forced, 25 rounds a case over the four cards (run.sh learn-4096, LEARN_ROUNDS=25: 24 degrees of freedom a
# case from one gate), and `sgemm noise` over it. Its phase tarball, carried back in .hist/, feeds call 26.
# Carried: .whl, .bundle/main.bundle. Results: $OUT/learn4096.tar.gz.
jobs=/tmp/jobs25
source lab/2026-11-28-four-cards/prologue.sh
mkdir -p $jobs/learn4096
CARDS=0,1,2,3 LEARN_ROUNDS=25 LEARN_LIMIT_S=520 OUT=$jobs/learn4096 timeout 560 \
    bash lab/2026-11-28-gate-scale-on-the-gpu/run.sh learn-4096 > $jobs/learn4096/run.log 2>&1
pack learn4096
grep -h -e ' gate ' -e 'noise:' $jobs/learn4096/summary.txt | sed 's/ (cards.*): exit/: exit/'
