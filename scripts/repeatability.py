#!/usr/bin/env python3
"""How repeatable is a GPU box? Compare two asv results trees of the same code on the same machine.

Usage: scripts/repeatability.py RESULTS_A RESULTS_B [--min-us 100] [--max-percent 1]
Prints each case's median time in both trees (the median of every NVBench sample asv kept) and their difference,
worst last; exit 1 if any case differs by more than --max-percent, 2 if the trees share no case with samples.
"""

import argparse
import statistics
import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from sgemm.results import asvsuite


def medians(results_dir: Path) -> dict[str, float]:
    """'machine case' -> the median of the case's time samples, from each machine's newest run."""
    found = {}
    for machine in sorted(p.parent.name for p in results_dir.glob("*/machine.json")):
        for run in asvsuite.runs(results_dir, machine):  # oldest first: a newer run's figure replaces an older one
            for benchmark in (asvsuite.GEMM, asvsuite.SHAPES):
                for case in run.values(benchmark, asvsuite.TIME):
                    samples = run.samples(case, asvsuite.TIME)
                    if samples:
                        found[f"{machine} {case.label}"] = statistics.median(samples)
    return found


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("first", type=Path)
    parser.add_argument("second", type=Path)
    parser.add_argument("--min-us", type=float, default=100.0, help="ignore cases faster than this (default 100)")
    parser.add_argument("--max-percent", type=float, default=1.0)
    args = parser.parse_args()
    a, b = medians(args.first), medians(args.second)
    common = [case for case in a if case in b and a[case] * 1e6 >= args.min_us]
    if not common:
        print("no case with samples in both trees (were both runs made with --record-samples?)", file=sys.stderr)
        return 2
    rows = sorted(((abs(b[c] / a[c] - 1) * 100, c) for c in common))
    for diff, case in rows:
        print(f"{diff:6.2f}%  {a[case] * 1e6:10.1f} us  {b[case] * 1e6:10.1f} us  {case}")
    worst, case = rows[-1]
    print(f"{len(rows)} cases >= {args.min_us:g} us; worst {worst:.2f}% ({case})")
    return 1 if worst > args.max_percent else 0


if __name__ == "__main__":
    sys.exit(main())
