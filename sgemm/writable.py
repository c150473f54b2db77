"""Whether a command can write where it was told to, found by trying before any work; and an OSError met while
writing, said in words that name the cause and the place the user gave.

Permission bits cannot answer the first question: root passes every check of them, yet a read-only mount, /proc or a
full quota refuse the attempt. So a temporary file is made in the folder and removed at once.
"""

from __future__ import annotations

import errno
import os
import re
import tempfile
from pathlib import Path

PROBE_PREFIX = ".sgemm-probe-"


def nearest_existing(path: Path) -> Path:
    """`path`, or the nearest folder above it that exists: where a folder not there yet would be made."""
    return next(place for place in (path, *path.parents) if os.path.lexists(place))


def not_a_folder(path: Path) -> str:
    """What `path`, where a folder was wanted and none is, is instead: a file, something else, or nothing."""
    if Path(path).is_file():
        return "is a file"
    return "is not a directory" if os.path.lexists(path) else "does not exist"


def said(exc: OSError, place: Path | str) -> str:
    """`exc`, met writing in or at `place`, in words: the cause and the place (never a temporary file's name)."""
    if exc.errno in (errno.ENOSPC, errno.EDQUOT):
        return f"no space left on the device of {place}"
    if exc.errno == errno.EROFS:
        return f"{place} is read-only"
    if exc.errno in (errno.EACCES, errno.EPERM):
        return f"{place} cannot be written by this user"
    return f"{place} cannot be written ({exc.strerror or exc})"


def write_problem(folder: Path) -> str | None:
    """Why no file can be made in the existing folder `folder` (said as `said` says it), or None when one can."""
    try:
        handle, probe = tempfile.mkstemp(dir=folder, prefix=PROBE_PREFIX)
    except OSError as exc:
        return said(exc, folder)
    os.close(handle)
    os.unlink(probe)
    return None


def folder_problem(path: Path) -> str | None:
    """Why the folder `path` cannot be written, or made and then written where it is not there yet; None when it
    can. A file where a folder must be is named as such."""
    place = nearest_existing(Path(path).absolute())
    if not place.is_dir():
        return f"{place} is not a directory"
    return write_problem(place)


def file_problem(path: Path) -> str | None:
    """Why the file `path` (its folder exists) cannot be written, or made; None when it can."""
    path = Path(path).absolute()
    if problem := write_problem(path.parent):
        return problem
    if path.exists() and not os.access(path, os.W_OK):
        return f"{path} cannot be written by this user"
    return None


def _mount_points() -> set[str]:
    """Where something is mounted, from /proc/self/mountinfo (its fifth field, with spaces and the like escaped as
    octal); empty where there is no such file."""
    try:
        lines = Path("/proc/self/mountinfo").read_text(errors="surrogateescape").splitlines()
    except OSError:
        return set()
    return {re.sub(r"\\([0-7]{3})", lambda octal: chr(int(octal.group(1), 8)), line.split(" ")[4])
            for line in lines if len(line.split(" ")) > 4}


def is_mount_point(path: Path) -> bool:
    """Whether a file system is mounted at `path`, a bind mount of a folder of the same file system included (which
    os.path.ismount, comparing devices, does not see)."""
    path = Path(path).resolve()
    return os.path.ismount(path) or str(path) in _mount_points()
