"""`sgemm report`, `sgemm merge` and `sgemm publish`: seed worklogs, results trees joined, and the site."""

from __future__ import annotations

import shlex
import sys
from dataclasses import replace
from pathlib import Path

from .. import catalogue
from ..measuring.record import device_info
from ..results.machine import live_gpu, with_nvml
from ..words import counted
from . import EXIT_BAD_INPUT, EXIT_FAILED, EXIT_OK, args as types, command_line, made_from_results, shown_path


def add_report(add) -> None:
    report = add("report", cmd_report, "rebuild the seed worklogs' tables and plots, from asv results or a fresh "
                 "measurement on this GPU", kernels=False)
    report.add_argument("--results", type=types.path,
                        help="asv results directory to read (default: measure now on this GPU)")
    report.add_argument("--machine", type=types.machine_name, help="asv machine name under --results (default: "
                        "this box's)")
    report.add_argument("--commit", type=types.commit_prefix,
                        help="commit hash or prefix (default: the newest run of the machine)")
    report.add_argument("--seed", action="append", help="seed number or name, e.g. 001 or hopper (repeatable; "
                        "default: every seed)")
    report.add_argument("--size", type=types.size, action="append", help="square size to measure (repeatable; "
                        "fresh runs; default: the sizes the suite times each kernel at)")
    report.add_argument("--across-gpus", action="store_true", help="one table per precision with a column group "
                        "per GPU, from every machine in --results (e.g. merged results); --size picks the size")
    report.add_argument("--out", type=types.path, required=True,
                        help="directory for README.md, the PNG plots and points.json")
    report.add_argument("--points", type=types.path, help="the points.json of an earlier report (or, with "
                        "--across-gpus, page): draw it again with this version's tables and notes, no results or GPU "
                        "needed")
    report.add_argument("--counters", type=types.path, help="folder of Nsight Compute CSV exports, one launch a "
                        "case, named KERNEL-SIZE.csv (e.g. fp16-wgmma_tma_wide-4096.csv; python -m "
                        "tools.acceptance.ladder_counters writes them): under each table, the reading of every step "
                        "slower than the step above it")


def add_merge(add) -> None:
    merge = add("merge", cmd_merge, "merge the asv results trees of several GPU boxes into one (per-machine "
                "directories kept apart; a bad or conflicting file stops it before anything is written)", kernels=False)
    merge.add_argument("sources", type=types.path, nargs="+", help="results directories to merge")
    merge.add_argument("--into", type=types.path, required=True,
                       help="results directory to merge them into (created if missing)")


def add_publish(add) -> None:
    publish = add("publish", cmd_publish, "build the static site of a results tree: asv publish, the cross-GPU "
                  "page, and every library the pages load vendored beside them (works offline)", kernels=False)
    publish.add_argument("--results", type=types.path, required=True,
                         help="asv results directory (e.g. merged by `sgemm merge`)")
    publish.add_argument("--html", type=types.path, required=True,
                         help="the site's directory: new, empty, or a site sgemm publish "
                         "made (replaced whole once the new one is built); never the repository or the results")
    publish.add_argument("--repo", type=types.path, default=".",
                         help="the repository the results were measured from (default: .)")
    publish.add_argument("--size", type=types.size, help="square size of the cross-GPU page (default: the size "
                         "every GPU measured that shows the most kernels)")
    publish.add_argument("--npm-cache", type=types.path,
                         help="existing folder of the libraries' npm tarballs: read when it holds them, "
                         "filled when the registry is reachable (needed offline)")
    publish.add_argument("--commit-url", help="where a commit is shown, as a prefix its hash is added to (e.g. "
                         "https://github.com/OWNER/REPO/commit/): the regressions' notices link to it")


def cmd_merge(args) -> int:
    from ..site.merge import MergeError, merge_results

    try:
        plan = merge_results([Path(s) for s in args.sources], Path(args.into))
    except MergeError as exc:
        print(f"sgemm merge: {exc}", file=sys.stderr)
        return EXIT_BAD_INPUT
    print(f"merged into {args.into}: {counted(len(plan.copies), 'file')} copied, {len(plan.unchanged)} already there; "
          f"machines: {', '.join(plan.machines) or 'none new'}")
    # An empty folder merges as nothing, which is right for a box that had nothing new, and wrong for a mistyped path.
    for source in args.sources:
        if not any(Path(source).glob("*/*.json")):
            print(f"sgemm merge: warning: {source} holds no asv results (no <machine>/<file>.json): nothing came "
                  "from it", file=sys.stderr)
    if plan.superseded:
        benchmarks = sorted({name for _, name in plan.superseded})
        files = sorted({str(path) for path, _ in plan.superseded})
        print(f"sgemm merge: warning: an older version of {counted(len(benchmarks), 'benchmark')} was measured in "
              f"{counted(len(files), 'run file')} (e.g. {benchmarks[0]} in {files[0]}); they stay in the tree, and "
              "asv publish shows the newer version's", file=sys.stderr)
    return EXIT_OK


