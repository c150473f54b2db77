"""Nsight Compute's reading of every step of a seed's ladder, for `sgemm report --counters DIR`.

For each compiled kernel of the seed's ladder (cuBLAS has no step above it to be slower than) and each size: one
launch inside `sgemm check` at that square size, profiled by `ncu --clock-control none` (the GPU keeps the clocks it
would have had; never locked to base) with the sections the report reads (sgemm.site.counters.SECTIONS), written as
Nsight Compute's CSV export of the details page, the sections' charts included (the tensor pipe, the stall reasons),
to DIR/<kernel with '/' as '-'>-<size>.csv. A size a kernel's entry refuses is passed by; a profile that fails or
finds no launch (a kernel this GPU cannot run) is said, and the tool ends with exit 1. Run on a GPU box with ncu on
PATH (or NCU naming it); --dry-run prints the commands alone (no GPU needed).

    python -m tools.acceptance.ladder_counters DIR --seed hopper [--size 4096 ...] [--precision fp16 ...]
        [--kernel fp16/wgmma_persistent ...] [--device 0] [--dry-run]  (from the repository root)

--kernel keeps the profiles to the steps named (those a report shows slower than the step above them, say).

Exit 0 when every reading was written, 1 when some profile failed (each said), 2 for bad input.
"""

from __future__ import annotations

import os
import shutil
import subprocess
import sys
from pathlib import Path

from sgemm import catalogue
from sgemm.commands import args as types
from sgemm.site.counters import SECTIONS, file_name
from sgemm.site.ladders import seed_kernels
from sgemm.writable import folder_problem
from tools.parser import ToolParser


def compiled_steps(seed: catalogue.Seed, kernels: dict[str, catalogue.Kernel]) -> list[catalogue.Kernel]:
    """The seed's ladder in order, less the libraries (cuBLAS has no step above it to be slower than)."""
    return [kernel for _, kernel in seed_kernels(seed, kernels) if not kernel.library]


def cases(seed: catalogue.Seed, kernels: dict[str, catalogue.Kernel], sizes: list[int],
          precisions: list[str] | None, only: list[str] | None = None) -> list[tuple[catalogue.Kernel, int]]:
    """(kernel, size) of every compiled step of the seed's ladder (of those named in `only`, where given), in ladder
    order, whose entry takes the size."""
    return [(kernel, size) for kernel in compiled_steps(seed, kernels)
            if (not precisions or kernel.precision in precisions) and (not only or kernel.name in only)
            for size in sizes if kernel.shape_problem(size, size, size) is None]


def command(ncu: str, kernel: catalogue.Kernel, size: int, device: int) -> list[str]:
    """The ncu command that profiles the kernel's first launch at that size, picked by its template's name (the FP64
    reference's launches do not hold it)."""
    sections = [word for section in SECTIONS for word in ("--section", section)]
    template = kernel.entry.partition("<")[0].strip()
    return [ncu, "--clock-control", "none", "--target-processes", "all", "--kernel-name", f"regex:{template}",
            "--launch-count", "1", *sections, "--csv", "--page", "details", "--print-details", "all",
            sys.executable, "-m", "sgemm", "check", "-k", kernel.name, "--shape", f"{size}x{size}x{size}",
            "--device", str(device)]


def main(argv: list[str] | None = None) -> int:
    parser = ToolParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("out", type=Path, help="the counters folder (made if missing)")
    parser.add_argument("--seed", required=True, help="the seed's number or name, e.g. 001 or hopper")
    parser.add_argument("--size", type=types.size, action="append",
                        help="square size (repeatable; default: the seed's own sizes)")
    parser.add_argument("--precision", action="append", help="fp32, fp16 or bf16 (repeatable; default: every one)")
    parser.add_argument("--kernel", action="append",
                        help="profile this step alone (repeatable; default: every compiled step of the ladder)")
    parser.add_argument("--device", type=types.device, default=0)
    parser.add_argument("--dry-run", action="store_true", help="print the commands, run nothing")
    args = parser.parse_args(argv)
    seeds = {seed.number: seed for seed in catalogue.seeds()}
    if args.seed not in seeds:
        parser.error(f"unknown seed {args.seed!r}; seeds: {', '.join(seeds)}")
    kernels = catalogue.load_catalogue()
    known = {kernel.precision for kernel in kernels.values()}
    if unknown := sorted(set(args.precision or ()) - known):
        parser.error(f"unknown precision {', '.join(unknown)}; precisions: {', '.join(sorted(known))}")
    steps = {kernel.name for kernel in compiled_steps(seeds[args.seed], kernels)}
    if strangers := [name for name in args.kernel or () if name not in steps]:
        parser.error(f"{', '.join(strangers)}: no compiled step of seed {args.seed}'s ladder")
    if problem := folder_problem(args.out):
        parser.error(f"{args.out}: {problem}")
    ncu = os.environ.get("NCU") or shutil.which("ncu")
    if not ncu and not args.dry_run:
        parser.error("no ncu on PATH: install Nsight Compute or name it in NCU")
    todo = cases(seeds[args.seed], kernels, args.size or list(seeds[args.seed].sizes), args.precision,
                 args.kernel)
    if not todo:
        parser.error(f"seed {args.seed}: no compiled step takes the sizes asked for")
    if args.dry_run:
        for kernel, size in todo:
            target = args.out / file_name(kernel.name, size)
            print(" ".join(command(ncu or "ncu", kernel, size, args.device)) + f" > {target}")
        return 0
    args.out.mkdir(parents=True, exist_ok=True)
    failed = 0
    for kernel, size in todo:
        target = args.out / file_name(kernel.name, size)
        done = subprocess.run(command(ncu, kernel, size, args.device), capture_output=True, text=True, check=False)
        if done.returncode != 0 or '"ID"' not in done.stdout:
            failed += 1
            why = (done.stderr.strip().splitlines() or ["no output"])[-1]
            print(f"ladder_counters: {kernel.name} at {size}: ncu exited {done.returncode} ({why})", file=sys.stderr)
            continue
        target.write_text(done.stdout)
        print(f"wrote {target}")
    return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(main())
