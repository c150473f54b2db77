"""What the history demo reads back from a demo history and checks: asv's names for the scenario's cases, each
commit's figures as a table, what asv's Regressions page lists and what the history's notices say, each held against
the scenario's slowing commits.
"""

from __future__ import annotations

import itertools
import json
import math
import statistics
from dataclasses import dataclass
from pathlib import Path

from sgemm.results import asvsuite
from tools.acceptance.scenarios import Demo, Scenario

# --- asv's names for the cases -----------------------------------------------------------------------------------


def case(name: str, size: int) -> asvsuite.SuiteCase:
    return asvsuite.SuiteCase.square(name, size)


def label(name: str, size: int, scenario: Scenario) -> str:
    """A case as the tables name it: the kernel, and its size where the scenario's cases differ in size."""
    return name if len({each for _, each in scenario.cases}) == 1 else f"{name} {size}"


def bench_regex(scenario: Scenario) -> str:
    return "|".join(case(name, size).pattern(scenario.methods) for name, size in scenario.cases)


def read_figures(results_dir: Path, demo: Demo) -> dict[tuple[str, str, str, int], float | None]:
    """(commit, method, kernel, size) -> asv's value (a median, from the samples); None where asv recorded none."""
    figures: dict[tuple[str, str, str, int], float | None] = {}
    for commit in demo.commits:
        found = asvsuite.runs(results_dir, demo.machine, commit.hash)
        for method, (name, size) in itertools.product(demo.scenario.methods, demo.scenario.cases):
            value = found[-1].value(case(name, size), method) if found else None
            figures[commit.hash, method, name, size] = None if value is None or math.isnan(value) else value
    return figures


def _cell(value: float | None, scale: float, digits: int) -> str:
    return "none" if value is None else f"{value * scale:.{digits}f}"


def step_ratios(figures: dict, demo: Demo) -> list[str]:
    """Each case's median figure after each slowing commit over its median before it, the commits between the
    neighbouring slowing commits only (a case slowed elsewhere on the branch is compared on a flat stretch)."""
    scenario, judged = demo.scenario, demo.scenario.judged
    bounds = [1, *(slow.at for slow in scenario.slowdowns), scenario.commits + 1]
    lines = []
    for index, slow in enumerate(scenario.slowdowns, 1):
        before = demo.commits[bounds[index - 1] - 1:slow.at - 1]
        after = demo.commits[slow.at - 1:bounds[index + 1] - 1]
        ratios = []
        for name, size in scenario.cases:
            sides = [[figures[commit.hash, judged, name, size] for commit in side] for side in (before, after)]
            if any(None in side or not side for side in sides):
                ratios.append(f"{label(name, size, scenario)} n/a")
            else:
                ratio = statistics.median(sides[1]) / statistics.median(sides[0])
                ratios.append(f"{label(name, size, scenario)} {ratio:.4f}"
                              + (" (slowed)" if name in slow.kernels else ""))
        lines.append(f"At commit {slow.at} (`{demo.slowing_commit(slow).hash[:8]}`), the median figure of commits "
                     f"{slow.at}–{bounds[index + 1] - 1} over that of commits {bounds[index - 1]}–{slow.at - 1}: "
                     + ", ".join(ratios) + ".")
    return lines


def history_table(results_dir: Path, demo: Demo) -> list[str]:
    """Markdown: each commit's judged figure per case (the median time in ms, or the median ratio to the reference
    build) and each slowed kernel's SM clock, then the figures' ratios across each slowing commit."""
    figures = read_figures(results_dir, demo)
    scenario, judged = demo.scenario, demo.scenario.judged
    scale, digits, unit = (1e3, 4, "ms") if judged == asvsuite.TIME else (1, 5, "over the reference")
    clocked = [(slow.kernels[0], slow.size) for slow in scenario.slowdowns]
    lines = ["| # | commit | change | "
             + " | ".join(f"{label(name, size, scenario)} ({unit})" for name, size in scenario.cases)
             + "".join(f" | {label(name, size, scenario)} SM clock (MHz)" for name, size in clocked) + " |",
             "|---" * (len(scenario.cases) + len(clocked) + 3) + "|"]
    slowing = {demo.slowing_commit(slow) for slow in scenario.slowdowns}
    for number, commit in enumerate(demo.commits, 1):
        values = [_cell(figures[commit.hash, judged, name, size], scale, digits) for name, size in scenario.cases]
        values += [_cell(figures[commit.hash, asvsuite.SM_CLOCK, name, size], 1, 0) for name, size in clocked]
        marker = " **←**" if commit in slowing else ""
        lines.append(f"| {number} | `{commit.hash[:8]}` | {commit.subject}{marker} | {' | '.join(values)} |")
    return lines + [""] + step_ratios(figures, demo)


# --- The checks --------------------------------------------------------------------------------------------------


@dataclass(frozen=True)
class Listed:
    """One regression as asv's Regressions page shows it."""

    name: str
    commit: str  # the first commit with the higher value
    range_start: str | None  # the last commit before it, when asv could not pin the step to one commit
    before: float
    after: float


