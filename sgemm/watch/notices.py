"""One notice per regression of a machine's history: a kernel (with its precision twins, which share its code) at
one commit on one GPU model, every case of it that stepped, and what is known of it.

A notice's state:
- `candidate`: the history stepped there; no paired confirmation yet.
- `regression`: a paired confirmation of the two commits (`sgemm confirm`, filed in `<machine>/confirmations.json`)
  said DIFFERENT for one of its cases.
- `environment`: the step came with a change of driver, CUDA, cuBLAS or card between its two sides, and no
  confirmation pinned it on the code.
- `closed`: a later step took every case back to within the step threshold of where it was.
- `dismissed`: the confirmation said SAME for every case it measured, and DIFFERENT for none.

Its id is stable from one publish to the next: the machine (named after its GPU model), the kernel's code key (its
source file and family, shared by its precision twins) and the first commit measured slow. A bisect's result
(`<machine>/bisect/<id>.json`) is shown beside it.
"""

from __future__ import annotations

import json
import re
import statistics
from dataclasses import dataclass, field
from pathlib import Path
from urllib.parse import quote

from ..atomic import write_atomically
from ..catalogue import Kernel
from ..results import asvsuite, confirmations, resultstree
from ..results.resultstree import FOUND, NO_STEP, UNKNOWN
from ..words import counted
from .series import (Environment, History, Series, SeriesPoint, WatchError, branch_commits, configured_branch,
                     read_history)
from .steps import MIN_SERIES, MIN_STEP, Step, find_steps, threshold

NOTICES_FILE = "notices.json"
NOTICES_FORMAT = 1
STATES = ("candidate", "regression", "environment", "closed", "dismissed")
OPEN_STATES = ("candidate", "regression", "environment")
BISECT_VERDICTS = (FOUND, UNKNOWN, NO_STEP)
SHA = re.compile(r"[0-9a-f]{40}")
ID_PART = re.compile(r"[^A-Za-z0-9_.-]+")
COMMIT_URL = re.compile(r"https://[A-Za-z0-9.-]+(?::[0-9]+)?/[A-Za-z0-9._/-]+/")


def read_bisect(machine_dir: Path, notice_id: str) -> dict | None:
    """A bisect's result for this notice, as the page shows it, or None while there is none (a bisect still under
    way has only its state file, `<id>.state.json`, which is not read here). WatchError naming a result file that
    cannot be read."""
    path = resultstree.bisect_result(machine_dir, notice_id)
    if not path.is_file():
        return None
    try:
        data = json.loads(path.read_text())
    except (OSError, UnicodeDecodeError, ValueError) as exc:
        raise _unreadable(path, f"not valid JSON ({exc})") from exc
    if not isinstance(data, dict) or data.get("id") != notice_id or data.get("verdict") not in BISECT_VERDICTS:
        raise _unreadable(path, f"not a bisect result of {notice_id} (expected its id and a verdict of "
                                f"{', '.join(BISECT_VERDICTS)})")
    first_bad = data.get("first_bad")
    return {"first_bad": first_bad if isinstance(first_bad, str) and SHA.fullmatch(first_bad) else None,
            "verdict": data["verdict"],
            "builds": data.get("builds") if isinstance(data.get("builds"), int) else None,
            "wall_s": float(data["wall_s"]) if isinstance(data.get("wall_s"), int | float) else None}


def _unreadable(path: Path, why: str) -> WatchError:
    return WatchError(f"{path}: {why}; fix or move it aside (it was left as it is), nothing was written")


def code_key(kernel_name: str, kernels: dict[str, Kernel]) -> str:
    """What a kernel shares with its precision twins: its source file and family (a library's name and family for
    a library kernel; the family alone for a kernel no longer in the catalogue)."""
    family = kernel_name.split("/", 1)[-1]
    kernel = kernels.get(kernel_name)
    if kernel is None:
        return family
    origin = kernel.library or Path(kernel.source or "").stem
    return f"{origin}.{family}"


def notice_id(machine: str, key: str, bad: str) -> str:
    return "--".join(ID_PART.sub("-", part) for part in (machine, key, bad[:12]))


