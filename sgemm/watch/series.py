"""A machine's history as series: one value per commit per case, in the order the commits landed on the branch.

The value a series follows is the case's time over the reference build with L2 flushed before every launch
(WATCHED_TRACK, asv's `track_time_over_reference_flushed`: the kernel at this commit paired in one process against
the same kernel at the catalogue's `[suite] reference`, which moves with the code and not with the clock, and sees
the L2-locality changes a warm L2 hides) where the history records it, else the median of its rounds' median times
(`track_round_time`). A case's series keeps to one of the two: the ratio wherever the machine has recorded it for the
newest reference (a ratio to another reference is another figure, as asv keeps it apart by version), and the round
medians only for a case that never had the ratio (a library kernel, or a history from before it). The L2-warm
ratio (`track_time_over_reference`, recorded up to the commit that began to flush) is not watched: a series crossing
from one regime to the other would show a step of no code.

Beside each value: the round's median SM clock, the mean power, and the card that measured it, so that a step can
be read against the GPU's state on both sides; and, per run, the driver, CUDA and cuBLAS versions the box recorded.

Commits are ordered as `git rev-list --first-parent` of the configured branch gives them, oldest first: a step
lies between two neighbours of that list, or a range of commits the machine did not measure.
"""

from __future__ import annotations

import json
import math
from dataclasses import dataclass, field
from pathlib import Path

from ..catalogue import Kernel
from ..git import GitError, git
from ..results import asvsuite, resultstree
from ..results.asvsuite import SuiteCase


WATCHED_TRACK = asvsuite.OVER_REFERENCE_FLUSHED


class WatchError(ValueError):
    """The history cannot be read as it stands; the message names the file or commit and why. Nothing was
    written."""


@dataclass(frozen=True)
class SeriesPoint:
    """One commit's figure of one case."""

    commit: str
    position: int  # the commit's index on the branch, oldest 0
    value: float
    sm_clock_mhz: float | None = None
    power_w: float | None = None
    card: int | None = None  # the card number asv recorded (sgemm.measuring.telemetry, first 24 bits of its hash)


@dataclass
class Series:
    case: SuiteCase  # under the kernel's current name
    track: str  # WATCHED_TRACK or asvsuite.ROUND_TIME
    points: list[SeriesPoint] = field(default_factory=list)

    @property
    def values(self) -> list[float]:
        return [point.value for point in self.points]


@dataclass(frozen=True)
class Environment:
    """What the box ran a commit with, as the run recorded it (None where it did not)."""

    driver: float | None = None
    cuda_driver: float | None = None
    cublas: float | None = None

    def differences(self, other: Environment) -> list[str]:
        """What changed from self to other, in words; a figure either side did not record is no change."""
        changed = []
        for name, label, text in (("driver", "driver", asvsuite.driver_text),
                                  ("cuda_driver", "CUDA", asvsuite.cuda_text),
                                  ("cublas", "cuBLAS", asvsuite.cublas_text)):
            before, after = getattr(self, name), getattr(other, name)
            if before is not None and after is not None and before != after:
                changed.append(f"{label} {_version_text(before, text)} to {_version_text(after, text)}")
        return changed


def _version_text(number: float, text) -> str:
    """The version as NVIDIA writes it, or the number itself where it does not read as one."""
    return text(number) or (str(int(number)) if float(number).is_integer() else str(number))


@dataclass
class History:
    machine: str
    gpu_model: str
    commits: list[str]  # the branch, oldest first
    measured: list[str]  # the commits this machine has a run of, in branch order
    series: list[Series]
    environments: dict[str, Environment]
    off_branch: list[str] = field(default_factory=list)  # runs of commits not on the branch: left out, as asv does


def branch_commits(repo: Path, branch: str) -> list[str]:
    """Every commit of `branch` (first parents), oldest first; WatchError when git cannot say."""
    try:
        return git(str(repo), "rev-list", "--first-parent", "--reverse", branch).split()
    except GitError as exc:
        raise WatchError(f"cannot list the commits of {branch!r} in {repo}: {exc} (pass the repository the "
                           "results were measured from, with that branch fetched)") from None


def configured_branch(repo: Path) -> str:
    """The first branch asv.conf.json names (asv draws its history along it), `main` without one."""
    from asv.util import load_json

    try:
        branches = load_json(str(repo / "asv.conf.json"), js_comments=True).get("branches") or ["main"]
    except Exception:  # noqa: BLE001 - asv raises its own errors for a missing or malformed file
        return "main"
    return branches[0]


def _read_runs(results_dir: Path, machine: str) -> list[asvsuite.RunReader]:
    """Every run file of the machine, read as asv reads it; WatchError naming the first that cannot be read,
    where asv itself would warn and leave it out (a history with a commit missing would show a step where none
    is, or hide one)."""
    from asv.results import Results
    from asv.util import UserError

    directory = results_dir / machine
    runs = []
    for path in sorted(directory.glob("*.json")):
        if not resultstree.is_run_file(path):
            continue
        try:
            runs.append(asvsuite.RunReader(Results.load(str(path), machine_name=machine)))
        except (UserError, ValueError, TypeError, KeyError, OSError) as exc:
            raise WatchError(f"{path}: not an asv results file of machine {machine!r} ({exc}); move it aside or "
                               "restore it, nothing was written") from exc
    return runs


