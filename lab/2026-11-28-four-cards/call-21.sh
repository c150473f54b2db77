#!/usr/bin/env bash
# The twenty-first device call, on a host of four cards: the A/A Hopper gate at 8192 and the common.cuh edit at 4096,
# each with --gpus 4 (run.sh 3-gpus4, the edit COMMON_EDIT=fma: the multiply-add of the beta path the other way
# round). Then, one job a card: the independent cold-L2 timer on a sample of kernels under each edit (card 0: ldcs,
# the streaming load call 20 gated; card 1: fma; card 3: ldcs, more kernels), and the fma edit gated on card 2 alone.
# Carried: .whl, .bundle/main.bundle. Each job's results come back as $OUT/<job>.tar.gz.
jobs=/tmp/jobs21
source lab/2026-11-28-four-cards/prologue.sh
gates=lab/2026-11-28-gate-scale-on-the-gpu/run.sh
mkdir -p $jobs/gpus4 $jobs/events-ldcs $jobs/events-fma $jobs/events-ldcs-more $jobs/common-fma
COMMON_EDIT=fma OUT=$jobs/gpus4 bash $gates 3-gpus4 > $jobs/gpus4/run.log 2>&1
sample="fp32/smem_ilp4 fp32/float4_direct fp32/async_thread_tile_16x8 fp16/wgmma_tma fp16/mma_fragment_buffered"
CARD=0 COMMON_EDIT=ldcs EVENTS_KERNELS="$sample" OUT=$jobs/events-ldcs timeout 200 bash $gates events-common \
    > $jobs/events-ldcs/run.log 2>&1 &
CARD=1 COMMON_EDIT=fma EVENTS_KERNELS="$sample fp32/warptile fp16/wgmma_specialized" OUT=$jobs/events-fma \
    timeout 250 bash $gates events-common > $jobs/events-fma/run.log 2>&1 &
CARD=3 COMMON_EDIT=ldcs EVENTS_KERNELS="fp16/wgmma_cluster fp16/mma_buffered fp32/reg_tile_4x4 fp16/wgmma_specialized" \
    OUT=$jobs/events-ldcs-more timeout 200 bash $gates events-common > $jobs/events-ldcs-more/run.log 2>&1 &
CARD=2 COMMON_EDIT=fma COMMON_LIMIT_S=330 OUT=$jobs/common-fma bash $gates 4 > $jobs/common-fma/run.log 2>&1 &
wait
pack gpus4 events-ldcs events-fma events-ldcs-more common-fma
for job in gpus4 common-fma events-ldcs events-fma events-ldcs-more; do
    echo "== $job"; grep -h -e ' gate ' -e 'events ' -e 'commits:' $jobs/$job/summary.txt | sed 's/ (cards.*): exit/: exit/' | cut -c1-260
done
for report in /tmp/keep-3-gpus4/*.md /tmp/keep-4-2/*.md; do
    echo "== $report"; grep -h -e '^- Base' "$report" | head -1
    grep -h 'NOT POWERED\|REGRESSION\|IMPROVEMENT\|AMBIGUOUS' "$report" | cut -c1-200 | head -30
done