def cmd_publish(args) -> int:
    from ..watch.notices import check_commit_url

    try:
        commit_url = check_commit_url(args.commit_url)
    except ValueError as exc:
        print(f"sgemm publish: {exc}", file=sys.stderr)
        return EXIT_BAD_INPUT
    return publish(Path(args.repo), Path(args.results), Path(args.html), made_from_results(args), size=args.size,
                   npm_cache=Path(args.npm_cache) if args.npm_cache else None, commit_url=commit_url)


def publish(repo: Path, results: Path, html: Path, header: list[str], size: int | None = None,
            npm_cache: Path | None = None, commit_url: str | None = None, command: str = "sgemm publish") -> int:
    """The site of a results tree with the watch's pages (`sgemm publish`, and `sgemm history` after it measured),
    and what it holds said; returns the exit status."""
    from ..results.confirmations import ConfirmationsError
    from ..site.publish import CROSS_GPU_DIR, CROSS_GPU_LABEL, RESOURCE_DIR, PublishError, publish_site
    from ..site.vendor import SiteError
    from ..watch.page import PAGE_DIR, WatchPages
    from ..watch.series import WatchError

    repo, results, html = repo.resolve(), results.resolve(), html.resolve()
    kernels = catalogue.load_catalogue()
    watched = WatchPages(results, repo, kernels, header, commit_url)
    try:
        site = publish_site(repo, results, html, kernels, header, size, npm_cache, parts=[watched])
    except (PublishError, WatchError, ConfirmationsError) as exc:
        print(f"{command}: {exc}", file=sys.stderr)
        return EXIT_BAD_INPUT
    except SiteError as exc:
        print(f"{command}: the site was published but cannot work offline: {exc}", file=sys.stderr)
        return EXIT_FAILED
    if site.cross_gpu:
        print(f"cross-GPU page: {site.html_dir / CROSS_GPU_DIR / 'index.html'}")
    else:
        print(f"{command}: no GPU results ({site.cross_gpu_skipped}): the site's {CROSS_GPU_LABEL} page says "
              "how to get them", file=sys.stderr)
    if site.resources:
        print(f"resource page: {site.html_dir / RESOURCE_DIR / 'index.html'}")
    if site.left_out:
        print(f"{command}: left out of the site, with no figure in the results: "
              f"{counted(len(site.left_out), 'benchmark')} "
              f"({', '.join(sorted({name.split('.')[0] for name in site.left_out}))})", file=sys.stderr)
    print(f"site: {site.html_dir} (vendored files now loaded by {counted(len(site.vendored), 'library tag')}; serve "
          f"it over HTTP, e.g. `asv preview` or `python -m http.server -d {shlex.quote(str(site.html_dir))}`)")
    if site.kept:
        print(f"kept {counted(len(site.kept), 'entry', 'entries')} the tool did not make: {', '.join(site.kept)}")
    for machine, report in sorted(watched.reports.items()):
        states = [notice["state"] for notice in report.notices]
        counts = ", ".join(f"{states.count(state)} {state}" for state in dict.fromkeys(states)) or "no steps"
        print(f"{machine}: {report.series} series watched: {counts}")
        for note in report.notes:
            print(f"  {note}")
    print(f"notices: {site.html_dir / 'notices.json'}; regressions page: {site.html_dir / PAGE_DIR / 'index.html'}")
    return 0


