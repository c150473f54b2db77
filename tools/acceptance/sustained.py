"""Kernels against their precision's cuBLAS under sustained load, as the power cap holds the card, over several
processes: the measurement a Hopper step past cuBLAS is judged by.

At the 700 W cap a kernel's clock, and so its time, moves by several percent from one process to the next; one
`sgemm bench` is one draw. Here each of --processes processes, one after another on one GPU, does:
- NVBench, L2 flushed before every launch, cuBLAS and each kernel in turn, each case for at least --seconds of
  timed launches (NVBench's --min-time): the card is under load throughout, and the case's monitor reads the time
  NVML says the driver held the clocks down for power;
- then cuBLAS and every kernel paired in one session of the process (sgemm.measuring.ab, L2 flushed), after
  --seconds of paired warm-up: each kernel's ratio over cuBLAS, and so one kernel's over another's, is read from
  the same blocks of launches, whatever the card's temperature did meanwhile.
Every second process takes the cases in the reverse order (the kernels last to first, then cuBLAS; the paired
builds likewise), so that a card warming through a process, which lowers its clock at the cap, favours no kernel
over the processes (exactly so with an even number of them). Per process and kernel: % of cuBLAS by NVBench (the two
medians of that process) and paired (with its interval), the median SM clock, and whether the power cap held the
clocks for the whole of the case's window (NVML's power-violation time against the wall time it was counted over,
warm-up and flushes included). Across the processes: the median of each figure, a 95% t-interval of the logarithms
of the processes' figures, and the range; and, with two kernels or more, every kernel after the first over the first,
process by process (by NVBench, and paired: the ratio of their paired % of cuBLAS, from the same session), with the
same interval: what one step bought over another. Each kernel is checked against FP64 in each process before it is timed
(NVBench's and the paired timer's checks). With --json, every finished process's figures are written as it ends.

Usage, from the repository root (on a GPU box):
    python -m tools.acceptance.sustained KERNEL [KERNEL ...] --size N [--processes 5] [--seconds 10] [--device 0]
        [--json FILE]
(the kernels of one precision; each process's figures are printed as they come, the summary at the end)."""

from __future__ import annotations

import argparse
import json
import math
import signal
import subprocess
import sys
from dataclasses import replace
from statistics import fmean, median, stdev

from sgemm.commands.args import finite, integer_at_least
from tools.parser import ToolParser

EXIT_BAD_INPUT = 2
# The power cap held the clocks "throughout" a case when NVML's power-violation time covers this share of the
# window it was counted over (the case's monitor, from its start to the next case: warm-up, flushes and gaps
# between launches included), not merely of the launches' own GPU time, which is shorter.
CAPPED_SHARE = 0.95


def _problem(args) -> str | None:
    """Why the arguments cannot be measured, said before any process starts, or None."""
    from sgemm import catalogue
    from sgemm.commands import writable_file_problem

    try:
        kernels = [catalogue.get_kernel(name) for name in args.kernels]
    except catalogue.UnknownKernelError as exc:
        return str(exc)
    if any(kernel.library for kernel in kernels):
        return "the kernels are compared with cuBLAS: name compiled kernels, not a library"
    if len({kernel.precision for kernel in kernels}) != 1:
        return "the kernels must share a precision: one cuBLAS baseline is timed beside them"
    for kernel in kernels:
        if reason := kernel.shape_problem(args.size, args.size, args.size):
            return reason
    if not 0 < args.seconds <= 120:
        return f"--seconds takes 0 to 120 seconds of load a case, got {args.seconds:g}"
    return writable_file_problem("--json", args.json) if args.json else None


