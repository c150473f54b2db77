"""Write a file whole or not at all: what was recorded before stays readable until the new content replaces it; and
several files all or none (a merge meeting a full disk half way leaves no half tree)."""

from __future__ import annotations

import contextlib
import os
import tempfile
from pathlib import Path


def _mode(path: Path) -> int:
    """The permissions a file written over `path` keeps: its own, or 0644 for a new one (mkstemp's 0600 would hide it
    from others)."""
    return path.stat().st_mode & 0o777 if path.is_file() else 0o644


def _write_temporary(path: Path, content: bytes) -> str:
    """`content` in a new temporary file beside `path`, with the permissions `path` is to have; its name. On any
    failure the temporary file is gone.

    The temporary file has a name of its own, so two writers never share it; its leading dot keeps it out of what
    asv and `sgemm merge` read should it be left behind by a killed process.
    """
    fd, tmp = tempfile.mkstemp(dir=path.parent, prefix=f".{path.name}.", suffix=".tmp")
    try:
        os.fchmod(fd, _mode(path))
        with os.fdopen(fd, "wb") as out:
            out.write(content)
    except BaseException:
        with contextlib.suppress(OSError):
            os.unlink(tmp)
        raise
    return tmp


def write_atomically(path: Path, content: bytes | str) -> None:
    """Replace `path` with `content` in one rename, keeping the file's permissions (0644 for a new one)."""
    if isinstance(content, str):
        content = content.encode("utf-8")
    path = Path(path)
    path.parent.mkdir(parents=True, exist_ok=True)
    tmp = _write_temporary(path, content)
    try:
        os.replace(tmp, path)
    except BaseException:
        with contextlib.suppress(OSError):
            os.unlink(tmp)
        raise


def _make_folders(folder: Path) -> list[Path]:
    """Make `folder` and whatever above it is missing; the folders made, the deepest last."""
    missing = [place for place in (folder, *folder.parents) if not place.exists()][::-1]
    for place in missing:
        place.mkdir()
    return missing


def write_all_or_none(contents: dict[Path, bytes]) -> None:
    """Write every file of `contents` (path -> bytes), or leave each place as it was.

    Every content is written to a temporary file beside its path first, and only once all of them are written are
    they renamed into place. A rename takes no space, so a full disk or quota is met before anything is renamed, and
    then nothing is left behind: the temporary files and the folders made for them are removed, and the OSError is
    raised.
    """
    made: list[Path] = []
    written: dict[Path, str] = {}
    try:
        for path, content in contents.items():
            made += _make_folders(Path(path).parent)
            written[Path(path)] = _write_temporary(Path(path), content)
        for path, tmp in written.items():
            os.replace(tmp, path)
    except BaseException:
        for tmp in written.values():
            with contextlib.suppress(OSError):
                os.unlink(tmp)
        for folder in reversed(made):
            with contextlib.suppress(OSError):
                folder.rmdir()
        raise