def listed_regressions(html_dir: Path) -> list[Listed]:
    index = json.loads((html_dir / "index.json").read_text())
    hashes = {int(revision): commit for revision, commit in index["revision_to_hash"].items()}
    listed = []
    for name, _graph, _params, _index, _last, _best, jumps in json.loads(
            (html_dir / "regressions.json").read_text())["regressions"]:
        for start, end, before, after in jumps or []:
            listed.append(Listed(name, hashes[end], None if start is None else hashes[start], before, after))
    return listed


def expected_entries(demo: Demo) -> list[tuple[str, str]]:
    """(asv's entry of the judged track, the slowing commit) of every slowed kernel."""
    return sorted((case(name, slow.size).entry(demo.scenario.judged), demo.slowing_commit(slow).hash)
                  for slow in demo.scenario.slowdowns for name in slow.kernels)


@dataclass(frozen=True)
class AsvListing:
    """What asv's Regressions page made of the branch, held against its slowdowns."""

    # (asv's entry, commit): a slowed kernel's judged track that asv did not list at its slowing commit
    missed: list[tuple[str, str]]
    # (asv's entry, commit): a listing no slowdown explains (another case, another commit, or a range of commits)
    extra: list[tuple[str, str]]

    def describe(self) -> str:
        return "".join(f"; missed {entry} at {commit[:8]}" for entry, commit in self.missed) + "".join(
            f"; wrongly listed {entry} at {commit[:8]}" for entry, commit in self.extra)

    @property
    def exact(self) -> bool:
        return not self.missed and not self.extra


def check(html_dir: Path, demo: Demo) -> AsvListing:
    """Print what the published regressions.json lists, against the slowed kernels each at its slowing commit. asv's
    own step detection is not the product's: a listing it missed is reported, a listing it made wrongly fails the
    demo."""
    expected = expected_entries(demo)
    subjects = {commit.hash: commit.subject for commit in demo.commits}
    listed = listed_regressions(html_dir)
    print(f"asv's Regressions page ({html_dir / 'regressions.json'}): {len(listed)} listed; expected "
          + ", ".join(f"{entry} at {commit[:8]}" for entry, commit in expected) + " alone")
    for item in listed:
        where = (f"{item.commit[:8]}" if item.range_start is None
                 else f"somewhere in {item.range_start[:8]}..{item.commit[:8]}")
        print(f"    {item.name} at {where} ({subjects.get(item.commit, 'not a demo commit')}): "
              f"{item.before:.6g} -> {item.after:.6g} ({item.after / item.before - 1:+.2%})")
    pinned = [(item.name, item.commit) for item in listed if item.range_start is None]
    listing = AsvListing([each for each in expected if each not in pinned],
                         [(item.name, item.commit) for item in listed
                          if item.range_start is not None or (item.name, item.commit) not in expected])
    verdict = "PASS" if listing.exact else "FAIL" if listing.extra else "PASS, with a miss"
    print(f"check of asv's page: {verdict}{listing.describe()}")
    return listing


def check_notices(notices: dict, demo: Demo) -> bool:
    """Print the history's notices; True when there is one for each slowing commit, naming the kernels it slowed
    at their size, first bad at that commit, and no other."""
    expected = sorted((demo.slowing_commit(slow).hash, tuple(sorted(slow.kernels)), slow.size)
                      for slow in demo.scenario.slowdowns)
    found = notices.get("notices", [])
    subjects = {commit.hash: commit.subject for commit in demo.commits}
    print(f"The history's notices: {len(found)}; expected one at each of "
          + ", ".join(f"{commit[:8]} ({' and '.join(kernels)} at {size})" for commit, kernels, size in expected))
    seen = []
    for notice in found:
        sizes = sorted({entry["size"] for entry in notice["cases"]})
        print(f"    {notice['state']}: {' and '.join(notice['kernels'])} at {', '.join(map(str, sizes))}, first bad "
              f"{str(notice['first_bad'])[:8]} ({subjects.get(notice['bad'], 'not a demo commit')})")
        for entry in notice["cases"]:
            confirmed = entry.get("confirmation")
            print(f"        {entry['case']} {entry['size']}: step {entry['ratio']:.4f} ({entry['interval'][0]:.4f}–"
                  f"{entry['interval'][1]:.4f}), SM clock {_clock(entry['before'])} → {_clock(entry['after'])} MHz"
                  + (f"; confirmed {confirmed['verdict']}, {confirmed['ratio']:.4f} ({confirmed['interval'][0]:.4f}"
                     f"–{confirmed['interval'][1]:.4f})" if confirmed else ""))
        seen.append((notice["first_bad"], tuple(notice["kernels"]), sizes[0] if len(sizes) == 1 else tuple(sizes)))
    passed = sorted(seen, key=str) == sorted(expected, key=str)
    print(f"check of the notices: {'PASS' if passed else 'FAIL'}")
    return passed


def _clock(side: dict) -> str:
    clock = side.get("sm_clock_mhz")
    return "?" if clock is None else f"{clock:.0f}"


def set_regression_settings(config: Path, scenario: Scenario, threshold: float) -> None:
    """The demo's regression settings in the scratch clone's asv.conf.json (rewritten without its comments)."""
    from asv.util import load_json

    conf = load_json(str(config), js_comments=True)
    conf["regressions_thresholds"] = {".*": threshold}
    conf["regressions_first_commits"] = {scenario.not_judged: None}
    config.write_text(json.dumps(conf, indent=2) + "\n")
