"""The `sgemm` command: list the catalogue, check kernels, time them, and describe this box to asv."""

from __future__ import annotations

import argparse
import json
import math
import os
import shlex
import shutil
import sys
import time
import warnings
from pathlib import Path

from . import catalogue
from .catalogue import CatalogueError, UnknownKernelError
from .gpu import Gpu
from .judging.gate import DEFAULT_MAX_ROUNDS, DEFAULT_ROUNDS
from .judging.verdict import MIN_ROUNDS
from .measuring.record import Case, NoGpuError, device_info, skip_reason

DEFAULT_CHECK_SHAPES = ("1024x1024x1024", "1000x1028x516")
# Exit statuses of every command but the gate (which has its own, in sgemm.judging.gate).
EXIT_OK, EXIT_FAILED, EXIT_BAD_INPUT = 0, 1, 2
# Options whose value may start with '-': argparse reads "-3x4x5" or "-1e-3" as an option of its own, and says only
# "expected one argument", unless the value is glued on with '='. main() glues them on.
SIGNED_VALUE_OPTIONS = ("--shape", "--size", "--alpha", "--beta", "--device", "--rounds", "--max-rounds",
                        "--threshold")


def parse_shape(text: str) -> tuple[int, int, int]:
    try:
        m, n, k = (int(part) for part in text.lower().split("x"))
    except ValueError:
        raise argparse.ArgumentTypeError(f"a shape is MxNxK, e.g. 1000x1028x516 (got {text!r})") from None
    if min(m, n, k) < 1:
        raise argparse.ArgumentTypeError(f"M, N and K must be at least 1 (got {text!r})")
    return m, n, k


def _integer_at_least(lowest: int, what: str):
    def parse(text: str) -> int:
        try:
            value = int(text)
        except ValueError:
            raise argparse.ArgumentTypeError(f"{what} is a whole number, got {text!r}") from None
        if value < lowest:
            raise argparse.ArgumentTypeError(f"{what} must be at least {lowest}, got {value}")
        return value

    return parse


_size = _integer_at_least(1, "a size")


def _gpu_count(text: str) -> str:
    if text != "all" and not (text.isdigit() and int(text) >= 1):
        raise argparse.ArgumentTypeError(f"--gpus takes a number of GPUs (at least 1) or 'all', got {text!r}")
    return text
_commit_count = _integer_at_least(1, "--first")
_device = _integer_at_least(0, "a device index")


def _finite(text: str) -> float:
    try:
        value = float(text)
    except ValueError:
        value = math.nan
    if not math.isfinite(value):
        raise argparse.ArgumentTypeError(f"expected a finite number, got {text!r}")
    return value


def _machine_name(text: str) -> str:
    from .machine import check_machine_name

    try:
        return check_machine_name(text)
    except ValueError as exc:
        raise argparse.ArgumentTypeError(str(exc)) from None


def _writable_file_problem(option: str, text: str) -> str | None:
    """Why a file asked for with `option` cannot be written, found before the work that would fill it."""
    path = Path(text).expanduser()
    if path.is_dir():
        return f"{option} {text} is a directory: name a file"
    if not path.resolve().parent.is_dir():
        return f"{option} {text}: the folder {path.resolve().parent} does not exist"
    return None


def _glue_signed_values(argv: list[str]) -> list[str]:
    glued, tokens = [], iter(argv)
    for token in tokens:
        value = next(tokens, None) if token in SIGNED_VALUE_OPTIONS else None
        if value is None:
            glued.append(token)
        elif value[:1] == "-" and value[1:2] in set("0123456789."):
            glued.append(f"{token}={value}")
        else:
            glued += [token, value]
    return glued


def print_table(header: list[str], rows: list[list[str]], width: int | None = None) -> None:
    """Columns padded to their widest cell; with `width`, the last column, its heading too, is cut (with '…') so that
    every line fits that many characters, down to one character of it."""
    widths = [max(len(str(cell)) for cell in column) for column in zip(header, *rows)]
    if width is not None:
        room = width - sum(widths[:-1]) - 2 * (len(widths) - 1)
        widths[-1] = max(min(widths[-1], room), 1)
    for line in [header, ["-" * w for w in widths], *rows]:
        cells = [str(cell) for cell in line]
        if len(cells[-1]) > widths[-1]:
            cells[-1] = cells[-1][:widths[-1] - 1] + "…" if widths[-1] > 1 else "…"
        print("  ".join(cell.ljust(w) for cell, w in zip(cells, widths)).rstrip())


def _cases(kernels: list, shapes, info: Gpu) -> tuple[list[Case], list[tuple[Case, str]]]:
    """The selected cases this GPU can run, and those it skips with the reason; with no shapes given, each kernel at
    the square sizes the suite times it at."""
    runnable, skipped = [], []
    for kernel in kernels:
        for m, n, k in shapes or [(size, size, size) for size in kernel.sizes]:
            case = Case(kernel, m, n, k)
            if reason := skip_reason(kernel, m, n, k, info):
                skipped.append((case, reason))
            else:
                runnable.append(case)
    return runnable, skipped


