"""Where the code that measures changed between base and head: which cases still launch as they did.

A change to measuring code cannot move a kernel's time unless it changes what the kernel is given: its program,
its launch or its inputs. So each side's own code describes each case's launch (sgemm.gate.launch_probe, run on
the GPU with that commit's package first on the path, nothing timed), and the descriptions decide how a case is
measured:
- SAME, untimed: base's code and head's code launch the case alike (the same program text, grid, block, cluster,
  shared memory, function attributes, arguments, and inputs of the same content); the report says the measuring
  code changed and the kernels did not.
- Paired: the launch changed, and the gate's own code (whose round processes time both sides, sgemm.measuring.ab)
  launches each side exactly as that side's code does; a changed program is then the paired gate's to time.
- Unpaired: anything else (the gate's code would not reproduce a side's launch, or a side's launch could not be
  read): each commit measured by its own code, as before.
"""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass, field
from pathlib import Path

from .. import sourcetree
from ..contained import contained
from ..rounds.pairs import Pair
from ..measuring.cards import VISIBLE_VARIABLE
from ..rounds.session import RoundFileError, one_card, read_round_file

PROBE = Path(__file__).with_name("launch_probe.py")
PROBE_COMMAND = (sys.executable, "-P", str(PROBE))  # + PLAN OUT; -P: the probe's folder is not a package root
PACKAGE = Path(__file__).resolve().parents[1]  # the running sgemm: the code the gate's rounds measure with
CODE_PATHS = ("sgemm", "kernels")  # a commit's package, catalogue and kernels: all a probe imports and builds


class LaunchCompareError(RuntimeError):
    """The launches could not be compared at all (a commit that cannot be exported, a probe that could not start);
    the message says why."""


@dataclass
class LaunchSorting:
    """Each case by how it is measured, with why."""

    untimed: dict[str, str] = field(default_factory=dict)  # label -> why it is SAME without timing
    paired: list[str] = field(default_factory=list)
    unpaired: dict[str, str] = field(default_factory=dict)  # label -> why the launch keeps it apart
    not_compared: dict[str, str] = field(default_factory=dict)  # label -> why neither side can measure it


def export_code(repo: Path, commit: str, dest: Path) -> Path:
    """The commit's package, catalogue and kernels under `dest` (made new): the code its own probe imports."""
    try:
        return sourcetree.export(repo, commit, dest, CODE_PATHS, what="code")
    except sourcetree.TreeError as exc:
        raise LaunchCompareError(str(exc)) from exc


def same_code(package: Path, tree: Path) -> bool:
    """Whether the tree's sgemm package holds exactly the Python files of `package`."""
    def files(root: Path) -> dict[str, bytes]:
        return {str(path.relative_to(root)): path.read_bytes() for path in sorted(root.rglob("*.py"))
                if "__pycache__" not in path.parts}

    return files(package) == files(tree / "sgemm")


def run_probe(code: Path, tree: Path, cases: list[dict], device: int, where: Path) -> dict[str, dict]:
    """Each case's launch as the package under `code` makes it from the kernels of `tree`, by label. The probe's
    failure to run at all is LaunchCompareError."""
    where.mkdir(parents=True, exist_ok=True)
    plan, out, log = where / "plan.json", where / "launches.json", where / "probe.log"
    narrowed = one_card(device)  # the probe sees its card alone, as a round's process does
    plan.write_text(json.dumps({"code": str(code), "tree": str(tree), "device": 0 if narrowed else device,
                                "cases": cases}))
    out.unlink(missing_ok=True)
    out.write_bytes(b"")  # the one file the probe may write, made by the judge
    command = contained([*PROBE_COMMAND, str(plan), str(out)], readable=[code, tree, where], writable=[out],
                        devices=[narrowed.node if narrowed else device], cwd=where,
                        env={VISIBLE_VARIABLE: narrowed.uuid} if narrowed else None)
    environment = {**os.environ, VISIBLE_VARIABLE: narrowed.uuid} if narrowed else None
    with open(log, "w") as stderr:
        status = subprocess.run(command, stdout=stderr, stderr=subprocess.STDOUT, cwd=where,
                                env=environment).returncode
    try:
        found = json.loads(read_round_file(out))
    except (OSError, ValueError, RoundFileError):
        last = (log.read_text(errors="replace").strip().splitlines() or ["no output"])[-1]
        raise LaunchCompareError(f"the launch probe of {code} exited {status}: {last[:300]}") from None
    if "cases" not in found:
        raise LaunchCompareError(f"the launch probe of {code}: {found.get('failed', 'no cases described')}")
    return found["cases"]


def first_difference(before: object, after: object, at: str = "") -> tuple[str, object, object]:
    """Where two descriptions first differ: the path of the field, and its two values."""
    if isinstance(before, dict) and isinstance(after, dict):
        for key in list(before) + [key for key in after if key not in before]:
            if before.get(key) != after.get(key):
                return first_difference(before.get(key), after.get(key), f"{at}.{key}" if at else str(key))
    elif isinstance(before, list) and isinstance(after, list) and len(before) == len(after):
        for index, (one, other) in enumerate(zip(before, after)):
            if one != other:
                return first_difference(one, other, f"{at}[{index}]")
    return at or "the launch", before, after


