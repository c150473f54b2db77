"""The `sgemm gate` command's work: what a change selects, as cases of the working tree's suite (`plan`); the gate run
on them (sgemm.gate.run); the report printed and written (sgemm.gate.report)."""

from __future__ import annotations

import os
import sys
from dataclasses import asdict, dataclass, replace
from pathlib import Path

from ..results.asvsuite import SuiteCase
from ..rounds.session import round_settings
from ..words import counted
from . import inputs
from .changes import Selection
from .noise import NoiseFileError, read
from .report import markdown
from .run import EXIT_PASS, EXIT_UNDECIDED, GateError, Settings, run_gate


def _cpu_check(request: Request, chosen: GatePlan, cpu_plan: Path | None) -> int:
    from . import cpu_check

    try:
        found = cpu_check.check(request.repo, chosen.base, chosen.head, chosen.selection, chosen.cases,
                                request.settings.time_unchanged, request.settings.pairing)
    except cpu_check.CpuCheckError as exc:
        raise GateError(str(exc)) from exc
    if cpu_plan:
        cpu_check.write(found, cpu_plan)
    for case in found.cases:
        print(f"{case.label}: {case.why}")
    print(f"sgemm gate: {found.line()}", file=sys.stderr)
    return EXIT_UNDECIDED if found.undeclared else EXIT_PASS


def publish_report(text: str, path: Path | None) -> None:
    """Write the report to `path` and append it to the GitHub Actions job summary when there is one."""
    if path:
        path.write_text(text)
    summary = os.environ.get("GITHUB_STEP_SUMMARY")
    if summary:
        with open(summary, "a") as out:
            out.write(text + "\n")


def input_problem(repo_text: str, kernels_asked: list[str], sizes: list[int] | None,
                  threshold_for: list[tuple[str, float]], rounds: int, max_rounds: int, noise: str | None,
                  work: str | None = None, machine: str | None = None) -> str | None:
    """What is wrong with a gate's inputs that the parser cannot see (the repository, kernels, sizes, threshold
    patterns, rounds, noise file (of `machine`, when named) and work folder, as given), found before git, asv or the
    GPU; None when nothing is."""
    from fnmatch import fnmatchcase

    from .. import catalogue
    from ..writable import folder_problem

    repo = Path(repo_text).resolve()
    path = repo / "sgemm" / "catalogue.toml"
    if not path.is_file():
        return f"{repo}: no sgemm/catalogue.toml; run in a checkout of this project or pass --repo"
    kernels = catalogue.load_catalogue(path, repo / "kernels")
    catalogue.select(kernels_asked, kernels)
    suite_sizes = catalogue.default_sizes(path)
    if unknown := [size for size in sizes or [] if size not in suite_sizes]:
        return (f"--size {', '.join(map(str, unknown))}: not among the suite's sizes "
                f"({', '.join(map(str, suite_sizes))}); the gate measures only what the suite has")
    for pattern, _ in threshold_for:
        if not any(fnmatchcase(name, pattern) for name in kernels):
            return f"--threshold-for {pattern!r} matches no kernel in the working tree's catalogue"
    if max_rounds < rounds:
        return f"--max-rounds {max_rounds} is below --rounds {rounds}"
    if noise and not Path(noise).is_file():
        return f"--noise {noise}: no such file"
    if noise:
        try:
            read(Path(noise), machine)
        except NoiseFileError as exc:
            return f"--noise {exc}"
    if work and Path(work).exists() and not Path(work).is_dir():
        return f"--work {work}: not a directory"
    if work and Path(work).resolve().is_relative_to(repo / ".git"):
        return f"--work {work} lies inside the repository's .git: put it elsewhere"
    if work and (problem := folder_problem(Path(work).resolve())):
        return f"--work {work}: {problem}"
    return uncommitted_problem(repo)


# What the gate's measurement reads from the working tree or from the commits: the kernels, the package (the
# catalogue and the measuring code), the asv suite and how asv builds it. An edit elsewhere (documentation) changes
# nothing the gate measures.
MEASURED_PATHS = ("kernels", "sgemm", "benchmarks", "asv.conf.json", "pyproject.toml")
NAMED_AT_MOST = 3


def uncommitted_problem(repo: Path) -> str | None:
    """The gate compares two commits as committed, so an edit not committed is in neither, and a developer gating it
    would be told about commits that do not hold it: what the working tree holds uncommitted of MEASURED_PATHS, said
    as a refusal; None for a clean tree (or no git repository, which resolving the commits then says)."""
    import subprocess

    # --no-optional-locks: a look that leaves the index as it was (`git status` otherwise refreshes it).
    done = subprocess.run(["git", "--no-optional-locks", "-C", str(repo), "status", "--porcelain", "-z",
                           "--untracked-files=all", "--", *MEASURED_PATHS], capture_output=True, text=True)
    if done.returncode != 0:
        return None
    # Each entry is "XY path"; a rename's or copy's entry is followed by its old path, another NUL-ended field.
    fields, changed = done.stdout.split("\0"), []
    while fields and fields[0]:
        entry = fields.pop(0)
        changed.append(entry[3:])
        if entry[0] in "RC":
            fields.pop(0)
    if not changed:
        return None
    named = ", ".join(changed[:NAMED_AT_MOST]) + (f" and {len(changed) - NAMED_AT_MOST} more"
                                                 if len(changed) > NAMED_AT_MOST else "")
    return (f"uncommitted changes to what the gate measures ({named}): the gate measures the two commits as "
            "committed, and these are in neither; commit them and gate that commit, or stash them")


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
    devices: tuple[int, ...] = ()  # the cards to spread the paired cases over (--gpus); empty: `device` alone


