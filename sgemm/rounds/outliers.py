"""Which of a case's rounds are outliers: a round whose process was disturbed (a co-tenant's burst, a clock that
read off) lies far from the case's other rounds, and kept it widens the case's spread past what its builds show.
The rule is the Hampel identifier: a round further from the median of its rounds than a multiple of a spread known
for them, or of their own robust spread. The gate (sgemm.gate.verdict) and bisect (sgemm.bisect.compare) set such
rounds aside and time a round more in the place of each.
"""

from __future__ import annotations

from .evidence import Noise, far_from_median, pooled_noise, robust_sd, spread_bound, wider_than, without_positions

# A spread known from elsewhere (a pool, a noise file) is taken at this upper confidence bound of its estimate: one
# learned from few rounds may be low by chance, and ordinary rounds must stay.
SPREAD_LEVEL = 0.9
# A round further than this many sds from its rounds' median is an outlier: an ordinary round lies this far off
# about one time in 370, an outlier (a disturbed process) far more often.
OUTLIER_SD = 3.0
# With no spread known, a round this many of its rounds' own robust sds off is an outlier: a robust sd from nine
# rounds is itself uncertain by about a third, and at OUTLIER_SD it sets ordinary rounds aside often enough to make
# an interval bold.
OWN_OUTLIER_SD = 5.0
# A spread of fewer degrees of freedom than this (a robust sd from a commit's first few rounds, a pool of the bad
# end's alone) is too uncertain to say which rounds are outliers: a robust sd from a handful moves with one outlier
# among them.
SCALE_DF = 8
# More than this share of the rounds far off say that the rounds are wide (a jittery build), not that a process was
# disturbed: the median they are told by is then itself in doubt (its breakdown point), and none is set aside.
OUTLIER_SHARE = 0.5
# Where the rounds' own robust sd would widen the reach past a known spread's, the rounds within the known spread's
# reach are held to that spread first (an F-test at this level): if they agree with it, the rounds beyond are
# outliers, not a sign of wide rounds. Two or three outliers among nine rounds widen a robust sd enough to hide
# themselves (lab/2026-11-28-gate-outlier-rounds simulates whole gates with and without this test).
WIDE_LEVEL = 0.99
# A case gets a round more for each round set aside, up to this many: what an outlier round took from it.
REPLACED_AT_MOST = 3
# Passes of ordinary_groups at most; they end sooner where a pass keeps the rounds the one before it kept.
LEARNING_PASSES = 10


def outlier_reach(groups: list[list[float]], known: Noise | None, known_df: int = SCALE_DF) -> float:
    """How far from the median of its group's rounds a round (groups of log figures of one case, a commit's or a
    gate's each) lies to be an outlier: with a spread `known` of them of `known_df` degrees of freedom at least,
    OUTLIER_SD times its upper bound at SPREAD_LEVEL or the rounds' own robust sd where that is wider (the rounds
    are wider than `known` says); without, OWN_OUTLIER_SD times their own robust sd. 0 (none set aside) where neither
    rests on enough: a known spread of fewer than `known_df`, a robust one of fewer than SCALE_DF."""
    robust = robust_sd(groups, SCALE_DF)
    if known is None or known.df < known_df:
        return OWN_OUTLIER_SD * robust
    return OUTLIER_SD * max(spread_bound(known, SPREAD_LEVEL), robust)


def outlier_indices(logs: list[float], known: Noise | None, known_df: int = SCALE_DF) -> list[int]:
    """The positions of the outlier rounds among one group's log figures (outlier_reach); none where more than
    OUTLIER_SHARE of them would go: then the rounds are wide, not one disturbed. Where the rounds' own robust sd
    widened the reach past the known spread's, the rounds beyond the known spread's reach are the outliers if the
    rest agree with that spread (WIDE_LEVEL)."""
    reach = outlier_reach([logs], known, known_df)
    if known is not None and known.df >= known_df:
        narrow = OUTLIER_SD * spread_bound(known, SPREAD_LEVEL)
        beyond = _far(logs, narrow) if narrow < reach else []
        rest = pooled_noise([without_positions(logs, beyond)], 0.0) if beyond else None
        if rest is not None and not wider_than(rest, known, WIDE_LEVEL):
            return beyond
    return _far(logs, reach)


def ordinary_groups(groups: list[list[float]]) -> list[list[float]]:
    """Each group of a case's log figures (a gate's rounds, a run's) less its outlier rounds: how a spread is
    learned where none is known yet. A first pass tells them by OUTLIER_SD times the robust sd of every group
    together (of SCALE_DF deviations at least: none set aside with fewer); each further pass, from every round
    again, by the rule that will judge rounds against the spread learned (outlier_reach with the pooled spread of
    the rounds kept), until the rounds kept no longer change: the spread learned is one whose own rule keeps
    exactly the rounds it was learned from. A classical spread over every round would be widened by the very
    outliers it is to tell (masking), and one pass at a wide reach leaves those near it in."""
    reach, kept = OUTLIER_SD * robust_sd(groups, SCALE_DF), None
    for _ in range(LEARNING_PASSES):
        now = [without_positions(values, _far(values, reach)) for values in groups]
        spread = pooled_noise(now, 0.0)
        if now == kept or spread is None:
            return now
        kept, reach = now, outlier_reach(groups, spread, known_df=1)
    return kept or groups


def _far(logs: list[float], reach: float) -> list[int]:
    """The positions of the figures further than `reach` from their median (far_from_median); none where more than
    OUTLIER_SHARE of them are."""
    far = far_from_median(logs, reach)
    return [] if len(far) > OUTLIER_SHARE * len(logs) else far


def ordinary_rounds(logs: list[float], known: Noise | None) -> list[float]:
    """A commit's log round ratios less its outlier rounds (outlier_indices)."""
    return without_positions(logs, outlier_indices(logs, known))