def one_process(args) -> dict:
    """This process's figures: NVBench's medians and clocks of every case, each kernel's paired % of cuBLAS."""
    from sgemm import catalogue
    from sgemm.measuring.ab import VERSUS_BASELINE, Build, measure
    from sgemm.measuring.record import MeasuredCase, run_cases
    from sgemm.measuring.telemetry import CardReadings

    kernels = [catalogue.get_kernel(name) for name in args.kernels]
    base = catalogue.baseline(kernels[0].precision)
    n = args.size
    timed_order, paired_order = in_order(base, kernels, args.reversed)
    cases = [MeasuredCase(kernel, n, n, n) for kernel in timed_order]
    timed = run_cases(cases, args.device, nvbench_args=(
        "--min-time", f"{args.seconds:g}", "--timeout", f"{3 * args.seconds + 30:g}"))
    figures = {}
    for case in cases:
        result = timed[case.id]
        if isinstance(result, BaseException):
            raise SystemExit(f"{case.id}: {result}")
        launches_ms = 1e3 * sum(result.samples_s)
        capped_ms = result.telemetry.get("throttled_ms", {}).get("power", math.nan)
        window_ms = result.telemetry.get("window_ms", math.nan)
        figures[case.kernel.name] = {"tflops": result.tflops, "sm_clock_mhz": result.median_sm_clock_mhz,
                                     "launches_ms": launches_ms, "window_ms": window_ms,
                                     "power_capped_ms": capped_ms, "capped_throughout": capped_throughout(
                                         capped_ms, window_ms),
                                     "throttle_reasons": result.telemetry.get("throttle_reasons", [])}
    settings = replace(VERSUS_BASELINE, flush_l2=True, solo_s=0.0, warmup_s=args.seconds,
                       max_warmup_s=args.seconds + 3.0)
    readings = CardReadings.of(args.device)
    import cupy

    with cupy.cuda.Device(args.device):
        paired = measure([Build("baseline", base), *(Build(kernel.name, kernel) for kernel in paired_order)], n, n, n,
                         settings, readings)
    for build, kernel in enumerate(paired_order, 1):  # the ratios are over build 0, cuBLAS
        low, high = paired.interval(build)
        own = figures[kernel.name]
        own |= {"nvbench_percent": 100 * own["tflops"] / figures[base.name]["tflops"],
                "paired_percent": 100 / paired.ratio(build), "paired_interval": [100 / high, 100 / low],
                "paired_sm_clock_mhz": paired.timing.builds[build].median_sm_clock_mhz}
    return figures


def process_limit_s(kernels: int, seconds: float) -> float:
    """How long a process of `kernels` kernels and cuBLAS may take before it counts as hung."""
    nvbench_s = (kernels + 1) * (3 * seconds + 30)  # each case at most its NVBench --timeout
    paired_s = seconds + 3 + kernels * 60  # the paired session's warm-up cap and a minute of rounds a kernel
    return nvbench_s + paired_s + 120  # and the builds, checks and CUDA's start


def capped_throughout(capped_ms: float, window_ms: float) -> bool | None:
    """Whether the power cap held the clocks for the whole window the violation time was counted over; None where
    NVML gave no violation time or the window is unknown (no telemetry)."""
    if not (math.isfinite(capped_ms) and math.isfinite(window_ms) and window_ms > 0):
        return None
    return capped_ms >= CAPPED_SHARE * window_ms


def backwards(index: int) -> bool:
    """Whether the process of this index (from 0) takes the cases backwards: every second one."""
    return index % 2 == 1


def in_order(base, kernels: list, reverse: bool) -> tuple[list, list]:
    """The order a process times its NVBench cases in (cuBLAS, then the kernels as named) and pairs the kernels with
    cuBLAS in (as named), each reversed where `reverse`."""
    timed, paired = [base, *kernels], list(kernels)
    return (timed[::-1], paired[::-1]) if reverse else (timed, paired)


def _capped(throughout: bool | None) -> str:
    return {True: "capped throughout", False: "NOT capped throughout", None: "cap unknown"}[throughout]


def across(values: list[float]) -> dict:
    """The median of the processes' figures, a 95% t-interval of their logarithms around their geometric mean, and
    their range."""
    from scipy import stats

    logs = [math.log(value) for value in values]
    summary = {"median": median(values), "low": min(values), "high": max(values), "interval": None}
    if len(logs) >= 2:
        half = stats.t.ppf(0.975, len(logs) - 1) * stdev(logs) / math.sqrt(len(logs))
        summary["interval"] = [math.exp(fmean(logs) - half), math.exp(fmean(logs) + half)]
    return summary


