"""One notice per regression of a machine's history: a kernel (with its precision twins, which share its code) over
a range of commits on one GPU model, every case of it that stepped, and what is known of it.

A notice's state:
- `candidate`: the history stepped there; no paired confirmation yet.
- `regression`: a paired confirmation of the two commits (`sgemm confirm`, filed in `<machine>/confirmations.json`)
  said DIFFERENT for one of its cases.
- `environment`: the step came with a change of driver, CUDA, cuBLAS or card between its two sides, and no
  confirmation pinned it on the code.
- `closed`: a later step took every case back to within MIN_STEP of where it was.
- `dismissed`: the confirmation said SAME for every case it measured, and DIFFERENT for none.
- `gone`: no longer seen: its step was still inside the detector's window and the detector no longer finds it
  there, or its commits are no longer on the branch. Its issue is closed as not planned; it opens again if the
  step is seen again.

A notice is **filed** (sgemm.watch.filing: seen at two publishes in a row with enough commits after its step, or
confirmed DIFFERENT) before the issue job opens an issue for it; until then it is only a candidate that `sgemm
confirm` may measure. Its id is the one it got when first seen: the machine (named after its GPU model), the
kernel's code key (its source file and family, shared by its precision twins) and the first commit then measured
slow; a boundary that later moves a commit or two keeps it. The notices of the last publish are the watch's memory
(`<results>/notices.json`, the same file as beside the site): a notice whose step has left the detector's window is
carried from there as it was. A bisect's result (`<machine>/bisect/<id>.json`) is shown beside it.
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
from .filing import persisted, same_step
from .series import (Environment, History, Series, SeriesPoint, WatchError, branch_commits, configured_branch,
                     read_history)
from .steps import MIN_SERIES, MIN_STEP, WINDOW, Step, machine_phi, watch_series

NOTICES_FILE = "notices.json"
NOTICES_FORMAT = 2
OLDER_FORMATS = (1,)  # read and brought up to date: their open notices had issues, so they count as filed
STATES = ("candidate", "regression", "environment", "closed", "dismissed", "gone")
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


def series_steps(series: Series, phi_floor: float = 0.0) -> list[Found]:
    """The slower steps in the series' window, each marked closed where the series later came back; the range of
    each runs from the commit before the earliest figure that may be its first slow one to the latest."""
    points = series.points
    steps = watch_series(series.values, phi_floor)
    found = []
    for index, step in enumerate(steps):
        if not step.slower:
            continue
        earliest, latest = step.first_bad_range
        last_good, bad = points[max(0, earliest - 1)], points[latest]
        newest = steps[-1].after
        # Undone: the newest level is back within MIN_STEP of the level before this step.
        came_back = index < len(steps) - 1 and newest.level / step.before.level - 1 < MIN_STEP
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


def _case_entry(found: Found, machine: str) -> dict:
    case = found.series.case
    m, n, k = case.shape
    size = m if m == n == k else None
    return {"case": case.kernel, "size": size, "shape": [m, n, k], "track": found.series.track,
            "ratio": round(found.step.ratio, 5), "interval": [round(v, 5) for v in found.step.interval],
            "level_before": found.step.before.level,
            "before": _side(found.before), "after": _side(found.after),
            "graph_url": graph_url(case, found.series.track, machine)}


def _confirm(entry: dict, last_good: str, bad: str, records: list[dict], position: dict[str, int]) -> None:
    """The newest confirmation of this case whose two commits hold the notice's range (the boundary may have moved
    inside it since it was measured) set on the entry; a record of a case no longer in the catalogue still
    matches its notice by name."""
    entry.pop("confirmation", None)
    if last_good not in position or bad not in position:
        return
    mine = [r for r in records if (r["case"], r["size"]) == (entry["case"], entry["size"])
            and r["good"] in position and r["bad"] in position
            and position[r["good"]] <= position[last_good] and position[r["bad"]] >= position[bad]
            and position[r["good"]] < position[r["bad"]]]
    if mine:
        newest = max(mine, key=lambda r: r["measured_at"])
        entry["confirmation"] = {key: newest[key] for key in ("verdict", "ratio", "interval", "confidence", "method",
                                                              "measured_at")}


def _state(closed: bool, cases: list[dict], environment: list[str]) -> str:
    verdicts = [case["confirmation"]["verdict"] for case in cases if "confirmation" in case]
    if verdicts and "DIFFERENT" not in verdicts and "SAME" in verdicts and "UNKNOWN" not in verdicts:
        return "dismissed"
    if closed:
        return "closed"
    if "DIFFERENT" in verdicts:
        return "regression"
    if environment:
        return "environment"
    return "candidate"


def _sightings(history: History, kernels: dict[str, Kernel], measured: dict[str, int]
               ) -> dict[str, list[list[Found]]]:
    """This publish's slower steps, by code key, each key's steps grouped into one sighting where their first slow
    commits are one step's (filing.same_step)."""
    phi = machine_phi([series.values for series in history.series])
    by_key: dict[str, list[list[Found]]] = {}
    for series in history.series:
        for found in series_steps(series, phi):
            groups = by_key.setdefault(code_key(series.case.kernel, kernels), [])
            near = [group for group in groups if same_step(measured[group[0].bad], measured[found.bad])]
            if near:
                near[0].append(found)
            else:
                groups.append([found])
    return by_key


