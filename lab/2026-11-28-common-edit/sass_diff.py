"""How an edit changes each kernel's machine code: every kernel of two source trees compiled with NVRTC for one
architecture (no GPU), disassembled with nvdisasm, and compared instruction by instruction (opcode and operands,
addresses and encodings left out). Per kernel: the instructions of each side, how many differ, how many of those
lie inside a loop (a range from a label to a branch back to it), and how many inside the K loop (the loop holding the
most FFMA, HMMA and HGMMA instructions), where a changed instruction runs every iteration of the main work; and
whether anything up to the K loop's end changed (if not, the loop also sits at the same address: a loop that only
moved can run at another speed, its instruction fetch aligned otherwise); and the registers a thread of each side
(a change there can change how many blocks an SM holds).

Usage, from the repository root (NVDISASM or nvdisasm on PATH):
    python lab/2026-11-28-common-edit/sass_diff.py TREE_A TREE_B [--arch sm_90] [--dump DIR]
(a tree is a folder holding kernels/ and sgemm/catalogue.toml, e.g. from `git archive`)."""

from __future__ import annotations

import argparse
import difflib
import os
import re
import shutil
import subprocess
import sys
import tempfile
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

from sgemm import sourcetree
from sgemm.measuring.resources import compile_offline, parse_ptxas_report

_INSTRUCTION = re.compile(r"/\*[0-9a-f]{4,}\*/\s+(.*?)\s*;")
_LABEL = re.compile(r"^\s*(\.L_x_\d+):")
_BRANCH = re.compile(r"BRA `\((\.L_x_\d+)\)")


def listing(sass: str) -> tuple[list[str], set[int], set[int]]:
    """The kernel's instructions in order, the positions inside a loop, and those inside the K loop."""
    lines, label_at, loops = [], {}, []
    for raw in sass.splitlines():
        if label := _LABEL.match(raw):
            label_at[label[1]] = len(lines)
            continue
        found = _INSTRUCTION.search(raw)
        if not found or found[1].startswith("NOP"):
            continue
        branch = _BRANCH.search(raw)
        if branch and branch[1] in label_at:
            loops.append((label_at[branch[1]], len(lines)))
        lines.append(re.sub(r"\.L_x_\d+", "L", found[1]))
    def work(span: tuple[int, int]) -> int:
        return sum(lines[i].split()[0].lstrip("@!P0123456789T ").startswith(("FFMA", "HMMA", "HGMMA"))
                   or " FFMA" in lines[i] or " HMMA" in lines[i] or " HGMMA" in lines[i]
                   for i in range(span[0], span[1] + 1))

    k_loop = max(loops, key=work, default=None)
    in_k_loop = set(range(k_loop[0], k_loop[1] + 1)) if k_loop and work(k_loop) else set()
    return lines, {position for start, end in loops for position in range(start, end + 1)}, in_k_loop


def disassemble(cubin: bytes, nvdisasm: str) -> str:
    with tempfile.NamedTemporaryFile(suffix=".cubin") as file:
        file.write(cubin)
        file.flush()
        return subprocess.run([nvdisasm, "-c", file.name], check=True, capture_output=True, text=True).stdout


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("tree_a", type=Path)
    parser.add_argument("tree_b", type=Path)
    parser.add_argument("--arch", default="sm_90")
    parser.add_argument("--dump", type=Path)
    args = parser.parse_args()
    nvdisasm = os.environ.get("NVDISASM") or shutil.which("nvdisasm")
    if not nvdisasm:
        print("sass_diff: nvdisasm not found (set NVDISASM)", file=sys.stderr)
        return 2
    trees = [sourcetree.kernels(tree) for tree in (args.tree_a, args.tree_b)]
    names = [name for name, kernel in trees[0].items() if not kernel.library and name in trees[1]]

    def both(name: str):
        arch = args.arch if args.arch in trees[0][name].architectures((args.arch, "sm_90a")) else "sm_90a"
        builds = [compile_offline(tree[name], arch) for tree in trees]
        registers = [parse_ptxas_report(build.log).registers for build in builds]
        return name, arch, registers, [disassemble(build.cubin, nvdisasm) for build in builds]

    with ThreadPoolExecutor() as pool:
        compiled = list(pool.map(both, names))
    print(f"{'kernel':40} {'arch':7} {'before':>6} {'after':>6} {'differ':>6} {'in loops':>8} {'in K loop':>9} {'K loop moved':>12} {'registers':>9}")
    for name, arch, registers, (sass_a, sass_b) in compiled:
        (a, loops_a, k_a), (b, loops_b, k_b) = listing(sass_a), listing(sass_b)
        changed_a, changed_b = set(), set()
        for tag, i1, i2, j1, j2 in difflib.SequenceMatcher(None, a, b, autojunk=False).get_opcodes():
            if tag != "equal":
                changed_a.update(range(i1, i2))
                changed_b.update(range(j1, j2))
        differ = max(len(changed_a), len(changed_b))
        in_loops = max(len(changed_a & loops_a), len(changed_b & loops_b))
        in_k_loop = max(len(changed_a & k_a), len(changed_b & k_b))
        moved = bool(k_a) and bool(changed_a) and min(changed_a) <= max(k_a)
        print(f"{name:40} {arch:7} {len(a):>6} {len(b):>6} {differ:>6} {in_loops:>8} {in_k_loop:>9} "
              f"{'yes' if moved else 'no':>12} {'%d > %d' % tuple(registers):>9}", flush=True)
        if args.dump:
            args.dump.mkdir(parents=True, exist_ok=True)
            stem = name.replace("/", "__")
            (args.dump / f"{stem}.a.sass").write_text("\n".join(a))
            (args.dump / f"{stem}.b.sass").write_text("\n".join(b))
    return 0


if __name__ == "__main__":
    sys.exit(main())
