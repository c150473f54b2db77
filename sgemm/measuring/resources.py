"""Compile a kernel with no GPU (NVRTC from pip) and read what the compiled code says: its resource usage from
ptxas's report, and from its PTX the launch geometry it states.

Registers, shared memory, stack and spills per kernel and architecture: what a change to a kernel costs on chip,
known before any GPU runs it.

The launch geometry (threads a block, tile, cluster, dynamic shared memory, TMA boxes) is the kernel's own: each
kernel template gemm_x has a __device__ LaunchGeometry gemm_x_geometry of the same parameters (kernels/common.cuh).
The compile names it (an NVRTC name expression, which instantiates it and tells its mangled name) and its
initialiser is read from the PTX. What the kernel states is then held against what its compiled program declares
(.maxntid, .reqnctapercluster, the descriptors it takes), against itself (a TMA box against the tile, shared memory
against the stages), and against whatever its catalogue entry still states, and the launch uses it. A tree from before
kernels stated their geometry (the gate and the history build older commits) has it in its catalogue instead.
"""

from __future__ import annotations

import functools
import hashlib
import json
import math
import os
import re
import struct
import time
from concurrent.futures import ThreadPoolExecutor, as_completed
from dataclasses import asdict, dataclass
from pathlib import Path

from ..atomic import write_atomically
from ..catalogue import MAX_SHARED_BYTES, TMA_OPERANDS, Geometry, Kernel, TmaOperand, architectures, tma_problem
from .build import BuildError, kernel_source, nvrtc_options


def tracked_architectures() -> tuple[str, ...]:
    """The catalogue's tracked architectures, read when asked rather than at import: read at import, a broken
    catalogue stopped every command, `sgemm --help` included, with a traceback before it could say what was wrong."""
    return tuple(architectures())


def __getattr__(name: str):
    # `resources.ARCHITECTURES`, as it was spelled while it was read at import, stays a name of this module.
    if name == "ARCHITECTURES":
        return tracked_architectures()
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")


# A file that usage_table tells how far it is, a JSON line per batch of programs compiled, where the variable names
# one: `sgemm history` follows it (sgemm.history.progress), since asv shows nothing of the resource suite's compile
# until it is over.
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
    log = _buffer(size)
    nvrtc.nvrtcGetProgramLog(program, log)
    return bytes(log).rstrip(b"\x00 ").decode(errors="replace")


def _buffer(size: int) -> bytearray:
    """Room for NVRTC to write `size` bytes into. Never `b" " * size`: for a size of 1 (an empty log, its NUL alone)
    that is the one b" " Python shares, and NVRTC's NUL made every b" " of the process a NUL byte."""
    return bytearray(size)


@dataclass(frozen=True)
class OfflineBuild:
    cubin: bytes  # empty for a compile to PTX alone
    log: str  # NVRTC's log, with ptxas's resource report
    ptx: str
    geometry: Geometry | None  # what the kernel states of its launch; None where its source states nothing


GEOMETRY_SUFFIX = "_geometry"  # gemm_x's geometry is gemm_x_geometry, of the same template arguments
# LaunchGeometry (kernels/common.cuh) as the PTX initialiser holds it: 18 little-endian 32-bit ints.
_LAUNCH_GEOMETRY = struct.Struct("<18i")


def geometry_expression(kernel: Kernel, source: str) -> str | None:
    """The name expression of the kernel's stated geometry ("&gemm_x_geometry<args>"), or None when its source
    defines no such variable (a tree from before kernels stated their geometry)."""
    template, bracket, arguments = kernel.entry.partition("<")
    variable = template.strip() + GEOMETRY_SUFFIX
    if not re.search(rf"\b{re.escape(variable)}\b", source):
        return None
    return f"&{variable}{bracket}{arguments}"


def _lowered_name(program, expression: str, name: str) -> str:
    from cuda.bindings import nvrtc

    status, lowered = nvrtc.nvrtcGetLoweredName(program, expression.encode())
    _check(status, program, f"finding {expression}", name)
    return lowered.decode()


