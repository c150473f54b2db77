"""The watch on simulated growing histories, published after every commit: false notices per 1,000 commits per
machine, and how soon and where a real 1% step becomes a notice, with its interval's coverage.

It drives the watch's own rules: the detector of sgemm.watch.steps (`scan`, over the trailing WINDOW figures of every
series at every publish, vectorised over series and publishes) and the filing rules of sgemm.watch.filing (a step
becomes a notice once seen at two publishes in a row with enough commits after it; sightings whose first slow commits
lie close together are one notice). Each series counts as its own notice: the watch groups a kernel's precision twins
into one, so the counts here are an upper bound on the notices a machine files.

A machine holds `--series` series (default 275: 258 over-reference ratios at the row's noise and 17 cuBLAS round
medians at CUBLAS_SD, which move 2-8% between processes at the power cap). Each series' log figure is
    step + sd * (sqrt(COMMON) * regime[t] + sqrt(1 - COMMON) * own[series, t])
with one regime term a machine (a box's day, a clock regime) shared by all its series, and regime and own noise both
drawn from the row's model at unit variance: `normal`; `t3` (Student's t, 3 degrees of freedom, scaled); `ar1`
(AR(1), phi = 0.5, normal innovations: neighbouring commits correlated).

A false notice is every notice filed on a series with no true step, whether or not it later vanished. The interval
is Poisson's exact 95% interval of the count over the machine-commits simulated.

    python -m tools.simulate.simulate_watch [--machines 6] [--commits 1000] [--histories 2000] [--seed 1]
                                            [--json out.json]                  (from the repository root)
"""

from __future__ import annotations

import json
import math
import sys
import time
from pathlib import Path

import numpy as np
from numpy.lib.stride_tricks import sliding_window_view
from scipy import signal, stats

from sgemm.commands import writable_file_problem
from sgemm.watch.filing import persisted, same_step
from sgemm.watch.steps import MIN_SERIES, NOISE_PUBLISHES, WINDOW, interval_half, lag_one, scan
from tools.parser import ToolParser

NOISE_LEVELS = (0.001, 0.002, 0.005)
MODELS = ("normal", "t3", "ar1")
PHI = 0.5
COMMON = 0.5  # the share of each series' noise variance that its machine's regime term carries
SERIES = 275
CUBLAS_SERIES = 17
CUBLAS_SD = 0.03
STEP = 0.01
STEP_AT = 60  # commits of history before the true step
AFTER = 30  # commits measured after it
NOTICED_WITHIN = 10  # commits from the step (itself included)
COVERAGE_AFTER = 20  # the interval read at the publish with this many commits after the step
CHUNK = 64  # series scanned at once (memory)


def unit_noise(rng: np.random.Generator, model: str, shape: tuple[int, ...]) -> np.ndarray:
    """Noise of unit variance along the last axis (commits)."""
    if model == "normal":
        return rng.standard_normal(shape)
    if model == "t3":
        return rng.standard_t(3, shape) / math.sqrt(3.0)
    burn = 50
    innovations = rng.standard_normal((*shape[:-1], shape[-1] + burn))
    return signal.lfilter([math.sqrt(1 - PHI ** 2)], [1.0, -PHI], innovations, axis=-1)[..., burn:]


def machine_logs(rng: np.random.Generator, model: str, sds: np.ndarray, commits: int) -> np.ndarray:
    regime = unit_noise(rng, model, (1, commits))
    own = unit_noise(rng, model, (len(sds), commits))
    return sds[:, None] * (math.sqrt(COMMON) * regime + math.sqrt(1 - COMMON) * own)


