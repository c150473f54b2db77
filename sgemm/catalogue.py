"""The kernel catalogue: what each GEMM kernel is, read from catalogue.toml.

This module uses the standard library only, so that the asv suite can load the *working tree's* copy by path
(its parameter lists must not depend on the package installed from the commit under test).
"""

from __future__ import annotations

import difflib
import functools
import math
import re
import tomllib
from collections.abc import Callable
from dataclasses import dataclass, replace
from pathlib import Path

CATALOGUE_PATH = Path(__file__).with_name("catalogue.toml")


@dataclass(frozen=True)
class ElementFormat:
    """An element type a precision may name: its size, and how CUDA C++ spells it (what `{input}` or `{output}` in
    an entry becomes). How the GPU side holds it is sgemm/measuring/elements.py, keyed by the same names."""

    bytes: int
    cxx: str


ELEMENT_FORMATS = {"fp32": ElementFormat(4, "float"), "fp16": ElementFormat(2, "__half"),
                   "bf16": ElementFormat(2, "__nv_bfloat16")}
ACCUMULATE_TYPES = ("fp32", "fp16")  # what cuBLAS can sum products in for these inputs

# Every kernel takes A (M x K), B (K x N) and C (M x N), each row-major: an operand's (rows, columns) as dimensions of
# the problem. The order is also the order a kernel receives their TMA descriptors in, after its other arguments.
OPERAND_DIMS = {"A": ("m", "k"), "B": ("k", "n"), "C": ("m", "n")}
TMA_OPERANDS = tuple(OPERAND_DIMS)

MAX_GRID_Y = 65535  # CUDA's limit on gridDim.y
MAX_SHARED_BYTES = 227 * 1024  # the most shared memory a block may have on sm_90 (dynamic and static together)
GRID_RULES = ("tiles", "persistent")
TMA_SWIZZLES = (0, 32, 64, 128)  # bytes; 0: none
MAX_TMA_BOX = 256  # elements along each dimension of a TMA box

# Which fields of a [[kernel]] table a kernel must have; what each may hold is _KERNEL_FIELDS (below).
_REQUIRED = {"name", "technique"}
_COMPILED = {"source", "entry", "multiple_of"}
# The launch geometry. A kernel states it in its source (gemm_x_geometry, read from the compiled program); older
# catalogues state it here, and a field still written here is held against the kernel's own value.
GEOMETRY_FIELDS = ("block_threads", "block_tile", "cluster", "shared_memory", "tma")
_LAUNCH = {"grid", "target", "tuned_entries"}
# Placeholders an entry may hold, filled from its precision: the C++ element types of A and B, and of C.
_ENTRY_PLACEHOLDERS = {"{input}": "input", "{output}": "output"}


def _default_kernel_dir() -> Path:
    installed = Path(__file__).with_name("kernels")  # the wheel maps kernels/ to sgemm/kernels
    return installed if installed.is_dir() else Path(__file__).resolve().parents[1] / "kernels"


KERNEL_DIR = _default_kernel_dir()


class CatalogueError(ValueError):
    """catalogue.toml is malformed; the message names the entry and the field."""


class UnknownKernelError(LookupError):
    """A name or prefix no kernel answers to: the message offers the closest names, not all of them (`sgemm list`
    shows every one)."""

    CLOSEST = 5

    def __init__(self, name: str, known: list[str]):
        prefixes = sorted({k.partition("/")[0] for k in known})
        close = difflib.get_close_matches(name, [*known, *prefixes], n=self.CLOSEST, cutoff=0.5)
        hint = (f"did you mean {', '.join(close)}?" if close
                else f"names start with {', '.join(p + '/' for p in prefixes)}")
        super().__init__(f"unknown kernel {name!r}; {hint} (`sgemm list` shows all {len(known)})")
        self.name = name


