"""The work of `sgemm bisect` and `sgemm confirm`: what is asked (a case and two commits, or notices), every input
checked before any GPU work (InputError), the rounds on this box's GPU, and what is written: the bisect's result at
`<results>/<machine>/bisect/<id>.json` (its state beside it unless named), and confirmations appended to
`<results>/<machine>/confirmations.json`.
"""

from __future__ import annotations

import json
import sys
import time
from collections.abc import Callable
from dataclasses import asdict, dataclass, replace
from pathlib import Path

from ..atomic import write_atomically
from ..catalogue import Kernel
from ..results import confirmations, resultstree
from ..results.machine import check_machine_name, machine_name, required_identity
from ..rounds.evidence import Noise
from ..rounds.session import PAIRED_THRESHOLD, ROUND_SETTINGS
from ..words import counted
from ..writable import file_problem, folder_problem, not_a_folder
from .commits import Chain, RangeError, check_ends, first_parent_chain
from .compare import CompareSchedule, PairedBuilds, Unmeasurable
from .confirm import already_decided, confirm
from .search import DEFAULT_SCHEDULE, BisectError, Limits, RoundSource, State, query_of, run_bisect
from .targets import NOTICE_ID, Target, TargetError, candidates, from_notice, identifier, notices_in

DEFAULT_LIMITS = Limits()
# make_source(repo, good, kernel entry, size, device): rounds of that case over the good end on this box's GPU.
SourceMaker = Callable[[Path, str, Kernel, int, int], RoundSource]


class InputError(ValueError):
    """Bad input, found before any GPU work: exit 2 with this one line."""


@dataclass(frozen=True)
class Ask:
    """A case between two commits from the command line, or a notices file (and, for bisect, a notice's id)."""

    case: str | None = None
    size: int | None = None
    good: str | None = None
    bad: str | None = None
    notice: str | None = None
    notices: Path | None = None


@dataclass(frozen=True)
class BisectRequest:
    repo: Path
    ask: Ask
    results: Path
    machine: str | None = None
    state: Path | None = None
    limits: Limits = DEFAULT_LIMITS
    device: int = 0
    skip_other_machine: bool = False


@dataclass(frozen=True)
class BisectPlan:
    target: Target  # the ends as full hashes
    chain: Chain
    kernel: Kernel  # its entry at the bad end
    machine: str
    out: Path
    state: Path


def _command_line_target(ask: Ask, command: str) -> Target:
    given = [name for name, value in (("CASE", ask.case), ("--size", ask.size), ("--good", ask.good),
                                      ("--bad", ask.bad)) if value is not None]
    if len(given) != 4:
        missing = [name for name in ("CASE", "--size", "--good", "--bad") if name not in given]
        # bisect takes one notice by its id; confirm every candidate of the file.
        other = "--notice ID --notices FILE" if command == "bisect" else "--notices FILE alone"
        raise InputError(f"give CASE --size N --good SHA --bad SHA, or {other}: {', '.join(missing)} missing")
    return Target(identifier(ask.case, ask.size, ask.good, ask.bad), ask.case, ask.size, ask.good, ask.bad)


def _checked(repo: Path, target: Target) -> tuple[Target, Kernel]:
    try:
        good, bad, kernel = check_ends(repo, target.good, target.bad, target.case, target.size)
    except RangeError as exc:
        raise InputError(f"{target.label} ({target.source}): {exc}") from None
    return replace(target, good=good, bad=bad), kernel


def _machine_here(device: int) -> str:
    return machine_name(required_identity(device, "give --machine to name this machine"))


def _machine(given: str | None, target: Target | None, device: int) -> str:
    name = given or (target.machine if target else None) or _machine_here(device)
    try:
        return check_machine_name(name)
    except ValueError as exc:
        raise InputError(str(exc)) from None


def _results_folder(results: Path, machine: str) -> Path:
    """The machine's folder of --results, found writable (or makeable) before any build or GPU time."""
    if results.exists() and not results.is_dir():
        raise InputError(f"--results {results} is not a directory")
    if not results.resolve().parent.is_dir():
        parent = results.resolve().parent
        raise InputError(f"--results {results}: the folder {parent} {not_a_folder(parent)}")
    if problem := folder_problem(results / machine):
        raise InputError(f"--results {results}: {problem}")
    return results / machine


