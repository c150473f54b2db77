"""Whether a change leaves anything for a GPU to time, decided on a CPU (`sgemm gate BASE HEAD --dry-run --cpu-check`).

Every case the change selects is compared as each commit builds it, with NVRTC and no GPU: both sides' catalogue
entries must launch alike (sgemm.rounds.session.launch_signature) and both sides' programs must be byte for byte the
same cubin for every architecture the catalogue tracks (a kernel with a target of its own: that one). Such a case is
"identical machine code": the GPU gate would call it SAME untimed. A comment in a shared header changes the source NVRTC
reads and none of that.

Something is left for a GPU when any selected case is not identical machine code, when the code that measures
changed (each side's launches are then compared on the GPU, sgemm.gate.launches), when every case is to be timed
anyway (--time-unchanged, --unpaired), or when the change touches the code of this check itself, which must then be
proved on the GPU before it decides for others.

The answer is a JSON file (`--plan FILE`) and one line on stdout; the exit status is 0 whenever the check could answer
(whatever it found), 2 when it could not (bad input, NVRTC not installed, a kernel that came or went undeclared). A
workflow reads `gpu_needed` from the file, and treats a missing file or a missing field as true.
"""

from __future__ import annotations

import json
import tempfile
from concurrent.futures import ThreadPoolExecutor
from dataclasses import asdict, dataclass, field
from pathlib import Path

from .. import sourcetree
from ..catalogue import CatalogueError, Kernel, architectures
from ..git import git
from ..rounds.pairs import pairs_for
from ..rounds.session import launch_signature
from .changes import Selection

# The code of this check: a change to any of it is proved on the GPU before the check decides for others.
IDENTITY_CHECK_FILES = ("sgemm/gate/cpu_check.py", "sgemm/rounds/session.py", "sgemm/rounds/pairs.py",
                        "sgemm/measuring/resources.py", "sgemm/measuring/build.py", "sgemm/catalogue.py",
                        "sgemm/sourcetree.py", "sgemm/gate/changes.py", "sgemm/gate/plan.py")


class CpuCheckError(RuntimeError):
    """The check cannot answer here: the message says why (one line)."""


@dataclass(frozen=True)
class CaseCheck:
    label: str
    identical: bool  # one program on every architecture, launched alike
    why: str


@dataclass
class CpuCheck:
    base: str
    head: str
    gpu_needed: bool
    why: str
    architectures: list[str] = field(default_factory=list)
    cases: list[CaseCheck] = field(default_factory=list)
    undeclared: list[str] = field(default_factory=list)

    @property
    def to_time(self) -> list[str]:
        return [case.label for case in self.cases if not case.identical]

    def as_json(self) -> dict:
        return {"base": self.base, "head": self.head, "gpu_needed": self.gpu_needed, "why": self.why,
                "architectures": self.architectures, "to_time": self.to_time,
                "cases": [asdict(case) for case in self.cases], "undeclared": self.undeclared}

    def line(self) -> str:
        identical = sum(case.identical for case in self.cases)
        return (f"gpu needed: {'yes' if self.gpu_needed else 'no'}: {self.why} ({identical} of {len(self.cases)} "
                f"cases identical machine code)")


def nvrtc_problem() -> str | None:
    """Why NVRTC cannot compile here, or None."""
    try:
        from cuda.bindings import nvrtc

        status, _, _ = nvrtc.nvrtcVersion()
    except Exception as exc:  # noqa: BLE001 - a missing package or library, whichever way it fails to load
        return f"NVRTC is not installed here ({type(exc).__name__}: {str(exc).splitlines()[0] if str(exc) else ''})"
    if status != nvrtc.nvrtcResult.NVRTC_SUCCESS:
        return f"NVRTC cannot be used here ({status})"
    return None


