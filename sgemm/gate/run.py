"""The pull-request gate: measure what a change can affect at both commits, round by round, and judge every case.

How a case is measured depends on what changed (sgemm.gate.changes):
- Paired (sgemm.rounds.session), when the change is confined to kernel sources, headers and catalogue
  entries: each round is one process holding the base and the head build of every case, timed side by side. On an
  H100 at its power cap this sees a 0.5% change that separate processes, 6% apart from one another, cannot.
- Where the code that measures changed, each case's launch is first described by each side's own code
  (sgemm.gate.launches): a case launched alike is SAME untimed; one whose changed launch the gate's own code
  reproduces on both sides is paired; the others are unpaired.
- Unpaired (sgemm.gate.unpaired): each commit measured by its own code, asv continuous, one process per
  commit and round. Judged at a wider default threshold, and at the power cap never called a regression
  (sgemm.gate.verdict). Also every case with --unpaired, or where the kernels cannot be exported side by side.
Rounds go on, look by look, for the cases still open (sgemm.gate.looks), paired and unpaired cases judged as one
family. With several cards (`sgemm gate --gpus`), the paired cases are spread over them by cost, each case's rounds
on one card, the cards' round processes running at once; the whole gate is still judged as one family.

The GPU must be the gate's alone: before every round the gate waits a bounded time for other processes to leave it,
and every measuring process refuses to measure while another is there.

Exit status: 0 no regression; 1 at least one REGRESSION; 2 the gate could not decide: the GPU was shared, a case
failed or stayed AMBIGUOUS or NOT POWERED, a kernel came or went undeclared, or the gate itself failed.
"""

from __future__ import annotations

import math
import sys
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path

from ..results.asvsuite import SuiteCase
from ..rounds.evidence import MIN_ROUNDS, Case, Noise
from ..rounds.pairs import Pair, pairs_for
from ..rounds.session import (IDLE_TIMEOUT_S, L2_FLUSHED, LONGEST_ROUND_S, PAIRED_THRESHOLD, GpuNotFree, PairedSession,
                              PairingError, round_settings, wait_for_gpu)
from .changes import Selection
from .launches import LaunchCompareError, probe_sides
from .looks import EXTRA_ROUNDS, Schedule, run_looks
from .unpaired import NVBENCH_ARGS, UnpairedRounds
from .verdict import Comparison, Verdict, threshold_for

EXIT_PASS, EXIT_REGRESSION, EXIT_UNDECIDED = 0, 1, 2
DEFAULT_ROUNDS = MIN_ROUNDS
DEFAULT_MAX_ROUNDS = 9
UNPAIRED_THRESHOLD = 0.02
PAIRED, UNPAIRED, MIXED = "paired", "unpaired", "paired and unpaired"


class GateError(RuntimeError):
    """The gate cannot run or cannot read what it measured: exit 2, with this message."""


@dataclass(frozen=True)
class Settings:
    """How the gate measures and judges."""

    threshold: float | None = None  # None: PAIRED_THRESHOLD or UNPAIRED_THRESHOLD, by how a case is measured
    patterns: tuple[tuple[str, float], ...] = ()
    rounds: int = DEFAULT_ROUNDS  # before the first look
    max_rounds: int = DEFAULT_MAX_ROUNDS  # for cases whose verdict is still open
    extra_rounds: int = EXTRA_ROUNDS  # past max_rounds, for the few cases still open then
    noise: dict[str, dict[str, Noise]] = field(default_factory=dict)  # method -> case label -> noise
    noise_note: str = ""  # what of the noise file was set aside, and why
    idle_timeout_s: float = IDLE_TIMEOUT_S
    nvbench_args: tuple[str, ...] = NVBENCH_ARGS
    time_unchanged: bool = False  # time cases whose two builds are one program (an A/A gate)
    pairing: bool = True  # False: every case unpaired, as if the measuring code had changed
    l2: str = L2_FLUSHED  # paired rounds: L2 flushed before every launch, or warm

    def threshold_for(self, kernel: str, method: str) -> float:
        default = self.threshold if self.threshold is not None else \
            PAIRED_THRESHOLD if method == PAIRED else UNPAIRED_THRESHOLD
        return threshold_for(kernel, default, list(self.patterns))


