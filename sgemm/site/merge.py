"""Merge the asv results trees of several GPU boxes into one, for `asv publish`.

Each machine keeps its own directory. A file the destination already holds with the same content is left alone, so
merging twice changes nothing. A run file that differs from the one already there (one machine's run of one commit
in one environment, twice) is refused, never overwritten: only a person can say which to keep. Every source file is
read as asv would read it before anything is written, so a bad file stops the merge with nothing changed.

`benchmarks.json` is resolved benchmark by benchmark, never file by file. asv stamps every result with the version
(a hash of the code) of the benchmark that produced it, and `asv publish` shows only results whose version equals the
one in `benchmarks.json`. Where the trees define a benchmark at different versions, the merged file keeps the
definition used by the result that ran most recently (its `started_at`, else its commit date), among every run file
of the destination and the sources: the order of the sources does not matter, and the newest measurements are always
shown. Results of an older definition are kept on disk, byte for byte, and listed in the plan (`superseded`): asv
does not show them, as it would not on a box whose suite had changed. A benchmark no result uses keeps the
destination's definition, else the first source's.

A merge holds an exclusive lock on the destination (and shared ones on the sources) for its whole length, so two
merges, or a merge and a `sgemm publish` of the same tree, take turns. The lock files lie in one folder of the user's
cache, `locks/` under SGEMM_CACHE_DIR (else $XDG_CACHE_HOME/sgemm or ~/.cache/sgemm, as the compile cache), one per
directory, named by a hash of its resolved path: never inside a locked directory (a results tree or a site would
carry it) nor beside it (where it littered the folders around). The locks are this user's: two users sharing a tree
(with different caches) are not kept apart.

What is written, is written whole or not at all: each file goes to a temporary file first, and they are renamed into
place once every one is written, so a full disk met half way leaves no half tree (sgemm.atomic.write_all_or_none).

Beside asv's runs a machine's directory holds what `sgemm confirm` and `sgemm bisect` wrote: `confirmations.json` is
joined record by record (every record of the destination and of each source, each once, in that order), and each
`bisect/<id>.json` (a result, or the state a stopped bisect resumes from) is copied, the one written last (its
`updated_at` or `finished_at`) winning where two differ: a bisect resumed or run again supersedes the one before.
"""

from __future__ import annotations

import contextlib
import errno
import fcntl
import hashlib
import json
import os
import re
import sys
from collections.abc import Iterable, Iterator
from dataclasses import dataclass, field
from pathlib import Path

from ..atomic import write_all_or_none
from ..results import confirmations
from ..results.asvsuite import run_figures
from ..results.resultstree import BISECT_FOLDER, MACHINE_FILE, is_run_file
from ..writable import folder_problem, not_a_folder, said

BENCHMARKS_FILE = "benchmarks.json"
LOCK_SUFFIX = ".sgemm-lock"
# The machine facets that say which GPU a directory's history belongs to (see machine.py).
GPU_IDENTITY = ("gpu", "gpu_memory", "compute_capability")
# benchmarks.json holds asv's file-format number under this key, beside the benchmarks.
FORMAT_KEY = "version"


class MergeError(ValueError):
    """Some source cannot be merged; the message names every such file and why. Nothing was written."""

    def __init__(self, problems: list[str]):
        self.problems = problems
        if len(problems) == 1:
            super().__init__(f"cannot merge, nothing was written: {problems[0]}")
        else:
            super().__init__("cannot merge, nothing was written:\n  " + "\n  ".join(problems))


class LockError(RuntimeError):
    """The lock file of a directory cannot be made; the message says which and why."""


# --- Locks ---------------------------------------------------------------------------------------------------------


def lock_folder() -> Path:
    """The folder of every lock file (see the module's docstring)."""
    cache = os.environ.get("SGEMM_CACHE_DIR") or os.path.join(
        os.environ.get("XDG_CACHE_HOME") or os.path.expanduser("~/.cache"), "sgemm")
    return Path(cache) / "locks"


def lock_path(directory: Path) -> Path:
    """The lock file of a directory, which may not exist yet: in lock_folder, named by a hash of its resolved path
    (and, for a reader of that folder, its last part)."""
    directory = Path(directory).resolve()
    key = hashlib.sha256(os.fsencode(directory)).hexdigest()[:32]
    readable = re.sub(r"[^A-Za-z0-9._-]+", "_", directory.name)[:40]
    return lock_folder() / f"{key}-{readable}{LOCK_SUFFIX}"


