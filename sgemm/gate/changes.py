"""Which kernels a change between two commits can make faster or slower: what the gate measures.

What a change selects:
- A kernel whose catalogue entry or [[precision]] table changed (a table shared by several precisions is each
  precision's entry: `precisions = ["fp16", "bf16"]` makes "fp16/x" and "bf16/x", and a change to it selects both),
  or whose `.cu` file or a file of kernels/ it includes (directly or through another header, `#include "x.cuh"` or
  `#include <x.cuh>`) changed, as the file stood at base or at head.
- Every kernel when measurement code changed. That code is found, not listed: every file of the asv suite
  (benchmarks/), and every Python file of this repository it imports, transitively, following the `import`
  statements of each file as it stands at each commit. A file reached at base or at head counts, so a module that
  measurement starts to import at head does, and one that only judging or publishing imports (the gate, the
  report, the site) does not. asv.conf.json, pyproject.toml and the catalogue's [suite] table count too.
- For each precision that has an affected kernel, its cuBLAS baseline as a control: the change cannot touch it, so
  a verdict other than SAME on it says the box, not the change, moved. A change that affects no kernel (documentation,
  the gate's own code) selects nothing.

Kernels that come and go must be declared in head's catalogue, or the gate cannot compare them:
- A rename: the new entry carries `renamed_from = "fp32/old"` (or a list). It is measured, and compared with the
  first of those names that base has (Selection.renamed).
- A deletion: a table naming the kernel and saying why, kept afterwards as the record of why its history ends:
      [[retired]]
      name = "fp32/old"
      reason = "same technique as fp32/new, which supersedes it"
Selection.undeclared holds one message, naming the kernel, for each thing the gate could not compare and was not
told about: a kernel gone from head without a declaration (a rename without `renamed_from` reads as one kernel
removed and another new), a `renamed_from` naming no kernel of base, a head catalogue the suite cannot load, or a
selected kernel that none of the suite's shapes lets run. The gate fails (exit 2) on any of them.

Everything is read from git at the two commits, never from the working tree. The walk sees `import` statements
only: a file loaded by path (benchmarks/worktree.py loads sgemm/catalogue.py so) counts when it is also imported, as
that one is, or when it lies in benchmarks/.
"""

from __future__ import annotations

import ast
import functools
import posixpath
import subprocess
import tempfile
import tomllib
from dataclasses import dataclass, field
from pathlib import Path

from ..catalogue import CatalogueError, Kernel, kernel_tables, load_catalogue, sweep
from ..git import GitError, git, resolve_commit
from ..measuring.build import kernel_files

CATALOGUE_FILE = "sgemm/catalogue.toml"
CONTROL = "control"  # the reason a cuBLAS baseline is measured: no change can touch it
KERNEL_DIR = "kernels"
SUITE_DIR = "benchmarks"  # asv.conf.json's benchmark_dir: where the walk through measurement's imports starts
SUITE_CONFIGURATION = ("asv.conf.json", "pyproject.toml")  # how asv builds and runs the suite, not Python it imports


class ChangeError(GitError):
    """A commit's catalogue cannot be read; the message says which commit and why."""


@dataclass(frozen=True)
class Selection:
    kernels: tuple[str, ...]  # HEAD's kernels the change can affect, cuBLAS controls included, catalogue order
    reasons: dict[str, str] = field(default_factory=dict)  # kernel -> why it is measured
    everything: str | None = None  # why every kernel is measured, when shared code changed
    removed: tuple[str, ...] = ()  # kernels BASE had and HEAD has not (renamed ones aside): nothing to measure
    renamed: dict[str, str] = field(default_factory=dict)  # HEAD's name -> BASE's name it is compared with
    retired: dict[str, str] = field(default_factory=dict)  # kernel removed and declared so -> the reason given
    undeclared: tuple[str, ...] = ()  # what the gate cannot compare and was not told about: it must exit 2

    @property
    def controls(self) -> tuple[str, ...]:
        """The kernels measured as controls (cuBLAS), not because the change touched them."""
        return tuple(name for name, why in self.reasons.items() if why == CONTROL)


# What a selection reads (Python, kernel sources and headers, the catalogue) comes out of one `git cat-file --batch`:
# a `git show` a file made 77 processes and 0.2 s of every selection.
_READ_AT_ONCE = (".py", ".cu", ".cuh", ".toml")