def read_geometry(ptx: str, lowered: str) -> Geometry:
    """The LaunchGeometry the PTX initialises the variable `lowered` with; ValueError when it has none such."""
    found = re.search(rf"\.(?:global|const)\s+\.align\s+\d+\s+\.b8\s+{re.escape(lowered)}\[(\d+)\]"
                      rf"(?:\s*=\s*\{{([^}}]*)\}})?\s*;", ptx)
    if not found:
        raise ValueError(f"the PTX has no initialised variable {lowered}")
    size = int(found[1])
    if size != _LAUNCH_GEOMETRY.size:
        raise ValueError(f"{lowered} is {size} bytes, a LaunchGeometry {_LAUNCH_GEOMETRY.size}: "
                         "kernels/common.cuh and this reader disagree")
    listed = [int(byte) for byte in found[2].split(",")] if found[2] else []
    values = _LAUNCH_GEOMETRY.unpack(bytes(listed + [0] * (size - len(listed))))  # trailing zeros go unwritten
    threads, tile, cluster = values[0:2], values[2:4], values[4:7]
    shared_bytes, stages, boxes = values[7], values[8], values[9:18]
    tma = tuple(TmaOperand(operand, (boxes[3 * i], boxes[3 * i + 1]), boxes[3 * i + 2])
                for i, operand in enumerate(TMA_OPERANDS) if any(boxes[3 * i:3 * i + 3]))
    return Geometry(threads, tile, cluster, shared_bytes, tma, stages)


def compile_offline(kernel: Kernel, arch: str) -> OfflineBuild:
    """Compile for `arch` (e.g. 'sm_90', or 'sm_90a') without a GPU, the kernel's entry tuned for that architecture
    where the catalogue names one; a virtual architecture ('compute_90a') stops at the PTX, with no cubin and no
    ptxas report."""
    from cuda.bindings import nvrtc

    kernel = kernel.on_architecture(arch)

    to_ptx = arch.startswith("compute_")
    options = [*nvrtc_options(kernel.kernel_dir), *_header_dirs(), f"--gpu-architecture={arch}",
               *(() if to_ptx else ("--ptxas-options=-v",))]
    source = kernel_source(kernel)
    stated = geometry_expression(kernel, source)
    _, program = nvrtc.nvrtcCreateProgram(source.encode(), kernel.source.encode(), 0, [], [])
    try:
        _check(nvrtc.nvrtcAddNameExpression(program, kernel.entry.encode()), program, "naming the entry", kernel.name)
        if stated:
            _check(nvrtc.nvrtcAddNameExpression(program, stated.encode()), program, "naming the geometry",
                   kernel.name)
        status = nvrtc.nvrtcCompileProgram(program, len(options), [o.encode() for o in options])
        _check(status, program, f"compiling {kernel.source} for {arch}", kernel.name)
        cubin = b""
        if not to_ptx:
            _, size = nvrtc.nvrtcGetCUBINSize(program)
            cubin = _buffer(size)
            _check(nvrtc.nvrtcGetCUBIN(program, cubin), program, "reading the cubin", kernel.name)
            cubin = bytes(cubin)
        _, size = nvrtc.nvrtcGetPTXSize(program)
        ptx = _buffer(size)
        _check(nvrtc.nvrtcGetPTX(program, ptx), program, "reading the PTX", kernel.name)
        ptx = bytes(ptx).rstrip(b"\x00 ").decode()
        try:
            geometry = read_geometry(ptx, _lowered_name(program, stated, kernel.name)) if stated else None
        except ValueError as exc:
            raise BuildError(f"{kernel.name}: reading its geometry: {exc}") from exc
        return OfflineBuild(cubin, program_log(program), ptx, geometry)
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


class GeometryError(ValueError):
    """A kernel's launch geometry is wrong or unknown; the message names the kernel and the field."""


WARPGROUP_THREADS = 128  # what a TMA kernel's warpgroups (wgmma) are made of
WARP_THREADS = 32