@contextlib.contextmanager
def _flock(path: Path, mode: int, directory: Path) -> Iterator[None]:
    try:
        path.parent.mkdir(parents=True, exist_ok=True)
        fd = os.open(path, os.O_RDWR | os.O_CREAT, 0o644)
    except OSError as exc:
        if mode == fcntl.LOCK_EX:
            raise LockError(f"cannot make the lock file {path} for {directory} ({exc.strerror}): set SGEMM_CACHE_DIR "
                            "to a folder this user can write") from exc
        # A tree that is only read may lie where this user cannot write; nobody can merge into it from here either.
        yield
        return
    try:
        try:
            fcntl.flock(fd, mode | fcntl.LOCK_NB)
        except BlockingIOError:
            print(f"sgemm: waiting for another sgemm merge or publish of {directory} to finish", file=sys.stderr)
            fcntl.flock(fd, mode)
        yield
    finally:
        os.close(fd)  # closing the descriptor releases the lock


@contextlib.contextmanager
def locked(exclusive: Iterable[Path] = (), shared: Iterable[Path] = ()) -> Iterator[None]:
    """Hold an exclusive lock on each of `exclusive` and a shared one on each of `shared` (directories)."""
    # A source that is not there is refused later; it gets no lock file meanwhile.
    modes = {Path(p).resolve(): fcntl.LOCK_SH for p in shared if Path(p).is_dir()}
    modes.update((Path(p).resolve(), fcntl.LOCK_EX) for p in exclusive)
    with contextlib.ExitStack() as stack:
        # Every command takes its locks in one global order, so two of them can never each wait for the other.
        for directory in sorted(modes):
            stack.enter_context(_flock(lock_path(directory), modes[directory], directory))
        yield


# --- The plan --------------------------------------------------------------------------------------------------------


@dataclass(frozen=True)
class RunVersions:
    """What a run file says about the benchmarks it holds: each one's version, and when it ran (ms since 1970)."""

    path: Path
    versions: dict[str, str]
    ran_at: dict[str, int]


@dataclass
class MergePlan:
    copies: list[tuple[Path, Path]] = field(default_factory=list)  # (source file, destination file)
    unchanged: list[Path] = field(default_factory=list)  # destination files that already hold the same content
    benchmarks: dict = field(default_factory=dict)  # the merged benchmarks.json
    # (run file in the merged tree, benchmark): results asv publish will not show, as a newer run uses another version
    superseded: list[tuple[Path, str]] = field(default_factory=list)
    joined: dict[Path, bytes] = field(default_factory=dict)  # confirmations files, their records joined

    @property
    def machines(self) -> list[str]:
        written = [dest for _, dest in self.copies if dest.name != BENCHMARKS_FILE] + list(self.joined)
        return sorted({(dest.parent.parent if dest.parent.name == BISECT_FOLDER else dest.parent).name
                       for dest in written})


def _read_json(path: Path, problems: list[str]) -> dict | None:
    try:
        data = json.loads(path.read_text())
    except (OSError, UnicodeDecodeError, ValueError) as exc:
        problems.append(f"{path}: not valid JSON ({exc})")
        return None
    if not isinstance(data, dict):
        problems.append(f"{path}: not a JSON object")
        return None
    return data


def _read_run_file(path: Path, machine: str, problems: list[str] | None, lands: Path) -> RunVersions | None:
    """The run file as asv reads it, named by where it `lands` in the merged tree; a problem is recorded when
    `problems` is given (a source), else ignored."""
    from asv.results import Results
    from asv.util import UserError

    try:
        run = Results.load(str(path), machine_name=machine)
    except (UserError, ValueError, TypeError, KeyError) as exc:
        if problems is not None:
            problems.append(f"{path}: not an asv results file of machine {machine!r} ({exc})")
        return None
    if problems is not None:
        try:  # a figure that is no number would pass here and stop every publish of the merged tree
            run_figures(run, str(path))
        except ValueError as exc:
            problems.append(str(exc))
            return None
    ran_at = {name: int(run.started_at.get(name) or run.date or 0) for name in run.benchmark_version}
    return RunVersions(lands, {k: v for k, v in run.benchmark_version.items() if v is not None}, ran_at)


def _run_files(tree: Path) -> Iterator[tuple[Path, str]]:
    """(path, machine) of every run file of an existing results tree."""
    for path in sorted(tree.glob("*/*.json")):
        if is_run_file(path):
            yield path, path.parent.name