def cmd_list(args) -> int:
    rows = []
    seed_names = {seed.file: seed.number for seed in catalogue.seeds()}
    for kernel in catalogue.select(args.kernel):
        shapes = "any" if kernel.multiple_of == (1, 1, 1) else "M%{} N%{} K%{}".format(*kernel.multiple_of)
        # An architecture-specific kernel runs on that architecture alone: its target says more than a minimum.
        runs_on = kernel.target or f"{kernel.min_compute_capability / 10:.1f}"
        if args.wide:
            origin = ", ".join(f"{seed_names.get(o.seed, o.seed)} {o.label}" for o in kernel.origins)
            rows.append([kernel.name, kernel.library or f"{kernel.source} {kernel.entry}", shapes, runs_on, origin,
                         kernel.technique])
        else:
            seeds = " ".join(dict.fromkeys(seed_names.get(o.seed, o.seed) for o in kernel.origins))
            rows.append([kernel.name, shapes, runs_on, seeds, kernel.technique])
    if args.wide:
        print_table(["kernel", "source", "shapes", "min cc", "seed", "technique"], rows)
    else:  # one line a kernel, as wide as the terminal
        print_table(["kernel", "shapes", "min cc", "seeds", "technique"], rows,
                    shutil.get_terminal_size((100, 24)).columns)
    return 0


def cmd_check(args) -> int:
    kernels = catalogue.select(args.kernel)  # an unknown kernel is bad input, said before CUDA is touched
    shapes = args.shape or [parse_shape(s) for s in DEFAULT_CHECK_SHAPES]

    runnable, skipped = _cases(kernels, shapes, device_info(args.device))  # no CuPy or no GPU: said here, in a line
    import cupy

    from .measuring.problem import make_problem
    from .measuring.verify import VerificationError, verify

    rows, failed = [], 0
    for index, case in enumerate(runnable, 1):
        print(f"[{index}/{len(runnable)}] {case.id}", file=sys.stderr)
        try:
            with cupy.cuda.Device(args.device):
                error = verify(make_problem(case.kernel, case.m, case.n, case.k, alpha=args.alpha, beta=args.beta))
            rows.append([case.kernel.name, f"{case.m}x{case.n}x{case.k}", f"{error:.2e}", "ok"])
        except Exception as exc:  # a wrong or broken kernel is reported and the check goes on
            failed += 1
            detail = str(exc).splitlines()[0] if isinstance(exc, VerificationError) else f"{type(exc).__name__}: {exc}"
            rows.append([case.kernel.name, f"{case.m}x{case.n}x{case.k}", "-", f"FAILED {detail}"])
    rows += [[case.kernel.name, f"{case.m}x{case.n}x{case.k}", "-", f"skipped: {reason}"] for case, reason in skipped]
    print_table(["kernel", "MxNxK", "rel. error", "result"], rows)
    print(f"{len(runnable) - failed} passed, {failed} failed, {len(skipped)} skipped")
    return 1 if failed else 0


