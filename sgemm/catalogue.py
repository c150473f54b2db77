"""The kernel catalogue: what each GEMM kernel is, read from catalogue.toml.

This module uses the standard library only, so that the asv suite can load the *working tree's* copy by path
(its parameter lists must not depend on the package installed from the commit under test).
"""

from __future__ import annotations

import functools
import math
import re
import tomllib
from dataclasses import dataclass
from pathlib import Path

CATALOGUE_PATH = Path(__file__).with_name("catalogue.toml")
# The element types a precision may name, and their sizes in bytes.
ELEMENT_BYTES = {"fp32": 4, "fp16": 2, "bf16": 2}
ACCUMULATE_TYPES = ("fp32", "fp16")  # what cuBLAS can sum products in for these inputs

MAX_GRID_Y = 65535  # CUDA's limit on gridDim.y
MAX_SHARED_BYTES = 227 * 1024  # the most shared memory a block may have on sm_90 (dynamic and static together)
GRID_RULES = ("tiles", "persistent")
TMA_OPERANDS = ("A", "B", "C")  # the order a kernel receives their descriptors in, after its other arguments
TMA_SWIZZLES = (0, 32, 64, 128)  # bytes; 0: none
MAX_TMA_BOX = 256  # elements along each dimension of a TMA box

_REQUIRED = {"name", "technique", "min_compute_capability"}
_COMPILED = {"source", "entry", "block_threads", "block_tile", "multiple_of"}
_LAUNCH = {"shared_memory", "cluster", "grid", "tma", "target"}
_OPTIONAL = {"library", "origins", "pitch", "may_spill", "renamed_from", "sizes"} | _LAUNCH
_PRECISION_FIELDS = {"name", "input", "accumulate", "output", "baseline", "tolerance", "flop_per_sm_per_clock"}


def _default_kernel_dir() -> Path:
    installed = Path(__file__).with_name("kernels")  # the wheel maps kernels/ to sgemm/kernels
    return installed if installed.is_dir() else Path(__file__).resolve().parents[1] / "kernels"


KERNEL_DIR = _default_kernel_dir()


class CatalogueError(ValueError):
    """catalogue.toml is malformed; the message names the entry and the field."""


class UnknownKernelError(LookupError):
    def __init__(self, name: str, known: list[str]):
        super().__init__(f"unknown kernel {name!r}; known kernels: {', '.join(known)}")
        self.name = name


@dataclass(frozen=True)
class Precision:
    """A [[precision]] table: the element types of a GEMM, its baseline kernel, its error bound and its peak rate."""

    name: str  # e.g. "bf16": the first part of its kernels' names
    input: str  # element type of A and B (a key of ELEMENT_BYTES)
    accumulate: str  # the type products are summed in
    output: str  # element type of C
    baseline: str  # the kernel every kernel of this precision is measured against (cuBLAS), and the gate's control
    tolerance: float  # the largest relative error against FP64 a kernel may have
    # (compute capability, dense FLOP per SM per clock) pairs, for "% of peak"; an architecture not listed: unknown
    flop_per_sm_per_clock: tuple[tuple[int, int], ...]

    def element_type(self, operand: str) -> str:
        """The element type of matrix A, B or C."""
        return self.output if operand == "C" else self.input

    def rate(self, compute_capability: int) -> int | None:
        """Dense FLOP per SM per clock on this architecture, or None where the table does not say."""
        return dict(self.flop_per_sm_per_clock).get(compute_capability)


@dataclass(frozen=True)
class Origin:
    seed: str
    label: str


@dataclass(frozen=True)
class TmaOperand:
    """A tensor-memory-accelerator descriptor a kernel receives for one of its matrices, built on the host."""

    operand: str  # "A", "B" or "C"
    box: tuple[int, int]  # [rows, columns] of the matrix one copy moves (columns: the contiguous dimension)
    swizzle: int  # bytes: 0, 32, 64 or 128


