"""Verdicts on a gate's rounds: REGRESSION, IMPROVEMENT, AMBIGUOUS, NOT POWERED or SAME per case, judged at the
user's threshold, with the false-alarm rate held over every case and every look of one gate.

A round (one process) is the unit of evidence. A paired case is judged by a one-sample t-test on the logarithms of
its round ratios, an unpaired one by a two-sample t-test on the logarithms of its round medians; the noise of
unchanged code is pooled in where known, and set aside where the rounds contradict it (each check against its own
null); Benjamini-Hochberg runs over the gate's cases at the level each look spends; a case is SAME once both of its
one-sided bounds at that level lie within the threshold; the detectable effect is printed for planning and never
moves the threshold.

The method, its decision tree and what each verdict means are written once in docs/gate.md ("How it decides").
"""

from __future__ import annotations

import fnmatch
import math
from collections import Counter
from dataclasses import dataclass, replace
from enum import Enum
from statistics import fmean

from ..rounds.evidence import (FALSE_DISCOVERY_RATE, MIN_ROUNDS, POWER, Case, Effect, paired_effect, spend,
                              unpaired_effect)
from ..rounds.outliers import outlier_indices
from ..words import counted

EXPECTED_CHANGES = 1  # k: real changes a gate is planned to find among its cases
NOISE_CHECK_LEVEL = 0.01
# The null distribution of the whole-file statistic is computed on a grid of this many cells up to the value seen:
# each term's rounding to its cell's middle moves the sum by far less than a cell.
NULL_GRID_CELLS = 4096
# Entries of fewer degrees of freedom stay out of the whole-file statistic (their own check still applies): the F of
# such an entry has no variance, and a few of them would decide the sum alone, hiding a file at half the truth.
WHOLE_FILE_MIN_DF = 5
# Each case's term of the whole-file statistic counts at most its own null's quantile at this level (winsorised):
# one case whose rounds held a wild one (heavy tails, an outlier left in) would otherwise decide the sum of hundreds
# alone, while a file too narrow for every case still moves every term.
TERM_CAP_LEVEL = 0.99


class Verdict(str, Enum):
    REGRESSION = "REGRESSION"
    IMPROVEMENT = "IMPROVEMENT"
    AMBIGUOUS = "AMBIGUOUS"
    NOT_POWERED = "NOT POWERED"
    SAME = "SAME"



def benjamini_hochberg(p_values: list[float], family: int | None = None) -> list[float]:
    """Adjusted p-values (q-values) over a family of `family` tests (default: these), of which these are some: the
    others count as p = 1. A case is a discovery when its q is at most the level."""
    m = family if family is not None else len(p_values)
    order = sorted(range(len(p_values)), key=lambda i: p_values[i])
    q = [1.0] * len(p_values)
    running = 1.0
    for rank in range(len(order), 0, -1):
        index = order[rank - 1]
        running = min(running, p_values[index] * m / rank)
        q[index] = min(running, 1.0)
    return q



@dataclass(frozen=True)
class Spending:
    """How a gate's false-discovery rate is spent over its looks: in proportion to the rounds each look adds, up to
    `rounds`; where `extra_rounds` more may follow for the few cases still open then, `reserve` of the rate is kept
    for those looks, spent the same way. Every look together spends at most `rate`."""

    rate: float = FALSE_DISCOVERY_RATE
    rounds: int = 9
    extra_rounds: int = 0
    reserve: float = 0.0

    def alpha(self, rounds: int, rounds_before: int) -> float:
        """What a look after `rounds` rounds spends, the one before it having been after `rounds_before`."""
        main = (1 - self.reserve) * spend(rounds, min(rounds_before, self.rounds), self.rounds, self.rate)
        if not self.extra_rounds:
            return main
        past = max(0, min(rounds, self.rounds + self.extra_rounds) - self.rounds) - max(0, rounds_before - self.rounds)
        return main + self.reserve * self.rate * max(0, past) / self.extra_rounds