def _shown(field: str, value) -> str:
    if field == "tma":
        return "{" + ", ".join(f"{c.operand} = {{ box = {list(c.box)}, swizzle = {c.swizzle} }}" for c in value) + "}"
    return str(list(value)) if isinstance(value, tuple) else str(value)


def geometry_problems(kernel: Kernel, geometry: Geometry, compiled: CompiledGeometry | None = None,
                      stated_by_kernel: bool = True, static_shared_bytes: int = 0) -> list[str]:
    """Everything wrong with launching the kernel so, each naming the kernel and the field: where the geometry and
    the compiled program disagree, where the geometry disagrees with itself or with the entry's shapes, and (for a
    geometry the kernel states) where the catalogue entry states a field otherwise."""
    name, problems = kernel.name, []
    if stated_by_kernel:
        problems += [f"{name}: {field}: the catalogue states {_shown(field, value)}, the kernel "
                     f"{_shown(field, geometry.value(field))}"
                     for field, value in kernel.stated if geometry.value(field) != value]
    for field in ("block_threads", "block_tile", "cluster"):
        if min(geometry.value(field)) < 1:
            problems.append(f"{name}: {field} {_shown(field, geometry.value(field))} must be positive")
    if problems:
        return problems
    threads = math.prod(geometry.block_threads)
    if compiled and compiled.max_threads != threads:
        problems.append(f"{name}: block_threads {list(geometry.block_threads)} are {threads} threads a block, "
                        f"__launch_bounds__ says {compiled.max_threads}")
    if compiled and compiled.cluster is not None and compiled.cluster != geometry.cluster:
        problems.append(f"{name}: cluster {list(geometry.cluster)}, the kernel's __cluster_dims__ require "
                        f"{list(compiled.cluster)}")
    if compiled and compiled.descriptors != len(geometry.tma):
        problems.append(f"{name}: tma names {len(geometry.tma)} descriptors, the kernel takes {compiled.descriptors}")
    if threads % WARP_THREADS:
        problems.append(f"{name}: block_threads {list(geometry.block_threads)} are not whole warps of {WARP_THREADS}")
    if not 0 <= geometry.shared_memory <= MAX_SHARED_BYTES - static_shared_bytes:
        problems.append(f"{name}: shared_memory {geometry.shared_memory} bytes of dynamic and {static_shared_bytes} "
                        f"of static shared memory: a block has 0 to {MAX_SHARED_BYTES}")
    if geometry.tma:
        problems += _tma_problems(kernel, geometry, threads, stated_by_kernel)
    return problems


def _tma_problems(kernel: Kernel, geometry: Geometry, threads: int, stated_by_kernel: bool) -> list[str]:
    """A TMA kernel's boxes against its tile and each other, its shared memory against its stages, its threads
    against its warpgroups, and the shapes its entry admits against its tiles (it has no edge handling)."""
    name, problems = kernel.name, []
    problems += [problem for copy in geometry.tma if (problem := tma_problem(name, kernel.types, copy))]
    boxes = {copy.operand: copy.box for copy in geometry.tma}
    rows, cols = geometry.block_tile
    if "A" not in boxes or "B" not in boxes:
        return [*problems, f"{name}: tma: a kernel that copies by TMA copies A and B so, not only "
                           f"{', '.join(boxes)}"]
    step = boxes["A"][1]  # K elements a stage holds
    sharing_a = geometry.cluster[1]  # a cluster's blocks along N share A's rows: each copies its share to all
    if boxes["A"][0] * sharing_a != rows:
        problems.append(f"{name}: tma.A.box {list(boxes['A'])}: a stage of A is the tile's {rows} rows"
                        + (f", copied in {sharing_a} boxes by the blocks of a cluster row" if sharing_a > 1 else ""))
    if boxes["B"][0] != step or cols % boxes["B"][1]:
        problems.append(f"{name}: tma.B.box {list(boxes['B'])}: a stage of B is {step} rows (A's box is "
                        f"{step} columns) by column chunks that divide the tile's {cols}")
    if "C" in boxes and (rows % boxes["C"][0] or cols % boxes["C"][1]):
        problems.append(f"{name}: tma.C.box {list(boxes['C'])} does not divide the {rows}x{cols} tile")
    needed = geometry.stages * (rows * step * kernel.element_bytes("A") + step * cols * kernel.element_bytes("B"))
    if geometry.stages < 1 and not stated_by_kernel:
        pass  # an older catalogue does not say how many stages its kernel holds
    elif geometry.stages < 1:
        problems.append(f"{name}: stages {geometry.stages}: a kernel that copies by TMA holds at least one")
    elif geometry.shared_memory < needed:
        problems.append(f"{name}: shared_memory {geometry.shared_memory} bytes, where its {geometry.stages} stage(s) "
                        f"of a {rows}x{step} tile of A and a {step}x{cols} tile of B need {needed}")
    if threads % WARPGROUP_THREADS:
        problems.append(f"{name}: block_threads {list(geometry.block_threads)} are not whole warpgroups of "
                        f"{WARPGROUP_THREADS}")
    multiple = (rows * geometry.cluster[0], cols * geometry.cluster[1], step)
    if any(admitted % needed_multiple for admitted, needed_multiple in zip(kernel.multiple_of, multiple)):
        problems.append(f"{name}: multiple_of {dict(zip('mnk', kernel.multiple_of))} admits shapes its tiles do "
                        f"not cover: M, N, K must be multiples of {dict(zip('mnk', multiple))}")
    return problems


