"""Compile a kernel with no GPU (NVRTC from pip) and read its resource usage from ptxas's report.

Registers, shared memory, stack and spills per kernel and architecture: what a change to a kernel costs on chip,
known before any GPU runs it.
"""

from __future__ import annotations

import re
from dataclasses import dataclass

from ..catalogue import Kernel, architectures
from .build import BuildError, kernel_source, nvrtc_options

ARCHITECTURES = tuple(architectures())

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


def compile_offline(kernel: Kernel, arch: str) -> tuple[bytes, str]:
    """Compile to a cubin for `arch` (e.g. 'sm_90') without a GPU. Returns (cubin, NVRTC log with ptxas report)."""
    from cuda.bindings import nvrtc

    options = [*nvrtc_options(), *_header_dirs(), f"--gpu-architecture={arch}", "--ptxas-options=-v"]
    _, program = nvrtc.nvrtcCreateProgram(kernel_source(kernel).encode(), kernel.source.encode(), 0, [], [])
    try:
        _check(nvrtc.nvrtcAddNameExpression(program, kernel.entry.encode()), program, "naming the entry", kernel.name)
        status = nvrtc.nvrtcCompileProgram(program, len(options), [o.encode() for o in options])
        _check(status, program, f"compiling {kernel.source} for {arch}", kernel.name)
        _, size = nvrtc.nvrtcGetCUBINSize(program)
        cubin = b" " * size
        _check(nvrtc.nvrtcGetCUBIN(program, cubin), program, "reading the cubin", kernel.name)
        return cubin, program_log(program)
    finally:
        nvrtc.nvrtcDestroyProgram(program)


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
    return parse_ptxas_report(compile_offline(kernel, arch)[1])


def spill_problem(kernel: Kernel, arch: str, usage: ResourceUsage) -> str | None:
    """Why this usage is not acceptable for the kernel, or None: a spill, unless the catalogue allows it."""
    if usage.spills and not kernel.may_spill:
        return (f"{kernel.name} spills on {arch} ({usage.spill_store_bytes} bytes stored, {usage.spill_load_bytes} "
                f"loaded per thread); if that is intended, set `may_spill = true` in its catalogue entry")
    return None


def usage_table(kernels: list[Kernel],
                archs: tuple[str, ...] = ARCHITECTURES) -> dict[tuple[str, str], ResourceUsage | str]:
    """Resource usage of each compiled kernel on each architecture; a kernel that fails to compile maps to NVRTC's
    message, so one broken kernel does not hide the others' figures.

    Kernels that are the same program (source and entry) are compiled once: on an H100 box (NVRTC 13.0, inside
    asv's setup_cache) the second of two identical compiles came back with an empty log and no ptxas report.
    """
    table: dict[tuple[str, str], ResourceUsage | str] = {}
    programs: dict[tuple[str, str, str], ResourceUsage | str] = {}
    for kernel in kernels:
        if kernel.library:
            continue
        for arch in archs:
            program = (kernel.source, kernel.entry, arch)
            if program not in programs:
                try:
                    programs[program] = resource_usage(kernel, arch)
                except (BuildError, ValueError) as exc:
                    programs[program] = str(exc)
            table[kernel.name, arch] = programs[program]
    return table
