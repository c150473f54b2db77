#!/usr/bin/env bash
# For the next host of four H100s (written 2026-11-28 on the CPU box; not yet run): the H100's paired noise file
# learned again, with entries an outlier round cannot hide in (lab/2026-11-28-gate-outlier-rounds: an entry from
# fewer than nine rounds keeps any disturbed round it was given). This call, made twice (`call-25.sh a`, then
# `call-25.sh b`): an A/A gate of every kernel at 4096, timing forced, 12 rounds a case over the four cards
# (run.sh learn-4096), and `sgemm noise` over it; the two gates give 22 degrees of freedom a case. Twice because 25
# rounds in one call did not fit on four H200s (call 27: the learn's limit plus its setup reached the command's 600
# s, and nothing came back); each part's limits leave a minute for packing. Its tarball, carried back in .hist/ as
# learn4096-a.tar.gz and learn4096-b.tar.gz, feeds call 26.
# On four H200s instead, MACHINE=nvidia-h200 before both scripts (run.sh names the asv machine and the file by it).
# Carried: .whl, .bundle/main.bundle. Results: $OUT/learn4096-PART.tar.gz.
part=${1:?usage: call-25.sh a|b}
jobs=/tmp/jobs25$part
source lab/2026-11-28-four-cards/prologue.sh
mkdir -p $jobs/learn4096-$part
CARDS=0,1,2,3 LEARN_ROUNDS=12 LEARN_LIMIT_S=420 OUT=$jobs/learn4096-$part timeout 470 \
    bash lab/2026-11-28-gate-scale-on-the-gpu/run.sh learn-4096 > $jobs/learn4096-$part/run.log 2>&1
pack learn4096-$part
grep -h -e ' gate ' -e 'noise:' $jobs/learn4096-$part/summary.txt | sed 's/ (cards.*): exit/: exit/'
