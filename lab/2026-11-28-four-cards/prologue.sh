# Sourced by each device call from call 20 on: the offline wheelhouse (.whl) installed into /tmp/site, the cards as
# found written to $OUT/cards.txt, and run_jobs, which starts each job's script and keeps its log beside it.
# Before it: OUT (where the results go back), jobs (a folder of this call's own on the device's /tmp).
set -uo pipefail
OUT=${OUT:-$PWD/out}
mkdir -p "$OUT"
src=$PWD
ls .whl/*.whl | grep -v -e numpy- -e nvidia_ml_py- | xargs python3 -m pip install -q --no-index --no-deps \
    --no-compile --target /tmp/site 2>/dev/null
nvidia-smi --query-gpu=index,name,driver_version,clocks.sm,power.draw,power.limit,temperature.gpu --format=csv \
    > "$OUT/cards.txt"
export PYTHONUNBUFFERED=1
pack() {  # pack JOB...: each job's folder as $OUT/JOB.tar.gz
    local job
    for job in "$@"; do tar -czf "$OUT/$job.tar.gz" -C "$jobs" "$job"; done
}
