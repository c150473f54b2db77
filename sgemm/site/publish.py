"""The published site of a results tree (one box's, or several merged): `asv publish`, then the cross-GPU page
linked from asv's navbar, room around the lines of asv's benchmark grid (so that a flat line is not hidden on a
tile's border), then every library the pages load vendored beside them, so that the site works offline.

asv publish runs under a configuration of its own (sgemm.results.asvconf) that points at the given results and HTML
directories, so the project's asv.conf.json and its `results/` stay as they are.

asv publish deletes its output directory before it writes, so the site is never built in place. It is built in a
fresh directory beside the HTML directory and moved there only once it is whole; the directory it replaces must be
one this module made (it holds the marker file `.sgemm-site`), or empty, or not there yet. An HTML directory that
is, holds or lies inside the results, or is or holds the repository, is refused before anything is written. A
publish holds an exclusive lock on the HTML directory and a shared one on the results (see
sgemm.site.merge.locked), so two publishes into one site, or a publish and a merge of its results, take turns.

The marker is also the site's manifest: it names every file the publish wrote. A site is often made a git checkout
(gh-pages) or given files of its own (CNAME) after it was first published, so a publish replaces only what the
manifest names. Everything else in the old site is foreign and is moved, by rename, into the new site at the same
place before the swap: a directory holding nothing the manifest names moves as one entry (or entry by entry, where
the new site has that directory too), and a symlink is an entry that is never followed. A foreign entry where the
new site has a file of its own (or a file where the foreign entry's directory would be) is refused, before anything
is moved. A marker written before markers were manifests names no files; for such a site only a top-level `.git`
is foreign, and everything else is replaced as it always was.
"""

from __future__ import annotations

import errno
import json
import math
import os
import re
import shutil
import stat
import subprocess
import sys
import tempfile
from collections.abc import Sequence
from dataclasses import dataclass, field
from pathlib import Path, PurePosixPath
from typing import Protocol

from ..catalogue import Kernel
from ..results import asvsuite, resultstree
from ..results.asvconf import write_asv_config
from ..writable import is_mount_point, not_a_folder, said, write_problem
from .crossgpu import report_across_gpus, unmeasured_size, write_no_gpu_page
from .ladders import ReportError
from .merge import LockError, locked
from .resources import newest_run, write_resource_page
from .vendor import (SiteError, Vendored, add_nav_link, add_summary_margins, drop_nav_item, drop_unmeasured_list_rows,
                     vendor_assets)

CROSS_GPU_DIR = "gpus"
CROSS_GPU_LABEL = "Across GPUs"
RESOURCE_DIR = "resources"
RESOURCE_LABEL = "Resources per kernel"
# What of asv's output a failed publish shows: its last lines say why.
ASV_OUTPUT_TAIL = 3000
# In every site this module made; a directory without it is never replaced. It lists the files the publish wrote.
SITE_MARKER = ".sgemm-site"
# The first line of a marker that is a manifest; a marker whose first line is anything else predates manifests.
MANIFEST_HEADER = ("# made by sgemm publish; the next publish into this directory replaces the files listed here "
                   "and keeps everything else")
# All that a marker from before manifests lets a publish keep: the checkout that the bug report lost.
LEGACY_FOREIGN = [".git"]


class PublishError(RuntimeError):
    """The site could not be built; the message says why. The results, and the site that was there, are untouched."""


class SitePart(Protocol):
    """Pages another part of the package adds to the site (the watch's regressions page): read what they need under
    the publish's locks, before anything is built (an error raised there stops the publish, nothing changed), then
    written into the built site, returning the navbar links they want as (href, label, the id of asv's navbar item
    the page replaces, or None)."""

    def prepare(self) -> None: ...

    def write(self, built: Path) -> list[tuple[str, str, str | None]]: ...


