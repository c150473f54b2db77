#!/usr/bin/env python3
"""A paired gate judged again from the rounds it recorded, under another noise file: what the gate would have said.

Each WORK is a paired gate's work folder (`sgemm gate --work`); its rounds/round-N.jsonl hold one paired ratio per
case a round. The replay runs the gate's own looks (sgemm.gate.looks) over those ratios, a look taking a case's
first rounds as the gate does, with --noise as the noise file (none: each case judged on its rounds alone). A look
that asks a case for more rounds than the gate recorded leaves it out and says so.

With --leave-one-out and several WORKs, each gate is judged with the paired noise learned from the others' rounds
alone: an estimate of the noise file's worth on gates it did not learn from.

Usage: scripts/replay-gate.py WORK [WORK ...] [--noise FILE | --leave-one-out] [--machine MACHINE]
Prints one line a gate (its verdict counts, the median detectable effect, the rounds it would have taken) and every
case not SAME.
"""

from __future__ import annotations

import argparse
import math
import sys
from collections import Counter
from pathlib import Path
from statistics import median

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from sgemm.gate.looks import Schedule, run_looks
from sgemm.gate.noise import NoiseFileError, learn_paired, read, round_files, round_ratios
from sgemm.gate.run import DEFAULT_MAX_ROUNDS, DEFAULT_ROUNDS
from sgemm.gate.verdict import Verdict
from sgemm.rounds.evidence import Case, Noise, PairedRounds
from sgemm.rounds.session import PAIRED_THRESHOLD


def recorded_ratios(work: Path) -> dict[str, list[float]]:
    """Each case's round ratios in round order."""
    files = round_files(work)
    if not files:
        raise SystemExit(f"replay-gate: {work}: no rounds/round-N.jsonl under it")
    try:
        ratios = round_ratios(files)
    except (OSError, ValueError) as exc:
        raise SystemExit(f"replay-gate: {work}: cannot read its rounds: {exc}") from None
    if not ratios:
        raise SystemExit(f"replay-gate: {work}: its rounds hold no measured ratio")
    return ratios


def replay(ratios: dict[str, list[float]], noise: dict[str, Noise]) -> tuple[list, list[str]]:
    """The comparisons the gate's looks reach on these ratios, and the cases a look wanted more rounds of."""
    short: list[str] = []

    def measure(labels: list[str], rounds: int) -> dict[str, Case]:
        cases = {}
        for label in labels:
            if len(ratios[label]) < rounds:
                short.append(f"{label} (wanted {rounds} rounds, {len(ratios[label])} recorded)")
                continue
            cases[label] = Case(label, label.split(" ")[0], PAIRED_THRESHOLD,
                                paired=PairedRounds(tuple(ratios[label][:rounds])), noise=noise.get(label))
        return cases

    outcome = run_looks(sorted(ratios), measure, Schedule(DEFAULT_ROUNDS, DEFAULT_MAX_ROUNDS))
    return list(outcome.comparisons.values()), short


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("work", nargs="+", type=Path)
    parser.add_argument("--noise", type=Path, help="a noise file (`sgemm noise`); its paired section is used")
    parser.add_argument("--leave-one-out", action="store_true",
                        help="judge each gate with the noise learned from the other gates' rounds")
    parser.add_argument("--machine", help="the machine the noise file must be of (default: any)")
    args = parser.parse_args()
    if args.leave_one_out and (args.noise or len(args.work) < 2):
        parser.error("--leave-one-out takes two gates or more and no --noise")
    fixed: dict[str, Noise] = {}
    if args.noise:
        try:
            fixed = read(args.noise, args.machine)[0].get("paired", {})
        except NoiseFileError as exc:
            parser.error(str(exc))
    recorded = {work: recorded_ratios(work) for work in args.work}  # every gate readable before any is judged
    for work in args.work:
        if args.leave_one_out:
            noise, gates, _ = learn_paired([other for other in args.work if other != work])
            source = f"noise from the other {gates} gates"
        else:
            noise, source = fixed, f"noise file {args.noise}" if args.noise else "no noise file"
        comparisons, short = replay(recorded[work], noise)
        counts = Counter(c.verdict.value for c in comparisons)
        detectable = median(c.detectable for c in comparisons if math.isfinite(c.detectable))
        print(f"{work}: {dict(sorted(counts.items()))}; median detectable {detectable:.3%}; up to "
              f"{max(c.case.rounds for c in comparisons)} rounds ({source})")
        for c in comparisons:
            if c.verdict is not Verdict.SAME:
                print(f"  {c.label}: {c.verdict.value}, ratio {c.ratio:.4f}, detectable {c.detectable:.3%}, "
                      f"{c.case.rounds} rounds; {c.why}")
        for line in short:
            print(f"  left out: {line}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
