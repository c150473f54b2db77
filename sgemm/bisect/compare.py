"""One case at two commits, a good one and another, timed paired round by round until a verdict is reached at a
stated confidence: SAME (the other commit's time over good's lies inside a region that counts as good), DIFFERENT
(it lies outside), or UNKNOWN (the most rounds allowed, or the time, ran out first). `sgemm bisect` and
`sgemm confirm` ask their questions through it.

A round is the gate's paired round (sgemm.rounds.session): one process that builds the kernel from both
commits' trees, checks both against FP64 on the same inputs, and times them in alternating blocks
(sgemm.measuring.paired); it gives one ratio, other over good. Rounds are the unit of evidence, judged by the gate's
statistic (sgemm.rounds.evidence.paired_effect: the mean of the logs of the round ratios, a t interval, the timer's
resolution as a floor on the spread).

When it stops: a look after every round from the `min_rounds`-th on. Each look spends a share of 1 - confidence in
proportion to the rounds it adds (sgemm.rounds.evidence.spend, as the gate's looks do), so that the intervals of every
look together miss the true ratio with probability at most 1 - confidence; the verdict is the first look whose
interval lies wholly inside the region (SAME) or wholly outside it (DIFFERENT). The interval reported is that look's.

A bisect's own tests (Halves, RegionWithoutOutliers) first set a commit's outlier rounds aside (ordinary_rounds: the
Hampel identifier, median plus or minus a multiple of the pooled sd) and time a round more in the place of each.
"""

from __future__ import annotations

import math
import shutil
import tempfile
from collections.abc import Callable
from dataclasses import asdict, dataclass, replace
from enum import Enum
from pathlib import Path

from ..catalogue import Kernel
from ..results.asvsuite import SuiteCase
from ..results.machine import required_identity
from ..rounds.evidence import (MIN_ROUNDS, Noise, PairedRounds, log_likelihood_ratio, paired_effect, pooled_noise,
    spend, spread_bound, wider_than)
from ..rounds.outliers import REPLACED_AT_MOST, SPREAD_LEVEL, ordinary_rounds
from ..rounds.pairs import Pair
from ..rounds.session import IDLE_TIMEOUT_S, ROUND_SETTINGS, GpuNotFree, PairedSession, PairingError, wait_for_gpu
from ..words import counted

DEFAULT_CONFIDENCE = 0.95
DEFAULT_MAX_ROUNDS = 9  # as the gate's
# The sequential test's chance of each wrong verdict, either way: a search of 16 commits makes about five, and a
# wrong one names a wrong commit.
SEQUENTIAL_ERROR = 0.001
# A round counts at most this many sds beyond half the step, so that one outlier round cannot decide.
CLIP_SD = 2.0
# A commit's rounds spread wider than the pool's at this confidence are judged on their own.
CONTRADICTS_LEVEL = 0.99


class Answer(str, Enum):
    SAME = "SAME"
    DIFFERENT = "DIFFERENT"
    UNKNOWN = "UNKNOWN"


class Unmeasurable(RuntimeError):
    """The other commit's build cannot be timed: it does not compile, is wrong, lacks the kernel or refuses the
    shape. The message says which and why."""


class Stopped(RuntimeError):
    """Measuring cannot go on at all (the GPU is shared, the good build fails): the message says why."""


@dataclass(frozen=True)
class Round:
    """One round's figures: the other build's time over good's, each side's median time and SM clock."""

    ratio: float
    good_s: float = math.nan
    other_s: float = math.nan
    good_clock_mhz: float = math.nan
    other_clock_mhz: float = math.nan
    block_s: float = 0.01  # how long a timed block lasted: the timer's resolution is relative to it

    def as_dict(self) -> dict:
        return asdict(self)