@dataclass
class Site:
    html_dir: Path
    cross_gpu: list[Path] = field(default_factory=list)  # the cross-GPU page's files; empty when it was left out
    cross_gpu_skipped: str = ""  # why the cross-GPU page says there are no GPU results
    resources: list[Path] = field(default_factory=list)  # the resource page's files; empty without resource figures
    left_out: list[str] = field(default_factory=list)  # benchmarks with no figure in the results, not shown
    vendored: list[Vendored] = field(default_factory=list)
    kept: list[str] = field(default_factory=list)  # what the old site held that no publish made, moved across


def check_inputs(repo: Path, results_dir: Path) -> None:
    """PublishError unless `results_dir` is an asv results tree and `repo` an asv project."""
    if not (results_dir / "benchmarks.json").is_file():
        raise PublishError(f"{results_dir}: not an asv results tree (no benchmarks.json); pass the directory that "
                           "`asv run` or `sgemm merge` filled")
    if not (repo / "asv.conf.json").is_file():
        raise PublishError(f"{repo}: no asv.conf.json; pass the repository the results were measured from (--repo)")


def measured_benchmarks(results_dir: Path) -> set[str]:
    """The benchmarks of which some run file in the tree holds a figure (not a failure, not a skip); a file asv
    cannot read is passed by, as asv's publish passes it by."""
    from asv.results import Results
    from asv.util import UserError

    found, names = set(), {}
    for path in resultstree.asv_files(results_dir):  # a machine's machine.json comes before its runs
        if path.name == resultstree.MACHINE_FILE:
            names[path.parent] = resultstree.machine_name(results_dir / path.parent)
            continue
        if (machine := names.get(path.parent)) is None:
            continue
        try:
            results = Results.load(str(results_dir / path), machine_name=machine)
        except UserError:
            continue
        try:
            figures = asvsuite.run_figures(results, str(results_dir / path))
        except ValueError as exc:
            raise PublishError(f"{exc} (nothing was published)") from None
        for name, values in figures.items():
            if name not in found and any(value is not None and not math.isnan(value) for value in values):
                found.add(name)
    return found


def results_view(results_dir: Path, view: Path) -> list[str]:
    """At `view`, the results tree as `asv publish` is to read it: every file of asv's (resultstree.asv_files) a
    symlink to its original, and benchmarks.json less the benchmarks no file holds a figure of, which asv would draw
    as blank tiles and empty pages (a box without a GPU records no Gemm figure; a tree may hold no resource figures).
    Returns those left out."""
    try:
        benchmarks = json.loads((results_dir / "benchmarks.json").read_text())
    except (OSError, ValueError) as exc:
        raise PublishError(f"{results_dir / 'benchmarks.json'}: cannot be read as asv's list of benchmarks ({exc})"
                           ) from exc
    if not isinstance(benchmarks, dict):
        raise PublishError(f"{results_dir / 'benchmarks.json'}: not asv's list of benchmarks (a JSON object)")
    measured = measured_benchmarks(results_dir)
    left_out = sorted(name for name in benchmarks if name != "version" and name not in measured)
    if len(left_out) == len([name for name in benchmarks if name != "version"]):
        left_out = []  # nothing measured at all: asv's own pages say so better than an empty grid
    view.mkdir(parents=True, exist_ok=True)
    for path in resultstree.asv_files(results_dir):
        (view / path.parent).mkdir(exist_ok=True)
        os.symlink(os.path.abspath(results_dir / path), view / path)
    (view / "benchmarks.json").write_text(json.dumps({name: entry for name, entry in benchmarks.items()
                                                      if name not in left_out}))
    return left_out


# The errors of a write that the place written to causes (a full disk or quota, a read-only mount), not the content.
PLACE_ERRNOS = (errno.ENOSPC, errno.EDQUOT, errno.EROFS)
_ASV_OS_ERROR = re.compile(r"^\w*Error: \[Errno (\d+)\] [^\n]*?(?:: '([^'\n]+)')?$", re.MULTILINE)


def _write_error_of(asv_output: str) -> OSError | None:
    """The OSError that ended asv's traceback, when it is one of PLACE_ERRNOS."""
    found = _ASV_OS_ERROR.findall(asv_output)
    if not found or int(found[-1][0]) not in PLACE_ERRNOS:
        return None
    number, filename = int(found[-1][0]), found[-1][1]
    return OSError(number, os.strerror(number), filename) if filename else OSError(number, os.strerror(number))


