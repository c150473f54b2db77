"""The kernel catalogue: what each GEMM kernel is, read from catalogue.toml.

This module uses the standard library only, so that the asv suite can load the *working tree's* copy by path
(its parameter lists must not depend on the package installed from the commit under test).
"""

from __future__ import annotations

import math
import tomllib
from dataclasses import dataclass
from pathlib import Path

CATALOGUE_PATH = Path(__file__).with_name("catalogue.toml")
PRECISIONS = ("fp32", "fp16")
# Tolerances on the relative error against an FP64 reference. FP16 kernels are compared with the FP64 product of
# the FP16-rounded inputs, so only their FP32 accumulation is judged.
TOLERANCE = {"fp32": 1e-5, "fp16": 1e-4}

MAX_GRID_Y = 65535  # CUDA's limit on gridDim.y

_REQUIRED = {"name", "technique", "min_compute_capability"}
_COMPILED = {"source", "entry", "block_threads", "block_tile", "multiple_of"}
_OPTIONAL = {"library", "origins", "pitch", "may_spill", "renamed_from"}


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
class Origin:
    seed: str
    label: str


@dataclass(frozen=True)
class Kernel:
    name: str
    technique: str
    min_compute_capability: int
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

    @property
    def precision(self) -> str:
        return self.name.split("/", 1)[0]

    @property
    def family(self) -> str:
        """The name without its precision: the asv `kernel` parameter."""
        return self.name.split("/", 1)[1]

    @property
    def tolerance(self) -> float:
        return TOLERANCE[self.precision]

    def shape_problem(self, m: int, n: int, k: int) -> str | None:
        """Why this kernel cannot compute an M x N x K product, or None if it can."""
        if min(m, n, k) < 1:
            return f"M, N, K must be at least 1 (got {m}x{n}x{k})"
        for dim, size, multiple in zip("MNK", (m, n, k), self.multiple_of):
            if size % multiple:
                return f"{self.name} needs {dim} to be a multiple of {multiple} (got {dim}={size})"
        if self.library:
            return None
        if self.grid(m, n)[1] > MAX_GRID_Y:
            return f"{self.name} puts M on the grid's y axis, which allows {MAX_GRID_Y} blocks: M={m} needs more"
        lda, ldb, ldc = self.leading_dimensions(m, n, k)
        if max(m * lda, k * ldb, m * ldc) >= 2**31:
            return f"{self.name} indexes its matrices with 32-bit ints: {m}x{n}x{k} has more than 2^31 elements"
        return None

    def leading_dimensions(self, m: int, n: int, k: int) -> tuple[int, int, int]:
        """Row strides (in elements) of A, B and C: K, N, N rounded up to the pitch."""
        return tuple(math.ceil(size / self.pitch) * self.pitch for size in (k, n, n))

    def grid(self, m: int, n: int) -> tuple[int, int, int]:
        rows, cols = self.block_tile
        return (math.ceil(n / cols), math.ceil(m / rows), 1)

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


def _kernel_from_table(table: dict, kernel_dir: Path) -> Kernel:
    name = table.get("name", "<unnamed>")
    missing = _REQUIRED - table.keys()
    unknown = table.keys() - _REQUIRED - _COMPILED - _OPTIONAL
    if missing or unknown:
        raise CatalogueError(f"{name}: missing fields {sorted(missing)}, unknown fields {sorted(unknown)}")
    precision, _, family = name.partition("/")
    if precision not in PRECISIONS or not family or "/" in family:
        raise CatalogueError(f"{name}: a name is '<precision>/<kernel>' with precision one of {PRECISIONS}")
    origins = tuple(Origin(o["seed"], o["label"]) for o in table.get("origins", []))
    common = dict(
        name=name,
        technique=table["technique"],
        min_compute_capability=int(table["min_compute_capability"]),
        origins=origins,
        renamed_from=_renamed_from(name, table.get("renamed_from", [])),
    )
    if "library" in table:
        if extra := table.keys() & (_COMPILED | {"pitch", "may_spill"}):
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
        source=table["source"],
        entry=table["entry"],
        block_threads=_pair(name, "block_threads", table["block_threads"]),
        block_tile=_pair(name, "block_tile", table["block_tile"]),
        multiple_of=(multiple_of["m"], multiple_of["n"], multiple_of["k"]),
        pitch=pitch,
        may_spill=table.get("may_spill", False),
        **common,
    )


def load_catalogue(path: Path = CATALOGUE_PATH, kernel_dir: Path = KERNEL_DIR) -> dict[str, Kernel]:
    """All kernels by name, in file order. Raises CatalogueError naming the first bad entry."""
    try:
        data = tomllib.loads(Path(path).read_text())
    except (OSError, tomllib.TOMLDecodeError) as exc:
        raise CatalogueError(f"cannot read {path}: {exc}") from exc
    kernels: dict[str, Kernel] = {}
    for table in data.get("kernel", []):
        kernel = _kernel_from_table(table, Path(kernel_dir))
        if kernel.name in kernels:
            raise CatalogueError(f"{kernel.name}: listed twice")
        kernels[kernel.name] = kernel
    _check_old_names(kernels)
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
        return tomllib.loads(Path(path).read_text())["suite"]
    except (OSError, tomllib.TOMLDecodeError, KeyError) as exc:
        raise CatalogueError(f"cannot read the [suite] table of {path}: {exc}") from exc


def default_sizes(path: Path = CATALOGUE_PATH) -> list[int]:
    """The square sizes the asv suite and `sgemm bench` sweep by default."""
    return list(_suite(path)["sizes"])


@dataclass(frozen=True)
class Seed:
    file: str
    title: str
    size: int  # the square size the seed's own table reports

    @property
    def number(self) -> str:
        return self.file[:3]


def seeds(path: Path = CATALOGUE_PATH) -> list[Seed]:
    """The [[seed]] tables: the worklogs the kernels' origins point to, in file order."""
    try:
        tables = tomllib.loads(Path(path).read_text()).get("seed", [])
        return [Seed(t["file"], t["title"], int(t["size"])) for t in tables]
    except (OSError, tomllib.TOMLDecodeError, KeyError, TypeError, ValueError) as exc:
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


def architectures(path: Path = CATALOGUE_PATH) -> list[str]:
    """The GPU architectures (e.g. 'sm_90') whose resource usage is tracked."""
    return list(_suite(path)["architectures"])


def baseline(precision: str, kernels: dict[str, Kernel] | None = None) -> Kernel:
    """The library kernel that a precision's kernels are measured against (cuBLAS), and the gate's control."""
    kernels = load_catalogue() if kernels is None else kernels
    found = [k for k in kernels.values() if k.library and k.precision == precision]
    if len(found) != 1:
        raise CatalogueError(f"precision {precision!r} needs one library kernel as its baseline, the catalogue has "
                             f"{len(found)}")
    return found[0]


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