@dataclass(frozen=True)
class Precision:
    """A [[precision]] table: the element types of a GEMM, its baseline kernel, its error bound and its peak rate."""

    name: str  # e.g. "bf16": the first part of its kernels' names
    input: str  # element type of A and B (a key of ELEMENT_FORMATS)
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
class Geometry:
    """How a compiled kernel is launched: what the kernel states of itself (its gemm_x_geometry), or what an older
    catalogue entry stated for it."""

    block_threads: tuple[int, int]  # blockDim x, y
    block_tile: tuple[int, int]  # rows, cols of C a block computes (per tile it takes, for a persistent kernel)
    # Blocks per thread-block cluster, x, y, z; a persistent kernel's x runs along M and y along N (tiles it places)
    cluster: tuple[int, int, int] = (1, 1, 1)
    shared_memory: int = 0  # dynamic shared memory per block, in bytes
    tma: tuple[TmaOperand, ...] = ()  # in the order of TMA_OPERANDS
    stages: int = 0  # K steps of TMA tiles the shared memory holds at once (0: none, or not stated)

    def block(self) -> tuple[int, int, int]:
        return (*self.block_threads, 1)

    def tiles(self, m: int, n: int) -> tuple[int, int]:
        """Tiles of C across N and down M."""
        rows, cols = self.block_tile
        return math.ceil(n / cols), math.ceil(m / rows)

    def value(self, field: str):
        """A field by its catalogue name."""
        return getattr(self, field)


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
    multiple_of: tuple[int, int, int] = (1, 1, 1)
    pitch: int = 1  # rows of A, B and C are allocated padded to a multiple of this many elements
    may_spill: bool = False  # ptxas may spill registers for this kernel without failing the resource check
    renamed_from: tuple[str, ...] = ()  # the names this kernel had before: the gate compares it with them at base
    sizes: tuple[int, ...] = ()  # the square sizes the asv suite times it at
    grid_rule: str = "tiles"  # "tiles": a block per tile of C; "persistent": as many blocks as the GPU holds at once
    target: str | None = None  # an architecture-specific target (e.g. "sm_90a"): compiled for it alone
    # (compute capability, entry) pairs: the template instantiation compiled for, and run on, GPUs of that compute
    # capability in place of `entry` (tile parameters tuned per architecture); `on` picks one.
    tuned_entries: tuple[tuple[int, str], ...] = ()
    # The geometry fields its entry writes, (field, value) in GEOMETRY_FIELDS order: all of them in an older
    # catalogue, whose kernels state none; none in this one. The launch takes the kernel's own geometry and holds
    # these against it (sgemm/measuring/resources.py).
    stated: tuple[tuple[str, object], ...] = ()
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

    def on(self, compute_capability: int) -> Kernel:
        """The kernel as it is built for GPUs of this compute capability: its entry tuned for that architecture
        where the catalogue names one, else itself. What it returns names one entry alone (no tuned entries), so
        that it stays that build whatever it is compiled for afterwards."""
        if not self.tuned_entries:
            return self
        return replace(self, entry=dict(self.tuned_entries).get(compute_capability, self.entry), tuned_entries=())

    def on_architecture(self, arch: str) -> Kernel:
        """`on` for an architecture's name: 'sm_90', 'sm_90a' or 'compute_90' is compute capability 90."""
        found = re.fullmatch(r"(?:sm|compute)_(\d+)a?", arch)
        return self.on(int(found[1])) if found else self

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
        """Why this kernel cannot compute an M x N x K product by what its entry says, or None. What its launch
        geometry adds (grid limits, clusters, TMA strides) is launch_problem; sgemm.measuring.launch.shape_problem
        asks both."""
        if min(m, n, k) < 1:
            return f"M, N, K must be at least 1 (got {m}x{n}x{k})"
        for dim, size, multiple in zip("MNK", (m, n, k), self.multiple_of):
            if size % multiple:
                return f"{self.name} needs {dim} to be a multiple of {multiple} (got {dim}={size})"
        if self.library:
            return None
        if max(rows * stride for (rows, _), stride in zip(
                (operand_shape(operand, m, n, k) for operand in OPERAND_DIMS), self.leading_dimensions(m, n, k))) \
                >= 2**31:
            return f"{self.name} indexes its matrices with 32-bit ints: {m}x{n}x{k} has more than 2^31 elements"
        return None

    def launch_problem(self, geometry: Geometry, m: int, n: int, k: int) -> str | None:
        """Why this kernel, launched with this geometry, cannot compute an M x N x K product, or None."""
        tiles = geometry.tiles(m, n)
        cluster = geometry.cluster
        if self.grid_rule == "tiles" and tiles[1] > MAX_GRID_Y:
            return f"{self.name} puts M on the grid's y axis, which allows {MAX_GRID_Y} blocks: M={m} needs more"
        if self.grid_rule == "tiles" and (tiles[0] % cluster[0] or tiles[1] % cluster[1]):
            return (f"{self.name} runs in clusters of {cluster[0]}x{cluster[1]} blocks: its "
                    f"{tiles[0]}x{tiles[1]} tiles at {m}x{n}x{k} do not divide into them")
        if (tiles[0] * tiles[1]) % math.prod(cluster):
            return (f"{self.name} runs in clusters of {math.prod(cluster)} blocks: its {tiles[0] * tiles[1]} "
                    f"tiles at {m}x{n}x{k} do not divide into them")
        strides = dict(zip(OPERAND_DIMS, self.leading_dimensions(m, n, k)))
        for copy in geometry.tma:
            stride_bytes = strides[copy.operand] * self.element_bytes(copy.operand)
            if stride_bytes % 16:
                return (f"{self.name} copies {copy.operand} with the TMA, whose row stride must be a multiple of 16 "
                        f"bytes: {stride_bytes} at {m}x{n}x{k}")
        return None

    def grid(self, geometry: Geometry, m: int, n: int, resident_blocks: int | None = None) -> tuple[int, int, int]:
        """The launch grid: a block per tile (x over N, y over M), or for a persistent kernel as many blocks as the
        GPU holds at once (`resident_blocks`, a multiple of the cluster), never more than there are tiles, in one row
        of clusters: as high as a cluster (its blocks along N, for a kernel that places its tiles itself)."""
        across, down = geometry.tiles(m, n)
        if self.grid_rule == "tiles":
            return (across, down, 1)
        if not resident_blocks:
            raise ValueError(f"{self.name} has a persistent grid: how many blocks the GPU holds at once is needed")
        high = geometry.cluster[1]
        return (min(resident_blocks, across * down) // high, high, 1)

    def element_bytes(self, operand: str) -> int:
        """Bytes per element of A, B or C."""
        return ELEMENT_FORMATS[self.types.element_type(operand)].bytes

    def leading_dimensions(self, m: int, n: int, k: int) -> tuple[int, int, int]:
        """Row strides (in elements) of A, B and C: their columns rounded up to the pitch."""
        return tuple(math.ceil(cols / self.pitch) * self.pitch
                     for _, cols in (operand_shape(operand, m, n, k) for operand in OPERAND_DIMS))

    @property
    def stated_geometry(self) -> Geometry | None:
        """The geometry its entry states whole (an older catalogue's: threads and tile, the rest defaulted as such a
        catalogue meant them), or None."""
        stated = dict(self.stated)
        if not {"block_threads", "block_tile"} <= stated.keys():
            return None
        return Geometry(**stated)


def operand_shape(operand: str, m: int, n: int, k: int) -> tuple[int, int]:
    """(rows, columns) of A, B or C in an M x N x K product."""
    sizes = {"m": m, "n": n, "k": k}
    rows, cols = OPERAND_DIMS[operand]
    return sizes[rows], sizes[cols]


# --- What each table's fields must hold -----------------------------------------------------------------------------
#
# Every table the catalogue has is checked against a schema (field -> kind) in one place, _checked, before anything is
# built from it, so the builders below meet only values of the right type and shape; what they still check is what a
# schema cannot say (a precision that exists, a source file that does, a size the suite has). A kind is a function
# that returns the value as the dataclasses hold it (a TOML array as a tuple) or raises _Wrong.


class _Wrong(Exception):
    """A value is not of its field's kind: the rule it breaks, what was found, and where below the field (".m",
    "[2]") when the value is a table or an array."""

    def __init__(self, rule: str, found: object, at: str = ""):
        super().__init__(rule)
        self.rule, self.found, self.at = rule, found, at


Kind = Callable[[object], object]


def _kind(rule: str, accept: Callable[[object], bool], build: Callable[[object], object] = lambda value: value) -> Kind:
    def check(value):
        if not accept(value):
            raise _Wrong(rule, value)
        return build(value)

    return check


def _below(step: str, kind: Kind, value: object):
    try:
        return kind(value)
    except _Wrong as wrong:
        raise _Wrong(wrong.rule, wrong.found, step + wrong.at) from None


def _is_int(value: object) -> bool:
    return isinstance(value, int) and not isinstance(value, bool)  # TOML's true is an int to Python


def int_from(low: int, high: int | None = None, *, rule: str) -> Kind:
    return _kind(rule, lambda v: _is_int(v) and low <= v and (high is None or v <= high))


positive_int = int_from(1, rule="must be a positive integer")
nonempty_str = _kind("must be a non-empty string", lambda v: isinstance(v, str) and v != "")
boolean = _kind("must be true or false", lambda v: isinstance(v, bool))
# A bare 7.0 or 8 reads as a compute capability to a person and lists as 0.7 or 0.8: only the file's own form passes.
compute_capability = int_from(10, rule="must be an integer such as 80 for compute capability 8.0 (major * 10 + minor)")


mnk_shape = _kind("must be 'MxNxK' with M, N and K at least 1",
                  lambda v: isinstance(v, str) and re.fullmatch(r"0*[1-9]\d*x0*[1-9]\d*x0*[1-9]\d*", v) is not None,
                  lambda v: tuple(int(part) for part in v.split("x")))


def one_of(choices: tuple, unit: str = "") -> Kind:
    # Compared with their types, or false would pass as a swizzle of 0.
    return _kind(f"must be one of {choices}{unit}", lambda v: any(type(v) is type(c) and v == c for c in choices))


def matching(pattern: str, rule: str) -> Kind:
    return _kind(rule, lambda v: isinstance(v, str) and re.fullmatch(pattern, v) is not None)


def int_tuple(length: int, rule: str, item: Kind = positive_int) -> Kind:
    def check(value):
        if not (isinstance(value, list) and len(value) == length):
            raise _Wrong(rule, value)
        try:
            return tuple(item(v) for v in value)
        except _Wrong:
            raise _Wrong(rule, value) from None  # the whole array says more than one element of it

    return check


def list_of(item: Kind, rule: str, nonempty: bool = False) -> Kind:
    def check(value):
        if not isinstance(value, list) or (nonempty and not value):
            raise _Wrong(rule, value)
        return tuple(_below(f"[{i}]", item, v) for i, v in enumerate(value))

    return check


def table_of(fields: dict[str, Kind], rule: str, required: set[str] | None = None, closed: bool = True,
             build: Callable[[dict], object] = dict) -> Kind:
    """A TOML table with these fields (all required unless `required` says which), each of its kind."""
    required = set(fields) if required is None else required

    def check(value):
        if not isinstance(value, dict):
            raise _Wrong(rule, value)
        missing, unknown = required - value.keys(), value.keys() - fields.keys() if closed else set()
        if missing or unknown:
            wrong = [f"{what} {', '.join(sorted(keys))}" for what, keys in (("lacks", missing), ("also has", unknown))
                     if keys]
            raise _Wrong(f"{rule} (it {' and '.join(wrong)})", value)
        return build({key: _below(f".{key}", fields[key], v) for key, v in value.items() if key in fields})

    return check


def mapping(key_pattern: str, item: Kind, rule: str, build: Callable[[dict], object] = dict) -> Kind:
    """A TOML table whose keys follow a pattern (TOML keys are strings, even 90), each value of one kind."""

    def check(value):
        if not (isinstance(value, dict) and all(re.fullmatch(key_pattern, key) for key in value)):
            raise _Wrong(rule, value)
        return build({key: _below(f".{key}", item, v) for key, v in value.items()})

    return check


def _checked(where: str, table: dict, fields: dict[str, Kind], required: set[str], closed: bool = True) -> dict:
    """The table's fields, each checked against its kind and built; CatalogueError naming `where`, the field, the rule
    and the value found, for the first that is missing, unknown (a closed table) or of the wrong kind."""
    missing = required - table.keys()
    unknown = table.keys() - fields.keys() if closed else set()
    if missing or unknown:
        problems = [f"{what} fields {sorted(keys)}" for what, keys in (("missing", missing), ("unknown", unknown))
                    if keys]
        raise CatalogueError(f"{where}: {', '.join(problems)}")
    checked = {}
    for key, value in table.items():
        if key in fields:
            try:
                checked[key] = fields[key](value)
            except _Wrong as wrong:
                raise CatalogueError(f"{where}: {key}{wrong.at} {wrong.rule}, got {wrong.found!r}") from None
    return checked


def _label(section: str, number: int, name: object, prefix: str = "") -> str:
    """What a message calls a table: its name, or where it stands in the file when it has no usable name."""
    if isinstance(name, str) and name:
        return prefix + name
    return f"[[{section}]] table {number} (counting from 1)"


def _tables(section: str) -> Kind:
    table = _kind("must be a table", lambda v: isinstance(v, dict))
    return list_of(table, f"must be an array of tables ([[{section}]])")


_FILE_FIELDS = {
    "precision": _tables("precision"),
    "suite": _kind("must be a table ([suite])", lambda v: isinstance(v, dict)),
    "seed": _tables("seed"),
    "kernel": _tables("kernel"),
}

_PRECISION_FIELDS = {
    "name": matching(r"[a-z0-9]+", "must be lower-case letters and digits"),
    "input": one_of(tuple(ELEMENT_FORMATS)),
    "accumulate": one_of(ACCUMULATE_TYPES),
    "output": one_of(tuple(ELEMENT_FORMATS)),
    "baseline": nonempty_str,
    "tolerance": _kind("must be a relative error between 0 and 1, such as 1e-4",
                       lambda v: isinstance(v, float) and 0 < v < 1),
    "flop_per_sm_per_clock": mapping(r"\d+", positive_int, "maps compute capabilities (e.g. 90) to whole rates",
                                     build=lambda rates: tuple((int(cc), rate) for cc, rate in rates.items())),
}

_SIZES = list_of(positive_int, "must be a non-empty list of square sizes", nonempty=True)
_SUITE_FIELDS = {
    "sizes": _SIZES,
    "kernel_sizes": _SIZES,
    "sweep_kernels": list_of(nonempty_str, "must be a list of kernel names"),
    "sweep_shapes": list_of(mnk_shape, "must be a list of 'MxNxK' strings"),
    "architectures": list_of(nonempty_str, "must be a list of architectures such as 'sm_90'"),
    "reference": matching(r"[0-9a-f]{40}", "must be a full commit hash (40 hex digits)"),
}

_SEED_FIELDS = {"file": nonempty_str, "title": nonempty_str, "sizes": _SIZES, "name": nonempty_str}

_PAIR = "must be two positive integers"
_KERNEL_FIELDS = {
    "name": nonempty_str,
    "technique": nonempty_str,
    "min_compute_capability": compute_capability,
    "library": nonempty_str,
    "origins": list_of(table_of({"seed": nonempty_str, "label": nonempty_str},
                                "must be a table { seed = file, label = step }", closed=False,
                                build=lambda o: Origin(o["seed"], o["label"])),
                       "must be a list of { seed = file, label = step } tables"),
    "renamed_from": _kind("must be a kernel name or a list of them",
                          lambda v: isinstance(v, str) or (isinstance(v, list) and all(isinstance(o, str) for o in v)),
                          lambda v: (v,) if isinstance(v, str) else tuple(v)),
    "sizes": list_of(positive_int, "must be a non-empty list of the suite's sizes", nonempty=True),
    "source": matching(r"(?!\.\.?$)[^/\\]+", "must be the name of a file in kernels/ (no folders)"),
    "entry": nonempty_str,
    "block_threads": int_tuple(2, _PAIR),
    "block_tile": int_tuple(2, _PAIR),
    "multiple_of": table_of({dim: positive_int for dim in "mnk"}, "needs exactly m, n and k, each a positive integer",
                            build=lambda d: (d["m"], d["n"], d["k"])),
    "pitch": positive_int,
    "may_spill": boolean,
    "shared_memory": int_from(0, MAX_SHARED_BYTES, rule=f"must be 0 to {MAX_SHARED_BYTES} bytes"),
    "cluster": int_tuple(3, "must be three positive integers"),
    "grid": one_of(GRID_RULES),
    "tma": table_of({operand: table_of({"box": int_tuple(2, _PAIR), "swizzle": one_of(TMA_SWIZZLES, " bytes")},
                                       "needs exactly box and swizzle")
                     for operand in TMA_OPERANDS},
                    f"maps operands {TMA_OPERANDS} to {{ box = [rows, cols], swizzle = bytes }}", required=set()),
    "target": matching(r"sm_\d+a", "names an architecture-specific target such as 'sm_90a'"),
    "tuned_entries": mapping(r"[1-9]\d+", nonempty_str, "maps compute capabilities (e.g. 90) to entries",
                             build=lambda entries: tuple((int(cc), entry) for cc, entry in entries.items())),
}


def _renamed_from(name: str, old_names: tuple[str, ...]) -> tuple[str, ...]:
    precision = name.partition("/")[0]
    for old in old_names:
        # Another precision is another problem: its figures say nothing about this kernel's.
        old_precision, _, family = old.partition("/")
        if old == name or old_precision != precision or not family or "/" in family:
            raise CatalogueError(f"{name}: renamed_from {old!r} must be another '{precision}/<kernel>' name")
    return old_names


def _sizes(name: str, own: tuple[int, ...] | None, suite: dict) -> tuple[int, ...]:
    """The entry's suite sizes: its own, or [suite] kernel_sizes (or, without those, every size of the suite)."""
    every = suite["sizes"]
    if own is not None and not set(own) <= set(every):
        raise CatalogueError(f"{name}: sizes must be some of the suite's sizes {list(every)}, got {list(own)}")
    return suite.get("kernel_sizes", every) if own is None else own


def tma_problem(name: str, types: Precision, copy: TmaOperand) -> str | None:
    """What the TMA cannot do with this box, or None; the message names the kernel and the field."""
    if max(copy.box) > MAX_TMA_BOX:
        return f"{name}: tma.{copy.operand}.box {list(copy.box)}: at most {MAX_TMA_BOX} a dimension"
    if copy.swizzle not in TMA_SWIZZLES:
        return f"{name}: tma.{copy.operand}.swizzle {copy.swizzle} must be one of {TMA_SWIZZLES} bytes"
    row_bytes = copy.box[1] * ELEMENT_FORMATS[types.element_type(copy.operand)].bytes
    if copy.swizzle and row_bytes > copy.swizzle:
        return (f"{name}: tma.{copy.operand}: a row of the box ({row_bytes} bytes) must fit the {copy.swizzle}-byte "
                "swizzle")
    return None


def _tma(name: str, copies: dict[str, dict], types: Precision) -> tuple[TmaOperand, ...]:
    made = tuple(TmaOperand(operand, copies[operand]["box"], copies[operand]["swizzle"])
                 for operand in TMA_OPERANDS if operand in copies)
    for copy in made:
        if problem := tma_problem(name, types, copy):
            raise CatalogueError(problem)
    return made


def _stated(name: str, fields: dict, types: Precision) -> tuple[tuple[str, object], ...]:
    """The geometry fields the entry writes, built as Geometry holds them."""
    built = {"tma": lambda copies: _tma(name, copies, types)}
    return tuple((field, built.get(field, lambda value: value)(fields[field]))
                 for field in GEOMETRY_FIELDS if field in fields)


def _min_compute_capability(name: str, fields: dict) -> int:
    """The entry's own, or that of its architecture-specific target (sm_90a: 90), which is the least it runs on."""
    if "min_compute_capability" in fields:
        return fields["min_compute_capability"]
    if "target" in fields:
        return int(fields["target"][3:-1])
    raise CatalogueError(f"{name}: missing fields ['min_compute_capability'] (or a target such as 'sm_90a')")


def _kernel_from_table(number: int, table: dict, kernel_dir: Path, precisions: dict[str, Precision],
                       suite: dict) -> Kernel:
    fields = _checked(_label("kernel", number, table.get("name")), table, _KERNEL_FIELDS, _REQUIRED)
    name = fields["name"]
    precision, _, family = name.partition("/")
    if precision not in precisions or not family or "/" in family:
        raise CatalogueError(f"{name}: a name is '<precision>/<kernel>' with precision one of {tuple(precisions)}")
    types = precisions[precision]
    common = dict(
        name=name,
        technique=fields["technique"],
        min_compute_capability=_min_compute_capability(name, fields),
        types=types,
        origins=fields.get("origins", ()),
        renamed_from=_renamed_from(name, fields.get("renamed_from", ())),
        sizes=_sizes(name, fields.get("sizes"), suite),
    )
    if "library" in fields:
        if extra := fields.keys() & (_COMPILED | _LAUNCH | set(GEOMETRY_FIELDS) | {"pitch", "may_spill"}):
            raise CatalogueError(f"{name}: a library kernel has no {sorted(extra)}")
        return Kernel(library=fields["library"], **common)

    if missing := _COMPILED - fields.keys():
        raise CatalogueError(f"{name}: a compiled kernel needs {sorted(missing)}")
    if not (kernel_dir / fields["source"]).is_file():
        raise CatalogueError(f"{name}: source {fields['source']!r} is not in {kernel_dir}")
    for where, entry in (("entry", fields["entry"]),
                         *((f"tuned_entries.{cc}", entry) for cc, entry in fields.get("tuned_entries", ()))):
        if leftover := re.search(r"\{[^}]*\}", entry):
            raise CatalogueError(f"{name}: {where} {entry!r} holds {leftover[0]}; an entry may hold "
                                 f"{' and '.join(_ENTRY_PLACEHOLDERS)} (the precision's element types) alone")
    tuned = fields.get("tuned_entries", ())
    minimum = _min_compute_capability(name, fields)
    for cc, entry in tuned:
        if cc < minimum or (fields.get("target") and cc != minimum):
            raise CatalogueError(f"{name}: tuned_entries.{cc}: the kernel runs on compute capability "
                                 f"{'' if fields.get('target') else 'from '}{minimum / 10:.1f} on"
                                 f"{' alone' if fields.get('target') else ''}, not {cc / 10:.1f}")
        if entry.partition("<")[0].strip() != fields["entry"].partition("<")[0].strip():
            raise CatalogueError(f"{name}: tuned_entries.{cc} {entry!r} must instantiate the entry's template "
                                 f"{fields['entry'].partition('<')[0].strip()}: only its parameters are tuned")
    return Kernel(
        kernel_dir=kernel_dir,
        source=fields["source"],
        entry=fields["entry"],
        multiple_of=fields["multiple_of"],
        pitch=fields.get("pitch", 1),
        may_spill=fields.get("may_spill", False),
        grid_rule=fields.get("grid", "tiles"),
        target=fields.get("target"),
        tuned_entries=tuned,
        stated=_stated(name, fields, types),
        **common,
    )


_PRECISIONS_FIELD = list_of(matching(r"[a-z0-9]+", "must be a precision's name"),
                            "must be a non-empty list of precisions such as [\"fp16\", \"bf16\"]", nonempty=True)


def kernel_tables(data: dict) -> list[tuple[int, dict]]:
    """The file's [[kernel]] tables as one table a kernel, each with the number of the table it comes from.

    A table with `precisions = ["fp16", "bf16"]` is one kernel in each of them: it becomes a table per precision,
    named "<precision>/<name>" (so each keeps the history of the kernel it was before it was shared), whose entry has
    {input} and {output} filled with the precision's element types as CUDA C++ spells them, and whose renamed_from
    names are that precision's. Any table's entry has its placeholders filled where its precision is known.
    The gate's change selection reads a commit's kernels through this too, so both see the same twins.
    """
    spelled = {table.get("name"): {key: ELEMENT_FORMATS[table[key]].cxx for key in ("input", "output")
                                   if table.get(key) in ELEMENT_FORMATS}
               for table in data.get("precision", []) if isinstance(table, dict)}
    made = []
    for number, table in enumerate(data.get("kernel", []), start=1):
        if not isinstance(table, dict) or "precisions" not in table:
            made.append((number, _filled(table, spelled.get(str(table.get("name", "")).partition("/")[0], {}))
                         if isinstance(table, dict) else table))
            continue
        where = _label("kernel", number, table.get("name"))
        shared = _checked(where, {key: table[key] for key in ("precisions",)}, {"precisions": _PRECISIONS_FIELD},
                          {"precisions"})["precisions"]
        family = table.get("name")
        if not isinstance(family, str) or not re.fullmatch(r"[^/\s]+", family):
            raise CatalogueError(f"{where}: a table with precisions names the kernel without its precision "
                                 f"(name = \"wgmma_tma\"), got {family!r}")
        if len(set(shared)) != len(shared):
            raise CatalogueError(f"{where}: precisions lists a precision twice: {list(shared)}")
        if len(shared) > 1 and "{input}" not in str(table.get("entry", "{input}")):
            raise CatalogueError(f"{where}: entry {table.get('entry')!r} must name the element type as {{input}}: "
                                 f"it is compiled for each of {list(shared)}")
        for precision in shared:
            if precision not in spelled:
                raise CatalogueError(f"{precision}/{family}: precisions names {precision!r}, which no [[precision]] "
                                     "table defines")
            twin = {key: value for key, value in table.items() if key != "precisions"}
            twin["name"] = f"{precision}/{family}"
            old = twin.get("renamed_from")
            if isinstance(old, (str, list)):
                twin["renamed_from"] = [f"{precision}/{name}" if isinstance(name, str) and "/" not in name else name
                                        for name in ([old] if isinstance(old, str) else old)]
            made.append((number, _filled(twin, spelled[precision])))
    return made


def _filled(table: dict, spelled: dict[str, str]) -> dict:
    def fill(entry: str) -> str:
        for placeholder, key in _ENTRY_PLACEHOLDERS.items():
            if key in spelled:
                entry = entry.replace(placeholder, spelled[key])
        return entry

    filled = dict(table)
    if isinstance(table.get("entry"), str):
        filled["entry"] = fill(table["entry"])
    tuned = table.get("tuned_entries")
    if isinstance(tuned, dict):
        filled["tuned_entries"] = {cc: fill(entry) if isinstance(entry, str) else entry for cc, entry in tuned.items()}
    return filled


@functools.lru_cache(maxsize=8)
def _parsed(text: str) -> dict:
    return tomllib.loads(text)


def _read(path: Path) -> dict:
    """The file's tables (shared: read them, never change them), their top level checked. Parsed once per distinct
    text: every asv benchmark process asks for its kernel, thousands a run, and a parse costs more than the rest of a
    reading one together."""
    try:
        data = _parsed(Path(path).read_text())
    except OSError as exc:
        raise CatalogueError(f"cannot read {path}: {exc}") from exc
    except tomllib.TOMLDecodeError as exc:
        raise CatalogueError(f"cannot read {path}: {_syntax_error(exc)}") from None
    except UnicodeDecodeError as exc:
        raise CatalogueError(f"cannot read {path}: not UTF-8 text (byte {exc.start}: {exc.reason})") from None
    _checked(str(path), data, _FILE_FIELDS, required=set(), closed=False)
    return data


def _syntax_error(exc: tomllib.TOMLDecodeError) -> str:
    """tomllib's own words, with the place it gives (line and column, or the end of the file) put first."""
    message = str(exc)
    if found := re.fullmatch(r"(.*) \(at line (\d+), column (\d+)\)", message, re.DOTALL):
        return f"not valid TOML at line {found[2]}, column {found[3]}: {found[1]}"
    if found := re.fullmatch(r"(.*) \(at end of document\)", message, re.DOTALL):
        return f"not valid TOML at the end of the file: {found[1]}"
    return f"not valid TOML: {message}"


def _precision_from_table(number: int, table: dict) -> Precision:
    where = _label("precision", number, table.get("name"), prefix="precision ")
    fields = _checked(where, table, _PRECISION_FIELDS, set(_PRECISION_FIELDS))
    return Precision(fields["name"], fields["input"], fields["accumulate"], fields["output"], fields["baseline"],
                     fields["tolerance"], fields["flop_per_sm_per_clock"])


def load_precisions(path: Path = CATALOGUE_PATH) -> dict[str, Precision]:
    """The [[precision]] tables by name, in file order (the order the suite's precision parameter lists them)."""
    precisions: dict[str, Precision] = {}
    for number, table in enumerate(_read(path).get("precision", []), start=1):
        precision = _precision_from_table(number, table)
        if precision.name in precisions:
            raise CatalogueError(f"precision {precision.name}: listed twice")
        precisions[precision.name] = precision
    return precisions


# The kernels built from each catalogue file and kernel folder, with the parsed tables they were built from: built
# again only when the file's text changes (a source file removed meanwhile is then found missing when it is compiled,
# not here). Each of a history commit's ~3,000 asv processes asks for its kernel; building every entry again cost a
# reader 10 of its 13 ms on a CPU box.
_built: dict[tuple[str, str], tuple[dict, dict[str, Kernel]]] = {}


def load_catalogue(path: Path = CATALOGUE_PATH, kernel_dir: Path = KERNEL_DIR) -> dict[str, Kernel]:
    """All kernels by name, in file order (a table of several precisions gives a kernel for each, in the order it
    lists them). Raises CatalogueError naming the first bad entry."""
    data = _read(path)  # the same tables for the same text (_parsed)
    key = (str(path), str(kernel_dir))
    if key in _built and _built[key][0] is data:
        return dict(_built[key][1])
    precisions = load_precisions(path)
    suite = _suite(path)
    kernels: dict[str, Kernel] = {}
    for number, table in kernel_tables(data):
        kernel = _kernel_from_table(number, table, Path(kernel_dir), precisions, suite)
        if kernel.name in kernels:
            raise CatalogueError(f"{kernel.name}: listed twice")
        kernels[kernel.name] = kernel
    _check_old_names(kernels)
    for precision in precisions.values():
        baseline(precision.name, kernels)
    _built[key] = (data, kernels)
    return dict(kernels)


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
    """The [suite] table, checked: its fields as tuples and strings (fields it does not know are left out)."""
    data = _read(path)
    if "suite" not in data:
        raise CatalogueError(f"{path} has no [suite] table")
    where = f"the [suite] table of {path}"
    suite = _checked(where, data["suite"], _SUITE_FIELDS, required={"sizes"}, closed=False)
    # Checked here rather than at the first kernel that takes the default, which would otherwise be the one blamed.
    if not set(suite.get("kernel_sizes", ())) <= set(suite["sizes"]):
        raise CatalogueError(f"{where}: kernel_sizes must be some of its sizes {list(suite['sizes'])}, "
                             f"got {list(suite['kernel_sizes'])}")
    return suite


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
    made = []
    for number, table in enumerate(_read(path).get("seed", []), start=1):
        fields = _checked(_label("seed", number, table.get("file"), prefix="[[seed]] "), table, _SEED_FIELDS,
                          required={"file", "title", "sizes"}, closed=False)
        made.append(Seed(fields["file"], fields["title"], fields["sizes"], fields.get("name", "")))
    return made


def sweep(path: Path = CATALOGUE_PATH) -> tuple[list[str], list[tuple[int, int, int]]]:
    """Seed 003's M/N/K sweep: the kernel names and the (M, N, K) shapes the asv class GemmShapes runs."""
    suite = _suite(path)
    if "sweep_shapes" not in suite:
        raise CatalogueError(f"the [suite] table of {path} lacks sweep_shapes (e.g. [\"256x1024x1024\"])")
    return list(suite.get("sweep_kernels", [])), list(suite["sweep_shapes"])


def reference(path: Path = CATALOGUE_PATH) -> str | None:
    """The commit the history times every kernel against, paired in one process ([suite] reference), or None."""
    return _suite(path).get("reference")


def architectures(path: Path = CATALOGUE_PATH) -> list[str]:
    """The GPU architectures (e.g. 'sm_90') whose resource usage is tracked."""
    suite = _suite(path)
    if "architectures" not in suite:
        raise CatalogueError(f"the [suite] table of {path} lacks architectures (e.g. [\"sm_80\", \"sm_90\"])")
    return list(suite["architectures"])


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
