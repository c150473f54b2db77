"""What a case's rounds show, whichever feature measured them: each commit's rounds (unpaired) or the round ratios of
both builds in one process (paired), the effect of head over base with its spread and degrees of freedom (a t on the
logarithms of the rounds' figures, a noise file's entry pooled in), and how a false-discovery rate is spent over
looks. The gate judges with these (sgemm.gate.verdict), bisect compares commits with them (sgemm.bisect.compare).
"""

from __future__ import annotations

import functools
import math
from dataclasses import dataclass, replace
from statistics import fmean, median

FALSE_DISCOVERY_RATE = 0.05


POWER = 0.8


MIN_ROUNDS = 3  # rounds a side before a first look: fewer cannot give a spread to test on


TIMER_RESOLUTION_S = 0.5e-6  # CUDA events' resolution, as documented


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

    def without(self, rounds: list[int]) -> PairedRounds:
        """These rounds less those at the positions `rounds` (every figure of a round goes with it)."""
        def kept(figures: tuple) -> tuple:
            return tuple(without_positions(list(figures), rounds))

        return replace(self, ratios=kept(self.ratios), base_clocks_mhz=kept(self.base_clocks_mhz),
                       head_clocks_mhz=kept(self.head_clocks_mhz), base_s=kept(self.base_s), head_s=kept(self.head_s),
                       joules=kept(self.joules))


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

    def __post_init__(self):
        # A zero spread would make every round's difference infinitely significant, and no spread is learned from
        # fewer than two rounds.
        if not (math.isfinite(self.sd) and self.sd > 0):
            raise ValueError(f"a noise entry's sd must be a positive number, not {self.sd!r}")
        if not (isinstance(self.df, int) and self.df >= 1):
            raise ValueError(f"a noise entry's degrees of freedom must be a whole number of at least 1, not "
                             f"{self.df!r}")


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
        from scipy import special

        if not self.se > 0:  # a floor keeps this from happening with real rounds
            return 0.0 if self.log_ratio else 1.0
        return float(2 * special.stdtr(self.df, -abs(self.log_ratio) / self.se))

    def interval(self, level: float) -> tuple[float, float]:
        half = _t_ppf(0.5 + level / 2, self.df) * self.se
        return math.exp(self.log_ratio - half), math.exp(self.log_ratio + half)

    def reach(self, alpha: float) -> float:
        """How far a one-sided confidence bound at level `alpha` lies from the estimate, in log ratio."""
        return _t_ppf(1 - alpha, self.df) * self.se

    def bounds(self, alpha: float) -> tuple[float, float]:
        """The ratio's lower and upper confidence bounds, each one-sided at level `alpha`: the ratio lies below the
        upper one (and above the lower one) with probability at least 1 - alpha."""
        reach = self.reach(alpha)
        return math.exp(self.log_ratio - reach), math.exp(self.log_ratio + reach)

    def detectable(self, alpha: float, power: float = POWER) -> float:
        """The smallest change (a fraction) this test finds with probability `power` at two-sided level `alpha`: the
        t statistic of a real change is a noncentral t, whose noncentrality is solved for (the far tail, below
        -t, is left out: it adds less than alpha / 2)."""
        return math.expm1(_noncentrality(self.df, power, _t_ppf(1 - alpha / 2, self.df)) * self.se)

    def with_rounds(self, per_side: int) -> Effect:
        """The same spread, measured in `per_side` rounds (a side): what more rounds would make of it."""
        rounds = tuple(per_side for _ in self.rounds)
        return replace(self, rounds=rounds, df=sum(n - 1 for n in rounds) + self.noise_df)


@functools.lru_cache(maxsize=4096)
def _t_ppf(q: float, df: float) -> float:
    from scipy import special

    return float(special.stdtrit(df, q))


@functools.lru_cache(maxsize=4096)
def _noncentrality(df: float, power: float, critical: float) -> float:
    """The noncentrality at which a noncentral t with `df` degrees of freedom exceeds `critical` with probability
    `power`."""
    from scipy import special

    return float(special.nctdtrinc(df, 1 - power, critical))


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


