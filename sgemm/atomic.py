"""Write a file whole or not at all: what was recorded before stays readable until the new content replaces it."""

from __future__ import annotations

import contextlib
import os
import tempfile
from pathlib import Path


def write_atomically(path: Path, content: bytes | str) -> None:
    """Replace `path` with `content` in one rename, keeping the file's permissions (0644 for a new one).

    The temporary file has a name of its own, so two writers never share it; its leading dot keeps it out of what
    asv and `sgemm merge` read should it be left behind by a killed process.
    """
    if isinstance(content, str):
        content = content.encode("utf-8")
    path = Path(path)
    path.parent.mkdir(parents=True, exist_ok=True)
    mode = path.stat().st_mode & 0o777 if path.is_file() else 0o644  # mkstemp's own 0600 would hide it from others
    fd, tmp = tempfile.mkstemp(dir=path.parent, prefix=f".{path.name}.", suffix=".tmp")
    try:
        os.fchmod(fd, mode)
        with os.fdopen(fd, "wb") as out:
            out.write(content)
        os.replace(tmp, path)
    except BaseException:
        with contextlib.suppress(OSError):
            os.unlink(tmp)
        raise