def main(argv: list[str] | None = None) -> int:
    parser = ToolParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("kernels", nargs="+", metavar="KERNEL")
    parser.add_argument("--size", type=integer_at_least(1, "--size"), required=True)
    parser.add_argument("--processes", type=integer_at_least(1, "--processes"), default=5)
    parser.add_argument("--seconds", type=finite, default=10.0,
                        help="load a case at least (NVBench's --min-time) and the paired warm-up (default 10)")
    parser.add_argument("--device", type=integer_at_least(0, "--device"), default=0)
    parser.add_argument("--json", help="also write every process's figures and the summary to this file")
    parser.add_argument("--one-process", action="store_true", help=argparse.SUPPRESS)  # a process of the run
    parser.add_argument("--reversed", action="store_true", help=argparse.SUPPRESS)  # ... taking the cases backwards
    args = parser.parse_args(argv)
    if problem := _problem(args):
        print(f"sustained: {problem}", file=sys.stderr)
        return EXIT_BAD_INPUT
    if args.one_process:
        print(json.dumps(one_process(args)))
        return 0
    child = [sys.executable, "-m", "tools.acceptance.sustained", *args.kernels, "--size", str(args.size),
             "--seconds", f"{args.seconds:g}", "--device", str(args.device), "--one-process"]
    # A process that runs past this has hung (a kernel that never ends): it is killed, and so is one running when
    # this one is told to stop (SIGTERM ends the wait, and subprocess.run kills the process it waited on). Each
    # NVBench case may run to its own --timeout, each pairing to its warm-up's cap and its rounds, plus compiles.
    per_process_s = process_limit_s(len(args.kernels), args.seconds)
    signal.signal(signal.SIGTERM, lambda signum, frame: sys.exit(128 + signum))
    runs = []

    def keep(summary: dict | None = None) -> None:
        """--json: every finished process's figures, written as each ends (so that a later failure loses none),
        and at the end the summary."""
        if args.json:
            with open(args.json, "w") as out:
                json.dump({"size": args.size, "seconds": args.seconds, "processes": runs,
                           "reversed": [backwards(index) for index in range(len(runs))], "summary": summary}, out,
                          indent=1)

    for index in range(args.processes):
        reverse = backwards(index)
        try:
            done = subprocess.run(child + ["--reversed"] * reverse, capture_output=True, text=True, check=False,
                                  timeout=per_process_s)
        except subprocess.TimeoutExpired:
            print(f"sustained: process {index + 1} ran past {per_process_s:g} s and was ended", file=sys.stderr)
            return 1
        if done.returncode:
            print(f"sustained: process {index + 1} failed: {(done.stderr.strip().splitlines() or ['?'])[-1]}",
                  file=sys.stderr)
            return 1
        try:
            runs.append(json.loads((done.stdout.strip().splitlines() or [""])[-1]))
        except json.JSONDecodeError:
            print(f"sustained: process {index + 1} ended without its figures", file=sys.stderr)
            return 1
        keep()
        print(f"process {index + 1} ({'kernels, then cuBLAS' if reverse else 'cuBLAS, then kernels'}): " + "; ".join(
            f"{name} {run['nvbench_percent']:.1f}% NVBench ({run['sm_clock_mhz']:.0f} MHz, "
            f"{_capped(run['capped_throughout'])}), "
            f"{run['paired_percent']:.1f}% paired"
            for name, run in runs[-1].items() if "paired_percent" in run), flush=True)
    # cuBLAS's own figures too: the processes' spread at the cap is the baseline's as much as the kernels'.
    summary = {name: {figure: across([run[name][figure] for run in runs])
                      for figure in ("nvbench_percent", "paired_percent", "tflops", "sm_clock_mhz")
                      if figure in runs[0][name]}
               | {"capped_throughout": sum(run[name]["capped_throughout"] is True for run in runs)}
               for name in runs[0]}
    for name, figures in summary.items():
        print(f"{name} at {args.size}, {args.processes} processes, L2 flushed: " + "; ".join(
            f"{figure} median {value['median']:.2f} (interval "
            + (f"{value['interval'][0]:.2f}-{value['interval'][1]:.2f}" if value["interval"] else "-")
            + f", range {value['low']:.2f}-{value['high']:.2f})"
            for figure, value in figures.items() if isinstance(value, dict))
            + f"; power cap held throughout in {figures['capped_throughout']} of {args.processes}")
    first, *others = args.kernels  # catalogue names exactly (_problem refused any other), as the processes say them
    if others:
        summary["over_first"] = {}
        for name in others:
            over = {figure: across([run[name][figure] / run[first][figure] for run in runs])
                    for figure in ("tflops", "paired_percent")}
            summary["over_first"][name] = over
            print(f"{name} over {first}, process by process: " + "; ".join(
                f"{label} {_percent(value['median'])} median (interval "
                + (f"{_percent(value['interval'][0])} to {_percent(value['interval'][1])}" if value["interval"]
                   else "-") + ")"
                for label, value in (("NVBench", over["tflops"]), ("paired", over["paired_percent"]))))
    keep(summary)
    return 0


def _percent(ratio: float) -> str:
    return f"{100 * (ratio - 1):+.2f}%"


if __name__ == "__main__":
    sys.exit(main())
