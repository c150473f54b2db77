"""The two ends of a slowdown, checked before any GPU work, and the commits between them that a bisect searches.

The ends must be commits of the repository, the good one an ancestor of the bad one and not the same commit, and
the case must exist at both, in each commit's own catalogue (sgemm.sourcetree), as a kernel that is compiled from
the tree (a library kernel is one library at every commit) and computes the size asked for.

The commits searched are the bad end's first-parent line back to the good end (`git rev-list --first-parent`): on a
branch that takes changes as merges, each merge stands for what it merged, and a merge named as the first bad commit
says so (the commits it brought in can be bisected as a range of their own). A good end that is not on that line (it
came in through a merge) is refused: the line never passes it.
"""

from __future__ import annotations

import tempfile
from dataclasses import dataclass
from pathlib import Path

from .. import sourcetree
from ..catalogue import Kernel
from ..git import GitError, git, resolve_commit


class RangeError(ValueError):
    """The ends cannot be compared or bisected; the message says why, in one line."""


@dataclass(frozen=True)
class Chain:
    """The first-parent line from just after `good` to `bad` (its last commit), oldest first."""

    good: str
    commits: tuple[str, ...]
    merges: tuple[str, ...]  # those of `commits` with more than one parent

    @property
    def bad(self) -> str:
        return self.commits[-1]


def resolve(repo: Path, revision: str, end: str) -> str:
    try:
        return resolve_commit(str(repo), revision)
    except GitError:
        raise RangeError(f"the {end} end {revision!r} is not a commit of {repo}") from None


def check_ends(repo: Path, good_revision: str, bad_revision: str, kernel: str, size: int) -> tuple[str, str, Kernel]:
    """Both ends as full hashes and the kernel's entry at the bad end, or RangeError saying why they cannot be
    compared."""
    good, bad = resolve(repo, good_revision, "good"), resolve(repo, bad_revision, "bad")
    if good == bad:
        raise RangeError(f"the good and the bad end are the same commit {good[:12]}: the range is empty")
    try:
        git(str(repo), "merge-base", "--is-ancestor", good, bad)
    except GitError:
        raise RangeError(f"the good end {good[:12]} is not an ancestor of the bad end {bad[:12]}: no range of "
                         "history leads from one to the other") from None
    with tempfile.TemporaryDirectory(prefix="sgemm-ends-") as scratch:
        entries = [_check_case(repo, commit, end, kernel, size, Path(scratch) / end)
                   for end, commit in (("good", good), ("bad", bad))]
    return good, bad, entries[-1]


def _check_case(repo: Path, commit: str, end: str, kernel: str, size: int, folder: Path) -> Kernel:
    try:
        kernels = sourcetree.kernels(sourcetree.export(repo, commit, folder))
    except sourcetree.TreeError as exc:
        raise RangeError(f"the {end} end {commit[:12]}: {exc}") from None
    entry = kernels.get(kernel)
    if entry is None:
        raise RangeError(f"{kernel} is not in the catalogue of the {end} end {commit[:12]}")
    if entry.library:
        raise RangeError(f"{kernel} calls {entry.library}, one library at every commit: there is nothing in the "
                         "history to bisect")
    if problem := entry.shape_problem(size, size, size):
        raise RangeError(f"at the {end} end {commit[:12]}: {problem}")
    return entry


def first_parent_chain(repo: Path, good: str, bad: str) -> Chain:
    """The commits a bisect searches (full hashes of checked ends), or RangeError when `good` is not on `bad`'s
    first-parent line."""
    commits = tuple(git(str(repo), "rev-list", "--first-parent", "--reverse", f"{good}..{bad}").split())
    if not commits:
        raise RangeError(f"no commit lies between {good[:12]} and {bad[:12]}: the range is empty")
    parent = git(str(repo), "rev-parse", f"{commits[0]}^").strip()
    if parent != good:
        raise RangeError(f"the good end {good[:12]} is not on the first-parent line of {bad[:12]} (it came in "
                         "through a merge): name a good commit on that line, such as the merge's first parent")
    lines = git(str(repo), "rev-list", "--first-parent", "--parents", f"{good}..{bad}").splitlines()
    merges = {line.split()[0] for line in lines if len(line.split()) > 2}
    return Chain(good, commits, tuple(c for c in commits if c in merges))


def subject(repo: Path, commit: str) -> str:
    return git(str(repo), "log", "-1", "--format=%s", commit).strip()
