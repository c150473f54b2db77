"""How long one `asv run` of the history has left, from what asv said so far (its commits and its percent) and what
the measuring process reports of itself (sgemm.measuring.record.MEASURING_PROGRESS_VARIABLE: cases done of cases
planned, in its two phases), each read with the time it was read at.

asv's percent counts benchmarks (about 34 a commit, each run over every case in a process a case), and the first
case of the first measures every case while the others only read what it filed: a percent-based estimate is wrong
by up to 60x. So a commit is taken as three parts:
- the measuring: cases timed by NVBench, then each paired against its reference build, then those charged energy
  (where the history charges any); a phase under way is extrapolated from its own cases so far, from its first
  case on (the compile before it is left out of its pace), its prior cost a case (PRIOR_TIMING_S, PRIOR_PAIRING_S;
  the energy step's own bound, given by the caller) counting as PRIOR_WEIGHT_CASES of them, so that one slow first
  case (a warm-up of its own) does not set the pace of a hundred; a phase not begun from its prior; the pairing
  takes its cases in an order that has nothing to do with their cost (sgemm.measuring.record), so that the first
  are a fair sample;
- the readers, the commit's other benchmarks: a prior cost a benchmark process (PRIOR_READER_S, a process a case
  and benchmark), and once half of them are read, their own pace from asv's percent since the measuring ended
  (the first benchmarks, over every case, are the longest: an earlier pace overshoots);
- and the commits after it, each as long as the last whole commit took (or as this one will, before one has ended).
The priors come from lab/2026-11-27-history-pairing; each is replaced by what this run measures as soon as it can be.
What the history does after asv (joining shards, the site) is its caller's to add.
"""

from __future__ import annotations

import json
import re
from dataclasses import dataclass, field

PRIOR_TIMING_S = 0.15  # NVBench's part of a case
PRIOR_PAIRING_S = 0.6  # a case paired against its reference build
PRIOR_READER_S = 0.0075  # a benchmark process (one case of one benchmark) that reads what the measuring filed
MIN_READ_SHARE = 0.5  # of a commit's benchmarks read, before their own pace replaces the prior
# What a phase's prior pace weighs against its own cases: a shard's first paired case once took 3x the pace of the
# rest, and the estimate from it alone read 2.2x the truth (lab/2026-11-28-history-sharding).
PRIOR_WEIGHT_CASES = 8
TIMING, PAIRING, ENERGY, DONE = "timing", "pairing", "energy", "done"

TOTAL = re.compile(r"Running (\d+) total benchmarks \((\d+) commits")
PERCENT = re.compile(r"^\[\s*(\d+(?:\.\d+)?)%\]")
COMMIT = re.compile(r"· For \S+ commit ([0-9a-f]{7,40})")
# asv's own words as a run goes from one part to the next: the environment first (a virtualenv created and its
# requirements installed), the project built and the suite discovered, then the benchmarks.
ENVIRONMENT = re.compile(r"Creating virtualenv for |Creating environments")
DISCOVERY = re.compile(r"· Discovering benchmarks")


@dataclass
class MeasuringPhase:
    name: str
    total: int
    started_at: float
    done: int = 0
    updated_at: float = 0.0