@dataclass
class GateResult:
    base: str
    head: str
    machine: str
    selection: Selection
    settings: Settings
    method: str = PAIRED
    unpaired_because: str = ""  # why every timed case is unpaired, where one reason holds for all
    unpaired_cases: dict[str, str] = field(default_factory=dict)  # why a case is unpaired where others are not
    launches_compared: int = 0  # cases whose launch each side's own code described (the measuring code changed)
    comparisons: list[Comparison] = field(default_factory=list)
    unchanged: dict[str, str] = field(default_factory=dict)  # SAME without timing, and why
    failed: dict[str, str] = field(default_factory=dict)  # the case cannot be judged, and why
    not_compared: dict[str, str] = field(default_factory=dict)  # on one side only, or skipped, and why
    shared_gpu: list[str] = field(default_factory=list)
    problems: list[str] = field(default_factory=list)  # why the gate could not decide, beyond the cases
    environment: list[str] = field(default_factory=list)  # what changed on the box between the sides
    rounds: int = 0  # the most rounds any case got
    processes: int = 0  # this run's: a resumed gate's earlier rounds are in `resumed`
    resumed: str = ""  # what of an earlier run's rounds this one took over, and what it set aside
    cards: dict[str, int] = field(default_factory=dict)  # the card each paired case's rounds ran on, where several
    wall_s: float = 0.0

    @property
    def judged(self) -> list[Comparison]:
        return [c for c in self.comparisons if not c.case.is_control]

    @property
    def exit_status(self) -> int:
        if self.shared_gpu:
            return EXIT_UNDECIDED  # nothing measured beside another process can be believed, not even a slowdown
        if any(c.verdict is Verdict.REGRESSION for c in self.judged):
            return EXIT_REGRESSION
        if self.problems or self.failed or self.selection.undeclared:
            return EXIT_UNDECIDED
        if any(c.verdict in (Verdict.AMBIGUOUS, Verdict.NOT_POWERED) for c in self.judged):
            return EXIT_UNDECIDED
        return EXIT_PASS


def _schedule(settings: Settings) -> Schedule:
    return Schedule(settings.rounds, max(settings.rounds, settings.max_rounds), extra_rounds=settings.extra_rounds)


@dataclass
class _Part:
    """The cases one way of measuring times, its measure({label: rounds}) for the looks, and what it hands the result
    once they are over; `plan(comparisons)` hears how its open cases stand after a look."""

    labels: list[str]
    measure: Callable[[dict[str, int]], dict[str, Case]]
    finish: Callable[[], None]
    controls: frozenset[str] = frozenset()
    plan: Callable[[list[Comparison]], None] | None = None


def round_time(comparison: Comparison, shortest_s: float, longest_s: float) -> float:
    """A case's time limit in its next paired rounds, by how far its bounds lie from a decision: the factor f by which
    their reach must shrink to come within the threshold, squared (a round's spread falls with the square root of its
    time), times `shortest_s`, kept between `shortest_s` and `longest_s`. A case near its decision gets the shortest
    round, one far from it (or whose estimate already lies past the threshold) the longest."""
    margin = math.log1p(comparison.case.threshold) - abs(comparison.time.log_ratio)
    reach = comparison.time.reach(comparison.level.alpha)
    if margin <= 0 or not math.isfinite(reach):
        return longest_s
    return min(longest_s, max(shortest_s, shortest_s * (reach / margin) ** 2))


def _paired_part(result: GateResult, repo: Path, pairs: list[Pair], work_dir: Path, devices: list[int], gpu_check,
                 compute_capability: int) -> _Part:
    """PairingError when the two commits' kernels cannot be exported side by side."""
    settings = result.settings
    thresholds = {pair.label: settings.threshold_for(pair.head.kernel, PAIRED) for pair in pairs}
    session = PairedSession(repo, result.base, result.head, pairs, work_dir, devices[0], thresholds,
                            settings.noise.get(PAIRED, {}), lambda: gpu_check(devices[0], settings.idle_timeout_s),
                            round_settings(settings.l2), machine=result.machine, devices=devices,
                            device_check=lambda device: gpu_check(device, settings.idle_timeout_s))
    to_time = []
    for pair in pairs:
        before, after = session.builds(pair.label)
        if before is None or after is None:
            result.not_compared[pair.label] = "new at head" if before is None else "gone at head"
        elif refused := before.shape_problem(*pair.base.shape) or after.shape_problem(*pair.head.shape):
            result.not_compared[pair.label] = refused
        else:
            to_time.append(pair.label)
    if not settings.time_unchanged:
        result.unchanged.update({label: why for label, why in session.unchanged(compute_capability).items()
                                 if label in to_time})
    to_time = [label for label in to_time if label not in result.unchanged]
    if resumed := session.resume(to_time):
        result.resumed = resumed.describe()
        print(f"sgemm gate: resuming: {result.resumed}", file=sys.stderr)

    def finish() -> None:
        result.shared_gpu += session.shared_gpu
        result.failed.update(session.failed)
        result.processes += session.processes
        if len(devices) > 1:
            result.cards = {label: session.card[label] for label in to_time}

    def plan(comparisons: list[Comparison]) -> None:
        session.round_s.update({c.label: round_time(c, session.settings.max_s, LONGEST_ROUND_S) for c in comparisons})

    return _Part(to_time, session.measure, finish, plan=plan)