def graph_url(case: asvsuite.SuiteCase, track: str, machine: str) -> str:
    """The case's graph on the site, relative to its root (asv's own hash URL)."""
    names = ("kernel", "size", "precision") if case.benchmark == asvsuite.GEMM else ("kernel", "shape")
    query = "&".join([f"machine={quote(machine)}"]
                     + [f"p-{name}={quote(value, safe='')}" for name, value in zip(names, case.asv_params)])
    return f"index.html#{case.name(track)}?{query}"


def _median(values: list[float | None]) -> float | None:
    known = [v for v in values if v is not None]
    return round(statistics.median(known), 1) if known else None


def _side(points: list[SeriesPoint]) -> dict:
    return {"sm_clock_mhz": _median([p.sm_clock_mhz for p in points]), "power_w": _median([p.power_w for p in points])}


@dataclass
class Found:
    """One step of one series, with the commits either side."""

    series: Series
    step: Step
    last_good: str
    bad: str  # the first commit measured slow
    first_bad: str | None  # the same, when no commit of the branch lies between; else None (a range)
    closed: bool
    cards: tuple[set, set]

    @property
    def before(self) -> list[SeriesPoint]:
        return self.series.points[self.step.before.start:self.step.before.end]

    @property
    def after(self) -> list[SeriesPoint]:
        return self.series.points[self.step.after.start:self.step.after.end]


def series_steps(series: Series) -> list[Found]:
    """The slower steps of a series, each marked closed where the series later came back."""
    points = series.points
    steps = find_steps(series.values)
    found = []
    for index, step in enumerate(steps):
        if not step.slower:
            continue
        last_good, bad = points[step.before.end - 1], points[step.after.start]
        newest = steps[-1].after if steps else step.after
        # Undone: the newest level is back within the step threshold of the level before this step.
        came_back = index < len(steps) - 1 and newest.level / step.before.level - 1 < max(
            MIN_STEP, threshold(step.noise, step.before.size, newest.size))
        first_bad = bad.commit if bad.position == last_good.position + 1 else None
        before_cards = {p.card for p in points[step.before.start:step.before.end] if p.card is not None}
        after_cards = {p.card for p in points[step.after.start:step.after.end] if p.card is not None}
        found.append(Found(series, step, last_good.commit, bad.commit, first_bad, came_back,
                           (before_cards, after_cards)))
    return found


@dataclass
class Report:
    """What detection made of one machine's history."""

    notices: list[dict] = field(default_factory=list)
    series: int = 0
    short: int = 0  # series too short to hold a step
    notes: list[str] = field(default_factory=list)
    steps: dict[str, list[Found]] = field(default_factory=dict)  # each notice's steps, by its id, for the graphs


def _case_entry(found: Found, records: list[dict], machine: str) -> dict:
    case = found.series.case
    m, n, k = case.shape
    size = m if m == n == k else None
    entry = {"case": case.kernel, "size": size, "shape": [m, n, k], "track": found.series.track,
             "ratio": round(found.step.ratio, 5), "interval": [round(v, 5) for v in found.step.interval],
             "before": _side(found.before), "after": _side(found.after),
             "graph_url": graph_url(case, found.series.track, machine)}
    mine = [r for r in records if (r["case"], r["size"], r["good"], r["bad"]) == (case.kernel, size, found.last_good,
                                                                                 found.bad)]
    if mine:
        newest = max(mine, key=lambda r: r["measured_at"])
        entry["confirmation"] = {key: newest[key] for key in ("verdict", "ratio", "interval", "confidence", "method",
                                                              "measured_at")}
    return entry


def _state(group: list[Found], cases: list[dict], environment: list[str]) -> str:
    verdicts = [case["confirmation"]["verdict"] for case in cases if "confirmation" in case]
    if verdicts and "DIFFERENT" not in verdicts and "SAME" in verdicts and "UNKNOWN" not in verdicts:
        return "dismissed"
    if all(found.closed for found in group):
        return "closed"
    if "DIFFERENT" in verdicts:
        return "regression"
    if environment:
        return "environment"
    return "candidate"


