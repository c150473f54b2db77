"""Paired gates judged again from the rounds they recorded, under another noise file: what the gate would have said
(`sgemm noise --replay`), which answers what a noise file is worth.

Each work folder is a paired gate's (`sgemm gate --work`); its rounds/round-N.jsonl hold one paired ratio per case a
round. The replay runs the gate's own looks (sgemm.gate.looks) over those ratios, a look taking a case's first
rounds as the gate does, with the noise given (none: each case judged on its rounds alone). A look that asks a case
for more rounds than the gate recorded leaves the case out and says so. With leave_one_out and several gates, each
gate is judged with the paired noise learned from the other gates' rounds alone: an estimate of a noise file's worth
on gates it did not learn from.
"""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path

from ..rounds.evidence import Case, Noise, PairedRounds
from ..rounds.session import PAIRED_THRESHOLD
from .looks import Schedule, run_looks
from .noise import NoiseFileError, learn_paired, read, round_files, round_ratios
from .run import DEFAULT_MAX_ROUNDS, DEFAULT_ROUNDS
from .verdict import Comparison


class ReplayError(RuntimeError):
    """Gates that cannot be replayed as asked: the message names the folder or file and says why."""


@dataclass(frozen=True)
class Replayed:
    """One gate judged again: what its looks decided, the cases a look wanted more rounds of than were recorded,
    and where the noise came from."""

    work: Path
    comparisons: list[Comparison]
    short: list[str]
    noise_source: str


def recorded_ratios(work: Path) -> dict[str, list[float]]:
    """Each case's round ratios in round order, as the gate in `work` recorded them."""
    if not work.is_dir():
        raise ReplayError(f"{work}: no such folder")
    files = round_files(work)
    if not files:
        raise ReplayError(f"{work}: no rounds/round-N.jsonl under it")
    try:
        ratios = round_ratios(files)
    except (OSError, UnicodeDecodeError, ValueError, KeyError, TypeError, AttributeError) as exc:
        raise ReplayError(f"{work}: cannot read its rounds: {exc}") from None
    if not ratios:
        raise ReplayError(f"{work}: its rounds hold no measured ratio")
    return ratios


def replay(ratios: dict[str, list[float]], noise: dict[str, Noise]) -> tuple[list[Comparison], list[str]]:
    """The comparisons the gate's looks reach on these ratios, and the cases a look wanted more rounds of."""
    short: list[str] = []

    def measure(wanted: dict[str, int]) -> dict[str, Case]:
        cases = {}
        for label, rounds in wanted.items():
            if len(ratios[label]) < rounds:
                short.append(f"{label} (wanted {rounds} rounds, {len(ratios[label])} recorded)")
                continue
            cases[label] = Case(label, label.split(" ")[0], PAIRED_THRESHOLD,
                                paired=PairedRounds(tuple(ratios[label][:rounds])), noise=noise.get(label))
        return cases

    outcome = run_looks(sorted(ratios), measure, Schedule(DEFAULT_ROUNDS, DEFAULT_MAX_ROUNDS))
    return list(outcome.comparisons.values()), short


def replay_gates(works: list[Path], noise_file: Path | None, machine: str, leave_one_out: bool) -> list[Replayed]:
    """Every gate judged again, with the paired noise of `noise_file` (which must be `machine`'s), or with none, or,
    leave_one_out, each with the noise the other gates' rounds teach. Every gate's rounds are read, and refused if
    unreadable, before any is judged."""
    fixed: dict[str, Noise] = {}
    if noise_file is not None:
        try:
            fixed = read(noise_file, machine)[0].get("paired", {})
        except NoiseFileError as exc:
            raise ReplayError(str(exc)) from None
    recorded = {work: recorded_ratios(work) for work in works}
    replayed = []
    for work in works:
        if leave_one_out:
            others = [other for other in works if other != work]
            try:
                noise, gates, _ = learn_paired(others)
            except (NoiseFileError, OSError, ValueError, KeyError, TypeError, AttributeError) as exc:
                raise ReplayError(f"cannot learn the noise of the gates other than {work}: {exc}") from None
            source = f"noise from the other {gates} gates"
        else:
            noise, source = fixed, f"noise file {noise_file}" if noise_file else "no noise file"
        comparisons, short = replay(recorded[work], noise)
        replayed.append(Replayed(work, comparisons, short, source))
    return replayed