@dataclass(frozen=True)
class GatePlan:
    base: str  # full hashes
    head: str
    selection: Selection
    cases: list[SuiteCase]


def plan(request: Request) -> GatePlan:
    """What the change selects, as cases of the working tree's suite. GateError when git or the catalogue cannot say,
    or when kernels or sizes asked for select no case."""
    from .. import catalogue
    from ..git import GitError, resolve_commit
    from ..results import asvsuite
    from .changes import select_kernels

    repo = str(request.repo)
    try:
        base, head = resolve_commit(repo, request.base), resolve_commit(repo, request.head)
        if base == head:
            raise GateError(f"{request.base} and {request.head} are the same commit: nothing to compare")
        selection = select_kernels(repo, base, head)
        checked_out = resolve_commit(repo, "HEAD")
    except GitError as exc:  # a ChangeError too: a commit whose catalogue cannot be read
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
    return GatePlan(base, head, selection, cases)


def describe(chosen: GatePlan, settings: Settings) -> list[str]:
    """What the gate will do, before it does it: the dry run's answer and the gate's first lines."""
    selection = chosen.selection
    why = selection.everything or "; ".join(f"{name}: {reason}" for name, reason in selection.reasons.items())
    method = ("unpaired (--unpaired)" if not settings.pairing else
              f"by launch, as {selection.everything}: each case's launch is first described by base's and head's own "
              "code on the GPU; a case launched alike is SAME untimed, one the gate's code launches as each side does "
              "is paired, the others unpaired" if selection.everything else
              "paired: base and head builds side by side in each round's process")
    lines = [f"{chosen.base[:12]} -> {chosen.head[:12]}: {counted(len(chosen.cases), 'case')} of "
             f"{counted(len(selection.kernels), 'kernel')} ({why or 'nothing to measure'})"]
    if chosen.cases:
        lines.append(f"measured {method}")
    lines += [f"not measured, not declared: {message}" for message in selection.undeclared]
    return lines


def gate(request: Request, dry_run: bool = False, cpu_check: bool = False, cpu_plan: Path | None = None) -> int:
    """The gate from the command line: plan, measure, judge, report. Returns the exit status. A dry run lists the
    cases; with `cpu_check`, it also compiles both sides of each on this CPU and says whether anything is left for a
    GPU to time (sgemm.gate.cpu_check), into `cpu_plan` when given."""
    from ..results.machine import detect_identity, machine_entry, machine_name, write_machine_file

    chosen = plan(request)
    for line in describe(chosen, request.settings):
        print(f"sgemm gate: {line}", file=sys.stderr)
    if dry_run and cpu_check:
        return _cpu_check(request, chosen, cpu_plan)
    if dry_run:
        for case in chosen.cases:
            print(case.label)
        return EXIT_UNDECIDED if chosen.selection.undeclared else EXIT_PASS
    identity = detect_identity(request.device) if chosen.cases else None
    if chosen.cases and identity is None:
        raise GateError("no GPU found through NVML: nothing can be measured here")
    machine = request.machine or (machine_name(identity) if identity else "no-gpu")
    settings = request.settings
    work_dir = request.work_dir or request.repo / ".asv" / "gate"
    # How the commits are built and what counts as noise: the base commit's, never the working tree's (the head's).
    try:
        judged_by = inputs.export(request.repo, chosen.base, machine, work_dir / "judge")
    except inputs.JudgeInputsError as exc:
        raise GateError(str(exc)) from exc
    print(f"sgemm gate: asv.conf.json and the noise file from base {chosen.base[:12]}"
          f"{'' if judged_by.noise_file else f' (which has no noise/{machine}.json)'}", file=sys.stderr)
    noise_file = request.noise_file or judged_by.noise_file
    if chosen.cases and noise_file:
        try:
            noise, set_aside = read(noise_file, machine, asdict(round_settings(settings.l2)))
        except NoiseFileError as exc:
            raise GateError(str(exc)) from exc
        settings = replace(settings, noise=noise, noise_note=set_aside or "")
        if set_aside:
            print(f"sgemm gate: {set_aside}", file=sys.stderr)
    if identity:
        write_machine_file(machine_entry(identity, machine))  # asv asks interactively for a machine it does not know
    result = run_gate(request.repo, chosen.base, chosen.head, chosen.selection, chosen.cases, machine, work_dir,
                      settings, request.device, compute_capability=identity.compute_capability if identity else 90,
                      asv_config=judged_by.asv_config, devices=list(request.devices) or None)
    gpu_line = (f"{identity.name}, compute capability {identity.compute_capability_text}, driver {identity.driver}, "
                f"max SM clock {identity.max_sm_clock_mhz:.0f} MHz") if identity else "not used"
    text = markdown(result, gpu_line)
    print(text)
    publish_report(text, request.report)
    return result.exit_status