@dataclass(frozen=True)
class Kernel:
    name: str
    technique: str
    min_compute_capability: int
    types: Precision
    origins: tuple[Origin, ...] = ()
    library: str | None = None
    source: str | None = None
    entry: str | None = None
    block_threads: tuple[int, int] = (1, 1)
    block_tile: tuple[int, int] = (1, 1)
    multiple_of: tuple[int, int, int] = (1, 1, 1)
    pitch: int = 1  # rows of A, B and C are allocated padded to a multiple of this many elements
    may_spill: bool = False  # ptxas may spill registers for this kernel without failing the resource check
    renamed_from: tuple[str, ...] = ()  # the names this kernel had before: the gate compares it with them at base
    sizes: tuple[int, ...] = ()  # the square sizes the asv suite times it at
    shared_memory: int = 0  # dynamic shared memory per block, in bytes
    cluster: tuple[int, int, int] = (1, 1, 1)  # blocks per thread-block cluster
    grid_rule: str = "tiles"  # "tiles": a block per tile of C; "persistent": as many blocks as the GPU holds at once
    tma: tuple[TmaOperand, ...] = ()  # in the order of TMA_OPERANDS
    target: str | None = None  # an architecture-specific target (e.g. "sm_90a"): compiled for it alone
    # The source tree it is built from: this package's kernels, or those of another commit (the gate and the history
    # build one kernel from two trees and time the builds side by side).
    kernel_dir: Path = KERNEL_DIR

    @property
    def precision(self) -> str:
        return self.name.split("/", 1)[0]

    @property
    def family(self) -> str:
        """The name without its precision: the asv `kernel` parameter."""
        return self.name.split("/", 1)[1]

    @property
    def tolerance(self) -> float:
        return self.types.tolerance

    @property
    def target_compute_capability(self) -> int | None:
        """The one compute capability an architecture-specific kernel runs on (90 for sm_90a), else None."""
        return int(self.target[3:-1]) if self.target else None

    def architectures(self, tracked: tuple[str, ...]) -> tuple[str, ...]:
        """The architectures it is compiled for offline: its own target, or every tracked architecture."""
        return (self.target,) if self.target else tuple(tracked)

    def gpu_problem(self, compute_capability: int) -> str | None:
        """Why it cannot run on a GPU of this compute capability, or None."""
        cc = f"{compute_capability // 10}.{compute_capability % 10}"
        if self.target and compute_capability != self.target_compute_capability:
            need = self.target_compute_capability
            return (f"{self.name} is built for {self.target}, which runs on compute capability "
                    f"{need // 10}.{need % 10} alone; this GPU has {cc}")
        if compute_capability < self.min_compute_capability:
            return f"{self.name} needs compute capability {self.min_compute_capability / 10:.1f}, this GPU has {cc}"
        return None

    def shape_problem(self, m: int, n: int, k: int) -> str | None:
        """Why this kernel cannot compute an M x N x K product, or None if it can."""
        if min(m, n, k) < 1:
            return f"M, N, K must be at least 1 (got {m}x{n}x{k})"
        for dim, size, multiple in zip("MNK", (m, n, k), self.multiple_of):
            if size % multiple:
                return f"{self.name} needs {dim} to be a multiple of {multiple} (got {dim}={size})"
        if self.library:
            return None
        tiles = self.tiles(m, n)
        if self.grid_rule == "tiles" and tiles[1] > MAX_GRID_Y:
            return f"{self.name} puts M on the grid's y axis, which allows {MAX_GRID_Y} blocks: M={m} needs more"
        if self.grid_rule == "tiles" and (tiles[0] % self.cluster[0] or tiles[1] % self.cluster[1]):
            return (f"{self.name} runs in clusters of {self.cluster[0]}x{self.cluster[1]} blocks: its "
                    f"{tiles[0]}x{tiles[1]} tiles at {m}x{n}x{k} do not divide into them")
        if (tiles[0] * tiles[1]) % math.prod(self.cluster):
            return (f"{self.name} runs in clusters of {math.prod(self.cluster)} blocks: its {tiles[0] * tiles[1]} "
                    f"tiles at {m}x{n}x{k} do not divide into them")
        lda, ldb, ldc = self.leading_dimensions(m, n, k)
        if max(m * lda, k * ldb, m * ldc) >= 2**31:
            return f"{self.name} indexes its matrices with 32-bit ints: {m}x{n}x{k} has more than 2^31 elements"
        strides = dict(zip(TMA_OPERANDS, (lda, ldb, ldc)))
        for copy in self.tma:
            stride_bytes = strides[copy.operand] * self.element_bytes(copy.operand)
            if stride_bytes % 16:
                return (f"{self.name} copies {copy.operand} with the TMA, whose row stride must be a multiple of 16 "
                        f"bytes: {stride_bytes} at {m}x{n}x{k}")
        return None

    def element_bytes(self, operand: str) -> int:
        """Bytes per element of A, B or C."""
        return ELEMENT_BYTES[self.types.element_type(operand)]

    def leading_dimensions(self, m: int, n: int, k: int) -> tuple[int, int, int]:
        """Row strides (in elements) of A, B and C: K, N, N rounded up to the pitch."""
        return tuple(math.ceil(size / self.pitch) * self.pitch for size in (k, n, n))

    def tiles(self, m: int, n: int) -> tuple[int, int]:
        """Tiles of C across N and down M."""
        rows, cols = self.block_tile
        return math.ceil(n / cols), math.ceil(m / rows)

    def grid(self, m: int, n: int, resident_blocks: int | None = None) -> tuple[int, int, int]:
        """The launch grid: a block per tile (x over N, y over M), or for a persistent kernel as many blocks as the
        GPU holds at once (`resident_blocks`, a multiple of the cluster), never more than there are tiles."""
        across, down = self.tiles(m, n)
        if self.grid_rule == "tiles":
            return (across, down, 1)
        if not resident_blocks:
            raise ValueError(f"{self.name} has a persistent grid: how many blocks the GPU holds at once is needed")
        return (min(resident_blocks, across * down), 1, 1)

    def block(self) -> tuple[int, int, int]:
        return (*self.block_threads, 1)


