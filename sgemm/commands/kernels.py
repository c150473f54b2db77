"""`sgemm list`, `sgemm check` and `sgemm bench`: the catalogue shown, its kernels checked and timed on this GPU."""

from __future__ import annotations

import json
import shutil
import sys
import time

from .. import catalogue, kernel_table
from ..measuring.record import MeasuredCase, check_cases, device_info, select_cases
from ..results.machine import with_nvml
from . import EXIT_BAD_INPUT, args as types, print_table, writable_file_problem

DEFAULT_CHECK_SHAPES = ("1024x1024x1024", "1000x1028x516")


def add_list(add) -> None:
    listing = add("list", cmd_list, "show the kernel catalogue, a line a kernel as wide as the terminal")
    listing.add_argument("--wide", action="store_true", help="every column in full: the source and template "
                         "instantiation, and each seed's label for the step")
    listing.add_argument("--markdown", action="store_true", help="the catalogue as the README's Markdown table, a row "
                         "a source file (with --wide: docs/kernels.md's, a row a kernel)")
    listing.add_argument("--into", type=types.path, metavar="FILE", help="with --markdown: rewrite the table "
                         f"between FILE's lines {kernel_table.BEGIN} and {kernel_table.END}, and nothing else")


def _list_markdown(args) -> int:
    """The catalogue's Markdown table printed, or written between a file's markers (the README, docs/kernels.md)."""
    refused = None
    if not args.markdown:
        refused = "--into needs --markdown: it writes the Markdown table"
    elif args.into and args.kernel:
        refused = "--into writes the whole catalogue's table: leave out -k"
    if refused:
        print(f"sgemm list: {refused}", file=sys.stderr)
        return EXIT_BAD_INPUT
    render = kernel_table.per_kernel if args.wide else kernel_table.by_source
    table = render(catalogue.select(args.kernel), catalogue.seeds())
    if not args.into:
        print("\n".join(table))
        return 0
    try:
        changed = kernel_table.write_into(args.into, table)
    except kernel_table.KernelTableError as exc:
        print(f"sgemm list: {exc}", file=sys.stderr)
        return EXIT_BAD_INPUT
    done = "the table rewritten" if changed else "the table was already the catalogue's"
    print(f"sgemm list: {args.into}: {done}", file=sys.stderr)
    return 0


def add_check(add) -> None:
    check = add("check", cmd_check, "check every kernel against an FP64 reference on this GPU")
    check.add_argument("--shape", type=types.parse_shape, action="append", help="MxNxK (repeatable)")
    check.add_argument("--alpha", type=types.finite, default=1.0)
    check.add_argument("--beta", type=types.finite, default=0.0)


def add_bench(add) -> None:
    bench = add("bench", cmd_bench, "verify, then time kernels with NVBench and print a table")
    shapes = bench.add_mutually_exclusive_group()
    shapes.add_argument("--size", type=types.size, action="append", help="square size (repeatable; default: the "
                        "sizes the suite times each kernel at)")
    shapes.add_argument("--shape", type=types.parse_shape, action="append", help="MxNxK (repeatable)")
    bench.add_argument("--json", type=types.path, help="also write every case's samples and telemetry to this file")
    bench.add_argument("--versus-baseline", action="store_true", help="also time each kernel paired with its "
                       "precision's cuBLAS in this process, L2 warm and flushed, and each alone for its joules "
                       "per GEMM (seconds more a kernel)")


def cmd_list(args) -> int:
    if args.markdown or args.into:
        return _list_markdown(args)
    rows = []
    seed_names = {seed.file: seed.number for seed in catalogue.seeds()}
    for kernel in catalogue.select(args.kernel):
        shapes = "any" if kernel.multiple_of == (1, 1, 1) else "M%{} N%{} K%{}".format(*kernel.multiple_of)
        # An architecture-specific kernel runs on that architecture alone: its target says more than a minimum.
        runs_on = kernel.target or f"{kernel.min_compute_capability / 10:.1f}"
        if args.wide:
            origin = ", ".join(f"{seed_names.get(o.seed, o.seed)} {o.label}" for o in kernel.origins)
            tuned = "".join(f"; sm_{cc}: {entry}" for cc, entry in kernel.tuned_entries)
            rows.append([kernel.name, kernel.library or f"{kernel.source} {kernel.entry}{tuned}", shapes, runs_on,
                         origin, kernel.technique])
        else:
            seeds = " ".join(dict.fromkeys(seed_names.get(o.seed, o.seed) for o in kernel.origins))
            rows.append([kernel.name, shapes, runs_on, seeds, kernel.technique])
    if args.wide:
        print_table(["kernel", "source", "shapes", "min cc", "seed", "technique"], rows)
    else:  # one line a kernel, as wide as the terminal
        print_table(["kernel", "shapes", "min cc", "seeds", "technique"], rows,
                    shutil.get_terminal_size((100, 24)).columns)
    return 0


