"""Compile a kernel with no GPU (NVRTC from pip) and read what the compiled code says: its resource usage from
ptxas's report, and from its PTX the launch geometry it declares.

Registers, shared memory, stack and spills per kernel and architecture: what a change to a kernel costs on chip,
known before any GPU runs it. The geometry (threads a block, cluster shape, TMA descriptors taken) is held against
the catalogue entry, so an entry and its kernel cannot drift apart unseen.
"""

from __future__ import annotations

import json
import math
import os
import re
import time
from concurrent.futures import ThreadPoolExecutor, as_completed
from dataclasses import dataclass

from ..catalogue import MAX_SHARED_BYTES, Kernel, architectures
from .build import BuildError, kernel_source, nvrtc_options

ARCHITECTURES = tuple(architectures())
# A file that usage_table tells how far it is, a JSON line per batch of programs compiled, where the variable names
# one: `sgemm history` follows it (sgemm.progress), since asv shows nothing of the resource suite's compile, a minute
# or more, until it is over.
PROGRESS_VARIABLE = "SGEMM_COMPILE_PROGRESS"
PROGRESS_BATCHES = 4

_REGISTERS = re.compile(r"Used (\d+) registers")
_SHARED = re.compile(r"(\d+) bytes smem")
_FRAME = re.compile(r"(\d+) bytes stack frame, (\d+) bytes spill stores, (\d+) bytes spill loads")


@dataclass(frozen=True)
class ResourceUsage:
    registers: int
    shared_bytes: int
    stack_bytes: int
    spill_store_bytes: int
    spill_load_bytes: int

    @property
    def spills(self) -> bool:
        return self.spill_store_bytes > 0 or self.spill_load_bytes > 0


def _header_dirs() -> list[str]:
    """CUDA headers shipped by the nvidia-cuda-runtime wheel, when installed."""
    try:
        from cuda.pathfinder import find_nvidia_header_directory
    except ImportError:
        return []
    found = find_nvidia_header_directory("cudart")
    return [f"-I{found}"] if found else []


def _check(result, program, what: str, name: str) -> None:
    from cuda.bindings import nvrtc

    status = result[0] if isinstance(result, tuple) else result
    if status != nvrtc.nvrtcResult.NVRTC_SUCCESS:
        raise BuildError(f"{name}: {what} failed ({status.name}):\n{program_log(program)}")


def program_log(program) -> str:
    from cuda.bindings import nvrtc

    _, size = nvrtc.nvrtcGetProgramLogSize(program)
    log = b" " * size
    nvrtc.nvrtcGetProgramLog(program, log)
    return log.rstrip(b"\x00 ").decode(errors="replace")


@dataclass(frozen=True)
class OfflineBuild:
    cubin: bytes
    log: str  # NVRTC's log, with ptxas's resource report
    ptx: str


def compile_offline(kernel: Kernel, arch: str) -> OfflineBuild:
    """Compile for `arch` (e.g. 'sm_90', or 'sm_90a') without a GPU."""
    from cuda.bindings import nvrtc

    options = [*nvrtc_options(kernel.kernel_dir), *_header_dirs(), f"--gpu-architecture={arch}", "--ptxas-options=-v"]
    _, program = nvrtc.nvrtcCreateProgram(kernel_source(kernel).encode(), kernel.source.encode(), 0, [], [])
    try:
        _check(nvrtc.nvrtcAddNameExpression(program, kernel.entry.encode()), program, "naming the entry", kernel.name)
        status = nvrtc.nvrtcCompileProgram(program, len(options), [o.encode() for o in options])
        _check(status, program, f"compiling {kernel.source} for {arch}", kernel.name)
        _, size = nvrtc.nvrtcGetCUBINSize(program)
        cubin = b" " * size
        _check(nvrtc.nvrtcGetCUBIN(program, cubin), program, "reading the cubin", kernel.name)
        _, size = nvrtc.nvrtcGetPTXSize(program)
        ptx = b" " * size
        _check(nvrtc.nvrtcGetPTX(program, ptx), program, "reading the PTX", kernel.name)
        return OfflineBuild(cubin, program_log(program), ptx.rstrip(b"\x00 ").decode())
    finally:
        nvrtc.nvrtcDestroyProgram(program)


@dataclass(frozen=True)
class CompiledGeometry:
    """What the compiled kernel itself says of how it must be launched."""

    max_threads: int  # .maxntid (from __launch_bounds__), all dimensions multiplied
    cluster: tuple[int, int, int] | None  # .reqnctapercluster (from __cluster_dims__), None when it sets none
    descriptors: int  # 128-byte parameters, 64-byte aligned: TMA descriptors passed by value


_MAXNTID = re.compile(r"\.maxntid\s+(\d+)(?:,\s*(\d+))?(?:,\s*(\d+))?")
_CLUSTER = re.compile(r"\.reqnctapercluster\s+(\d+)(?:,\s*(\d+))?(?:,\s*(\d+))?")
_DESCRIPTOR = re.compile(r"\.param\s+\.align\s+64\s+\.b8\s+\w+\[128\]")


