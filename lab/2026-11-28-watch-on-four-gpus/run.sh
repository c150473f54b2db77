#!/usr/bin/env bash
# The watch on a four-GPU host, end to end (the issue's acceptance run): a scratch branch of 24 commits on top of
# main, each main's tree plus one harmless line, where commit 9 slows fp16/wgmma_grouped_tma_store (about 1% at 8192)
# and commit 15 slows fp32/warptile (about 2% at 4096); the history brought up to date one commit at a time on four
# GPUs over a selection of cases (-k, --size), published, and the issue job run against the stand-in GitHub after
# every publish; at the end a publish with one commit's figures withheld (the boundary moves) and the check: one open
# issue per true step, none orphaned.
#
# Stages, each within one device command of 10 minutes (a lent box starts bare at every call):
#   run.sh build              the scratch branch (CPU: git alone); with CPU_CHECK=1, the gate's CPU check of each
#                             slowdown (NVRTC, no GPU): exactly the intended kernels' machine code changes
#   run.sh commits A B        the history of commits A..B in order (skipping those done); stops early, state saved,
#                             when the next commit would not fit STAGE_BUDGET_S (then call it again)
#   run.sh check              the publish with commit WITHHOLD's figures withheld, then the whole tree again; the
#                             stand-in after each; each true step's issues counted
#   run.sh issues             the issue job replayed over every publish's notices.json in order, for a box without
#                             node (the device's): a fresh stand-in, the same checks
# State (the scratch repository, results, site, the stand-in's issues, the record) lives in /tmp/watch4 and goes to
# $OUT/watch4-state.tar.gz after every stage; the next call carries it back as .hist/watch4-state.tar.gz.
# Each history's and publish's log is kept in the state ($S/logs), not under $OUT: a call brings back at most 8
# files.
# Run from the repository root with .whl (the offline wheelhouse), .bundle/main.bundle (`git bundle create
# .bundle/main.bundle main`) and .npm-cache carried. ORIGIN and BASE override where the branch starts (a local
# clone and a branch, to build it on a CPU box).
set -uo pipefail
OUT=${OUT:-$PWD/out}
mkdir -p "$OUT"
src=$PWD
S=${STATE_DIR:-/tmp/watch4}
WORK=${WORK_DIR:-/tmp/watch4-work}
# The watch looks for steps in series of 20 commits or more (sgemm/watch/steps.py, MIN_SERIES) and files one that two
# publishes in a row saw (sgemm/watch/filing.py, PUBLISHES): 24 commits give five publishes that look, not two.
COMMITS=24
SLOW_WGMMA=9    # the commit that slows fp16/wgmma_grouped_tma_store
SLOW_FP32=15    # the commit that slows fp32/warptile
WITHHOLD=${WITHHOLD:-$SLOW_WGMMA}
STAGE_BUDGET_S=${STAGE_BUDGET_S:-540}
# The selection: the Hopper ladder's wgmma kernels (each at 4096 and 8192, the sizes its entry lists) and every FP32
# kernel (none is timed at 8192, so at 4096 alone). -k and --size cross, so "the Hopper kernels at 8192 and FP32 at
# 4096" cannot be one selection; this one holds it and the Hopper kernels at 4096 besides: 28 + 37 = 65 series, the
# slowed Hopper kernel's 4096 case a third true step (its slowdown is per tile, a larger share of the shorter case).
WGMMA=(wgmma_tma wgmma_tma_wide wgmma_specialized wgmma_pipelined wgmma_persistent wgmma_cluster
       wgmma_grouped_tma_store)
SELECT=()
for kernel in "${WGMMA[@]}"; do SELECT+=(-k "fp16/$kernel" -k "bf16/$kernel"); done
SELECT+=(-k fp32 --size 8192 --size 4096)
# The true steps: kernel, size and the commit that made each.
TRUE_STEPS="fp16/wgmma_grouped_tma_store:8192:$SLOW_WGMMA fp16/wgmma_grouped_tma_store:4096:$SLOW_WGMMA \
fp32/warptile:4096:$SLOW_FP32"

say() { echo "$*" | tee -a "$OUT/summary.txt"; }

