"""`sgemm bisect`: the first commit at which one case got slower (or faster), found by timing commits paired against
the good end in one process, round by round (sgemm.bisect.compare), never in processes of their own.

The search, over the first-parent line from the good end to the bad end (sgemm.bisect.commits):
1. The step. The bad end is timed against the good end until its ratio is DIFFERENT from 1 by more than the
   threshold (0.25% by default, the gate's for paired cases) or SAME within it. SAME: there is no step to look for
   ("NO STEP"). An undecided step ends the search UNKNOWN.
2. The rule for a commit in between: it is bad when its time over the good end's lies on the bad end's side of half
   the step, taken geometrically (the square root of the step's ratio: 1.0050 for a step of 1.0100), and good when
   on the good end's side. The verdict is DIFFERENT (bad) or SAME (good) once the interval of its round ratios lies
   wholly on one side, at the stated confidence; UNKNOWN if its most rounds are spent first. Half the step keeps the
   two kinds of error alike, and a commit carrying part of a step made of several is named by which half it is in.
3. Binary search: the commit nearest the middle of those still open between the last good and the first bad is
   timed next. One that cannot be timed (does not compile, computes a wrong product, lacks the kernel, refuses the
   size) is SKIPPED, as `git bisect skip` does, and the next nearest is taken; so is one left UNKNOWN. The search
   ends FOUND when the first bad commit has a good commit just before it, or UNKNOWN when the commits left are
   skipped ones, or the builds or the time allowed ran out; the result names the commits that remain.

Each decision stands at the confidence given (95% by default; a search of 16 commits makes about 5 of them).

The spread a decision weighs a commit's rounds against is pooled: its own rounds about their mean, every other
commit's of this bisect about theirs (one case, one box, one way of timing: their spread is one thing, whatever each
commit's ratio), and the noise file's entry for the case where its rounds were timed as these are. A commit judged on
its own three to nine rounds alone has two to eight degrees of freedom, and a t interval that wide leaves many
commits undecided; pooled, the later commits of a search are judged with dozens (docs/bisect.md). A round far from
its commit's others (an outlier: a disturbed process) is set aside and a round more timed in its place, the bad end's
as a candidate's, and left out of the pool (sgemm.bisect.compare.ordinary_rounds): kept, one such round widens a
commit's spread until nothing is decided, or decides a commit by itself.

Every round is saved to the state file as soon as it is measured, so a stopped bisect resumes where it stopped:
commits already decided are not timed again, and a commit cut off mid-way keeps its rounds.
"""

from __future__ import annotations

import datetime
import json
import math
import statistics
import sys
import time
from collections.abc import Callable
from dataclasses import asdict, dataclass, field, replace
from pathlib import Path
from typing import Protocol

from ..atomic import write_atomically
from ..results.resultstree import FOUND, NO_STEP, UNKNOWN
from ..rounds.evidence import Noise, PairedRounds, pooled_noise
from ..rounds.outliers import outlier_reach
from ..rounds.session import PAIRED_THRESHOLD
from ..words import counted
from .commits import Chain
from .compare import (Answer, CommitComparison, CompareSchedule, Halves, Region, Round, Stopped,
    RegionWithoutOutliers, Unmeasurable, compare)
from .targets import Target

STATE_FORMAT = 1
DEFAULT_SCHEDULE = CompareSchedule()
SKIPPED = "SKIPPED"
BAD_END, CANDIDATE = "bad end", "candidate"
# Rounds past the most a commit gets that the bad end of a pooled bisect may take, its looks spending over them all:
# it is timed first, with no other commit's rounds to pool with, and its own few rounds left a real step near the
# threshold undecided (8-14% of bisects of a 0.5% step at 0.14% round noise with no noise file:
# lab/2026-11-28-bisect-horizon).
BAD_END_EXTRA_ROUNDS = 6
RULE = ("a commit is bad when its time over the good end's lies beyond half the step (the square root of the bad "
        "end's ratio), good when on the good end's side; decided once the interval of its round ratios lies wholly "
        "on one side")


class BisectError(RuntimeError):
    """The bisect cannot go on (a state file of another bisect, an end that cannot be timed, a shared GPU); the
    message says why. What was measured is in the state file."""


class RoundSource(Protocol):
    """Rounds of one case: a commit's build over the good end's (sgemm.bisect.compare.PairedBuilds)."""

    method: str

    def round(self, commit: str) -> Round: ...


