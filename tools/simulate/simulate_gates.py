"""Whole gates simulated through the gate's own looks and verdicts (sgemm.gate.looks, sgemm.gate.verdict): how often
an A/A gate raises a false alarm or ends undecided, how often a real 0.5% slowdown is found, how many rounds it
takes, and how often the noise-file checks set a file or an entry aside.

Three gates, as a pull request selects them (the cases from the working tree's catalogue, of the kernels --sds has
measured at 4096):
    14   the Hopper ladder at 8192 (every wgmma kernel, FP16 and BF16);
    58   every kernel at 4096;
    260  every case of the suite but the cuBLAS ones below 8192 (a header every kernel includes).
Each case's round-to-round sd is measured on the H100, at its size (--sds, by default
lab/2026-11-28-gate-simulation/measured-sds.json: the 4096 entries of the shipped noise file, each case its own; at
8192 and below 4096 the cases the 2026-11-27 gate reports timed, a case drawing one of them at random). With
--sds-from-4096 every case takes its kernel's 4096 entry instead. Each entry of the noise file is learned with the
degrees of freedom its measured entry has, or, with --entry-df N, with N (a file learned from more A/A rounds: three
gates of nine rounds give 24).

A round's log ratio is log(1 + change) + sd * z, z by --shape:
    normal      z ~ N(0, 1)
    t3          Student's t with 3 degrees of freedom, scaled to unit sd
    correlated  z = sqrt(1 - rho) e + sqrt(rho) c, c shared by every case of the round (one process), rho 0.5
    outliers    N(0, 1), and 5% of a case's rounds shifted by 6 sd either way (a process that read off)
A noise file (--file) is learned as `sgemm noise` learns one: each case's entry from A/A gates' rounds of the same kind
(outlier rounds set aside), with the degrees of freedom its measured entry has, then scaled: "true" (x1), "half"
(x0.5), "double" (x2); "stale", each case's entry with a chance of STALE_SHARE at half its truth and the others
true (the rounds of a changed kernel grown wider than its entry, the file as a whole still agreeing); or "none".

Prints one line per row and, last, one line of JSON with every row (the tests run a small version).
Usage, from the repository root:
    python -m tools.simulate.simulate_gates                       # the full table (lab/2026-11-28-gate-simulation)
    python -m tools.simulate.simulate_gates --cases 58 --shape t3 --file true --aa 200 --ab 100
"""

from __future__ import annotations

import argparse
import json
import math
import random
import sys
from concurrent.futures import ProcessPoolExecutor
from dataclasses import asdict, dataclass
from pathlib import Path

from sgemm.commands.args import integer_at_least
from sgemm.gate.looks import Schedule, run_looks
from sgemm.gate.noise import paired_entry
from sgemm.gate.verdict import Verdict
from sgemm.rounds.evidence import Case, Noise, PairedRounds
from tools.parser import ToolParser

ROOT = Path(__file__).resolve().parents[2]
MEASURED_SDS = ROOT / "lab" / "2026-11-28-gate-simulation" / "measured-sds.json"
THRESHOLD = 0.0025
CHANGE = 0.005  # the A/B gates' one slowed case
CORRELATION = 0.5
OUTLIER_SHARE, OUTLIER_SDS = 0.05, 6.0
FILE_SCALES = {"none": None, "true": 1.0, "half": 0.5, "double": 2.0, "stale": 1.0}
STALE_SHARE, STALE_SCALE = 0.1, 0.5  # "stale": the cases whose entry is narrower than their rounds, and by how much
LEARNING_GATE_ROUNDS = 9  # the rounds of one A/A gate a noise file is learned from: the gate's most
SHAPES = ("normal", "t3", "correlated", "outliers")
# The full table: (cases, shape, file), each row with A/A and A/B gates.
FULL_ROWS = [(cases, shape, file) for cases in (14, 58, 260) for shape, file in (
    ("normal", "true"), ("normal", "none"), ("t3", "true"), ("correlated", "true"), ("outliers", "true"),
    ("normal", "half"), ("normal", "double"), ("t3", "half"))]
FULL_GATES = {14: (10000, 2000), 58: (4000, 1000), 260: (1500, 600)}  # (A/A, A/B) gates a row


