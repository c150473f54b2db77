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
