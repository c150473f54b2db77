"""git as every feature asks it: one command's output, or GitError saying what git said."""

from __future__ import annotations

import subprocess
from pathlib import Path


class GitError(RuntimeError):
    """git cannot answer (not a repository, unknown commit); the message says which."""


def git(repo: str | Path, *args: str) -> str:
    done = subprocess.run(["git", "-C", str(repo), *args], capture_output=True, text=True)
    if done.returncode:
        raise GitError(f"git {' '.join(args)}: {done.stderr.strip() or 'failed'}")
    return done.stdout


def resolve_commit(repo: str | Path, revision: str) -> str:
    """The full hash of a revision, or GitError naming it."""
    try:
        return git(repo, "rev-parse", "--verify", "--quiet", f"{revision}^{{commit}}").strip()
    except GitError:
        raise GitError(f"{revision!r} is not a commit of {repo}") from None