def cmd_bench(args) -> int:
    from .figures import Figures
    from .measuring.record import run_cases

    kernels = catalogue.select(args.kernel)  # an unknown kernel is bad input, said before CUDA is touched
    shapes = args.shape or [(s, s, s) for s in args.size or ()]
    if args.json and (problem := _writable_file_problem("--json", args.json)):
        print(f"sgemm bench: {problem}", file=sys.stderr)
        return EXIT_BAD_INPUT
    info = device_info(args.device)
    runnable, skipped = _cases(kernels, shapes, info)
    gpu = _with_nvml(info, args.device)
    started = time.monotonic()

    def progress(index: int, case: Case) -> None:
        print(f"[{index + 1}/{len(runnable)}] {case.id}  ({time.monotonic() - started:.0f} s)", file=sys.stderr)

    results = run_cases(runnable, args.device, progress)
    versus = {}
    if args.versus_baseline:
        from .measuring.ab import versus_baselines

        versus = versus_baselines([(case.id, case.kernel, case.m, case.n, case.k) for case in runnable
                                   if not isinstance(results[case.id], BaseException)], args.device,
                                  lambda line: print(line, file=sys.stderr))
    rows, failed = [], 0
    for case in runnable:
        result = results[case.id]
        shape = f"{case.m}x{case.n}x{case.k}"
        if isinstance(result, BaseException):
            failed += 1
            rows.append([case.kernel.name, shape, "-", "-", "-", "-", "-", f"FAILED {str(result).splitlines()[0]}"])
            continue
        reference = results.get(Case(catalogue.baseline(case.kernel.precision), case.m, case.n, case.k).id)
        measured = reference is not None and not isinstance(reference, BaseException)
        figures = Figures.of(result.tflops, reference.tflops if measured else None,
                             gpu.peak_tflops(case.kernel.precision),
                             result.median_sm_clock_mhz)
        paired = versus.get(case.id)
        rows.append([case.kernel.name, shape, f"{result.median_s * 1e3:.3f}", *figures.texts(),
                     *(_versus_texts(paired) if args.versus_baseline else []),
                     ", ".join(result.telemetry.get("throttle_reasons", []))])
    rows += [[case.kernel.name, f"{case.m}x{case.n}x{case.k}", "-", "-", "-", "-", "-", f"skipped: {reason}"]
             for case, reason in skipped]
    clock = f"{gpu.max_sm_clock_mhz:.0f} MHz" if gpu.max_sm_clock_mhz else "unknown (no NVML)"
    print(f"{gpu.name}, {gpu.sm_count} SMs, max SM clock {clock}")
    paired_header = ["% cuBLAS paired, L2 warm", "% cuBLAS paired, L2 flushed", "J/GEMM (cuBLAS)"] \
        if args.versus_baseline else []
    print_table(["kernel", "MxNxK", "median ms", "TFLOP/s", "% cuBLAS", "% peak", "median SM MHz", *paired_header,
                 "throttled / notes"], rows)
    libraries = sorted({paired.library_version for paired in versus.values() if paired.library_version})
    print("% cuBLAS: NVBench's medians, each case in its own measurement, L2 flushed before every launch"
          + ("; paired: the kernel and cuBLAS alternated in blocks in one process, after a warm-up (95% interval)"
             + (f"; cuBLAS {', '.join(libraries)}" if libraries else "") if args.versus_baseline else ""))
    if args.json:
        with open(args.json, "w") as out:
            json.dump({case_id: (vars(r) if not isinstance(r, BaseException) else {"error": str(r)})
                       | ({"versus_baseline": vars(versus[case_id])} if case_id in versus else {})
                       for case_id, r in results.items()}, out, indent=1)
    return 1 if failed else 0


def _versus_texts(paired) -> list[str]:
    if paired is None:
        return ["-", "-", "-"]
    texts = [f"{value:.1f} ({low:.1f}–{high:.1f})" for value, low, high in paired.percent.values()]
    own, base = paired.joules
    return [*texts, f"{own:.2f} ({base:.2f})" if own == own and base == base else "-"]


def cmd_merge(args) -> int:
    from .publishing.merge import MergeError, merge_results

    try:
        plan = merge_results([Path(s) for s in args.sources], Path(args.into))
    except MergeError as exc:
        print(f"sgemm merge: {exc}", file=sys.stderr)
        return EXIT_BAD_INPUT
    print(f"merged into {args.into}: {len(plan.copies)} files copied, {len(plan.unchanged)} already there; "
          f"machines: {', '.join(plan.machines) or 'none new'}")
    if plan.superseded:
        benchmarks = sorted({name for _, name in plan.superseded})
        files = sorted({str(path) for path, _ in plan.superseded})
        print(f"sgemm merge: warning: {len(files)} run files hold results of an older version of {len(benchmarks)} "
              f"benchmarks (e.g. {benchmarks[0]} in {files[0]}); they stay in the tree, and asv publish shows the "
              "newer version's", file=sys.stderr)
    return EXIT_OK


def cmd_machine(args) -> int:
    from .machine import MachineFileError, detect_identity, machine_entry, machine_name, write_machine_file

    path = Path(args.file).expanduser()
    if problem := _writable_file_problem("--file", args.file):
        raise MachineFileError(f"{problem}; nothing was written")
    identity = detect_identity(args.device)
    entry = machine_entry(identity, args.name or machine_name(identity))
    write_machine_file(entry, path)
    print(f"wrote machine {entry['machine']!r} to {args.file}")
    print(json.dumps(entry, indent=2))
    return 0


def _threshold_pattern(text: str) -> tuple[str, float]:
    if text.count("=") > 1:
        raise argparse.ArgumentTypeError(f"expected PATTERN=PERCENT with one '=', e.g. 'fp16/*=4', got {text!r}")
    pattern, sep, value = text.rpartition("=")
    try:
        percent = float(value)
    except ValueError:
        percent = -1.0
    if not sep or not pattern or not 0 <= percent < 100:
        raise argparse.ArgumentTypeError(f"expected PATTERN=PERCENT, e.g. 'fp16/*=4', got {text!r}")
    return pattern, percent / 100


def _rounds(text: str) -> int:
    try:
        value = int(text)
    except ValueError:
        value = 0
    if value < MIN_ROUNDS:
        raise argparse.ArgumentTypeError(f"rounds per commit must be a whole number of at least {MIN_ROUNDS} "
                                         f"(the between-round spread of fewer cannot be tested), got {text!r}")
    return value