def asv_publish(repo: Path, results_dir: Path, html_dir: Path) -> list[str]:
    """`asv publish` of `results_dir` into `html_dir` (which asv empties first), or PublishError with asv's words.
    Returns the benchmarks left out of the site, with no figure in the results (results_view)."""
    check_inputs(repo, results_dir)
    with tempfile.TemporaryDirectory(prefix="sgemm-publish-") as scratch:
        left_out = results_view(results_dir, Path(scratch) / "results")
        config = write_asv_config(repo, Path(scratch) / "asv.conf.json", results_dir=Path(scratch) / "results",
                                  html_dir=html_dir, env_dir=Path(scratch) / "env")
        branches = json.loads(config.read_text()).get("branches", ["main"])
        done = subprocess.run([sys.executable, "-m", "asv", "publish", "--config", str(config)], cwd=repo,
                              capture_output=True, text=True)
    if done.returncode != 0:
        output = (done.stdout + done.stderr).strip()[-ASV_OUTPUT_TAIL:]
        if failed_write := _write_error_of(output):
            raise failed_write  # said as the publish's own writes are: the cause and the place, in one line
        raise PublishError(f"asv publish exited {done.returncode}:\n{output}")
    # asv draws a history only for commits it finds on the configured branches; for the others it says nothing.
    index = json.loads((html_dir / "index.json").read_text())
    if not index.get("revision_to_hash"):
        raise PublishError(f"none of the commits in {results_dir} is on the branches {branches} of "
                           f"{repo}: the site would show no history (pass the repository they were measured from, "
                           "with those branches fetched)")
    return left_out


def check_places(repo: Path, results_dir: Path, html_dir: Path, npm_cache: Path | None = None) -> None:
    """PublishError when making the site in `html_dir` could delete or change what it did not make, or when the
    --npm-cache folder cannot serve as one (check_npm_cache)."""
    html = html_dir.resolve()
    places = [("the repository", repo.resolve()), ("the results", results_dir.resolve())]
    if npm_cache is not None:
        places.append(("the npm cache", npm_cache.resolve()))
    for name, place in places:
        if html == place:
            raise PublishError(f"--html {html_dir} is {name}: give the site a directory of its own, e.g. --html html")
        if place.is_relative_to(html):
            raise PublishError(f"--html {html_dir} holds {name} ({place}): give the site a directory of its own")
    if html.is_relative_to(results_dir.resolve()):
        raise PublishError(f"--html {html_dir} lies inside the results {results_dir}: put the site outside them")
    if html.is_relative_to(repo.resolve() / ".git"):
        raise PublishError(f"--html {html_dir} lies inside the repository's .git: put the site elsewhere")
    if html.exists() and not html.is_dir():
        raise PublishError(f"--html {html_dir}: not a directory")
    if not html.parent.is_dir():
        raise PublishError(f"--html {html_dir}: the folder it would be made in, {html.parent}, "
                           f"{not_a_folder(html.parent)}")
    # The site is built in a folder beside the HTML directory, then put in its place by renames.
    if problem := write_problem(html.parent):
        raise PublishError(f"--html {html_dir}: {problem}")
    if html.is_dir() and is_mount_point(html):
        problem = write_problem(html)
        raise PublishError(f"--html {html_dir} is a mount point{f' ({problem})' if problem else ''}: the site is "
                           "built beside it and put in its place by a rename, which cannot replace a mount point; "
                           "give a folder inside it")
    if npm_cache is not None:
        check_npm_cache(npm_cache)


