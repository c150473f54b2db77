"""What `sgemm bisect` and `sgemm confirm` are asked to look at: a case at a size between a good and a bad commit, from
the command line or from the notices file the change-point detector writes beside the site (notices.json).

A notice, as sgemm.watch.notices writes it and read here (other fields are left to their other readers):
    {"id": "...", "machine": "...", "state": "candidate" | ..., "cases": [{"case": "fp16/x", "size": 8192}, ...],
     "last_good": "<sha>", "bad": "<sha>", ...}
`bad` is the first commit measured slower and `last_good` the one measured before it: the step lies between them,
whether they are neighbours on the branch (the notice's `first_bad` is then `bad`) or commits the machine did not
measure lie between. A case of a non-square shape (its size null) is not one these commands time, and is passed by.
The file holds a list of notices, or an object whose "notices" is that list.
"""

from __future__ import annotations

import json
import re
from dataclasses import dataclass
from pathlib import Path

# Also a file name (sgemm.results.resultstree): <id>.json and <id>.state.json, so an id never ends in ".state".
NOTICE_ID = re.compile(r"[A-Za-z0-9][A-Za-z0-9._-]{0,127}(?<!\.state)")
REVISION = re.compile(r"[0-9a-fA-F]{7,40}")
CANDIDATE = "candidate"


class TargetError(ValueError):
    """The notices file, or a notice in it, cannot be used; the message says which and why."""


@dataclass(frozen=True)
class Target:
    """One case between two commits, and where it was asked for."""

    id: str
    case: str
    size: int
    good: str
    bad: str
    machine: str | None = None  # the machine whose history showed the step
    source: str = "the command line"

    @property
    def label(self) -> str:
        return f"{self.case} at {self.size}"


def identifier(case: str, size: int, good: str, bad: str) -> str:
    """An id for a target given on the command line: it names its result file."""
    return f"{case.replace('/', '-')}-{size}-{good[:8]}-{bad[:8]}"


def _notices(path: Path) -> list:
    try:
        data = json.loads(Path(path).read_text())
    except FileNotFoundError:
        raise TargetError(f"--notices {path}: no such file") from None
    except (OSError, UnicodeDecodeError, ValueError) as exc:
        raise TargetError(f"--notices {path}: not a readable JSON file ({exc})") from None
    notices = data.get("notices") if isinstance(data, dict) else data
    if not isinstance(notices, list):
        raise TargetError(f"--notices {path}: expected a list of notices, or {{\"notices\": [...]}}")
    return notices


def _field(notice: dict, key: str, where: str, check, wanted: str):
    value = notice.get(key)
    if not check(value):
        raise TargetError(f"{where}: {key} {value!r} is not {wanted}")
    return value


def _revision(value) -> bool:
    return isinstance(value, str) and bool(REVISION.fullmatch(value))


def _targets(notice, path: Path, number: int) -> list[Target]:
    where = f"--notices {path}: notice {number}"
    if not isinstance(notice, dict):
        raise TargetError(f"{where}: not a JSON object")
    notice_id = _field(notice, "id", where, lambda v: isinstance(v, str) and NOTICE_ID.fullmatch(v),
                       f"an id of letters, digits, '.', '_' and '-' ({NOTICE_ID.pattern})")
    where = f"--notices {path}: notice {notice_id}"
    machine = _field(notice, "machine", where, lambda v: isinstance(v, str) and v, "a machine name")
    cases = _field(notice, "cases", where, lambda v: isinstance(v, list) and v, "a non-empty list of cases")
    good = _field(notice, "last_good", where, _revision, "a commit hash")
    bad = _field(notice, "bad", where, _revision, "a commit hash")
    targets = []
    for entry in cases:
        if not isinstance(entry, dict):
            raise TargetError(f"{where}: a case is not an object with case and size")
        case = _field(entry, "case", where, lambda v: isinstance(v, str) and "/" in v, "a kernel name")
        if entry.get("size", 0) is None:
            continue
        size = _field(entry, "size", where, lambda v: isinstance(v, int) and not isinstance(v, bool) and v > 0,
                      "a positive whole number")
        targets.append(Target(notice_id, case, size, good, bad, machine, f"notice {notice_id} of {path}"))
    return targets


def from_notice(path: Path, notice_id: str, case: str | None = None, size: int | None = None) -> Target:
    """The notice's case to bisect: the one named by `case` (and `size`), else its first."""
    for number, notice in enumerate(_notices(path), 1):
        if isinstance(notice, dict) and notice.get("id") == notice_id:
            targets = _targets(notice, path, number)
            if not targets:
                raise TargetError(f"notice {notice_id} has no square case: its cases are timed at shapes, which "
                                  "bisect does not take")
            chosen = [t for t in targets if (case is None or t.case == case) and (size is None or t.size == size)]
            if not chosen:
                listed = ", ".join(t.label for t in targets)
                raise TargetError(f"notice {notice_id} has no case {case or ''} {size or ''}".rstrip()
                                  + f": it lists {listed}")
            return chosen[0]
    raise TargetError(f"--notices {path}: no notice with id {notice_id!r}")


def notices_in(path: Path) -> list[dict]:
    """The file's notices; TargetError naming the first that is no object with a state, which would otherwise be
    passed by as "not a candidate" and the file's damage read as "nothing to confirm"."""
    notices = _notices(path)
    for number, notice in enumerate(notices, 1):
        if not isinstance(notice, dict) or not isinstance(notice.get("state"), str):
            raise TargetError(f"--notices {path}: notice {number} is not a notice (an object with a state)")
    return notices


def candidates(path: Path, machine: str, notices: list[dict] | None = None) -> list[Target]:
    """Every case of the machine's notices that are still candidates (a step not yet confirmed); `notices`: the
    file's, where notices_in has read them already."""
    return [target for number, notice in enumerate(notices_in(path) if notices is None else notices, 1)
            if notice["state"] == CANDIDATE and notice.get("machine") == machine
            for target in _targets(notice, path, number)]
