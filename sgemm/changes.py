"""Which kernels a change between two commits can make faster or slower: what the gate measures.

A kernel is affected when its catalogue entry changed, or its `.cu` file or a header that file includes changed.
Code every measurement goes through (build, problem, verify, measure, record, the suite, the asv configuration) or
the catalogue's [suite] table affects every kernel. The cuBLAS baselines are always measured as a control: the
change cannot touch them, so a verdict other than SAME on one says the box, not the change, moved.

Everything is read from git at the two commits, never from the working tree.
"""

from __future__ import annotations

import subprocess
import tomllib
from dataclasses import dataclass, field

from .build import local_includes

CATALOGUE_FILE = "sgemm/catalogue.toml"
CONTROL = "control"  # the reason a cuBLAS baseline is measured: no change can touch it
KERNEL_DIR = "kernels"
# Paths whose change can move every kernel's figures (a prefix ending in '/' covers a directory).
SHARED_CODE = (
    "sgemm/build.py", "sgemm/problem.py", "sgemm/verify.py", "sgemm/measure.py", "sgemm/record.py",
    "sgemm/telemetry.py", "sgemm/catalogue.py", "benchmarks/", "asv.conf.json", "pyproject.toml",
)


class ChangeError(RuntimeError):
    """git cannot answer (not a repository, unknown commit); the message says which."""


@dataclass(frozen=True)
class Selection:
    kernels: tuple[str, ...]  # HEAD's kernels the change can affect, cuBLAS controls included, catalogue order
    reasons: dict[str, str] = field(default_factory=dict)  # kernel -> why it is measured
    everything: str | None = None  # why every kernel is measured, when shared code changed
    removed: tuple[str, ...] = ()  # kernels BASE had and HEAD has not: nothing to measure at HEAD

    @property
    def controls(self) -> tuple[str, ...]:
        """The kernels measured as controls (cuBLAS), not because the change touched them."""
        return tuple(name for name, why in self.reasons.items() if why == CONTROL)


def git(repo: str, *args: str) -> str:
    done = subprocess.run(["git", "-C", repo, *args], capture_output=True, text=True)
    if done.returncode:
        raise ChangeError(f"git {' '.join(args)}: {done.stderr.strip() or 'failed'}")
    return done.stdout


def resolve_commit(repo: str, revision: str) -> str:
    """The full hash of a revision, or ChangeError naming it."""
    try:
        return git(repo, "rev-parse", "--verify", "--quiet", f"{revision}^{{commit}}").strip()
    except ChangeError:
        raise ChangeError(f"{revision!r} is not a commit of {repo}") from None


def _file_at(repo: str, commit: str, path: str) -> str | None:
    done = subprocess.run(["git", "-C", repo, "show", f"{commit}:{path}"], capture_output=True, text=True)
    return done.stdout if done.returncode == 0 else None


def _catalogue_at(repo: str, commit: str) -> dict:
    text = _file_at(repo, commit, CATALOGUE_FILE)
    if text is None:
        return {}
    try:
        return tomllib.loads(text)
    except tomllib.TOMLDecodeError as exc:
        raise ChangeError(f"{CATALOGUE_FILE} at {commit[:12]} is not valid TOML: {exc}") from exc


def _kernel_files(repo: str, commit: str, source: str) -> set[str]:
    """The kernel's source and every local header it includes, transitively, as repository paths."""
    files: set[str] = set()
    pending = [source]
    while pending:
        name = pending.pop()
        path = f"{KERNEL_DIR}/{name}"
        if path in files:
            continue
        files.add(path)
        pending.extend(local_includes(_file_at(repo, commit, path) or ""))
    return files


def _shared_code(path: str) -> bool:
    return any(path == shared or (shared.endswith("/") and path.startswith(shared)) for shared in SHARED_CODE)


def select_kernels(repo: str, base: str, head: str) -> Selection:
    changed = [line for line in git(repo, "diff", "--name-only", base, head).splitlines() if line]
    before, after = _catalogue_at(repo, base), _catalogue_at(repo, head)
    entries_before = {table["name"]: table for table in before.get("kernel", [])}
    entries_after = {table["name"]: table for table in after.get("kernel", [])}
    names = list(entries_after)
    removed = tuple(name for name in entries_before if name not in entries_after)

    shared = [path for path in changed if _shared_code(path)]
    if before.get("suite") != after.get("suite"):
        shared.append(f"{CATALOGUE_FILE} [suite]")
    if shared:
        return Selection(tuple(names), {}, f"shared code changed: {', '.join(shared)}", removed)

    reasons: dict[str, str] = {}
    for name, table in entries_after.items():
        if name not in entries_before:
            reasons[name] = "new kernel"
        elif table != entries_before[name]:
            reasons[name] = "catalogue entry changed"
        elif "source" in table:
            touched = sorted(_kernel_files(repo, head, table["source"]) & set(changed))
            if touched:
                reasons[name] = f"{', '.join(touched)} changed"
    precisions = {name.split("/", 1)[0] for name in reasons} or {name.split("/", 1)[0] for name in names}
    for name, table in entries_after.items():
        if "library" in table and name.split("/", 1)[0] in precisions:
            reasons.setdefault(name, CONTROL)
    return Selection(tuple(name for name in names if name in reasons), reasons, None, removed)