def _check_places(sources: list[Path], dest: Path, problems: list[str]) -> None:
    """A destination that is, holds or lies inside a source would read what it writes."""
    if dest.exists() and not dest.is_dir():
        problems.append(f"--into {dest}: not a directory")
    elif not dest.resolve().parent.is_dir():
        problems.append(f"--into {dest}: the folder it would be made in, {dest.resolve().parent}, "
                        f"{not_a_folder(dest.resolve().parent)}")
    elif problem := folder_problem(dest):
        problems.append(f"--into {dest}: {problem}")
    elif (dest / MACHINE_FILE).is_file():
        problems.append(f"--into {dest} is one machine's directory of a results tree: pass the tree, "
                        f"{dest.resolve().parent}")
    target = dest.resolve()
    for source in sources:
        place = source.resolve()
        if place == target:
            problems.append(f"--into {dest} is also a source: merge it into another directory")
        elif place.is_relative_to(target):
            problems.append(f"{source} lies inside --into {dest}: merge it into a directory apart")
        elif target.is_relative_to(place):
            problems.append(f"--into {dest} lies inside the source {source}: merge into a directory apart")


def plan_merge(sources: list[Path], dest: Path) -> MergePlan:
    """What merging `sources` into `dest` would copy; MergeError listing every problem when it cannot."""
    problems: list[str] = []
    plan = MergePlan()
    _check_places(sources, dest, problems)
    if problems:
        raise MergeError(problems)
    planned: dict[Path, tuple[bytes, Path | None]] = {}  # destination file -> (content, the source it comes from)
    definitions: list[tuple[Path, dict]] = []  # every benchmarks.json, the destination's first
    runs: dict[Path, RunVersions] = {}  # by where each lies in the merged tree
    if (dest / BENCHMARKS_FILE).is_file():
        definitions.append((dest / BENCHMARKS_FILE, _read_json(dest / BENCHMARKS_FILE, problems) or {}))
    if dest.is_dir():
        # What is already there was accepted by an earlier merge or written by asv: read it, never judge it.
        for path, machine in _run_files(dest):
            if run := _read_run_file(path, machine, None, path):
                runs[path] = run
    for source in sources:
        if not source.is_dir():
            problems.append(f"{source}: not a directory")
            continue
        for path in sorted(source.rglob("*")):
            relative = path.relative_to(source)
            if path.is_dir() or any(part.startswith(".") for part in relative.parts):
                continue
            if relative == Path(BENCHMARKS_FILE):
                if (entries := _read_json(path, problems)) is not None:
                    definitions.append((path, entries))
                continue
            if relative.parts[1:] == (confirmations.FILE,):
                _plan_confirmations(plan, path, dest / relative, problems)
                continue
            if len(relative.parts) == 3 and relative.parts[1] == BISECT_FOLDER and path.suffix == ".json":
                _plan_bisect_file(plan, planned, path, dest / relative, problems)
                continue
            if len(relative.parts) != 2 or path.suffix != ".json":
                problems.append(f"{path}: not part of an asv results tree (expected <machine>/<file>.json)")
                continue
            machine = relative.parts[0]
            if path.name == MACHINE_FILE:
                entry = _read_json(path, problems)
                if entry is not None and entry.get("machine") != machine:
                    problems.append(f"{path}: names machine {entry.get('machine')!r}, but lies in {machine!r}")
            elif run := _read_run_file(path, machine, problems, dest / relative):
                runs[run.path] = run
            _plan_copy(plan, planned, path, dest / relative, problems)
    plan.benchmarks = _resolve_benchmarks(definitions, list(runs.values()), plan.superseded, problems)
    if problems:
        raise MergeError(problems)
    return plan


def _plan_copy(plan: MergePlan, planned: dict[Path, tuple[bytes, Path | None]], path: Path, target: Path,
               problems: list[str]) -> None:
    content = path.read_bytes()
    if target in planned:
        existing, origin = planned[target]
    elif target.is_file():
        existing, origin = target.read_bytes(), None
    else:
        plan.copies.append((path, target))
        planned[target] = (content, path)
        return
    if existing == content:
        plan.unchanged.append(target)
    elif path.name == MACHINE_FILE:
        if _compare_machines(path, existing, content, problems):
            plan.unchanged.append(target)  # same GPU from another box: the entry already there stands
    elif origin is None:
        problems.append(f"{path}: {target} already holds a different run of this machine, commit and environment; "
                        "remove one of them first")
    else:
        problems.append(f"{path} and {origin} are different runs of one machine, commit and environment; "
                        "merge only one of them")


def _plan_confirmations(plan: MergePlan, path: Path, target: Path, problems: list[str]) -> None:
    try:
        incoming = confirmations.read(path)
        existing = confirmations.read(target) if target not in plan.joined else \
            confirmations.parse(plan.joined[target].decode(), str(target))
    except confirmations.ConfirmationsError as exc:
        problems.append(str(exc))
        return
    content = confirmations.render(confirmations.joined(existing, incoming)).encode()
    if target.is_file() and target.read_bytes() == content:
        plan.unchanged.append(target)
        plan.joined.pop(target, None)
    else:
        plan.joined[target] = content