def _percent(text: str) -> float:
    try:
        value = float(text)
    except ValueError:
        value = -1.0
    if not 0 <= value < 100:
        raise argparse.ArgumentTypeError(f"expected a percentage between 0 and 100, got {text!r}")
    return value / 100


def _gate_input_problem(args) -> str | None:
    """What is wrong with the gate's arguments that the parser cannot see, found before git, asv or the GPU."""
    from fnmatch import fnmatchcase

    repo = Path(args.repo).resolve()
    path = repo / "sgemm" / "catalogue.toml"
    if not path.is_file():
        return f"{repo}: no sgemm/catalogue.toml; run in a checkout of this project or pass --repo"
    kernels = catalogue.load_catalogue(path, repo / "kernels")
    catalogue.select(args.kernel, kernels)
    sizes = catalogue.default_sizes(path)
    if unknown := [size for size in args.size or [] if size not in sizes]:
        return (f"--size {', '.join(map(str, unknown))}: not among the suite's sizes ({', '.join(map(str, sizes))}); "
                "the gate measures only what the suite has")
    for pattern, _ in args.threshold_for:
        if not any(fnmatchcase(name, pattern) for name in kernels):
            return f"--threshold-for {pattern!r} matches no kernel in the working tree's catalogue"
    if args.max_rounds < args.rounds:
        return f"--max-rounds {args.max_rounds} is below --rounds {args.rounds}"
    if args.noise and not Path(args.noise).is_file():
        return f"--noise {args.noise}: no such file"
    if args.report:
        return _writable_file_problem("--report", args.report)
    return None


def cmd_gate(args) -> int:
    if problem := _gate_input_problem(args):
        print(f"sgemm gate: {problem}", file=sys.stderr)
        return EXIT_BAD_INPUT
    from pathlib import Path

    from .judging.command import Request, gate
    from .judging.gate import EXIT_UNDECIDED, GateError, Settings

    request = Request(
        Path(args.repo).resolve(), args.base, args.head, tuple(args.kernel), tuple(args.size or ()), not args.no_sweep,
        Settings(args.threshold, tuple(args.threshold_for), args.rounds, args.max_rounds,
                 time_unchanged=args.time_unchanged, pairing=not args.unpaired),
        Path(args.work).resolve() if args.work else None, args.machine, Path(args.report) if args.report else None,
        Path(args.noise) if args.noise else None, args.device)
    try:
        return gate(request, dry_run=args.dry_run)
    except (GateError, UnknownKernelError, CatalogueError) as exc:
        print(f"sgemm gate: {exc.args[0] if exc.args else exc}", file=sys.stderr)
        return EXIT_UNDECIDED
    except Exception as exc:  # 1 means "a kernel got slower": no other failure may read as that
        print(f"sgemm gate: failed: {type(exc).__name__}: {str(exc).splitlines()[0] if str(exc) else ''}",
              file=sys.stderr)
        return EXIT_UNDECIDED


def cmd_history(args) -> int:
    from .history import HistoryError, box_shards, check_places, plan, run, run_sharded
    from .machine import detect_identity, machine_entry, machine_name, write_machine_file

    repo = Path(args.repo).resolve()
    if not (repo / "asv.conf.json").is_file():
        print(f"sgemm history: {repo} has no asv.conf.json: run it in the repository", file=sys.stderr)
        return EXIT_BAD_INPUT
    try:
        device_info(args.device)
        gpu = True
    except NoGpuError as exc:
        print(f"sgemm history: {exc}: measuring what needs no GPU", file=sys.stderr)
        gpu = False
    identity = detect_identity(args.device) if gpu else None
    machine = args.machine or machine_name(identity)
    results, work = Path(args.results).resolve(), Path(args.work or repo / ".asv" / "history").resolve()
    if not gpu and args.gpus != "1":
        print(f"sgemm history: --gpus {args.gpus} left aside: no GPU here", file=sys.stderr)
    try:
        check_places(repo, results, work)
        if not args.no_site:
            _check_site_places(repo, results, Path(args.html), args.npm_cache)
        chosen = plan(repo, results, machine, gpu, args.first)
        shards, uuids = box_shards(repo, results, machine, args.gpus) if gpu and args.gpus != "1" else ([], [])
    except HistoryError as exc:
        print(f"sgemm history: {exc}", file=sys.stderr)
        return EXIT_BAD_INPUT
    for line in chosen.describe(len(shards) or 1):
        print(f"sgemm history: {line}", file=sys.stderr)
    if args.dry_run:
        return EXIT_OK
    write_machine_file(machine_entry(identity, machine))  # asv asks interactively for a machine it does not know
    if shards:
        measured = run_sharded(repo, chosen, results, shards, uuids, work)
    else:
        measured = run(repo, chosen, results, work)
    if args.no_site:
        return EXIT_FAILED if measured else EXIT_OK
    if measured != 0:
        print(f"sgemm history: asv run exited {measured}; publishing what was recorded", file=sys.stderr)
    published = cmd_publish(args)
    return published or (EXIT_FAILED if measured else EXIT_OK)


