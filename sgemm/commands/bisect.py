"""`sgemm bisect` and `sgemm confirm`: the first commit of a step, and a second measurement of a step's two sides,
each commit timed paired against the good end in one process (sgemm.bisect.requests does the work)."""

from __future__ import annotations

import argparse
import sys
from pathlib import Path

from ..bisect.compare import DEFAULT_CONFIDENCE, DEFAULT_MAX_ROUNDS, CompareSchedule, Stopped
from ..bisect.requests import Ask, BisectRequest, ConfirmRequest, InputError, bisect, confirm_all
from ..bisect.search import BisectError, Limits
from ..measuring.record import NoGpuError
from ..rounds.evidence import MIN_ROUNDS
from ..rounds.session import PAIRED_THRESHOLD
from . import EXIT_BAD_INPUT, EXIT_FAILED, EXIT_OK, args as types

# 2, as for bad input: bisect's 1 is "not found", and a search that could not run found nothing either way.
EXIT_NO_ANSWER = EXIT_BAD_INPUT


def _confidence(text: str) -> float:
    value = types.number(text)
    if not 50 <= value < 100:  # NaN too
        raise argparse.ArgumentTypeError(f"a confidence is a percentage from 50 to below 100, got {text!r}")
    return value / 100


def _ends(command) -> None:
    command.add_argument("case", nargs="?", help="the kernel, e.g. fp16/wgmma_grouped_tma_store")
    command.add_argument("--size", type=types.size, help="its square size, e.g. 8192")
    command.add_argument("--good", help="a commit at which it was fast (the step's last good commit)")
    command.add_argument("--bad", help="a later commit at which it was slow")
    command.add_argument("--results", default="results", help="asv results directory; what is written goes under "
                         "RESULTS/MACHINE/ (default: results)")
    command.add_argument("--machine", type=types.machine_name, help="this box's machine name (default: the "
                         "notice's, else from the GPU)")
    command.add_argument("--repo", default=".", help="the repository (default: the current directory)")
    command.add_argument("--threshold", type=types.percent, default=PAIRED_THRESHOLD, metavar="PERCENT",
                         help=f"a step must exceed this, in percent (default {PAIRED_THRESHOLD * 100:g}, "
                         "the gate's for paired cases)")
    command.add_argument("--confidence", type=_confidence, default=DEFAULT_CONFIDENCE, metavar="PERCENT",
                         help=f"of each verdict, in percent (default {DEFAULT_CONFIDENCE * 100:g})")
    command.add_argument("--max-rounds", type=types.rounds, default=DEFAULT_MAX_ROUNDS,
                         help=f"rounds a commit at most, each one process (default {DEFAULT_MAX_ROUNDS}, at least "
                         f"{MIN_ROUNDS})")
    command.add_argument("--budget-s", type=types.finite_above(0, "seconds"),
                         help="wall time allowed, in seconds; UNKNOWN when it runs out")


def add_bisect(add) -> None:
    command = add("bisect", cmd_bisect, "find the first commit at which a case got slower: each commit between the "
                  "good and the bad one timed paired against the good one in one process, round by round; exit 0 "
                  "found, 1 not found (UNKNOWN or NO STEP), 2 no answer: bad input, stopped, or no GPU to measure "
                  "on here", kernels=False)
    _ends(command)
    command.add_argument("--notice", help="bisect this notice of --notices (its machine, first case, last good and "
                         "first bad commit, or its range); CASE and --size pick another of its cases")
    command.add_argument("--notices", help="the notices file (notices.json)")
    command.add_argument("--state", help="where each step is saved, to resume a stopped bisect (default: "
                         "RESULTS/MACHINE/bisect/ID.state.json)")
    command.add_argument("--max-builds", type=types.integer_at_least(2, "--max-builds"),
                         help="commits built at most, the good end included; UNKNOWN when they run out")
    command.add_argument("--skip-other-machine", action="store_true", help="a notice of another machine than "
                         "--machine is nothing to do here (exit 0), not an error")


def add_confirm(add) -> None:
    command = add("confirm", cmd_confirm, "time a step's two sides paired in one process, round by round, and append "
                  "the verdict (DIFFERENT, SAME or UNKNOWN) to RESULTS/MACHINE/confirmations.json: every candidate "
                  "notice of this machine in --notices, or CASE between --good and --bad; exit 0 each recorded, 1 "
                  "some not (each said), 2 none: bad input, stopped, or no GPU to measure on here", kernels=False)
    _ends(command)
    command.add_argument("--notices", help="the notices file (notices.json): confirm its candidates of this machine")


def _ask(args) -> Ask:
    return Ask(args.case, args.size, args.good, args.bad, getattr(args, "notice", None),
               Path(args.notices) if args.notices else None)


def _schedule(args) -> CompareSchedule:
    return CompareSchedule(MIN_ROUNDS, args.max_rounds, args.confidence)


def cmd_bisect(args) -> int:
    limits = Limits(args.threshold, _schedule(args), args.max_builds, args.budget_s)
    request = BisectRequest(Path(args.repo).resolve(), _ask(args), Path(args.results), args.machine,
                            Path(args.state) if args.state else None, limits, args.device, args.skip_other_machine)
    try:
        result, path = bisect(request)
    except (InputError, BisectError, Stopped, NoGpuError) as exc:  # no answer, which 1 (not found) must not read as
        print(f"sgemm bisect: {exc}", file=sys.stderr)
        return EXIT_NO_ANSWER
    if isinstance(result, str):
        print(f"sgemm bisect: {result}", file=sys.stderr)
        return EXIT_OK
    found = result["first_bad"]
    print(f"{result['verdict']}: {result['why']}")
    if found:
        print(f"first bad commit: {found}")
    elif result["remaining"]:
        print("commits that remain: " + " ".join(result["remaining"]))
    print(f"builds: {result['builds']}, wall time: {result['wall_s']:.0f} s"
          + (f" ({result['total_wall_s']:.0f} s with the runs before)" if result["resumed"] else "")
          + f"; written to {path}")
    return EXIT_OK if found else EXIT_FAILED


def cmd_confirm(args) -> int:
    request = ConfirmRequest(Path(args.repo).resolve(), _ask(args), Path(args.results), args.machine, args.threshold,
                             _schedule(args), args.budget_s, args.device)
    try:
        outcome = confirm_all(request)
    except (InputError, BisectError, Stopped, NoGpuError) as exc:
        print(f"sgemm confirm: {exc}", file=sys.stderr)
        return EXIT_NO_ANSWER
    for made in outcome.written:
        print(f"{made['case']} at {made['size']} {made['good'][:12]}..{made['bad'][:12]}: {made['verdict']}, ratio "
              f"{made['ratio']:.4f} ({made['interval'][0]:.4f}–{made['interval'][1]:.4f})")
    print(f"{len(outcome.written)} recorded in {outcome.path}, {len(outcome.already)} decided before"
          + (f", {len(outcome.problems)} not: " + "; ".join(outcome.problems) if outcome.problems else ""))
    return EXIT_FAILED if outcome.problems else EXIT_OK
