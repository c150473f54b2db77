"""Compile catalogue entries with NVRTC on the CPU (no GPU) and print, per entry and architecture, ptxas's registers,
static shared memory and spills, the dynamic shared memory the kernel states, and a digest of the machine code.

The digest is of the cubin's .text sections (the SASS bytes) and of the PTX with the mangled names taken out, so that
a kernel whose template gained a defaulted parameter (a new mangled name) can be shown to compile to the same code.

  python cpu_check.py CATALOGUE PREFIX... [--arch sm_90 ...] [--json FILE]
Exit 1 when an entry fails to compile, spills, or needs more shared memory than sm_90 gives a block (227 KB).
"""

import argparse
import hashlib
import json
import re
import struct
import sys
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

from sgemm.catalogue import load_catalogue
from sgemm.measuring.resources import compile_offline, parse_ptxas_report

SHARED_LIMIT = {"sm_80": 163 * 1024, "sm_86": 99 * 1024, "sm_89": 99 * 1024, "sm_90": 227 * 1024}


def text_sections(cubin: bytes) -> bytes:
    """The bytes of every .text.* section of an ELF64 cubin, in section order: the kernel's SASS."""
    shoff, = struct.unpack_from("<Q", cubin, 0x28)
    shentsize, shnum, shstrndx = struct.unpack_from("<HHH", cubin, 0x3A)
    headers = [struct.unpack_from("<IIQQQQIIQQ", cubin, shoff + i * shentsize) for i in range(shnum)]
    names_at = headers[shstrndx][4]
    code = b""
    for name, _type, _flags, _addr, offset, size, *_ in headers:
        label = cubin[names_at + name:cubin.index(b"\0", names_at + name)]
        if label.startswith(b".text."):
            code += cubin[offset:offset + size]
    return code


def unmangled_ptx(ptx: str) -> str:
    """The PTX without its header comment and with every mangled name replaced by one placeholder."""
    body = ptx[ptx.index(".version"):]
    return re.sub(r"_Z\w+", "NAME", body)


def figures(kernel, arch: str) -> dict:
    try:
        build = compile_offline(kernel, arch)
    except Exception as exc:  # noqa: BLE001 - a failed compile is a row of the table, not the end of it
        return {"error": str(exc).splitlines()[0]}
    usage = parse_ptxas_report(build.log)
    dynamic = build.geometry.shared_memory if build.geometry else 0
    return {"registers": usage.registers, "static_shared": usage.shared_bytes, "dynamic_shared": dynamic,
            "spill_bytes": usage.spill_store_bytes + usage.spill_load_bytes, "stack": usage.stack_bytes,
            "sass": hashlib.sha256(text_sections(build.cubin)).hexdigest()[:16],
            "ptx": hashlib.sha256(unmangled_ptx(build.ptx).encode()).hexdigest()[:16]}


def main() -> int:
    parser = argparse.ArgumentParser()
    parser.add_argument("catalogue", type=Path)
    parser.add_argument("prefix", nargs="+", help="kernel names starting with any of these")
    parser.add_argument("--arch", action="append", help="default: sm_80 sm_86 sm_89 sm_90")
    parser.add_argument("--json", type=Path)
    args = parser.parse_args()
    archs = args.arch or list(SHARED_LIMIT)
    kernels = [k for name, k in load_catalogue(args.catalogue, args.catalogue.parent.parent / "kernels").items()
               if name.startswith(tuple(args.prefix)) and not k.library]
    jobs = [(k, arch) for k in kernels for arch in archs]
    with ThreadPoolExecutor() as pool:
        results = list(pool.map(lambda job: figures(*job), jobs))
    table, bad = {}, 0
    for (kernel, arch), row in zip(jobs, results):
        entry = kernel.on_architecture(arch).entry
        table[f"{kernel.name} {arch}"] = {"entry": entry, **row}
        problem = row.get("error") or ("spills" if row["spill_bytes"] else None) or (
            "too much shared memory" if row["static_shared"] + row["dynamic_shared"] > SHARED_LIMIT[arch] else None)
        bad += problem is not None
        shown = problem if "error" in row else (
            f"{row['registers']:3d} regs  {(row['static_shared'] + row['dynamic_shared']) / 1024:6.1f} KB smem  "
            f"spills {row['spill_bytes']}  sass {row['sass']}  ptx {row['ptx']}"
            + (f"  <- {problem}" if problem else ""))
        print(f"{kernel.name:32s} {arch}  {entry:55s} {shown}")
    if args.json:
        args.json.write_text(json.dumps(table, indent=1, sort_keys=True) + "\n")
    return 1 if bad else 0


if __name__ == "__main__":
    sys.exit(main())