def sightings(logs: np.ndarray, machine: np.ndarray | None = None
              ) -> tuple[np.ndarray, np.ndarray, np.ndarray, np.ndarray]:
    """At every publish (after commit MIN_SERIES, ..., the last): whether the detector sees a slower step in each
    series' trailing window, its first slow commit (index into the series), and the commits published so far.
    The machine's dependence is read across its series (steps.machine_phi): across `logs`, or across `machine`
    (series of the same noise with no step) where given; each series' spread is read over its last windows as
    steps.series_sd reads it."""
    machine = logs if machine is None else machine
    series, commits = logs.shape
    counts = np.arange(MIN_SERIES, commits + 1)
    seen = np.zeros((series, len(counts)), dtype=bool)
    first_bad = np.zeros((series, len(counts)), dtype=int)
    ranges = np.zeros((series, len(counts), 2), dtype=int)
    for column, count in enumerate(counts[counts < WINDOW]):
        floor = np.median(lag_one(machine[:, :count]))  # the machine's series are all this short yet
        found = scan(logs[:, :count], floor, scan(logs[:, :count]).own_sd)
        seen[:, column] = found.real & (found.difference > 0)
        first_bad[:, column] = found.split
        ranges[:, column] = np.stack([found.earliest, found.latest], axis=-1)
    growing = int(np.sum(counts < WINDOW))
    if commits >= WINDOW:
        windows = sliding_window_view(logs, WINDOW, axis=-1)
        floor = machine_phis(machine)[growing:]
        variances = np.concatenate([scan(windows[low:low + CHUNK]).own_sd ** 2 for low in range(0, series, CHUNK)])
        total = np.cumsum(np.pad(variances, ((0, 0), (1, 0))), axis=-1)
        ends = np.arange(1, variances.shape[1] + 1)
        starts = np.maximum(0, ends - NOISE_PUBLISHES)
        sds = np.sqrt((total[:, ends] - total[:, starts]) / (ends - starts))
        for low in range(0, series, CHUNK):
            found = scan(windows[low:low + CHUNK], floor, sds[low:low + CHUNK])
            seen[low:low + CHUNK, growing:] = found.real & (found.difference > 0)
            starts = np.arange(commits - WINDOW + 1)
            first_bad[low:low + CHUNK, growing:] = starts + found.split
            ranges[low:low + CHUNK, growing:] = np.stack([starts + found.earliest, starts + found.latest], axis=-1)
    return seen, first_bad, ranges, counts


def machine_phis(machine: np.ndarray) -> np.ndarray:
    """steps.machine_phi at every publish from MIN_SERIES commits on."""
    commits = machine.shape[1]
    span = WINDOW + NOISE_PUBLISHES - 1
    phis = [np.median(lag_one(machine[:, :count])) for count in range(MIN_SERIES, min(span, commits + 1))]
    if commits >= span:
        windows = sliding_window_view(machine, span, axis=-1)
        phis += list(np.median(np.concatenate([lag_one(windows[low:low + CHUNK])
                                               for low in range(0, len(machine), CHUNK)]), axis=0))
    return np.asarray(phis)


def filed(seen: np.ndarray, first_bad: np.ndarray, ranges: np.ndarray, counts: np.ndarray
          ) -> list[tuple[int, int, int, tuple[int, int]]]:
    """The notices filed, as the watch files them: (series, publish column, first slow commit, its range: the
    earliest and latest commit that may be the first slow one) of each."""
    series, publishes = seen.shape
    in_a_row = np.zeros(series, dtype=int)
    tracked = np.full(series, -10 ** 6)  # each series' newest filed notice's first slow commit
    notices = []
    for column in range(publishes):
        now = seen[:, column]
        if column:
            continued = now & seen[:, column - 1] & same_step(first_bad[:, column], first_bad[:, column - 1])
        else:
            continued = np.zeros(series, dtype=bool)
        in_a_row = np.where(continued, in_a_row + 1, now.astype(int))
        ready = now & persisted(in_a_row, counts[column] - first_bad[:, column])
        known = same_step(first_bad[:, column], tracked)
        for index in np.flatnonzero(ready & ~known):
            notices.append((int(index), column, int(first_bad[index, column]),
                            (int(ranges[index, column, 0]), int(ranges[index, column, 1]))))
        tracked = np.where(ready | (now & known), first_bad[:, column], tracked)
    return notices


def poisson_interval(count: int, exposure: float) -> tuple[float, float]:
    low = 0.0 if count == 0 else stats.chi2.ppf(0.025, 2 * count) / 2
    return low / exposure, stats.chi2.ppf(0.975, 2 * count + 2) / 2 / exposure