def check_npm_cache(npm_cache: Path) -> None:
    """PublishError unless `npm_cache` is a folder that can be written (a tarball fetched from the registry is saved
    there). A folder not there is refused rather than made: a cache named on the command line is one that holds
    the tarballs, and a mistyped one would be found only offline, after the site was built."""
    cache = npm_cache.resolve()
    if cache.exists() and not cache.is_dir():
        raise PublishError(f"--npm-cache {npm_cache}: not a directory")
    if not cache.exists():
        raise PublishError(f"--npm-cache {npm_cache}: no such folder; name the folder that holds the npm tarballs, or "
                           "make it (mkdir) to have it filled from the registry")
    if problem := write_problem(cache):
        raise PublishError(f"--npm-cache {npm_cache}: {problem}")


def check_site_places(repo: Path, results_dir: Path, html_dir: Path, npm_cache: str | None,
                      parts: Sequence[SitePart] = ()) -> None:
    """PublishError when the site could not be published where asked (check_places, with the --npm-cache folder, and
    check_replaceable); and each part's own error when it cannot read what the results tree holds now (a run file cut
    short or not UTF-8, a confirmations or bisect file): for the history to say before the measuring, not after it."""
    check_places(repo, results_dir, html_dir, Path(npm_cache) if npm_cache else None)
    check_replaceable(html_dir)
    if results_dir.is_dir():  # a first run has recorded nothing yet
        for part in parts:
            part.prepare()


def check_replaceable(html_dir: Path) -> None:
    """PublishError unless `html_dir` is missing, empty, or a site this module made."""
    if html_dir.is_dir() and not (html_dir / SITE_MARKER).is_file() and any(html_dir.iterdir()):
        raise PublishError(f"--html {html_dir} is not empty and is not a site `sgemm publish` made (no "
                           f"{SITE_MARKER} in it): give a new or empty directory, or move that one away")


def check_size(results_dir: Path, size: int | None) -> None:
    """PublishError when `size` was asked for but no GPU of the tree measured it (the page would have no tables)."""
    if size is None:
        return
    try:
        problem = unmeasured_size(results_dir, size, str(results_dir))
    except ReportError:
        return  # no Gemm results at all: the site goes without the cross-GPU page, and says so
    if problem:
        raise PublishError(problem)


def write_manifest(built: Path) -> None:
    """The marker of the site built in `built`, naming every file in it; written before anything foreign joins it,
    or the next publish would take the foreign files for its own and delete them."""
    made = sorted(path.relative_to(built).as_posix() for path in _entries(built))
    (built / SITE_MARKER).write_text("\n".join([MANIFEST_HEADER, *made]) + "\n", encoding="utf-8",
                                     errors="surrogateescape")


def read_manifest(html_dir: Path) -> frozenset[str] | None:
    """The files the publish that made `html_dir` wrote; None for a marker from before markers listed them."""
    try:
        text = (html_dir / SITE_MARKER).read_text(encoding="utf-8", errors="surrogateescape")
    except OSError as exc:
        raise PublishError(f"--html {html_dir}: cannot read its {SITE_MARKER} ({exc}), so cannot tell what in it "
                           "`sgemm publish` made") from exc
    lines = text.splitlines()
    if not lines or lines[0] != MANIFEST_HEADER:
        return None
    return frozenset(line for line in lines[1:] if line and not line.startswith("#"))


def _entries(root: Path):
    """Every file, symlink or other non-directory under `root`, without following symlinks."""
    for entry in os.scandir(root):
        if entry.is_dir(follow_symlinks=False):
            yield from _entries(Path(entry.path))
        else:
            yield Path(entry.path)


def _is_real_dir(path: Path) -> bool:
    try:
        return stat.S_ISDIR(os.lstat(path).st_mode)
    except FileNotFoundError:
        return False


def foreign_entries(html_dir: Path) -> list[str]:
    """What the site in `html_dir` holds that no publish made, as POSIX paths relative to it: the largest entries,
    so a directory holding no file of the manifest is one entry."""
    made = read_manifest(html_dir)
    if made is None:
        return [name for name in LEGACY_FOREIGN if os.path.lexists(html_dir / name)]
    made_dirs = {parent.as_posix() for path in made for parent in PurePosixPath(path).parents} - {"."}

    def walk(rel: str):
        for entry in sorted(os.scandir(html_dir / rel), key=lambda entry: entry.name):
            path = f"{rel}/{entry.name}" if rel else entry.name
            # Directories first: one where the manifest names a file was put there by someone else.
            if entry.is_dir(follow_symlinks=False):
                if path in made_dirs:
                    yield from walk(path)
                else:
                    yield path
            elif path not in made and path != SITE_MARKER:
                yield path

    return list(walk(""))