def compiled_geometry(ptx: str) -> CompiledGeometry:
    """The launch geometry the PTX of one kernel declares; ValueError when it declares no thread limit."""
    threads, cluster = _MAXNTID.search(ptx), _CLUSTER.search(ptx)
    if not threads:
        raise ValueError("the kernel declares no .maxntid: give it __launch_bounds__")

    def dims(match) -> tuple[int, int, int]:
        return tuple(int(value) if value else 1 for value in match.groups())

    return CompiledGeometry(math.prod(dims(threads)), dims(cluster) if cluster else None,
                            len(_DESCRIPTOR.findall(ptx)))


def geometry_problem(kernel: Kernel, geometry: CompiledGeometry, static_shared_bytes: int) -> str | None:
    """Where the catalogue entry and the compiled kernel disagree on how it is launched, or None."""
    threads = math.prod(kernel.block())
    if geometry.max_threads != threads:
        return (f"{kernel.name}: the catalogue launches {threads} threads a block, __launch_bounds__ says "
                f"{geometry.max_threads}")
    if geometry.cluster is not None and geometry.cluster != kernel.cluster:
        return (f"{kernel.name}: the catalogue launches clusters of {list(kernel.cluster)}, the kernel requires "
                f"{list(geometry.cluster)}")
    if geometry.descriptors != len(kernel.tma):
        return (f"{kernel.name}: the catalogue declares {len(kernel.tma)} TMA descriptors, the kernel takes "
                f"{geometry.descriptors}")
    if static_shared_bytes + kernel.shared_memory > MAX_SHARED_BYTES:
        return (f"{kernel.name}: {static_shared_bytes} bytes of static and {kernel.shared_memory} of dynamic shared "
                f"memory exceed a block's {MAX_SHARED_BYTES}")
    return None


def parse_ptxas_report(log: str) -> ResourceUsage:
    """The resource line of the one kernel in a ptxas -v report."""
    registers, frame = _REGISTERS.search(log), _FRAME.search(log)
    if not registers or not frame:
        raise ValueError(f"no ptxas resource report in:\n{log}")
    shared = _SHARED.search(log)
    return ResourceUsage(
        registers=int(registers.group(1)),
        shared_bytes=int(shared.group(1)) if shared else 0,
        stack_bytes=int(frame.group(1)),
        spill_store_bytes=int(frame.group(2)),
        spill_load_bytes=int(frame.group(3)),
    )


def resource_usage(kernel: Kernel, arch: str) -> ResourceUsage:
    return parse_ptxas_report(compile_offline(kernel, arch).log)


def spill_problem(kernel: Kernel, arch: str, usage: ResourceUsage) -> str | None:
    """Why this usage is not acceptable for the kernel, or None: a spill, unless the catalogue allows it."""
    if usage.spills and not kernel.may_spill:
        return (f"{kernel.name} spills on {arch} ({usage.spill_store_bytes} bytes stored, {usage.spill_load_bytes} "
                f"loaded per thread); if that is intended, set `may_spill = true` in its catalogue entry")
    return None


def usage_table(kernels: list[Kernel],
                archs: tuple[str, ...] = ARCHITECTURES) -> dict[tuple[str, str], ResourceUsage | str]:
    """Resource usage of each compiled kernel on each architecture it is built for (its own target, or each of
    `archs`); a kernel that fails to compile maps to NVRTC's message, so one broken kernel does not hide the others'
    figures.

    Kernels that are the same program (source and entry) are compiled once: on an H100 box (NVRTC 13.0, inside
    asv's setup_cache) the second of two identical compiles came back with an empty log and no ptxas report. The
    programs compile in threads (NVRTC compiles separate programs concurrently and lets go of Python meanwhile): one
    at a time they took 50 s of every commit's history run on a 16-core H100 box.
    """
    def usage_or_error(program: tuple[Kernel, str]) -> ResourceUsage | str:
        try:
            return resource_usage(*program)
        except (BuildError, ValueError) as exc:
            return str(exc)

    builds = {}  # (kernel name, arch) -> its program
    programs = {}  # each distinct program, compiled once: (source, entry, arch) -> (kernel, arch)
    for kernel in kernels:
        for arch in kernel.architectures(archs) if not kernel.library else ():
            builds[kernel.name, arch] = program = (kernel.source, kernel.entry, arch)
            programs.setdefault(program, (kernel, arch))
    say = _progress_file(os.environ.get(PROGRESS_VARIABLE))
    started, usage = time.monotonic(), {}
    say({"done": 0, "total": len(programs), "seconds": 0.0})
    with ThreadPoolExecutor(max_workers=os.cpu_count() or 1) as pool:
        running = {pool.submit(usage_or_error, compiled): program for program, compiled in programs.items()}
        for done, future in enumerate(as_completed(running), 1):
            usage[running[future]] = future.result()
            if done * PROGRESS_BATCHES // len(programs) > (done - 1) * PROGRESS_BATCHES // len(programs):
                kernel, arch = programs[running[future]]
                say({"done": done, "total": len(programs), "last": f"{kernel.name} on {arch}",
                     "seconds": round(time.monotonic() - started, 1)})
    return {build: usage[program] for build, program in builds.items()}


def _progress_file(path: str | None):
    """A function that appends a record to the file at `path` as a JSON line; one that does nothing without one."""
    def say(record: dict) -> None:
        if path:
            with open(path, "a") as out:
                out.write(json.dumps(record) + "\n")
    return say