def robust_sd(groups: list[list[float]], at_least: int = 1) -> float:
    """The sd of figures about their group's median, from the median absolute deviation (MAD x 1.4826, the normal's
    sd), the zero deviation of each odd group's median left out: one outlier among many does not move it. 0 when
    fewer than `at_least` deviations are left (a MAD of two or three moves with one outlier among them)."""
    deviations = [d for values in groups for d in (abs(v - median(values)) for v in values) if d > 0]
    return 1.4826 * median(deviations) if deviations and len(deviations) >= at_least else 0.0


def far_from_median(values: list[float], reach: float) -> list[int]:
    """The positions of the `values` further than `reach` from their median (the Hampel identifier's rule: median
    plus or minus a multiple of a robust sd); none when `reach` is not above 0."""
    if not reach > 0 or not values:
        return []
    middle = median(values)
    return [i for i, v in enumerate(values) if abs(v - middle) > reach]


def without_positions(values: list[float], positions: list[int]) -> list[float]:
    """`values` less those at `positions`, in order."""
    gone = set(positions)
    return [v for i, v in enumerate(values) if i not in gone]


def ordinary(values: list[float], reach: float) -> list[float]:
    """`values` that lie within `reach` of their median, in order (far_from_median); all of them when `reach` is
    not above 0."""
    return without_positions(values, far_from_median(values, reach))


def pooled_noise(groups: list[list[float]], resolution: float, *more: Noise | None,
                 outlier_reach: float = 0.0) -> Noise | None:
    """One spread from several groups of log figures of one case, box and setting (each group about its own mean,
    as a commit's rounds of a bisect) and any further entries (a noise file's), pooled by degrees of freedom; None
    when nothing gives one, or where every figure agrees and no resolution floors the spread. `outlier_reach` (when
    above 0): a figure further than that from its group's median is left out first (`ordinary`), so that an outlier
    round does not inflate the spread."""
    groups = [ordinary(values, outlier_reach) for values in groups]
    groups = [list(values) for values in groups if len(values) >= 2]
    squares, dof = 0.0, 0
    for values in groups:
        group_squares, group_dof = _floored_variance(values, resolution)
        squares, dof = squares + group_squares, dof + group_dof
    for entry in more:
        if entry is not None:
            squares, dof = squares + entry.sd ** 2 * entry.df, dof + entry.df
    sd = max(math.sqrt(squares / dof), resolution / math.sqrt(12)) if dof else 0.0
    return Noise(sd, dof) if sd > 0 else None


def wider_than(own: Noise, pool: Noise, level: float) -> bool:
    """Whether the spread `own` is wider than `pool` at confidence `level` (an F test): rounds that contradict a
    pooled spread so are judged on their own."""
    from scipy import special

    return (own.sd / pool.sd) ** 2 > float(special.fdtri(own.df, pool.df, level))


def spread_bound(noise: Noise, level: float) -> float:
    """An upper confidence bound, at `level`, of the sd that `noise` estimates with its degrees of freedom (the
    chi-square interval): a test that takes the sd as known takes this rather than the estimate."""
    from scipy import special

    return noise.sd * math.sqrt(noise.df / float(special.chdtri(noise.df, level)))


def log_likelihood_ratio(log_ratios: list[float], log_step: float, sd: float, clip_sd: float) -> float:
    """log of how much likelier the rounds' log ratios are from a build `log_step` off its comparison (the bad end's
    step) than from one equal to it, each normal with `sd`; each round's distance from half the step is clipped at
    half the step plus `clip_sd` sds, so that no one round (an outlier) decides by itself (a Huber-type sequential
    probability ratio test)."""
    half = log_step / 2
    clip = abs(half) + clip_sd * sd
    return log_step / sd ** 2 * sum(min(max(value - half, -clip), clip) for value in log_ratios)


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
    outliers: int = 0  # paired rounds set aside as outliers (sgemm.rounds.outliers): measured, not in `paired`

    @property
    def rounds(self) -> int:
        """Rounds a side, outliers set aside not counted."""
        if self.paired:
            return len(self.paired.ratios)
        return min(len(self.before.medians_s), len(self.after.medians_s))

    @property
    def power_capped(self) -> bool:
        return bool(self.before and self.after and (self.before.power_capped or self.after.power_capped))


def spend(rounds: int, rounds_before: int, max_rounds: int, rate: float = FALSE_DISCOVERY_RATE) -> float:
    """The share of the false-discovery rate a look after `rounds` rounds spends."""
    return rate * (min(rounds, max_rounds) - rounds_before) / max_rounds
