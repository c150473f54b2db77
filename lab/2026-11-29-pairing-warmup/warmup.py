# Why do small cases run the history's reference pairing warm-up to its 1.5-s cap? Each case below is paired
# against itself (A/A) with the history's settings (sgemm.measuring.record.REFERENCE_SETTINGS, L2 flushed), in the
# suite's pairing order of today's run, with the warm-up's steady check recorded: the first build's block times it
# saw, and whether it read steady. Printed a line a case; the series to $OUT/warmup.json.
# Usage (GPU box, repository root, PYTHONPATH on the checkout): python3 lab/2026-11-29-pairing-warmup/warmup.py OUT
import json, statistics, sys
from sgemm.catalogue import load_catalogue
from sgemm.measuring import ab, paired
from sgemm.measuring.record import REFERENCE_SETTINGS

CASES = [("fp32/smem_ilp4", 1024, 1024, 1024), ("fp16/mma_unrolled", 1024, 1024, 1024),
         ("fp32/naive", 1000, 1000, 1000), ("fp32/smem_tile", 256, 1024, 1024), ("fp32/smem_ilp8", 1024, 256, 1024),
         ("fp16/wmma_naive", 1024, 1024, 1024), ("fp32/double_buffer", 1000, 1000, 1000),
         ("fp16/mma_swizzled", 2048, 2048, 2048), ("fp32/smem_ilp4", 4096, 4096, 4096),
         ("fp16/wgmma_lean_loop", 4096, 4096, 4096), ("fp32/smem_ilp4", 1024, 1024, 1024),
         ("fp32/naive", 1000, 1000, 1000)]
checks = []
real_steady = paired._steady


def recording_steady(times, window, tolerance):
    verdict = real_steady(times, window, tolerance)
    checks.append({"times": list(times), "steady": verdict})
    return verdict


paired._steady = recording_steady
kernels = load_catalogue()
out = []
for name, m, n, k in CASES:
    checks.clear()
    kernel = kernels[name]
    result = ab.measure([ab.Build("reference", kernel), ab.Build("commit", kernel)], m, n, k, REFERENCE_SETTINGS)
    times = checks[-1]["times"] if checks else []
    diffs = []
    for check in checks:
        t = check["times"]
        if len(t) >= 6:
            diffs.append(abs(statistics.median(t[-3:]) / statistics.median(t[-6:-3]) - 1))
    spread = (statistics.median(abs(x / statistics.median(times) - 1) for x in times[len(times) // 2:])
              if times else float("nan"))
    line = (f"{name} {m}x{n}x{k}: warm-up {result.timing.warmup_s:.2f} s, {len(checks)} checks, "
            f"{len(times)} first-build blocks, {result.timing.launches_per_block} launches a block, "
            f"median |diff| of checks {100 * statistics.median(diffs) if diffs else float('nan'):.3f}%, "
            f"block spread (MAD, 2nd half) {100 * spread:.3f}%, A/A ratio {result.ratio():.4f} "
            f"({result.timing.pairs} pairs)")
    print(line, flush=True)
    out.append({"case": f"{name} {m}x{n}x{k}", "warmup_s": result.timing.warmup_s, "checks": list(checks),
                "ratio": result.ratio(), "pairs": result.timing.pairs,
                "launches_per_block": result.timing.launches_per_block})
json.dump(out, open(f"{sys.argv[1]}/warmup.json", "w"))
