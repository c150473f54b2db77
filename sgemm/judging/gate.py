"""The pull-request gate: measure what a change can affect at both commits, round by round, and judge every case.

How a case is measured depends on what changed (sgemm.judging.changes):
- Paired (sgemm.judging.paired_rounds), when the change is confined to kernel sources, headers and catalogue
  entries: each round is one process holding the base and the head build of every case, timed side by side. On an
  H100 at its power cap this sees a 0.5% change that separate processes, 6% apart from one another, cannot.
- Unpaired (sgemm.judging.unpaired_rounds), when the code that measures changed, so that each commit must be
  measured by its own: asv continuous, one process per commit and round. Judged at a wider default threshold, and
  at the power cap never called a regression (sgemm.judging.verdict).
Rounds go on, look by look, for the cases still open (sgemm.judging.looks).

The GPU must be the gate's alone: before every round the gate waits a bounded time for other processes to leave it,
and every measuring process refuses to measure while another is there.

Exit status: 0 no regression; 1 at least one REGRESSION; 2 the gate could not decide: the GPU was shared, a case
failed or stayed AMBIGUOUS or NOT POWERED, a kernel came or went undeclared, or the gate itself failed.
"""

from __future__ import annotations

import os
import sys
import time
from dataclasses import dataclass, field, replace
from pathlib import Path

from ..asvsuite import SuiteCase
from .changes import Selection
from .looks import Schedule, run_looks
from .paired_rounds import PairedSession, PairingError
from .unpaired_rounds import NVBENCH_ARGS, Pair, UnpairedRounds, pairs_for
from .verdict import MIN_ROUNDS, Comparison, Noise, Verdict, threshold_for

EXIT_PASS, EXIT_REGRESSION, EXIT_UNDECIDED = 0, 1, 2
DEFAULT_ROUNDS = MIN_ROUNDS
DEFAULT_MAX_ROUNDS = 9
# What a change must exceed to count: a paired ratio is precise to about 0.05% (so a 0.5% change clears 0.25% with
# room), a ratio of separate processes to a few tenths of a percent below the power cap.
PAIRED_THRESHOLD = 0.0025
UNPAIRED_THRESHOLD = 0.02
IDLE_TIMEOUT_S = 30  # how long the gate waits for another process to leave the GPU before it gives up
PAIRED, UNPAIRED = "paired", "unpaired"


class GateError(RuntimeError):
    """The gate cannot run or cannot read what it measured: exit 2, with this message."""


@dataclass(frozen=True)
class Settings:
    """How the gate measures and judges."""

    threshold: float | None = None  # None: PAIRED_THRESHOLD or UNPAIRED_THRESHOLD, by how a case is measured
    patterns: tuple[tuple[str, float], ...] = ()
    rounds: int = DEFAULT_ROUNDS  # before the first look
    max_rounds: int = DEFAULT_MAX_ROUNDS  # for cases whose verdict is still open
    noise: dict[str, dict[str, Noise]] = field(default_factory=dict)  # method -> case label -> noise
    idle_timeout_s: float = IDLE_TIMEOUT_S
    nvbench_args: tuple[str, ...] = NVBENCH_ARGS
    time_unchanged: bool = False  # time cases whose two builds are one program (an A/A gate)
    pairing: bool = True  # False: every case unpaired, as if the measuring code had changed

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
    unpaired_because: str = ""  # why the cases could not be paired
    comparisons: list[Comparison] = field(default_factory=list)
    unchanged: dict[str, str] = field(default_factory=dict)  # SAME without timing, and why
    failed: dict[str, str] = field(default_factory=dict)  # the case cannot be judged, and why
    not_compared: dict[str, str] = field(default_factory=dict)  # on one side only, or skipped, and why
    shared_gpu: list[str] = field(default_factory=list)
    problems: list[str] = field(default_factory=list)  # why the gate could not decide, beyond the cases
    environment: list[str] = field(default_factory=list)  # what changed on the box between the sides
    rounds: int = 0  # the most rounds any case got
    processes: int = 0
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


def wait_for_gpu(device: int, timeout_s: float) -> None:
    """Return when no other process is on the GPU; GateError naming them after `timeout_s`."""
    from ..measuring.telemetry import GpuBusyError, TelemetryUnavailable, nvml_handle, wait_until_idle

    try:
        handle = nvml_handle(device)
    except TelemetryUnavailable as exc:
        raise GateError(f"cannot check that the GPU is free: {exc}") from exc
    try:
        wait_until_idle(handle, timeout_s, own_pids=frozenset({os.getpid()}))
    except GpuBusyError as exc:
        raise GateError(str(exc)) from exc


def _schedule(settings: Settings) -> Schedule:
    return Schedule(settings.rounds, max(settings.rounds, settings.max_rounds))