def _pair(entry: str, field: str, value) -> tuple[int, int]:
    if not (isinstance(value, list) and len(value) == 2 and all(isinstance(v, int) and v > 0 for v in value)):
        raise CatalogueError(f"{entry}: {field} must be two positive integers, got {value!r}")
    return (value[0], value[1])


def _renamed_from(name: str, value) -> tuple[str, ...]:
    old_names = [value] if isinstance(value, str) else value
    if not (isinstance(old_names, list) and all(isinstance(old, str) for old in old_names)):
        raise CatalogueError(f"{name}: renamed_from must be a kernel name or a list of them, got {value!r}")
    precision = name.partition("/")[0]
    for old in old_names:
        # Another precision is another problem: its figures say nothing about this kernel's.
        old_precision, _, family = old.partition("/")
        if old == name or old_precision != precision or not family or "/" in family:
            raise CatalogueError(f"{name}: renamed_from {old!r} must be another '{precision}/<kernel>' name")
    return tuple(old_names)


def _sizes(name: str, value, suite: dict) -> tuple[int, ...]:
    """The entry's suite sizes: its own, or [suite] kernel_sizes (or, without those, every size of the suite)."""
    every = suite.get("sizes", [])
    sizes = suite.get("kernel_sizes", every) if value is None else value
    if not (isinstance(sizes, list) and sizes and all(size in every for size in sizes)):
        raise CatalogueError(f"{name}: sizes must be some of the suite's sizes {every}, got {value!r}")
    return tuple(sizes)


def _tma(name: str, value, types: Precision) -> tuple[TmaOperand, ...]:
    if not isinstance(value, dict) or not set(value) <= set(TMA_OPERANDS):
        raise CatalogueError(f"{name}: tma maps operands {TMA_OPERANDS} to {{ box = [rows, cols], swizzle = bytes }}")
    copies = []
    for operand in TMA_OPERANDS:
        if operand not in value:
            continue
        spec = value[operand]
        if not isinstance(spec, dict) or set(spec) != {"box", "swizzle"}:
            raise CatalogueError(f"{name}: tma.{operand} needs exactly box and swizzle, got {spec!r}")
        box = _pair(name, f"tma.{operand}.box", spec["box"])
        if max(box) > MAX_TMA_BOX:
            raise CatalogueError(f"{name}: tma.{operand}.box {list(box)}: at most {MAX_TMA_BOX} a dimension")
        if spec["swizzle"] not in TMA_SWIZZLES:
            raise CatalogueError(f"{name}: tma.{operand}.swizzle must be one of {TMA_SWIZZLES} bytes")
        row_bytes = box[1] * ELEMENT_BYTES[types.element_type(operand)]
        if spec["swizzle"] and row_bytes > spec["swizzle"]:
            raise CatalogueError(f"{name}: tma.{operand}: a row of the box ({row_bytes} bytes) must fit the "
                                 f"{spec['swizzle']}-byte swizzle")
        copies.append(TmaOperand(operand, box, spec["swizzle"]))
    return tuple(copies)