def _check_site_places(repo: Path, results: Path, html: Path, npm_cache: str | None) -> None:
    """HistoryError when the site could not be published where asked: said before the measuring, not after it."""
    from .history import HistoryError
    from .publishing.publish import PublishError, check_places, check_replaceable

    try:
        check_places(repo, results, html, Path(npm_cache).resolve() if npm_cache else None)
        check_replaceable(html)
    except PublishError as exc:
        raise HistoryError(str(exc)) from exc
    if npm_cache and not Path(npm_cache).is_dir():
        raise HistoryError(f"--npm-cache {npm_cache}: no such folder")


def cmd_noise(args) -> int:
    from .judging.noise import NoiseFileError, default_path, learn_from, write

    out = Path(args.out) if args.out else default_path(Path(args.repo), args.machine)
    if args.out and (problem := _writable_file_problem("--out", args.out)):
        print(f"sgemm noise: {problem}", file=sys.stderr)
        return EXIT_BAD_INPUT
    try:
        learned = learn_from(Path(args.results) if args.results else None, args.machine,
                             [Path(folder) for folder in args.rounds or []])
        write(out, args.machine, learned.unpaired, learned.runs, learned.paired, learned.gates,
              learned.paired_round)
    except NoiseFileError as exc:
        print(f"sgemm noise: {exc}", file=sys.stderr)
        return EXIT_BAD_INPUT
    except OSError as exc:
        print(f"sgemm noise: cannot write {out}: {exc}", file=sys.stderr)
        return EXIT_BAD_INPUT
    for what, noise, count, unit in (("unpaired", learned.unpaired, learned.runs, "runs"),
                                     ("paired", learned.paired, learned.gates, "gates")):
        if noise:
            sds = sorted(n.sd for n in noise.values())
            print(f"wrote {out}: {what}, {len(noise)} cases from {count} {unit}; round-to-round sd median "
                  f"{sds[len(sds) // 2]:.3%}, largest {sds[-1]:.3%}")
    return EXIT_OK


def _shown_path(text: str) -> str:
    """A path as a page made here may show it: relative to the current directory when inside it, else its last
    part alone (a scratch directory of the box that made the page says nothing to a reader elsewhere)."""
    path = Path(text).expanduser()
    if not path.is_absolute():
        return text
    try:
        return str(path.relative_to(Path.cwd())) or "."
    except ValueError:
        return path.name


def _command_line(args) -> str:
    """`sgemm ...` as run, each path in it as _shown_path shows it."""
    return "sgemm " + " ".join(_shown_path(word) if word.startswith(("/", "~")) else word for word in args.argv)


def _made_from_results(args) -> list[str]:
    """When and how a page made from asv results was made: the first lines of its header."""
    import datetime

    return [f"Made: {datetime.datetime.now(datetime.timezone.utc):%Y-%m-%d %H:%M} UTC from the asv results in "
            f"`{_shown_path(args.results)}`", f"Command: `{_command_line(args)}`"]


def cmd_publish(args) -> int:
    from .publishing.publish import CROSS_GPU_DIR, PublishError, publish_site
    from .publishing.site import SiteError

    try:
        site = publish_site(Path(args.repo).resolve(), Path(args.results).resolve(), Path(args.html).resolve(),
                            catalogue.load_catalogue(), _made_from_results(args), args.size,
                            Path(args.npm_cache) if args.npm_cache else None)
    except PublishError as exc:
        print(f"sgemm publish: {exc}", file=sys.stderr)
        return EXIT_BAD_INPUT
    except SiteError as exc:
        print(f"sgemm publish: the site was published but cannot work offline: {exc}", file=sys.stderr)
        return EXIT_FAILED
    if site.cross_gpu:
        print(f"cross-GPU page: {site.html_dir / CROSS_GPU_DIR / 'index.html'}")
    else:
        print(f"sgemm publish: warning: no cross-GPU page: {site.cross_gpu_skipped}", file=sys.stderr)
    print(f"site: {site.html_dir} ({len(site.vendored)} library tags now load vendored files; serve it over HTTP, "
          f"e.g. `asv preview` or `python -m http.server -d {shlex.quote(str(site.html_dir))}`)")
    if site.kept:
        print(f"kept {len(site.kept)} entries the tool did not make: {', '.join(site.kept)}")
    return 0


def _with_nvml(info: Gpu, device: int) -> Gpu:
    """CUDA's facts of the GPU, with NVML's (driver, maximum clock, card) where it answers."""
    from dataclasses import replace

    from .measuring.telemetry import TelemetryUnavailable, gpu_identity

    try:
        return replace(gpu_identity(device), name=info.name, sm_count=info.sm_count)
    except TelemetryUnavailable:
        return info


def _live_gpu(device: int) -> Gpu | None:
    """This box's GPU for a report, or None without one."""
    try:
        return _with_nvml(device_info(device), device)
    except NoGpuError:
        return None


