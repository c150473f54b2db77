"""Merge the asv results trees of several GPU boxes into one, for `asv publish`.

Each machine keeps its own directory. A file the destination already holds with the same content is left alone, so
merging twice changes nothing. A run file that differs from the one already there (one machine's run of one commit
in one environment, twice) is refused, never overwritten: only a person can say which to keep. Every source file is
read as asv would read it before anything is written, so a bad file stops the merge with nothing changed.
"""

from __future__ import annotations

import json
from dataclasses import dataclass, field
from pathlib import Path

BENCHMARKS_FILE = "benchmarks.json"
MACHINE_FILE = "machine.json"
# The machine facets that say which GPU a directory's history belongs to (see machine.py).
GPU_IDENTITY = ("gpu", "gpu_memory", "compute_capability")


class MergeError(ValueError):
    """Some source cannot be merged; the message names every such file and why. Nothing was written."""


@dataclass
class MergePlan:
    copies: list[tuple[Path, Path]] = field(default_factory=list)  # (source file, destination file)
    unchanged: list[Path] = field(default_factory=list)  # destination files that already hold the same content
    benchmarks: dict = field(default_factory=dict)  # the merged benchmarks.json

    @property
    def machines(self) -> list[str]:
        return sorted({dest.parent.name for _, dest in self.copies if dest.name != BENCHMARKS_FILE})


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


def _check_run_file(path: Path, machine: str, problems: list[str]) -> None:
    from asv.results import Results
    from asv.util import UserError

    try:
        Results.load(str(path), machine_name=machine)
    except (UserError, ValueError, TypeError, KeyError) as exc:
        problems.append(f"{path}: not an asv results file of machine {machine!r} ({exc})")


def plan_merge(sources: list[Path], dest: Path) -> MergePlan:
    """What merging `sources` into `dest` would copy; MergeError listing every problem when it cannot."""
    problems: list[str] = []
    plan = MergePlan()
    planned: dict[Path, bytes] = {}
    dest_benchmarks = dest / BENCHMARKS_FILE
    if dest_benchmarks.is_file():
        plan.benchmarks = _read_json(dest_benchmarks, problems) or {}
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
                    plan.benchmarks.update(entries)  # the same suite's definitions; a later source's are newer
                continue
            if len(relative.parts) != 2 or path.suffix != ".json":
                problems.append(f"{path}: not part of an asv results tree (expected <machine>/<file>.json)")
                continue
            machine = relative.parts[0]
            if path.name == MACHINE_FILE:
                entry = _read_json(path, problems)
                if entry is not None and entry.get("machine") != machine:
                    problems.append(f"{path}: names machine {entry.get('machine')!r}, but lies in {machine!r}")
            else:
                _check_run_file(path, machine, problems)
            target = dest / relative
            content = path.read_bytes()
            existing = planned.get(target, target.read_bytes() if target.is_file() else None)
            if existing is None:
                plan.copies.append((path, target))
                planned[target] = content
            elif existing == content:
                plan.unchanged.append(target)
            elif path.name == MACHINE_FILE:
                if _compare_machines(path, existing, content, problems):
                    plan.unchanged.append(target)  # same GPU from another box: the entry already there stands
            else:
                problems.append(f"{path}: {target} already holds a different run of this machine, commit and "
                                f"environment; remove one of them first")
    if problems:
        raise MergeError("cannot merge; nothing was written:\n  " + "\n  ".join(problems))
    return plan


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


def _write(path: Path, content: bytes) -> None:
    path.parent.mkdir(parents=True, exist_ok=True)
    tmp = path.with_name(path.name + ".tmp")
    tmp.write_bytes(content)
    tmp.replace(path)


def merge_results(sources: list[Path], dest: Path) -> MergePlan:
    """Merge every source results tree into dest. Returns what was done; MergeError (nothing written) if it cannot."""
    plan = plan_merge([Path(s) for s in sources], Path(dest))
    for source, target in plan.copies:
        _write(target, source.read_bytes())
    if plan.benchmarks:
        _write(Path(dest) / BENCHMARKS_FILE, (json.dumps(plan.benchmarks, indent=4, sort_keys=True) + "\n").encode())
    return plan