def check(repo: Path, base: str, head: str, selection: Selection, cases: list, time_unchanged: bool = False,
          pairing: bool = True) -> CpuCheck:
    """The check of the module's docstring for these cases of the working tree's suite; CpuCheckError when a
    commit's tree or catalogue cannot be read."""
    changed = set(git(repo, "diff", "--name-only", "-z", base, head).split("\0")) - {""}
    if selection.undeclared:
        return CpuCheck(base, head, True, "a kernel came or went undeclared: the gate exits 2",
                        undeclared=list(selection.undeclared))
    if not cases:
        return CpuCheck(base, head, False, "the change selects no case")
    if touched := sorted(changed & set(IDENTITY_CHECK_FILES)):
        return _all_timed(base, head, cases, f"the identity check's own code changed ({', '.join(touched)})")
    if selection.everything:
        return _all_timed(base, head, cases, f"{selection.everything}: each side's launches are compared on the GPU")
    if time_unchanged or not pairing:
        return _all_timed(base, head, cases, "every case is to be timed (--time-unchanged or --unpaired)")
    with tempfile.TemporaryDirectory(prefix="sgemm-cpu-check-") as scratch:
        try:
            trees = {side: sourcetree.export(repo, commit, Path(scratch) / side)
                     for side, commit in (("base", base), ("head", head))}
            kernels = {side: sourcetree.kernels(tree) for side, tree in trees.items()}
            tracked = sorted(set(architectures(trees["base"] / "sgemm" / "catalogue.toml"))
                             | set(architectures(trees["head"] / "sgemm" / "catalogue.toml")))
        except (sourcetree.TreeError, CatalogueError) as exc:
            raise CpuCheckError(str(exc)) from exc
        checked = _compare(pairs_for(cases, selection.renamed), kernels, tuple(tracked))
    to_time = [case for case in checked if not case.identical]
    why = (f"{len(to_time)} case{'s' if len(to_time) != 1 else ''} to time" if to_time
           else "every case is identical machine code")
    return CpuCheck(base, head, bool(to_time), why, tracked, checked)


def _all_timed(base: str, head: str, cases: list, why: str) -> CpuCheck:
    return CpuCheck(base, head, True, why, cases=[CaseCheck(case.label, False, why) for case in cases])


def _compare(pairs: list, kernels: dict[str, dict[str, Kernel]], tracked: tuple[str, ...]) -> list[CaseCheck]:
    """Each pair's check: its two builds compiled for every architecture they are built for, once a kernel."""
    programs: dict[tuple[str, str, str], object] = {}
    builds = {}
    for pair in pairs:
        before, after = kernels["base"].get(pair.base.kernel), kernels["head"].get(pair.head.kernel)
        builds[pair.label] = (before, after)
        if before and after and not before.library and launch_signature(before) == launch_signature(after):
            for side, kernel in (("base", before), ("head", after)):
                for arch in sorted(set(before.architectures(tracked)) | set(after.architectures(tracked))):
                    programs[side, kernel.name, arch] = kernel

    def compiled(key: tuple[str, str, str]):
        from ..measuring.resources import compile_offline

        try:
            return compile_offline(programs[key], key[2]).cubin
        except Exception as exc:  # noqa: BLE001 - a build that fails here is timed, and fails there, saying why
            return exc

    with ThreadPoolExecutor() as pool:
        cubins = dict(zip(programs, pool.map(compiled, programs)))
    found = []
    for pair in pairs:
        before, after = builds[pair.label]
        found.append(CaseCheck(pair.label, *_verdict(before, after, cubins, tracked)))
    return found


def _verdict(before: Kernel | None, after: Kernel | None, cubins: dict, tracked: tuple[str, ...]) -> tuple[bool, str]:
    if before is None or after is None:
        return True, "new at head" if before is None else "gone at head"  # the gate compares it with nothing
    if launch_signature(before) != launch_signature(after):
        return False, "its catalogue entry launches it otherwise"
    if before.library:
        return True, f"both sides call {before.library}, one library in one process"
    arches = sorted(set(before.architectures(tracked)) | set(after.architectures(tracked)))
    for arch in arches:
        base_cubin, head_cubin = cubins[("base", before.name, arch)], cubins[("head", after.name, arch)]
        for side, cubin in (("base", base_cubin), ("head", head_cubin)):
            if isinstance(cubin, Exception):
                first = str(cubin).strip().splitlines()[0] if str(cubin).strip() else type(cubin).__name__
                return False, f"{side} does not compile for {arch}: {first}"
        if base_cubin != head_cubin:
            return False, f"its machine code differs for {arch}"
    return True, f"identical machine code for {', '.join(arches)}"


def write(found: CpuCheck, path: Path) -> None:
    path.write_text(json.dumps(found.as_json(), indent=1) + "\n")