def _report_across_gpus(args, kernels) -> int:
    from .publishing.crossgpu import gpu_runs, report_across_gpus
    from .publishing.report import ReportError

    if not args.results:
        print("sgemm report: --across-gpus reads asv results: pass --results", file=sys.stderr)
        return 2
    if args.machine or args.commit or args.seed or (args.size and len(args.size) > 1):
        print("sgemm report: --across-gpus takes every machine's newest run and one --size", file=sys.stderr)
        return 2
    try:
        if args.size:  # a size no GPU measured would make a page with no tables
            measured = sorted({point.size for run in gpu_runs(Path(args.results)) for point in run.points})
            if args.size[0] not in measured:
                raise ReportError(f"--size {args.size[0]}: no GPU in {args.results} measured that size (measured: "
                                  f"{', '.join(map(str, measured))})")
        written = report_across_gpus(Path(args.results), Path(args.out), kernels, _made_from_results(args),
                                     args.size[0] if args.size else None)
    except ReportError as exc:
        print(f"sgemm report: {exc}", file=sys.stderr)
        return 2
    for path in written:
        print(f"wrote {path}")
    return 0


def cmd_report(args) -> int:
    from .publishing.report import ReportError, header_lines, measured_points, points_from_asv, write_report

    if Path(args.out).exists() and not Path(args.out).is_dir():
        print(f"sgemm report: --out {args.out} is a file: name a directory", file=sys.stderr)
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
    if args.results and args.size:
        print("sgemm report: --size chooses what to measure; with --results the sizes are those asv ran",
              file=sys.stderr)
        return 2
    if args.results:
        from .machine import detect_identity, machine_name

        machine = args.machine
        if not machine:  # this box's machine: the GPU is read to name it
            machine = machine_name(detect_identity(args.device)) if _live_gpu(args.device) else None
        if not machine:
            print("sgemm report: no GPU here to name the machine: pass --machine", file=sys.stderr)
            return EXIT_BAD_INPUT
        try:
            points, commit, facets = points_from_asv(Path(args.results), machine, args.commit)
        except ReportError as exc:
            print(f"sgemm report: {exc}", file=sys.stderr)
            return EXIT_BAD_INPUT
        live = _live_gpu(args.device)  # only once the results were found: its facts fill the header
        gpu = live if live and live.name == facets.get("gpu") else Gpu(facets.get("gpu", machine))
        source = f"asv results of machine `{machine}`, commit {commit[:12]}"
    else:
        info = device_info(args.device)  # NoGpuError says why there is no GPU to measure on
        gpu = _with_nvml(info, args.device)
        points = measured_points(seeds, kernels, args.size, info, args.device,
                                 lambda line: print(f"sgemm report: {line}", file=sys.stderr))
        source = "a fresh measurement on this GPU (NVBench, after an FP64 check of every kernel)"
    header = header_lines(gpu, source, _command_line(args))
    for path in write_report(Path(args.out), seeds, kernels, points, gpu, header):
        print(f"wrote {path}")
    return 0


class _Parser(argparse.ArgumentParser):
    """argparse, but a bad argument is one line (the usage it prints first is in --help)."""

    def error(self, message: str):
        self.exit(EXIT_BAD_INPUT, f"{self.prog}: {message}\n")


def _version() -> str:
    from importlib.metadata import PackageNotFoundError, version

    try:
        return version("sgemm")
    except PackageNotFoundError:
        return "(not installed: run from a checkout)"


