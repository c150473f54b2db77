"""Verdicts on the rounds of a gate: REGRESSION, IMPROVEMENT, AMBIGUOUS or SAME per case, with the false-alarm
rate controlled across all cases of one gate.

The unit of evidence is the round. Samples inside one NVBench run agree to about 0.1%, while the same case measured
in two processes differs by up to 0.8%: the noise that matters lives between processes. So each side of a case is
the list of its rounds' medians (one asv process per round), and the test is Welch's t-test on their logarithms;
pooled samples of one or two processes would call every between-process shift "significant".

- Effect: the ratio of geometric means of round medians, head over base (above 1 is slower), with its standard
  error from the between-round spread. Where a noise file gives a case's between-round spread measured on unchanged
  code (sgemm.judging.noise), each side's spread is at least that, and the file's degrees of freedom are added.
- Reference: a kernel is judged relative to its precision's cuBLAS controls measured in the same rounds (its ratio
  over theirs, the standard errors combined), so that a box that moved as a whole (another tenant on the node, a
  warmer room, a lower clock) is not blamed on the change; the controls' own moves are reported. The controls of all
  sizes are pooled (inverse-variance weighted): a box's move shows at every size, and pooling keeps the reference's
  own noise from doubling the kernel's.
- Multiple cases: the p-values of all judged cases of one gate are adjusted by Benjamini-Hochberg, so the expected
  share of false alarms among the cases flagged is at most FALSE_DISCOVERY_RATE.
- Threshold: a case's threshold is the larger of the user's and its detectable effect, the smallest slowdown its
  noise lets the test find with POWER probability; the report says when the two differ.
- Clock: a difference in time must also be there at equal SM clock (time x median clock of each round: cycles),
  since a clock the driver lowered moves time alone. A case whose time did not change is SAME whatever the clock
  did; a time difference that the clock explains, or contradicts, is AMBIGUOUS.
"""

from __future__ import annotations

import fnmatch
import math
from dataclasses import dataclass, field, replace
from enum import Enum
from statistics import fmean, median

FALSE_DISCOVERY_RATE = 0.05
POWER = 0.8
MIN_ROUNDS = 3  # a side's spread from fewer rounds is too uncertain to test on (t with 2 degrees of freedom and less)


class Verdict(str, Enum):
    REGRESSION = "REGRESSION"
    IMPROVEMENT = "IMPROVEMENT"
    AMBIGUOUS = "AMBIGUOUS"
    SAME = "SAME"


@dataclass(frozen=True)
class Rounds:
    """One case at one commit, round by round: what asv recorded of each process that measured it."""

    medians_s: tuple[float, ...]
    sm_clocks_mhz: tuple[float, ...]  # the median SM clock of each round's samples
    sample_counts: tuple[int, ...] = ()
    throttled_ms: float = math.nan  # time the driver held clocks down, all rounds
    power_w: float = math.nan
    cards: tuple[str, ...] = ()  # which physical card measured each round

    @property
    def median_s(self) -> float:
        return median(self.medians_s)

    @property
    def sm_clock_mhz(self) -> float:
        return median(self.sm_clocks_mhz) if self.sm_clocks_mhz else math.nan

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


def _nansum(a: float, b: float) -> float:
    values = [v for v in (a, b) if not math.isnan(v)]
    return sum(values) if values else math.nan


def _nanmean(a: float, b: float) -> float:
    values = [v for v in (a, b) if not math.isnan(v)]
    return fmean(values) if values else math.nan


@dataclass(frozen=True)
class Noise:
    """A case's between-round spread measured on unchanged code: sd of log round medians, and its degrees of freedom."""

    sd: float
    df: int