def _shown(value: object) -> str:
    text = json.dumps(value)
    return text if len(text) <= 60 else "…"


def difference(before: object, after: object) -> str:
    """The first place two descriptions differ, named by its path, with both values when they are short."""
    where, one, other = first_difference(before, after)
    return f"{where}: {_shown(one)} → {_shown(other)}"


def _unreadable(description: dict) -> str | None:
    return description.get("unreadable") or description.get("refused") or description.get("missing")


def _summary(description: dict) -> str:
    """What an unchanged launch is, in a few words, for the report."""
    first = description["launches"][0]
    if first["api"] != "cuLaunchKernelEx":
        return f"the same {first['api']} call on inputs of the same content"
    return (f"the same program (source sha256 {first['program']['source_sha256'][:12]}), grid "
            f"{'x'.join(map(str, first['grid']))}, block {'x'.join(map(str, first['block']))}, "
            f"{first['shared_memory']} B of dynamic shared memory and arguments, inputs of the same content")


def sort_cases(pairs: list[Pair], base: dict[str, dict], head: dict[str, dict], changed: str, reproduce,
               time_equal: bool = False) -> LaunchSorting:
    """The cases by how they are measured, from each side's own descriptions (`base`, `head`, by label).
    `reproduce(labels)` gives the gate's own code's descriptions of those cases on each side's kernels, as
    (on base's, on head's), for the cases whose launch changed; `changed` says what of the measuring code did.
    `time_equal`: cases launched alike are timed too (an A/A gate), paired where the gate's code reproduces them."""
    sorting = LaunchSorting()
    candidates = []
    for pair in pairs:
        label = pair.label
        before, after = base.get(label, {"unreadable": "not described"}), head.get(label, {"unreadable":
                                                                                            "not described"})
        if "missing" in before or "missing" in after:
            sorting.not_compared[label] = "new at head" if "missing" in before else "gone at head"
        elif "refused" in before and "refused" in after:
            sorting.not_compared[label] = after["refused"]
        elif "launches" in before and before == after and not time_equal:
            sorting.untimed[label] = (f"the measuring code changed ({changed}), the kernel's launch did not: base's "
                                      f"and head's own code make {_summary(after)}")
        elif "unreadable" in before or "unreadable" in after:
            side, reason = ("base", before["unreadable"]) if "unreadable" in before else ("head", after["unreadable"])
            sorting.unpaired[label] = f"{side}'s launch could not be read: {reason}"
        else:
            candidates.append((label, before, after))
    if not candidates:
        return sorting
    on_base, on_head = reproduce([label for label, _, _ in candidates])
    for label, before, after in candidates:
        ours = (on_base.get(label, {}), on_head.get(label, {}))
        if ours == (before, after):
            sorting.paired.append(label)
            continue
        side, theirs, own = ("base", before, ours[0]) if ours[0] != before else ("head", after, ours[1])
        if why := _unreadable(own):
            otherwise = f"the gate's code could not launch it: {why}"
        else:
            where, one, other = first_difference(theirs, own)
            otherwise = f"{where}: {_shown(one)} by {side}'s own code, {_shown(other)} by the gate's"
        sorting.unpaired[label] = (f"its launch changed ({difference(before, after)}), and the gate's code launches "
                                   f"{side}'s build otherwise ({otherwise})")
    return sorting


def probe_sides(repo: Path, base: str, head: str, pairs: list[Pair], device: int, work_dir: Path,
                changed: str, time_equal: bool = False) -> LaunchSorting:
    """Export both commits' code, describe every case as each side's code launches it (the two probes at once), and
    sort the cases (sort_cases); the gate's own code is probed only for the cases whose launch changed."""
    shutil.rmtree(work_dir, ignore_errors=True)  # an earlier gate's exports and descriptions: made again
    trees = {side: export_code(repo, commit, work_dir / "code" / side) for side, commit in (("base", base),
                                                                                          ("head", head))}
    wanted = {"base": [{"label": p.label, "kernel": p.base.kernel, "shape": list(p.base.shape)} for p in pairs],
              "head": [{"label": p.label, "kernel": p.head.kernel, "shape": list(p.head.shape)} for p in pairs]}
    with ThreadPoolExecutor(max_workers=2) as pool:
        found = dict(zip(trees, pool.map(lambda side: run_probe(trees[side], trees[side], wanted[side], device,
                                                                work_dir / "probes" / side), trees)))

    def reproduce(labels: list[str]) -> tuple[dict, dict]:
        described = {}
        for side, tree in trees.items():
            if same_code(PACKAGE, tree):
                described[side] = found[side]  # the gate runs this very code
            else:
                cases = [case for case in wanted[side] if case["label"] in labels]
                described[side] = run_probe(PACKAGE.parent, tree, cases, device, work_dir / "probes" / f"gate-{side}")
        return described["base"], described["head"]

    return sort_cases(pairs, found["base"], found["head"], changed, reproduce, time_equal)