def build_parser() -> argparse.ArgumentParser:
    parser = _Parser(prog="sgemm", description=__doc__)
    parser.add_argument("--version", action="version", version=f"sgemm {_version()}")
    sub = parser.add_subparsers(dest="command", required=True)

    def add(name: str, handler, help_text: str, kernels: bool = True) -> argparse.ArgumentParser:
        command = sub.add_parser(name, help=help_text, description=help_text)
        command.set_defaults(handler=handler)
        command.add_argument("--device", type=_device, default=0, help="CUDA device index (default 0)")
        if kernels:
            command.add_argument("-k", "--kernel", action="append", default=[],
                                 help="kernel name or precision prefix, e.g. fp32/naive or fp16 (repeatable)")
        return command

    listing = add("list", cmd_list, "show the kernel catalogue, a line a kernel as wide as the terminal")
    listing.add_argument("--wide", action="store_true", help="every column in full: the source and template "
                         "instantiation, and each seed's label for the step")
    check = add("check", cmd_check, "check every kernel against an FP64 reference on this GPU")
    check.add_argument("--shape", type=parse_shape, action="append", help="MxNxK (repeatable)")
    check.add_argument("--alpha", type=_finite, default=1.0)
    check.add_argument("--beta", type=_finite, default=0.0)
    bench = add("bench", cmd_bench, "verify, then time kernels with NVBench and print a table")
    shapes = bench.add_mutually_exclusive_group()
    shapes.add_argument("--size", type=_size, action="append", help="square size (repeatable; default: the sizes "
                        "the suite times each kernel at)")
    shapes.add_argument("--shape", type=parse_shape, action="append", help="MxNxK (repeatable)")
    bench.add_argument("--json", help="also write every case's samples and telemetry to this file")
    bench.add_argument("--versus-baseline", action="store_true", help="also time each kernel paired with its "
                       "precision's cuBLAS in this process, L2 warm and flushed, and each alone for its joules "
                       "per GEMM (about 9 s a kernel)")
    report = add("report", cmd_report, "rebuild the seed worklogs' tables and plots, from asv results or a fresh "
                 "measurement on this GPU", kernels=False)
    report.add_argument("--results", help="asv results directory to read (default: measure now on this GPU)")
    report.add_argument("--machine", type=_machine_name, help="asv machine name under --results (default: "
                        "this box's)")
    report.add_argument("--commit", help="commit hash or prefix (default: the newest run of the machine)")
    report.add_argument("--seed", action="append", help="seed number or name, e.g. 001 or hopper (repeatable; "
                        "default: every seed)")
    report.add_argument("--size", type=_size, action="append", help="square size to measure (repeatable; fresh "
                        "runs; default: the sizes the suite times each kernel at)")
    report.add_argument("--across-gpus", action="store_true", help="one table per precision with a column group "
                        "per GPU, from every machine in --results (e.g. merged results); --size picks the size")
    report.add_argument("--out", required=True, help="directory for README.md, the PNG plots and points.json")
    merge = add("merge", cmd_merge, "merge the asv results trees of several GPU boxes into one (per-machine "
                "directories kept apart; a bad or conflicting file stops it before anything is written)", kernels=False)
    merge.add_argument("sources", nargs="+", help="results directories to merge")
    merge.add_argument("--into", required=True, help="results directory to merge them into (created if missing)")
    gate = add("gate", cmd_gate, "benchmark what a change can affect at two commits, round by round (base and head "
               "builds side by side in each round's process, or, where the measuring code changed, each commit in "
               "processes of its own), and judge each case; exit 0 pass, 1 a regression, 2 undecided", kernels=False)
    gate.add_argument("base", help="the commit the change starts from (e.g. the pull request's base)")
    gate.add_argument("head", help="the commit with the change")
    gate.add_argument("-k", "--kernel", action="append", default=[],
                      help="also measure this kernel or precision, changed or not (repeatable)")
    gate.add_argument("--size", type=_size, action="append", help="square size, one of the suite's (repeatable; "
                      "default: all of them)")
    gate.add_argument("--threshold", type=_percent, metavar="PERCENT",
                      help="smallest change in time that counts, in percent (default 0.25 for cases measured paired, "
                      "2 for cases measured unpaired)")
    gate.add_argument("--threshold-for", type=_threshold_pattern, action="append", default=[],
                      metavar="PATTERN=PERCENT", help="threshold for kernels matching a shell pattern, e.g. "
                      "'fp16/*=4' (repeatable; the last match wins)")
    gate.add_argument("--rounds", type=_rounds, default=DEFAULT_ROUNDS,
                      help=f"interleaved rounds per commit, at least {MIN_ROUNDS} (default {DEFAULT_ROUNDS})")
    gate.add_argument("--max-rounds", type=_rounds, default=DEFAULT_MAX_ROUNDS,
                      help=f"rounds per commit for a case whose verdict is still open (default {DEFAULT_MAX_ROUNDS})")
    gate.add_argument("--noise", help="round-to-round noise of unchanged code, from `sgemm noise` "
                      "(default: REPO/noise/MACHINE.json when present)")
    gate.add_argument("--repo", default=".", help="the repository (default: the current directory)")
    gate.add_argument("--work", help="the gate's asv environments and results (default: REPO/.asv/gate)")
    gate.add_argument("--machine", type=_machine_name, help="asv machine name (default: from the GPU model)")
    gate.add_argument("--report", help="also write the Markdown report to this file")
    gate.add_argument("--no-sweep", action="store_true", help="square sizes only: leave out seed 003's shape sweep")
    gate.add_argument("--time-unchanged", action="store_true", help="time cases whose base and head builds are one "
                      "program too (an A/A gate), instead of calling them SAME untimed")
    gate.add_argument("--unpaired", action="store_true", help="measure each commit in processes of its own, as when "
                      "the measuring code changed, even where base and head could share a process")
    gate.add_argument("--dry-run", action="store_true", help="list the cases the change selects; measure nothing")
    history = add("history", cmd_history, "bring this box's asv history up to date, then build the site: the "
                  "newest commits on a first run (--first), every new commit later; without a GPU, the resource "
                  "history alone", kernels=False)
    history.add_argument("--first", type=_commit_count, help="commits a machine's first run measures, "
                         "newest first (default 1: the head of the branch; the full suite takes about 9 to 11 "
                         "minutes a commit on an H100 or H200)")
    history.add_argument("--gpus", type=_gpu_count, default="1", help="how many of the box's GPUs to spread each "
                         "commit's cases over, or 'all' (they must be one model; default 1)")
    history.add_argument("--results", default="results", help="asv results directory (default: results)")
    history.add_argument("--html", default="html", help="the site's directory (default: html)")
    history.add_argument("--repo", default=".", help="the repository (default: the current directory)")
    history.add_argument("--machine", type=_machine_name, help="asv machine name (default: from the GPU model)")
    history.add_argument("--npm-cache", help="folder of the site libraries' npm tarballs (needed offline)")
    history.add_argument("--work", help="asv's environments and each GPU's shard (default: REPO/.asv/history)")
    history.add_argument("--no-site", action="store_true", help="measure only (the site is built elsewhere, e.g. "
                         "from the results of several boxes)")
    history.add_argument("--dry-run", action="store_true", help="say what would be measured; measure nothing")
    history.set_defaults(size=None)
    publish = add("publish", cmd_publish, "build the static site of a results tree: asv publish, the cross-GPU "
                  "page, and every library the pages load vendored beside them (works offline)", kernels=False)
    publish.add_argument("--results", required=True, help="asv results directory (e.g. merged by `sgemm merge`)")
    publish.add_argument("--html", required=True, help="the site's directory: new, empty, or a site sgemm publish "
                         "made (replaced whole once the new one is built); never the repository or the results")
    publish.add_argument("--repo", default=".", help="the repository the results were measured from (default: .)")
    publish.add_argument("--size", type=_size, help="square size of the cross-GPU page (default: the size every "
                         "GPU measured that shows the most kernels)")
    publish.add_argument("--npm-cache", help="folder of the libraries' npm tarballs: read when it holds them, "
                         "filled when the registry is reachable (needed offline)")
    noise = add("noise", cmd_noise, "learn each case's round-to-round noise on one machine, for the gate: unpaired "
                "from asv results of unchanged code (the history), paired from paired gates' rounds", kernels=False)
    noise.add_argument("--results", help="asv results directory")
    noise.add_argument("--rounds", action="append", help="a paired gate's work folder (its --work), whose rounds/ "
                       "hold its round ratios (repeatable)")
    noise.add_argument("--machine", required=True, type=_machine_name, help="asv machine name")
    noise.add_argument("--repo", default=".", help="the repository (default: the current directory)")
    noise.add_argument("--out", help="the noise file (default: REPO/noise/MACHINE.json)")
    machine = add("machine", cmd_machine, "write this box's entry in the asv machine file from NVML", kernels=False)
    machine.add_argument("--name", type=_machine_name, help="machine name (default: from the GPU model)")
    machine.add_argument("--file", default="~/.asv-machine.json", help="asv's machine file (default: "
                         "~/.asv-machine.json; its folder must exist)")
    parser.commands = list(sub.choices)
    return parser


