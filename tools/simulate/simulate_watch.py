"""The history's change-point detector (sgemm.watch.steps) on simulated series: its false alarms on A/A series
and how often it finds a step of 1% and 2%, at the noise the gate measured.

Each series is one figure a commit for `--commits` commits: 1, times a step at `--step-at` (none for A/A), times
noise. The noise is the sd of one commit's figure, in the units of a ratio:
- 0.05%, 0.1%, 0.2%: the time over the reference build, one short paired round a commit (the gate's A/A rounds of
  paired ratios spread 0.004-0.20%, median 0.015-0.048% by kernel class, over rounds of up to 12 s; the history's
  rounds stop at 0.6 s, about four times noisier);
- 0.5%: a jittery FP32 kernel's ratio (fp32/smem_ilp32: the median of 24 pairs moves 0.52% from window to window);
- 0.8%: the round medians of a case timed unpaired below the power cap (0.1-0.8% round to round).
Each level is drawn normal and, to show what tails do, Student's t with 3 degrees of freedom scaled to the same sd.

    python -m tools.simulate.simulate_watch [--series 1000] [--commits 30] [--seed 1] [--json out.json]
                                                                          (from the repository root)

A false alarm is an A/A series in which the detector finds any step; a step is found when the detector places a
step at exactly the commit that made it, in its direction.
"""

from __future__ import annotations

import argparse
import json
import sys
import time
from pathlib import Path

import numpy as np

from sgemm.watch.steps import find_steps

NOISE_LEVELS = (0.0005, 0.001, 0.002, 0.005, 0.008)
SHAPES = ("normal", "t3")
STEPS = (0.0, 0.01, 0.02)


def draw_noise(rng: np.random.Generator, shape: str, sd: float, n: int) -> np.ndarray:
    if shape == "normal":
        return rng.normal(0.0, sd, n)
    return rng.standard_t(3, n) * sd / np.sqrt(3.0)  # t3's variance is 3


def simulate(series: int, commits: int, step_at: int, step: float, sd: float, shape: str,
             rng: np.random.Generator) -> dict:
    alarms = found = wrong_place = 0
    for _ in range(series):
        levels = np.ones(commits)
        levels[step_at:] *= 1 + step
        values = list(levels * np.exp(draw_noise(rng, shape, sd, commits)))
        steps = find_steps(values)
        if steps:
            alarms += 1
        if step and any(s.after.start == step_at and s.slower for s in steps):
            found += 1
        if step and any(s.after.start != step_at for s in steps):
            wrong_place += 1
    return {"series": series, "commits": commits, "noise_sd": sd, "shape": shape, "step": step, "step_at": step_at,
            "with_a_step_found": alarms, "found_at_its_commit": found, "with_a_step_elsewhere": wrong_place}


def run(series: int, commits: int, step_at: int, seed: int, levels=NOISE_LEVELS, shapes=SHAPES,
        steps=STEPS) -> list[dict]:
    rng = np.random.default_rng(seed)
    return [simulate(series, commits, step_at, step, sd, shape, rng)
            for step in steps for shape in shapes for sd in levels]


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--series", type=int, default=1000, help="series per noise level and step (default 1000)")
    parser.add_argument("--commits", type=int, default=30, help="commits a series (default 30)")
    parser.add_argument("--step-at", type=int, help="the first slower commit (default: the middle)")
    parser.add_argument("--seed", type=int, default=1)
    parser.add_argument("--json", type=Path, help="write every row here too")
    args = parser.parse_args(argv)
    if args.series < 1 or args.commits < 4:
        parser.error("--series must be at least 1 and --commits at least 4")
    step_at = args.commits // 2 if args.step_at is None else args.step_at
    if not 2 <= step_at <= args.commits - 2:
        parser.error(f"--step-at must leave two commits on each side (2 to {args.commits - 2})")
    started = time.monotonic()
    rows = run(args.series, args.commits, step_at, args.seed)
    print(f"{args.series} series of {args.commits} commits per row, step at commit {step_at}, seed {args.seed}, "
          f"{time.monotonic() - started:.0f} s")
    print(f"{'noise sd':>9} {'shape':>6} {'step':>5}  result")
    for row in rows:
        if row["step"] == 0:
            what = f"false alarms {row['with_a_step_found']} of {row['series']}"
        else:
            what = (f"found at its commit {row['found_at_its_commit']} of {row['series']}, a step elsewhere in "
                    f"{row['with_a_step_elsewhere']}")
        print(f"{row['noise_sd']:>9.2%} {row['shape']:>6} {row['step']:>5.0%}  {what}")
    if args.json:
        args.json.write_text(json.dumps(rows, indent=1) + "\n")
    return 0


if __name__ == "__main__":
    sys.exit(main())