class _Snapshot:
    """The repository's files at one commit, each read from git at most once."""

    def __init__(self, repo: str, commit: str):
        self.repo, self.commit = repo, resolve_commit(repo, commit)
        self.paths = frozenset(git(repo, "ls-tree", "-r", "--name-only", "-z", self.commit).split("\0")) - {""}
        self._texts: dict[str, str | None] | None = None

    def read(self, path: str) -> str | None:
        path = posixpath.normpath(path)  # git finds no 'kernels/../x'
        if self._texts is None:
            self._texts = self._read_at_once()
        if path not in self._texts:
            self._texts[path] = git(self.repo, "show", f"{self.commit}:{path}") if path in self.paths else None
        return self._texts[path]

    def _read_at_once(self) -> dict[str, str | None]:
        """The text of each file of _READ_AT_ONCE's kinds, as `git show` would give it; one that is not a blob or not
        UTF-8 is left out, for read() to ask git show alone (which says why it fails, as it always did)."""
        wanted = sorted(path for path in self.paths if path.endswith(_READ_AT_ONCE) and "\n" not in path)
        done = subprocess.run(["git", "-C", self.repo, "cat-file", "--batch"], capture_output=True,
                              input="".join(f"{self.commit}:{path}\n" for path in wanted).encode())
        if done.returncode:
            return {}
        texts: dict[str, str | None] = {}
        out, at = done.stdout, 0
        for path in wanted:
            end = out.index(b"\n", at)
            header, at = out[at:end].split(b" "), end + 1
            if header[-1] == b"missing":
                continue
            size = int(header[2])
            body, at = out[at:at + size], at + size + 1  # each object's bytes end with a newline of the batch's
            if header[1] == b"blob":
                try:  # as subprocess's text mode reads git show: UTF-8, universal newlines
                    texts[path] = body.decode().replace("\r\n", "\n").replace("\r", "\n")
                except UnicodeDecodeError:
                    pass
        return texts

    @functools.cached_property
    def catalogue(self) -> dict:
        text = self.read(CATALOGUE_FILE)
        try:
            return tomllib.loads(text) if text is not None else {}
        except tomllib.TOMLDecodeError as exc:
            raise ChangeError(f"{CATALOGUE_FILE} at {self.commit[:12]} is not valid TOML: {exc}") from exc

    @functools.cached_property
    def entries(self) -> dict[str, dict]:
        """The catalogue's kernels by name, in file order, each as its own table: a table shared by several
        precisions counts as one per precision, as the loader makes them (its precision twins), so an edit to it
        selects each twin. A catalogue the loader would refuse is taken table by table as written; loading it at
        head reports what is wrong (_unmeasurable)."""
        try:
            tables = [table for _, table in kernel_tables(self.catalogue)]
        except CatalogueError:
            tables = self.catalogue.get("kernel", [])
        return {table.get("name"): table for table in tables if isinstance(table, dict)}

    @functools.cached_property
    def precisions(self) -> dict[str, dict]:
        """The catalogue's [[precision]] tables by name."""
        return {table.get("name"): table for table in self.catalogue.get("precision", [])}


def select_kernels(repo: str, base: str, head: str) -> Selection:
    before, after = _Snapshot(repo, base), _Snapshot(repo, head)
    # Without --no-renames a moved file is listed under its new path only, and its old one goes unseen.
    diff = git(repo, "diff", "--name-only", "--no-renames", "-z", before.commit, after.commit)
    changed = set(diff.split("\0")) - {""}
    renamed = _renames(before.entries, after.entries)
    retired = _retirements(before.entries, after)
    gone = tuple(name for name in before.entries if name not in after.entries and name not in renamed.values())

    if shared := _shared_changes(before, after, changed):
        reasons, everything = {}, f"shared code changed: {', '.join(shared)}"
        kernels = tuple(after.entries)
    else:
        reasons, everything = _with_controls(_affected(before, after, changed, renamed), after.entries), None
        kernels = tuple(name for name in after.entries if name in reasons)
    undeclared = (_undeclared_renames(before.entries, after.entries, renamed)
                  + _undeclared_removals(gone, retired, before.entries, after.entries)
                  + _unmeasurable(after, kernels))
    return Selection(kernels, reasons, everything, gone, renamed, retired, tuple(undeclared))


# Measurement code


def _shared_changes(before: _Snapshot, after: _Snapshot, changed: set[str]) -> list[str]:
    """The changed paths that every measurement goes through."""
    measurement = _measurement_files(before) | _measurement_files(after) | set(SUITE_CONFIGURATION)
    shared = sorted(changed & measurement)
    if _suite_measured(before) != _suite_measured(after):
        shared.append(f"{CATALOGUE_FILE} [suite]")
    return shared