def _show_warning(message, category, filename, lineno, file=None, line=None) -> None:
    print(f"sgemm: warning: {message}", file=sys.stderr)


def main(argv: list[str] | None = None) -> int:
    given = list(sys.argv[1:] if argv is None else argv)
    parser = build_parser()
    if not given:  # what there is to do, rather than a complaint that something is missing
        print(f"sgemm: give a command: {', '.join(parser.commands)} (sgemm --help says what each does)",
              file=sys.stderr)
        return EXIT_BAD_INPUT
    try:
        args = parser.parse_args(_glue_signed_values(given))
    except SystemExit as exc:  # a bad argument (2), or --help (0): the parser has said why
        return exc.code if isinstance(exc.code, int) else EXIT_OK if exc.code is None else EXIT_BAD_INPUT
    args.argv = given
    warnings.showwarning = _show_warning
    from .machine import MachineFileError

    try:
        return args.handler(args)
    except (UnknownKernelError, CatalogueError) as exc:
        print(f"sgemm: {exc.args[0] if exc.args else exc}", file=sys.stderr)
        return EXIT_BAD_INPUT
    except NoGpuError as exc:
        print(f"sgemm {args.command}: {exc}", file=sys.stderr)
        return EXIT_FAILED
    except MachineFileError as exc:
        print(f"sgemm {args.command}: {exc}", file=sys.stderr)
        return EXIT_BAD_INPUT
    except BrokenPipeError:  # the reader went away (`sgemm list | head`): what it read was all it wanted
        os.dup2(os.open(os.devnull, os.O_WRONLY), sys.stdout.fileno())  # nothing more to say at exit either
        return EXIT_OK
    except OSError as exc:  # a path given that cannot be read or written
        print(f"sgemm {args.command}: {exc}", file=sys.stderr)
        return EXIT_BAD_INPUT


if __name__ == "__main__":
    sys.exit(main())
