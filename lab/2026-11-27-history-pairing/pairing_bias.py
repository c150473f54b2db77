#!/usr/bin/env python3
"""What a pairing setting reads for a known change: the history demos' slowed builds paired against the plain ones
under several settings, in one process, each pairing after a prelude that sets the card's state. Run it in many
processes (the spread between processes is what a history's detector sees from one commit to the next) and compare
each setting's mean reading with the longest one's.

The slowed builds are the demos' own edits (scripts/history-demo.py): the TMA-store epilogue of
kernels/wgmma_specialized.cu spinning a few thousand SM cycles a tile (fp16/ and bf16/wgmma_grouped_tma_store at
8192), and fp32/warptile spinning cycles in proportion to K (at 4096). Both trees are HEAD's, exported once under
--trees and reused by every later process.

The settings (SETTINGS below): the history's (record.REFERENCE_SETTINGS); "six-pairs" (10 ms blocks, six pairs, 0.4 s
at most, a warm-up from 0.05 s); "brief" (the same in 5 ms blocks); "long" (10 ms blocks, 2 s of pairs). The
preludes: 0.3 s of fp32/float4 at 4096 (as in the suite, where FP32 cases come before the Hopper ones), or of the
case's slowed build alone ("self"). Process number P starts the list of conditions at its P-th, so that no setting
is always first.

Usage: for p in $(seq 0 11); do scripts/pairing-bias.py --process $p --out bias.jsonl; done
       scripts/pairing-bias.py --summary bias.jsonl
Options: [--trees DIR] [--hopper-percent 1] [--warptile-percent 2]
Exit status: 0 measured (or summarised); 2 bad input or no GPU.
"""

from __future__ import annotations

import argparse
import importlib.util
import json
import statistics
import sys
import time
from collections import defaultdict
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

from sgemm import sourcetree  # noqa: E402
from sgemm.measuring.paired import PairedSettings  # noqa: E402
from sgemm.measuring.record import REFERENCE_SETTINGS, NoGpuError, device_info  # noqa: E402

_spec = importlib.util.spec_from_file_location("history_demo", ROOT / "scripts" / "history-demo.py")
demo = importlib.util.module_from_spec(_spec)
sys.modules[_spec.name] = demo  # its dataclasses look their module up while they are built
_spec.loader.exec_module(demo)

SETTINGS = {
    "history": REFERENCE_SETTINGS,
    "six-pairs": PairedSettings(block_s=0.01, warmup_s=0.05, max_warmup_s=1.0, min_pairs=6, min_s=0.1, max_s=0.4),
    "brief": PairedSettings(block_s=0.005, warmup_s=0.05, max_warmup_s=1.0, min_pairs=6, min_s=0.1, max_s=0.4),
    "long": PairedSettings(block_s=0.01, warmup_s=0.5, max_warmup_s=3.0, min_pairs=10**9, min_s=2.0, max_s=2.0,
                           target_half_width=0.0),
}
PRELUDES = ("float4", "self")
CONDITIONS = [(setting, prelude) for setting in SETTINGS for prelude in PRELUDES
              if (setting, prelude) != ("long", "self")]
PRELUDE_S = 0.3
PRELUDE_KERNEL, PRELUDE_SIZE = "fp32/float4", 4096


def slowdowns(hopper_percent: float, warptile_percent: float) -> list:
    """The demos' edits, as scripts/history-demo.py makes them."""
    return [demo.Slowdown(1, demo.HOPPER_PAIR, demo.HOPPER_SOURCE, 8192, hopper_percent),
            demo.Slowdown(1, ("fp32/warptile",), demo.WARPTILE_SOURCE, 4096, warptile_percent)]


def prepare_trees(trees: Path, slows: list) -> tuple[Path, Path]:
    """HEAD's kernels as they are, and slowed; exported once, then reused."""
    plain, slowed = trees / "plain", trees / "slowed"
    if not (slowed / "kernels").is_dir():
        sourcetree.export(ROOT, "HEAD", plain)
        sourcetree.export(ROOT, "HEAD", slowed)
        for slow in slows:
            demo.slow_down(slow, slowed)
    return plain, slowed


def rotated(process: int) -> list[tuple[str, str]]:
    start = process % len(CONDITIONS)
    return CONDITIONS[start:] + CONDITIONS[:start]