def plan_keeping(html_dir: Path, built: Path, foreign: list[str]) -> list[str]:
    """The entries of `html_dir` to move into `built`, at the same paths, so that every foreign entry survives the
    swap; PublishError, naming them, when the new site has something of its own where one must go."""
    moves: list[str] = []
    collisions: list[str] = []
    pending = list(foreign)
    while pending:
        path = pending.pop(0)
        blocker = next((parent.as_posix() for parent in reversed(PurePosixPath(path).parents)
                        if parent.as_posix() != "." and os.path.lexists(built / parent)
                        and not _is_real_dir(built / parent)), None)
        if blocker is not None:
            collisions.append(f"{path} (the new site has a file at {blocker})")
        elif _is_real_dir(built / path) and _is_real_dir(html_dir / path):
            # Both have this directory: keep what is in the old one, each entry on its own.
            pending[:0] = sorted(f"{path}/{name}" for name in os.listdir(html_dir / path))
        elif os.path.lexists(built / path):
            collisions.append(path)
        else:
            moves.append(path)
    if collisions:
        raise PublishError(f"--html {html_dir} holds what `sgemm publish` did not make where the new site puts its "
                           f"own: {', '.join(collisions)}; move them away and publish again (nothing was changed)")
    return moves


def _move(paths: list[str], source: Path, destination: Path, make_parents: bool = True
          ) -> tuple[list[str], OSError | None]:
    """Rename each path from under `source` to under `destination`, making the directories it needs unless told
    not to; the paths moved before the first that could not be, and that one's error (None when all were)."""
    done: list[str] = []
    for path in paths:
        try:
            if make_parents:
                (destination / path).parent.mkdir(parents=True, exist_ok=True)
            os.rename(source / path, destination / path)
        except OSError as exc:
            return done, exc
        done.append(path)
    return done, None


def _swap_in(built: Path, html_dir: Path) -> None:
    """Put the finished site at `html_dir`, replacing the one there (checked replaceable under the lock, and
    holding nothing but what a publish made); on OSError, the site that was there is back in place."""
    if not html_dir.exists():
        os.rename(built, html_dir)
        return
    # rename(2) may replace an empty directory: reserve a unique name, then move the old site onto it.
    old = Path(tempfile.mkdtemp(dir=html_dir.parent, prefix=f".{html_dir.name}.old-"))
    try:
        os.rename(html_dir, old)
    except OSError:
        old.rmdir()
        raise
    try:
        os.rename(built, html_dir)
    except OSError:
        os.rename(old, html_dir)
        raise
    shutil.rmtree(old, ignore_errors=True)


def publish_site(repo: Path, results_dir: Path, html_dir: Path, kernels: dict[str, Kernel], header: list[str],
                 size: int | None = None, npm_cache: Path | None = None, parts: Sequence[SitePart] = ()) -> Site:
    """The whole site of `results_dir` in `html_dir`. The cross-GPU page compares every machine's newest run at
    `size` (default: the size every GPU measured that shows the most kernels); a tree with no Gemm results gets no
    such page. `parts` add their pages (SitePart), linked from the navbar after the site's own.

    PublishError, with nothing changed, when it cannot be built; SiteError when it was built and put in place but
    its libraries could not be vendored."""
    repo, results_dir, html_dir = Path(repo).resolve(), Path(results_dir).resolve(), Path(html_dir).resolve()
    check_inputs(repo, results_dir)
    check_places(repo, results_dir, html_dir, npm_cache)
    try:
        with locked(exclusive=[html_dir], shared=[results_dir]):
            check_replaceable(html_dir)
            return _build_and_swap(repo, results_dir, html_dir, kernels, header, size, npm_cache, parts)
    except LockError as exc:
        raise PublishError(str(exc)) from exc
    except OSError as exc:
        if exc.errno not in PLACE_ERRNOS:
            raise
        # The site is built beside the HTML directory, so that is where a full disk or a read-only mount is met.
        written = Path(exc.filename) if exc.filename else html_dir
        place = html_dir.parent if written.is_relative_to(html_dir.parent) else written.parent
        raise PublishError(f"--html {html_dir}: {said(exc, place)}; nothing was changed") from exc