def machine_facets(results_dir: Path, machine: str) -> dict:
    path = results_dir / machine / resultstree.MACHINE_FILE
    try:
        facets = json.loads(path.read_text())
    except (OSError, ValueError) as exc:
        raise WatchError(f"{path}: cannot be read as a machine file ({exc})") from exc
    if not isinstance(facets, dict):
        raise WatchError(f"{path}: not a JSON object")
    return facets


def _finite(value) -> float | None:
    return None if value is None or (isinstance(value, float) and math.isnan(value)) else float(value)


def _current_names(kernels: dict[str, Kernel]) -> dict[str, str]:
    """Every name a kernel had, to the name it has now: a renamed kernel's history goes on under its new name."""
    names = {name: name for name in kernels}
    for name, kernel in kernels.items():
        for old in kernel.renamed_from:
            names.setdefault(old, name)
    return names


def _renamed(case: SuiteCase, names: dict[str, str]) -> SuiteCase:
    current = names.get(case.kernel, case.kernel)
    if current == case.kernel:
        return case
    if case.benchmark == asvsuite.GEMM:
        return SuiteCase.square(current, case.params[1])
    return SuiteCase(case.benchmark, (current, case.params[1]))


def read_history(results_dir: Path, machine: str, commits: list[str], kernels: dict[str, Kernel]) -> History:
    """The machine's series along `commits` (the branch, oldest first)."""
    facets = machine_facets(results_dir, machine)
    position = {commit: index for index, commit in enumerate(commits)}
    runs = _read_runs(results_dir, machine)
    # One run a commit: where a machine holds several (environments), the last one read stands.
    by_commit = {run.commit: run for run in runs if run.commit in position}
    off_branch = sorted({run.commit for run in runs} - set(by_commit))
    measured = sorted(by_commit, key=position.__getitem__)
    names = _current_names(kernels)
    newest_reference = _newest_reference_version(by_commit, measured)
    figures: dict[tuple[SuiteCase, str], dict[str, SeriesPoint]] = {}
    environments = {}
    for commit in measured:
        try:
            _read_commit(by_commit[commit], commit, position[commit], names, newest_reference, figures)
        except ValueError as exc:  # a figure that is no number (asvsuite.RunReader.values)
            raise WatchError(f"{results_dir / machine}: {exc}; move the run file aside or restore it, nothing was "
                             "written") from exc
        run = by_commit[commit]
        environments[commit] = Environment(_finite(run.scalar(asvsuite.DRIVER_VERSION)),
                                           _finite(run.scalar(asvsuite.CUDA_DRIVER_VERSION)),
                                           _finite(run.scalar(asvsuite.CUBLAS_VERSION)))
    series = []
    for (case, track), points in sorted(figures.items()):
        if track == asvsuite.ROUND_TIME and (case, WATCHED_TRACK) in figures:
            continue  # the ratio is recorded for this case: its series follows that
        series.append(Series(case, track, sorted(points.values(), key=lambda point: point.position)))
    return History(machine, str(facets.get("gpu") or machine), commits, measured, series, environments, off_branch)


def _read_commit(run: asvsuite.RunReader, commit: str, position: int, names: dict[str, str],
                 newest_reference: dict[str, str],
                 figures: dict[tuple[SuiteCase, str], dict[str, SeriesPoint]]) -> None:
    """Adds one commit's figures of every watched track to `figures`; ValueError for a damaged run file."""
    for benchmark in (asvsuite.GEMM, asvsuite.SHAPES):
        clocks = run.values(benchmark, asvsuite.ROUND_SM_CLOCK)
        powers = run.values(benchmark, asvsuite.POWER)
        cards = run.values(benchmark, asvsuite.CARD)
        tracks = [asvsuite.ROUND_TIME]
        if run.run.benchmark_version.get(f"{asvsuite.MODULE}.{benchmark}.{WATCHED_TRACK}") \
                == newest_reference.get(benchmark):
            tracks.insert(0, WATCHED_TRACK)
        for track in tracks:
            for case, value in run.values(benchmark, track).items():
                if (value := _finite(value)) is None or value <= 0:
                    continue
                card = _finite(cards.get(case))
                point = SeriesPoint(commit, position, value, _finite(clocks.get(case)),
                                    _finite(powers.get(case)), int(card) if card is not None else None)
                # A commit holding both a kernel's old and new name: the new name's figure stands.
                current = _renamed(case, names)
                kept = figures.setdefault((current, track), {})
                if commit not in kept or case == current:
                    kept[commit] = point


def _newest_reference_version(by_commit: dict[str, asvsuite.RunReader], measured: list[str]) -> dict[str, str]:
    """Per benchmark class, the version of its watched time-over-reference track in the newest run that recorded
    one."""
    newest: dict[str, str] = {}
    for commit in measured:
        for benchmark in (asvsuite.GEMM, asvsuite.SHAPES):
            version = by_commit[commit].run.benchmark_version.get(
                f"{asvsuite.MODULE}.{benchmark}.{WATCHED_TRACK}")
            if version is not None:
                newest[benchmark] = version
    return newest
