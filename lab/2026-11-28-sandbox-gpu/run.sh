#!/usr/bin/env bash
# The job sandbox (.github/runner/job-sandbox.py) on a GPU box. Steps (arguments, default all):
#   trial     .github/runner/trial.py --gpu: the runner trial, then the review's escapes inside the sandbox with
#             every card bound in, nvidia-smi and a CuPy matmul inside; nothing may be left;
#   paired    a paired round inside the sandbox: the gate over a scratch commit that touches one kernel's source,
#             --time-unchanged, fixed rounds, SGEMM_SANDBOX set;
#   nvbench   an NVBench case inside it: the same gate --unpaired (asv continuous and NVBench in the sandbox);
#   busy      the co-tenant check refusing a busy GPU: a CUDA process outside holds the card (CUDA_VISIBLE_DEVICES's,
#             else card 0), the gate on that card must exit 2;
#   timing    the paired gate, fixed rounds, with and without the sandbox, three runs each, alternating back to back.
# Run from the repository root with .whl (the offline wheelhouse), .deb/bubblewrap_*.deb (apt-get download
# bubblewrap, Debian 12's 0.8.0) and .bundle/main.bundle (git bundle create .bundle/main.bundle sandbox). Runs as
# root; results under $OUT (summary.txt first).
set -uo pipefail
OUT=${OUT:-$PWD/out}
mkdir -p "$OUT"
src=$PWD
steps=${*:-trial paired nvbench busy timing}
lab=${LAB_DIR:-/var/lib/sgemm-sandbox-lab}  # one folder (and cgroup) a run: two runs at once name two
cgroup=/sys/fs/cgroup/$(basename "$lab")
rm -rf "$lab" && mkdir -p "$lab"
dpkg -x "$(ls .deb/bubblewrap_*.deb | head -n 1)" "$lab/bw" || { echo "no bubblewrap .deb carried" >&2; exit 2; }
export PATH="$lab/bw/usr/bin:$PATH"
echo "bwrap: $(bwrap --version)" | tee "$OUT/summary.txt"
python3 -m pip install -q --no-index --no-deps --no-compile --target "$lab/site" .whl/*.whl 2>/dev/null
# Compiled as pip compiles a virtualenv it installs: a read-only bind leaves a sandboxed process no way to write them.
python3 -m compileall -q "$lab/site" > /dev/null 2>&1
origin=$src/.bundle/main.bundle
[ -f "$origin" ] || origin=$src
rm -rf "$lab/repo" && git clone -q "$origin" "$lab/repo"
# A bundle of main names no HEAD: check main out by name.
git -C "$lab/repo" checkout -q -B main origin/main 2>/dev/null || git -C "$lab/repo" checkout -q main
export PYTHONPATH="$lab/site:$lab/repo" ASV_PYTHONPATH="$lab/site:$lab/repo" PIP_NO_INDEX=1 PIP_FIND_LINKS=$src/.whl
export SGEMM_CUDA_SITE="$(python3 -c 'import sysconfig; print(sysconfig.get_paths()["purelib"])'):$lab/site"
export PYTHONUNBUFFERED=1 GIT_AUTHOR_NAME=lab GIT_AUTHOR_EMAIL=lab@box GIT_COMMITTER_NAME=lab GIT_COMMITTER_EMAIL=lab@box
nvidia-smi --query-gpu=index,name,driver_version,clocks.sm,power.draw,power.limit --format=csv | tee -a "$OUT/summary.txt"
echo "checkout: $(git -C "$lab/repo" rev-parse HEAD)" | tee -a "$OUT/summary.txt"

# The sandbox as install-hook.sh installs it, its cgroup below the root (run as root here; a runner's user gets a
# delegated one), the wheelhouse read-only inside, the carried checkout kept out.
mkdir -p "$cgroup" 2>/dev/null
python3 - "$lab" "$src" "$cgroup" > "$lab/sandbox.json" <<'PY'
import json, shutil, sys
lab, src, cgroup = sys.argv[1:]
print(json.dumps({"bwrap": shutil.which("bwrap"), "cgroup": cgroup, "memory_max": str(64 * 2**30),
                  "pids_max": "8192", "wheelhouse": f"{src}/.whl", "forbidden": [f"{src}/.deb", "/root"]}))
PY
sed "s|@SETTINGS@|$lab/sandbox.json|" "$lab/repo/.github/runner/job-sandbox.py" > "$lab/job-sandbox"
chmod 755 "$lab/job-sandbox"
cd "$lab/repo"
git checkout -q -B lab
kernel=${KERNEL_FILE:-$(ls kernels/*.cu | head -n 1)}  # the source the scratch commit touches
echo "// a comment: the same machine code, timed all the same" >> "$kernel"
git commit -qam "lab: touch $kernel"
name=$(basename "$kernel" .cu)
gate() {  # WORK [OPTIONS]...: the gate over HEAD~1..HEAD on one kernel at 4096, fixed rounds
    local work=$1; shift
    timeout "${GATE_LIMIT_S:-540}" python3 -m sgemm gate HEAD~1 HEAD --size 4096 --no-sweep --time-unchanged --rounds 3 --max-rounds 3 \
        --extra-rounds 0 --work "$work" "$@"
}

if [[ " $steps " == *" trial "* ]]; then
    SECONDS=0
    python3 .github/runner/trial.py --gpu > "$OUT/trial.txt" 2>&1
    echo "trial: exit $? after ${SECONDS} s: $(grep '^== trial' "$OUT/trial.txt")" | tee -a "$OUT/summary.txt"
    grep -E '^== (left behind|inside|sandbox)' "$OUT/trial.txt" | tee -a "$OUT/summary.txt"
fi
if [[ " $steps " == *" paired "* ]]; then
    SECONDS=0
    SGEMM_SANDBOX=$lab/job-sandbox gate "$lab/work-paired" --report "$OUT/paired.md" > "$OUT/paired.log" 2>&1
    echo "paired in the sandbox: exit $? after ${SECONDS} s: $(grep -m1 '^## GEMM gate' "$OUT/paired.md")" \
        | tee -a "$OUT/summary.txt"
fi
if [[ " $steps " == *" nvbench "* ]]; then
    SECONDS=0
    SGEMM_SANDBOX=$lab/job-sandbox timeout "${GATE_LIMIT_S:-540}" python3 -m sgemm gate HEAD~1 HEAD --size 4096 --no-sweep --unpaired \
        --rounds 3 --max-rounds 3 --extra-rounds 0 --work "$lab/work-nvbench" --report "$OUT/nvbench.md" \
        > "$OUT/nvbench.log" 2>&1
    echo "NVBench (unpaired) in the sandbox: exit $? after ${SECONDS} s" | tee -a "$OUT/summary.txt"
fi
if [[ " $steps " == *" busy "* ]]; then
    python3 -c 'import cupy, time; cupy.zeros(1); open("/tmp/sgemm-lab-busy", "w").write("up"); time.sleep(600)' &
    holder=$!
    for _ in $(seq 120); do [ -f /tmp/sgemm-lab-busy ] && break; sleep 0.5; done
    SECONDS=0
    CUDA_VISIBLE_DEVICES=${CUDA_VISIBLE_DEVICES:-0} SGEMM_SANDBOX=$lab/job-sandbox gate "$lab/work-busy" > "$OUT/busy.log" 2>&1
    echo "busy GPU: exit $? after ${SECONDS} s: $(grep -i -m1 -E 'busy|shared|another' "$OUT/busy.log")" \
        | tee -a "$OUT/summary.txt"
    kill "$holder"; wait "$holder" 2>/dev/null; rm -f /tmp/sgemm-lab-busy
fi
if [[ " $steps " == *" timing "* ]]; then
    for run in 1 2 3; do
        for mode in sandbox bare; do
            SECONDS=0
            if [ "$mode" = sandbox ]; then
                SGEMM_SANDBOX=$lab/job-sandbox gate "$lab/work-$mode-$run" > "$OUT/timing-$mode-$run.log" 2>&1
            else
                gate "$lab/work-$mode-$run" > "$OUT/timing-$mode-$run.log" 2>&1
            fi
            echo "timing $mode $run: exit $? wall ${SECONDS} s" | tee -a "$OUT/timing.txt"
        done
    done
    python3 - "$OUT/timing.txt" <<'PY' | tee -a "$OUT/summary.txt"
import statistics, sys
runs = {}
for line in open(sys.argv[1]):
    _, mode, _, _, _, _, seconds, _ = line.split()
    runs.setdefault(mode, []).append(int(seconds))
sandbox, bare = statistics.median(runs["sandbox"]), statistics.median(runs["bare"])
print(f"| mode | runs (s) | median (s) |\n|---|---|---|")
for mode, values in runs.items():
    print(f"| {mode} | {', '.join(map(str, values))} | {statistics.median(values):.0f} |")
ok = abs(sandbox - bare) <= max(0.05 * bare, 15)
print(f"sandbox - bare: {sandbox - bare:+.0f} s ({(sandbox / bare - 1) * 100:+.1f}%): "
      f"{'within' if ok else 'NOT within'} 5% or 15 s")
PY
fi
# Nothing of the lab stays on the box but what was copied to $OUT.
rmdir "$cgroup" 2>/dev/null
cd / && rm -rf "$lab"