restore() {  # the state the last stage left, from /tmp on a warm box or the carried tarball
    if [ ! -f "$S/commits.txt" ]; then
        local tarball=$src/.hist/watch4-state.tar.gz
        [ -f "$tarball" ] || { say "no state: run 'run.sh build' first (or carry .hist/watch4-state.tar.gz)"; exit 2; }
        mkdir -p "$(dirname "$S")" && tar -xzf "$tarball" -C "$(dirname "$S")"
    fi
    mkdir -p "$S/logs"
    [ -d "$S/repo" ] && return 0
    branch > /dev/null  # the branch is made again, not carried: the same base and dates give the same commits
    cmp -s "$S/commits.txt" "$S/commits-made.txt" || { say "the scratch branch made again differs from the one measured"; exit 2; }
}

save() { tar -czf "$OUT/watch4-state.tar.gz" --exclude="$(basename "$S")/repo" -C "$(dirname "$S")" "$(basename "$S")"; }

environment() {  # the offline Python stack, as lab/2026-11-28-history-sharding/run.sh sets it
    if [ -d "$src/.whl" ]; then
        ls "$src"/.whl/*.whl | grep -v -e numpy- -e nvidia_ml_py- | xargs python3 -m pip install -q --no-index \
            --no-deps --no-compile --target /tmp/site 2>/dev/null
        export PYTHONPATH=/tmp/site PIP_NO_INDEX=1 PIP_FIND_LINKS=$src/.whl
    fi
    export PYTHONUNBUFFERED=1
    local site
    site=$(python3 -c 'import sysconfig; print(sysconfig.get_paths()["purelib"])')
    export SGEMM_CUDA_SITE="$site${PYTHONPATH:+:$PYTHONPATH}"
}

# --- The scratch branch ----------------------------------------------------------------------------------------------

# Commit 9's slowdown, fp16 alone (bf16 is the same template): every consumer warpgroup of
# fp16/wgmma_grouped_tma_store sleeps 1 us after writing out each tile. Argued size: at 8192 an H100's 132 blocks
# (66 clusters of 2) walk 64 x 32 = 2048 tiles of 128 x 256, about 16 each, in about 1.6 ms at 700 TFLOP/s: 100 us a
# tile, K = 8192 in 128 steps of wgmmas the consumers issue; while they sleep no wgmma is issued (the loader fills its
# 4 stages and waits), so 1 us a tile is about 1%. At 4096 a tile's K is half as long and the same 1 us about 2%.
# __nanosleep's duration is approximate (within [0, 2 x ns], CUDA's guide), its mean near the request.
# Both go at the end of lines that are there (no line added): the programs carry line information, and a line added
# above the template would move every instantiation's, changing the machine code of the file's other kernels too.
# fp16 is told from bf16 by an overload, not a class template specialised for __half: that specialisation alone
# changed the cubin of every kernel of the file (the gate's CPU check said so), the overload none but this one's.
# The ping-pong kernel (kPingPong) shares the TMA store's code and is kept as it is: it is not among the cases measured.
WGMMA_TRAIT=' __device__ constexpr bool lab_slowed(const __half*) { return true; } __device__ constexpr bool lab_slowed(const void*) { return false; }'
WGMMA_SLEEP=' if constexpr (lab_slowed(static_cast<const T*>(nullptr)) && (FEATURES & kPingPong) == 0) __nanosleep(1000);'
# Commit 15's slowdown: fp32/warptile's inner loop (per k, 128 FFMAs of the 8 x 4 x 4 outer product and 6 float4
# shared loads, about 140 instructions a thread) gets 3 dependent FFMAs more, into a register kept alive by a store
# that runs only when K < 0 (never; the compiler cannot know it): about 2% more instructions issued in a loop that
# issue bounds, so about 2% at 4096. fp32_warptile.cu holds this kernel alone.
FP32_SPIN_DECL='    float lab_spin = 0.0f;  // lab: watch on four GPUs, about 2% at 4096'
FP32_SPIN='            lab_spin = fmaf(lab_spin, a_frag[0][0], b_frag[0][0]); lab_spin = fmaf(lab_spin, a_frag[0][1], b_frag[0][1]); lab_spin = fmaf(lab_spin, a_frag[0][2], b_frag[0][2]);'
FP32_SPIN_KEEP='    if (K < 0) C[0] = lab_spin;  // never: keeps the FFMAs'

slow_wgmma() {  # in the scratch repository's working tree
    python3 - "$WGMMA_TRAIT" "$WGMMA_SLEEP" <<'PY'
import sys
from pathlib import Path
path = Path("kernels/wgmma_specialized.cu")
text = path.read_text()
# The feature bits' line, whatever bits follow the first two (ping-pong came after this lab was written).
start = text.find("constexpr unsigned kGroupedOrder = 1, kTmaStore = 2")
anchor = text[start:text.index("\n", start) + 1] if start >= 0 else "(missing)"
store = "                    store_buffer ^= 1;\n                }\n"
if text.count(anchor) != 1 or text.count(store) != 1 or "kPingPong" not in anchor:
    sys.exit("wgmma_specialized.cu is not as the lab read it: the feature bits' line or the TMA store's end moved")
text = text.replace(anchor, anchor[:-1] + sys.argv[1] + "\n").replace(store, store[:-1] + sys.argv[2] + "\n")
path.write_text(text)
PY
}

slow_fp32() {
    python3 - "$FP32_SPIN_DECL" "$FP32_SPIN" "$FP32_SPIN_KEEP" <<'PY'
import sys
from pathlib import Path
path = Path("kernels/fp32_warptile.cu")
text = path.read_text()
loop = "    for (int k0 = 0; k0 < K; k0 += BK) {\n"
inner = "            for (int wn = 0; wn < WN_ITERS; ++wn) load_fragment<TN>(b_frag[wn], &Bs[k][thread_col + wn * SUB_N]);\n"
if text.count(loop) != 1 or text.count(inner) != 1:
    sys.exit("fp32_warptile.cu is not as the lab read it: its K loop or its B fragment load moved")
text = text.replace(loop, sys.argv[1] + "\n" + loop).replace(inner, inner + sys.argv[2] + "\n")
end = text.rindex("\n}")  # the kernel's closing brace: the file's last function
text = text[:end] + "\n" + sys.argv[3] + text[end:]
path.write_text(text)
PY
}

branch() {  # the scratch branch in $S/repo, its commits into $S/commits-made.txt; fixed dates: the same hashes each time
    local origin=${ORIGIN:-$src/.bundle/main.bundle} base=${BASE:-main}
    [ -e "$origin" ] || origin=$src
    rm -rf "$S/repo" "$S/commits-made.txt"
    git clone -q "$origin" "$S/repo" || { say "cannot clone $origin"; exit 2; }
    cd "$S/repo" || exit 2
    git checkout -q -B scratch "origin/$base" || { say "no branch $base in $origin"; exit 2; }
    for n in $(seq 1 $COMMITS); do
        echo "# scratch commit $n: changes no kernel" >> scratch-commits.txt  # read by nothing
        # A slowdown that cannot be applied stops the build: a branch without its steps would measure nothing.
        if [ "$n" = "$SLOW_WGMMA" ]; then slow_wgmma || { say "commit $n: the slowdown was not applied"; exit 2; }; fi
        if [ "$n" = "$SLOW_FP32" ]; then slow_fp32 || { say "commit $n: the slowdown was not applied"; exit 2; }; fi
        local when="@$((1795000000 + 60 * n)) +0000"
        git add -A && GIT_AUTHOR_NAME=lab GIT_AUTHOR_EMAIL=lab@localhost GIT_COMMITTER_NAME=lab \
            GIT_COMMITTER_EMAIL=lab@localhost GIT_AUTHOR_DATE=$when GIT_COMMITTER_DATE=$when git commit -qm \
            "scratch $n$([ "$n" = "$SLOW_WGMMA" ] && echo ': fp16/wgmma_grouped_tma_store slower')$([ "$n" = "$SLOW_FP32" ] && echo ': fp32/warptile slower')"
        git rev-parse HEAD >> "$S/commits-made.txt"
    done
    cd "$src" || exit 2
}

build() {
    rm -rf "$S" "$WORK" && mkdir -p "$S/logs"
    branch
    cp "$S/commits-made.txt" "$S/commits.txt"
    cd "$S/repo" || exit 2
    say "built: $COMMITS commits on ${BASE:-main} ($(git rev-parse --short "origin/${BASE:-main}")): $(head -c 8 "$S/commits.txt")..$(tail -n 1 "$S/commits.txt" | head -c 8)"
    printf 'commit\thash\texit\twall_s\tnotices\tfiled_open\topen_issues\tstandin\n' > "$S/record.tsv"
    if [ "${CPU_CHECK:-0}" = 1 ]; then
        for n in 2 $SLOW_WGMMA $SLOW_FP32; do
            local before after
            before=$(sed -n "$((n - 1))p" "$S/commits.txt") after=$(sed -n "${n}p" "$S/commits.txt")
            git checkout -q "$after"
            python3 -m sgemm gate "$before" "$after" --dry-run --cpu-check --plan "$S/logs/cpu-check-$n.json" \
                > "$S/logs/cpu-check-$n.txt" 2>&1
            say "cpu check of commit $n: exit $?; to time: $(python3 -c 'import json, sys; print(", ".join(json.load(open(sys.argv[1]))["to_time"]) or "nothing")' "$S/logs/cpu-check-$n.json" 2>/dev/null)"
        done
        git checkout -q scratch
    fi
    cd "$src" && save
}

# --- The history, one commit at a time -------------------------------------------------------------------------------

notices_count() {  # notices in a notices.json, and those filed and open
    python3 - "$1" <<'PY'
import json, sys
try:
    notices = json.load(open(sys.argv[1]))["notices"]
except (OSError, ValueError, KeyError):
    print("- -"); sys.exit()
print(len(notices), sum(1 for n in notices if n.get("filed") and n["state"] in ("candidate", "regression", "environment")))
PY
}

standin() {  # the issue job on one publish's notices: its line, or why it did not run
    if ! command -v node > /dev/null; then echo "no node here: run.sh issues replays it"; return; fi
    (cd "$src" && python3 -m tools.acceptance.github_standin --notices "$1" --issues "$2" 2>&1 | tail -n 1)
}

open_issues() {
    python3 -c 'import json, sys
try: print(sum(1 for i in json.load(open(sys.argv[1])) if i["state"] == "open"))
except OSError: print("-")' "$1"
}

commits() {
    local first=$1 last=$2 began=$SECONDS slowest=0
    restore && environment
    mkdir -p "$S/notices"
    for n in $(seq "$first" "$last"); do
        local hash
        hash=$(sed -n "${n}p" "$S/commits.txt")
        grep -q "^$n	" "$S/record.tsv" && continue  # done in an earlier call
        if [ $((SECONDS - began + slowest)) -gt "$STAGE_BUDGET_S" ]; then
            say "stopped before commit $n: the last took ${slowest} s, the stage's budget is ${STAGE_BUDGET_S} s; call 'run.sh commits $n $last' again"
            break
        fi
        (cd "$S/repo" && git checkout -q -B main "$hash")  # the history measures main's new commits
        local started=$SECONDS status
        (cd "$S/repo" && timeout "${HISTORY_TIMEOUT_S:-500}" python3 -m sgemm history --first 1 --gpus 4 \
            "${SELECT[@]}" --results "$S/results" --work "$WORK" --html "$S/html" --npm-cache "$src/.npm-cache") \
            > "$S/logs/history-$n.log" 2>&1
        status=$? wall=$((SECONDS - started))
        [ "$wall" -gt "$slowest" ] && slowest=$wall
        cp "$S/html/notices.json" "$S/notices/commit-$n.json" 2>/dev/null
        local line
        line=$(standin "$S/html/notices.json" "$S/issues.json")
        printf '%s\t%s\t%s\t%s\t%s\t%s\t%s\t%s\n' "$n" "${hash:0:8}" "$status" "$wall" \
            $(notices_count "$S/html/notices.json") "$(open_issues "$S/issues.json")" "$line" >> "$S/record.tsv"
        say "commit $n (${hash:0:8}): history exit $status after ${wall} s; $(grep -h 'timeline:' "$S/logs/history-$n.log" | tail -n 1 | sed 's/.*timeline: //'); issue job: $line"
        save  # after every commit: a cut call loses at most the one under way
    done
    column -t -s '	' "$S/record.tsv" | tee -a "$OUT/summary.txt"
    save
}

# --- The end: a moved boundary, and one issue per true step ----------------------------------------------------------

true_steps() {  # each true step's open filed notices, where each puts its step, and notices of no true step
    python3 - "$1" "$S/commits.txt" $TRUE_STEPS <<'PY'
import json, sys
notices = json.load(open(sys.argv[1]))["notices"]
commits = [line.strip() for line in open(sys.argv[2])]
where = lambda sha: f"commit {commits.index(sha) + 1}" if sha in commits else (sha or "?")[:8]
open_filed = [n for n in notices if n.get("filed") and n["state"] in ("candidate", "regression", "environment")]
steps = [step.split(":") for step in sys.argv[3:]]
bad = 0
for kernel, size, commit in steps:
    found = [n for n in open_filed if any(c["case"] == kernel and c["size"] == int(size) for c in n["cases"])]
    bad += len(found) != 1
    print(f"true step {kernel} at {size} (commit {commit}): {len(found)} open notice(s)"
          + "".join(f"; {n['id']}: last good {where(n['last_good'])}, first bad {where(n['first_bad'])}, bad "
                    f"{where(n['bad'])}" for n in found))
others = [n for n in open_filed if not any(c["case"] == k and c["size"] == int(s) for k, s, _ in steps for c in n["cases"])]
for n in others:
    print(f"open notice of no true step: {n['id']} ({', '.join(c['case'] + ' ' + str(c['size']) for c in n['cases'])})")
print("one open notice per true step" if not bad else f"{bad} true step(s) without exactly one open notice")
PY
}

check() {
    restore && environment
    local machine hash
    machine=$(cd "$S/results" && for d in */; do [ -f "$d/machine.json" ] && echo "${d%/}"; done | head -n 1)
    hash=$(sed -n "${WITHHOLD}p" "$S/commits.txt")
    rm -rf "$S/results-withheld" "$S/html-withheld"
    cp -a "$S/results" "$S/results-withheld"
    mkdir -p "$S/withheld" && mv "$S/results-withheld/$machine/${hash:0:8}"-*.json "$S/withheld/"
    say "withheld: commit $WITHHOLD (${hash:0:8}) of machine $machine: $(ls "$S/withheld" | tr '\n' ' ')"
    for tree in withheld whole; do
        local results=$S/results-withheld html=$S/html-withheld
        if [ "$tree" = whole ]; then
            results=$S/results html=$S/html
            # The watch's memory is the last publish's notices: the whole tree follows the withheld publish, as a
            # site republished after a commit's figures came back would.
            cp "$S/results-withheld/notices.json" "$S/results/notices.json"
        fi
        (cd "$S/repo" && python3 -m sgemm publish --results "$results" --html "$html" --npm-cache "$src/.npm-cache") \
            > "$S/logs/publish-$tree.log" 2>&1
        say "publish ($tree): exit $?; issue job: $(standin "$html/notices.json" "$S/issues.json"); open issues $(open_issues "$S/issues.json")"
        cp "$html/notices.json" "$S/notices/$tree.json" 2>/dev/null
        true_steps "$html/notices.json" | tee -a "$OUT/summary.txt"
    done
    save
}

issues() {  # the issue job replayed over every publish in order, into a fresh stand-in
    restore
    rm -f "$S/issues-replayed.json"
    for n in $(seq 1 $COMMITS) withheld whole; do
        local file=$S/notices/commit-$n.json
        [ "$n" = withheld ] || [ "$n" = whole ] && file=$S/notices/$n.json
        [ -f "$file" ] || continue
        say "publish $n: $(standin "$file" "$S/issues-replayed.json"); open issues $(open_issues "$S/issues-replayed.json")"
    done
    save
}

stage=${1:-}
case "$stage" in
    build) build ;;
    commits) [ $# -eq 3 ] || { echo "run.sh commits FIRST LAST" >&2; exit 2; }; commits "$2" "$3" ;;
    check) check ;;
    issues) issues ;;
    *) echo "run.sh build | commits FIRST LAST | check | issues" >&2; exit 2 ;;
esac