def refused_everywhere(kernels: list[catalogue.Kernel], shapes) -> str | None:
    """Where every selected kernel's entry refuses every shape asked for (what the catalogue admits, known with no
    GPU), the first reason, to be said before CUDA starts; else None, and each refusal is a skip in the table."""
    reasons = [kernel.shape_problem(*shape) for kernel in kernels for shape in shapes]
    return reasons[0] if reasons and all(reasons) else None


def cmd_check(args) -> int:
    from ..measuring.verify import VerificationError

    kernels = catalogue.select(args.kernel)  # an unknown kernel is bad input, said before CUDA is touched
    if args.shape and (reason := refused_everywhere(kernels, args.shape)):
        print(f"sgemm check: no selected kernel takes a shape asked for: {reason}", file=sys.stderr)
        return EXIT_BAD_INPUT
    shapes = args.shape or [types.parse_shape(s) for s in DEFAULT_CHECK_SHAPES]
    runnable, skipped = select_cases(kernels, shapes, device_info(args.device))  # no CuPy or no GPU: said in a line

    def progress(index: int, case: MeasuredCase) -> None:
        print(f"[{index + 1}/{len(runnable)}] {case.id}", file=sys.stderr)

    rows, failed = [], 0
    for case, result in zip(runnable, check_cases(runnable, args.device, args.alpha, args.beta, progress)):
        if isinstance(result, BaseException):
            failed += 1
            detail = (str(result).splitlines()[0] if isinstance(result, VerificationError)
                      else f"{type(result).__name__}: {result}")
            rows.append([case.kernel.name, f"{case.m}x{case.n}x{case.k}", "-", f"FAILED {detail}"])
        else:
            rows.append([case.kernel.name, f"{case.m}x{case.n}x{case.k}", f"{result:.2e}", "ok"])
    rows += [[case.kernel.name, f"{case.m}x{case.n}x{case.k}", "-", f"skipped: {reason}"] for case, reason in skipped]
    print_table(["kernel", "MxNxK", "rel. error", "result"], rows)
    print(f"{len(runnable) - failed} passed, {failed} failed, {len(skipped)} skipped")
    return 1 if failed else 0


def cmd_bench(args) -> int:
    from ..figures import Figures
    from ..measuring.record import run_cases

    kernels = catalogue.select(args.kernel)  # an unknown kernel is bad input, said before CUDA is touched
    shapes = args.shape or [(s, s, s) for s in args.size or ()]
    if shapes and (reason := refused_everywhere(kernels, shapes)):
        print(f"sgemm bench: no selected kernel takes a shape asked for: {reason}", file=sys.stderr)
        return EXIT_BAD_INPUT
    if args.json and (problem := writable_file_problem("--json", args.json)):
        print(f"sgemm bench: {problem}", file=sys.stderr)
        return EXIT_BAD_INPUT
    info = device_info(args.device)
    runnable, skipped = select_cases(kernels, shapes, info)
    gpu = with_nvml(info, args.device)
    started = time.monotonic()

    def progress(index: int, case: MeasuredCase) -> None:
        print(f"[{index + 1}/{len(runnable)}] {case.id}  ({time.monotonic() - started:.0f} s)", file=sys.stderr)

    results = run_cases(runnable, args.device, progress)
    versus = {}
    if args.versus_baseline:
        from ..measuring.ab import versus_baselines

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
        reference = results.get(MeasuredCase(catalogue.baseline(case.kernel.precision), case.m, case.n, case.k).id)
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
    print("% cuBLAS: NVBench's medians, each case in its own measurement, L2 flushed before every launch, in this "
          "process (at the power cap the clock a process gets moves, and this % with it)"
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
