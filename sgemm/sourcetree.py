"""A commit's kernels and catalogue, copied out of git into a folder of their own, so that one process can build a
kernel as it stands at two commits: the gate's base and head, the history's reference and the commit under test.

A tree holds `kernels/` and `sgemm/catalogue.toml` as the commit has them, and nothing else: what is built from it is
the kernel's source, its headers and its catalogue entry, while the code that builds, launches and times them is the
running package's own. A commit from before kernels stated their launch geometry states it in its catalogue entries,
which the launch then takes (sgemm/measuring/resources.py, launch_geometry).
"""

from __future__ import annotations

import io
import subprocess
import tarfile
from pathlib import Path

from .catalogue import CatalogueError, Kernel, load_catalogue

CATALOGUE = "sgemm/catalogue.toml"
KERNELS = "kernels"


class TreeError(RuntimeError):
    """The commit's tree cannot be exported or read; the message says which commit and why."""


def export(repo: Path, commit: str, dest: Path, paths: tuple[str, ...] = (KERNELS, CATALOGUE),
           what: str = "kernels") -> Path:
    """Write the commit's kernels and catalogue (or the other `paths` of it, `what` they are) under `dest` (made new)
    and return it."""
    done = subprocess.run(["git", "-C", str(repo), "archive", "--format=tar", commit, *paths], capture_output=True)
    if done.returncode:
        raise TreeError(f"cannot export the {what} of {commit[:12]}: "
                        f"{done.stderr.decode(errors='replace').strip() or 'git archive failed'}")
    dest.mkdir(parents=True, exist_ok=False)
    with tarfile.open(fileobj=io.BytesIO(done.stdout)) as archive:
        archive.extractall(dest, filter="data")
    return dest


def kernels(tree: Path) -> dict[str, Kernel]:
    """The tree's catalogue, each kernel built from the tree's own sources."""
    try:
        return load_catalogue(tree / CATALOGUE, tree / KERNELS)
    except CatalogueError as exc:
        raise TreeError(f"the catalogue in {tree} cannot be read: {exc}") from exc
