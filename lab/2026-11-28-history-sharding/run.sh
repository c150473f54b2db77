#!/usr/bin/env bash
# One commit's history on one GPU, then sharded over two, then over four, one run after another on an idle box
# (issue 32, item 6): each run's log (its progress lines with the time since it began and the estimate, and the
# timeline of its serial parts), the estimate's error at every line, the case sets compared and the over-reference
# track of each sharded run against the one-GPU run. Arguments: the GPU counts to run (default "1 2 4"; the first is
# the baseline the others are compared with); `compare 1 2 4` runs nothing and compares the results the runs before
# left: in /tmp on a box still warm, or, since a lent box starts bare at every call, the results-gpus-N.tar.gz each
# run writes to $OUT, carried back in a folder .hist/ of the checkout.
# Run from the repository root with .whl (the offline wheelhouse), .bundle/main.bundle (`git bundle create
# .bundle/main.bundle main`: the device's copy of the checkout may be stale) and, for the site, .npm-cache. Results
# under $OUT.
set -uo pipefail
OUT=${OUT:-$PWD/out}
mkdir -p "$OUT"
src=$PWD
compare_only=0
[ "${1:-}" = compare ] && { compare_only=1; shift; }
counts=${*:-1 2 4}
ls .whl/*.whl | grep -v -e numpy- -e nvidia_ml_py- | xargs python3 -m pip install -q --no-index --no-deps \
    --no-compile --target /tmp/site 2>/dev/null
# No ASV_PYTHONPATH: asv makes it the PYTHONPATH of each benchmark process, whose runner then drops it, and the
# linked CUDA stack with it (lab/2026-11-28-restructure-on-the-gpu).
export PYTHONPATH=/tmp/site PIP_NO_INDEX=1 PIP_FIND_LINKS=$src/.whl PYTHONUNBUFFERED=1
site=$(python3 -c 'import sysconfig; print(sysconfig.get_paths()["purelib"])')
export SGEMM_CUDA_SITE="$site:/tmp/site"
nvidia-smi --query-gpu=index,name,driver_version,clocks.sm,power.draw,power.limit,temperature.gpu --format=csv \
    | tee -a "$OUT/summary.txt"
origin=$src/.bundle/main.bundle
[ -f "$origin" ] || origin=$src
head=$(git ls-remote "$origin" refs/heads/main | cut -f1)
echo "checkout: main at $head" | tee -a "$OUT/summary.txt"
if [ "$compare_only" = 1 ]; then
    for n in $counts; do
        [ -d "/tmp/hist-results-$n" ] || tar -xzf "$src/.hist/results-gpus-$n.tar.gz" -C /tmp
    done
    cd /tmp
else
    rm -rf /tmp/hist && git clone -q "$origin" /tmp/hist && cd /tmp/hist && git checkout -q -B main "$head"
fi
site_args=(--no-site)
[ -d "$src/.npm-cache" ] && site_args=(--html /tmp/hist-html --npm-cache "$src/.npm-cache")
for n in $counts; do
    [ "$compare_only" = 1 ] && break
    rm -rf "/tmp/hist-results-$n" "/tmp/hist-work-$n" /tmp/hist-html
    SECONDS=0
    timeout "${HISTORY_TIMEOUT_S:-560}" python3 -m sgemm history --first 1 --gpus "$n" \
        --results "/tmp/hist-results-$n" --work "/tmp/hist-work-$n" "${site_args[@]}" > "$OUT/history-gpus-$n.log" 2>&1
    echo "--gpus $n: exit $? after ${SECONDS} s; $(grep -h 'timeline:' "$OUT/history-gpus-$n.log" | tail -n 1)" \
        | tee -a "$OUT/summary.txt"
    grep -h -e 'asv run: exit' -e ': asv run exit' -e 'joined in' "$OUT/history-gpus-$n.log" | tee -a "$OUT/summary.txt"
    tar -czf "$OUT/results-gpus-$n.tar.gz" -C /tmp "hist-results-$n"
    python3 -m tools.acceptance.estimate_error "$OUT/history-gpus-$n.log" > "$OUT/estimate-gpus-$n.txt" 2>&1
    echo "--gpus $n estimate: exit $?; $(tail -n 1 "$OUT/estimate-gpus-$n.txt")" | tee -a "$OUT/summary.txt"
    for log in /tmp/hist-work-$n/logs/asv-run-*.log /tmp/hist-work-$n/gpu-*/asv.log; do
        [ -f "$log" ] && { echo "== $log"; tail -n 30 "$log"; }
    done > "$OUT/asv-tails-gpus-$n.txt" 2>&1
    # The whole asv log (each case's NVBench and pairing time, for the estimate's cost model).
    cat /tmp/hist-work-$n/logs/asv-run-*.log 2>/dev/null | gzip > "$OUT/asv-log-gpus-$n.txt.gz"
done
# The case sets and the over-reference track of each run against the first one's.
python3 - $counts <<'PY' | tee -a "$OUT/summary.txt"
import math, statistics, sys
from asv.results import iter_results

def figures(n):
    found = {}
    for results in iter_results(f"/tmp/hist-results-{n}"):
        for name in results.get_all_result_keys():
            for index, value in enumerate(results.get_result_value(name, results.get_result_params(name))):
                if value is not None and not (isinstance(value, float) and math.isnan(value)):
                    found[(name, index)] = value
    return found

counts = sys.argv[1:]
base = figures(counts[0])
for n in counts[1:]:
    other = figures(n)
    print(f"--gpus {n} against --gpus {counts[0]}: {len(other)} figures against {len(base)}; case sets "
          + ("equal" if set(other) == set(base) else
             f"differ ({len(set(base) - set(other))} only in {counts[0]}, {len(set(other) - set(base))} only in {n})"))
    shifts = sorted((abs(other[key] / base[key] - 1), key[0]) for key in set(base) & set(other)
                    if "over_reference" in key[0] and base[key])
    if shifts:
        values = [s for s, _ in shifts]
        print(f"  over-reference track, |ratio - 1| of {len(values)} cases: median {statistics.median(values):.3%}, "
              f"p95 {values[int(0.95 * (len(values) - 1))]:.3%}, max {values[-1]:.3%} ({shifts[-1][1]})")
PY
cat "$OUT/summary.txt"