def detect(history: History, kernels: dict[str, Kernel], results_dir: Path, commit_url: str | None) -> Report:
    """Every notice of the machine's history, newest first."""
    report = Report()
    machine_dir = results_dir / history.machine
    records = confirmations.read(confirmations.path_for(results_dir, history.machine))
    groups: dict[tuple[str, str], list[Found]] = {}
    for series in history.series:
        report.series += 1
        if len(series.points) < MIN_SERIES:
            report.short += 1
        for found in series_steps(series):
            groups.setdefault((code_key(series.case.kernel, kernels), found.bad), []).append(found)
    if len(history.measured) < 2:
        report.notes.append(f"{history.machine}: {len(history.measured)} commit measured on the branch: a step "
                            "needs a history on both sides, nothing to detect yet")
    position = {commit: index for index, commit in enumerate(history.commits)}
    for (key, bad), group in groups.items():
        identity = notice_id(history.machine, key, bad)
        cases = [_case_entry(found, records, history.machine)
                 for found in sorted(group, key=lambda f: (f.series.case.kernel, f.series.case.shape))]
        last_good = group[0].last_good
        environment = _environment_changes(history, group)
        notice = {
            "id": identity, "machine": history.machine, "gpu_model": history.gpu_model,
            "kernels": sorted({found.series.case.kernel for found in group}),
            "cases": cases, "last_good": last_good, "bad": bad,
            "first_bad": bad if all(found.first_bad == bad for found in group) else None,
            "commits_between": max(0, position[bad] - position[last_good] - 1),
            "state": _state(group, cases, environment), "environment": environment,
            "graph_url": cases[0]["graph_url"],
            "commit_url": f"{commit_url}{bad}" if commit_url else None,
            "bisect": read_bisect(machine_dir, identity),
        }
        report.notices.append(notice)
        report.steps[identity] = group
    report.notices.sort(key=lambda notice: (-position[notice["bad"]], notice["id"]))
    return report


def _environment_changes(history: History, group: list[Found]) -> list[str]:
    """What changed on the box between the step's two sides: versions between the last good and the first bad run,
    and the card (asv's card number) between the commits either side."""
    first = group[0]
    changes = history.environments.get(first.last_good, Environment()).differences(
        history.environments.get(first.bad, Environment()))
    before = set().union(*(found.cards[0] for found in group))
    after = set().union(*(found.cards[1] for found in group))
    if before and after and not before & after:
        changes.append(f"card {', '.join(f'{c:06x}' for c in sorted(before))} to "
                       f"{', '.join(f'{c:06x}' for c in sorted(after))}")
    return changes


def check_commit_url(prefix: str | None) -> str | None:
    """A commit URL prefix ('https://github.com/owner/repo/commit/'), or ValueError."""
    if prefix is None:
        return None
    if not COMMIT_URL.fullmatch(prefix):
        raise ValueError(f"--commit-url {prefix!r}: expected an https URL ending in '/' to which a commit's hash is "
                         "added, e.g. https://github.com/owner/repo/commit/")
    return prefix


def notices_document(reports: dict[str, Report]) -> dict:
    """notices.json: every machine's notices, newest first within each machine."""
    return {"format": NOTICES_FORMAT, "machines": sorted(reports),
            "notices": [notice for machine in sorted(reports) for notice in reports[machine].notices]}


def write_notices(path: Path, document: dict) -> None:
    write_atomically(path, (json.dumps(document, indent=1, sort_keys=True) + "\n").encode())


def watch(results_dir: Path, repo: Path, kernels: dict[str, Kernel], commit_url: str | None = None
          ) -> dict[str, Report]:
    """Detection over every machine of a results tree; WatchError or confirmations.ConfirmationsError, naming the
    file, when one cannot be read."""
    commits = branch_commits(repo, configured_branch(repo))
    reports = {}
    for machine in resultstree.machines(results_dir):
        history = read_history(results_dir, machine, commits, kernels)
        reports[machine] = detect(history, kernels, results_dir, commit_url)
        if history.off_branch:
            reports[machine].notes.append(f"{machine}: {counted(len(history.off_branch), 'run')} of commits not on "
                                          "the branch left out, as asv's graphs leave them out")
    return reports