def _launch_fields(name: str, table: dict, types: Precision) -> dict:
    """shared_memory, cluster, grid, tma and target, checked."""
    shared = table.get("shared_memory", 0)
    if not (isinstance(shared, int) and 0 <= shared <= MAX_SHARED_BYTES):
        raise CatalogueError(f"{name}: shared_memory must be 0 to {MAX_SHARED_BYTES} bytes, got {shared!r}")
    cluster = table.get("cluster", [1, 1, 1])
    if not (isinstance(cluster, list) and len(cluster) == 3 and all(isinstance(c, int) and c > 0 for c in cluster)):
        raise CatalogueError(f"{name}: cluster must be three positive integers, got {cluster!r}")
    grid = table.get("grid", "tiles")
    if grid not in GRID_RULES:
        raise CatalogueError(f"{name}: grid must be one of {GRID_RULES}, got {grid!r}")
    target = table.get("target")
    if target is not None and not (isinstance(target, str) and re.fullmatch(r"sm_\d+a", target)):
        raise CatalogueError(f"{name}: target names an architecture-specific target such as 'sm_90a', got {target!r}")
    return dict(shared_memory=shared, cluster=tuple(cluster), grid_rule=grid, target=target,
                tma=_tma(name, table.get("tma", {}), types))


def _kernel_from_table(table: dict, kernel_dir: Path, precisions: dict[str, Precision], suite: dict) -> Kernel:
    name = table.get("name", "<unnamed>")
    missing = _REQUIRED - table.keys()
    unknown = table.keys() - _REQUIRED - _COMPILED - _OPTIONAL
    if missing or unknown:
        raise CatalogueError(f"{name}: missing fields {sorted(missing)}, unknown fields {sorted(unknown)}")
    precision, _, family = name.partition("/")
    if precision not in precisions or not family or "/" in family:
        raise CatalogueError(f"{name}: a name is '<precision>/<kernel>' with precision one of {tuple(precisions)}")
    origins = tuple(Origin(o["seed"], o["label"]) for o in table.get("origins", []))
    common = dict(
        name=name,
        technique=table["technique"],
        min_compute_capability=int(table["min_compute_capability"]),
        types=precisions[precision],
        origins=origins,
        renamed_from=_renamed_from(name, table.get("renamed_from", [])),
        sizes=_sizes(name, table.get("sizes"), suite),
    )
    if "library" in table:
        if extra := table.keys() & (_COMPILED | _LAUNCH | {"pitch", "may_spill"}):
            raise CatalogueError(f"{name}: a library kernel has no {sorted(extra)}")
        return Kernel(library=table["library"], **common)

    if missing := _COMPILED - table.keys():
        raise CatalogueError(f"{name}: a compiled kernel needs {sorted(missing)}")
    if not (kernel_dir / table["source"]).is_file():
        raise CatalogueError(f"{name}: source {table['source']!r} is not in {kernel_dir}")
    multiple_of = table["multiple_of"]
    if set(multiple_of) != {"m", "n", "k"}:
        raise CatalogueError(f"{name}: multiple_of needs exactly m, n and k, got {sorted(multiple_of)}")
    pitch = table.get("pitch", 1)
    if not (isinstance(pitch, int) and pitch > 0):
        raise CatalogueError(f"{name}: pitch must be a positive integer, got {pitch!r}")
    if not isinstance(table.get("may_spill", False), bool):
        raise CatalogueError(f"{name}: may_spill must be true or false")
    return Kernel(
        kernel_dir=kernel_dir,
        source=table["source"],
        entry=table["entry"],
        block_threads=_pair(name, "block_threads", table["block_threads"]),
        block_tile=_pair(name, "block_tile", table["block_tile"]),
        multiple_of=(multiple_of["m"], multiple_of["n"], multiple_of["k"]),
        pitch=pitch,
        may_spill=table.get("may_spill", False),
        **_launch_fields(name, table, common["types"]),
        **common,
    )