@dataclass(frozen=True)
class Level:
    """What one look spends and plans with."""

    alpha: float  # of the false-discovery rate, spent at this look
    family: int  # m: every judged case of the gate
    max_rounds: int  # the most rounds a case may reach from this look
    rounds_before: int = 0  # n_(i-1): rounds at the previous look
    final: bool = False  # no more rounds will come
    expected_changes: int = EXPECTED_CHANGES
    power: float = POWER
    spending: Spending | None = None  # None: the rate spent evenly up to max_rounds

    @property
    def planning_alpha(self) -> float:
        return min(1.0, self.alpha * self.expected_changes / max(self.family, 1))

    def spent(self, rounds: int, rounds_before: int) -> float:
        """What a look after `rounds` rounds would spend, the one before it after `rounds_before`."""
        if self.spending:
            return self.spending.alpha(rounds, rounds_before)
        return spend(rounds, rounds_before, self.max_rounds)

    @property
    def main_rounds(self) -> int:
        """The rounds every open case may have; past them only the few still open go on."""
        return self.spending.rounds if self.spending else self.max_rounds


@dataclass(frozen=True)
class Comparison:
    case: Case
    time: Effect  # head over base
    cycles: Effect | None  # at equal SM clock (unpaired only)
    q_value: float
    level: Level  # the look that decided it
    detectable: float  # at the family's level, with the rounds done
    verdict: Verdict
    why: str
    interval: tuple[float, float]  # false-coverage-rate adjusted
    open: bool = False  # more rounds could settle it
    rounds_needed: int | None = None  # rounds a side that would bring the detectable effect within the threshold

    @property
    def label(self) -> str:
        return self.case.label

    @property
    def ratio(self) -> float:
        return self.time.ratio

    @property
    def ratio_at_equal_clock(self) -> float:
        return self.cycles.ratio if self.cycles else math.nan

    @property
    def method(self) -> str:
        return "paired" if self.case.paired else "unpaired"


def _direction(ratio: float, threshold: float) -> Verdict:
    if ratio > 1 + threshold:
        return Verdict.REGRESSION
    if ratio < 1 / (1 + threshold):
        return Verdict.IMPROVEMENT
    return Verdict.SAME


def effects(case: Case) -> tuple[Effect, Effect | None]:
    """The case's effect in time and, unpaired, at equal clock."""
    if case.paired:
        return paired_effect(case.paired, case.noise), None
    resolution = max(case.before.resolution, case.after.resolution)
    time_effect = unpaired_effect(case.before.log_times, case.after.log_times, resolution, case.noise)
    before, after = case.before.log_cycles, case.after.log_cycles
    cycles = unpaired_effect(before, after, resolution, case.noise) if before and after else None
    return time_effect, cycles


def within_threshold(effect: Effect, threshold: float, alpha: float) -> tuple[bool, float, float]:
    """Whether the ratio lies within the threshold either way, each of its one-sided bounds at level `alpha` inside
    (two one-sided tests: a change of exactly the threshold is called within it with probability at most alpha);
    and the two bounds."""
    lowest, highest = effect.bounds(alpha)
    return 1 / (1 + threshold) < lowest and highest < 1 + threshold, lowest, highest


def rounds_needed(effect: Effect, threshold: float, level: Level) -> int | None:
    """The fewest rounds a side, up to the most allowed, at which the next look (spending what those rounds add)
    could find the case within the threshold, were its estimate and spread to stay as they are; None when none
    can."""
    done = max(effect.rounds)
    margin = math.log1p(threshold)
    for rounds in range(done + 1, level.max_rounds + 1):
        planned = effect.with_rounds(rounds)
        if abs(effect.log_ratio) + planned.reach(level.spent(rounds, done)) < margin:
            return rounds
    return None


def _own_spread(case: Case) -> tuple[float, int]:
    """Sum of squared deviations of the case's round figures about their means, and its degrees of freedom."""
    groups = [case.paired.log_ratios] if case.paired else [case.before.log_times, case.after.log_times]
    squares = dof = 0
    for values in groups:
        if len(values) > 1:
            mean = fmean(values)
            squares += sum((v - mean) ** 2 for v in values)
            dof += len(values) - 1
    return squares, dof


