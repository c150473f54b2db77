"""The bad end's test alone (is there a step beyond the 0.25% threshold), with a true ratio right at the threshold's
edge, where DIFFERENT is wrong: how often each test says it, the interval of every round (before) beside the interval
of the rounds kept once outliers are set aside (sgemm.bisect.compare.RegionWithoutOutliers), with and without a noise
file's entry (0.3%, 12 df), at 0.3% round noise with 0% or 5% outlier rounds (ten times as noisy). 4,000 bad ends a
row, seed 1. Nominal: at most 2.5% (one side of a 95% verdict).

    python lab/2026-11-28-bisect-outliers/threshold_edge.py        (from the repository root)
"""

import math
import random
import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[2]))

from sgemm.bisect.compare import Answer, CompareSchedule, Region, RegionWithoutOutliers, Round, compare  # noqa: E402
from sgemm.rounds.evidence import Noise  # noqa: E402

RUNS, ROUND_NOISE, OUTLIER_SCALE = 4000, 0.003, 10.0


def main() -> None:
    within, schedule = Region.within(0.0025), CompareSchedule()
    print("| true ratio | outlier rounds | noise file | test | DIFFERENT (wrong) | SAME | rounds (mean) |")
    print("|---:|---:|---|---|---:|---:|---:|")
    for truth in (1.0025, 1 / 1.0025):
        for share in (0.0, 0.05):
            for noise in (None, Noise(ROUND_NOISE, 12)):
                for name, region in (("interval of every round", within),
                                     ("outliers set aside", RegionWithoutOutliers(within))):
                    rng = random.Random(1)

                    def next_round():
                        sd = ROUND_NOISE * (OUTLIER_SCALE if rng.random() < share else 1.0)
                        return Round(truth * math.exp(rng.gauss(0.0, sd)))

                    outcomes = [compare(next_round, [], region, schedule, noise=noise) for _ in range(RUNS)]
                    different = sum(o.verdict is Answer.DIFFERENT for o in outcomes) / RUNS
                    same = sum(o.verdict is Answer.SAME for o in outcomes) / RUNS
                    rounds = sum(len(o.rounds) for o in outcomes) / RUNS
                    print(f"| {truth:.4f} | {share:.0%} | {'yes' if noise else 'no'} | {name} | {different:.2%} | "
                          f"{same:.2%} | {rounds:.1f} |", flush=True)


if __name__ == "__main__":
    main()
