"""The history and bisect demos' branches: what each scenario slows where, the branch it is built into (in a scratch
clone of HEAD, a commit at a time, the slowing commits made with tools/acceptance/inject.py), and the record of what
a demo run did, which its archive keeps.
"""

from __future__ import annotations

import json
import os
import subprocess
from dataclasses import asdict, dataclass, field, replace
from pathlib import Path

from sgemm.results import asvsuite
from tools.acceptance import inject

ROOT = Path(__file__).resolve().parents[2]
COMMITTER = {"GIT_AUTHOR_NAME": "history demo", "GIT_AUTHOR_EMAIL": "history-demo@localhost",
             "GIT_COMMITTER_NAME": "history demo", "GIT_COMMITTER_EMAIL": "history-demo@localhost"}
WARPTILE_SOURCE, HOPPER_SOURCE = "kernels/fp32_warptile.cu", "kernels/wgmma_specialized.cu"
HOPPER_PAIR = ("fp16/wgmma_grouped_tma_store", "bf16/wgmma_grouped_tma_store")


@dataclass(frozen=True)
class Slowdown:
    """A commit of the branch that makes kernels sharing one source spin a little longer."""

    at: int  # the commit's place on the branch, counted from 1
    kernels: tuple[str, ...]  # one kernel, or precision twins sharing the code
    source: str  # the file it edits
    size: int  # the square size they are timed at
    percent: float  # about how much slower

    @property
    def subject(self) -> str:
        return f"{' and '.join(self.kernels)}: a spin of about {self.percent:g}% of the time"


@dataclass(frozen=True)
class Scenario:
    """The branch's length, what it slows where, and on which track the checks read it."""

    name: str
    commits: int
    slowdowns: tuple[Slowdown, ...]
    controls: tuple[tuple[str, int], ...]  # (kernel, size), unchanged on the branch: their figures must stay flat
    judged: str  # the track the checks read
    threshold: float  # default regressions_thresholds of the judged track
    paired: bool  # the first commit names the branch's base as [suite] reference, and the runs time against it
    # Made-up figures for `synthetic`: the judged figure's level per kernel (1 where not named: a ratio), and its
    # noise from one commit to the next
    synthetic_levels: tuple[tuple[str, float], ...] = ()
    synthetic_noise: float = 0.0005

    @property
    def cases(self) -> tuple[tuple[str, int], ...]:
        return (*self.controls, *((name, slow.size) for slow in self.slowdowns for name in slow.kernels))

    @property
    def methods(self) -> tuple[str, ...]:
        """The tracks recorded: the judged one, the time and clock of every sample, and what the history's detector
        reads where no paired ratio is recorded (the round's median time) and shows beside a step (the round's
        clock, the power)."""
        return tuple(dict.fromkeys((self.judged, asvsuite.TIME, asvsuite.SM_CLOCK, asvsuite.ROUND_TIME,
                                    asvsuite.ROUND_SM_CLOCK, asvsuite.POWER)))

    @property
    def not_judged(self) -> str:
        """regressions_first_commits' key that turns detection off for every other track: a faster clock is no
        regression, and at the power cap neither is a time the clock moved."""
        return rf".*\.({'|'.join(t for t in asvsuite.TRACKS if t != self.judged)})\("

    def adjusted(self, percent: float | None, size: int | None) -> Scenario:
        """Every slowdown made `percent`% and every case timed at `size`, where given."""
        slowdowns = tuple(replace(slow, percent=slow.percent if percent is None else percent,
                                  size=slow.size if size is None else size) for slow in self.slowdowns)
        controls = tuple((name, own if size is None else size) for name, own in self.controls)
        return replace(self, slowdowns=slowdowns, controls=controls)


SCENARIOS = {
    "warptile": Scenario("warptile", 20, (Slowdown(11, ("fp32/warptile",), WARPTILE_SOURCE, 4096, 3.0),),
                         (("fp32/cublas", 4096), ("fp32/float4", 4096)), asvsuite.TIME, 0.02, False,
                         (("fp32/cublas", 2.66e-3), ("fp32/float4", 3.91e-3), ("fp32/warptile", 5.05e-3)), 0.001),
    "hopper": Scenario("hopper", 20, (Slowdown(11, HOPPER_PAIR, HOPPER_SOURCE, 8192, 1.0),),
                       (("fp16/cublas", 8192), ("fp16/wgmma_cluster", 8192)), asvsuite.OVER_REFERENCE_FLUSHED, 0.005,
                       True),
    "watch": Scenario("watch", 22, (Slowdown(8, HOPPER_PAIR, HOPPER_SOURCE, 8192, 1.0),
                                    Slowdown(15, ("fp32/warptile",), WARPTILE_SOURCE, 4096, 2.0)),
                      (("fp16/cublas", 8192), ("fp16/wgmma_cluster", 8192), ("fp32/float4", 4096)),
                      asvsuite.OVER_REFERENCE_FLUSHED, 0.005, True),
}


