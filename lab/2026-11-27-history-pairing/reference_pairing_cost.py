#!/usr/bin/env python3
"""What the history's pairing against the reference build costs, case by case, on this GPU: a sample of the suite's
compiled cases (every Nth, in the suite's order, so that a case follows the kind of case it follows in a history),
each paired as a history commit's measuring process pairs it (sgemm.measuring.record.time_against_reference), with
the history's settings or others given here. One line of JSON a case goes to --out as soon as it is measured, so a
run cut short keeps what it did. At the end: the time a case, and the suite's whole pairing at that rate.

Pairing is most of a history commit's GPU time; this measures it in a minute or two, without asv, so that settings
can be weighed before a whole commit is run. What a setting does to a step's reading is for a history demo to show
(scripts/history-demo.py): a briefer pairing once read a 1% Hopper step as 0.5-0.7%
(lab/2026-11-27-history-pairing/brief-pairing.md).

Usage: scripts/reference-pairing-cost.py [--every 2] [--seconds 90] [--out pairs.jsonl]
                                          [--block-s S] [--warmup-s S] [--max-warmup-s S] [--min-pairs N]
                                          [--min-s S] [--max-s S]
Exit status: 0 measured; 2 bad input, no GPU, or no reference named in the catalogue.
"""

from __future__ import annotations

import argparse
import json
import statistics
import sys
import time
from dataclasses import fields, replace
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

from sgemm.catalogue import get_kernel  # noqa: E402
from sgemm.history import run
from sgemm.measuring.paired import PairedSettings  # noqa: E402
from sgemm.measuring.record import (  # noqa: E402
    REFERENCE_SETTINGS,
    MeasuredCase,
    NoGpuError,
    device_info,
    prepare_reference_builds,
    time_against_reference,
)

SETTINGS = ("block_s", "warmup_s", "max_warmup_s", "min_pairs", "min_s", "max_s")


def sampled_cases(repo: Path, every: int) -> tuple[list[MeasuredCase], int]:
    """Every `every`-th compiled case of the suite, in its order, and how many compiled cases there are."""
    compiled = [case for case in (MeasuredCase(get_kernel(c.kernel), *c.shape) for c in run.suite_cases(repo))
                if not case.kernel.library]
    return compiled[::every], len(compiled)


def settings_from(args: argparse.Namespace) -> PairedSettings:
    return replace(REFERENCE_SETTINGS, **{name: getattr(args, name) for name in SETTINGS
                                          if getattr(args, name) is not None})


def parse(argv: list[str] | None) -> argparse.Namespace:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--every", type=int, default=2, help="pair every Nth compiled case (default 2)")
    parser.add_argument("--seconds", type=float, default=90.0, help="stop starting cases after this long (90)")
    parser.add_argument("--out", type=Path, default=Path("pairs.jsonl"), help="one line of JSON a case")
    kinds = {field.name: field.type for field in fields(PairedSettings)}
    for name in SETTINGS:
        default = getattr(REFERENCE_SETTINGS, name)
        parser.add_argument(f"--{name.replace('_', '-')}", type=int if kinds[name] in (int, "int") else float,
                            help=f"PairedSettings.{name} (the history's: {default})")
    args = parser.parse_args(argv)
    if args.every < 1:
        parser.error(f"--every must be at least 1, got {args.every}")
    if not args.seconds > 0:
        parser.error(f"--seconds must be above 0, got {args.seconds}")
    for name in SETTINGS:
        value = getattr(args, name)
        if value is not None and not value > 0:
            parser.error(f"--{name.replace('_', '-')} must be above 0, got {value}")
    if args.out.exists() and not args.out.is_file():
        parser.error(f"--out {args.out} is not a file")
    return args


def main(argv: list[str] | None = None) -> int:
    args = parse(argv)
    settings = settings_from(args)
    try:
        gpu = device_info()
        tree = run.reference_tree(ROOT, ROOT / ".asv" / "history")
    except (NoGpuError, run.HistoryError) as exc:
        print(f"reference-pairing-cost: {exc}", file=sys.stderr)
        return 2
    if tree is None:
        print("reference-pairing-cost: the catalogue names no [suite] reference", file=sys.stderr)
        return 2
    from sgemm.measuring.telemetry import CardReadings

    started = time.monotonic()
    cases, compiled = sampled_cases(ROOT, args.every)
    commit, builds = prepare_reference_builds(cases, tree)
    readings = CardReadings.of(0)
    print(f"{gpu.name}: {len(cases)} of {compiled} compiled cases, against {commit[:12]}; set up in "
          f"{time.monotonic() - started:.1f} s; {settings}", file=sys.stderr)
    seconds, last = [], ""
    deadline = time.monotonic() + args.seconds
    with open(args.out, "a") as out:
        for case in cases:
            if time.monotonic() > deadline:
                break
            reference = builds[case.id]
            if isinstance(reference, str):
                continue
            figures = time_against_reference(case, reference, commit, readings, settings)
            figures.pop("pair_ratios", None)
            out.write(json.dumps({"case": case.id, **figures}) + "\n")
            out.flush()
            if "seconds" in figures:
                seconds.append(figures["seconds"])
                last = case.id
    if not seconds:
        print("reference-pairing-cost: no case was paired", file=sys.stderr)
        return 1
    mean = sum(seconds) / len(seconds)
    # The sample runs in the suite's order: cut short, it holds the suite's first kinds of case alone, so the rate is
    # theirs, and the last case says how far it got.
    print(f"{len(seconds)} of {len(cases)} sampled cases paired (the last {last}) in {sum(seconds):.1f} s: "
          f"{mean:.2f} s a case (median {statistics.median(seconds):.2f} s); all {compiled} compiled cases at that "
          f"rate: about {mean * compiled:.0f} s")
    return 0


if __name__ == "__main__":
    sys.exit(main())