def _window_starts(history: History) -> dict[tuple[str, tuple], int]:
    """Each series' first commit inside the detector's window (branch position), by case and shape."""
    return {(series.case.kernel, series.case.shape): series.points[max(0, len(series.points) - WINDOW)].position
            for series in history.series if series.points}


def _newest_levels(history: History) -> dict[tuple[str, tuple], float]:
    """Each series' level after its newest step in the window (the whole window's where none), by case and
    shape."""
    levels = {}
    phi = machine_phi([series.values for series in history.series])
    for series in history.series:
        if len(series.points) < MIN_SERIES:
            continue
        steps = watch_series(series.values, phi)
        start = steps[-1].after.start if steps else max(0, len(series.points) - WINDOW)
        values = series.values[start:]
        levels[(series.case.kernel, series.case.shape)] = statistics.geometric_mean(values)
    return levels


def detect(history: History, kernels: dict[str, Kernel], results_dir: Path, commit_url: str | None,
           previous: list[dict] | None = None) -> Report:
    """Every notice of the machine's history, newest first: this publish's sightings matched to the previous
    publish's notices (`previous`, this machine's), and those no sighting matched carried or marked gone."""
    report = Report()
    machine_dir = results_dir / history.machine
    records = confirmations.read(confirmations.path_for(results_dir, history.machine))
    for series in history.series:
        report.series += 1
        if len(series.points) < MIN_SERIES:
            report.short += 1
    if len(history.measured) < 2:
        report.notes.append(f"{history.machine}: {len(history.measured)} commit measured on the branch: a step "
                            "needs a history on both sides, nothing to detect yet")
    if report.short:
        report.notes.append(f"{history.machine}: {counted(report.short, 'series', 'series')} shorter than "
                            f"{MIN_SERIES} commits: too short to read their noise, no step is looked for yet")
    position = {commit: index for index, commit in enumerate(history.commits)}
    measured = {commit: index for index, commit in enumerate(history.measured)}
    earlier = [dict(notice) for notice in previous or []]
    matched: set[str] = set()
    for key, sightings in _sightings(history, kernels, measured).items():
        for group in sightings:
            bad = group[0].bad
            mine = [n for n in earlier if n["id"] not in matched and _key_of(n) == ID_PART.sub("-", key)
                    and n["bad"] in measured and same_step(measured[n["bad"]], measured[bad])]
            fresh = notice_id(history.machine, key, bad)
            before = min(mine, key=lambda n: abs(measured[n["bad"]] - measured[bad]), default=None) or next(
                (n for n in earlier if n["id"] == fresh and n["id"] not in matched), None)
            notice = _seen(history, group, key, before, fresh, records, position, measured, commit_url, machine_dir)
            matched.add(notice["id"])
            report.notices.append(notice)
            report.steps[notice["id"]] = group
    starts, levels = _window_starts(history), None
    for notice in earlier:
        if notice["id"] in matched:
            continue
        if levels is None:
            levels = _newest_levels(history)
        report.notices.append(_unseen(notice, history, records, position, starts, levels, report))
    report.notices.sort(key=lambda n: (-position.get(n["bad"], -1), n["id"]))
    return report


def _key_of(notice: dict) -> str:
    """The code key a notice's id was made of (notice_id's middle part)."""
    return notice["id"].rsplit("--", 2)[-2] if notice["id"].count("--") >= 2 else ""


def _seen(history: History, group: list[Found], key: str, before: dict | None, fresh: str, records: list[dict],
          position: dict[str, int], measured: dict[str, int], commit_url: str | None, machine_dir: Path) -> dict:
    """A notice as this publish sees it: a new one, or `before` (the previous publish's) brought up to date."""
    identity = before["id"] if before else fresh
    group.sort(key=lambda f: (f.series.case.kernel, f.series.case.shape))
    last_good = min((f.last_good for f in group), key=position.__getitem__)
    bad = max((f.bad for f in group), key=position.__getitem__)
    cases = [_case_entry(found, history.machine) for found in group]
    for entry in cases:
        _confirm(entry, last_good, bad, records, position)
    environment = _environment_changes(history, group)
    state = _state(all(found.closed for found in group), cases, environment)
    in_a_row = before["publishes"] + 1 if before and before.get("seen") else 1
    after = max(len(measured) - measured[f.bad] for f in group)
    confirmed = any(entry.get("confirmation", {}).get("verdict") == "DIFFERENT" for entry in cases)
    filed = bool(before and before.get("filed")) or bool(persisted(in_a_row, after)) or confirmed
    return {"id": identity, "machine": history.machine, "gpu_model": history.gpu_model,
            "kernels": sorted({found.series.case.kernel for found in group}),
            "cases": cases, "last_good": last_good, "bad": bad,
            "first_bad": bad if position[bad] == position[last_good] + 1 else None,
            "commits_between": max(0, position[bad] - position[last_good] - 1),
            "state": state, "environment": environment, "filed": filed, "seen": True, "publishes": in_a_row,
            "graph_url": cases[0]["graph_url"],
            "commit_url": f"{commit_url}{bad}" if commit_url else None,
            "bisect": read_bisect(machine_dir, identity)}


