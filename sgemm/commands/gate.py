"""`sgemm gate` and `sgemm noise`: a change benchmarked at two commits and judged, and the noise the gate judges by."""

from __future__ import annotations

import sys
from pathlib import Path

from ..catalogue import CatalogueError, UnknownKernelError
from ..gate.looks import EXTRA_ROUNDS
from ..gate.run import DEFAULT_MAX_ROUNDS, DEFAULT_ROUNDS
from ..rounds.evidence import MIN_ROUNDS
from ..rounds.session import L2_FLUSHED, L2_MODES
from . import EXIT_BAD_INPUT, EXIT_OK, args as types, writable_file_problem


def add_gate(add) -> None:
    gate = add("gate", cmd_gate, "benchmark what a change can affect at two commits, round by round (base and head "
               "builds side by side in each round's process; where the measuring code changed, each case's launch "
               "compared first, a case launched alike untimed), and judge each case; exit 0 pass, 1 a regression, "
               "2 undecided. It measures "
               "the commits as committed: a working tree with uncommitted changes to kernels/, sgemm/, benchmarks/ "
               "or asv's configuration is refused (commit them and gate that commit, or stash them)", kernels=False)
    gate.add_argument("base", help="the commit the change starts from (e.g. the pull request's base)")
    gate.add_argument("head", help="the commit with the change")
    gate.add_argument("-k", "--kernel", action="append", default=[],
                      help="also measure this kernel or precision, changed or not (repeatable)")
    gate.add_argument("--size", type=types.size, action="append", help="square size, one of the suite's "
                      "(repeatable; default: all of them)")
    gate.add_argument("--threshold", type=types.percent, metavar="PERCENT",
                      help="smallest change in time that counts, in percent (default 0.25 for cases measured paired, "
                      "2 for cases measured unpaired)")
    gate.add_argument("--threshold-for", type=types.threshold_pattern, action="append", default=[],
                      metavar="PATTERN=PERCENT", help="threshold for kernels matching a shell pattern, e.g. "
                      "'fp16/*=4' (repeatable; the last match wins)")
    gate.add_argument("--rounds", type=types.rounds, default=DEFAULT_ROUNDS,
                      help=f"interleaved rounds per commit, at least {MIN_ROUNDS} (default {DEFAULT_ROUNDS})")
    gate.add_argument("--max-rounds", type=types.rounds, default=DEFAULT_MAX_ROUNDS,
                      help=f"rounds per commit for a case whose verdict is still open (default {DEFAULT_MAX_ROUNDS})")
    gate.add_argument("--extra-rounds", type=types.extra_rounds, default=EXTRA_ROUNDS,
                      help=f"rounds past --max-rounds for the few cases still open then (default {EXTRA_ROUNDS}; 0: "
                      "none)")
    gate.add_argument("--noise", type=types.path, help="round-to-round noise of unchanged code, from `sgemm noise` "
                      "(default: noise/MACHINE.json as the base commit has it, if it has one; "
                      "the head's is never read)")
    gate.add_argument("--repo", type=types.path, default=".", help="the repository (default: the current directory)")
    gate.add_argument("--work", type=types.path,
                      help="the gate's asv environments and results, and a paired gate's rounds (default: "
                      "REPO/.asv/gate); a paired gate run again on the same folder reuses the rounds an earlier run "
                      "of the same commits and settings left there and measures only what is missing")
    gate.add_argument("--machine", type=types.machine_name, help="asv machine name (default: from the GPU model)")
    gate.add_argument("--report", type=types.path, help="also write the Markdown report to this file")
    gate.add_argument("--no-sweep", action="store_true", help="square sizes only: leave out seed 003's shape sweep")
    gate.add_argument("--time-unchanged", action="store_true", help="time cases whose base and head builds are one "
                      "program too (an A/A gate), instead of calling them SAME untimed")
    gate.add_argument("--unpaired", action="store_true", help="measure each commit in processes of its own, as when "
                      "the measuring code changed, even where base and head could share a process")
    gate.add_argument("--gpus", type=types.gpu_count, default="1", help="how many of the GPUs this process may use "
                      "(CUDA_VISIBLE_DEVICES, where set) to spread the paired cases over, by cost, each case's rounds "
                      "on one card; 'all' for every one (default 1: --device alone); the cards must be one model")
    gate.add_argument("--l2", choices=L2_MODES, default=L2_FLUSHED, help="paired rounds: L2 flushed before every "
                      "launch, outside the timed events (default), or warm, the builds' inputs left in L2")
    gate.add_argument("--dry-run", action="store_true", help="list the cases the change selects; measure nothing")
    gate.add_argument("--cpu-check", action="store_true", help="with --dry-run: compile both sides of every case on "
                      "this CPU for every architecture the catalogue tracks (NVRTC, no GPU) and say whether anything "
                      "is left for a GPU to time; exit 0 when it could say, 2 when it could not")
    gate.add_argument("--plan", type=types.path, metavar="FILE", help="with --cpu-check: write its answer here as "
                      "JSON (gpu_needed, to_time, each case and why)")


