"""The bad end's test of a pooled bisect alone (is there a step beyond the 0.25% threshold), timed to its own schedule
(sgemm.bisect.search.Limits.schedule_for: BAD_END_EXTRA_ROUNDS past the others' most), with a true ratio right at the
threshold's edge, where DIFFERENT is wrong, and with a true step of 0.5% and 1%, where it is right: how often it says
each, and its rounds. With and without a noise file's entry (the round noise, 12 df), at 0.14% and 0.3% round noise,
0% or 5% outlier rounds (ten times as noisy). 4,000 bad ends a row, seed 1. Nominal wrong DIFFERENT: at most 2.5%.

    python lab/2026-11-28-bisect-horizon/threshold_edge.py        (from the repository root)
"""

import math
import random
import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[2]))

from sgemm.bisect.compare import Answer, Region, RegionWithoutOutliers, Round, compare  # noqa: E402
from sgemm.bisect.search import BAD_END, Limits  # noqa: E402
from sgemm.rounds.evidence import Noise  # noqa: E402

RUNS, OUTLIER_SCALE = 4000, 10.0


def main() -> None:
    region = RegionWithoutOutliers(Region.within(0.0025))
    print("| true ratio | round noise | outlier rounds | noise file | horizon | DIFFERENT | SAME | UNKNOWN "
          "| rounds (mean) |")
    print("|---:|---:|---:|---|---:|---:|---:|---:|---:|")
    for truth, noise_sd in ((1.0025, 0.003), (1.0025, 0.0014), (1.005, 0.0014), (1.01, 0.003)):
        for share in (0.0, 0.05):
            for entry in (None, Noise(noise_sd, 12)):
                for name, schedule in (("9", Limits().schedule), ("15", Limits().schedule_for(BAD_END))):
                    rng = random.Random(1)

                    def next_round():
                        sd = noise_sd * (OUTLIER_SCALE if rng.random() < share else 1.0)
                        return Round(truth * math.exp(rng.gauss(0.0, sd)))

                    outcomes = [compare(next_round, [], region, schedule, noise=entry) for _ in range(RUNS)]
                    shares = {a: sum(o.verdict is a for o in outcomes) / RUNS for a in Answer}
                    rounds = sum(len(o.rounds) for o in outcomes) / RUNS
                    verdicts = " | ".join(f"{shares[a]:.2%}" for a in (Answer.DIFFERENT, Answer.SAME, Answer.UNKNOWN))
                    print(f"| {truth:.4f} | {noise_sd:.2%} | {share:.0%} | {'yes' if entry else 'no'} | {name} | "
                          f"{verdicts} | {rounds:.1f} |", flush=True)


if __name__ == "__main__":
    main()