def _written_at(content: bytes) -> str:
    """When a bisect file was written, as it says (ISO 8601 in UTC, which sorts as text); '' when it does not."""
    try:
        data = json.loads(content)
    except ValueError:
        return ""
    return str(data.get("updated_at") or data.get("finished_at") or "") if isinstance(data, dict) else ""


def _plan_bisect_file(plan: MergePlan, planned: dict[Path, tuple[bytes, Path | None]], path: Path, target: Path,
                      problems: list[str]) -> None:
    content = path.read_bytes()
    if _read_json(path, problems) is None:
        return
    existing = planned[target][0] if target in planned else target.read_bytes() if target.is_file() else None
    if existing == content:
        plan.unchanged.append(target)
    elif existing is None or _written_at(content) > _written_at(existing):
        plan.copies = [(source, dest) for source, dest in plan.copies if dest != target]
        plan.copies.append((path, target))
        planned[target] = (content, path)


def _compare_machines(path: Path, existing: bytes, incoming: bytes, problems: list[str]) -> bool:
    """Two boxes with the same GPU share a machine directory; their host details may differ, their GPU may not."""
    try:
        old, new = json.loads(existing), json.loads(incoming)
    except ValueError as exc:
        problems.append(f"{path}: cannot compare with the machine file already there ({exc})")
        return False
    if any(old.get(key) != new.get(key) for key in GPU_IDENTITY):
        problems.append(f"{path}: machine {new.get('machine')!r} already holds results of a different GPU "
                        f"({[old.get(k) for k in GPU_IDENTITY]} vs {[new.get(k) for k in GPU_IDENTITY]})")
        return False
    return True


def _resolve_benchmarks(definitions: list[tuple[Path, dict]], runs: list[RunVersions],
                        superseded: list[tuple[Path, str]], problems: list[str]) -> dict:
    """One benchmarks.json from several, by the rule in the module's docstring."""
    formats = {path: entries.get(FORMAT_KEY) for path, entries in definitions if FORMAT_KEY in entries}
    if len(set(formats.values())) > 1:
        problems.append(f"benchmarks.json files of different asv formats: "
                        f"{', '.join(f'{path} ({number})' for path, number in formats.items())}")
        return {}
    # benchmark -> version -> its definition, the first tree's where several hold the same version
    defined: dict[str, dict[str, dict]] = {}
    for path, entries in definitions:
        for name, entry in entries.items():
            if name == FORMAT_KEY:
                continue
            if not isinstance(entry, dict):
                problems.append(f"{path}: {name!r} is not an asv benchmark definition")
                continue
            defined.setdefault(name, {}).setdefault(entry.get("version"), entry)
    newest: dict[str, dict[str, int]] = {}  # benchmark -> version -> when a result of it last ran
    for run in runs:
        for name, version in run.versions.items():
            when = newest.setdefault(name, {})
            when[version] = max(when.get(version, 0), run.ran_at.get(name, 0))
    merged = {name: next(iter(versions.values())) for name, versions in defined.items()}
    for name, versions in defined.items():
        used = {version: when for version, when in newest.get(name, {}).items() if version in versions}
        if len(versions) > 1 and used:
            merged[name] = versions[max(used, key=lambda version: (used[version], str(version)))]
    for run in runs:
        superseded.extend((run.path, name) for name, version in sorted(run.versions.items())
                          if name in merged and merged[name].get("version") != version)
    if formats:
        merged[FORMAT_KEY] = next(iter(formats.values()))
    return merged


def merge_results(sources: list[Path], dest: Path) -> MergePlan:
    """Merge every source results tree into dest. Returns what was done; MergeError (nothing written) if it cannot."""
    sources, dest = [Path(s) for s in sources], Path(dest)
    problems: list[str] = []
    _check_places(sources, dest, problems)  # before the lock: a refused merge waits for nobody
    if problems:
        raise MergeError(problems)
    try:
        with locked(exclusive=[dest], shared=sources):
            plan = plan_merge(sources, dest)
            files = {target: source.read_bytes() for source, target in plan.copies}
            files.update(plan.joined)
            if plan.benchmarks:
                content = (json.dumps(plan.benchmarks, indent=4, sort_keys=True) + "\n").encode()
                target = dest / BENCHMARKS_FILE
                if not target.is_file() or target.read_bytes() != content:
                    files[target] = content
            write_all_or_none(files)  # a full disk half way leaves no half tree
    except LockError as exc:
        raise MergeError([str(exc)]) from exc
    except OSError as exc:
        if exc.errno not in (errno.ENOSPC, errno.EDQUOT, errno.EROFS):  # the place, not a file it read
            raise
        raise MergeError([f"--into {dest}: {said(exc, dest)}"]) from exc
    return plan