def _suite_measured(snapshot: _Snapshot) -> dict:
    """The [suite] table less its reference, which only the history's paired track reads: a gate is not shaped by it."""
    return {key: value for key, value in snapshot.catalogue.get("suite", {}).items() if key != "reference"}


def _measurement_files(snapshot: _Snapshot) -> set[str]:
    """The asv suite's files at a commit and every Python file of the repository they import, transitively."""
    reached: set[str] = set()
    pending = [path for path in snapshot.paths if path.startswith(f"{SUITE_DIR}/")]
    while pending:
        path = pending.pop()
        if path in reached:
            continue
        reached.add(path)
        if path.endswith(".py"):
            modules = _imported_modules(path, snapshot.read(path) or "")
            pending += [found for module in modules if (found := _module_file(module, snapshot.paths))]
    return reached


# Most files are the same at both commits: each text is parsed once a process (the tests select over many
# copies of one tree).
@functools.lru_cache(maxsize=1024)
def _imported_modules(path: str, text: str) -> tuple[str, ...]:
    """Every module an `import` anywhere in the file may load, parent packages included (their __init__ runs)."""
    try:
        tree = ast.parse(text, path)
    except SyntaxError:
        return ()  # it cannot import anything; the change that broke it is itself a change to this file
    package = _package_of(path)
    modules: list[str] = []
    for node in ast.walk(tree):
        if isinstance(node, ast.Import):
            modules += [parent for alias in node.names for parent in _with_parents(alias.name)]
        elif isinstance(node, ast.ImportFrom):
            source = _absolute(node, package)
            # `from package import name` loads package.name when name is a module rather than an attribute.
            modules += _with_parents(source) + [f"{source}.{alias.name}" for alias in node.names]
    return tuple(modules)


def _package_of(path: str) -> str:
    parts = path.removesuffix(".py").split("/")
    return ".".join(parts[:-1])  # the folder is the package, for __init__.py and for its siblings alike


def _absolute(node: ast.ImportFrom, package: str) -> str:
    """The module a `from ... import` names, with a relative one (`from . import x`) made absolute."""
    if not node.level:
        return node.module or ""
    parts = package.split(".") if package else []
    anchor = parts[: len(parts) - node.level + 1] if node.level - 1 <= len(parts) else []
    return ".".join([*anchor, *([node.module] if node.module else [])])


def _with_parents(module: str) -> list[str]:
    parts = module.split(".") if module else []
    return [".".join(parts[: i + 1]) for i in range(len(parts))]


def _module_file(module: str, paths: frozenset[str]) -> str | None:
    """The repository's file for a module (a module or a package), or None for one from elsewhere (numpy, cupy)."""
    stem = module.replace(".", "/")
    return next((path for path in (f"{stem}.py", f"{stem}/__init__.py") if path in paths), None)


# Kernels the change touched


def _affected(before: _Snapshot, after: _Snapshot, changed: set[str], renamed: dict[str, str]) -> dict[str, str]:
    """Head's kernels the change can make faster or slower, with why."""
    reasons: dict[str, str] = {}
    precisions_before, precisions_after = before.precisions, after.precisions
    for name, table in after.entries.items():
        precision = name.split("/", 1)[0]
        if name in renamed:
            reasons[name] = f"renamed from {renamed[name]}"
        elif name not in before.entries:
            reasons[name] = "new kernel"
        elif table != before.entries[name]:
            reasons[name] = "catalogue entry changed"
        elif precisions_after.get(precision) != precisions_before.get(precision):
            reasons[name] = f"the {precision} [[precision]] table changed"
        elif "source" in table:
            files = _kernel_files(before, table["source"]) | _kernel_files(after, table["source"])
            if touched := sorted(files & changed):
                reasons[name] = f"{', '.join(touched)} changed"
    return reasons


def _kernel_files(snapshot: _Snapshot, source: str) -> set[str]:
    """The kernel's source and every header it includes, transitively, as repository paths at this commit."""
    names = kernel_files(source, lambda name: snapshot.read(f"{KERNEL_DIR}/{name}"))
    return {posixpath.normpath(f"{KERNEL_DIR}/{name}") for name in names}