@dataclass(frozen=True)
class Effect:
    """log(head / base) of a figure, with the standard error and degrees of freedom of a Welch t-test."""

    log_ratio: float
    se: float
    df: float

    @property
    def ratio(self) -> float:
        return math.exp(self.log_ratio)

    @property
    def p_value(self) -> float:
        from scipy import stats

        if self.se == 0:
            return 0.0 if self.log_ratio else 1.0
        return float(2 * stats.t.sf(abs(self.log_ratio) / self.se, self.df))

    def detectable(self, alpha: float = FALSE_DISCOVERY_RATE, power: float = POWER) -> float:
        """The smallest slowdown (a fraction) this test finds with probability `power` at level `alpha`."""
        from scipy import stats

        return math.expm1((stats.t.ppf(1 - alpha / 2, self.df) + stats.t.ppf(power, self.df)) * self.se)

    def interval(self, level: float = 1 - FALSE_DISCOVERY_RATE) -> tuple[float, float]:
        from scipy import stats

        half = stats.t.ppf(0.5 + level / 2, self.df) * self.se
        return math.exp(self.log_ratio - half), math.exp(self.log_ratio + half)

    def relative_to(self, reference: Effect) -> Effect:
        """This effect over a reference's (both uncertain): Welch-Satterthwaite degrees of freedom."""
        se = math.hypot(self.se, reference.se)
        terms = [e.se ** 4 / e.df for e in (self, reference) if e.df > 0 and e.se > 0]
        df = se ** 4 / sum(terms) if terms else min(self.df, reference.df)
        return Effect(self.log_ratio - reference.log_ratio, se, df)


def effect(before: list[float], after: list[float], noise: Noise | None = None) -> Effect:
    """Welch's t-test of two sides' per-round log figures; each side's variance at least the recorded noise's."""
    floor = noise.sd ** 2 if noise else 0.0
    parts = []
    for values in (before, after):
        n = len(values)
        mean = fmean(values)
        variance = sum((v - mean) ** 2 for v in values) / (n - 1) if n > 1 else math.inf
        parts.append((n, max(variance, floor)))
    se = math.sqrt(sum(v / n for n, v in parts))
    terms = [(v / n) ** 2 / (n - 1) for n, v in parts if n > 1]
    df = (se ** 4 / sum(terms)) if terms and se > 0 else sum(n - 1 for n, _ in parts)
    if noise:
        df += noise.df
    return Effect(fmean(after) - fmean(before), se, max(df, 1.0))


def combined_reference(effects: list[Effect]) -> Effect | None:
    """The inverse-variance mean of several controls' effects (a precision's cuBLAS at several sizes)."""
    usable = [e for e in effects if e.se > 0]
    if not usable:
        return None
    weights = [1 / e.se ** 2 for e in usable]
    return Effect(sum(w * e.log_ratio for w, e in zip(weights, usable)) / sum(weights),
                  1 / math.sqrt(sum(weights)), sum(e.df for e in usable))


def benjamini_hochberg(p_values: list[float]) -> list[float]:
    """Adjusted p-values (q-values): a case is a discovery when its q is at most the false-discovery rate."""
    if not p_values:
        return []
    from scipy import stats

    return [float(q) for q in stats.false_discovery_control(p_values, method="bh")]


@dataclass(frozen=True)
class Case:
    """What a verdict is made from: a case's rounds at both commits, and how it is to be judged."""

    label: str
    kernel: str
    before: Rounds
    after: Rounds
    threshold: float  # the user's threshold for this kernel, a fraction
    noise: Noise | None = None
    is_control: bool = False
    references: tuple[str, ...] = ()  # the labels of the controls this case is judged against


@dataclass(frozen=True)
class Comparison:
    case: Case
    time: Effect  # raw, head over base
    cycles: Effect | None
    judged: Effect  # time relative to the reference control (or raw, without one)
    judged_cycles: Effect | None
    q_value: float
    threshold: float  # the threshold applied: the user's, or the detectable effect when larger
    verdict: Verdict
    why: str
    reference: str | None = None  # the controls it was judged against, in words
    open: bool = False  # more rounds could settle it

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
    def detectable(self) -> float:
        return self.judged.detectable()


def _direction(ratio: float, threshold: float) -> Verdict:
    if ratio > 1 + threshold:
        return Verdict.REGRESSION
    if ratio < 1 / (1 + threshold):
        return Verdict.IMPROVEMENT
    return Verdict.SAME


@dataclass
class _Measured:
    case: Case
    time: Effect
    cycles: Effect | None
    judged: Effect = field(init=False)
    judged_cycles: Effect | None = field(init=False)
    reference: str | None = field(init=False)