@dataclass(frozen=True)
class Limits:
    threshold: float = PAIRED_THRESHOLD  # the step must exceed it
    schedule: CompareSchedule = DEFAULT_SCHEDULE
    max_builds: int | None = None  # commits built, the good end included
    budget_s: float | None = None  # wall time of this run
    noise: Noise | None = None  # the noise file's entry for the case, its rounds timed as these are
    # False: as before 2026-11-28, each commit judged on its own rounds alone, a candidate by its interval
    pooled: bool = True

    def schedule_for(self, role: str) -> CompareSchedule:
        """The schedule a commit in this role is timed to: the bad end of a pooled bisect may take
        BAD_END_EXTRA_ROUNDS more rounds than the others."""
        if role == BAD_END and self.pooled:
            return replace(self.schedule, max_rounds=self.schedule.max_rounds + BAD_END_EXTRA_ROUNDS)
        return self.schedule

    @property
    def spread(self) -> str:
        """How a decision's spread is made, in words (the state's query and the result say it)."""
        if not self.pooled:
            return "each commit's own rounds"
        return "pooled over the bisect's commits" + (
            f" and the noise file's entry (sd {self.noise.sd:.4%}, {self.noise.df} df)" if self.noise else "")


@dataclass
class BisectStep:
    """One commit measured against the good end."""

    commit: str
    role: str  # BAD_END or CANDIDATE
    position: int  # in the first-parent line, 1 the oldest after the good end
    rounds: list[dict] = field(default_factory=list)
    verdict: str = ""  # SAME, DIFFERENT, UNKNOWN or SKIPPED once decided
    ratio: float | None = None
    interval: list[float] | None = None
    why: str = ""
    seconds: float = 0.0

    def decided(self, max_rounds: int) -> bool:
        """A verdict that more time would not change."""
        if self.verdict == Answer.UNKNOWN.value:
            return len(self.rounds) >= max_rounds
        return bool(self.verdict)


class State:
    """The state file: what this bisect is, the commits built, and every step with its rounds."""

    def __init__(self, path: Path, query: dict):
        self.path, self.query = Path(path), query
        self.steps: list[BisectStep] = []
        self.builds: list[str] = []
        self.wall_s = 0.0
        self.resumed = False

    @classmethod
    def open(cls, path: Path, query: dict) -> State:
        """The state at `path` when it is of this bisect; a new one when there is none. BisectError when it is of
        another bisect or unreadable (it is left as it was)."""
        state = cls(path, query)
        if not state.path.exists():
            return state
        try:
            data = json.loads(state.path.read_text())
            if data.get("format") != STATE_FORMAT:
                raise ValueError(f"format {data.get('format')!r}, not {STATE_FORMAT}")
            steps = [BisectStep(**step) for step in data["steps"]]
            builds, wall = list(data["builds"]), float(data["wall_s"])
            saved = data["query"]
        except (OSError, ValueError, KeyError, TypeError, AttributeError) as exc:
            raise BisectError(f"--state {path}: not a bisect state file ({exc}); move it away to start afresh") \
                from None
        if saved != query:
            differs = ", ".join(f"{key} {saved.get(key)!r} there, {value!r} here" for key, value in query.items()
                                if saved.get(key) != value)
            raise BisectError(f"--state {path} is of another bisect ({differs}): name another state file")
        state.steps, state.builds, state.wall_s, state.resumed = steps, builds, wall, True
        return state

    def step(self, commit: str) -> BisectStep | None:
        return next((step for step in self.steps if step.commit == commit), None)

    def save(self) -> None:
        data = {"format": STATE_FORMAT, "query": self.query, "builds": self.builds, "wall_s": round(self.wall_s, 3),
                "updated_at": now_iso(), "steps": [asdict(step) for step in self.steps]}
        write_atomically(self.path, json.dumps(data, indent=1) + "\n")


def now_iso() -> str:
    return datetime.datetime.now(datetime.UTC).isoformat(timespec="seconds")


def query_of(target: Target, limits: Limits) -> dict:
    """What a state file must match to be resumed: the case, the ends and how decisions are made."""
    return {"case": target.case, "size": target.size, "good": target.good, "bad": target.bad,
            "threshold": limits.threshold, "confidence": limits.schedule.confidence,
            "min_rounds": limits.schedule.min_rounds, "max_rounds": limits.schedule.max_rounds,
            "spread": limits.spread}


def _say(text: str) -> None:
    print(f"sgemm bisect: {text}", file=sys.stderr)


