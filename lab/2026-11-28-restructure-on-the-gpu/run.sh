#!/usr/bin/env bash
# The package's regrouping (commit 8eee5b0) on a four-GPU box, three things at once, each on cards of its own:
#   GPU 2: the gate across the regrouping commit (6a5b490 -> 8eee5b0) at 4096 and 8192, default options otherwise;
#   GPU 3: every GPU test of the checkout;
#   GPUs 0-1: `sgemm history --first 3 --gpus 2` over a scratch branch whose first-parent line is 6a5b490 (before the
#            regrouping), 8eee5b0 (the regrouping) and the checkout's own tree on top of it, then the site published.
# Run from the repository root of a checkout of main with .whl (the offline wheelhouse) and .npm-cache (the site's
# libraries' tarballs, sgemm.site.vendor.fill_cache); results under $OUT.
set -uo pipefail
OUT=${OUT:-$PWD/out}
mkdir -p "$OUT"
src=$PWD
ls .whl/*.whl | grep -v -e numpy- -e nvidia_ml_py- | xargs python3 -m pip install -q --no-index --no-deps \
    --no-compile --target /tmp/site 2>/dev/null
export PYTHONPATH=/tmp/site ASV_PYTHONPATH=/tmp/site PIP_NO_INDEX=1 PIP_FIND_LINKS=$src/.whl PYTHONUNBUFFERED=1
site=$(python3 -c 'import sysconfig; print(sysconfig.get_paths()["purelib"])')
export SGEMM_CUDA_SITE="$site:/tmp/site"
export GIT_AUTHOR_NAME=lab GIT_AUTHOR_EMAIL=lab@box GIT_COMMITTER_NAME=lab GIT_COMMITTER_EMAIL=lab@box
nvidia-smi --query-gpu=index,name,driver_version,clocks.sm,power.draw,power.limit,temperature.gpu --format=csv \
    | tee "$OUT/summary.txt"
head=$(git rev-parse HEAD)

# The gate, from a clone of the checkout (its code is the gate's), on card 2.
git clone -q "$src" /tmp/gate-repo && cd /tmp/gate-repo && git checkout -q "$head"
( SECONDS=0; CUDA_VISIBLE_DEVICES=2 python3 -m sgemm gate 6a5b490 8eee5b0 --size 4096 --size 8192 --no-sweep \
      --work /tmp/gate-work --report "$OUT/gate.md" > "$OUT/gate.log" 2>&1
  echo "gate: exit $? after ${SECONDS} s" >> "$OUT/summary.txt" ) &
gate_pid=$!

# The GPU tests, on card 3.
cd "$src"
( SECONDS=0; CUDA_VISIBLE_DEVICES=3 python3 -m pytest -q -m gpu tests -p no:cacheprovider > "$OUT/pytest-gpu.txt" 2>&1
  echo "GPU tests: exit $? after ${SECONDS} s: $(tail -n 1 "$OUT/pytest-gpu.txt")" >> "$OUT/summary.txt" ) &
tests_pid=$!

# The history over three commits spanning the regrouping, on cards 0 and 1.
git clone -q "$src" /tmp/hist && cd /tmp/hist
git checkout -q -B main 8eee5b0
git reset -q --hard "$(git commit-tree "$head^{tree}" -p 8eee5b0 -m "the tree of main at ${head:0:12}")"
git log --first-parent --format='%h %s' -3 | cut -c1-100 >> "$OUT/summary.txt"
SECONDS=0
python3 -m sgemm history --first 3 --gpus 2 --results /tmp/hist-results --html /tmp/hist-html \
    --work /tmp/hist-work --npm-cache "$src/.npm-cache" > "$OUT/history.log" 2>&1
echo "history: exit $? after ${SECONDS} s" >> "$OUT/summary.txt"
# Every series of the three commits: a benchmark and parameters with a figure at some commit, and at how many.
python3 - /tmp/hist-results "$OUT/series.txt" <<'PY'
import collections, json, math, sys
from pathlib import Path
from asv.results import iter_results
counts, commits = collections.Counter(), set()
for results in iter_results(sys.argv[1]):
    commits.add(results.commit_hash)
    for name in results.get_all_result_keys():
        params = results.get_result_params(name)
        for index, value in enumerate(results.get_result_value(name, params)):
            if value is not None and not (isinstance(value, float) and math.isnan(value)):
                counts[(name, index)] += 1
by = collections.Counter(counts.values())
text = (f"commits with results: {len(commits)}\nseries with a figure: {len(counts)}\n"
        + "".join(f"  at {n} of the commits: {by[n]}\n" for n in sorted(by)))
Path(sys.argv[2]).write_text(text); print(text)
PY
wait "$gate_pid" "$tests_pid"
cp /tmp/hist-html/notices.json "$OUT/notices.json" 2>/dev/null
tail -n 25 "$OUT/history.log"
head -n 12 "$OUT/gate.md"
cat "$OUT/summary.txt"