def _build_and_swap(repo: Path, results_dir: Path, html_dir: Path, kernels: dict[str, Kernel], header: list[str],
                    size: int | None, npm_cache: Path | None, parts: Sequence[SitePart]) -> Site:
    check_size(results_dir, size)
    for part in parts:
        part.prepare()  # before anything is built: what a part cannot read stops the publish
    staging = Path(tempfile.mkdtemp(dir=html_dir.parent, prefix=f".{html_dir.name}.building-"))
    keep_staging = False  # once it may hold the only copy of something foreign
    try:
        built = staging / html_dir.name
        site = Site(html_dir, left_out=asv_publish(repo, results_dir, built))
        links = [link for part in parts for link in part.write(built)]
        offline_error: SiteError | None = None
        try:
            try:
                cross_gpu = report_across_gpus(results_dir, built / CROSS_GPU_DIR, kernels, header, size)
                site.cross_gpu = [html_dir / path.relative_to(built) for path in cross_gpu]
            except ReportError as exc:  # the page stays, and says there are no GPU results yet, and how to get some
                site.cross_gpu_skipped = str(exc)
                write_no_gpu_page(built / CROSS_GPU_DIR)
            add_nav_link(built, f"{CROSS_GPU_DIR}/index.html", CROSS_GPU_LABEL)
            try:
                resources = write_resource_page(built / RESOURCE_DIR, newest_run(results_dir))
                site.resources = [html_dir / path.relative_to(built) for path in resources]
                add_nav_link(built, f"{RESOURCE_DIR}/index.html", RESOURCE_LABEL)
            except ReportError:
                pass  # no resource figures in the tree: asv's own pages are all there is
        except SiteError as exc:
            offline_error = exc
        if offline_error is None:
            try:
                for href, label, replaces in links:
                    if replaces:
                        drop_nav_item(built, replaces)
                    add_nav_link(built, href, label)
                add_summary_margins(built)
                drop_unmeasured_list_rows(built)
            except SiteError as exc:
                offline_error = exc
        if offline_error is None:
            try:
                site.vendored = vendor_assets(built, npm_cache)
            except SiteError as exc:
                offline_error = exc  # the site is whole and goes up; it only needs the CDNs to be read
        write_manifest(built)
        # check_replaceable let through only a site with the marker, an empty directory or none.
        foreign = foreign_entries(html_dir) if (html_dir / SITE_MARKER).is_file() else []
        keep = plan_keeping(html_dir, built, foreign)
        moved, error = _move(keep, html_dir, built)
        if error is not None:
            keep_staging = True  # until what was moved is back
            _put_back(moved, built, html_dir)
            keep_staging = False
            raise PublishError(f"--html {html_dir}: could not move {keep[len(moved)]}, which `sgemm publish` did not "
                               f"make, into the new site ({error}); nothing was changed")
        try:
            _swap_in(built, html_dir)
        except OSError:
            keep_staging = True
            _put_back(moved, built, html_dir)
            keep_staging = False
            raise
        site.kept = keep
    finally:
        if not keep_staging:
            shutil.rmtree(staging, ignore_errors=True)
    if offline_error is not None:
        raise offline_error
    return site


def _put_back(moved: list[str], built: Path, html_dir: Path) -> None:
    """Return what was moved into `built` to the old site; PublishError naming where it stays when it cannot."""
    _, error = _move(moved, built, html_dir, make_parents=False)
    if error is not None:
        raise PublishError(f"--html {html_dir}: what `sgemm publish` did not make could not all be moved back "
                           f"({error}); what is left of it is in {built}: move it back by hand") from error