def add_noise(add) -> None:
    noise = add("noise", cmd_noise, "learn each case's round-to-round noise on one machine, for the gate: unpaired "
                "from asv results of unchanged code (the history), paired from paired gates' rounds; or, with "
                "--replay, judge recorded paired gates again under a noise file", kernels=False)
    noise.add_argument("--results", type=types.path, help="asv results directory")
    noise.add_argument("--rounds", type=types.path, action="append",
                       help="a paired gate's work folder (its --work), whose rounds/ "
                       "hold its round ratios (repeatable)")
    noise.add_argument("--machine", required=True, type=types.machine_name, help="asv machine name (with --replay: "
                       "the machine the noise file must be of)")
    noise.add_argument("--repo", type=types.path, default=".", help="the repository (default: the current directory)")
    noise.add_argument("--out", type=types.path, help="the noise file (default: REPO/noise/MACHINE.json)")
    noise.add_argument("--replay", type=types.path, nargs="+", metavar="WORK",
                       help="learn nothing: judge these paired gates' work folders again from the rounds they "
                       "recorded, as the gate would have with --noise, and print what it would have said")
    noise.add_argument("--noise", type=types.path, help="with --replay: the noise file to judge by (default: none, "
                       "each case judged on its rounds alone)")
    noise.add_argument("--leave-one-out", action="store_true", help="with --replay of two gates or more: judge each "
                       "with the paired noise learned from the other gates' rounds")


def cmd_gate(args) -> int:
    from ..gate.plan import Request, gate, input_problem
    from ..gate.run import EXIT_UNDECIDED, GateError, Settings

    problem = input_problem(args.repo, args.kernel, args.size, args.threshold_for, args.rounds, args.max_rounds,
                            args.noise, args.work, args.machine)
    if problem or (args.report and (problem := writable_file_problem("--report", args.report))):
        print(f"sgemm gate: {problem}", file=sys.stderr)
        return EXIT_BAD_INPUT
    if problem := _cpu_check_problem(args):
        print(f"sgemm gate: {problem}", file=sys.stderr)
        return EXIT_BAD_INPUT
    devices: tuple[int, ...] = ()
    if args.gpus != "1" and args.device != 0:
        print(f"sgemm gate: --gpus {args.gpus} takes the first cards this process may use: leave out --device "
              f"{args.device} (CUDA_VISIBLE_DEVICES names the cards)", file=sys.stderr)
        return EXIT_BAD_INPUT
    if args.gpus != "1" and not args.dry_run:
        from ..measuring.cards import CardsError, choose, visible_cards

        try:
            devices = tuple(card.cuda_index for card in choose(visible_cards(), args.gpus))
        except CardsError as exc:
            print(f"sgemm gate: --gpus {args.gpus}: {exc}", file=sys.stderr)
            return EXIT_BAD_INPUT
    request = Request(
        Path(args.repo).resolve(), args.base, args.head, tuple(args.kernel), tuple(args.size or ()), not args.no_sweep,
        Settings(args.threshold, tuple(args.threshold_for), args.rounds, args.max_rounds, args.extra_rounds,
                 time_unchanged=args.time_unchanged, pairing=not args.unpaired, l2=args.l2),
        Path(args.work).resolve() if args.work else None, args.machine, Path(args.report) if args.report else None,
        Path(args.noise) if args.noise else None, args.device, devices)
    try:
        return gate(request, dry_run=args.dry_run, cpu_check=args.cpu_check,
                    cpu_plan=Path(args.plan) if args.plan else None)
    except (GateError, UnknownKernelError, CatalogueError) as exc:
        print(f"sgemm gate: {exc.args[0] if exc.args else exc}", file=sys.stderr)
        return EXIT_UNDECIDED
    except Exception as exc:  # 1 means "a kernel got slower": no other failure may read as that
        print(f"sgemm gate: failed: {type(exc).__name__}: {str(exc).splitlines()[0] if str(exc) else ''}",
              file=sys.stderr)
        return EXIT_UNDECIDED


