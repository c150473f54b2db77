#!/usr/bin/env bash
# The gate over a change of the measuring code, on a GPU box (run from the repository root; results under $OUT):
#   1. a refactor of sgemm/measuring/launch.py that changes no launch (two private functions renamed): every case at
#      4096 should be SAME untimed, nothing timed;
#   2. on top of it, the launch code doubling fp32/naive's grid in y (the extra blocks return at once): exactly
#      fp32/naive's case should be timed, unpaired; every other case SAME untimed.
# Each gate runs in a scratch repository made from this checkout, its commit as the base.
set -uo pipefail
OUT=${OUT:-$PWD/out}
mkdir -p "$OUT"
src=$PWD
ls .whl/*.whl | grep -v -e numpy- -e nvidia_ml_py- | xargs python3 -m pip install -q --no-index --no-deps \
    --no-compile --target /tmp/site
export PYTHONPATH=/tmp/site ASV_PYTHONPATH=/tmp/site PIP_NO_INDEX=1 PIP_FIND_LINKS=$src/.whl PYTHONUNBUFFERED=1
site=$(python3 -c 'import sysconfig; print(sysconfig.get_paths()["purelib"])')
export SGEMM_CUDA_SITE="$site:/tmp/site"
nvidia-smi --query-gpu=name,driver_version,clocks.sm,power.draw,power.limit,temperature.gpu --format=csv \
    | tee "$OUT/gpu.txt"

repo=/tmp/gates
rm -rf "$repo" && mkdir -p "$repo"
(cd "$src" && tar --exclude=./.whl --exclude=./.git --exclude=./out --exclude=./.venv -cf - . | tar -xf - -C "$repo")
cd "$repo"
export GIT_AUTHOR_NAME=gate GIT_AUTHOR_EMAIL=gate@box GIT_COMMITTER_NAME=gate GIT_COMMITTER_EMAIL=gate@box
git init -q -b main && git add -A && git commit -qm base
base=$(git rev-parse HEAD)
sed -i 's/\b_config(/_launch_config(/g; s/\b_arguments(/_argument_storage(/g' sgemm/measuring/launch.py
git commit -qam "launch: two private functions renamed (no launch changes)"
refactor=$(git rev-parse HEAD)
python3 - <<'PY'
from pathlib import Path
path = Path("sgemm/measuring/launch.py")
text = path.read_text()
line = "    config = _launch_config(geometry, kernel.grid(geometry, m, n, resident))\n"
assert text.count(line) == 1
path.write_text(text.replace(line, line + "    if kernel.name == \"fp32/naive\":\n"
                             "        config.gridDimY *= 2  # blocks past the last row return at once\n"))
PY
git commit -qam "launch: fp32/naive's grid doubled in y"
grid=$(git rev-parse HEAD)

git checkout -q "$refactor"
python3 -m sgemm machine > /dev/null
SECONDS=0
python3 -m sgemm gate "$base" "$refactor" --size 4096 --no-sweep --dry-run > "$OUT/refactor-dry-run.txt" 2>&1
python3 -m sgemm gate "$base" "$refactor" --size 4096 --no-sweep --work /tmp/gate-refactor \
    --report "$OUT/gate-refactor.md" > "$OUT/gate-refactor.log" 2>&1
echo "refactor gate: exit $? after ${SECONDS} s" | tee "$OUT/summary.txt"
git checkout -q "$grid"
SECONDS=0
python3 -m sgemm gate "$refactor" "$grid" --size 4096 --no-sweep --work /tmp/gate-grid \
    --report "$OUT/gate-grid.md" > "$OUT/gate-grid.log" 2>&1
echo "grid gate: exit $? after ${SECONDS} s" | tee -a "$OUT/summary.txt"
tail -n 3 /tmp/gate-refactor/launches/probes/*/probe.log /tmp/gate-grid/launches/probes/*/probe.log \
    > "$OUT/probe-logs.txt" 2>&1
head -n 12 "$OUT/gate-refactor.md" "$OUT/gate-grid.md"
grep -E "^\| fp32/naive|Unpaired" "$OUT/gate-grid.md"
cat "$OUT/summary.txt"