@dataclass(frozen=True)
class Region:
    """The ratios (other over good) that count as the same as good: [low, high]; infinite ends allowed."""

    low: float
    high: float
    meaning: str  # in words, for the reports: "within 0.25% of good", "on good's side of 1.0050"

    @classmethod
    def within(cls, threshold: float) -> Region:
        """The same as good within `threshold` either way (a fraction)."""
        return cls(1 / (1 + threshold), 1 + threshold, f"within {threshold:.2%} of good")

    @classmethod
    def good_side_of(cls, pivot: float, step: float) -> Region:
        """On good's side of `pivot`, a ratio between 1 and `step` (the bad end's ratio)."""
        if step >= 1:
            return cls(0.0, pivot, f"below {pivot:.4f} (half the step of {step:.4f}, geometrically)")
        return cls(pivot, math.inf, f"above {pivot:.4f} (half the step of {step:.4f}, geometrically)")


@dataclass(frozen=True)
class Halves:
    """Which side of a step a commit lies on: its rounds from a build equal to the good end (ratio 1) or from one a
    whole step off (the bad end's ratio), told apart by a sequential probability ratio test on the logs of the round
    ratios, the spread pooled with what was measured elsewhere of the case, outlier rounds set aside and timed again
    (ordinary_rounds); SAME is the good end's side."""

    step: float  # the bad end's ratio: the median of its rounds, which one outlier round does not move
    error: float = SEQUENTIAL_ERROR

    @property
    def meaning(self) -> str:
        return (f"ratio 1 (good) or {self.step:.4f} (the step, bad), decided by a sequential test with "
                f"{self.error:.1%} error either way")

    def answer(self, rounds: list[Round], schedule: CompareSchedule, noise: Noise | None) -> CommitComparison | None:
        n = len(rounds)
        if n < schedule.min_rounds:
            return None
        logs = [math.log(r.ratio) for r in rounds]
        resolution = PairedRounds((), block_s=min(r.block_s for r in rounds)).resolution
        # One outlier round would widen the commit's own spread past the pool's and leave it undecided, or decide it
        # by itself: rounds far from the commit's others are set aside, and a round more is timed for each.
        kept = ordinary_rounds(logs, noise)
        own = pooled_noise([kept], resolution)
        if noise is not None and own is not None and wider_than(own, noise, CONTRADICTS_LEVEL):
            # a commit that made the case jittery (its ordinary rounds too) is judged on its own rounds as they are
            noise, kept = None, logs
        most = schedule.max_rounds + min(n - len(kept), REPLACED_AT_MOST)
        spread = pooled_noise([kept], resolution, noise)
        ratio, low, high = _look(rounds, schedule, noise)
        figures = (ratio, (low, high), tuple(rounds))
        if spread is None or len(kept) < schedule.min_rounds:
            return CommitComparison(Answer.UNKNOWN, *figures, _set_aside(n, kept, "too few ordinary rounds")) \
                if n >= most else None
        evidence = log_likelihood_ratio(kept, math.log(self.step), spread_bound(spread, SPREAD_LEVEL), CLIP_SD)
        bound = math.log((1 - self.error) / self.error)
        said = _set_aside(n, kept, f"log likelihood ratio {evidence:+.1f} (bounds ±{bound:.1f}) after {n} rounds")
        if evidence >= bound:
            return CommitComparison(Answer.DIFFERENT, *figures, f"the step's side: {said}")
        if evidence <= -bound:
            return CommitComparison(Answer.SAME, *figures, f"the good end's side: {said}")
        if n >= most:
            return CommitComparison(Answer.UNKNOWN, *figures, f"neither side yet: {said}, the most allowed")
        return None