def term_cap(dof: int, df: int, level: float = TERM_CAP_LEVEL) -> float:
    """The most a case's term dof * F of the whole-file statistic counts: its null's quantile at `level`."""
    from scipy import special

    return dof * float(special.fdtri(dof, df, level))


def scaled_f_sum_sf(observed: float, terms: list[tuple[int, int]], cells: int = NULL_GRID_CELLS,
                    capped: bool = False) -> float:
    """P(sum of dof_i * F_i >= observed) for independent F_i ~ F(dof_i, df_i), one (dof_i, df_i) a term: the
    statistic's own distribution when every entry is an honest estimate of its case's spread, each from its own
    degrees of freedom; `capped`, each term counted at most term_cap(dof_i, df_i). Computed exactly but for a grid:
    each term's distribution is cut into `cells` cells up to the observed value (what lies beyond cannot bring the
    sum below it), its mass put at each cell's middle, and the terms convolved."""
    import numpy as np
    from scipy import special

    if not observed > 0 or not terms:
        return 1.0
    edges = np.linspace(0.0, observed, cells + 1)
    total = np.zeros(cells)
    total[0] = 1.0  # the distribution of the sum of the terms' cell numbers
    for (dof, df), count in Counter(terms).items():
        below = special.fdtr(dof, df, edges / dof)
        if capped:
            below[edges >= term_cap(dof, df)] = 1.0  # the mass beyond the cap, at the cap
        masses = np.diff(below)
        total = _truncated_convolution(total, _truncated_power(masses, count))
    # Each term at its cell's middle: the sum lies below `observed` where its cell numbers add up to at most
    # cells - (number of terms) / 2.
    below = total[:max(0, math.floor(cells - len(terms) / 2) + 1)].sum()
    return float(min(1.0, max(0.0, 1.0 - below)))


def _truncated_convolution(first, second):
    """The distribution of the sum of two independent cell numbers, kept to the first len(first) cells."""
    import numpy as np

    size = len(first)
    both = np.fft.irfft(np.fft.rfft(first, 2 * size) * np.fft.rfft(second, 2 * size), 2 * size)[:size]
    return np.clip(both, 0.0, None)


def _truncated_power(masses, count: int):
    """The distribution of the sum of `count` independent cell numbers of one distribution, by squaring."""
    import numpy as np

    result = np.zeros(len(masses))
    result[0] = 1.0
    while count:
        if count & 1:
            result = _truncated_convolution(result, masses)
        count >>= 1
        if count:
            masses = _truncated_convolution(masses, masses)
    return result


def noise_contradicted(cases: list[Case]) -> str | None:
    """Why the cases' noise files cannot be believed here, or None: their own rounds spread more, or less, than the
    files say. The statistic is the sum over cases (those whose entry has WHOLE_FILE_MIN_DF degrees of freedom or
    more) of own squares / file variance, which is dof_i * F_i with F_i ~ F(dof_i, df_i) when the file is right, each
    term capped at term_cap; it is referred to that capped sum's own distribution (scaled_f_sum_sf), two-sided at
    NOISE_CHECK_LEVEL. A file too narrow would make noise look like change; one too wide, pooled into every case,
    would leave a gate of unchanged code undecided (NOT POWERED) where its own rounds decide it."""
    statistic, ratio, dof, terms = 0.0, 0.0, 0, []
    for case in cases:
        if case.noise and case.noise.df >= WHOLE_FILE_MIN_DF:
            squares, case_dof = _own_spread(case)
            if case_dof:
                term = squares / case.noise.sd ** 2
                statistic += min(term, term_cap(case_dof, case.noise.df))
                ratio += term
                dof += case_dof
                terms.append((case_dof, case.noise.df))
    if not dof:
        return None
    more = scaled_f_sum_sf(statistic, terms, capped=True)
    less = 1.0 - more  # the sum's distribution is continuous: P(sum <= observed)
    if min(more, less) >= NOISE_CHECK_LEVEL / 2:
        return None
    return (f"the noise file was set aside: these rounds spread {math.sqrt(ratio / dof):.2g} times as much as it "
            f"says (p = {2 * min(more, less):.2g} over {dof} degrees of freedom of {len(terms)} cases); each case is "
            f"judged on its own rounds")


