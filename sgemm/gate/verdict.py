"""Verdicts on a gate's rounds: REGRESSION, IMPROVEMENT, AMBIGUOUS, NOT POWERED or SAME per case, judged at the
user's threshold, with the false-alarm rate held over every case and every look of one gate.

A round (one process) is the unit of evidence. A paired case is judged by a one-sample t-test on the logarithms of
its round ratios, an unpaired one by a two-sample t-test on the logarithms of its round medians; the noise of
unchanged code is pooled in where known, and set aside where the rounds contradict it; Benjamini-Hochberg runs over
the gate's cases at the level each look spends; the detectable effect plans rounds and never moves the threshold.

The method, its decision tree and what each verdict means are written once in docs/gate.md ("How it decides").
"""

from __future__ import annotations

import fnmatch
import math
from dataclasses import dataclass, replace
from enum import Enum
from statistics import fmean

from ..rounds.evidence import MIN_ROUNDS, POWER, Case, Effect, paired_effect, spend, unpaired_effect

EXPECTED_CHANGES = 1  # k: real changes a gate is planned to find among its cases
NOISE_CHECK_LEVEL = 0.01
# A case's own entry set aside as too wide: only where its rounds already have the entry's degrees of freedom, so a
# true entry set aside by chance costs the case little, and a wrong one kept costs it its power.
ENTRY_TOO_WIDE_LEVEL = 0.05


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
class Level:
    """What one look spends and plans with."""

    alpha: float  # of the false-discovery rate, spent at this look
    family: int  # m: every judged case of the gate
    max_rounds: int  # N
    rounds_before: int = 0  # n_(i-1): rounds at the previous look
    final: bool = False  # no more rounds will come
    expected_changes: int = EXPECTED_CHANGES
    power: float = POWER

    @property
    def planning_alpha(self) -> float:
        return min(1.0, self.alpha * self.expected_changes / max(self.family, 1))



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


def rounds_needed(effect: Effect, threshold: float, level: Level) -> int | None:
    """The fewest rounds a side, up to the most allowed, at which the next look (spending what those rounds add)
    could see `threshold`; None when none can."""
    done = max(effect.rounds)
    for rounds in range(done + 1, level.max_rounds + 1):
        alpha = spend(rounds, done, level.max_rounds) * level.expected_changes / max(level.family, 1)
        if effect.with_rounds(rounds).detectable(alpha, level.power) <= threshold:
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


def noise_contradicted(cases: list[Case]) -> str | None:
    """Why the cases' noise files cannot be believed here, or None: their own rounds spread more than the files say
    (one-sided F-test of sum(own squares / file variance) over its degrees of freedom, at NOISE_CHECK_LEVEL)."""
    from scipy import stats

    statistic, dof, file_dfs = 0.0, 0, []
    for case in cases:
        if case.noise and case.noise.sd > 0:
            squares, case_dof = _own_spread(case)
            statistic += squares / case.noise.sd ** 2
            dof += case_dof
            file_dfs.append(case.noise.df)
    if not dof:
        return None
    ratio = statistic / dof
    p = float(stats.f.sf(ratio, dof, min(file_dfs)))
    if p >= NOISE_CHECK_LEVEL:
        return None
    return (f"the noise file was set aside: these rounds spread {math.sqrt(ratio):.1f} times as much as it says "
            f"(F-test p = {p:.2g} over {dof} degrees of freedom); each case is judged on its own rounds")


def entry_contradicted(case: Case) -> str | None:
    """Why the case's own entry in the noise file cannot be believed here, or None: its own rounds spread more than
    the entry says (a one-sided F-test at NOISE_CHECK_LEVEL) or, where they have at least the entry's degrees of
    freedom, less (at ENTRY_TOO_WIDE_LEVEL). An entry learned from a few rounds of one earlier gate can be several
    times the truth, and pooled it leaves its case NOT POWERED (lab/2026-11-27-gate-selftest)."""
    from scipy import stats

    if not (case.noise and case.noise.sd > 0):
        return None
    squares, dof = _own_spread(case)
    if not dof:
        return None
    ratio = squares / dof / case.noise.sd ** 2
    more = float(stats.f.sf(ratio, dof, case.noise.df))
    less = float(stats.f.cdf(ratio, dof, case.noise.df)) if dof >= case.noise.df else 1.0
    if more >= NOISE_CHECK_LEVEL and less >= ENTRY_TOO_WIDE_LEVEL:
        return None
    return (f"its noise-file entry was set aside: its {case.rounds} rounds spread {math.sqrt(ratio):.2f} times the "
            f"entry's {case.noise.sd:.3%} (F-test p = {min(more, less):.2g})")


def judge(cases: list[Case], level: Level) -> list[Comparison]:
    """Every case's verdict at this look; Benjamini-Hochberg over the non-control cases, in a family of
    `level.family`. A noise file the rounds contradict is set aside first, then any case's entry its own rounds
    contradict, and each verdict says so."""
    note = noise_contradicted(cases)
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
        why = notes.get(case.label)
        comparisons.append(replace(comparison, why=f"{comparison.why}; {why}") if why else comparison)
    return comparisons


def _verdict(case: Case, time: Effect, cycles: Effect | None, q_value: float, level: Level,
             coverage: float) -> Comparison:
    threshold = case.threshold
    detectable = time.detectable(level.planning_alpha, level.power)
    low, high = time.interval(coverage)
    base = Comparison(case, time, cycles, q_value, level, detectable, Verdict.SAME, "", (low, high))
    interval = f"{low:.4f}–{high:.4f}"
    if case.rounds < MIN_ROUNDS:  # a round lost (its process failed): no spread to test on
        return replace(base, verdict=Verdict.AMBIGUOUS, open=not level.final,
                       why=f"too few rounds recorded to judge ({case.rounds}; at least {MIN_ROUNDS})")
    significant = q_value <= level.alpha
    direction = _direction(time.ratio, threshold)
    if significant and direction is not Verdict.SAME:
        return _confirmed(base, direction, cycles, level)
    if significant:
        return replace(base, why=f"a real difference within {threshold:.2%} (q = {q_value:.2g}; {interval})")
    if detectable <= threshold:
        return replace(base, why=f"no significant difference; {detectable:.2%} would have been seen ({interval})")
    needed = rounds_needed(time, threshold, level)
    if level.final or needed is None and case.rounds >= level.max_rounds:
        return replace(base, verdict=Verdict.NOT_POWERED,
                       why=f"not powered for {threshold:.2%}: with {case.rounds} rounds its noise hides changes "
                       f"under {detectable:.2%} ({interval})")
    return replace(base, open=True, rounds_needed=needed,
                   why=f"no significant difference yet; {detectable:.2%} is the smallest change seen so far")


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
