"""How the gate sorts the cases of a measuring-code change by their launches (sgemm.gate.launches), from
descriptions written here; the probe that makes real ones runs on the GPU (test_launch_probe.py)."""

import json
import subprocess
from pathlib import Path

import pytest

from sgemm.gate import launches
from sgemm.results.asvsuite import SuiteCase
from sgemm.rounds.pairs import Pair


def launch(**changed) -> dict:
    described = {"api": "cuLaunchKernelEx", "program": {"source_sha256": "ab" * 32}, "grid": [4, 4, 1],
                 "block": [256, 1, 1], "shared_memory": 0, "arguments": [{"bytes": "00"}]}
    return {"launches": [{**described, **changed}]}


PAIRS = [Pair(SuiteCase.square(name, 1024), SuiteCase.square(name, 1024)) for name in ("fp32/a", "fp32/b")]
A, B = (pair.label for pair in PAIRS)


def never(labels):
    raise AssertionError("the gate's code is probed only for launches that changed")


def test_cases_launched_alike_are_untimed_saying_what_launch_they_share():
    sorting = launches.sort_cases(PAIRS, {A: launch(), B: launch()}, {A: launch(), B: launch()},
                                  "sgemm/measuring/launch.py", never)
    assert set(sorting.untimed) == {A, B} and not sorting.paired and not sorting.unpaired
    assert sorting.untimed[A] == (
        "the measuring code changed (sgemm/measuring/launch.py), the kernel's launch did not: base's and head's own "
        "code make the same program (source sha256 abababababab), grid 4x4x1, block 256x1x1, 0 B of dynamic shared "
        "memory and arguments, inputs of the same content")


def test_a_changed_launch_is_paired_only_where_the_gates_code_launches_both_sides_alike():
    base, head = {A: launch(), B: launch()}, {A: launch(grid=[2, 4, 1]), B: launch(block=[128, 1, 1])}
    asked = []

    def reproduce(labels):
        asked.append(labels)
        return {A: launch(), B: launch()}, {A: launch(grid=[2, 4, 1]), B: launch()}

    sorting = launches.sort_cases(PAIRS, base, head, "x.py", reproduce)
    assert asked == [[A, B]] and sorting.paired == [A] and list(sorting.unpaired) == [B]
    assert sorting.unpaired[B] == ("its launch changed (launches[0].block[0]: 256 → 128), and the gate's code "
                                   "launches head's build otherwise (launches[0].block[0]: 128 by head's own code, "
                                   "256 by the gate's)")


def test_an_unreadable_launch_is_unpaired_and_kernels_on_one_side_only_are_not_compared():
    sorting = launches.sort_cases(
        PAIRS, {A: {"unreadable": "a launch through cuLaunchKernel (not cuLaunchKernelEx)"}, B: {"missing": "x"}},
        {A: launch(), B: launch()}, "x.py", never)
    assert sorting.unpaired == {A: "base's launch could not be read: a launch through cuLaunchKernel (not "
                                   "cuLaunchKernelEx)"}
    assert sorting.not_compared == {B: "new at head"}


def test_a_shape_both_sides_refuse_is_not_compared():
    refused = {"refused": "fp32/a needs M a multiple of 128"}
    sorting = launches.sort_cases(PAIRS[:1], {A: refused}, {A: refused}, "x.py", never)
    assert sorting.not_compared == {A: "fp32/a needs M a multiple of 128"} and not sorting.untimed


def test_an_aa_gate_times_cases_launched_alike_paired_where_the_gate_reproduces_them():
    alike = {A: launch()}
    sorting = launches.sort_cases(PAIRS[:1], alike, alike, "x.py", lambda labels: (alike, alike), time_equal=True)
    assert sorting.paired == [A] and not sorting.untimed


def test_difference_names_the_first_field_that_differs():
    assert launches.difference(launch(), launch(shared_memory=1024)) == "launches[0].shared_memory: 0 → 1024"
    assert launches.difference({"refused": "x"}, launch()).startswith("refused")
    long = launches.difference(launch(), launch(arguments=[{"bytes": "ff" * 80}]))
    assert long == 'launches[0].arguments[0].bytes: "00" → …'


def git(repo, *args):
    return subprocess.run(["git", "-C", str(repo), *args], check=True, capture_output=True, text=True).stdout.strip()


def test_a_commits_code_is_exported_whole_and_compared_file_by_file(project_repo, tmp_path):
    tree = launches.export_code(project_repo, "HEAD", tmp_path / "code")
    assert sorted(path.name for path in tree.iterdir()) == ["kernels", "sgemm"]
    assert (tree / "sgemm" / "measuring" / "launch.py").is_file() and (tree / "sgemm" / "catalogue.toml").is_file()
    assert launches.same_code(project_repo / "sgemm", tree)
    (project_repo / "sgemm" / "measuring" / "launch.py").write_text("# changed\n")
    assert not launches.same_code(project_repo / "sgemm", tree)
    with pytest.raises(launches.LaunchCompareError, match="cannot export the code of no-such-com"):
        launches.export_code(project_repo, "no-such-commit", tmp_path / "other")


def test_the_launch_probe_sees_its_card_alone_and_a_sandbox_binds_that_cards_node(tmp_path, monkeypatch):
    from sgemm.rounds import session

    monkeypatch.setattr(launches, "one_card", lambda device: session.OneCard(f"GPU-{device}", 5))
    sandboxed, started = [], []
    monkeypatch.setattr(launches, "contained", lambda command, **options: sandboxed.append(options) or command)

    def run(command, **options):
        started.append(options["env"])
        plan = json.loads(Path(command[-2]).read_text())
        Path(command[-1]).write_text(json.dumps({"cases": {"k 4096": {"device": plan["device"]}}}))
        return subprocess.CompletedProcess(command, 0)

    monkeypatch.setattr(launches.subprocess, "run", run)
    found = launches.run_probe(tmp_path / "code", tmp_path / "tree", [], 2, tmp_path / "probe")
    assert found == {"k 4096": {"device": 0}}  # CUDA's only card in the probe's process
    assert started[0]["CUDA_VISIBLE_DEVICES"] == "GPU-2"
    assert sandboxed[0]["devices"] == [5] and sandboxed[0]["env"] == {"CUDA_VISIBLE_DEVICES": "GPU-2"}