def entry_contradicted(case: Case) -> str | None:
    """Why the case's own entry in the noise file cannot be believed here, or None: its own rounds spread more than
    the entry says (a one-sided F-test at NOISE_CHECK_LEVEL). An entry wider than its rounds is kept: pooled by
    degrees of freedom it is already the weighted estimate of the two, and setting it aside exactly when the rounds
    happen to spread little would judge the case on a variance chosen for being small."""
    from scipy import special

    if not case.noise:
        return None
    squares, dof = _own_spread(case)
    if not dof:
        return None
    ratio = squares / dof / case.noise.sd ** 2
    more = float(special.fdtrc(dof, case.noise.df, ratio))
    if more >= NOISE_CHECK_LEVEL:
        return None
    return (f"its noise-file entry was set aside: its {case.rounds} rounds spread {math.sqrt(ratio):.2f} times the "
            f"entry's {case.noise.sd:.3%} (F-test p = {more:.2g})")


def without_outliers(case: Case, keep_at_least: int = MIN_ROUNDS) -> Case:
    """A paired case less its outlier rounds (sgemm.rounds.outliers: further from the median of its rounds than
    OUTLIER_SD times its noise-file entry's upper bound, whatever the entry's degrees of freedom, since the bound
    allows for them, or times the rounds' own robust sd where that is wider, unless the rounds within the entry's
    reach agree with the entry (WIDE_LEVEL); with no entry, from nine rounds on, OWN_OUTLIER_SD times their own
    robust sd), counted in
    `outliers`, so long as `keep_at_least` rounds stay. One disturbed process would otherwise widen the case's
    spread, and the whole file's, past what its builds show. A verdict keeps MIN_ROUNDS: of three rounds the median
    is one round, and where two are disturbed alike it is theirs, and the one ordinary round would go; a spread
    alone (the whole file's check) may rest on two. Unpaired cases, whose rounds are each commit's own process, are
    left as they are."""
    if not case.paired:
        return case
    far = outlier_indices(case.paired.log_ratios, case.noise, known_df=1)
    if not far or case.rounds - len(far) < keep_at_least:
        return case
    return replace(case, paired=case.paired.without(far), outliers=case.outliers + len(far))


CHECK_THE_FILE = object()  # judge's file_note when this look checks the whole noise file itself


def judge(cases: list[Case], level: Level, file_note: object = CHECK_THE_FILE) -> list[Comparison]:
    """Every case's verdict at this look; Benjamini-Hochberg over the non-control cases, in a family of
    `level.family`. A noise file the rounds contradict is set aside first (`file_note`: why an earlier look set it
    aside, or None where it kept it; by default this look checks it), then any case's entry its own rounds
    contradict, and each verdict says so."""
    note = noise_contradicted(cases) if file_note is CHECK_THE_FILE else file_note
    if note:
        cases = [replace(case, noise=None) for case in cases]
        notes = {case.label: note for case in cases}
    else:
        notes = {case.label: why for case in cases if (why := entry_contradicted(case))}
        cases = [replace(case, noise=None) if case.label in notes else case for case in cases]
    measured = [(case, *effects(case)) for case in cases]
    judged = [m for m in measured if not m[0].is_control]
    q_values = dict(zip((id(m) for m in judged),
                        benjamini_hochberg([m[1].p_value for m in judged], max(level.family, len(judged)))))
    flagged = sum(1 for m in judged if q_values[id(m)] <= level.alpha
                  and _direction(m[1].ratio, m[0].threshold) is not Verdict.SAME)
    coverage = 1 - max(flagged, 1) * level.alpha / max(level.family, 1)
    comparisons = []
    for entry in measured:
        case, time, cycles = entry
        comparison = _verdict(case, time, cycles, q_values.get(id(entry), time.p_value), level, coverage)
        whys = [why for why in (notes.get(case.label), case.outliers and
                                f"{counted(case.outliers, 'outlier round')} set aside") if why]
        comparisons.append(replace(comparison, why="; ".join([comparison.why, *whys])) if whys else comparison)
    return comparisons