def _unseen(notice: dict, history: History, records: list[dict], position: dict[str, int],
            starts: dict[tuple[str, tuple], int], levels: dict[tuple[str, tuple], float], report: Report) -> dict:
    """A notice of the previous publish that no sighting matched now: kept as it was where its step has left the
    detector's window (its confirmations and whether the series came back brought up to date), or gone."""
    notice = dict(notice, seen=False, cases=[dict(case) for case in notice["cases"]])
    if notice["state"] in ("closed", "dismissed", "gone"):
        return notice
    if notice["last_good"] not in position or notice["bad"] not in position:
        report.notes.append(f"{history.machine}: notice {notice['id']}: its commits are no longer on the branch: "
                            "marked gone (no longer seen), kept in the file")
        return dict(notice, state="gone")
    keys = [(case["case"], tuple(case["shape"])) for case in notice["cases"]]
    back = [levels[key] / case["level_before"] - 1 < MIN_STEP for key, case in zip(keys, notice["cases"])
            if key in levels and case.get("level_before")]
    inside = [key for key in keys if key in starts and starts[key] <= position[notice["last_good"]]]
    if inside:
        # Still inside the window and not found: undone where every case came back, else no longer seen.
        return dict(notice, state="closed" if back and all(back) else "gone")
    for entry in notice["cases"]:
        _confirm(entry, notice["last_good"], notice["bad"], records, position)
    state = _state(bool(back) and all(back), notice["cases"], notice["environment"])
    confirmed = any(case.get("confirmation", {}).get("verdict") == "DIFFERENT" for case in notice["cases"])
    return dict(notice, state=state, filed=notice["filed"] or confirmed)


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
    """Detection over every machine of a results tree, from the notices of its last publish
    (`<results>/notices.json`); WatchError or confirmations.ConfirmationsError, naming the file, when one cannot be
    read."""
    commits = branch_commits(repo, configured_branch(repo))
    previous = read_notices(results_dir / NOTICES_FILE)
    reports = {}
    machines = resultstree.machines(results_dir)
    for machine in machines:
        history = read_history(results_dir, machine, commits, kernels)
        reports[machine] = detect(history, kernels, results_dir, commit_url,
                                  [n for n in previous if n["machine"] == machine])
        if history.off_branch:
            reports[machine].notes.append(f"{machine}: {counted(len(history.off_branch), 'run')} of commits not on "
                                          "the branch left out, as asv's graphs leave them out")
    for machine in sorted({n["machine"] for n in previous} - set(machines)):
        kept = Report(notices=[dict(n, seen=False) for n in previous if n["machine"] == machine])
        kept.notes.append(f"{machine}: no results in this tree: its {counted(len(kept.notices), 'notice')} kept as "
                          "they were")
        reports[machine] = kept
    return reports


def read_notices(path: Path) -> list[dict]:
    """The notices of the last publish (none where there is no file), an older format brought up to date;
    WatchError naming the file where it is no notices file of a format this version reads."""
    if not path.is_file():
        return []
    try:
        document = json.loads(path.read_text())
    except (OSError, UnicodeDecodeError, ValueError) as exc:
        raise _unreadable(path, f"not valid JSON ({exc})") from exc
    form = document.get("format") if isinstance(document, dict) else None
    notices = document.get("notices") if isinstance(document, dict) else None
    if form not in (NOTICES_FORMAT, *OLDER_FORMATS) or not isinstance(notices, list):
        raise _unreadable(path, f"not a notices file of format {NOTICES_FORMAT} (or "
                                f"{', '.join(map(str, OLDER_FORMATS))}, read and brought up to date): its format is "
                                f"{form!r}; a newer sgemm wrote it, or it is no notices file")
    for number, notice in enumerate(notices, 1):
        fields = ("id", "machine", "cases", "last_good", "bad", "state", "environment")
        if not isinstance(notice, dict) or any(key not in notice for key in fields) or notice["state"] not in STATES \
                or not isinstance(notice["cases"], list):
            raise _unreadable(path, f"notice {number} lacks one of {', '.join(fields)} or has an unknown state")
    if form == NOTICES_FORMAT:
        return notices
    # Format 1 had no memory: every open notice there had an issue, and its id is the one a sighting would get.
    return [dict(notice, filed=notice["state"] in OPEN_STATES, seen=True, publishes=1,
                 cases=[dict(case, level_before=None) for case in notice["cases"]]) for notice in notices]


