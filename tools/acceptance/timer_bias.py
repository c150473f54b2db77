"""Is the paired timer biased toward either build? One kernel built twice from one tree (an A/A pair: one program) and
timed paired as a gate's round times it (sgemm.rounds.session.ROUND_SETTINGS: L2 flushed before every launch, the builds
taking the outer places in turn), in PROCESSES separate processes: the mean of the rounds' log ratios must have a 95%
interval that holds 0 and lies within ±BOUND. Each process also reports the share of its counted window the GPU spent
idle between blocks, read from the blocks' events, which must stay under IDLE_SHARE.

Usage, from the repository root, on a GPU box (a few minutes; one line of JSON a case, then the verdict):
    python -m tools.acceptance.timer_bias [--processes 20] [--case fp16/wgmma_grouped_tma_store:8192]
                                          [--case fp32/warptile:4096] [--seconds S] [--gpus N|all]
                                          [--out FILE.json]
--seconds S times each process's round for S seconds instead of until the round's own stopping rule: the same blocks,
flush and places, more pairs. A bias does not shrink with more pairs; the sampling spread of each process does, and
each line's `half_width` (the round's own 95% interval) says how much of the processes' spread is sampling.
--gpus N|all runs N processes at once, each on a card of its own (of one model, those this process may use, as
`sgemm gate --gpus` counts them): the same processes, in a Nth of the time.
Exit status: 0 every case passed; 1 a case was biased or left the GPU idle; 2 it could not run (no GPU, a kernel
that fails). A process is `python -m tools.acceptance.timer_bias --one KERNEL SIZE`, which prints one line of JSON.
"""

from __future__ import annotations

import argparse
import json
import math
import os
import queue
import subprocess
import sys
from concurrent.futures import ThreadPoolExecutor
from dataclasses import asdict, dataclass, replace
from pathlib import Path

from tools.parser import ToolParser

PROCESSES = 20
BOUND = 0.0002  # ±0.02% in log ratio
IDLE_SHARE = 0.01
DEFAULT_CASES = ("fp16/wgmma_grouped_tma_store:8192", "fp32/warptile:4096")
ONE_PROCESS = (sys.executable, "-m", "tools.acceptance.timer_bias", "--one")  # + KERNEL SIZE


@dataclass(frozen=True)
class Verdict:
    case: str
    processes: int
    mean_log_ratio: float
    low: float  # the 95% interval of the mean log ratio
    high: float
    most_idle_share: float
    passed: bool
    why: str


def judge(case: str, log_ratios: list[float], idle_shares: list[float], bound: float = BOUND,
          idle_limit: float = IDLE_SHARE) -> Verdict:
    """The mean log ratio's t interval over the processes, against 0 and ±bound; the idlest process against the
    limit."""
    from scipy import special

    n = len(log_ratios)
    if n < 2:
        return Verdict(case, n, math.nan, -math.inf, math.inf, max(idle_shares, default=math.nan), False,
                       "fewer than two processes measured it")
    mean = sum(log_ratios) / n
    sd = math.sqrt(sum((x - mean) ** 2 for x in log_ratios) / (n - 1))
    half = float(special.stdtrit(n - 1, 0.975)) * sd / math.sqrt(n)
    low, high = mean - half, mean + half
    idle = max(idle_shares, default=0.0)
    problems = []
    if not low <= 0 <= high:
        problems.append(f"the interval {low:+.4%}..{high:+.4%} does not hold 0: a bias")
    if low < -bound or high > bound:
        problems.append(f"the interval {low:+.4%}..{high:+.4%} reaches past ±{bound:.2%}")
    if idle >= idle_limit:
        problems.append(f"a process left the GPU idle {idle:.2%} of its counted window (limit {idle_limit:.0%})")
    return Verdict(case, n, mean, low, high, idle, not problems, "; ".join(problems) or "unbiased within the bound")


def one_process(kernel_name: str, size: int, seconds: float | None = None) -> dict:
    """One round of the A/A pair in this process (`seconds` long where given): its ratio, log ratio, its own
    interval's half width in log ratio, pairs and idle share."""
    from sgemm.catalogue import load_catalogue
    from sgemm.measuring.ab import Build, measure
    from sgemm.measuring.telemetry import CardReadings
    from sgemm.rounds.session import ROUND_SETTINGS

    settings = ROUND_SETTINGS if seconds is None else replace(ROUND_SETTINGS, min_s=seconds, max_s=seconds)
    kernel = load_catalogue()[kernel_name]
    result = measure([Build("base", kernel), Build("head", kernel)], size, size, size, settings, CardReadings.of(0))
    timing = result.timing
    low, high = timing.interval()
    return {"case": f"{kernel_name}:{size}", "ratio": result.ratio(), "log_ratio": math.log(result.ratio()),
            "half_width": (math.log(high) - math.log(low)) / 2, "pairs": timing.pairs,
            "idle_share": timing.idle_share, "method": timing.method,
            # where an idle GPU's time went: the blocks' size, and many short waits or a few stalls
            "launches_per_block": timing.launches_per_block, "counted_s": timing.counted_s,
            "long_gaps": timing.gaps, "longest_gap_s": timing.longest_gap_s}


