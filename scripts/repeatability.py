#!/usr/bin/env python3
"""How repeatable is a GPU box? Compare the medians of two asv results trees of the same commit and machine.

Usage: scripts/repeatability.py RESULTS_A RESULTS_B [--min-us 100]
Prints each track_time case's medians and their difference, worst last; exit 1 if any case differs by more than
--max-percent (default 1).
"""

import argparse
import json
import statistics
import sys
from itertools import product
from pathlib import Path


def medians(results_dir: Path) -> dict[str, float]:
    found = {}
    for path in results_dir.glob("*/*.json"):
        if path.name == "machine.json":
            continue
        data = json.loads(path.read_text())
        for name, row in data["results"].items():
            if not name.endswith("track_time"):
                continue
            row = dict(zip(data["result_columns"], row))
            for params, samples in zip(product(*row["params"]), row.get("samples") or []):
                if samples:
                    found[f"{path.parent.name} {name} {' '.join(params)}"] = statistics.median(samples)
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