def _cpu_check_problem(args) -> str | None:
    """What is wrong with --cpu-check and --plan as given, NVRTC's absence included; None when nothing is."""
    if args.cpu_check and not args.dry_run:
        return "--cpu-check goes with --dry-run: it times nothing"
    if args.plan and not args.cpu_check:
        return "--plan goes with --cpu-check: it is where that check writes its answer"
    if args.plan and (problem := writable_file_problem("--plan", args.plan)):
        return problem
    if args.cpu_check:
        from ..gate.cpu_check import nvrtc_problem

        if problem := nvrtc_problem():
            return f"--cpu-check: {problem}: it compiles both sides with NVRTC (the cuda13 extra installs it: " \
                   "scripts/venv.sh)"
    return None


def cmd_noise(args) -> int:
    from ..gate.noise import NoiseFileError, default_path, learn_from, write

    if args.replay or args.noise or args.leave_one_out:
        return cmd_noise_replay(args)
    out = Path(args.out) if args.out else default_path(Path(args.repo), args.machine)
    if args.out and (problem := writable_file_problem("--out", args.out)):
        print(f"sgemm noise: {problem}", file=sys.stderr)
        return EXIT_BAD_INPUT
    try:
        learned = learn_from(Path(args.results) if args.results else None, args.machine,
                             [Path(folder) for folder in args.rounds or []])
        write(out, args.machine, learned.unpaired, learned.runs, learned.paired, learned.gates,
              learned.paired_round)
    except NoiseFileError as exc:
        print(f"sgemm noise: {exc}", file=sys.stderr)
        return EXIT_BAD_INPUT
    except OSError as exc:
        print(f"sgemm noise: cannot write {out}: {exc}", file=sys.stderr)
        return EXIT_BAD_INPUT
    for what, noise, count, unit in (("unpaired", learned.unpaired, learned.runs, "runs"),
                                     ("paired", learned.paired, learned.gates, "gates")):
        if noise:
            sds = sorted(n.sd for n in noise.values())
            print(f"wrote {out}: {what}, {len(noise)} cases from {count} {unit}; round-to-round sd median "
                  f"{sds[len(sds) // 2]:.3%}, largest {sds[-1]:.3%}")
    return EXIT_OK


def cmd_noise_replay(args) -> int:
    """`sgemm noise --replay`: a line a gate (its verdict counts, the median detectable effect, the rounds it would
    have taken), then each case not SAME and each case a look could not judge."""
    import math
    from collections import Counter
    from statistics import median

    from ..gate.replay import ReplayError, replay_gates
    from ..gate.verdict import Verdict

    problem = None
    if not args.replay:
        problem = "--noise and --leave-one-out go with --replay WORK ..."
    elif args.results or args.rounds or args.out:
        problem = "--replay judges recorded gates and writes no noise file: leave out --results, --rounds and --out"
    elif args.leave_one_out and (args.noise or len(args.replay) < 2):
        problem = "--leave-one-out takes two gates or more and no --noise"
    if problem:
        print(f"sgemm noise: {problem}", file=sys.stderr)
        return EXIT_BAD_INPUT
    try:
        replayed = replay_gates([Path(work) for work in args.replay], Path(args.noise) if args.noise else None,
                                args.machine, args.leave_one_out)
    except ReplayError as exc:
        print(f"sgemm noise: {exc}", file=sys.stderr)
        return EXIT_BAD_INPUT
    for gate in replayed:
        counts = Counter(c.verdict.value for c in gate.comparisons)
        detectable = [c.detectable for c in gate.comparisons if math.isfinite(c.detectable)]
        rounds = max((c.case.rounds for c in gate.comparisons), default=0)
        print(f"{gate.work}: {dict(sorted(counts.items()))}; median detectable "
              f"{f'{median(detectable):.3%}' if detectable else 'none'}; up to {rounds} rounds ({gate.noise_source})")
        for c in gate.comparisons:
            if c.verdict is not Verdict.SAME:
                print(f"  {c.label}: {c.verdict.value}, ratio {c.ratio:.4f}, detectable {c.detectable:.3%}, "
                      f"{c.case.rounds} rounds; {c.why}")
        for line in gate.short:
            print(f"  left out: {line}")
    return EXIT_OK