def _run_paired(result: GateResult, repo: Path, pairs: list[Pair], work_dir: Path, device: int, gpu_check,
                compute_capability: int) -> None:
    settings = result.settings
    thresholds = {pair.label: settings.threshold_for(pair.head.kernel, PAIRED) for pair in pairs}
    session = PairedSession(repo, result.base, result.head, pairs, work_dir, device, thresholds,
                            settings.noise.get(PAIRED, {}), lambda: gpu_check(device, settings.idle_timeout_s))
    to_time = []
    for pair in pairs:
        before, after = session.builds(pair.label)
        if before is None or after is None:
            result.not_compared[pair.label] = "new at head" if before is None else "gone at head"
        elif before.shape_problem(*pair.base.shape) or after.shape_problem(*pair.head.shape):
            result.not_compared[pair.label] = (before.shape_problem(*pair.base.shape)
                                               or after.shape_problem(*pair.head.shape))
        else:
            to_time.append(pair.label)
    if not settings.time_unchanged:
        result.unchanged = {label: why for label, why in session.unchanged(compute_capability).items()
                            if label in to_time}
    to_time = [label for label in to_time if label not in result.unchanged]
    try:
        outcome = run_looks(to_time, session.measure, _schedule(settings)) if to_time else None
    except GateError as exc:
        result.shared_gpu.append(str(exc))
        outcome = None
    result.shared_gpu += session.shared_gpu
    result.failed.update(session.failed)
    result.processes = session.processes
    if outcome:
        result.comparisons = list(outcome.comparisons.values())
        result.rounds = outcome.rounds


def _run_unpaired(result: GateResult, repo: Path, pairs: list[Pair], work_dir: Path, device: int, gpu_check) -> None:
    settings = result.settings
    controls = frozenset(pair.label for pair in pairs if pair.head.kernel in result.selection.controls)
    thresholds = {pair.label: settings.threshold_for(pair.head.kernel, UNPAIRED) for pair in pairs}
    session = UnpairedRounds(repo, result.base, result.head, pairs, result.machine, work_dir, thresholds,
                             settings.noise.get(UNPAIRED, {}), controls, settings.nvbench_args)

    def measure(labels: list[str], rounds: int):
        gpu_check(device, settings.idle_timeout_s)
        measured = session.measure(labels, rounds)
        if session.outcome.shared_gpu:
            raise GateError("; ".join(session.outcome.shared_gpu))
        return measured

    try:
        outcome = run_looks([pair.label for pair in pairs], measure, _schedule(settings), controls)
    except GateError as exc:
        result.shared_gpu.append(str(exc))
        outcome = None
    result.problems += session.problems
    result.failed.update({pair.label: why for pair, why in session.outcome.failed.items()})
    result.not_compared.update({pair.label: why for pair, why in session.outcome.not_compared.items()})
    libraries = {commit: versions for commit, versions in session.outcome.libraries.items() if versions}
    if len(libraries) == 2 and libraries.get(result.base) != libraries.get(result.head):
        result.environment.append(f"the library moved between the sides: {', '.join(sorted(libraries[result.base]))}"
                                  f" at base, {', '.join(sorted(libraries[result.head]))} at head")
    if outcome:
        result.comparisons = list(outcome.comparisons.values())
        result.rounds = outcome.rounds
        result.processes = 2 * outcome.rounds


def run_gate(repo: Path, base: str, head: str, selection: Selection, cases: list[SuiteCase], machine: str,
             work_dir: Path, settings: Settings, device: int = 0, gpu_check=wait_for_gpu,
             compute_capability: int = 90) -> GateResult:
    started = time.monotonic()
    pairs = pairs_for(cases, selection.renamed)
    result = GateResult(base, head, machine, selection, settings)
    if not pairs:
        return result
    work_dir.mkdir(parents=True, exist_ok=True)
    if selection.everything:
        result.unpaired_because = selection.everything
    elif not settings.pairing:
        result.unpaired_because = "asked for (--unpaired)"
    if not result.unpaired_because:
        try:
            _run_paired(result, repo, pairs, work_dir / "paired", device, gpu_check, compute_capability)
        except PairingError as exc:
            result.unpaired_because = f"the two commits' kernels cannot be built side by side: {exc}"
            result = replace(result, unchanged={}, not_compared={}, failed={})
    if result.unpaired_because:
        result.method = UNPAIRED
        _run_unpaired(result, repo, pairs, work_dir / "unpaired", device, gpu_check)
    result.wall_s = time.monotonic() - started
    return result


def publish_report(text: str, path: Path | None) -> None:
    """Write the report to `path` and append it to the GitHub Actions job summary when there is one."""
    if path:
        path.write_text(text)
    summary = os.environ.get("GITHUB_STEP_SUMMARY")
    if summary:
        with open(summary, "a") as out:
            out.write(text + "\n")


# --- From the command line --------------------------------------------------------------------------------------


@dataclass(frozen=True)
class Request:
    """A gate as asked for on the command line."""

    repo: Path
    base: str  # revisions, resolved by `plan`
    head: str
    kernels: tuple[str, ...] = ()  # more kernels or precisions to measure, changed or not
    sizes: tuple[int, ...] = ()  # default: the suite's
    sweep: bool = True  # also seed 003's shape sweep, for the kernels it covers
    settings: Settings = Settings()
    work_dir: Path | None = None
    machine: str | None = None
    report: Path | None = None
    noise_file: Path | None = None
    device: int = 0