def _report_across_gpus(args, kernels) -> int:
    from ..site.crossgpu import check_measured_size, redraw_across_gpus, report_across_gpus
    from ..site.ladders import ReportError

    if not args.results and not args.points:
        print("sgemm report: --across-gpus reads asv results: pass --results (or --points, an earlier page's figures)",
              file=sys.stderr)
        return 2
    if args.machine or args.commit or args.seed or args.counters or (args.size and len(args.size) > 1):
        print("sgemm report: --across-gpus takes every machine's newest run and one --size (no --machine, --commit, "
              "--seed or --counters)", file=sys.stderr)
        return 2
    try:
        if args.points:
            written = redraw_across_gpus(Path(args.points), args.points, Path(args.out), kernels,
                                         made_from_results(args), args.size[0] if args.size else None)
        else:
            if args.size:
                check_measured_size(Path(args.results), args.size[0], args.results)
            written = report_across_gpus(Path(args.results), Path(args.out), kernels, made_from_results(args),
                                         args.size[0] if args.size else None)
    except ReportError as exc:
        print(f"sgemm report: {exc}", file=sys.stderr)
        return 2
    for path in written:
        print(f"wrote {path}")
    return 0


def cmd_report(args) -> int:
    from ..site.counters import CountersError, read_counters
    from ..site.ladders import (ReportError, check_out, check_results, header_lines, measured_points, points_from_asv,
                                read_points, recorded_gpu, write_report)

    if args.points and (args.results or args.machine or args.commit):
        print("sgemm report: --points draws an earlier report again from its own figures: no --results, --machine "
              "or --commit", file=sys.stderr)
        return EXIT_BAD_INPUT
    try:
        check_out(Path(args.out), args.out)
        counters = read_counters(Path(args.counters), args.counters) if args.counters else None
        redrawn = read_points(Path(args.points)) if args.points and not args.across_gpus else None
    except (ReportError, CountersError) as exc:
        print(f"sgemm report: {exc}", file=sys.stderr)
        return EXIT_BAD_INPUT
    kernels = catalogue.load_catalogue()
    seeds = catalogue.seeds()
    if args.seed:
        unknown = sorted(set(args.seed) - {s.number for s in seeds})
        if unknown:
            print(f"sgemm report: unknown seed {', '.join(unknown)}; seeds: {', '.join(s.number for s in seeds)}",
                  file=sys.stderr)
            return 2
        seeds = [s for s in seeds if s.number in args.seed]
    if args.across_gpus:
        return _report_across_gpus(args, kernels)
    if (args.results or args.points) and args.size:
        print("sgemm report: --size chooses what to measure; with --results or --points the sizes are those "
              "measured then", file=sys.stderr)
        return 2
    if not args.results and (args.machine or args.commit):
        print("sgemm report: --machine and --commit choose a run of asv results: pass --results (without it the "
              "report measures now on this GPU)", file=sys.stderr)
        return 2
    if redrawn:
        gpu, points, recorded_source = redrawn
        source = f"{recorded_source or 'an earlier report'}, drawn again from `{shown_path(args.points)}`"
        driver_of = "recorded with the run"
    elif args.results:
        from ..results.machine import detect_identity, machine_name

        try:
            check_results(Path(args.results), args.results)
            machine = args.machine
            if not machine:  # this box's machine: the GPU is read to name it
                machine = machine_name(detect_identity(args.device)) if live_gpu(args.device) else None
            if not machine:
                print("sgemm report: no GPU here to name the machine: pass --machine", file=sys.stderr)
                return EXIT_BAD_INPUT
            points, commit, facets = points_from_asv(Path(args.results), machine, args.commit)
        except ReportError as exc:
            print(f"sgemm report: {exc}", file=sys.stderr)
            return EXIT_BAD_INPUT
        # The GPU as the run recorded it; this box's, where it is that model, for what the run did not record.
        gpu = recorded_gpu(Path(args.results), machine, commit, facets)
        live = live_gpu(args.device) if not (gpu.sm_count and gpu.max_sm_clock_mhz) else None
        if live and live.name == gpu.name:
            gpu = replace(live, driver=gpu.driver if gpu.driver != "unknown" else live.driver)
        source = f"asv results of machine `{machine}`, commit {commit[:12]}"
        driver_of = "recorded with the run"
    else:
        info = device_info(args.device)  # NoGpuError says why there is no GPU to measure on
        gpu = with_nvml(info, args.device)
        points = measured_points(seeds, kernels, args.size, info, args.device,
                                 lambda line: print(f"sgemm report: {line}", file=sys.stderr))
        source = "a fresh measurement on this GPU (NVBench, after an FP64 check of every kernel)"
        driver_of = "of the box that made the report"
    header = header_lines(gpu, source, command_line(args), driver_of)
    # points.json keeps where the figures came from (the run), not this redraw: drawn again, it still names the run.
    kept_source = recorded_source if redrawn else source
    for path in write_report(Path(args.out), seeds, kernels, points, gpu, header, counters, kept_source):
        print(f"wrote {path}")
    return 0