@dataclass(frozen=True)
class RegionWithoutOutliers:
    """A region (Region) judged as `answer` judges it, on a commit's ordinary rounds: a round far from the median of
    the commit's rounds (outlier_reach: the Hampel identifier, the sd the pool's or, with none, the rounds' own from
    their median absolute deviation) is set aside and a round more is timed in its place, up to REPLACED_AT_MOST. The
    t interval of the rounds kept spends as if the rounds set aside had not been timed: one outlier round neither
    moves the ratio nor widens the interval past the threshold. The bad end's test of a pooled bisect: is there a
    step beyond the threshold."""

    region: Region

    @property
    def meaning(self) -> str:
        return f"{self.region.meaning}, outlier rounds set aside"

    def answer(self, rounds: list[Round], schedule: CompareSchedule, noise: Noise | None) -> CommitComparison | None:
        n = len(rounds)
        if n < schedule.min_rounds:
            return None
        logs = [math.log(r.ratio) for r in rounds]
        kept_logs = ordinary_rounds(logs, noise)
        kept = [r for r, value in zip(rounds, logs) if value in kept_logs]
        outcome = answer(kept, self.region, schedule, noise)
        if outcome is None and n >= schedule.max_rounds + REPLACED_AT_MOST:
            # more rounds set aside than replaced: the figures of what is left
            ratio, low, high = _look(kept, schedule, noise) if len(kept) >= 2 else (math.nan, -math.inf, math.inf)
            outcome = CommitComparison(Answer.UNKNOWN, ratio, (low, high), (),
                                       f"not settled after {n} rounds, the most allowed")
        if outcome is None:
            return None
        return replace(outcome, rounds=tuple(rounds), why=_set_aside(n, kept, outcome.why))


def _set_aside(n: int, kept: list, said: str) -> str:
    return said + (f" ({counted(n - len(kept), 'outlier round')} set aside)" if len(kept) < n else "")


@dataclass(frozen=True)
class CompareSchedule:
    min_rounds: int = MIN_ROUNDS
    max_rounds: int = DEFAULT_MAX_ROUNDS
    confidence: float = DEFAULT_CONFIDENCE


@dataclass(frozen=True)
class CommitComparison:
    """What the rounds said of a commit against the good end: its answer, and the ratio it rests on."""

    verdict: Answer
    ratio: float  # exp(mean log round ratio): the other build's time over good's
    interval: tuple[float, float]  # at the deciding (or last) look's level
    rounds: tuple[Round, ...]
    why: str


def _look(rounds: list[Round], schedule: CompareSchedule, noise: Noise | None = None) -> tuple[float, float, float]:
    """The ratio and the interval of the look after these rounds (at least two; one, with `noise`): the spread of
    these rounds pooled with `noise`, the spread measured elsewhere of this case's rounds."""
    n = len(rounds)
    effect = paired_effect(PairedRounds(tuple(r.ratio for r in rounds), block_s=min(r.block_s for r in rounds)),
                           noise)
    before = 0 if n <= schedule.min_rounds else n - 1  # the first look spends for every round it holds
    alpha = spend(n, before, schedule.max_rounds, 1 - schedule.confidence)
    low, high = effect.interval(1 - alpha)
    return effect.ratio, low, high


def answer(rounds: list[Round], region: Region, schedule: CompareSchedule,
           noise: Noise | None = None) -> CommitComparison | None:
    """The verdict at the look after these rounds, or None when more rounds may settle it; `noise`: a spread of
    this case's rounds measured elsewhere, pooled with theirs."""
    n = len(rounds)
    if n < schedule.min_rounds:
        return None
    ratio, low, high = _look(rounds, schedule, noise)
    interval = f"{low:.4f}–{high:.4f}"
    if region.low <= low and high <= region.high:
        return CommitComparison(Answer.SAME, ratio, (low, high), tuple(rounds),
                       f"{interval} lies {region.meaning}, after {n} rounds")
    if high < region.low or low > region.high:
        return CommitComparison(Answer.DIFFERENT, ratio, (low, high), tuple(rounds),
                       f"{interval} lies outside {region.meaning}, after {n} rounds")
    if n >= schedule.max_rounds:
        return CommitComparison(Answer.UNKNOWN, ratio, (low, high), tuple(rounds),
                       f"{interval} still straddles the edge of {region.meaning} after {n} rounds, the most allowed")
    return None