def _with_controls(reasons: dict[str, str], entries_after: dict[str, dict]) -> dict[str, str]:
    """The reasons, plus the cuBLAS baseline of each precision they concern as a control."""
    precisions = {name.split("/", 1)[0] for name in reasons}
    controls = {name: CONTROL for name, table in entries_after.items()
                if "library" in table and name.split("/", 1)[0] in precisions and name not in reasons}
    return {**reasons, **controls}


# Kernels that come and go


def _renames(entries_before: dict[str, dict], entries_after: dict[str, dict]) -> dict[str, str]:
    """Kernels new at head that declare an old name base has -> the first such name."""
    renamed = {}
    for name, table in entries_after.items():
        old_names = _old_names(table)
        if name not in entries_before and (kept := [old for old in old_names if old in entries_before]):
            renamed[name] = kept[0]
    return renamed


def _old_names(table: dict) -> list[str]:
    value = table.get("renamed_from", [])
    # A malformed value declares nothing here; loading head's catalogue reports it (_unmeasurable).
    return [old for old in (value if isinstance(value, list) else [value]) if isinstance(old, str)]


def _retirements(entries_before: dict[str, dict], after: _Snapshot) -> dict[str, str]:
    """The kernels that head's [[retired]] tables declare deleted in this change -> the reason given.

    A table without a reason declares nothing: the reason is the record of why a history ends.
    """
    return {table.get("name"): table.get("reason") for table in after.catalogue.get("retired", [])
            if table.get("name") in entries_before and table.get("name") not in after.entries
            and isinstance(table.get("reason"), str) and table["reason"].strip()}


def _undeclared_renames(entries_before: dict[str, dict], entries_after: dict[str, dict],
                        renamed: dict[str, str]) -> list[str]:
    return [f"{name}: renamed_from {', '.join(_old_names(table))}, which base's catalogue does not have: there is "
            "nothing to compare it with"
            for name, table in entries_after.items()
            if _old_names(table) and name not in entries_before and name not in renamed]


def _undeclared_removals(gone: tuple[str, ...], retired: dict[str, str], entries_before: dict[str, dict],
                         entries_after: dict[str, dict]) -> list[str]:
    declared = set(retired) | {old for table in entries_after.values() for old in _old_names(table)}
    messages = []
    for name in gone:
        if name in declared:
            continue
        new = [other for other in entries_after if other not in entries_before
               and other.split("/", 1)[0] == name.split("/", 1)[0]]
        messages.append(f"{name}: in base's catalogue and gone from head's, undeclared"
                        + (f" (new at head: {', '.join(new)})" if new else "")
                        + f". If it was renamed, give the new entry renamed_from = \"{name}\"; if it was deleted, "
                        f"add a [[retired]] table with name = \"{name}\" and a reason")
    return messages


# Kernels head cannot measure


def _unmeasurable(after: _Snapshot, kernels: tuple[str, ...]) -> list[str]:
    """Why head's suite would measure none of these kernels' cases."""
    if not kernels:
        return []
    try:
        cases = _suite_cases(after)
    except CatalogueError as exc:
        return [f"{CATALOGUE_FILE} at head: the suite cannot load it, so it measures nothing: {exc}"]
    messages = []
    for name in kernels:
        kernel, shapes = cases[name]
        if all(kernel.shape_problem(*shape) for shape in shapes):
            messages.append(f"{name}: supports none of the suite's shapes at head ({_shape_list(shapes)}): "
                            "no case measures it")
    return messages


def _suite_cases(snapshot: _Snapshot) -> dict[str, tuple[Kernel, list[tuple[int, int, int]]]]:
    """Each kernel as the suite loads it at this commit, with the (M, N, K) shapes the suite times it at."""
    with tempfile.TemporaryDirectory() as scratch:
        root = Path(scratch)
        # The loader validates against files (a source must exist): give it this commit's, not the working tree's.
        for path in snapshot.paths:
            if path == CATALOGUE_FILE or path.startswith(f"{KERNEL_DIR}/"):
                (root / path).parent.mkdir(parents=True, exist_ok=True)
                (root / path).write_text(snapshot.read(path))
        catalogue = root / CATALOGUE_FILE
        kernels = load_catalogue(catalogue, root / KERNEL_DIR)
        sweep_kernels, sweep_shapes = sweep(catalogue)
    return {name: (kernel, [(size, size, size) for size in kernel.sizes]
                   + (sweep_shapes if name in sweep_kernels else []))
            for name, kernel in kernels.items()}


def _shape_list(shapes: list[tuple[int, int, int]]) -> str:
    return ", ".join("x".join(map(str, shape)) for shape in shapes)
