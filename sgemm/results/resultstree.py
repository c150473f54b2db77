"""A results tree as this package lays it out: one directory a machine, named after it, holding asv's `machine.json`
and run files, and beside them what `sgemm confirm` and `sgemm bisect` write there:

    <results>/<machine>/machine.json              asv's machine entry
    <results>/<machine>/<commit>-<env>.json       asv's runs
    <results>/<machine>/confirmations.json        paired confirmations (sgemm.results.confirmations)
    <results>/<machine>/bisect/<id>.json          a bisect's result
    <results>/<machine>/bisect/<id>.state.json    the state a stopped bisect resumes from

The writers (the bisect command), the readers (the change-point detector) and `sgemm merge` take the names from
here, so that none mistakes one file for another.
"""

from __future__ import annotations

import json
from pathlib import Path

from . import confirmations

MACHINE_FILE = "machine.json"
BISECT_FOLDER = "bisect"
STATE_SUFFIX = ".state.json"
NOT_RUN_FILES = frozenset({MACHINE_FILE, confirmations.FILE})
# How a bisect ended, as its result file says: the watch reads them beside the notices they were run for.
FOUND, UNKNOWN, NO_STEP = "FOUND", "UNKNOWN", "NO STEP"


def machines(results_dir: Path) -> list[str]:
    """The machines of a tree: every directory holding a machine.json."""
    return sorted(path.parent.name for path in Path(results_dir).glob(f"*/{MACHINE_FILE}"))


def asv_files(results_dir: Path) -> list[Path]:
    """The files of a tree that asv reads beside its benchmarks.json, relative to the tree: each machine's
    machine.json, then its runs; not the confirmations or a bisect's files kept beside them, nor the watch's at the
    tree's root (asv, walking the tree itself, says it skips each folder of those, as if results were lost)."""
    found = []
    for machine in machines(results_dir):
        found.append(Path(machine) / MACHINE_FILE)
        found += sorted(Path(machine) / path.name for path in (Path(results_dir) / machine).iterdir()
                        if path.is_file() and is_run_file(path))
    return found


def machine_name(machine_dir: Path) -> str | None:
    """The name asv knows a machine by, its machine.json's `machine` field (not the folder's name), or None where
    asv could not read one, as it then passes the folder's runs by."""
    try:
        name = json.loads((Path(machine_dir) / MACHINE_FILE).read_text()).get("machine")
    except (OSError, ValueError, AttributeError):
        return None
    return name if isinstance(name, str) else None


def is_run_file(path: Path) -> bool:
    """A file of a machine's directory that asv wrote as a run (not one of the files this package keeps there)."""
    path = Path(path)
    return path.suffix == ".json" and path.name not in NOT_RUN_FILES and not path.name.startswith(".")


def bisect_result(machine_dir: Path, bisect_id: str) -> Path:
    return Path(machine_dir) / BISECT_FOLDER / f"{bisect_id}.json"


def bisect_state(machine_dir: Path, bisect_id: str) -> Path:
    return Path(machine_dir) / BISECT_FOLDER / f"{bisect_id}{STATE_SUFFIX}"


def is_bisect_state(path: Path) -> bool:
    return Path(path).name.endswith(STATE_SUFFIX)