def _cache_dir(kind: str) -> Path:
    root = os.environ.get("SGEMM_CACHE_DIR") or os.path.join(
        os.environ.get("XDG_CACHE_HOME") or os.path.expanduser("~/.cache"), "sgemm")
    return Path(root) / kind


def _kept_path(kind: str, kernel: Kernel, arch: str) -> Path:
    """Where what a compile of the kernel for `arch` said is kept: keyed by the program as NVRTC sees it (the source
    with its headers' digests, the entry, the options) and NVRTC's version, so that an edit or a new NVRTC misses."""
    from cuda.bindings import nvrtc

    _, major, minor = nvrtc.nvrtcVersion()
    entry = kernel.on_architecture(arch).entry
    key = hashlib.sha256(json.dumps([kernel_source(kernel), entry, arch, nvrtc_options(kernel.kernel_dir),
                                     _header_dirs(), [major, minor]]).encode()).hexdigest()
    return _cache_dir(kind) / f"{key}.json"


def _keep(path: Path, figures: dict) -> None:
    try:
        write_atomically(path, json.dumps(figures))
    except OSError:
        pass  # a cache that cannot be written costs a compile next time, nothing more


def _ptx_arch(kernel: Kernel) -> str:
    """The virtual architecture the geometry is read at: it does not depend on one, so the kernel's first. (An entry
    tuned for another architecture is another kernel to this: Kernel.on makes it, naming that entry alone.)"""
    return kernel.architectures(tracked_architectures())[0].replace("sm_", "compute_")


def _declared_now(kernel: Kernel) -> tuple[Geometry | None, CompiledGeometry]:
    build = compile_offline(kernel, _ptx_arch(kernel))
    try:
        return build.geometry, compiled_geometry(build.ptx)
    except ValueError as exc:
        raise BuildError(f"{kernel.name}: {exc}") from exc


@functools.cache
def declared(kernel: Kernel) -> tuple[Geometry | None, CompiledGeometry]:
    """What the kernel's compiled program says of its launch: the geometry its source states (None where it states
    none) and what its PTX declares. Compiled to PTX alone, once per program text: the answer is kept on disk
    (SGEMM_CACHE_DIR, else ~/.cache/sgemm), since every asv benchmark process asks again."""
    path = _kept_path("geometry", kernel, _ptx_arch(kernel))
    try:
        kept = json.loads(path.read_text())
        return (_geometry_from(kept["geometry"]) if kept["geometry"] else None,
                CompiledGeometry(kept["max_threads"], tuple(kept["cluster"]) if kept["cluster"] else None,
                                 kept["descriptors"]))
    except (OSError, ValueError, KeyError, TypeError):
        pass  # not kept yet, or unreadable: compile
    geometry, compiled = _declared_now(kernel)
    _keep(path, {"geometry": asdict(geometry) if geometry else None, **asdict(compiled)})
    return geometry, compiled


