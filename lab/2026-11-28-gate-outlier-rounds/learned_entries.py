"""How far from the truth a noise-file entry lands when it is learned from A/A rounds of the simulation's kinds:
`sgemm noise`'s learner (sgemm.gate.noise.paired_entry over groups of nine rounds, as tools/simulate/simulate_gates.py
learns each entry: each pass from every round again) against one whose passes only ever set rounds aside (tried on
2026-11-28 and left out). Per degrees of freedom and kind of rounds: the median entry over the truth, its 10th and 90th
percentiles, and the share of entries beyond 1.5x and 2x and below 0.6x. Usage, from the repository root:
    python lab/2026-11-28-gate-outlier-rounds/learned_entries.py [--entries 3000] [--seed 1]"""

import argparse
import random
import statistics

from sgemm.gate import noise as gate_noise
from sgemm.rounds import outliers
from sgemm.rounds.evidence import pooled_noise, robust_sd, without_positions
from tools.simulate import simulate_gates


def passes_over_the_rounds_kept(groups):
    """The learner tried: each pass from the rounds the pass before kept, so that no round set aside comes back."""
    reach, kept = outliers.OUTLIER_SD * robust_sd(groups, outliers.SCALE_DF), groups
    for _ in range(outliers.LEARNING_PASSES):
        now = [without_positions(values, outliers._far(values, reach)) for values in kept]
        spread = pooled_noise(now, 0.0)
        if now == kept or spread is None:
            return now
        kept, reach = now, outliers.outlier_reach(kept, spread, known_df=1)
    return kept


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--entries", type=int, default=3000)
    parser.add_argument("--seed", type=int, default=1)
    args = parser.parse_args()
    print("| learner | df | rounds | median | p10 | p90 | > 1.5x | > 2x | < 0.6x |")
    print("|---|---:|---|---:|---:|---:|---:|---:|---:|")
    for name, learner in (("passes from every round (main)", outliers.ordinary_groups),
                          ("passes over the rounds kept (tried)", passes_over_the_rounds_kept)):
        gate_noise.ordinary_groups = learner
        rng = random.Random(args.seed)
        for df in (2, 5, 8, 24):
            for shape in ("normal", "t3", "outliers"):
                sds = sorted(simulate_gates.learned(rng, shape, 1.0, df, 1.0).sd for _ in range(args.entries))
                above_1_5, above_2, below_0_6 = (sum(map(test, sds)) / len(sds) for test in
                                                 (lambda s: s > 1.5, lambda s: s > 2, lambda s: s < 0.6))
                print(f"| {name} | {df} | {shape} | {statistics.median(sds):.2f} | {sds[len(sds) // 10]:.2f} | "
                      f"{sds[9 * len(sds) // 10]:.2f} | {above_1_5:.1%} | {above_2:.1%} | {below_0_6:.1%} |")


if __name__ == "__main__":
    main()
