#!/usr/bin/env bash
# On a host of four H200 (no H100 lent; the H200 counterpart of call 25): the H200's paired noise file learned again
# with entries of 24 degrees of freedom (the shipped one has 3 at 4096 and 5 at 8192): an A/A gate of every kernel at
# 4096, timing forced, 25 rounds a case over the four cards (run.sh learn-4096), and `sgemm noise` over it. Its phase
# tarball, carried back in .hist/, feeds call 28.
# Carried: .whl, .bundle/main.bundle. Results: $OUT/learn4096.tar.gz.
# Run once (2026-11-28, 19:19-19:28 UTC): cut at its limit after about 22 rounds a case (README, calls 27-30).
jobs=/tmp/jobs27
source lab/2026-11-28-four-cards/prologue.sh
mkdir -p $jobs/learn4096
CARDS=0,1,2,3 MACHINE=nvidia-h200 LEARN_ROUNDS=25 LEARN_LIMIT_S=520 OUT=$jobs/learn4096 timeout 560 \
    bash lab/2026-11-28-gate-scale-on-the-gpu/run.sh learn-4096 > $jobs/learn4096/run.log 2>&1
pack learn4096
grep -h -e ' gate ' -e 'noise:' $jobs/learn4096/summary.txt | sed 's/ (cards.*): exit/: exit/'
