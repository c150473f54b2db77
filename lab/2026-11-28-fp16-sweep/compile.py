"""Compile kernels of a catalogue with NVRTC on the CPU and report, per kernel and architecture, what ptxas says
(registers, static shared memory, spills), the dynamic shared memory the kernel states, and, where nvdisasm is found
(NVDISASM, or on PATH), the SASS instruction mix: how many tensor-core, ldmatrix, cp.async, barrier and other
instructions the compiled kernel holds, and the same within its K loop (the backward branch's body that holds the
most mmas), with the loop's other instructions per mma.

    python compile.py [--catalogue PATH] [--arch sm_90 ...] [--dump DIR] NAME_OR_PREFIX...

Each kernel is compiled for its own target where it has one, else for each --arch (default: the catalogue's tracked
architectures).

--dump writes each build's PTX and SASS (NAME with / as __, .ARCH.ptx / .sass) so that two trees can be compared
file by file. Exit 1 when a kernel fails to compile or spills (unless its entry allows it)."""

from __future__ import annotations

import argparse
import collections
import os
import re
import shutil
import subprocess
import sys
import tempfile
from pathlib import Path

from sgemm.catalogue import architectures, load_catalogue
from sgemm.measuring.resources import compile_offline, parse_ptxas_report, spill_problem

# SASS opcodes counted, by the role each has in the k-loop; "other" is every instruction not listed.
ROLES = {"HMMA": "mma", "LDSM": "ldsm", "LDGSTS": "cp.async", "LDGDEPBAR": "commit", "DEPBAR": "wait",
         "BAR": "bar", "STG": "stg", "LDG": "ldg", "STS": "sts", "LDS": "lds", "BRA": "bra"}
# Instructions that are neither work nor control: the padding after the last EXIT.
_PADDING = {"NOP"}
_OPCODE = re.compile(r"/\*([0-9a-f]{4,})\*/\s+(?:@!?U?P[0-9T]\s+)?([A-Z][A-Z0-9_]*)")
_LABEL = re.compile(r"^\s*(\.L_x_\d+):")
_BRANCH = re.compile(r"BRA `\((\.L_x_\d+)\)")


def instructions(sass: str) -> list[tuple[int, str, str | None]]:
    """(address, opcode, the label a branch goes to) of each instruction, and each label as (address, ":name", None)
    at the address of the instruction that follows it."""
    listed, labels = [], []
    for line in sass.splitlines():
        if label := _LABEL.match(line):
            labels.append(label[1])
            continue
        found = _OPCODE.search(line)
        if not found or found[2] in _PADDING:
            continue
        address = int(found[1], 16)
        listed.extend((address, ":" + name, None) for name in labels)
        labels = []
        branch = _BRANCH.search(line)
        listed.append((address, found[2], branch[1] if branch else None))
    return listed


def mix(opcodes) -> collections.Counter:
    counts = collections.Counter()
    for opcode in opcodes:
        counts[ROLES.get(opcode, "other")] += 1
        counts["all"] += 1
    return counts


def sass_mix(sass: str) -> tuple[collections.Counter, collections.Counter]:
    """The mix of the whole kernel and of its K loop: of the ranges from a label to a branch back to it, the one
    with the most mmas (an empty count where there is none)."""
    listed = instructions(sass)
    at = {opcode[1:]: address for address, opcode, _ in listed if opcode.startswith(":")}
    work = [(address, opcode, target) for address, opcode, target in listed if not opcode.startswith(":")]
    whole, loop = mix(opcode for _, opcode, _ in work), collections.Counter()
    for address, _, target in work:
        if target in at and at[target] <= address:
            body = mix(opcode for where, opcode, _ in work if at[target] <= where <= address)
            if body["mma"] > loop["mma"]:
                loop = body
    return whole, loop


def disassemble(cubin: bytes, nvdisasm: str) -> str:
    with tempfile.NamedTemporaryFile(suffix=".cubin") as file:
        file.write(cubin)
        file.flush()
        return subprocess.run([nvdisasm, "-c", file.name], check=True, capture_output=True, text=True).stdout


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("names", nargs="+", help="kernel names, or prefixes ending in / or _")
    parser.add_argument("--catalogue", type=Path, help="a catalogue file (default: the package's)")
    parser.add_argument("--arch", action="append", help="architectures (default: the tracked ones)")
    parser.add_argument("--dump", type=Path, help="write each build's PTX and SASS here")
    args = parser.parse_args()
    catalogue = load_catalogue(args.catalogue) if args.catalogue else load_catalogue()
    chosen = [kernel for name, kernel in catalogue.items() if not kernel.library and any(
        name == wanted or (wanted.endswith(("/", "_")) and name.startswith(wanted)) for wanted in args.names)]
    if not chosen:
        print(f"no kernel matches {args.names}", file=sys.stderr)
        return 1
    nvdisasm = os.environ.get("NVDISASM") or shutil.which("nvdisasm")
    if args.dump:
        args.dump.mkdir(parents=True, exist_ok=True)
    failed = False
    columns = ["mma", "ldsm", "cp.async", "bar", "other", "all"]
    print(f"{'kernel':34} {'arch':7} {'regs':>4} {'smem':>6} {'spill':>5}  whole kernel: "
          + " ".join(f"{c:>8}" for c in columns) + "  K loop: " + " ".join(f"{c:>8}" for c in columns) + "  other/mma")
    tracked = tuple(args.arch or architectures())
    for kernel in chosen:
        for arch in kernel.architectures(tracked):
            try:
                build = compile_offline(kernel, arch)
                usage = parse_ptxas_report(build.log)
            except Exception as exc:  # one broken candidate must not hide the others' figures
                print(f"{kernel.name:34} {arch:7} FAILED: {exc}")
                failed = True
                continue
            problem = spill_problem(kernel, arch, usage)
            failed |= problem is not None
            shared = usage.shared_bytes + (build.geometry.shared_memory if build.geometry else 0)
            line = (f"{kernel.name:34} {arch:7} {usage.registers:>4} {shared:>6} "
                    f"{usage.spill_store_bytes + usage.spill_load_bytes:>5}")
            stem = kernel.name.replace("/", "__") + f".{arch}"
            if args.dump:
                (args.dump / f"{stem}.ptx").write_text(build.ptx)
            if nvdisasm:
                sass = disassemble(build.cubin, nvdisasm)
                whole, loop = sass_mix(sass)
                line += "               " + " ".join(f"{whole[c]:>8}" for c in columns)
                line += "          " + " ".join(f"{loop[c]:>8}" for c in columns)
                line += f"  {loop['other'] / max(loop['mma'], 1):.2f}"
                if args.dump:
                    (args.dump / f"{stem}.sass").write_text(sass)
            print(line + (f"  {problem}" if problem else ""), flush=True)
    return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(main())