class _Search:
    def __init__(self, target: Target, chain: Chain, source: RoundSource, state: State, limits: Limits,
                 say: Callable[[str], None], clock: Callable[[], float]):
        self.target, self.chain, self.source, self.state, self.limits = target, chain, source, state, limits
        self.say, self.clock = say, clock
        self.started = clock()
        self.out_of_builds = False

    def time_left(self) -> bool:
        return self.limits.budget_s is None or self.clock() - self.started < self.limits.budget_s

    def others_spread(self, commit: str) -> Noise | None:
        """The spread of every other commit's rounds of this bisect, each about its own mean, their outlier rounds
        left out, pooled with the noise file's entry; None when each commit is judged on its own rounds."""
        if not self.limits.pooled:
            return None
        groups, blocks = [], []
        for step in self.state.steps:
            if step.commit != commit and step.verdict != SKIPPED and len(step.rounds) >= 2:
                groups.append([math.log(r["ratio"]) for r in step.rounds])
                blocks += [r.get("block_s", Round.block_s) for r in step.rounds]
        resolution = PairedRounds((), block_s=min(blocks, default=Round.block_s)).resolution
        return pooled_noise(groups, resolution, self.limits.noise,
                            outlier_reach=outlier_reach(groups, self.limits.noise))

    def measure(self, commit: str, role: str, region: Region | Halves | RegionWithoutOutliers) -> BisectStep | None:
        """The commit's step, timed as far as needed (or read from the state); None when the builds allowed are
        spent before it."""
        state, schedule = self.state, self.limits.schedule_for(role)
        step = state.step(commit)
        if step and step.decided(schedule.max_rounds):
            return step
        if commit not in state.builds:
            wanted = 1 + (self.chain.good not in state.builds)
            if self.limits.max_builds is not None and len(state.builds) + wanted > self.limits.max_builds:
                self.out_of_builds = True
                return None
            state.builds += [c for c in (self.chain.good, commit) if c not in state.builds]
        if step is None:
            step = BisectStep(commit, role, self.chain.commits.index(commit) + 1)
            state.steps.append(step)
        step.verdict = ""
        state.save()
        began = self.clock()

        def saved(rounds: list[Round]) -> None:
            step.rounds = [r.as_dict() for r in rounds]
            state.save()
            self.say(f"  {commit[:12]}: round {len(rounds)}, ratio {rounds[-1].ratio:.4f}")

        try:
            outcome = compare(lambda: self.source.round(commit), [Round(**r) for r in step.rounds], region, schedule,
                              self.time_left, saved, self.others_spread(commit))
        except Unmeasurable as exc:
            step.verdict, step.why = SKIPPED, str(exc)
        else:
            self._record(step, outcome)
        step.seconds = round(step.seconds + self.clock() - began, 3)
        state.save()
        return step

    @staticmethod
    def _record(step: BisectStep, outcome: CommitComparison) -> None:
        step.verdict, step.why = outcome.verdict.value, outcome.why
        step.ratio = None if math.isnan(outcome.ratio) else outcome.ratio
        step.interval = [v for v in outcome.interval] if all(map(math.isfinite, outcome.interval)) else None


def _describe(step: BisectStep, total: int) -> str:
    figure = f"ratio {step.ratio:.4f}" if step.ratio is not None else "no ratio"
    if step.interval:
        figure += f" ({step.interval[0]:.4f}–{step.interval[1]:.4f})"
    return f"[{step.position}/{total}] {step.commit[:12]} ({step.role}): {step.verdict}, {figure}; {step.why}"


