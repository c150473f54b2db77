"""One case's verdict between two commits: REGRESSION, IMPROVEMENT, AMBIGUOUS or SAME, judged at equal SM clock.

Time is what is judged (lower is better). A difference counts only when asv's significance test (Mann-Whitney U
on the samples, as `asv compare` uses) says the two sets of samples differ, and the ratio of medians is beyond the
threshold. The same ratio is then taken at equal clock: GEMM kernels are bound by the SM's issue rate, so time x
SM clock (cycles) is what a change of code moves, while a clock the driver lowered (power cap, heat) moves time
alone. When the verdict in time and the verdict at equal clock disagree, the clock moved as much as the effect
(a slowdown the clock explains, or one a faster clock hides) and the case is AMBIGUOUS: the gate measures it again
before it says so.
"""

from __future__ import annotations

import fnmatch
import math
from dataclasses import dataclass, replace
from enum import Enum
from statistics import median

from asv import _stats as asv_stats  # the test `asv compare` applies; asv is pinned
from asv_runner.statistics import compute_stats


class Verdict(str, Enum):
    REGRESSION = "REGRESSION"
    IMPROVEMENT = "IMPROVEMENT"
    AMBIGUOUS = "AMBIGUOUS"
    SAME = "SAME"


@dataclass(frozen=True)
class Side:
    """What asv recorded for a case at one commit."""

    samples_s: list[float]
    stats: dict | None  # asv's stats of the samples (confidence interval, quartiles)
    sm_clock_mhz: float  # median SM clock over the timed samples
    throttled_ms: float = math.nan  # time the driver held clocks down while the case ran (all rounds)
    power_w: float = math.nan

    @property
    def median_s(self) -> float:
        return median(self.samples_s)

    @property
    def asv_stats(self) -> dict:
        """The stats asv recorded, or the same computed from the samples."""
        return self.stats or compute_stats(self.samples_s, 1)[1]


@dataclass(frozen=True)
class Comparison:
    case: str
    before: Side
    after: Side
    threshold: float  # a fraction: 0.02 is 2%
    significant: bool
    verdict: Verdict
    why: str

    @property
    def ratio(self) -> float:
        """after / before time: above 1 is slower."""
        return self.after.median_s / self.before.median_s

    @property
    def clock_ratio(self) -> float:
        return self.after.sm_clock_mhz / self.before.sm_clock_mhz

    @property
    def ratio_at_equal_clock(self) -> float:
        """after / before in SM cycles: the time ratio had both run at the same clock."""
        return self.ratio * self.clock_ratio


def _direction(ratio: float, threshold: float) -> Verdict:
    if ratio > 1 + threshold:
        return Verdict.REGRESSION
    if ratio < 1 / (1 + threshold):
        return Verdict.IMPROVEMENT
    return Verdict.SAME


# asv's Mann-Whitney test compares every pair of samples: NVBench records thousands per case (tens of thousands for
# a 40 us kernel), which would take minutes per case. It sees this many of each side's, evenly spaced through the
# recorded order (so every round is represented); plenty to resolve a 2% difference.
MAX_SAMPLES_FOR_TEST = 2000


def _thinned(samples: list[float]) -> list[float]:
    return samples[::math.ceil(len(samples) / MAX_SAMPLES_FOR_TEST)]


def compare(case: str, before: Side, after: Side, threshold: float) -> Comparison:
    significant = bool(asv_stats.is_different(_thinned(before.samples_s), _thinned(after.samples_s),
                                              before.asv_stats, after.asv_stats))
    partial = Comparison(case, before, after, threshold, significant, Verdict.SAME, "")
    if math.isnan(partial.clock_ratio):
        return replace(partial, verdict=Verdict.AMBIGUOUS, why="no SM clock recorded on one side")
    in_time = _direction(partial.ratio, threshold) if significant else Verdict.SAME
    # With no significant difference in time, only the clock's move is left to judge at equal clock.
    at_equal_clock = _direction((partial.ratio if significant else 1.0) * partial.clock_ratio, threshold)
    if in_time == at_equal_clock:
        if in_time is not Verdict.SAME:
            why = f"beyond {threshold:.0%} in time and at equal clock"
        else:
            why = f"significant, within {threshold:.0%}" if significant else "asv finds no significant difference"
        return replace(partial, verdict=in_time, why=why)
    # A clock difference as large as the effect: the time and the cycles tell different stories.
    return replace(partial, verdict=Verdict.AMBIGUOUS,
                   why=f"time says {in_time.value}, at equal clock {at_equal_clock.value}: the SM clock moved "
                   f"{partial.clock_ratio - 1:+.1%}")


def threshold_for(kernel: str, default: float, patterns: list[tuple[str, float]]) -> float:
    """The threshold of the last pattern (shell-style, e.g. 'fp16/*') that matches the kernel's name, else default."""
    chosen = default
    for pattern, value in patterns:
        if fnmatch.fnmatchcase(kernel, pattern):
            chosen = value
    return chosen
