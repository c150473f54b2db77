"""`sgemm history`: this box's asv history brought up to date (sgemm.history.run), then the site built."""

from __future__ import annotations

import sys
import time
from pathlib import Path

from .. import catalogue
from ..measuring.record import NoGpuError, device_info
from . import EXIT_BAD_INPUT, EXIT_FAILED, EXIT_OK, args as types, made_from_results
from .site import publish


def add_history(add) -> None:
    history = add("history", cmd_history, "bring this box's asv history up to date, then build the site: the "
                  "newest commits on a first run (--first), every new commit later; without a GPU, the resource "
                  "history alone", kernels=False)
    history.add_argument("--first", type=types.commit_count, help="commits a machine's first run measures, "
                         "newest first (default 1: the head of the branch; without a GPU, 3, since a history of one "
                         "commit draws no line)")
    history.add_argument("--gpus", type=types.gpu_count, default="1", help="how many of the box's GPUs to spread "
                         "each commit's cases over, or 'all' (they must be one model; default 1)")
    history.add_argument("-k", "--kernel", action="append", default=[], help="measure only this kernel or "
                         "precision, as the gate's -k names them, e.g. fp32 or fp16/wgmma_tma (repeatable; default: "
                         "every kernel); its resource suite alone, too")
    history.add_argument("--size", type=types.size, action="append", default=[], help="measure only the square cases "
                         "of this size, one of the suite's (repeatable; default: every size, and the shape sweep)")
    history.add_argument("--results", type=types.path, default="results",
                         help="asv results directory (default: results)")
    history.add_argument("--html", type=types.path, default="html", help="the site's directory (default: html)")
    history.add_argument("--repo", type=types.path, default=".", help="the repository (default: the current directory)")
    history.add_argument("--machine", type=types.machine_name, help="asv machine name (default: from the GPU model)")
    history.add_argument("--npm-cache", type=types.path,
                         help="existing folder of the site libraries' npm tarballs (needed offline)")
    history.add_argument("--work", type=types.path,
                         help="asv's environments and each GPU's shard (default: REPO/.asv/history)")
    history.add_argument("--no-site", action="store_true", help="measure only (the site is built elsewhere, e.g. "
                         "from the results of several boxes)")
    history.add_argument("--dry-run", action="store_true", help="say what would be measured; measure nothing")


# What follows the measuring (the summary read back, the site built): added to the estimate of the time left. The
# runs of lab/2026-11-28-restructure-on-the-gpu and lab/2026-11-28-history-sharding spent 7-9 s on it.
PRIOR_AFTER_S = 10.0
PRIOR_AFTER_WITHOUT_SITE_S = 2.0


def cmd_history(args) -> int:
    began = time.monotonic()
    from ..history.run import (HistoryError, box_shards, charged_sizes, check_catalogue, check_gpus, check_places,
                               check_results, plan, run, run_sharded, select, summary)
    from ..results.confirmations import ConfirmationsError
    from ..results.machine import detect_identity, machine_entry, machine_name, write_machine_file
    from ..site.publish import PublishError, check_site_places
    from ..watch.page import WatchPages
    from ..watch.series import WatchError

    repo = Path(args.repo).resolve()
    if not (repo / "asv.conf.json").is_file():
        print(f"sgemm history: {repo} has no asv.conf.json: run it in the repository", file=sys.stderr)
        return EXIT_BAD_INPUT
    results, work = Path(args.results).resolve(), Path(args.work or repo / ".asv" / "history").resolve()
    # The places and the catalogue first: none of them needs the GPU, and the site's is checked before the measuring.
    try:
        check_places(repo, results, work)
        check_results(results)
        check_catalogue(repo)
        charged_sizes()
        check_gpus(args.gpus, select(repo, tuple(args.kernel), tuple(args.size)))
        if not args.no_site:  # the watch reads every file of the tree now as it will after the measuring
            check_site_places(repo, results, Path(args.html), args.npm_cache,
                              [WatchPages(results, repo, catalogue.load_catalogue(), [])])
    except (HistoryError, PublishError, WatchError, ConfirmationsError) as exc:
        print(f"sgemm history: {exc}", file=sys.stderr)
        return EXIT_BAD_INPUT
    try:
        device_info(args.device)
        gpu = True
    except NoGpuError as exc:
        print(f"sgemm history: {exc}: measuring what needs no GPU", file=sys.stderr)
        gpu = False
    identity = detect_identity(args.device) if gpu else None
    machine = args.machine or machine_name(identity)
    if not gpu and args.gpus != "1":
        print(f"sgemm history: --gpus {args.gpus} left aside: no GPU here", file=sys.stderr)
    try:
        chosen = plan(repo, results, machine, gpu, args.first, tuple(args.kernel), tuple(args.size))
        shards, uuids = box_shards(repo, results, machine, args.gpus, list(chosen.cases)) \
            if gpu and args.gpus != "1" else ([], [])
    except (HistoryError, PublishError) as exc:
        print(f"sgemm history: {exc}", file=sys.stderr)
        return EXIT_BAD_INPUT
    for line in chosen.describe(len(shards) or 1):
        print(f"sgemm history: {line}", file=sys.stderr)
    if args.dry_run:
        return EXIT_OK
    write_machine_file(machine_entry(identity, machine))  # asv asks interactively for a machine it does not know
    after_s = PRIOR_AFTER_WITHOUT_SITE_S if args.no_site else PRIOR_AFTER_S
    measuring_began = time.monotonic()
    if shards:
        measured = run_sharded(repo, chosen, results, shards, uuids, work, began, after_s)
    else:
        measured = run(repo, chosen, results, work, began, after_s)
    measuring_ended = time.monotonic()

    def timeline() -> None:
        """Where the history's time went: the serial parts before and after the measuring, apart from it."""
        ended = time.monotonic()
        print(f"sgemm history: timeline: before the measuring {measuring_began - began:.0f} s · the measuring "
              f"(asv, {len(shards) or 1} GPU{'s' if len(shards) > 1 else ''}) {measuring_ended - measuring_began:.0f}"
              f" s · after it (summary{', site' if not args.no_site else ''}) {ended - measuring_ended:.0f} s",
              file=sys.stderr)
        # The line a log of this run is scored against (tools/acceptance/estimate_error.py).
        print(f"sgemm history: ended after {ended - began:.0f} s", file=sys.stderr)
    if chosen.commits:
        print(f"sgemm history: recorded in {results}:", file=sys.stderr)
        for line in summary(results, chosen):
            print(f"  {line}", file=sys.stderr)
    if args.no_site:
        timeline()
        return EXIT_FAILED if measured else EXIT_OK
    if measured != 0:
        print(f"sgemm history: asv run exited {measured}; publishing what was recorded", file=sys.stderr)
    published = publish(repo, results, Path(args.html), made_from_results(args), npm_cache=Path(args.npm_cache)
                        if args.npm_cache else None, command="sgemm history")
    timeline()
    return published or (EXIT_FAILED if measured else EXIT_OK)
