#!/usr/bin/env bash
# The package's regrouping (commit 8eee5b0) on a GPU box. Steps (arguments, default all):
#   gate     the gate across the regrouping commit (6a5b490 -> 8eee5b0) at 4096 and 8192, default options otherwise;
#   tests    every GPU test of the checkout;
#   history  `sgemm history --first 3 --gpus all` over a scratch branch whose first-parent line is 6a5b490 (before
#            the regrouping), 8eee5b0 (the regrouping) and the checkout's own tree on top of it, then the site.
# Run from the repository root with .whl (the offline wheelhouse), .npm-cache (the site's libraries' tarballs,
# sgemm.site.vendor.fill_cache) and .bundle/main.bundle (`git bundle create .bundle/main.bundle main`: the device's
# copy of the checkout may not hold these commits). Results under $OUT.
set -uo pipefail
OUT=${OUT:-$PWD/out}
mkdir -p "$OUT"
src=$PWD
steps=${*:-gate tests history}
ls .whl/*.whl | grep -v -e numpy- -e nvidia_ml_py- | xargs python3 -m pip install -q --no-index --no-deps \
    --no-compile --target /tmp/site 2>/dev/null
# No ASV_PYTHONPATH: asv makes it the PYTHONPATH of each benchmark process, whose runner then drops it, and the
# linked CUDA stack with it.
export PYTHONPATH=/tmp/site PIP_NO_INDEX=1 PIP_FIND_LINKS=$src/.whl PYTHONUNBUFFERED=1
site=$(python3 -c 'import sysconfig; print(sysconfig.get_paths()["purelib"])')
export SGEMM_CUDA_SITE="$site:/tmp/site"
export GIT_AUTHOR_NAME=lab GIT_AUTHOR_EMAIL=lab@box GIT_COMMITTER_NAME=lab GIT_COMMITTER_EMAIL=lab@box
nvidia-smi --query-gpu=index,name,driver_version,clocks.sm,power.draw,power.limit,temperature.gpu --format=csv \
    | tee -a "$OUT/summary.txt"
origin=$src/.bundle/main.bundle
[ -f "$origin" ] || origin=$src
head=$(git ls-remote "$origin" refs/heads/main | cut -f1)
echo "checkout: main at $head" | tee -a "$OUT/summary.txt"

if [[ " $steps " == *" gate "* ]]; then
    rm -rf /tmp/gate-repo && git clone -q "$origin" /tmp/gate-repo && cd /tmp/gate-repo && git checkout -q "$head"
    SECONDS=0
    python3 -m sgemm gate 6a5b490 8eee5b0 --size 4096 --size 8192 --no-sweep --work /tmp/gate-work \
        --report "$OUT/gate.md" > "$OUT/gate.log" 2>&1
    echo "gate: exit $? after ${SECONDS} s" | tee -a "$OUT/summary.txt"
    head -n 8 "$OUT/gate.md"
    cd "$src"
fi
if [[ " $steps " == *" tests "* ]]; then
    SECONDS=0
    python3 -m pytest -q -m gpu tests -p no:cacheprovider > "$OUT/pytest-gpu.txt" 2>&1
    echo "GPU tests: exit $? after ${SECONDS} s: $(tail -n 1 "$OUT/pytest-gpu.txt")" | tee -a "$OUT/summary.txt"
fi
if [[ " $steps " == *" history "* ]]; then
    rm -rf /tmp/hist && git clone -q "$origin" /tmp/hist && cd /tmp/hist
    git checkout -q -B main 8eee5b0
    git reset -q --hard "$(git commit-tree "$head^{tree}" -p 8eee5b0 -m "the tree of main at ${head:0:12}")"
    git log --first-parent --format='%h %s' -3 | cut -c1-100 >> "$OUT/summary.txt"
    SECONDS=0
    timeout "${HISTORY_TIMEOUT_S:-540}" python3 -m sgemm history --first 3 --gpus all --results /tmp/hist-results --html /tmp/hist-html \
        --work /tmp/hist-work --npm-cache "$src/.npm-cache" > "$OUT/history.log" 2>&1
    echo "history: exit $? after ${SECONDS} s" | tee -a "$OUT/summary.txt"
    python3 -m tools.acceptance.estimate_error "$OUT/history.log" > "$OUT/estimate.txt" 2>&1
    echo "estimate: $(tail -n 1 "$OUT/estimate.txt")" | tee -a "$OUT/summary.txt"
    tar -czf "$OUT/results.tar.gz" -C /tmp hist-results
    for log in /tmp/hist-work/gpu-*/asv.log; do  # where each shard's time went, should it not finish
        echo "== $log" && tail -n 40 "$log"
    done > "$OUT/asv-logs.txt" 2>&1
    # Every series of the three commits: a benchmark's parameters with a figure at some commit, and at how many.
    python3 - /tmp/hist-results <<'PY' | tee -a "$OUT/summary.txt"
import collections, math, sys
from asv.results import iter_results
counts, commits = collections.Counter(), set()
for results in iter_results(sys.argv[1]):
    commits.add(results.commit_hash)
    for name in results.get_all_result_keys():
        for index, value in enumerate(results.get_result_value(name, results.get_result_params(name))):
            if value is not None and not (isinstance(value, float) and math.isnan(value)):
                counts[(name, index)] += 1
by = collections.Counter(counts.values())
print(f"commits with results: {len(commits)}; series with a figure: {len(counts)}; "
      + ", ".join(f"{by[n]} at {n} commits" for n in sorted(by)))
PY
    cp /tmp/hist-html/notices.json "$OUT/notices.json" 2>/dev/null
    tail -n 15 "$OUT/history.log"
fi
cat "$OUT/summary.txt"