def run_bisect(target: Target, chain: Chain, source: RoundSource, state: State, limits: Limits = Limits(),
               say: Callable[[str], None] = _say, clock: Callable[[], float] = time.monotonic) -> dict:
    """Search the chain for the first bad commit; the result as `sgemm bisect` writes it. BisectError when the
    bad end cannot be timed, or measuring cannot go on (the state keeps what was measured)."""
    search = _Search(target, chain, source, state, limits, say, clock)
    commits, total = chain.commits, len(chain.commits)
    if state.resumed:
        decided = [s for s in state.steps if s.decided(limits.schedule_for(s.role).max_rounds)]
        say(f"resuming from {state.path}: {counted(len(decided), 'commit')} already decided, not timed again")
    if chain.merges:
        say(f"the range holds {counted(len(chain.merges), 'merge commit')} "
            f"({', '.join(c[:12] for c in chain.merges)}): "
            "searching the first-parent line, each merge standing for what it merged")
    verdict, why, first_bad, remaining = UNKNOWN, "", None, list(commits)
    step_outcome: BisectStep | None = None
    try:
        within = Region.within(limits.threshold)
        # One outlier round among the bad end's few would widen its interval past the threshold: pooled, it is
        # judged on its ordinary rounds.
        step_outcome = search.measure(chain.bad, BAD_END, RegionWithoutOutliers(within) if limits.pooled else within)
        if step_outcome is None:
            why = "the builds allowed do not reach the bad end"
        else:
            say(_describe(step_outcome, total))
        if step_outcome and step_outcome.verdict == SKIPPED:
            raise BisectError(f"the bad end {chain.bad[:12]} cannot be timed: {step_outcome.why}")
        if step_outcome and step_outcome.verdict == Answer.SAME.value:
            verdict, why, remaining = NO_STEP, f"the bad end is the same as the good end: {step_outcome.why}", []
        elif step_outcome and step_outcome.verdict == Answer.UNKNOWN.value:
            why = f"whether there is a step is not settled: {step_outcome.why}"
        elif step_outcome:
            verdict, why, first_bad, remaining = _bisect(search, step_outcome, say)
    except Stopped as exc:
        raise BisectError(f"stopped: {exc}; what was measured is in {state.path}") from None
    finally:
        state.wall_s += clock() - search.started
        state.save()
    result = {
        "id": target.id, "case": target.case, "size": target.size, "good": chain.good, "bad": chain.bad,
        "first_bad": first_bad, "verdict": verdict, "why": why, "remaining": remaining,
        "skipped": [{"commit": s.commit, "why": s.why} for s in state.steps if s.verdict == SKIPPED],
        "builds": len(state.builds), "wall_s": round(clock() - search.started, 1),
        "total_wall_s": round(state.wall_s, 1), "resumed": state.resumed,
        "step": ({"ratio": step_outcome.ratio, "interval": step_outcome.interval, "verdict": step_outcome.verdict}
                 if step_outcome else None),
        "rule": RULE, "spread": limits.spread, "threshold": limits.threshold, "confidence": limits.schedule.confidence,
        "method": source.method, "first_parent": True, "merges": list(chain.merges),
        "commits": total, "machine": target.machine, "source": target.source, "finished_at": now_iso(),
        "steps": [asdict(s) for s in state.steps],
    }
    return result


def _bisect(search: _Search, bad_end: BisectStep, say: Callable[[str], None]) -> tuple[str, str, str | None, list[str]]:
    commits, total = search.chain.commits, len(search.chain.commits)
    step_ratio = bad_end.ratio
    if search.limits.pooled:
        region = Halves(statistics.median(r["ratio"] for r in bad_end.rounds))
        say(f"step {step_ratio:.4f}: each commit in between is {region.meaning}")
    else:
        region = Region.good_side_of(math.sqrt(step_ratio), step_ratio)
        say(f"step {step_ratio:.4f}: {RULE} ({region.meaning} is good)")
    max_rounds = search.limits.schedule.max_rounds
    while True:
        status = {}
        for position, commit in enumerate(commits):
            step = search.state.step(commit)
            if commit == search.chain.bad:
                status[position] = Answer.DIFFERENT.value
            elif step and step.decided(max_rounds):
                status[position] = step.verdict
        high = min(p for p, v in status.items() if v == Answer.DIFFERENT.value)
        low = max([p for p, v in status.items() if v == Answer.SAME.value and p < high], default=-1)
        remaining = list(commits[low + 1:high + 1])
        open_positions = [p for p in range(low + 1, high) if p not in status]
        if not open_positions:
            if high == low + 1:
                first = commits[high]
                merge = " (a merge commit: the change came with what it merged)" if first in search.chain.merges \
                    else ""
                return FOUND, f"{first[:12]} is bad and the commit before it good{merge}", first, [first]
            left = ", ".join(f"{c[:12]}" for c in commits[low + 1:high])
            why = f"the first bad commit is one of {len(remaining)}: {left} could not be decided, then " \
                f"{commits[high][:12]} is bad"
            return UNKNOWN, why, None, remaining
        if not search.time_left():
            return UNKNOWN, f"the time allowed ran out with {counted(len(remaining), 'commit')} left", None, remaining
        middle = (low + high) / 2
        chosen = min(open_positions, key=lambda p: (abs(p - middle), p))
        step = search.measure(commits[chosen], CANDIDATE, region)
        if step is None:
            return UNKNOWN, f"the builds allowed ran out with {counted(len(remaining), 'commit')} left", None, remaining
        say(_describe(step, total))
        if not step.decided(max_rounds):
            return UNKNOWN, f"the time allowed ran out with {counted(len(remaining), 'commit')} left", None, remaining