@dataclass(frozen=True)
class Row:
    cases: int
    shape: str
    file: str
    aa: int  # A/A gates
    ab: int  # A/B gates: one case, drawn at random, slower by CHANGE
    seed: int
    sds_from_4096: bool = False
    entry_df: int = 0  # every noise-file entry learned with this many degrees of freedom (0: its measured entry's)


def gate_cases(count: int) -> list[tuple[str, str]]:
    """(label, size key of measured-sds.json) of each case of a gate of `count` cases, from the catalogue: of the
    kernels measured-sds.json has a 4096 entry for, since a kernel added to the catalogue since has no measured sd
    (and would change the gates' sizes)."""
    from sgemm import catalogue
    from sgemm.results import asvsuite

    measured = {entry["case"].split(" ")[0] for entry in json.loads(MEASURED_SDS.read_text())["sizes"]["4096"]}
    kernels = {name: kernel for name, kernel in catalogue.load_catalogue().items() if name in measured}
    sweep_kernels, sweep_shapes = catalogue.sweep(catalogue.CATALOGUE_PATH)
    every = asvsuite.cases_for(list(kernels.values()), None, sweep_kernels, sweep_shapes)

    def size(case) -> str:
        if case.benchmark == asvsuite.GEMM and case.shape[0] in (4096, 8192):
            return str(case.shape[0])
        return "below 4096"

    if count == 14:
        chosen = [c for c in every if size(c) == "8192" and not kernels[c.kernel].library]
    elif count == 58:
        chosen = [c for c in every if size(c) == "4096"]
    elif count == 260:
        chosen = [c for c in every if not kernels[c.kernel].library or size(c) == "8192"]
    else:
        raise ValueError(f"gates of 14, 58 or 260 cases, not {count}")
    assert len(chosen) == count, (count, len(chosen))
    return [(c.label, size(c)) for c in chosen]


class Truth:
    """Each case's true round sd in one gate, and the degrees of freedom its entry is learned with: its measured
    entry's, or `entry_df` where that is given (above 0)."""

    def __init__(self, measured: dict, cases: list[tuple[str, str]], rng: random.Random, from_4096: bool,
                 entry_df: int = 0):
        at_4096 = {entry["case"]: entry for entry in measured["4096"]}
        by_kernel = {label.split(" ")[0]: entry for label, entry in at_4096.items()}
        self.sd, self.df = [], []
        for label, size in cases:
            if from_4096:
                entry = by_kernel[label.split(" ")[0]]
            elif size == "4096":
                entry = at_4096[label]
            else:
                entry = rng.choice(measured[size])
            self.sd.append(entry["sd"])
            self.df.append(entry_df or max(1, int(entry["df"])))


def draw(rng: random.Random, shape: str, common: float = 0.0) -> float:
    """One round's standardised error."""
    if shape == "t3":
        return rng.gauss(0, 1) / math.sqrt(rng.gammavariate(1.5, 2.0) / 3) / math.sqrt(3)
    if shape == "correlated":
        return math.sqrt(1 - CORRELATION) * rng.gauss(0, 1) + math.sqrt(CORRELATION) * common
    if shape == "outliers" and rng.random() < OUTLIER_SHARE:
        return rng.gauss(0, 1) + rng.choice((-1.0, 1.0)) * OUTLIER_SDS
    return rng.gauss(0, 1)