def measure(args: argparse.Namespace) -> int:
    import cupy

    from sgemm.catalogue import get_kernel
    from sgemm.measuring.ab import Build, compile_ahead
    from sgemm.measuring.ab import measure as paired
    from sgemm.measuring.problem import make_problem
    from sgemm.measuring.telemetry import CardReadings

    try:
        device_info()
    except NoGpuError as exc:
        print(f"pairing-bias: {exc}", file=sys.stderr)
        return 2
    slows = slowdowns(args.hopper_percent, args.warptile_percent)
    plain_tree, slowed_tree = prepare_trees(args.trees, slows)
    plain, slowed = sourcetree.kernels(plain_tree), sourcetree.kernels(slowed_tree)
    cases = [(name, slow.size) for slow in slows for name in slow.kernels]
    prelude_kernel = get_kernel(PRELUDE_KERNEL)
    compile_ahead([prelude_kernel] + [tree[name] for tree in (plain, slowed) for name, _ in cases])
    readings = CardReadings.of(0)
    prelude = make_problem(prelude_kernel, PRELUDE_SIZE, PRELUDE_SIZE, PRELUDE_SIZE)

    def busy(launch, seconds: float) -> None:
        until = time.monotonic() + seconds
        while time.monotonic() < until:
            for _ in range(5):
                launch()
            cupy.cuda.runtime.deviceSynchronize()

    with open(args.out, "a") as out:
        for name, size in cases:
            own = make_problem(slowed[name], size, size, size)
            for setting, before in rotated(args.process):
                busy(prelude.launch if before == "float4" else own.launch, PRELUDE_S)
                started = time.monotonic()
                result = paired([Build("plain", plain[name]), Build("slowed", slowed[name])], size, size, size,
                                SETTINGS[setting], readings)
                clocks = result.timing.builds[0].sm_clock_mhz
                out.write(json.dumps({"process": args.process, "case": name, "size": size, "setting": setting,
                                      "prelude": before, "ratio": result.ratio(),
                                      "interval": list(result.interval()), "pairs": result.timing.pairs,
                                      "warmup_s": result.timing.warmup_s,
                                      "seconds": time.monotonic() - started,
                                      "sm_clock_mhz": statistics.median(clocks) if clocks else None}) + "\n")
                out.flush()
            del own
    return 0


def summary(lines: list[dict]) -> list[str]:
    """A line per case, setting and prelude: the mean ratio over the processes, the spread between them, the
    median SM clock."""
    groups: dict[tuple, list[dict]] = defaultdict(list)
    for line in lines:
        groups[line["case"], line["setting"], line["prelude"]].append(line)
    said = []
    for (case, setting, prelude), rows in sorted(groups.items()):
        ratios = [row["ratio"] for row in rows]
        spread = statistics.stdev(ratios) * 100 if len(ratios) > 1 else float("nan")
        clocks = [row["sm_clock_mhz"] for row in rows if row.get("sm_clock_mhz")]
        clock = f", SM clock {statistics.median(clocks):.0f} MHz" if clocks else ""
        said.append(f"{case} {setting} after {prelude}: {statistics.mean(ratios):.4f} over {len(rows)} processes "
                    f"(sd {spread:.2f}%){clock}")
    return said


def parse(argv: list[str] | None) -> argparse.Namespace:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--process", type=int, help="this process's number: where its list of conditions starts")
    parser.add_argument("--out", type=Path, default=Path("bias.jsonl"), help="one line of JSON a pairing")
    parser.add_argument("--trees", type=Path, default=Path("/tmp/pairing-bias-trees"),
                        help="where HEAD's plain and slowed kernels are exported, once")
    parser.add_argument("--hopper-percent", type=float, default=1.0, help="the Hopper spin, as the demo's --percent")
    parser.add_argument("--warptile-percent", type=float, default=2.0, help="the warptile spin, likewise")
    parser.add_argument("--summary", type=Path, help="summarise this file of lines instead of measuring")
    args = parser.parse_args(argv)
    if args.summary is not None:
        if not args.summary.is_file():
            parser.error(f"--summary {args.summary} is not a file")
        return args
    if args.process is None or args.process < 0:
        parser.error("--process N (0 or more) is needed to measure")
    for name in ("hopper_percent", "warptile_percent"):
        if not getattr(args, name) > 0:
            parser.error(f"--{name.replace('_', '-')} must be above 0, got {getattr(args, name)}")
    if args.out.exists() and not args.out.is_file():
        parser.error(f"--out {args.out} is not a file")
    if not args.out.resolve().parent.is_dir():
        parser.error(f"--out {args.out}: its folder does not exist")
    return args


def main(argv: list[str] | None = None) -> int:
    args = parse(argv)
    if args.summary is not None:
        try:
            lines = [json.loads(line) for line in args.summary.read_text().splitlines() if line.strip()]
            said = summary(lines)
        except (ValueError, KeyError, TypeError) as exc:
            print(f"pairing-bias: {args.summary} is not this script's output: {exc}", file=sys.stderr)
            return 2
        print("\n".join(said))
        return 0
    return measure(args)


if __name__ == "__main__":
    sys.exit(main())
