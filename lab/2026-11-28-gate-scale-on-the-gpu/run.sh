#!/usr/bin/env bash
# The gate at a deployment's scale on a host of four H100s, in phases (one device command each, under 10 minutes):
#   1  a paired noise file learned with L2 flushed (A/A gates of every kernel at 4096 and the Hopper ladder at 8192,
#      timing forced, over cards 1-3 with --gpus all), while card 0 runs the timer's bias check (20 processes, the
#      Hopper case) and the independent cold-L2 timer on the tile-order change at 8192 (three processes per kernel);
#   2  three A/A gates of the Hopper ladder at 8192, timing forced, one per card 0-2, while card 3 runs the timer's
#      bias check (20 processes a case, a Hopper case at 8192 and fp32/warptile at 4096);
#   3  the A/A Hopper gate and the common.cuh gate with --gpus 4, then the tile-order change (card 0) and the
#      800-cycle epilogue spin (card 1) gated with default options, while cards 2-3 run the independent timer on the
#      tile order at 4096 and on a sample of the common.cuh edit's kernels;
#   4  the common.cuh edit gated at 4096 on card ${CARD:-0};
#   3-gpus4  phase 3's two gates over the four cards alone (the A/A Hopper gate and the common.cuh gate, --gpus 4);
#   tile, spin  the tile-order change or the 800-cycle epilogue spin alone, gated with default options on card
#      ${CARD:-0} (the rest of the box left to other work);
#   events-common  the independent cold-L2 timer on the common.cuh edit (COMMON_EDIT, below) at 4096, one process a
#      kernel of ${EVENTS_KERNELS:-fp32/warptile fp16/mma_buffered fp16/wgmma_specialized}, on card ${CARD:-0};
#   events-tile  the independent cold-L2 timer on the tile-order change, both kernels, three processes each, at
#      ${SIZES:-4096} on card ${CARD:-0};
#   aa  one A/A gate of the Hopper ladder at 8192, timing forced, on card ${CARD:-0}, cut at ${AA_LIMIT_S:-450} s;
#      two may run at once, on two cards (CARD names each one's folders);
#   aa-all  the same gate with --gpus all over the cards ${CARDS:-0,1,2,3};
#   aa-4096  an A/A gate of every kernel at 4096, timing forced, --gpus all over the cards ${CARDS:-0,1,2,3}.
#   learn-4096, learn-8192  an A/A gate of every kernel at 4096 or of the Hopper ladder and its controls at 8192
#      (${LEARN_ROUNDS:-9} rounds: fewer, and an entry cannot tell its own outlier rounds), timing forced, --gpus
#      all over ${CARDS:-0,1,2,3}, every case the same rounds (no look before them, none after), then `sgemm noise
#      --rounds` over it and over any earlier gates' rounds in $LEARNED_FROM (folders, space-separated):
#      $OUT/noise-MACHINE.json (MACHINE ${MACHINE:-nvidia-h100-80gb-hbm3}).
#   ladders  the best step of the FP16 mma.sync and FP32 ladders each made about 0.6% slower (a spin in proportion to
#      K at each block's start: tools/acceptance/inject.py), gated with default options at 4096 and 8192 on card
#      ${CARD:-0}, while card ${EVENTS_CARD:-1} reads each slowdown with the independent cold-L2 timer.
# Every gate's round files are kept ($keep/rounds-NAME, in the phase's tarball): noise can be learned from them, and
# gates replayed, later. NOISE=FILE: the aa gates judge with that noise file instead of the one main holds.
# Phases 2 to 4 judge with the noise file main holds: commit phase 1's noise.json to noise/ first.
# Run from the repository root with .whl (the offline wheelhouse) and .bundle/main.bundle carried
# (`git bundle create .bundle/main.bundle main`). Everything lands in $OUT/phaseN.tar.gz and $OUT/summary.txt.
set -uo pipefail
phase=${1:?usage: run.sh 1|2|3|3-gpus4|4|tile|spin|events-common|events-tile|aa|aa-all|aa-4096|learn-4096|learn-8192|ladders}
OUT=${OUT:-$PWD/out}
mkdir -p "$OUT"
src=$PWD
run_id=$phase${CARD:+-$CARD}
keep=/tmp/keep-$run_id  # each phase (and card) its own, so that two may run at once
mkdir -p "$keep"
ls .whl/*.whl | grep -v -e numpy- -e nvidia_ml_py- | xargs python3 -m pip install -q --no-index --no-deps \
    --no-compile --target /tmp/site 2>/dev/null
export PYTHONPATH=/tmp/site PIP_NO_INDEX=1 PIP_FIND_LINKS=$src/.whl PYTHONUNBUFFERED=1
export GIT_AUTHOR_NAME=lab GIT_AUTHOR_EMAIL=lab@box GIT_COMMITTER_NAME=lab GIT_COMMITTER_EMAIL=lab@box
say() { echo "$(date -u +%H:%M:%S) $*" | tee -a "$OUT/summary.txt"; }
nvidia-smi --query-gpu=index,name,driver_version,clocks.sm,clocks.max.sm,power.draw,power.limit,temperature.gpu \
    --format=csv | tee -a "$OUT/summary.txt"

# The scratch repository: main as carried, and on top of it one commit per edit (each a branch of its own).
repo=/tmp/repo-$run_id
rm -rf $repo && git clone -q "$src/.bundle/main.bundle" $repo && cd $repo && git checkout -q -B main origin/main
base=$(git rev-parse HEAD)
say "main at $base"
edit() {  # edit NAME PYTHON: a commit on main made by the Python snippet, its hash printed
    git checkout -q -B "$1" "$base" && python3 -c "$2" && git commit -qam "$1" && git rev-parse HEAD
}
aa=$(edit aa "import pathlib; p = pathlib.Path('docs/gate.md'); p.write_text(p.read_text() + '\n')")
tile=$(edit tile "from tools.acceptance import inject; import pathlib
inject.replace_once(pathlib.Path('kernels/wgmma_specialized.cu'), '        constexpr int kGroupRows = 8;\n',
                    '        constexpr int kGroupRows = 4;\n')")
spin=$(edit spin "from tools.acceptance import inject; import pathlib
inject.spin(pathlib.Path('.'), inject.TMA_STORE_EPILOGUE, '800', 'An injected slowdown, 800 SM cycles a tile.')")
# Two edits of the helpers every kernel's epilogue calls (kernels/common.cuh), each the same work, since the
# benchmarks' beta is 0 and both touch only what runs where beta != 0. COMMON_EDIT picks the one gated as "common":
#   ldcs  C read with a streaming load (ld.global.cs): ptxas schedules much of each kernel anew, loops included, and
#         on an H200 the gate read -7% to +5% (call 20);
#   fma   beta * C added with the multiply-add the other way round (fmaf(beta, c, alpha * acc)): new machine code in
#         the epilogues, the K loops of most kernels untouched (lab/2026-11-28-common-edit).
common_ldcs=$(edit common-ldcs "import pathlib; p = pathlib.Path('kernels/common.cuh'); t = p.read_text()
for old, new in (('beta * *c;', 'beta * __ldcs(c);'),
                 ('const float4 old = *reinterpret_cast<const float4*>(c);',
                  'const float4 old = __ldcs(reinterpret_cast<const float4*>(c));'),
                 ('const float2 old = *reinterpret_cast<const float2*>(c);',
                  'const float2 old = __ldcs(reinterpret_cast<const float2*>(c));')):
    assert t.count(old) == 1, old
    t = t.replace(old, new)
p.write_text(t)")
common_fma=$(edit common-fma "import pathlib; p = pathlib.Path('kernels/common.cuh'); t = p.read_text()
for old, new in (('alpha * acc : alpha * acc + beta * *c;', 'alpha * acc : fmaf(beta, *c, alpha * acc);'),
                 ('        out.x += beta * old.x;\n        out.y += beta * old.y;\n        out.z += beta * old.z;\n'
                  '        out.w += beta * old.w;\n',
                  '        out = make_float4(fmaf(beta, old.x, out.x), fmaf(beta, old.y, out.y), fmaf(beta, old.z, out.z),\n'
                  '                          fmaf(beta, old.w, out.w));\n'),
                 ('        out.x += beta * old.x;\n        out.y += beta * old.y;\n    }',
                  '        out = make_float2(fmaf(beta, old.x, out.x), fmaf(beta, old.y, out.y));\n    }')):
    assert t.count(old) == 1, old
    t = t.replace(old, new)
p.write_text(t)")
case ${COMMON_EDIT:-fma} in
ldcs) common=$common_ldcs ;;
fma) common=$common_fma ;;
*) echo "COMMON_EDIT is ldcs or fma, not ${COMMON_EDIT}" >&2; exit 2 ;;
esac
ladders=$(edit ladders "from tools.acceptance import inject; import pathlib
for place in (inject.FRAGMENT_BUFFERED_PER_K.place, inject.THREAD_TILE_16X8_PER_K.place):
    inject.slow_by_percent(pathlib.Path('.'), place.source, 0.6)")
git checkout -q main
for name in main tile common-ldcs common-fma ladders; do  # source trees for the independent timer
    mkdir -p /tmp/trees-$run_id/$name && git archive "$name" | tar -x -C /tmp/trees-$run_id/$name
done
say "commits: aa $aa, tile $tile, spin $spin, common $common (${COMMON_EDIT:-fma}; ldcs $common_ldcs, fma $common_fma), ladders $ladders"
# The Hopper ladder's 14 cases at 8192 and the two cuBLAS controls, by name: `-k fp16` is the whole precision, which
# now holds the mma.sync steps at 8192 too.
hopper=()
for precision in fp16 bf16; do
    for name in cublas wgmma_tma wgmma_tma_wide wgmma_specialized wgmma_pipelined wgmma_persistent wgmma_cluster \
            wgmma_grouped_tma_store; do
        hopper+=(-k "$precision/$name")
    done
done

gate() {  # gate NAME CARDS HEAD ARGS...: `sgemm gate main HEAD ARGS` on CUDA_VISIBLE_DEVICES=CARDS, timed, cut at $limit s
    local name=$1 cards=$2 head=$3; shift 3
    local started=$SECONDS
    CUDA_VISIBLE_DEVICES=$cards timeout "${limit:-540}" python3 -m sgemm gate "$base" "$head" --work /tmp/work-$run_id-$name \
        --report $keep/$name.md "$@" > $keep/$name.log 2>&1
    local status=$?
    say "gate $name (cards $cards; $*): exit $status after $((SECONDS - started)) s: $(tail -n 1 $keep/$name.log)"
    mkdir -p $keep/rounds-$name && cp -r /tmp/work-$run_id-$name/paired/rounds $keep/rounds-$name/ 2>/dev/null
}
# The independent timer flushes as EVENTS_FLUSH says: memset (cudaMemsetAsync, back to back at the cap where the
# kernel reaches it: the gate's regime, and ab_events' default from calls 25-26 on; calls 1-24 ran fill), fill (CuPy's
# fill kernel, slow enough that each GEMM starts off the power cap: the issue's own timer) or memset+idle (memset,
# then the card idle IDLE_US, default 450).
events() {  # events CARD TREE_B KERNEL SIZE: the independent cold-L2 timer, main's tree against TREE_B
    local how=${EVENTS_FLUSH:-memset} idle=()
    [[ $how == *+idle ]] && idle=(--idle-us "${IDLE_US:-450}")
    CUDA_VISIBLE_DEVICES=$1 timeout 90 python3 -m tools.acceptance.ab_events /tmp/trees-$run_id/main /tmp/trees-$run_id/$2 "$3" "$4" \
        --flush-l2 --flush-with "${how%+idle}" "${idle[@]}" >> $keep/events.jsonl 2>> $keep/events.err
    say "events $2 $3 $4: $(tail -n 1 $keep/events.jsonl | cut -c1-160)"
}

case $phase in
1)
    {
        limit=300 gate noise-4096 1,2,3 "$aa" -k fp32 -k fp16 -k bf16 --size 4096 --no-sweep --time-unchanged --gpus all \
            --rounds 4 --max-rounds 4 --extra-rounds 0
        limit=190 gate noise-8192 1,2,3 "$aa" "${hopper[@]}" --size 8192 --no-sweep --time-unchanged --gpus all \
            --rounds 8 --max-rounds 8 --extra-rounds 0
        python3 -m sgemm noise --rounds /tmp/work-$run_id-noise-4096 --rounds /tmp/work-$run_id-noise-8192 \
            --machine nvidia-h100-80gb-hbm3 --out $keep/noise.json > $keep/noise.log 2>&1
        say "noise: exit $?: $(tail -n 2 $keep/noise.log)"
        cp $keep/noise.json "$OUT/noise.json"
    } &
    {
        case=fp16/wgmma_grouped_tma_store:8192
        CUDA_VISIBLE_DEVICES=0 timeout 380 python3 -m tools.acceptance.timer_bias --processes 20 --case $case \
            --out $keep/bias-hopper.json > $keep/bias-hopper.log 2>&1
        say "timer bias $case: exit $?: $(tail -n 1 $keep/bias-hopper.log | cut -c1-300)"
        for kernel in fp16/wgmma_grouped_tma_store bf16/wgmma_grouped_tma_store; do
            for process in 1 2 3; do events 0 tile $kernel 8192; done
        done
    } &
    wait
    ;;
2)
    for card in 0 1 2; do
        limit=450 gate aa-card$card $card "$aa" "${hopper[@]}" --size 8192 --no-sweep --time-unchanged &
    done
    {
        for case in fp16/wgmma_grouped_tma_store:8192 fp32/warptile:4096; do
            name=bias-${case//[\/:]/-}
            CUDA_VISIBLE_DEVICES=3 timeout 230 python3 -m tools.acceptance.timer_bias --processes 20 --case $case \
                --out $keep/$name.json > $keep/$name.log 2>&1
            say "timer bias $case: exit $?: $(tail -n 1 $keep/$name.log | cut -c1-300)"
        done
    } &
    wait
    ;;
3)
    limit=200 gate aa-gpus4 0,1,2,3 "$aa" "${hopper[@]}" --size 8192 --no-sweep --time-unchanged --gpus 4
    limit=200 gate common-gpus4 0,1,2,3 "$common" --size 4096 --no-sweep --gpus 4
    limit=180 gate tile 0 "$tile" --size 4096 --size 8192 --no-sweep &
    limit=180 gate spin 1 "$spin" --size 4096 --size 8192 --no-sweep &
    {
        for kernel in fp16/wgmma_grouped_tma_store bf16/wgmma_grouped_tma_store; do
            for process in 1 2 3; do events 2 tile $kernel 4096; done
        done
    } &
    {
        for kernel in fp32/warptile fp16/mma_buffered fp16/wgmma_specialized; do events 3 "common-${COMMON_EDIT:-fma}" $kernel 4096; done
    } &
    wait
    ;;
4)
    limit=${COMMON_LIMIT_S:-540} gate common-one "${CARD:-0}" "$common" --size 4096 --no-sweep
    ;;
3-gpus4)
    limit=200 gate aa-gpus4 0,1,2,3 "$aa" "${hopper[@]}" --size 8192 --no-sweep --time-unchanged --gpus 4
    limit=200 gate common-gpus4 0,1,2,3 "$common" --size 4096 --no-sweep --gpus 4
    ;;
tile)
    limit=${TILE_LIMIT_S:-330} gate tile "${CARD:-0}" "$tile" --size 4096 --size 8192 --no-sweep
    ;;
spin)
    limit=${SPIN_LIMIT_S:-330} gate spin "${CARD:-0}" "$spin" --size 4096 --size 8192 --no-sweep
    ;;
events-common)
    for kernel in ${EVENTS_KERNELS:-fp32/warptile fp16/mma_buffered fp16/wgmma_specialized}; do
        events "${CARD:-0}" "common-${COMMON_EDIT:-fma}" $kernel 4096
    done
    ;;
events-tile)
    for size in ${SIZES:-4096}; do
        for kernel in fp16/wgmma_grouped_tma_store bf16/wgmma_grouped_tma_store; do
            for process in 1 2 3; do events "${CARD:-0}" tile $kernel $size; done
        done
    done
    ;;
aa)
    limit=${AA_LIMIT_S:-450} gate aa-card"${CARD:-0}" "${CARD:-0}" "$aa" "${hopper[@]}" --size 8192 --no-sweep \
        --time-unchanged ${NOISE:+--noise "$NOISE"}
    ;;
aa-all)
    limit=${AA_LIMIT_S:-450} gate aa-all "${CARDS:-0,1,2,3}" "$aa" "${hopper[@]}" --size 8192 --no-sweep \
        --time-unchanged --gpus all ${NOISE:+--noise "$NOISE"}
    ;;
aa-4096)
    limit=${AA_LIMIT_S:-450} gate aa-4096 "${CARDS:-0,1,2,3}" "$aa" -k fp32 -k fp16 -k bf16 --size 4096 --no-sweep \
        --time-unchanged --gpus all ${NOISE:+--noise "$NOISE"}
    ;;
ladders)
    limit=${LADDERS_LIMIT_S:-300} gate ladders "${CARD:-0}" "$ladders" --size 4096 --size 8192 --no-sweep &
    {
        for kernel in fp16/mma_fragment_buffered fp32/async_thread_tile_16x8; do
            for size in 4096 8192; do events "${EVENTS_CARD:-1}" ladders $kernel $size; done
        done
    } &
    wait
    ;;
learn-4096 | learn-8192)
    machine=${MACHINE:-nvidia-h100-80gb-hbm3}
    if [[ $phase == learn-4096 ]]; then
        rounds=${LEARN_ROUNDS:-9} selected=(-k fp32 -k fp16 -k bf16 --size 4096)
    else
        rounds=${LEARN_ROUNDS:-9} selected=("${hopper[@]}" --size 8192)
    fi
    limit=${LEARN_LIMIT_S:-330} gate $phase "${CARDS:-0,1,2,3}" "$aa" "${selected[@]}" --no-sweep --time-unchanged \
        --gpus all --rounds "$rounds" --max-rounds "$rounds" --extra-rounds 0 --machine "$machine"
    from=(--rounds /tmp/work-$run_id-$phase)
    for folder in ${LEARNED_FROM:-}; do from+=(--rounds "$folder"); done
    python3 -m sgemm noise "${from[@]}" --machine "$machine" --out $keep/noise-$machine.json > $keep/noise.log 2>&1
    say "noise: exit $?: $(tail -n 2 $keep/noise.log)"
    cp $keep/noise-$machine.json "$OUT/" 2>/dev/null
    ;;
esac
tar -czf "$OUT/phase$phase.tar.gz" -C $keep .
cat "$OUT/summary.txt"
