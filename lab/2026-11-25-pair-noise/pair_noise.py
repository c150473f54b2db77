#!/usr/bin/env python3
"""How one case's paired noise behaves: a long paired A/A run (the kernel against itself, in one process), cut into
windows as long as a gate round gives a case, to see which estimate of a window's ratio varies least from window to
window and how the launch times spread.

Usage: scripts/pair-noise.py KERNEL [KERNEL ...] [--size 4096] [--seconds 8] [--window-s 0.8] [--modules] [--raw]
With --modules the two builds come from two exports of HEAD, each its own module, as a gate's base and head do;
without, both are the one module. --raw adds every pair's log ratio.
Prints one line of JSON a kernel: block-time spread, the pair ratios' spread and lag-1 autocorrelation, and the sd
across windows of three estimates of a window's ratio (median of pair ratios, mean of their logs, 20% trimmed mean).
"""

from __future__ import annotations

import argparse
import itertools
import json
import math
import sys
import tempfile
from pathlib import Path
from statistics import mean, median, pstdev, quantiles

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))


def trimmed_mean(values: list[float], cut: float = 0.2) -> float:
    ordered = sorted(values)
    drop = int(len(ordered) * cut)
    kept = ordered[drop:len(ordered) - drop] or ordered
    return mean(kept)


def lag1(values: list[float]) -> float:
    centre = mean(values)
    deviations = [v - centre for v in values]
    denominator = sum(d * d for d in deviations)
    return sum(a * b for a, b in itertools.pairwise(deviations)) / denominator if denominator else math.nan


def summary(name: str, size: int, seconds: float, window_s: float, trees: list[Path], raw: bool) -> dict:
    from sgemm import sourcetree
    from sgemm.catalogue import get_kernel
    from sgemm.measuring.ab import Build, measure
    from sgemm.measuring.paired import PairedSettings
    from sgemm.measuring.telemetry import CardReadings

    kernel = get_kernel(name)
    first, second = [sourcetree.kernels(tree)[name] for tree in trees] if trees else (kernel, kernel)
    settings = PairedSettings(warmup_s=1.0, max_warmup_s=3.0, min_pairs=10**9, min_s=seconds, max_s=seconds,
                              target_half_width=0.0)
    result = measure([Build("a", first), Build("b", second)], size, size, size, settings, CardReadings.of(0))
    timing = result.timing
    logs = [math.log(r) for r in timing.pair_ratios[0]]
    pair_s = 4 * timing.launches_per_block * timing.builds[0].median_s
    per_window = max(1, round(window_s / pair_s))
    windows = [logs[i:i + per_window] for i in range(0, len(logs) - per_window + 1, per_window)]
    block_times = timing.builds[0].seconds_per_launch
    centre = median(block_times)
    deciles = [q / centre for q in quantiles(block_times, n=10)]

    def spread(estimate) -> float:
        return 100 * pstdev([estimate(w) for w in windows]) if len(windows) > 1 else math.nan

    return {
        **({"logs": logs} if raw else {}),
        "kernel": name, "size": size, "launch_ms": round(1e3 * centre, 4),
        "launches_per_block": timing.launches_per_block, "pairs": timing.pairs,
        "sm_clock_mhz": timing.builds[0].median_sm_clock_mhz,
        "block_deciles_over_median": [round(d, 4) for d in deciles],
        "pair_log_sd_pct": round(100 * pstdev(logs), 3), "pair_lag1": round(lag1(logs), 3),
        "pairs_per_window": per_window, "windows": len(windows),
        "window_sd_pct": {"median": round(spread(median), 4), "mean_log": round(spread(mean), 4),
                          "trimmed_mean_log": round(spread(trimmed_mean), 4)},
        "ratio_median": round(timing.ratio(), 5), "ratio_mean_log": round(math.exp(mean(logs)), 5),
        "mean_log_se_pct": round(100 * pstdev(logs) / math.sqrt(len(logs)), 4),
    }


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("kernels", nargs="+")
    parser.add_argument("--size", type=int, default=4096)
    parser.add_argument("--seconds", type=float, default=8.0)
    parser.add_argument("--window-s", type=float, default=0.8)
    parser.add_argument("--modules", action="store_true")
    parser.add_argument("--raw", action="store_true")
    args = parser.parse_args()
    with tempfile.TemporaryDirectory() as scratch:
        trees = [sourcetree_export(Path(scratch) / side) for side in ("a", "b")] if args.modules else []
        for name in args.kernels:
            print(json.dumps(summary(name, args.size, args.seconds, args.window_s, trees, args.raw)), flush=True)
    return 0


def sourcetree_export(dest: Path) -> Path:
    from sgemm import sourcetree

    return sourcetree.export(Path(__file__).resolve().parents[1], "HEAD", dest)


if __name__ == "__main__":
    sys.exit(main())
