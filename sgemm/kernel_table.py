"""The catalogue as Markdown tables: a row per source file for the README, a row per kernel for docs/kernels.md.

Both files hold their table between the lines BEGIN and END, and `sgemm list --markdown --into FILE` rewrites what
lies between them. The tables are never typed by hand: tests/test_kernel_table.py fails when a file's table is not
what the catalogue gives, so a kernel added without regenerating them fails the CPU tests.
"""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path

from .atomic import write_atomically
from .catalogue import Kernel, Seed

BEGIN, END = "<!-- kernels:begin -->", "<!-- kernels:end -->"
# The README's own limit on a line: a cell of kernel names longer than that goes on in a row of its own below.
MAX_LINE = 120
LIBRARY = "cuBLAS (library)"
# How each table is written back, in the words `sgemm list` and the tests use.
REGENERATE = ("sgemm list --markdown --into README.md && "
              "sgemm list --markdown --wide --into docs/kernels.md")


class KernelTableError(ValueError):
    """A file whose table cannot be rewritten: unreadable, or without exactly one BEGIN line before one END line."""


def runs_on(kernel: Kernel) -> str:
    """Where it runs: its one architecture-specific target (sm_90a), or every GPU from its minimum compute capability
    on (sm_80+)."""
    return kernel.target or f"sm_{kernel.min_compute_capability}+"


def _cell(text: str) -> str:
    return text.replace("|", "\\|")


def _row(cells: list[str]) -> str:
    return "| " + " | ".join(cells) + " |"


def _seed_names(kernels: list[Kernel], seeds: list[Seed]) -> str:
    """The seeds the kernels come from, in the catalogue's order of seeds."""
    cited = {o.seed for kernel in kernels for o in kernel.origins}
    known = [seed.number for seed in seeds if seed.file in cited]
    unknown = sorted(cited - {seed.file for seed in seeds})  # the loader does not hold origins to the seeds
    return " ".join(known + unknown) or "-"


def _runs_on_by_precision(kernels: list[Kernel]) -> str:
    """One place to run where every kernel of the group shares it, else each precision's."""
    by_precision: dict[str, str] = {}
    for kernel in kernels:
        by_precision.setdefault(kernel.precision, runs_on(kernel))
    places = list(dict.fromkeys(by_precision.values()))
    if len(places) == 1:
        return places[0]
    return "; ".join(", ".join(p for p, where in by_precision.items() if where == place) + f": {place}"
                     for place in places)


@dataclass
class _SourceGroup:
    source: str
    kernels: list[Kernel]

    def names(self) -> list[str]:
        """The kernels in catalogue order, each family once (twins in several precisions are one name)."""
        return [f"`{family}`" for family in dict.fromkeys(kernel.family for kernel in self.kernels)]


def _groups(kernels: list[Kernel]) -> list[_SourceGroup]:
    groups: dict[str, _SourceGroup] = {}
    for kernel in kernels:
        source = f"`{kernel.source}`" if kernel.source else LIBRARY
        groups.setdefault(source, _SourceGroup(source, [])).kernels.append(kernel)
    return list(groups.values())


def _wrapped(names: list[str], room: int) -> list[str]:
    """The names joined by ', ' into pieces of at most `room` characters (a longer name stands alone)."""
    pieces, line = [], ""
    for name in names:
        candidate = f"{line}, {name}" if line else name
        if line and len(candidate) + 1 > room:  # the piece keeps its comma: the row below goes on with the list
            pieces.append(line + ",")
            line = name
        else:
            line = candidate
    return pieces + [line]


def by_source(kernels: list[Kernel], seeds: list[Seed]) -> list[str]:
    """The README's table: a row per source file (and one for the library), its kernels in catalogue order, the seed
    worklogs they come from and where they run. A list of kernels too long for a line goes on in the rows below."""
    header = ["source", "precisions", "kernels (catalogue order)", "seeds", "runs on"]
    lines = [_row(header), _row(["---"] * len(header))]
    for group in _groups(kernels):
        precisions = ", ".join(dict.fromkeys(kernel.precision for kernel in group.kernels))
        cells = [group.source, precisions, "", _seed_names(group.kernels, seeds), _runs_on_by_precision(group.kernels)]
        room = MAX_LINE - len(_row(cells))
        for number, piece in enumerate(_wrapped(group.names(), room)):
            row = cells if number == 0 else [""] * len(cells)
            lines.append(_row([*row[:2], piece, *row[3:]]))
    return lines


def per_kernel(kernels: list[Kernel], seeds: list[Seed]) -> list[str]:
    """docs/kernels.md's table: a row per kernel (twins in several precisions share one), with its technique, each
    seed's label for the step it reproduces, and where it runs."""
    numbers = {seed.file: seed.number for seed in seeds}
    header = ["kernel", "technique", "seed: step", "source", "runs on"]
    lines = [_row(header), _row(["---"] * len(header))]
    rows: dict[tuple, list[Kernel]] = {}
    for kernel in kernels:
        rows.setdefault((kernel.family, kernel.technique, kernel.source, kernel.origins), []).append(kernel)
    for twins in rows.values():
        first = twins[0]
        steps = "; ".join(f"{numbers.get(o.seed, o.seed)}: {o.label}" for o in first.origins) or "-"
        lines.append(_row([", ".join(f"`{k.name}`" for k in twins), _cell(first.technique), _cell(steps),
                           f"`{first.source}`" if first.source else LIBRARY,
                           _runs_on_by_precision(twins)]))
    return lines


def _bounds(lines: list[str], where: str) -> tuple[int, int]:
    begins = [i for i, line in enumerate(lines) if line.strip() == BEGIN]
    ends = [i for i, line in enumerate(lines) if line.strip() == END]
    if len(begins) != 1 or len(ends) != 1 or begins[0] > ends[0]:
        raise KernelTableError(f"{where} needs one line {BEGIN} and, after it, one line {END} "
                               f"(found {len(begins)} and {len(ends)})")
    return begins[0], ends[0]


def block(text: str, where: str = "the file") -> list[str]:
    """The lines between the markers, without them."""
    lines = text.splitlines()
    begin, end = _bounds(lines, where)
    return lines[begin + 1:end]


def with_block(text: str, table: list[str], where: str = "the file") -> str:
    """The text with what lies between its markers replaced by `table`; everything else as it was."""
    lines = text.splitlines(keepends=True)
    begin, end = _bounds([line.rstrip("\n") for line in lines], where)
    return "".join(lines[:begin + 1] + [line + "\n" for line in table] + lines[end:])


def write_into(path: Path, table: list[str]) -> bool:
    """Rewrite the table between the file's markers; True where it changed."""
    try:
        text = Path(path).read_text(encoding="utf-8")
    except (OSError, UnicodeDecodeError) as exc:
        reason = exc.strerror if isinstance(exc, OSError) and exc.strerror else exc
        raise KernelTableError(f"cannot read {path}: {reason}") from None
    new = with_block(text, table, str(path))
    if new == text:
        return False
    try:
        write_atomically(Path(path), new)
    except OSError as exc:
        raise KernelTableError(f"cannot write {path}: {exc.strerror or exc}") from None
    return True
