"""How often one case's rounds lose rounds to the outlier rule (sgemm.rounds.outliers.outlier_indices, as the gate
calls it), against an entry of 0.1% and 24 degrees of freedom: rounds 1, 1.5, 2 and 3 times as wide as the entry,
with 0 to 3 outliers (4 to 12 entry sds off) among nine. Prints, a row each, the share of cases with any round set
aside and the share with every outlier set aside.

Usage, from the repository root: python lab/2026-11-28-gate-outlier-rounds/uncut_rest.py"""

import random

from sgemm.rounds.evidence import Noise
from sgemm.rounds.outliers import outlier_indices

ENTRY = Noise(0.001, 24)


def shares(scale: float, outliers: int, trials: int = 4000, seed: int = 3) -> tuple[float, float]:
    rng, any_aside, all_told = random.Random(seed), 0, 0
    for _ in range(trials):
        logs = [rng.gauss(0, ENTRY.sd * scale) for _ in range(9)]
        for i in range(outliers):
            logs[i] += rng.choice((-1, 1)) * ENTRY.sd * rng.uniform(4, 12)
        far = set(outlier_indices(logs, ENTRY, known_df=1))
        any_aside += bool(far)
        all_told += bool(outliers) and set(range(outliers)) <= far
    return any_aside / trials, all_told / trials


if __name__ == "__main__":
    print("rounds / entry | outliers | cases with rounds set aside | cases with every outlier set aside")
    for scale in (1, 1.5, 2, 3):
        for outliers in range(4):
            aside, told = shares(scale, outliers)
            print(f"{scale} | {outliers} | {aside:.1%} | {told:.1%}")
