"""Would a round's interval narrow if its ratios were taken a period of the order at a time (the A B B A pair and the
B A A B pair after it, whose place effects cancel) rather than a pair at a time? Reads every recorded round file
given (JSON lines with "pair_ratios", as the gate keeps them) and, for each round of at least 12 pairs, compares the
trimmed mean's 95% half width (sgemm.measuring.paired.estimate_interval, the gate's estimator) over the pairs and
over the periods. Prints the distribution of the ratio of the two half widths and the cases it narrows most.

    python lab/2026-11-29-period-ratios/period_ratios.py ROUND.jsonl ...  (from the repository root)
"""

import json
import math
import statistics
import sys
from collections import defaultdict

from sgemm.measuring.paired import TRIMMED_MEAN, estimate_interval


def half_width(ratios: list[float]) -> float:
    low, high = estimate_interval(ratios, TRIMMED_MEAN)
    return (math.log(high) - math.log(low)) / 2


def main(paths: list[str]) -> None:
    narrowing: list[float] = []
    by_case: dict[str, list[float]] = defaultdict(list)
    for path in paths:
        for line in open(path):
            try:
                round_ = json.loads(line)
            except json.JSONDecodeError:
                continue
            pairs = round_.get("pair_ratios") or []
            if len(pairs) < 12:
                continue
            pairs = pairs[:len(pairs) // 2 * 2]  # counting starts with A B B A, so a period is pairs 2i and 2i + 1
            periods = [math.sqrt(pairs[2 * i] * pairs[2 * i + 1]) for i in range(len(pairs) // 2)]
            if (by_pairs := half_width(pairs)) > 0:
                narrowing.append(half_width(periods) / by_pairs)
                by_case[round_["label"]].append(narrowing[-1])
    narrowing.sort()
    def at(share: float) -> float:
        return narrowing[min(len(narrowing) - 1, int(share * len(narrowing)))]
    print(f"{len(narrowing)} rounds of 12 pairs or more, {len(by_case)} cases; half width by periods over by pairs: "
          f"median {statistics.median(narrowing):.3f}, p10 {at(0.1):.3f}, p25 {at(0.25):.3f}, p75 {at(0.75):.3f}, "
          f"p90 {at(0.9):.3f}; narrower in {sum(x < 1 for x in narrowing)}")
    print("the cases it narrows most (median over their rounds, rounds):")
    for label, values in sorted(by_case.items(), key=lambda item: statistics.median(item[1]))[:10]:
        print(f"  {label}: {statistics.median(values):.3f} ({len(values)})")


if __name__ == "__main__":
    main(sys.argv[1:])