@dataclass(frozen=True)
class Plan:
    base: str  # full hashes
    head: str
    selection: Selection
    cases: list[SuiteCase]


def plan(request: Request) -> Plan:
    """What the change selects, as cases of the working tree's suite. GateError when git or the catalogue cannot say,
    or when kernels or sizes asked for select no case."""
    from .. import asvsuite, catalogue
    from .changes import ChangeError, resolve_commit, select_kernels

    repo = str(request.repo)
    try:
        base, head = resolve_commit(repo, request.base), resolve_commit(repo, request.head)
        if base == head:
            raise GateError(f"{request.base} and {request.head} are the same commit: nothing to compare")
        selection = select_kernels(repo, base, head)
        checked_out = resolve_commit(repo, "HEAD")
    except ChangeError as exc:
        raise GateError(str(exc)) from exc
    if checked_out != head:
        print(f"sgemm gate: warning: the suite's parameters come from the working tree at {checked_out[:12]}, "
              f"not from head {head[:12]}: check out head to measure every kernel it has", file=sys.stderr)
    # The suite runs with the working tree's catalogue: only its kernels, sizes and shapes exist as benchmarks.
    path = request.repo / "sgemm" / "catalogue.toml"
    kernels = catalogue.load_catalogue(path, request.repo / "kernels")
    if request.kernels:
        asked = {k.name: "asked for" for k in catalogue.select(list(request.kernels), kernels)}
        selection = replace(selection, reasons={**asked, **selection.reasons},
                            kernels=tuple(n for n in kernels if n in asked or n in selection.kernels))
    missing = [name for name in selection.kernels if name not in kernels]
    if missing:
        selection = replace(selection, undeclared=selection.undeclared + tuple(
            f"`{name}` is not in the working tree's catalogue: not measured" for name in missing))
    sweep_kernels, sweep_shapes = catalogue.sweep(path) if request.sweep else ([], [])
    cases = asvsuite.cases_for([kernels[n] for n in selection.kernels if n in kernels], list(request.sizes) or None,
                               sweep_kernels, sweep_shapes, selection.controls)
    if request.kernels and not [c for c in cases if c.kernel in {k.name for k in catalogue.select(
            list(request.kernels), kernels)}]:
        asked_sizes = f" at {', '.join(map(str, request.sizes))}" if request.sizes else ""
        raise GateError(f"-k {' -k '.join(request.kernels)}{asked_sizes}: no case of the suite measures that "
                        f"(each kernel is timed at the sizes its catalogue entry lists)")
    return Plan(base, head, selection, cases)


def describe(chosen: Plan, settings: Settings) -> list[str]:
    """What the gate will do, before it does it: the dry run's answer and the gate's first lines."""
    selection = chosen.selection
    why = selection.everything or "; ".join(f"{name}: {reason}" for name, reason in selection.reasons.items())
    method = (f"unpaired: {selection.everything}" if selection.everything else
              "unpaired (--unpaired)" if not settings.pairing else
              "paired: base and head builds side by side in each round's process")
    lines = [f"{chosen.base[:12]} -> {chosen.head[:12]}: {len(chosen.cases)} cases of {len(selection.kernels)} "
             f"kernels ({why or 'nothing to measure'})"]
    if chosen.cases:
        lines.append(f"measured {method}")
    lines += [f"not measured, not declared: {message}" for message in selection.undeclared]
    return lines


def gate(request: Request, dry_run: bool = False) -> int:
    """The gate from the command line: plan, measure, judge, report. Returns the exit status."""
    from ..machine import detect_identity, machine_entry, machine_name, write_machine_file
    from .noise import NoiseFileError, default_path, read
    from .report import markdown

    chosen = plan(request)
    for line in describe(chosen, request.settings):
        print(f"sgemm gate: {line}", file=sys.stderr)
    if dry_run:
        for case in chosen.cases:
            print(case.label)
        return EXIT_UNDECIDED if chosen.selection.undeclared else EXIT_PASS
    identity = detect_identity(request.device) if chosen.cases else None
    if chosen.cases and identity is None:
        raise GateError("no GPU found through NVML: nothing can be measured here")
    machine = request.machine or (machine_name(identity) if identity else "no-gpu")
    settings = request.settings
    noise_file = request.noise_file or default_path(request.repo, machine)
    if chosen.cases and (request.noise_file or noise_file.exists()):
        try:
            settings = replace(settings, noise=read(noise_file, machine))
        except NoiseFileError as exc:
            raise GateError(str(exc)) from exc
    if identity:
        write_machine_file(machine_entry(identity, machine))  # asv asks interactively for a machine it does not know
    work_dir = request.work_dir or request.repo / ".asv" / "gate"
    result = run_gate(request.repo, chosen.base, chosen.head, chosen.selection, chosen.cases, machine, work_dir,
                      settings, request.device, compute_capability=identity.compute_capability if identity else 90)
    gpu_line = (f"{identity.name}, compute capability {identity.compute_capability_text}, driver {identity.driver}, "
                f"max SM clock {identity.max_sm_clock_mhz:.0f} MHz") if identity else "not used"
    text = markdown(result, gpu_line)
    print(text)
    publish_report(text, request.report)
    return result.exit_status
