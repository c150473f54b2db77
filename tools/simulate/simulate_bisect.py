"""`sgemm bisect`'s own search (sgemm.bisect.search.run_bisect) on simulated ranges: how often it names the first bad
commit, gives up (UNKNOWN) or names a wrong one, with the builds and rounds it spends; today's rule (each commit
judged on its own rounds) beside the pooled one (one spread over the bisect's commits and the noise file's entry).

A range is `--commits` commits after the good end; the first bad commit is drawn uniformly among them (the bad end
itself included), and every commit from it on is slower by the step. Each round's ratio (the commit over the good
end) is the commit's true ratio times exp(noise): normal with the round noise as sd, or, in an outlier round (a share
`outliers` of the rounds), normal with OUTLIER_SCALE times that sd. The noise file's entry, where a row has one, is
drawn as a noise file would have learned it: the sd of NOISE_ENTRY_DF degrees of freedom of the same round noise.

    python -m tools.simulate.simulate_bisect [--runs 5000] [--commits 16] [--seed 1] [--json rows.json]
                                                                          (from the repository root)
"""

from __future__ import annotations

import json
import math
import statistics
import sys
import time
from dataclasses import dataclass
from pathlib import Path

import numpy as np

from sgemm.bisect.commits import Chain
from sgemm.bisect.compare import Round
from sgemm.bisect.search import Limits, State, query_of, run_bisect
from sgemm.bisect.targets import Target
from sgemm.commands import writable_file_problem
from sgemm.results.resultstree import FOUND, UNKNOWN
from sgemm.rounds.evidence import Noise
from tools.parser import ToolParser

OUTLIER_SCALE = 10.0  # an outlier round's noise, in round-noise sds
NOISE_ENTRY_DF = 12  # degrees of freedom of the noise file's entry (the H100's file holds 6 to 24 a case)
# (step, round noise): the two settings, a 1% step at 0.3% and a 0.5% step at 0.14%.
SETTINGS = ((0.01, 0.003), (0.005, 0.0014))
OUTLIER_SHARES = (0.0, 0.05)
RULES = ("today", "pooled", "pooled + noise file")


@dataclass
class Setting:
    step: float
    noise: float
    outliers: float
    rule: str


class _Unsaved(State):
    """A state that is never written: the search keeps it in memory, as it would between saves."""

    def save(self) -> None:
        pass


class _SimulatedRounds:
    """Rounds of one simulated range: each commit's true ratio times a draw of the round noise."""

    method = "simulated"

    def __init__(self, truth: dict[str, float], noise: float, outliers: float, rng: np.random.Generator):
        self.truth, self.noise, self.outliers, self.rng = truth, noise, outliers, rng
        self.rounds = 0

    def round(self, commit: str) -> Round:
        self.rounds += 1
        scale = OUTLIER_SCALE if self.rng.random() < self.outliers else 1.0
        return Round(self.truth[commit] * math.exp(self.rng.normal(0.0, self.noise * scale)))


def _limits(setting: Setting, rng: np.random.Generator) -> Limits:
    if setting.rule == "today":
        return Limits(pooled=False)
    if setting.rule == "pooled":
        return Limits()
    learned = setting.noise * math.sqrt(rng.chisquare(NOISE_ENTRY_DF) / NOISE_ENTRY_DF)
    return Limits(noise=Noise(learned, NOISE_ENTRY_DF))


def one_bisect(setting: Setting, commits: int, rng: np.random.Generator) -> dict:
    """One range searched: the verdict, whether the commit named is the first bad one, the builds and rounds."""
    hashes = [f"{number:040x}" for number in range(commits + 1)]
    first_bad = int(rng.integers(1, commits + 1))
    truth = {commit: (1 + setting.step if number >= first_bad else 1.0) for number, commit in enumerate(hashes)}
    chain = Chain(hashes[0], tuple(hashes[1:]), ())
    target = Target("simulated", "fp32/simulated", 4096, hashes[0], hashes[-1])
    limits = _limits(setting, rng)
    source = _SimulatedRounds(truth, setting.noise, setting.outliers, rng)
    state = _Unsaved(Path("/nonexistent"), query_of(target, limits))
    result = run_bisect(target, chain, source, state, limits, say=lambda _: None, clock=lambda: 0.0)
    return {"verdict": result["verdict"], "right": result["first_bad"] == hashes[first_bad],
            "builds": result["builds"], "rounds": source.rounds}


def simulate(setting: Setting, runs: int, commits: int, rng: np.random.Generator) -> dict:
    outcomes = [one_bisect(setting, commits, rng) for _ in range(runs)]
    found = sum(o["verdict"] == FOUND and o["right"] for o in outcomes)
    wrong = sum(o["verdict"] == FOUND and not o["right"] for o in outcomes)
    unknown = sum(o["verdict"] == UNKNOWN for o in outcomes)
    return {"step": setting.step, "round_noise": setting.noise, "outliers": setting.outliers, "rule": setting.rule,
            "runs": runs, "commits": commits, "found": found, "unknown": unknown, "wrong_commit": wrong,
            "other": runs - found - wrong - unknown,
            "builds_median": statistics.median(o["builds"] for o in outcomes),
            "rounds_mean": statistics.fmean(o["rounds"] for o in outcomes),
            "rounds_median": statistics.median(o["rounds"] for o in outcomes)}


def run(runs: int, commits: int, seed: int, settings=SETTINGS, outlier_shares=OUTLIER_SHARES,
        rules=RULES) -> list[dict]:
    rng = np.random.default_rng(seed)
    return [simulate(Setting(step, noise, share, rule), runs, commits, rng)
            for step, noise in settings for share in outlier_shares for rule in rules]


def table(rows: list[dict]) -> list[str]:
    """The rows as a Markdown table."""
    lines = ["| step | round noise | outlier rounds | spread | found | UNKNOWN | wrong commit | other | builds "
             "(median) | rounds (mean) | rounds (median) |", "|---:|---:|---:|---|---:|---:|---:|---:|---:|---:|---:|"]
    for row in rows:
        share = lambda key: f"{row[key] / row['runs']:.2%}"  # noqa: E731 - a row's count as a share of its runs
        lines.append(f"| {row['step']:.1%} | {row['round_noise']:.2%} | {row['outliers']:.0%} | {row['rule']} | "
                     f"{share('found')} | {share('unknown')} | {share('wrong_commit')} | {share('other')} | "
                     f"{row['builds_median']:g} | {row['rounds_mean']:.1f} | {row['rounds_median']:g} |")
    return lines


def main(argv: list[str] | None = None) -> int:
    parser = ToolParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--runs", type=int, default=5000, help="ranges searched per row (default 5000)")
    parser.add_argument("--commits", type=int, default=16, help="commits after the good end (default 16)")
    parser.add_argument("--seed", type=int, default=1)
    parser.add_argument("--json", type=Path, help="write every row here too")
    args = parser.parse_args(argv)
    if args.runs < 1 or args.commits < 1:
        parser.error("--runs and --commits must be at least 1")
    if args.json and (problem := writable_file_problem("--json", str(args.json))):
        parser.error(problem)  # before the minutes of simulation, not after them
    started = time.monotonic()
    rows = run(args.runs, args.commits, args.seed)
    print(f"{args.runs} ranges of {args.commits} commits a row, seed {args.seed}, "
          f"{time.monotonic() - started:.0f} s")
    print("\n".join(table(rows)))
    if args.json:
        args.json.write_text(json.dumps(rows, indent=1) + "\n")
    return 0


if __name__ == "__main__":
    sys.exit(main())