@functools.lru_cache(maxsize=8)
def _parsed(text: str) -> dict:
    return tomllib.loads(text)


def _read(path: Path) -> dict:
    """The file's tables (shared: read them, never change them). Parsed once per distinct text: every asv benchmark
    process asks for its kernel, thousands a run, and a parse costs more than the rest of a reading one together."""
    try:
        return _parsed(Path(path).read_text())
    except (OSError, tomllib.TOMLDecodeError) as exc:
        raise CatalogueError(f"cannot read {path}: {exc}") from exc


def _precision_from_table(table: dict) -> Precision:
    name = table.get("name", "<unnamed>")
    if missing := _PRECISION_FIELDS - table.keys():
        raise CatalogueError(f"precision {name}: missing fields {sorted(missing)}")
    if unknown := table.keys() - _PRECISION_FIELDS:
        raise CatalogueError(f"precision {name}: unknown fields {sorted(unknown)}")
    if not re.fullmatch(r"[a-z0-9]+", name):
        raise CatalogueError(f"precision {name!r}: a name is lower-case letters and digits")
    for field, allowed in (("input", tuple(ELEMENT_BYTES)), ("accumulate", ACCUMULATE_TYPES),
                           ("output", tuple(ELEMENT_BYTES))):
        if table[field] not in allowed:
            raise CatalogueError(f"precision {name}: {field} must be one of {allowed}, got {table[field]!r}")
    tolerance = table["tolerance"]
    if not (isinstance(tolerance, float) and 0 < tolerance < 1):
        raise CatalogueError(f"precision {name}: tolerance must be a relative error between 0 and 1, "
                             f"got {tolerance!r}")
    try:
        rates = tuple((int(cc), int(rate)) for cc, rate in table["flop_per_sm_per_clock"].items())
    except (AttributeError, ValueError) as exc:
        raise CatalogueError(f"precision {name}: flop_per_sm_per_clock maps compute capabilities (e.g. 90) to "
                             f"whole rates: {exc}") from exc
    return Precision(name, table["input"], table["accumulate"], table["output"], table["baseline"], tolerance, rates)


def load_precisions(path: Path = CATALOGUE_PATH) -> dict[str, Precision]:
    """The [[precision]] tables by name, in file order (the order the suite's precision parameter lists them)."""
    precisions: dict[str, Precision] = {}
    for table in _read(path).get("precision", []):
        precision = _precision_from_table(table)
        if precision.name in precisions:
            raise CatalogueError(f"precision {precision.name}: listed twice")
        precisions[precision.name] = precision
    return precisions


def load_catalogue(path: Path = CATALOGUE_PATH, kernel_dir: Path = KERNEL_DIR) -> dict[str, Kernel]:
    """All kernels by name, in file order. Raises CatalogueError naming the first bad entry."""
    data = _read(path)
    precisions = load_precisions(path)
    suite = _suite(path)
    kernels: dict[str, Kernel] = {}
    for table in data.get("kernel", []):
        kernel = _kernel_from_table(table, Path(kernel_dir), precisions, suite)
        if kernel.name in kernels:
            raise CatalogueError(f"{kernel.name}: listed twice")
        kernels[kernel.name] = kernel
    _check_old_names(kernels)
    for precision in precisions.values():
        baseline(precision.name, kernels)
    return kernels


def _check_old_names(kernels: dict[str, Kernel]) -> None:
    """An old name leads to one kernel, and is no longer a kernel's own: else two histories would claim it."""
    claimed: dict[str, str] = {}
    for kernel in kernels.values():
        for old in kernel.renamed_from:
            if old in kernels:
                raise CatalogueError(f"{kernel.name}: renamed_from {old!r}, which is still listed as a kernel")
            if old in claimed:
                raise CatalogueError(f"{kernel.name}: renamed_from {old!r}, which {claimed[old]} was renamed from")
            claimed[old] = kernel.name


def _suite(path: Path) -> dict:
    try:
        return _read(path)["suite"]
    except (CatalogueError, KeyError) as exc:
        raise CatalogueError(f"cannot read the [suite] table of {path}: {exc}") from exc


def default_sizes(path: Path = CATALOGUE_PATH) -> list[int]:
    """Every square size of the asv suite (each kernel is timed at those of them its entry lists)."""
    return list(_suite(path)["sizes"])