def judge(cases: list[Case]) -> list[Comparison]:
    """Every case's verdict, the false-discovery rate controlled over the non-control cases together."""
    measured = []
    for case in cases:
        cycles_before, cycles_after = case.before.log_cycles, case.after.log_cycles
        cycles = effect(cycles_before, cycles_after, case.noise) if cycles_before and cycles_after else None
        measured.append(_Measured(case, effect(case.before.log_times, case.after.log_times, case.noise), cycles))
    controls = {m.case.label: m for m in measured if m.case.is_control}
    for m in measured:
        references = [controls[label] for label in m.case.references if label in controls and not m.case.is_control]
        reference = combined_reference([r.time for r in references])
        reference_cycles = combined_reference([r.cycles for r in references if r.cycles])
        m.judged = m.time.relative_to(reference) if reference else m.time
        m.judged_cycles = (m.cycles.relative_to(reference_cycles) if reference_cycles and m.cycles else m.cycles)
        m.reference = (f"{references[0].case.kernel} at {len(references)} size{'s' if len(references) > 1 else ''}"
                       if reference else None)
    judged = [m for m in measured if not m.case.is_control]
    q_values = dict(zip((id(m) for m in judged), benjamini_hochberg([m.judged.p_value for m in judged])))
    return [_verdict(m, q_values.get(id(m), m.judged.p_value)) for m in measured]


def _verdict(m: _Measured, q_value: float) -> Comparison:
    case = m.case
    detectable = m.judged.detectable()
    threshold = max(case.threshold, detectable)
    reference = m.reference
    significant = q_value <= FALSE_DISCOVERY_RATE
    in_time = _direction(m.judged.ratio, threshold) if significant else Verdict.SAME
    low, high = m.judged.interval()
    # Open: the interval reaches across a threshold, or the noise hides changes the user asked to see.
    straddles = low < 1 + case.threshold < high or low < 1 / (1 + case.threshold) < high
    base = Comparison(case, m.time, m.cycles, m.judged, m.judged_cycles, q_value, threshold, in_time, "",
                      reference, straddles or detectable > case.threshold)
    few = [f"{side} {len(rounds.medians_s)}" for side, rounds in (("base", case.before), ("head", case.after))
           if len(rounds.medians_s) < MIN_ROUNDS]
    if few:  # a round lost (its process failed, or the results tree lacks it): no spread to test on
        return replace(base, verdict=Verdict.AMBIGUOUS, open=True,
                       why=f"too few rounds recorded to judge ({', '.join(few)}; at least {MIN_ROUNDS} a side)")
    floor_note = (f"; judged at {threshold:.1%}, the smallest change its noise lets the test see "
                  f"(asked: {case.threshold:.1%})" if detectable > case.threshold else "")
    if in_time is Verdict.SAME:
        why = (f"within {threshold:.1%}" if significant else "no significant difference") + \
              f" (interval {low:.3f}–{high:.3f})" + floor_note
        return replace(base, why=why)
    if m.judged_cycles is None:
        return replace(base, verdict=Verdict.AMBIGUOUS, open=True,
                       why=f"time says {in_time.value}; no SM clock recorded to judge it at equal clock")
    cycles_significant = m.judged_cycles.p_value <= FALSE_DISCOVERY_RATE
    at_equal_clock = _direction(m.judged_cycles.ratio, threshold) if cycles_significant else Verdict.SAME
    if at_equal_clock is in_time:
        return replace(base, why=f"beyond {threshold:.1%} in time and at equal clock (q = {q_value:.2g})" + floor_note)
    clock_move = case.after.sm_clock_mhz / case.before.sm_clock_mhz - 1
    return replace(base, verdict=Verdict.AMBIGUOUS, open=True,
                   why=f"time says {in_time.value}, at equal clock {at_equal_clock.value}: the SM clock moved "
                   f"{clock_move:+.1%}")


def threshold_for(kernel: str, default: float, patterns: list[tuple[str, float]]) -> float:
    """The threshold of the last pattern (shell-style, e.g. 'fp16/*') that matches the kernel's name, else default."""
    chosen = default
    for pattern, value in patterns:
        if fnmatch.fnmatchcase(kernel, pattern):
            chosen = value
    return chosen