def plan_bisect(request: BisectRequest) -> BisectPlan | str:
    """What the bisect will search, and where it writes; a line saying why there is nothing to do here (a notice of
    another machine, with skip_other_machine); InputError for bad input."""
    ask = request.ask
    if ask.notice is not None or ask.notices is not None:
        if ask.notice is None or ask.notices is None:
            raise InputError("--notice and --notices go together")
        if not NOTICE_ID.fullmatch(ask.notice):
            raise InputError(f"--notice {ask.notice!r}: an id is letters, digits, '.', '_' and '-'")
        if ask.good or ask.bad:
            raise InputError("--good and --bad come from the notice: give either them or --notice")
        try:
            target = from_notice(ask.notices, ask.notice, ask.case, ask.size)
        except TargetError as exc:
            raise InputError(str(exc)) from None
        if request.machine and target.machine != request.machine:
            why = f"notice {target.id} is of machine {target.machine}, not {request.machine}"
            if request.skip_other_machine:
                return f"{why}: nothing to bisect on this box"
            raise InputError(f"{why}: bisect it on a box of that machine (its GPU is where the step was seen)")
    else:
        target = _command_line_target(ask, "bisect")
    target, kernel = _checked(request.repo, target)
    try:
        chain = first_parent_chain(request.repo, target.good, target.bad)
    except RangeError as exc:
        raise InputError(str(exc)) from None
    machine = _machine(request.machine, target, request.device)
    machine_dir = _results_folder(request.results, machine)
    out = resultstree.bisect_result(machine_dir, target.id)
    state = request.state or resultstree.bisect_state(machine_dir, target.id)
    if state.is_dir():
        raise InputError(f"--state {state} is a directory: name a file")
    if state.resolve() == out.resolve():
        raise InputError(f"--state {state} is where the result goes: name another file")
    if problem := (file_problem(state) if state.parent.is_dir() else folder_problem(state.parent)):
        raise InputError(f"--state {state}: {problem}")
    return BisectPlan(replace(target, machine=machine), chain, kernel, machine, out, state)


def noise_entry(repo: Path, machine: str, case: str, size: int) -> tuple[Noise | None, str]:
    """The paired noise of the case in the machine's noise file (noise/<machine>.json, as `sgemm noise` writes it),
    when its rounds were timed as bisect's are (its `paired_round` is bisect's round settings); else None and why."""
    path = repo / "noise" / f"{machine}.json"
    try:
        data = json.loads(path.read_text())
        if data.get("paired_round") != asdict(ROUND_SETTINGS):
            return None, f"{path}: its paired noise was learned from rounds timed otherwise than bisect's"
        entry = data["paired"][f"{case} {size}x{size}x{size}"]
        return Noise(float(entry["sd"]), entry["df"]), f"{path}"
    except FileNotFoundError:
        return None, f"no noise file {path}"
    except (OSError, ValueError, KeyError, TypeError, AttributeError) as exc:
        return None, f"{path}: no paired entry for {case} at {size} ({type(exc).__name__})"


def bisect(request: BisectRequest, make_source: SourceMaker | None = None) -> tuple[dict | str, Path]:
    """The bisect from the command line: its result, written to the path returned (or the line saying there was
    nothing to do here). InputError, BisectError; NoGpuError and compare.Stopped from the GPU."""
    chosen = plan_bisect(request)
    if isinstance(chosen, str):
        return chosen, Path()
    limits, noise_said = request.limits, ""
    if limits.pooled and limits.noise is None:
        noise, where = noise_entry(request.repo, chosen.machine, chosen.target.case, chosen.target.size)
        limits = replace(limits, noise=noise)
        noise_said = f"the noise file's entry: {'from ' if noise else 'none: '}{where}"
    state = State.open(chosen.state, query_of(chosen.target, limits))  # BisectError: refused, left alone
    # The GPU before a word of the search: without one (NoGpuError) the command says so alone.
    source = (make_source or PairedBuilds.on_this_gpu)(request.repo, chosen.target.good, chosen.kernel,
                                                       chosen.target.size, request.device)

    def say(text: str) -> None:
        print(f"sgemm bisect: {text}", file=sys.stderr)

    if noise_said:
        say(noise_said)

    say(f"{chosen.target.label}: {counted(len(chosen.chain.commits), 'commit')} after the good end "
        f"{chosen.target.good[:12]} up to the bad end {chosen.target.bad[:12]} (first-parent line); state in "
        f"{chosen.state}")
    try:
        result = run_bisect(chosen.target, chosen.chain, source, state, limits, say)
    finally:
        close = getattr(source, "close", None)
        if close:
            close()
    write_atomically(chosen.out, json.dumps(result, indent=1) + "\n")
    return result, chosen.out