@dataclass
class RunClock:
    """What one `asv run` said and when: feed it asv's lines and the measuring's records as they come (`now` on one
    clock), ask it `left(now)`. `cases`: the cases the run measures a commit; `pairing`: whether each is also paired
    against a reference build; `energy_s`: what charging energy costs a commit at most (0: none is charged)."""

    cases: int
    pairing: bool = True
    energy_s: float = 0.0
    started_at: float = 0.0
    commits: int = 0
    benchmarks: int = 0
    percent: float = 0.0
    commit_number: int = 0
    commit_started: list[float] = field(default_factory=list)  # when each commit began
    marks: dict[str, float] = field(default_factory=dict)  # when each part of the run was first seen
    phase: MeasuringPhase | None = None
    measured_at: float | None = None  # when this commit's measuring ended
    measured_percent: float = 0.0

    def read(self, line: str, now: float) -> None:
        """One line of asv's output."""
        if ENVIRONMENT.search(line):
            self.marks.setdefault("environment", now)
        if DISCOVERY.search(line):
            self.marks.setdefault("discovery", now)
        if found := TOTAL.search(line):
            self.benchmarks, self.commits = int(found.group(1)), int(found.group(2))
            self.marks.setdefault("benchmarks", now)
        if found := PERCENT.match(line):
            self.percent = float(found.group(1))
        if COMMIT.search(line):
            self.commit_number += 1
            self.commit_started.append(now)
            self.phase, self.measured_at = None, None
            self.marks.setdefault("benchmarks", now)

    def read_measuring(self, text: str, now: float) -> bool:
        """One line of the measuring's progress file; whether it was one (a line cut short is not)."""
        try:
            record = json.loads(text)
            name, done, total = str(record["phase"]), int(record["done"]), int(record["total"])
        except (ValueError, KeyError, TypeError):
            return False
        if name == DONE:
            self.phase, self.measured_at, self.measured_percent = None, now, self.percent
            return True
        if self.phase is None or self.phase.name != name:
            self.phase = MeasuringPhase(name, total, now)
            self.measured_at = None
        elif done == 0:  # the phase's first case begins only now (after its compile): its pace counts from here
            self.phase.started_at = now
        self.phase.done, self.phase.updated_at = done, now
        return True

    def _measuring_left(self, now: float) -> float:
        """The measuring's time left in this commit, or all of it when it has not begun."""
        phase = self.phase
        if self.measured_at is not None:
            return 0.0
        # Each phase's prior, in the order the phases run.
        priors = {TIMING: self.cases * PRIOR_TIMING_S, PAIRING: self.cases * PRIOR_PAIRING_S if self.pairing else 0.0,
                  ENERGY: self.energy_s}
        if phase is None or phase.name not in priors:
            return sum(priors.values())
        order = list(priors)
        later = sum(priors[name] for name in order[order.index(phase.name) + 1:])
        prior_each = priors[phase.name] / phase.total if phase.total else 0.0
        weighed = PRIOR_WEIGHT_CASES + phase.done  # the prior's cases and the phase's own
        # Before its first case has ended, the phase's time is its compile (or that case, unfinished): no pace yet.
        own_s = now - phase.started_at if phase.done else 0.0
        each = (PRIOR_WEIGHT_CASES * prior_each + own_s) / weighed if weighed else prior_each
        return max(phase.total - phase.done, 0) * each + later

    def _readers_left(self, now: float) -> float:
        """The time left for this commit's other benchmark processes."""
        per_commit = self.benchmarks / self.commits if self.commits else 0.0
        if not per_commit:
            return 0.0
        end_percent = 100 * max(self.commit_number, 1) / self.commits
        left_share = max(end_percent - self.percent, 0.0) / 100  # of the whole run's benchmarks
        if self.measured_at is not None:
            read = (self.percent - self.measured_percent) / 100 * self.benchmarks
            if read >= MIN_READ_SHARE * per_commit:
                return left_share * self.benchmarks * (now - self.measured_at) / read
            return left_share * self.benchmarks * self.cases * PRIOR_READER_S
        return per_commit * self.cases * PRIOR_READER_S  # the measuring's benchmark, too, reads every case but one

    def left(self, now: float) -> float:
        """Seconds the run has left, as far as can be told now."""
        commits = self.commits or 1
        this_left = self._measuring_left(now) + self._readers_left(now)
        if self.commit_number >= 2:  # the last whole commit: when the one before this began to when this did
            each = self.commit_started[-1] - self.commit_started[-2]
        elif self.commit_number == 1:
            each = now - self.commit_started[0] + this_left
        else:
            each = this_left
        later = max(commits - max(self.commit_number, 1), 0)
        return this_left + later * each

    def parts(self, now: float) -> dict[str, float]:
        """How long each part of the run took so far: the environment (virtualenv and requirements), the project's
        build and the suite's discovery, and the benchmarks."""
        order = [(name, self.marks[name]) for name in ("environment", "discovery", "benchmarks") if name in self.marks]
        ends = [when for _, when in order[1:]] + [now]
        return {name: end - start for (name, start), end in zip(order, ends)}
