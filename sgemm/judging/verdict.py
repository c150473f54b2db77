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
import functools
import math
from dataclasses import dataclass, replace
from enum import Enum
from statistics import fmean, median

FALSE_DISCOVERY_RATE = 0.05
POWER = 0.8
EXPECTED_CHANGES = 1  # k: real changes a gate is planned to find among its cases
MIN_ROUNDS = 3  # rounds a side before a first look: fewer cannot give a spread to test on
TIMER_RESOLUTION_S = 0.5e-6  # CUDA events' resolution, as documented
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


@dataclass(frozen=True)
class Rounds:
    """One case at one commit, measured unpaired, round by round (one asv process each)."""

    medians_s: tuple[float, ...]
    sm_clocks_mhz: tuple[float, ...]  # the median SM clock of each round's samples
    sample_counts: tuple[int, ...] = ()
    throttled_ms: float = math.nan  # time the driver held clocks down (power or heat), all rounds
    power_w: float = math.nan
    cards: tuple[str, ...] = ()  # which physical card measured each round

    @property
    def median_s(self) -> float:
        return median(self.medians_s)

    @property
    def sm_clock_mhz(self) -> float:
        return median(self.sm_clocks_mhz) if self.sm_clocks_mhz else math.nan

    @property
    def power_capped(self) -> bool:
        """The driver held clocks down while it ran: time need not follow 1/clock."""
        return self.throttled_ms > 0

    @property
    def resolution(self) -> float:
        """The timer's resolution relative to one sample."""
        return TIMER_RESOLUTION_S / self.median_s

    @property
    def log_times(self) -> list[float]:
        return [math.log(t) for t in self.medians_s]

    @property
    def log_cycles(self) -> list[float] | None:
        """log(time x clock) per round; None when a round's clock is missing."""
        if len(self.sm_clocks_mhz) != len(self.medians_s) or any(math.isnan(c) for c in self.sm_clocks_mhz):
            return None
        return [math.log(t * c) for t, c in zip(self.medians_s, self.sm_clocks_mhz)]

    def extended(self, more: Rounds) -> Rounds:
        """These rounds and those of a later measurement of the same case."""
        return Rounds(self.medians_s + more.medians_s, self.sm_clocks_mhz + more.sm_clocks_mhz,
                      self.sample_counts + more.sample_counts, _nansum(self.throttled_ms, more.throttled_ms),
                      _nanmean(self.power_w, more.power_w), self.cards + more.cards)


@dataclass(frozen=True)
class PairedRounds:
    """One case measured paired, round by round: each round one process timing both builds side by side."""

    ratios: tuple[float, ...]  # head over base, one a round
    base_clocks_mhz: tuple[float, ...] = ()
    head_clocks_mhz: tuple[float, ...] = ()
    base_s: tuple[float, ...] = ()  # each round's median time per launch, for the report
    head_s: tuple[float, ...] = ()
    block_s: float = 0.01  # how long a timed block lasts: the timer's resolution is relative to it
    joules: tuple[float, ...] = ()  # per GEMM, both builds together, a round

    @property
    def resolution(self) -> float:
        return TIMER_RESOLUTION_S / self.block_s

    @property
    def log_ratios(self) -> list[float]:
        return [math.log(r) for r in self.ratios]

    def extended(self, more: PairedRounds) -> PairedRounds:
        return PairedRounds(self.ratios + more.ratios, self.base_clocks_mhz + more.base_clocks_mhz,
                            self.head_clocks_mhz + more.head_clocks_mhz, self.base_s + more.base_s,
                            self.head_s + more.head_s, min(self.block_s, more.block_s), self.joules + more.joules)


def _nansum(a: float, b: float) -> float:
    values = [v for v in (a, b) if not math.isnan(v)]
    return sum(values) if values else math.nan


def _nanmean(a: float, b: float) -> float:
    values = [v for v in (a, b) if not math.isnan(v)]
    return fmean(values) if values else math.nan


@dataclass(frozen=True)
class Noise:
    """A case's round-to-round spread measured on unchanged code: sd of the log figure, and its degrees of freedom."""

    sd: float
    df: int


