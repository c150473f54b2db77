"""Simulated gates through the gate's own looks and verdicts (sgemm.gate.looks, sgemm.gate.verdict): how often
an A/A gate raises a false alarm, how often a real change is found, and how many rounds it takes.

Each gate has --cases cases measured paired. A case's round ratio scatters lognormally around its true ratio by its
own round-to-round sd, drawn from the sds a noise file records (--sds-from; by default the H100's, learned from an
A/A gate of every kernel at 4096 with rounds of at most 0.8 s a case,
lab/2026-11-25-gate-selftest/aa-1-noise.json: median 0.025%, the noisiest 0.73%), or log-uniformly between --sd-low
and --sd-high. With --noise-file each case has a noise file learned from --noise-rounds rounds of an earlier A/A gate of
the same case. With --changed, one case of each gate is slower by that fraction.
Gates run in --seeds seeds of --gates gates each; a seed's gates share nothing with another seed's.

Prints a line per seed and the totals, then one line of JSON (for the tests, which run a small version).
Usage, from the repository root:
    python -m tools.simulate.simulate_gates [--seeds 20] [--gates 50] [--cases 58] [--threshold 0.25] [--noise-file]
                                            [--changed 0.005] [--unpaired]
"""

from __future__ import annotations

import argparse
import json
import math
import random
import sys
from pathlib import Path

from sgemm.gate.looks import Schedule, run_looks
from sgemm.gate.verdict import Verdict
from sgemm.rounds.evidence import Case, Noise, PairedRounds, Rounds

ROOT = Path(__file__).resolve().parents[2]


def simulate_gate(rng: random.Random, args, measured_sds: list[float]) -> dict:
    if measured_sds:
        sds = [rng.choice(measured_sds) for _ in range(args.cases)]
    else:
        sds = [math.exp(rng.uniform(math.log(args.sd_low), math.log(args.sd_high))) for _ in range(args.cases)]
    truth = [1.0 + (args.changed if i == 0 and args.changed else 0.0) for i in range(args.cases)]
    labels = [f"k{i}" for i in range(args.cases)]
    noise = {}
    if args.noise_file:
        for label, sd in zip(labels, sds):
            logs = [rng.gauss(0, sd) for _ in range(args.noise_rounds)]
            mean = sum(logs) / len(logs)
            noise[label] = Noise(math.sqrt(sum((x - mean) ** 2 for x in logs) / (len(logs) - 1)),
                                 len(logs) - 1)
    drawn: dict[str, list] = {label: [] for label in labels}

    def draw(i: int):
        if args.unpaired:
            return (1e-3 * math.exp(rng.gauss(0, sds[i])), 1e-3 * truth[i] * math.exp(rng.gauss(0, sds[i])))
        return truth[i] * math.exp(rng.gauss(0, sds[i]))

    def measure(wanted: list[str], rounds: int) -> dict[str, Case]:
        cases = {}
        for label in wanted:
            i = labels.index(label)
            while len(drawn[label]) < rounds:
                drawn[label].append(draw(i))
            if args.unpaired:
                before = Rounds(tuple(b for b, _ in drawn[label]), (1980.0,) * rounds)
                after = Rounds(tuple(a for _, a in drawn[label]), (1980.0,) * rounds)
                cases[label] = Case(label, label, args.threshold / 100, before=before, after=after,
                                    noise=noise.get(label))
            else:
                cases[label] = Case(label, label, args.threshold / 100, paired=PairedRounds(tuple(drawn[label])),
                                    noise=noise.get(label))
        return cases

    outcome = run_looks(labels, measure, Schedule(args.rounds, args.max_rounds))
    verdicts = {label: c.verdict for label, c in outcome.comparisons.items()}
    flagged = [label for label, v in verdicts.items() if v in (Verdict.REGRESSION, Verdict.IMPROVEMENT)]
    return {"false_alarm": any(label != "k0" or not args.changed for label in flagged),
            "found": args.changed and verdicts.get("k0") is Verdict.REGRESSION,
            "not_powered": sum(v is Verdict.NOT_POWERED for v in verdicts.values()),
            "ambiguous": sum(v is Verdict.AMBIGUOUS for v in verdicts.values()),
            "rounds": outcome.rounds, "looks": outcome.looks}


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--seeds", type=int, default=20)
    parser.add_argument("--gates", type=int, default=50)
    parser.add_argument("--cases", type=int, default=58)
    parser.add_argument("--threshold", type=float, default=0.25, help="percent")
    parser.add_argument("--sds-from", type=Path, default=ROOT / "lab" / "2026-11-25-gate-selftest" / "aa-1-noise.json",
                        help="a noise file whose paired sds the cases' sds are drawn from")
    parser.add_argument("--sd-low", type=float, help="instead, sds log-uniform from this (a fraction) ...")
    parser.add_argument("--sd-high", type=float, help="... to this")
    parser.add_argument("--noise-file", action="store_true")
    parser.add_argument("--noise-rounds", type=int, default=9)
    parser.add_argument("--changed", type=float, default=0.0, help="one case slower by this fraction")
    parser.add_argument("--unpaired", action="store_true")
    parser.add_argument("--rounds", type=int, default=3)
    parser.add_argument("--max-rounds", type=int, default=9)
    args = parser.parse_args(argv)
    measured_sds = [] if args.sd_low else \
        [entry["sd"] for entry in json.loads(args.sds_from.read_text())["paired"].values()]
    totals = {"gates": 0, "false_alarm": 0, "found": 0, "not_powered": 0, "ambiguous": 0, "rounds": 0, "looks": 0}
    for seed in range(args.seeds):
        rng = random.Random(seed)
        per_seed = [simulate_gate(rng, args, measured_sds) for _ in range(args.gates)]
        alarms = sum(g["false_alarm"] for g in per_seed)
        print(f"seed {seed:2d}: {alarms} of {args.gates} gates with a false alarm"
              + (f", the change found in {sum(g['found'] for g in per_seed)}" if args.changed else "")
              + f", {sum(g['not_powered'] for g in per_seed)} cases NOT POWERED, "
              f"mean rounds {sum(g['rounds'] for g in per_seed) / args.gates:.1f}", flush=True)
        totals["gates"] += args.gates
        for key in ("false_alarm", "found", "not_powered", "ambiguous", "rounds", "looks"):
            totals[key] += sum(g[key] for g in per_seed)
    gates = totals["gates"]
    print(f"total: {totals['false_alarm']} of {gates} gates with a false alarm ({totals['false_alarm'] / gates:.1%})"
          + (f"; the change found in {totals['found']} ({totals['found'] / gates:.1%})" if args.changed else "")
          + f"; {totals['not_powered']} cases NOT POWERED, {totals['ambiguous']} AMBIGUOUS; "
          f"mean rounds {totals['rounds'] / gates:.2f}, mean looks {totals['looks'] / gates:.2f}")
    print(json.dumps({**totals, "false_alarm_rate": totals["false_alarm"] / gates,
                      "found_rate": totals["found"] / gates}))
    return 0


if __name__ == "__main__":
    sys.exit(main())