def precision_names(path: Path = CATALOGUE_PATH) -> list[str]:
    """The precisions in catalogue order: the asv suite's `precision` parameter."""
    return list(load_precisions(path))


@dataclass(frozen=True)
class Seed:
    file: str  # a worklog in seeds/, or the address of a public one: what a kernel's origins name
    title: str
    sizes: tuple[int, ...]  # the square sizes the worklog's own tables report
    short_name: str = ""  # what reports and `--seed` call it; the file's first three characters by default

    @property
    def number(self) -> str:
        return self.short_name or self.file[:3]


def seeds(path: Path = CATALOGUE_PATH) -> list[Seed]:
    """The [[seed]] tables: the worklogs the kernels' origins point to, in file order."""
    try:
        tables = _read(path).get("seed", [])
        return [Seed(t["file"], t["title"], tuple(int(size) for size in t["sizes"]), t.get("name", ""))
                for t in tables]
    except (CatalogueError, KeyError, TypeError, ValueError) as exc:
        raise CatalogueError(f"cannot read the [[seed]] tables of {path}: {exc}") from exc


def sweep(path: Path = CATALOGUE_PATH) -> tuple[list[str], list[tuple[int, int, int]]]:
    """Seed 003's M/N/K sweep: the kernel names and the (M, N, K) shapes the asv class GemmShapes runs."""
    suite = _suite(path)
    try:
        shapes = [tuple(int(part) for part in text.split("x")) for text in suite["sweep_shapes"]]
    except (KeyError, ValueError) as exc:
        raise CatalogueError(f"{path}: [suite] sweep_shapes must be 'MxNxK' strings: {exc}") from exc
    if any(len(shape) != 3 or min(shape) < 1 for shape in shapes):
        raise CatalogueError(f"{path}: [suite] sweep_shapes must be 'MxNxK' with M, N, K >= 1")
    return list(suite.get("sweep_kernels", [])), shapes


def reference(path: Path = CATALOGUE_PATH) -> str | None:
    """The commit the history times every kernel against, paired in one process ([suite] reference), or None."""
    value = _suite(path).get("reference")
    if value is not None and not (isinstance(value, str) and re.fullmatch(r"[0-9a-f]{40}", value)):
        raise CatalogueError(f"{path}: [suite] reference must be a full commit hash (40 hex digits), got {value!r}")
    return value


def architectures(path: Path = CATALOGUE_PATH) -> list[str]:
    """The GPU architectures (e.g. 'sm_90') whose resource usage is tracked."""
    return list(_suite(path)["architectures"])


def baseline(precision: str, kernels: dict[str, Kernel] | None = None) -> Kernel:
    """The library kernel that a precision's kernels are measured against (cuBLAS), and the gate's control: the
    one its [[precision]] table names."""
    kernels = load_catalogue() if kernels is None else kernels
    types = next((k.types for k in kernels.values() if k.precision == precision), None)
    if types is None:
        raise CatalogueError(f"precision {precision!r} has no kernels in the catalogue")
    found = kernels.get(types.baseline)
    if found is None or not found.library or found.precision != precision:
        raise CatalogueError(f"precision {precision!r} names {types.baseline!r} as its baseline, which is not a "
                             f"library kernel of that precision in the catalogue")
    return found


def get_kernel(name: str, kernels: dict[str, Kernel] | None = None) -> Kernel:
    kernels = load_catalogue() if kernels is None else kernels
    if name not in kernels:
        raise UnknownKernelError(name, list(kernels))
    return kernels[name]


def select(patterns: list[str], kernels: dict[str, Kernel] | None = None) -> list[Kernel]:
    """Kernels whose name equals a pattern or starts with it followed by '/' (e.g. 'fp32' selects every FP32 kernel).

    An empty list selects everything; a pattern that matches nothing raises UnknownKernelError.
    """
    kernels = load_catalogue() if kernels is None else kernels
    if not patterns:
        return list(kernels.values())
    chosen: dict[str, Kernel] = {}
    for pattern in patterns:
        matches = [k for k in kernels.values() if k.name == pattern or k.name.startswith(pattern.rstrip("/") + "/")]
        if not matches:
            raise UnknownKernelError(pattern, list(kernels))
        chosen.update((k.name, k) for k in matches)
    return list(chosen.values())
