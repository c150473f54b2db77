"""`sgemm bisect` on a branch with a known culprit: in a scratch clone of HEAD, a branch of --commits commits (16 by
default), of which commit --slow-at (11) makes the TMA-store epilogue of kernels/wgmma_specialized.cu spin about
--percent (1%) longer at 8192 (the edit the history demo's `hopper` scenario makes: tools/acceptance/inject.py), the
others changing documentation only. Then `sgemm bisect fp16/wgmma_grouped_tma_store --size 8192` from the branch's
base (good) to its tip (bad), on this box's GPU, and the check: the first bad commit it names is the slowing one.

    python -m tools.acceptance.bisect_demo OUT [--commits 16] [--slow-at 11] [--percent 1] [--size 8192]
                                               [--budget-s 480] [--max-rounds 6] [--dry-run]  (from the repository root)

OUT receives the clone (OUT/clone-*/clone), the bisect's result (OUT/results/<machine>/bisect/<id>.json), its state
and its log (OUT/bisect.log).
Prints the branch, the bisect's verdict, the builds it made and its wall time. --dry-run makes the branch and prints
the command without running it (no GPU needed).

Exit status: 0 the slowing commit was named; 1 another answer (UNKNOWN, NO STEP, another commit); 2 the demo could
not start.
"""

from __future__ import annotations

import json
import subprocess
import sys
import tempfile
import time
from pathlib import Path

from sgemm.commands import args as types
from sgemm.writable import folder_problem
from tools.acceptance import scenarios
from tools.acceptance.scenarios import HOPPER_PAIR, HOPPER_SOURCE, ROOT, DemoError, Scenario, Slowdown, git
from tools.parser import ToolParser

KERNEL = HOPPER_PAIR[0]


def build_branch(clone: Path, commits: int, slow_at: int, percent: float, size: int
                 ) -> tuple[str, list[tuple[str, str]]]:
    """The branch `main` in a clone of HEAD, made as the history demo makes its own (fixed dates, so the same HEAD
    gives the same hashes): its base, and (hash, subject) of each commit."""
    slowdown = Slowdown(slow_at, HOPPER_PAIR, HOPPER_SOURCE, size, percent)
    scenario = Scenario("bisect", commits, (slowdown,), (), "", 0.0, paired=False)
    made = scenarios.build_branch(clone, scenario, "Bisect")
    return git(clone, "rev-parse", f"main~{commits}"), [(commit.hash, commit.subject) for commit in made]


def main(argv: list[str] | None = None) -> int:
    parser = ToolParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("out", type=Path, help="where the bisect's result, state and log go")
    parser.add_argument("--commits", type=types.integer_at_least(1, "--commits"), default=16,
                        help="commits on the branch (default 16)")
    parser.add_argument("--slow-at", type=types.integer_at_least(1, "--slow-at"), default=11,
                        help="the slowing commit's place, from 1 (default 11)")
    parser.add_argument("--percent", type=types.finite_above(0, "--percent"), default=1.0,
                        help="how much slower it gets (default 1)")
    parser.add_argument("--size", type=types.size, default=8192, help="the square size bisected (default 8192)")
    parser.add_argument("--budget-s", type=types.finite_above(0, "--budget-s"), default=480,
                        help="the bisect's wall time at most (default 480)")
    parser.add_argument("--max-rounds", type=types.rounds, default=6, help="rounds a commit at most (default 6)")
    parser.add_argument("--dry-run", action="store_true", help="make the branch, print the command, run nothing")
    args = parser.parse_args(argv)
    if args.slow_at > args.commits:
        parser.error(f"--slow-at {args.slow_at} is not one of the {args.commits} commits")
    if problem := folder_problem(args.out):
        parser.error(f"{args.out}: {problem}")
    out = args.out.resolve()
    out.mkdir(parents=True, exist_ok=True)
    # In OUT, which the user chose for what the demo leaves: the printed command runs on this clone.
    clone = Path(tempfile.mkdtemp(prefix="clone-", dir=out)) / "clone"
    started = time.monotonic()
    try:
        base, commits = build_branch(clone, args.commits, args.slow_at, args.percent, args.size)
    except DemoError as exc:
        print(f"bisect-demo: {exc}", file=sys.stderr)
        return 2
    culprit = commits[args.slow_at - 1][0]
    print(f"Branch `main` in {clone}, {len(commits)} commits on {base[:8]} ({time.monotonic() - started:.0f} s):")
    for number, (commit, subject) in enumerate(commits, 1):
        print(f"  {number:2} {commit[:8]} {subject}{'  <- the slowing commit' if commit == culprit else ''}")
    command = [sys.executable, "-m", "sgemm", "bisect", KERNEL, "--size", str(args.size), "--good", base,
               "--bad", commits[-1][0], "--repo", str(clone), "--results", str(out / "results"),
               "--budget-s", f"{args.budget_s:g}", "--max-rounds", str(args.max_rounds)]
    print("$ " + " ".join(command[1:]), flush=True)
    if args.dry_run:
        return 0
    began = time.monotonic()
    with open(out / "bisect.log", "w") as log:
        done = subprocess.run(command, check=False, cwd=ROOT, stdout=subprocess.PIPE, stderr=log, text=True)
    wall = time.monotonic() - began
    print(done.stdout.strip())
    results = sorted((out / "results").glob("*/bisect/*.json"))
    results = [path for path in results if not path.name.endswith(".state.json")]
    if done.returncode == 2 or not results:
        tail = (out / "bisect.log").read_text(errors="replace").strip().splitlines()[-3:]
        print(f"bisect-demo: sgemm bisect exited {done.returncode}: {' / '.join(tail)}", file=sys.stderr)
        return 2
    result = json.loads(results[-1].read_text())
    timed = [step for step in result["steps"] if step["rounds"]]
    rounds = sum(len(step["rounds"]) for step in timed)
    print(f"\nverdict {result['verdict']}, first bad {str(result['first_bad'])[:8]} (the slowing commit: "
          f"{culprit[:8]}); step {result['step']['ratio']:.4f}; builds {result['builds']} for {len(commits)} commits "
          f"({len(timed)} timed, {rounds} rounds); bisect wall time {wall:.0f} s; log {out / 'bisect.log'}")
    passed = result["first_bad"] == culprit
    print(f"check: {'PASS' if passed else 'FAIL'}")
    return 0 if passed else 1


if __name__ == "__main__":
    sys.exit(main())