# --- confirm -----------------------------------------------------------------------------------------------------


@dataclass(frozen=True)
class ConfirmRequest:
    repo: Path
    ask: Ask
    results: Path
    machine: str | None = None
    threshold: float = PAIRED_THRESHOLD
    schedule: CompareSchedule = DEFAULT_SCHEDULE
    budget_s: float | None = None
    device: int = 0


@dataclass
class ConfirmOutcome:
    path: Path
    written: list[dict]
    already: list[tuple[Target, dict]]  # decided before, not measured again
    problems: list[str]  # targets that could not be checked or timed, each said


def confirm_all(request: ConfirmRequest, make_source: SourceMaker | None = None,
                say: Callable[[str], None] = lambda text: print(f"sgemm confirm: {text}", file=sys.stderr)
                ) -> ConfirmOutcome:
    """Every candidate measured and its record appended. InputError for bad input (a notice that cannot be used is
    said and left out; the others go on)."""
    ask = request.ask
    problems: list[str] = []
    if ask.notice is not None:
        raise InputError("--notice is for bisect: confirm takes every candidate of --notices, or CASE and the ends")
    if ask.notices is not None:
        if any(value is not None for value in (ask.case, ask.size, ask.good, ask.bad)):
            raise InputError("give --notices alone, or CASE --size --good --bad")
        try:
            notices = notices_in(ask.notices)  # the file's problems are said before the GPU is asked for the machine
            machine = _machine(request.machine, None, request.device)
            asked = candidates(ask.notices, machine, notices)
        except TargetError as exc:
            raise InputError(str(exc)) from None
        targets = []
        for target in asked:
            try:
                targets.append(_checked(request.repo, target))
            except InputError as exc:
                problems.append(str(exc))
                say(f"left out: {exc}")
    else:
        targets = [_checked(request.repo, _command_line_target(ask, "confirm"))]
        machine = _machine(request.machine, None, request.device)
    _results_folder(request.results, machine)
    path = confirmations.path_for(request.results, machine)
    try:
        records = confirmations.read(path)
    except confirmations.ConfirmationsError as exc:
        raise InputError(f"{exc}: nothing was measured, and the file is left as it was") from None
    outcome = ConfirmOutcome(path, [], [], problems)
    to_measure = []
    for target, kernel in targets:
        if done := already_decided(records, target):
            outcome.already.append((target, done))
            say(f"{target.label} {target.good[:12]}..{target.bad[:12]}: already {done['verdict']} "
                f"({done['measured_at']}), not measured again")
        else:
            to_measure.append((target, kernel))
    if not to_measure:
        say(f"nothing to measure ({counted(len(targets), 'candidate')} of {machine})")
        return outcome
    started = time.monotonic()

    def time_left() -> bool:
        return request.budget_s is None or time.monotonic() - started < request.budget_s

    make_source = make_source or PairedBuilds.on_this_gpu
    for target, kernel in to_measure:
        source = make_source(request.repo, target.good, kernel, target.size, request.device)
        try:
            made = confirm(target, source, path, request.threshold, request.schedule, time_left, say)
        except Unmeasurable as exc:
            problems.append(f"{target.label} {target.good[:12]}..{target.bad[:12]}: the bad end cannot be timed: "
                            f"{exc}")
            say(problems[-1])
            made = None
        except confirmations.ConfirmationsError as exc:
            raise BisectError(str(exc)) from None
        finally:
            close = getattr(source, "close", None)
            if close:
                close()
        if made:
            outcome.written.append(made)
        elif not time_left():
            left = [t.label for t, _ in to_measure[to_measure.index((target, kernel)):]]
            problems.append(f"the time allowed ran out: {', '.join(left)} not recorded")
            break
    return outcome
