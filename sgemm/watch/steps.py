"""Change points of one series: where its level stepped, by how much, and whether the step is real.

The segmentation is asv's own (`asv.step_detect`: a piecewise-constant fit under an L1 loss, the Potts problem,
which draws the steps on the site's graphs). asv's `detect_steps` chooses the fit's penalty by an information
criterion and then keeps a step of 5% or more (`regressions_thresholds`), a fixed share whatever the series' noise:
too coarse for a ratio that repeats to 0.05%, too fine for a round median that moves by 1%; and its penalty missed
a 1% step through 0.2% noise in 39 of 100 simulated series of 30 commits. Here the fit runs on the logarithms with
a penalty of POTTS_GAMMA times the series' own noise (`solve_potts_approx`), which proposes a few boundaries too
many, and each boundary is kept only where the two levels differ by more than that noise allows:

    |after / before - 1| > max(MIN_STEP, Z * noise * sqrt(1/n_before + 1/n_after))

with `noise` the series' commit-to-commit spread, read robustly from its first differences (a step is one large
difference among many small ones and moves their median little), never below NOISE_FLOOR. A boundary that fails is
removed and its two segments joined, weakest first, until every boundary left passes. A segment of fewer than
MIN_POINTS commits (one stray figure) cannot make a step. The figures behind Z and MIN_STEP, measured on simulated
A/A series at the gate's noise, are in tools/simulate/simulate_watch.py and lab/2026-11-25-watch-simulation.

Why not E-Divisive (MongoDB's, in `signal-processing-algorithms`) or `ruptures`: asv already segments every series
the site draws, and its L1 fit is robust to the odd outlier; either package would add a dependency to do the same
job, and neither sets its threshold from the measured noise any better than the rule above.
"""

from __future__ import annotations

import itertools
import math
import statistics
from dataclasses import dataclass

from asv.step_detect import solve_potts_approx

# A step must be beyond this many noise standard errors of the difference between the two levels.
Z = 6.0
# ...and at least this large: the history times each commit briefly (one round), and a step smaller than this is
# for the gate's rounds to see, not a commit-by-commit history.
MIN_STEP = 0.005
# The spread is never taken below this (relative): a series of identical figures has no noise to scale from.
NOISE_FLOOR = 1e-4
# The Potts fit's penalty for a boundary, in units of the series' noise (L1, on the logarithms): low enough to
# propose every real step of the sizes simulated, the threshold above then removing the surplus.
POTTS_GAMMA = 4.0
MIN_POINTS = 3  # commits on each side of a step: the newest two commits cannot show one yet
MIN_SERIES = 2 * MIN_POINTS  # a series shorter than this has no step to find
MAD_TO_SD = 1.4826  # the median absolute deviation of a normal sample, times this, estimates its sd


@dataclass(frozen=True)
class Segment:
    start: int  # index into the series' values, inclusive
    end: int  # exclusive
    level: float  # the median of its values

    @property
    def size(self) -> int:
        return self.end - self.start


@dataclass(frozen=True)
class Step:
    """A real step between two segments: the last point of `before` and the first of `after` are its sides."""

    before: Segment
    after: Segment
    noise: float  # the series' relative noise (sd of one commit's figure)

    @property
    def ratio(self) -> float:
        return self.after.level / self.before.level

    @property
    def interval(self) -> tuple[float, float]:
        """95% interval of the ratio: the two levels' difference in logarithms, at the series' noise."""
        half = 1.96 * self.noise * math.sqrt(1 / self.before.size + 1 / self.after.size)
        return self.ratio * math.exp(-half), self.ratio * math.exp(half)

    @property
    def slower(self) -> bool:
        return self.ratio > 1


def noise(values: list[float]) -> float:
    """The relative sd of one commit's figure, from the spread of successive differences of the logarithms (each
    holds two figures' noise, hence the sqrt(2)), robust to the few differences a step makes."""
    logs = [math.log(value) for value in values]
    differences = [abs(b - a) for a, b in itertools.pairwise(logs)]
    if not differences:
        return NOISE_FLOOR
    return max(NOISE_FLOOR, MAD_TO_SD * statistics.median(differences) / math.sqrt(2))


def threshold(noise_sd: float, before: int, after: int) -> float:
    """The smallest relative step between segments of these sizes that counts as real."""
    return max(MIN_STEP, Z * noise_sd * math.sqrt(1 / before + 1 / after))


def _strength(values: list[float], before: Segment, after: Segment, noise_sd: float) -> float:
    """How far the boundary's step is beyond its threshold (below 1: not real)."""
    if before.size < MIN_POINTS or after.size < MIN_POINTS:
        return 0.0
    return abs(after.level / before.level - 1) / threshold(noise_sd, before.size, after.size)


def _segment(values: list[float], start: int, end: int) -> Segment:
    return Segment(start, end, statistics.median(values[start:end]))


def segments(values: list[float], noise_sd: float) -> list[Segment]:
    """asv's piecewise-constant fit of the series' logarithms at a penalty set by its noise, each segment's level
    the median of its values."""
    logs = [math.log(value) for value in values]
    rights, _, _ = solve_potts_approx(logs, [1.0] * len(logs), gamma=POTTS_GAMMA * noise_sd)
    lefts = [0, *rights[:-1]]
    return [_segment(values, left, right) for left, right in zip(lefts, rights)]


def _absorb_short(values: list[float], parts: list[Segment]) -> list[Segment]:
    """Each segment too short to make a step joined to the neighbour whose level is nearer its own, shortest first:
    a stray figure beside a step belongs to the side it resembles, not to whichever side comes first."""
    parts = list(parts)
    while len(parts) > 1 and (short := [i for i, part in enumerate(parts) if part.size < MIN_POINTS]):
        i = min(short, key=lambda index: parts[index].size)
        neighbours = [j for j in (i - 1, i + 1) if 0 <= j < len(parts)]
        j = min(neighbours, key=lambda index: abs(math.log(parts[index].level / parts[i].level)))
        first, last = min(i, j), max(i, j)
        parts[first:last + 1] = [_segment(values, parts[first].start, parts[last].end)]
    return parts


def find_steps(values: list[float]) -> list[Step]:
    """The real steps of a series (positive figures, no gaps: the caller keeps the commits they belong to), oldest
    first."""
    if len(values) < MIN_SERIES:
        return []
    noise_sd = noise(values)
    parts = _absorb_short(values, segments(values, noise_sd))
    while len(parts) > 1:
        strengths = [_strength(values, a, b, noise_sd) for a, b in itertools.pairwise(parts)]
        weakest = min(range(len(strengths)), key=strengths.__getitem__)
        if strengths[weakest] > 1:
            break
        joined = _segment(values, parts[weakest].start, parts[weakest + 1].end)
        parts[weakest:weakest + 2] = [joined]
    return [Step(a, b, noise_sd) for a, b in itertools.pairwise(parts)]
