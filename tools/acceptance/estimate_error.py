"""How far `sgemm history`'s estimate of the time left was from the truth, at every line of a run's log.

Each progress line of the history says the time since it began and its estimate ("3.5 min so far, about 1.6 min
left"); its last line says when it really ended ("sgemm history: ended after 309 s"). At every line this prints the
estimate, the time really left and their ratio (the larger over the smaller, so 2.0 is 2x either way), and at the
end how many lines after the first minute were beyond the allowed ratio.

    python -m tools.acceptance.estimate_error HISTORY_LOG [--end-s SECONDS] [--after-s 60] [--allowed 2]

Exit 0 when every line after `--after-s` is within `--allowed`, 1 when one is not, 2 for a log it cannot score.
"""

from __future__ import annotations

import re
import sys
from pathlib import Path

from sgemm.commands.args import finite_at_least
from tools.parser import ToolParser

PROGRESS = re.compile(r"(\d+(?:\.\d+)?) (min|s) so far, about (\d+(?:\.\d+)?) (min|s) left")
ENDED = re.compile(r"sgemm history: ended after (\d+) s")


def _seconds(value: str, unit: str) -> float:
    return float(value) * (60 if unit == "min" else 1)


def score(lines: list[str], end_s: float) -> list[dict]:
    """Every progress line's elapsed time, estimate, real time left and ratio."""
    rows = []
    for number, line in enumerate(lines, 1):
        if found := PROGRESS.search(line):
            elapsed, estimate = _seconds(*found.group(1, 2)), _seconds(*found.group(3, 4))
            real = max(end_s - elapsed, 0.0)
            # A figure shown to 0.1 min (or 1 s) is taken as right within that rounding; the time really left is
            # the end less the elapsed time as shown, and so carries the elapsed figure's rounding too.
            grain = max(3.0 if unit == "min" else 0.5 for unit in found.group(2, 4))
            low, high = max(min(estimate, real), grain), max(estimate, real, grain)
            rows.append({"line": number, "elapsed_s": elapsed, "estimate_s": estimate, "real_left_s": real,
                         "ratio": high / low})
    return rows


def main(argv: list[str] | None = None) -> int:
    parser = ToolParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("log", type=Path, help="the history's log (its standard error)")
    parser.add_argument("--end-s", type=finite_at_least(0, "--end-s"), help="when the run really ended, in seconds "
                        "since it began (default: the log's 'ended after' line)")
    parser.add_argument("--after-s", type=finite_at_least(0, "--after-s"), default=60.0,
                        help="lines before this are shown, not judged")
    parser.add_argument("--allowed", type=finite_at_least(1, "--allowed"), default=2.0,
                        help="the largest ratio allowed (default 2)")
    args = parser.parse_args(argv)
    try:
        lines = args.log.read_text(errors="replace").splitlines()
    except OSError as exc:
        print(f"estimate_error: {args.log}: {exc.strerror or exc}", file=sys.stderr)
        return 2
    end_s = args.end_s
    if end_s is None:
        ends = [float(found.group(1)) for line in lines if (found := ENDED.search(line))]
        if not ends:
            print(f"estimate_error: {args.log} has no 'sgemm history: ended after N s' line: give --end-s",
                  file=sys.stderr)
            return 2
        end_s = ends[-1]
    rows = score(lines, end_s)
    if not rows:
        print(f"estimate_error: {args.log} has no progress line ('... so far, about ... left')", file=sys.stderr)
        return 2
    print(f"{'line':>6} {'elapsed s':>10} {'estimate s':>11} {'real left s':>12} {'ratio':>6}")
    judged = [row for row in rows if row["elapsed_s"] >= args.after_s]
    for row in rows:
        mark = " *" if row in judged and row["ratio"] > args.allowed else ""
        print(f"{row['line']:>6} {row['elapsed_s']:>10.0f} {row['estimate_s']:>11.0f} {row['real_left_s']:>12.0f} "
              f"{row['ratio']:>6.2f}{mark}")
    beyond = [row for row in judged if row["ratio"] > args.allowed]
    worst = max((row["ratio"] for row in judged), default=float("nan"))
    print(f"ended at {end_s:.0f} s; {len(judged)} lines after {args.after_s:.0f} s, worst ratio {worst:.2f}, "
          f"{len(beyond)} beyond {args.allowed:g}x")
    return 1 if beyond else 0


if __name__ == "__main__":
    sys.exit(main())
