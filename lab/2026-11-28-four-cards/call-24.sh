#!/usr/bin/env bash
# The twenty-fourth device call, on one card: the GPU tests of the packages whose code changed in this session (the
# gate's outlier rule, the history's estimate, the rounds), then an A/A gate of the Hopper ladder and its controls at
# 8192, timing forced, judged with the outlier rule as changed (run.sh aa, the noise file main holds).
# Carried: .whl, .bundle/main.bundle. Each job's results come back as $OUT/<job>.tar.gz.
jobs=/tmp/jobs24
source lab/2026-11-28-four-cards/prologue.sh
mkdir -p $jobs/pytest $jobs/aa
( export PYTHONPATH=/tmp/site CUDA_VISIBLE_DEVICES=0
  site=$(python3 -c 'import sysconfig; print(sysconfig.get_paths()["purelib"])')
  SGEMM_CUDA_SITE="$site:/tmp/site" timeout 100 python3 -m pytest -q -m gpu tests/gate tests/rounds tests/history \
      tests/bisect -p no:cacheprovider > $jobs/pytest/pytest-gpu.txt 2>&1
  echo "exit $?" >> $jobs/pytest/pytest-gpu.txt )
CARD=0 AA_LIMIT_S=170 OUT=$jobs/aa timeout 200 bash lab/2026-11-28-gate-scale-on-the-gpu/run.sh aa > $jobs/aa/run.log 2>&1
pack pytest aa
echo "== pytest"; tail -n 3 $jobs/pytest/pytest-gpu.txt
echo "== aa"; grep -h ' gate ' $jobs/aa/summary.txt | sed 's/ (cards.*): exit/: exit/'
for report in /tmp/keep-aa-0/*.md; do
    grep -h -e '^- Base' "$report" | head -1
    grep -h 'NOT POWERED\|REGRESSION\|IMPROVEMENT\|AMBIGUOUS\|outlier' "$report" | cut -c1-220 | head -12
done