def compare(next_round: Callable[[], Round], done: list[Round], region: Region | Halves | RegionWithoutOutliers,
            schedule: CompareSchedule, time_left: Callable[[], bool] = lambda: True,
            on_round: Callable[[list[Round]], None] | None = None, noise: Noise | None = None) -> CommitComparison:
    """Rounds after those `done`, one at a time, until a verdict; UNKNOWN when `time_left()` says no before one.
    `on_round` sees the rounds so far after each new one (to save them); `noise` is pooled with them (answer).
    Unmeasurable or Stopped propagate."""
    rounds = list(done)
    while True:
        outcome = region.answer(rounds, schedule, noise) if isinstance(region, Halves | RegionWithoutOutliers) else \
            answer(rounds, region, schedule, noise)
        if outcome:
            return outcome
        if not time_left():
            # The figures so far, as a look at this many rounds would give them (two rounds at least: one has no
            # spread, and its interval is unbounded).
            ratio, low, high = _look(rounds, schedule, noise) if len(rounds) >= 2 else \
                (rounds[0].ratio if rounds else math.nan, -math.inf, math.inf)
            return CommitComparison(Answer.UNKNOWN, ratio, (low, high), tuple(rounds),
                           f"the time allowed ran out after {len(rounds)} rounds")
        rounds.append(next_round())
        if on_round:
            on_round(rounds)


# --- Rounds on the GPU ---------------------------------------------------------------------------------------------


class PairedBuilds:
    """Rounds of one case, the good commit's build against another's, each round one process of the gate's
    (sgemm.rounds.session.PairedSession); one session a commit, its trees exported into a folder of this
    object's own."""

    def __init__(self, repo: Path, good: str, kernel: str, size: int, device: int = 0,
                 gpu_check: Callable[[], None] | None = None, work_dir: Path | None = None):
        self.repo, self.good, self.device = repo, good, device
        self.case = SuiteCase.square(kernel, size)
        self.gpu_check = gpu_check or (lambda: None)
        self._own_dir = work_dir is None
        self.work_dir = Path(tempfile.mkdtemp(prefix="sgemm-compare-")) if work_dir is None else work_dir
        self.sessions: dict[str, PairedSession] = {}

    def _session(self, commit: str) -> PairedSession:
        if commit not in self.sessions:
            try:
                self.sessions[commit] = PairedSession(
                    self.repo, self.good, commit, [Pair(self.case, self.case)], self.work_dir / commit[:12],
                    self.device, {self.case.label: 0.0}, {}, self.gpu_check, ROUND_SETTINGS)
            except PairingError as exc:
                raise Unmeasurable(str(exc)) from exc
        return self.sessions[commit]

    def round(self, commit: str) -> Round:
        """One more round of `commit` over good."""
        session = self._session(commit)
        label = self.case.label
        measured = session.measured[label]
        try:
            session.measure({label: measured.count + 1})
        except GpuNotFree as exc:  # the GPU is not ours alone
            raise Stopped(str(exc)) from exc
        if session.shared_gpu:
            raise Stopped(session.shared_gpu[-1])
        if label in session.failed:
            reason = session.failed[label]
            if reason.startswith("base:"):
                raise Stopped(f"the good commit's build cannot be timed: {reason.removeprefix('base:').strip()}")
            raise Unmeasurable(reason.removeprefix("head:").strip())
        rounds = measured.rounds(measured.count)
        return Round(rounds.ratios[-1], rounds.base_s[-1], rounds.head_s[-1], rounds.base_clocks_mhz[-1],
                     rounds.head_clocks_mhz[-1], rounds.block_s)

    @classmethod
    def on_this_gpu(cls, repo: Path, good: str, kernel: Kernel, size: int, device: int = 0) -> PairedBuilds:
        """Rounds on this box's GPU, which must be there and able to run the kernel (NoGpuError, Stopped); each
        round waits for the GPU to be the measuring's alone, as the gate's do."""
        identity = required_identity(device, "nothing can be measured here")
        if problem := kernel.gpu_problem(identity.compute_capability):
            raise Stopped(problem)
        return cls(repo, good, kernel.name, size, device, lambda: wait_for_gpu(device, IDLE_TIMEOUT_S))

    @property
    def settings(self) -> dict:
        return asdict(ROUND_SETTINGS)

    @property
    def method(self) -> str:
        return ROUND_SETTINGS.method

    def close(self) -> None:
        if self._own_dir:
            shutil.rmtree(self.work_dir, ignore_errors=True)