def false_notices(rng: np.random.Generator, model: str, sd: float, machines: int, commits: int,
                  series: int = SERIES) -> dict:
    sds = np.full(series, sd)
    sds[series - min(CUBLAS_SERIES, series // 4):] = CUBLAS_SD
    counts_by_machine = []
    for _ in range(machines):
        counts_by_machine.append(len(filed(*sightings(machine_logs(rng, model, sds, commits)))))
    kilocommits = machines * commits / 1000
    count = sum(counts_by_machine)
    low, high = poisson_interval(count, kilocommits)
    return {"kind": "false notices", "model": model, "noise_sd": sd, "machines": machines, "commits": commits,
            "series": series, "series_publishes": machines * series * (commits - MIN_SERIES + 1),
            "notices": count, "per_1000_commits_per_machine": count / kilocommits, "interval": [low, high],
            "most_in_one_machine": max(counts_by_machine)}


def step_histories(rng: np.random.Generator, model: str, sd: float, histories: int) -> dict:
    commits = STEP_AT + AFTER
    logs = sd * unit_noise(rng, model, (histories, commits))
    logs[:, STEP_AT:] += math.log1p(STEP)
    machine = sd * unit_noise(rng, model, (SERIES, commits))
    seen, first_bad, ranges, counts = sightings(logs, machine)
    noticed = held = 0
    first = {}
    for index, column, bad, (earliest, latest) in filed(seen, first_bad, ranges, counts):
        first.setdefault(index, (column, bad, earliest, latest))
    for index, (column, bad, earliest, latest) in first.items():
        if counts[column] - STEP_AT <= NOTICED_WITHIN and same_step(bad, STEP_AT):
            noticed += 1
        held += earliest <= STEP_AT <= latest
    end = STEP_AT + COVERAGE_AFTER
    window = logs[:, end - WINDOW:end]
    recent = sliding_window_view(logs[:, max(0, end - WINDOW - NOISE_PUBLISHES + 1):end], WINDOW, axis=-1)
    found = scan(window, machine_phis(machine[:, :end])[-1], np.sqrt(np.mean(scan(recent).own_sd ** 2, axis=-1)))
    right = found.real & (found.split == WINDOW - COVERAGE_AFTER)
    half = interval_half(found.interval_se, WINDOW - 2)
    covered = right & (np.abs(found.difference - math.log1p(STEP)) <= half)
    return {"kind": "a 1% step", "model": model, "noise_sd": sd, "histories": histories,
            "noticed_within": noticed / histories, "range_holds_step": held / max(1, len(first)),
            "never_noticed": (histories - len(first)) / histories,
            "interval_found": int(np.sum(right)), "interval_covers": float(np.sum(covered) / max(1, np.sum(right)))}


def run(machines: int, commits: int, histories: int, seed: int, levels=NOISE_LEVELS, models=MODELS,
        series: int = SERIES) -> list[dict]:
    rng = np.random.default_rng(seed)
    rows = [false_notices(rng, model, sd, machines, commits, series) for model in models for sd in levels]
    rows += [step_histories(rng, model, sd, histories) for model in models for sd in levels]
    return rows


def table(rows: list[dict]) -> list[str]:
    lines = ["| noise sd | model | series-publishes | false notices | per 1,000 commits per machine (95%) |",
             "|---:|---|---:|---:|---:|"]
    for row in rows:
        if row["kind"] == "false notices":
            low, high = row["interval"]
            lines.append(f"| {row['noise_sd']:.1%} | {row['model']} | {row['series_publishes']:,} | {row['notices']} "
                         f"| {row['per_1000_commits_per_machine']:.2f} ({low:.2f}-{high:.2f}) |")
    lines += ["", f"| noise sd | model | histories | noticed within {NOTICED_WITHIN} commits | range holds the step "
                  f"| never noticed | interval covers 1.01 (found at {COVERAGE_AFTER} after) |",
              "|---:|---|---:|---:|---:|---:|---:|"]
    for row in rows:
        if row["kind"] != "false notices":
            lines.append(f"| {row['noise_sd']:.1%} | {row['model']} | {row['histories']} | {row['noticed_within']:.1%} "
                         f"| {row['range_holds_step']:.1%} | {row['never_noticed']:.1%} "
                         f"| {row['interval_covers']:.1%} ({row['interval_found']}) |")
    return lines


def main(argv: list[str] | None = None) -> int:
    parser = ToolParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--machines", type=int, default=6, help="machine histories a row (default 6)")
    parser.add_argument("--commits", type=int, default=1000, help="commits a machine history (default 1000)")
    parser.add_argument("--series", type=int, default=SERIES, help=f"series a machine (default {SERIES})")
    parser.add_argument("--histories", type=int, default=2000, help="histories with a step a row (default 2000)")
    parser.add_argument("--seed", type=int, default=1)
    parser.add_argument("--json", type=Path, help="write every row here too")
    args = parser.parse_args(argv)
    if args.machines < 1 or args.commits < WINDOW or args.histories < 1 or args.series < 1:
        parser.error(f"--machines, --histories and --series must be at least 1, --commits at least {WINDOW}")
    if args.json and (problem := writable_file_problem("--json", str(args.json))):
        parser.error(problem)  # before the minutes of simulation, not after them
    started = time.monotonic()
    rows = run(args.machines, args.commits, args.histories, args.seed, series=args.series)
    print(f"{args.machines} machines of {args.series} series and {args.commits} commits a row; {args.histories} "
          f"histories with a 1% step at commit {STEP_AT}; seed {args.seed}; {time.monotonic() - started:.0f} s")
    print("\n".join(table(rows)))
    if args.json:
        args.json.write_text(json.dumps(rows, indent=1) + "\n")
    return 0


if __name__ == "__main__":
    sys.exit(main())