@dataclass(frozen=True)
class Effect:
    """log(head / base) of a figure: its estimate, the spread of one round's figure, the rounds it rests on and the
    degrees of freedom of that spread."""

    log_ratio: float
    sd: float  # of one round's log figure, pooled with any noise file
    rounds: tuple[int, ...]  # (n,) paired, (n_base, n_head) unpaired
    df: float
    noise_df: int = 0  # the noise file's share of df

    @property
    def ratio(self) -> float:
        return math.exp(self.log_ratio)

    @property
    def se(self) -> float:
        return self.sd * math.sqrt(sum(1 / n for n in self.rounds))

    @property
    def p_value(self) -> float:
        from scipy import stats

        if not self.se > 0:  # a floor keeps this from happening with real rounds
            return 0.0 if self.log_ratio else 1.0
        return float(2 * stats.t.sf(abs(self.log_ratio) / self.se, self.df))

    def interval(self, level: float) -> tuple[float, float]:
        half = _t_ppf(0.5 + level / 2, self.df) * self.se
        return math.exp(self.log_ratio - half), math.exp(self.log_ratio + half)

    def detectable(self, alpha: float, power: float = POWER) -> float:
        """The smallest change (a fraction) this test finds with probability `power` at two-sided level `alpha`."""
        return math.expm1((_t_ppf(1 - alpha / 2, self.df) + _t_ppf(power, self.df)) * self.se)

    def with_rounds(self, per_side: int) -> Effect:
        """The same spread, measured in `per_side` rounds (a side): what more rounds would make of it."""
        rounds = tuple(per_side for _ in self.rounds)
        return replace(self, rounds=rounds, df=sum(n - 1 for n in rounds) + self.noise_df)


@functools.lru_cache(maxsize=4096)
def _t_ppf(q: float, df: float) -> float:
    from scipy import stats

    return float(stats.t.ppf(q, df))


def _floored_variance(values: list[float], resolution: float) -> tuple[float, int]:
    """Sum of squared deviations and degrees of freedom, each value at least as uncertain as its timer."""
    n = len(values)
    mean = fmean(values)
    squares = sum((v - mean) ** 2 for v in values)
    return max(squares, (n - 1) * resolution ** 2 / 12), n - 1


def _pooled(squares: float, dof: int, noise: Noise | None) -> tuple[float, int, int]:
    """sd and degrees of freedom of the gate's spread pooled with the noise file's; the file's share of df."""
    noise_df = noise.df if noise else 0
    total = dof + noise_df
    if total == 0:
        return math.inf, 0, 0
    return math.sqrt((squares + (noise.sd ** 2 * noise.df if noise else 0.0)) / total), total, noise_df


def paired_effect(rounds: PairedRounds, noise: Noise | None = None) -> Effect:
    """One-sample t on the logs of the round ratios."""
    logs = rounds.log_ratios
    squares, dof = _floored_variance(logs, rounds.resolution)
    sd, df, noise_df = _pooled(squares, dof, noise)
    return Effect(fmean(logs), sd, (len(logs),), max(df, 1), noise_df)


def unpaired_effect(before: list[float], after: list[float], resolution: float,
                    noise: Noise | None = None) -> Effect:
    """Two-sample t on the logs of the round figures, the sides' variances pooled."""
    squares_before, dof_before = _floored_variance(before, resolution)
    squares_after, dof_after = _floored_variance(after, resolution)
    sd, df, noise_df = _pooled(squares_before + squares_after, dof_before + dof_after, noise)
    return Effect(fmean(after) - fmean(before), sd, (len(before), len(after)), max(df, 1), noise_df)


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
class Case:
    """What a verdict is made from: a case's rounds, and how it is to be judged."""

    label: str
    kernel: str
    threshold: float  # the user's threshold for this kernel, a fraction
    paired: PairedRounds | None = None
    before: Rounds | None = None  # unpaired
    after: Rounds | None = None
    noise: Noise | None = None
    is_control: bool = False  # context: judged and shown, never counted in the family or the exit status

    @property
    def rounds(self) -> int:
        """Rounds a side."""
        if self.paired:
            return len(self.paired.ratios)
        return min(len(self.before.medians_s), len(self.after.medians_s))

    @property
    def power_capped(self) -> bool:
        return bool(self.before and self.after and (self.before.power_capped or self.after.power_capped))


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


def spend(rounds: int, rounds_before: int, max_rounds: int, rate: float = FALSE_DISCOVERY_RATE) -> float:
    """The share of the false-discovery rate a look after `rounds` rounds spends."""
    return rate * (min(rounds, max_rounds) - rounds_before) / max_rounds


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