def _verdict(case: Case, time: Effect, cycles: Effect | None, q_value: float, level: Level,
             coverage: float) -> Comparison:
    threshold = case.threshold
    detectable = time.detectable(level.planning_alpha, level.power)
    low, high = time.interval(coverage)
    base = Comparison(case, time, cycles, q_value, level, detectable, Verdict.SAME, "", (low, high))
    interval = f"{low:.4f}–{high:.4f}"
    if case.rounds + case.outliers < MIN_ROUNDS:  # a round lost (its process failed): no spread to test on
        return replace(base, verdict=Verdict.AMBIGUOUS, open=not level.final,
                       why=f"too few rounds recorded to judge ({case.rounds}; at least {MIN_ROUNDS})")
    significant = q_value <= level.alpha
    direction = _direction(time.ratio, threshold)
    if significant and direction is not Verdict.SAME:
        return _confirmed(base, direction, cycles, level)
    within, lowest, highest = within_threshold(time, threshold, level.alpha)
    if within:
        said = f"a real difference (q = {q_value:.2g})" if significant else "no significant difference"
        return replace(base, why=f"{said}, within {threshold:.2%} either way: {lowest:.4f}–{highest:.4f}, each bound "
                       f"one-sided at {level.alpha:.2g} ({interval})")
    needed = rounds_needed(time, threshold, level)
    unsettled = (f"a real difference (q = {q_value:.2g}) whose bounds reach past {threshold:.2%}" if significant
                 else f"no significant difference, its bounds reaching past {threshold:.2%}")
    undecided = replace(base, open=True, rounds_needed=needed,
                        why=f"{unsettled} ({lowest:.4f}–{highest:.4f}); {detectable:.2%} is the smallest change seen "
                        "so far")
    if level.final or needed is None and case.rounds >= level.main_rounds:
        return finalised(undecided)
    return undecided


def finalised(comparison: Comparison) -> Comparison:
    """An open comparison as the last look leaves it: NOT POWERED where its bounds still reach past the threshold,
    its AMBIGUOUS kept; a decided one as it is."""
    if not comparison.open:
        return comparison
    if comparison.verdict is not Verdict.SAME:
        return replace(comparison, open=False)
    case, low, high = comparison.case, *comparison.interval
    return replace(comparison, verdict=Verdict.NOT_POWERED, open=False,
                   why=f"not powered for {case.threshold:.2%}: with {case.rounds} rounds its noise hides changes under "
                   f"{comparison.detectable:.2%} ({low:.4f}–{high:.4f})")


def _confirmed(base: Comparison, direction: Verdict, cycles: Effect | None, level: Level) -> Comparison:
    case, q = base.case, base.q_value
    said = f"beyond {case.threshold:.2%} (q = {q:.2g})"
    if case.paired:
        return replace(base, verdict=direction, why=f"{said}, both builds in each round's process")
    if case.power_capped:
        return replace(base, verdict=Verdict.AMBIGUOUS,
                       why=f"time says {direction.value} {said}, but the card ran at its power cap in separate "
                       "processes, where a clock move cannot be told from a change of the code: pair it")
    if cycles is None:
        return replace(base, verdict=Verdict.AMBIGUOUS, open=not level.final,
                       why=f"time says {direction.value}; no SM clock recorded to judge it at equal clock")
    cycles_significant = cycles.p_value <= level.alpha
    at_equal_clock = _direction(cycles.ratio, case.threshold) if cycles_significant else Verdict.SAME
    if at_equal_clock is direction:
        return replace(base, verdict=direction, why=f"{said}, in time and at equal clock")
    clock_move = case.after.sm_clock_mhz / case.before.sm_clock_mhz - 1
    return replace(base, verdict=Verdict.AMBIGUOUS, open=not level.final,
                   why=f"time says {direction.value}, at equal clock {at_equal_clock.value}: the SM clock moved "
                   f"{clock_move:+.1%}")


def threshold_for(kernel: str, default: float, patterns: list[tuple[str, float]]) -> float:
    """The threshold of the last pattern (shell-style, e.g. 'fp16/*') that matches the kernel's name, else default."""
    chosen = default
    for pattern, value in patterns:
        if fnmatch.fnmatchcase(kernel, pattern):
            chosen = value
    return chosen