# --- A demo run's record ------------------------------------------------------------------------------------------


class DemoError(RuntimeError):
    """The demo cannot start or go on; the message says why."""


@dataclass(frozen=True)
class Commit:
    hash: str
    subject: str


@dataclass
class Demo:
    """What `run` (or `synthetic`) did, as the archive's demo.json keeps it for `confirm` and `publish`."""

    scenario: Scenario
    commits: list[Commit]
    machine: str
    gpu: str
    started: str
    asv_seconds: list[float]
    asv_exit: list[int]
    driver: str = ""
    synthetic: bool = False
    confirm_seconds: float | None = None
    confirm_exit: int | None = None
    notes: list[str] = field(default_factory=list)

    def slowing_commit(self, slow: Slowdown) -> Commit:
        return self.commits[slow.at - 1]

    def save(self, path: Path) -> None:
        path.write_text(json.dumps(asdict(self), indent=1) + "\n")

    @classmethod
    def load(cls, path: Path) -> Demo:
        data = json.loads(path.read_text())
        scenario = data["scenario"]
        scenario["slowdowns"] = tuple(Slowdown(**{**slow, "kernels": tuple(slow["kernels"])})
                                      for slow in scenario["slowdowns"])
        for key in ("controls", "synthetic_levels"):
            scenario[key] = tuple(tuple(pair) for pair in scenario[key])
        data["scenario"] = Scenario(**scenario)
        data["commits"] = [Commit(**commit) for commit in data["commits"]]
        return cls(**data)


# --- The demo branch ---------------------------------------------------------------------------------------------


def git(repo: Path, *args: str, env: dict | None = None) -> str:
    done = subprocess.run(["git", *args], cwd=repo, env=env, capture_output=True, text=True)
    if done.returncode != 0:
        raise DemoError(f"git {' '.join(args)} exited {done.returncode}: {done.stderr.strip()}")
    return done.stdout.strip()


def slow_down(slow: Slowdown, tree: Path) -> None:
    """Make the slowdown's kernels spin on the SM's cycle counter: about `percent`% slower, what they compute
    unchanged."""
    try:
        inject.slow_by_percent(tree, slow.source, slow.percent)
    except inject.InjectError as exc:
        raise DemoError(str(exc)) from None


def name_reference(catalogue: Path, commit: str) -> None:
    """Make `commit` the catalogue's [suite] reference (the line is there, naming another)."""
    text = catalogue.read_text()
    lines = [line for line in text.splitlines() if line.startswith("reference = ")]
    if len(lines) != 1:
        raise DemoError(f"{catalogue} has no single `reference = ...` line in its [suite] table")
    catalogue.write_text(text.replace(lines[0], f'reference = "{commit}"'))


def build_branch(clone: Path, scenario: Scenario, demo_name: str = "History") -> list[Commit]:
    """Clone HEAD into `clone` and commit the scenario's changes on a branch `main` there (asv.conf.json's branch).
    Author, committer and dates are fixed (a minute apart after HEAD's), so the same HEAD gives the same hashes."""
    git(ROOT, "clone", "-q", "--no-hardlinks", str(ROOT), str(clone))
    git(clone, "checkout", "-q", "-B", "main")
    base_time = int(git(clone, "log", "-1", "--format=%ct"))
    base = git(clone, "rev-parse", "HEAD")
    slowing = {slow.at: slow for slow in scenario.slowdowns}
    commits = []
    for number in range(1, scenario.commits + 1):
        if number in slowing:
            slow_down(slowing[number], clone)
            subject = slowing[number].subject
        elif number == 1 and scenario.paired:
            name_reference(clone / "sgemm" / "catalogue.toml", base)
            subject = f"catalogue: the history's reference is {base[:8]}, the branch's base"
        else:
            with open(clone / "README.md", "a") as readme:
                readme.write(f"\n{demo_name} demo: documentation change {number}.\n")
            subject = f"README: documentation change {number}"
        stamp = f"@{base_time + 60 * number} +0000"
        env = dict(os.environ, **COMMITTER, GIT_AUTHOR_DATE=stamp, GIT_COMMITTER_DATE=stamp)
        git(clone, "commit", "-q", "-a", "-m", subject, env=env)
        commits.append(Commit(git(clone, "rev-parse", "HEAD"), subject))
    return commits