def run_case(case: str, processes: int, seconds: float | None = None,
             cards: list[str] | None = None) -> tuple[list[dict], str | None]:
    """The case in `processes` processes: one after another on this process's GPU, or, given `cards` (UUIDs), as
    many at once, each on a card of its own. The lines they printed, or why one failed."""
    kernel, _, size = case.partition(":")
    command = [*ONE_PROCESS, kernel, size] + ([] if seconds is None else ["--seconds", str(seconds)])
    free: queue.Queue[str | None] = queue.Queue()
    for card in cards or [None]:
        free.put(card)

    def one(_: int) -> subprocess.CompletedProcess:
        card = free.get()
        try:
            env = None if card is None else dict(os.environ, CUDA_VISIBLE_DEVICES=card)
            return subprocess.run(command, capture_output=True, text=True, env=env)
        finally:
            free.put(card)

    lines = []
    with ThreadPoolExecutor(max_workers=len(cards or [None])) as pool:
        for done in pool.map(one, range(processes)):
            if done.returncode != 0:
                last = (done.stderr.strip().splitlines() or ["no output"])[-1]
                return lines, f"a process exited {done.returncode}: {last}"
            lines.append(json.loads(done.stdout.strip().splitlines()[-1]))
            print(json.dumps(lines[-1]), flush=True)
    return lines, None


def chosen_cards(requested: str) -> list[str] | None:
    """The UUIDs of the cards `--gpus` asks for; None for one (this process's own GPU, as it is set)."""
    if requested == "1":
        return None
    from sgemm.measuring.cards import choose, visible_cards

    return [card.uuid for card in choose(visible_cards(), requested)]


def main(argv: list[str] | None = None) -> int:
    parser = ToolParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--one", nargs=2, metavar=("KERNEL", "SIZE"), help=argparse.SUPPRESS)
    parser.add_argument("--processes", type=int, default=PROCESSES)
    parser.add_argument("--seconds", type=float, help="each process's round this long (default: its stopping rule)")
    parser.add_argument("--gpus", default="1", help="processes at once, each on a card of its own: N or all")
    parser.add_argument("--case", action="append", help="KERNEL:SIZE (repeatable)")
    parser.add_argument("--out", type=Path, help="also write the verdicts here, as JSON")
    args = parser.parse_args(argv)
    if args.one:
        print(json.dumps(one_process(args.one[0], int(args.one[1]), args.seconds)))
        return 0
    cases = args.case or list(DEFAULT_CASES)
    if bad := [case for case in cases if not case.partition(":")[2].isdigit()]:
        print(f"timer_bias: --case {bad[0]}: expected KERNEL:SIZE, e.g. fp32/warptile:4096", file=sys.stderr)
        return 2
    if args.seconds is not None and not args.seconds > 0:
        print(f"timer_bias: --seconds {args.seconds:g}: expected a positive number of seconds", file=sys.stderr)
        return 2
    if not (args.gpus == "all" or args.gpus.isdigit() and int(args.gpus) >= 1):
        print(f"timer_bias: --gpus {args.gpus}: expected a number of GPUs (at least 1) or all", file=sys.stderr)
        return 2
    from sgemm.measuring.cards import CardsError

    try:
        cards = chosen_cards(args.gpus)
    except CardsError as exc:
        print(f"timer_bias: --gpus {args.gpus}: {exc}", file=sys.stderr)
        return 2
    verdicts = []
    for case in cases:
        lines, failed = run_case(case, args.processes, args.seconds, cards)
        if failed:
            print(f"timer_bias: {case}: {failed}", file=sys.stderr)
            return 2
        verdicts.append(judge(case, [line["log_ratio"] for line in lines], [line["idle_share"] for line in lines]))
        print(json.dumps(asdict(verdicts[-1])), flush=True)
    if args.out:
        args.out.write_text(json.dumps([asdict(v) for v in verdicts], indent=1) + "\n")
    return 0 if all(v.passed for v in verdicts) else 1


if __name__ == "__main__":
    sys.exit(main())