def _unpaired_part(result: GateResult, repo: Path, pairs: list[Pair], work_dir: Path, device: int, gpu_check,
                   asv_config: Path | None) -> _Part:
    settings = result.settings
    controls = frozenset(pair.label for pair in pairs if pair.head.kernel in result.selection.controls)
    thresholds = {pair.label: settings.threshold_for(pair.head.kernel, UNPAIRED) for pair in pairs}
    session = UnpairedRounds(repo, result.base, result.head, pairs, result.machine, work_dir, thresholds,
                             settings.noise.get(UNPAIRED, {}), controls, settings.nvbench_args, asv_config)

    def measure(wanted: dict[str, int]) -> dict[str, Case]:
        gpu_check(device, settings.idle_timeout_s)
        measured = session.measure(wanted)
        if session.outcome.shared_gpu:
            raise GpuNotFree("; ".join(session.outcome.shared_gpu))
        return measured

    def finish() -> None:
        result.problems += session.problems
        result.failed.update({pair.label: why for pair, why in session.outcome.failed.items()})
        result.not_compared.update({pair.label: why for pair, why in session.outcome.not_compared.items()})
        libraries = {commit: versions for commit, versions in session.outcome.libraries.items() if versions}
        if len(libraries) == 2 and libraries.get(result.base) != libraries.get(result.head):
            result.environment.append(f"the library moved between the sides: "
                                      f"{', '.join(sorted(libraries[result.base]))} at base, "
                                      f"{', '.join(sorted(libraries[result.head]))} at head")
        result.processes += 2 * max(session.done.values(), default=0)  # a process a commit and round

    return _Part([pair.label for pair in pairs], measure, finish, controls)


def _by_launch(result: GateResult, repo: Path, pairs: list[Pair], work_dir: Path, device: int) \
        -> tuple[list[Pair], list[Pair]]:
    """Where the measuring code changed: the pairs to time paired and unpaired, each case's launch compared as each
    side's own code makes it (sgemm.gate.launches); those that launch alike are SAME untimed."""
    selection, settings = result.selection, result.settings
    changed = selection.everything.removeprefix("shared code changed: ")
    try:
        sorting = probe_sides(repo, result.base, result.head, pairs, device, work_dir / "launches", changed,
                              time_equal=settings.time_unchanged)
    except LaunchCompareError as exc:
        result.unpaired_because = f"{selection.everything}, and the launches could not be compared: {exc}"
        return [], pairs
    result.unchanged.update(sorting.untimed)
    result.not_compared.update(sorting.not_compared)
    result.unpaired_cases.update(sorting.unpaired)
    result.launches_compared = len(pairs)
    return ([pair for pair in pairs if pair.label in sorting.paired],
            [pair for pair in pairs if pair.label in sorting.unpaired])


def run_gate(repo: Path, base: str, head: str, selection: Selection, cases: list[SuiteCase], machine: str,
             work_dir: Path, settings: Settings, device: int = 0, gpu_check=wait_for_gpu,
             compute_capability: int = 90, asv_config: Path | None = None,
             devices: list[int] | None = None) -> GateResult:
    """`asv_config`: the asv.conf.json that builds and runs both commits where they are measured unpaired (the
    base commit's, from sgemm.gate.inputs); None: the repository's working tree's. `devices`: the cards the paired
    rounds spread their cases over (default: `device` alone); the unpaired rounds and the launch comparison run on
    the first."""
    devices = list(devices) if devices else [device]
    device = devices[0]
    started = time.monotonic()
    pairs = pairs_for(cases, selection.renamed)
    result = GateResult(base, head, machine, selection, settings)
    if not pairs:
        return result
    work_dir.mkdir(parents=True, exist_ok=True)
    if not settings.pairing:
        result.unpaired_because = "asked for (--unpaired)"
        paired, unpaired = [], pairs
    elif selection.everything:
        paired, unpaired = _by_launch(result, repo, pairs, work_dir, device)
    else:
        paired, unpaired = pairs, []
    parts = []
    if paired:
        try:
            parts.append(_paired_part(result, repo, paired, work_dir / "paired", devices, gpu_check,
                                      compute_capability))
        except PairingError as exc:
            result.unpaired_because = f"the two commits' kernels cannot be built side by side: {exc}"
            paired, unpaired = [], paired + unpaired
    if unpaired:
        parts.append(_unpaired_part(result, repo, unpaired, work_dir / "unpaired", device, gpu_check, asv_config))
    result.method = MIXED if paired and unpaired else UNPAIRED if unpaired else PAIRED
    _judge(result, parts)
    result.wall_s = time.monotonic() - started
    return result


def _judge(result: GateResult, parts: list[_Part]) -> None:
    """Every timed case, of whichever part, judged look by look as one family."""
    labels = [label for part in parts for label in part.labels]
    owner = {label: part for part in parts for label in part.labels}

    def measure(wanted: dict[str, int]) -> dict[str, Case]:
        found: dict[str, Case] = {}
        for part in parts:
            if mine := {label: rounds for label, rounds in wanted.items() if owner[label] is part}:
                found.update(part.measure(mine))
        return found

    def plan(comparisons: list[Comparison]) -> None:
        for part in parts:
            if part.plan:
                part.plan([c for c in comparisons if owner[c.label] is part])

    try:
        outcome = run_looks(labels, measure, _schedule(result.settings),
                            frozenset().union(*(part.controls for part in parts)), plan) if labels else None
    except GpuNotFree as exc:
        result.shared_gpu.append(str(exc))
        outcome = None
    for part in parts:
        part.finish()
    if outcome:
        result.comparisons = list(outcome.comparisons.values())
        result.rounds = outcome.rounds