def _geometry_from(kept: dict) -> Geometry:
    return Geometry(tuple(kept["block_threads"]), tuple(kept["block_tile"]), tuple(kept["cluster"]),
                    kept["shared_memory"], tuple(TmaOperand(copy["operand"], tuple(copy["box"]), copy["swizzle"])
                                                 for copy in kept["tma"]), kept["stages"])


def launch_geometry(kernel: Kernel) -> Geometry:
    """How to launch the kernel: the geometry its source states, checked (geometry_problems); for a tree whose
    kernels state none (an older commit), the one its catalogue entry states. GeometryError naming the kernel and
    the field when it is wrong or there is none; BuildError when the kernel does not compile."""
    if kernel.library:
        raise GeometryError(f"{kernel.name} is a {kernel.library} call: it has no launch geometry")
    own, compiled = declared(kernel)
    geometry = own or kernel.stated_geometry
    if geometry is None:
        template = kernel.entry.partition("<")[0].strip()
        missing = [field for field in ("block_threads", "block_tile") if field not in dict(kernel.stated)]
        raise GeometryError(f"{kernel.name}: no launch geometry: {kernel.source} defines no "
                            f"{template}{GEOMETRY_SUFFIX} and the catalogue entry lacks {', '.join(missing)}")
    if problems := geometry_problems(kernel, geometry, compiled, stated_by_kernel=own is not None):
        raise GeometryError("; ".join(problems))
    return geometry


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
    """ptxas's report of the kernel compiled for `arch`, kept on disk as the geometry is: a history run compiles
    every kernel for every architecture at each commit, most of them the program the commit before compiled (8 s
    of each commit on a 16-core H100 box, minutes on a 2-core CPU box)."""
    path = _kept_path("usage", kernel, arch)
    try:
        return ResourceUsage(**json.loads(path.read_text()))
    except (OSError, ValueError, TypeError):
        pass  # not kept yet, or unreadable: compile
    usage = parse_ptxas_report(compile_offline(kernel, arch).log)
    _keep(path, asdict(usage))
    return usage


def spill_problem(kernel: Kernel, arch: str, usage: ResourceUsage) -> str | None:
    """Why this usage is not acceptable for the kernel, or None: a spill, unless the catalogue allows it."""
    if usage.spills and not kernel.may_spill:
        return (f"{kernel.name} spills on {arch} ({usage.spill_store_bytes} bytes stored, {usage.spill_load_bytes} "
                f"loaded per thread); if that is intended, set `may_spill = true` in its catalogue entry")
    return None


def usage_table(kernels: list[Kernel],
                archs: tuple[str, ...] | None = None) -> dict[tuple[str, str], ResourceUsage | str]:
    """Resource usage of each compiled kernel on each architecture it is built for (its own target, or each of
    `archs`, by default the catalogue's tracked ones); a kernel that fails to compile maps to NVRTC's message, so one
    broken kernel does not hide the others' figures.

    Kernels that are the same program (source and entry) are compiled once: a second identical compile has come back
    with an empty log and no ptxas report. The programs compile in threads, since NVRTC compiles separate programs
    concurrently and lets go of Python meanwhile, and one at a time they were a large share of a history commit
    (both in lab/2026-11-25-resource-compile).
    """
    def usage_or_error(program: tuple[Kernel, str]) -> ResourceUsage | str:
        try:
            return resource_usage(*program)
        except (BuildError, ValueError) as exc:
            return str(exc)

    archs = tracked_architectures() if archs is None else archs
    builds = {}  # (kernel name, arch) -> its program
    programs = {}  # each distinct program, compiled once: (source, entry, arch) -> (kernel, arch)
    for kernel in kernels:
        for arch in kernel.architectures(archs) if not kernel.library else ():
            builds[kernel.name, arch] = program = (kernel.source, kernel.on_architecture(arch).entry, arch)
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