def learned(rng: random.Random, shape: str, sd: float, df: int, scale: float) -> Noise:
    """An entry as `sgemm noise` learns it (sgemm.gate.noise.paired_entry), from A/A gates of at most
    LEARNING_GATE_ROUNDS rounds of this kind whose degrees of freedom add up to df (the common term of another
    gate's rounds is one value for all of them, so it leaves the spread as it is), scaled."""
    kind = shape if shape != "correlated" else "normal"
    sizes = [LEARNING_GATE_ROUNDS] * (df // (LEARNING_GATE_ROUNDS - 1))
    if rest := df % (LEARNING_GATE_ROUNDS - 1):
        sizes.append(rest + 1)
    entry = paired_entry([[sd * draw(rng, kind) for _ in range(size)] for size in sizes])
    return Noise(scale * entry.sd, entry.df)


def one_gate(rng: random.Random, row: Row, cases: list[tuple[str, str]], measured: dict, changed: int | None) -> dict:
    truth = Truth(measured, cases, rng, row.sds_from_4096, row.entry_df)
    labels = [label for label, _ in cases]
    scale = FILE_SCALES[row.file]
    if row.file == "stale":
        scales = [STALE_SCALE if rng.random() < STALE_SHARE else 1.0 for _ in labels]
    else:
        scales = [scale] * len(labels)
    noise = {label: learned(rng, row.shape, sd, df, case_scale)
             for label, sd, df, case_scale in zip(labels, truth.sd, truth.df, scales)} if scale else {}
    index = {label: i for i, label in enumerate(labels)}
    drawn: dict[str, list[float]] = {label: [] for label in labels}
    common: list[float] = []

    def measure(wanted: dict[str, int]) -> dict[str, Case]:
        while len(common) < max(wanted.values()):
            common.append(rng.gauss(0, 1))
        found = {}
        for label, rounds in wanted.items():
            i = index[label]
            change = CHANGE if i == changed else 0.0
            while len(drawn[label]) < rounds:
                z = draw(rng, row.shape, common[len(drawn[label])])
                drawn[label].append(math.exp(math.log1p(change) + truth.sd[i] * z))
            found[label] = Case(label, label.split(" ")[0], THRESHOLD,
                                paired=PairedRounds(tuple(drawn[label][:rounds])), noise=noise.get(label))
        return found

    outcome = run_looks(labels, measure, Schedule())
    comparisons = outcome.comparisons
    verdicts = {label: c.verdict for label, c in comparisons.items()}
    others = [v for label, v in verdicts.items() if index[label] != changed]
    changed_verdict = verdicts[labels[changed]] if changed is not None else None
    return {"false_alarm": any(v in (Verdict.REGRESSION, Verdict.IMPROVEMENT) for v in others),
            "undecided": any(v in (Verdict.NOT_POWERED, Verdict.AMBIGUOUS) for v in verdicts.values()),
            "not_powered": sum(v is Verdict.NOT_POWERED for v in verdicts.values()),
            "found": changed_verdict is Verdict.REGRESSION,
            "missed_not_powered": changed_verdict is Verdict.NOT_POWERED,
            "missed_same": changed_verdict is Verdict.SAME,
            "case_rounds": sum(c.case.rounds for c in comparisons.values()),
            "rounds": outcome.rounds,
            "file_set_aside": any("the noise file was set aside" in c.why for c in comparisons.values()),
            "entries_set_aside": sum("noise-file entry was set aside" in c.why for c in comparisons.values())}


def run_row(row: Row) -> dict:
    measured = json.loads(MEASURED_SDS.read_text())["sizes"]
    cases = gate_cases(row.cases)
    rng = random.Random(row.seed)
    aa = [one_gate(rng, row, cases, measured, None) for _ in range(row.aa)]
    ab = [one_gate(rng, row, cases, measured, rng.randrange(row.cases)) for _ in range(row.ab)]
    return summarise(row, aa, ab)


def wilson(hits: int, total: int) -> tuple[float, float]:
    """The 95% Wilson interval of a rate."""
    if not total:
        return 0.0, 1.0
    z = 1.959964
    centre = (hits + z * z / 2) / (total + z * z)
    half = z * math.sqrt(hits * (total - hits) / total + z * z / 4) / (total + z * z)
    return max(0.0, centre - half), min(1.0, centre + half)


def summarise(row: Row, aa: list[dict], ab: list[dict]) -> dict:
    def rate(gates: list[dict], key: str) -> dict:
        hits = sum(bool(g[key]) for g in gates)
        low, high = wilson(hits, len(gates))
        return {"hits": hits, "of": len(gates), "rate": hits / len(gates) if gates else math.nan, "low": low,
                "high": high}

    cases = row.cases
    return {"row": asdict(row),
            "false_alarm": rate(aa, "false_alarm"), "undecided": rate(aa, "undecided"),
            "not_powered_a_gate": sum(g["not_powered"] for g in aa) / max(len(aa), 1),
            "mean_rounds_a_case": sum(g["case_rounds"] for g in aa) / max(len(aa), 1) / cases,
            "most_rounds": max((g["rounds"] for g in aa + ab), default=0),
            "file_set_aside": rate(aa, "file_set_aside"),
            "entries_set_aside_a_case": sum(g["entries_set_aside"] for g in aa) / max(len(aa), 1) / cases,
            "found": rate(ab, "found"), "missed_not_powered": rate(ab, "missed_not_powered"),
            "missed_same": rate(ab, "missed_same")}


def percent(figure: dict) -> str:
    return f"{figure['rate']:.1%} ({figure['low']:.1%}-{figure['high']:.1%})" if figure["of"] else "-"


def entries_note(row: dict) -> str:
    """How the row's entries were learned, where not with their measured degrees of freedom."""
    return f" (entries of {row['entry_df']} df)" if row.get("entry_df") else ""


def line(result: dict) -> str:
    row = result["row"]
    return (f"{row['cases']:>3} cases {row['shape']:<10} file {row['file']:<6}{entries_note(row)} A/A {row['aa']}: "
            f"false alarm {percent(result['false_alarm'])}, undecided {percent(result['undecided'])}, "
            f"{result['not_powered_a_gate']:.3f} NOT POWERED a gate, {result['mean_rounds_a_case']:.2f} rounds a case "
            f"(most {result['most_rounds']}), file set aside {percent(result['file_set_aside'])}, entries set aside "
            f"{result['entries_set_aside_a_case']:.2%} of cases; A/B {row['ab']}: 0.5% found {percent(result['found'])}"
            f", NOT POWERED {percent(result['missed_not_powered'])}, SAME {percent(result['missed_same'])}")


TABLE_HEAD = ("| cases | rounds | file | A/A gates | false alarm | undecided | NOT POWERED a gate "
              "| rounds a case (most) | file set aside | entries set aside | A/B gates | 0.5% found "
              "| 0.5% NOT POWERED |\n"
              "|---:|---|---|---:|---|---|---:|---|---|---:|---:|---|---|")


def table_row(result: dict) -> str:
    row = result["row"]
    file = row["file"] + (" (sds of 4096)" if row["sds_from_4096"] else "") + entries_note(row)
    return (f"| {row['cases']} | {row['shape']} | {file} | {row['aa']} | {percent(result['false_alarm'])} | "
            f"{percent(result['undecided'])} | {result['not_powered_a_gate']:.3f} | "
            f"{result['mean_rounds_a_case']:.2f} ({result['most_rounds']}) | "
            f"{percent(result['file_set_aside']) if row['file'] != 'none' else '-'} | "
            f"{result['entries_set_aside_a_case']:.2%} | {row['ab']} | {percent(result['found'])} | "
            f"{percent(result['missed_not_powered'])} |")


def main(argv: list[str] | None = None) -> int:
    parser = ToolParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--cases", type=int, choices=(14, 58, 260), help="one row: a gate of this many cases")
    parser.add_argument("--shape", choices=SHAPES, default="normal")
    parser.add_argument("--file", choices=tuple(FILE_SCALES), default="true")
    parser.add_argument("--aa", type=int, default=200, help="A/A gates of the one row")
    parser.add_argument("--ab", type=int, default=100, help="A/B gates of the one row")
    parser.add_argument("--sds-from-4096", action="store_true", help="every case takes its kernel's 4096 entry")
    parser.add_argument("--entry-df", type=integer_at_least(0, "--entry-df"), default=0,
                        help="every noise-file entry learned with this many degrees of freedom (default: measured)")
    parser.add_argument("--seed", type=int, default=1)
    parser.add_argument("--workers", type=int, default=2)
    args = parser.parse_args(argv)
    if args.cases:
        rows = [Row(args.cases, args.shape, args.file, args.aa, args.ab, args.seed, args.sds_from_4096, args.entry_df)]
    else:
        rows = [Row(cases, shape, file, *FULL_GATES[cases], seed=args.seed + i)
                for i, (cases, shape, file) in enumerate(FULL_ROWS)]
        rows.append(Row(260, "normal", "true", *FULL_GATES[260], seed=args.seed + len(rows), sds_from_4096=True))
    results = []
    with ProcessPoolExecutor(max_workers=args.workers) as pool:
        for result in pool.map(run_row, rows):
            print(line(result), flush=True)
            results.append(result)
    print("\n".join([TABLE_HEAD, *map(table_row, results)]))
    print(json.dumps(results))
    return 0


if __name__ == "__main__":
    sys.exit(main())
