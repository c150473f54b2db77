"""Several builds of one problem: each build from its own tree, a failing build named, and on a GPU the whole path,
builds checked against FP64 and timed paired."""

import json
import math
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

from sgemm import sourcetree
from sgemm.catalogue import KERNEL_DIR, get_kernel
from sgemm.measuring import ab
from sgemm.measuring.build import BuildError
from sgemm.measuring.problem import UnsupportedShape
from sgemm.measuring.verify import VerificationError

ROOT = Path(__file__).resolve().parents[2]


def tree_copy(dest: Path, edit=None) -> Path:
    """A source tree (kernels/ and the catalogue) as sgemm.sourcetree lays one out, optionally edited."""
    (dest / "sgemm").mkdir(parents=True)
    shutil.copytree(KERNEL_DIR, dest / "kernels")
    shutil.copy(ROOT / "sgemm" / "catalogue.toml", dest / "sgemm" / "catalogue.toml")
    if edit:
        path, old, new = edit
        text = (dest / path).read_text()
        assert text.count(old) == 1
        (dest / path).write_text(text.replace(old, new))
    return dest


@pytest.mark.parametrize("error, kind", [
    (BuildError("fp32/x: NVRTC could not compile x.cu:\nline 3: error\n"), "compile error"),
    (VerificationError("fp32/x is wrong at 64x64x64: relative error 0.04"), "wrong result"),
    (UnsupportedShape("fp32/x needs M to be a multiple of 128"), "shape refused"),
    (KeyError("x"), "failed"),
])
def test_a_failing_build_is_named_with_what_went_wrong(error, kind):
    failure = ab._failure("head", error)
    assert (failure.label, failure.kind) == ("head", kind)
    assert str(failure).startswith(f"head: {kind}: ")


def test_each_build_is_read_from_its_own_tree(tmp_path):
    base = tree_copy(tmp_path / "base")
    head = tree_copy(tmp_path / "head", ("kernels/fp32_naive.cu", "#include", "// head\n#include"))
    kernels = {side: sourcetree.kernels(tree)["fp32/naive"] for side, tree in (("base", base), ("head", head))}
    assert kernels["base"].kernel_dir == base / "kernels" and kernels["head"].kernel_dir == head / "kernels"
    assert kernels["base"] != kernels["head"]  # one kernel, two builds


def test_a_build_checked_earlier_in_the_process_is_not_checked_again_and_the_others_still_are(monkeypatch):
    from types import SimpleNamespace

    import cupy

    checked = []
    monkeypatch.setattr(ab, "_problems", lambda builds, m, n, k: [SimpleNamespace(label=build.label, launch=None)
                                                                  for build in builds])
    monkeypatch.setattr(ab, "verify", lambda problem: checked.append(problem.label) or 1e-7)
    monkeypatch.setattr(ab, "measure_launch_seconds", lambda launch, launches: 1e-3)
    monkeypatch.setattr(ab, "StreamBlocks", lambda stream: None)
    monkeypatch.setattr(ab, "library_version", lambda kernel: "")
    monkeypatch.setattr(ab, "time_paired", lambda *args: "timed")
    monkeypatch.setattr(cupy.cuda, "Stream", lambda non_blocking: None)
    naive = get_kernel("fp32/naive")
    result = ab.measure([ab.Build("reference", naive), ab.Build("commit", naive)], 64, 64, 64,
                        checked=frozenset({"commit"}))
    assert checked == ["reference"]
    assert result.relative_errors[0] == 1e-7 and math.isnan(result.relative_errors[1])
    # a wrong reference still fails, named
    monkeypatch.setattr(ab, "verify", lambda problem: (_ for _ in ()).throw(VerificationError("off by 2")))
    with pytest.raises(ab.BuildFailed, match="reference: wrong result: off by 2"):
        ab.measure([ab.Build("reference", naive), ab.Build("commit", naive)], 64, 64, 64,
                   checked=frozenset({"commit"}))


def test_building_ahead_also_reads_the_launch_geometry_and_leaves_failures_to_the_case(monkeypatch):
    from sgemm.measuring.resources import GeometryError

    kernel = get_kernel("fp32/warptile")
    done = []
    monkeypatch.setattr(ab, "compiled", lambda k: done.append(("program", k.name)))
    monkeypatch.setattr(ab, "launch_geometry", lambda k: done.append(("geometry", k.name)))
    ab.build_ahead(kernel)
    assert done == [("program", "fp32/warptile"), ("geometry", "fp32/warptile")]

    for failure in (BuildError("no compile"), GeometryError("no geometry")):
        def fail(k, failure=failure):
            raise failure

        monkeypatch.setattr(ab, "launch_geometry", fail)
        ab.build_ahead(kernel)  # the case that asks for it reports it, with its log


def test_a_tree_exported_from_git_holds_the_kernels_and_the_catalogue_alone(tmp_path):
    head = subprocess.run(["git", "-C", str(ROOT), "rev-parse", "HEAD"], capture_output=True, text=True,
                          check=True).stdout.strip()
    tree = sourcetree.export(ROOT, head, tmp_path / "tree")
    assert sorted(p.name for p in tree.iterdir()) == ["kernels", "sgemm"]
    assert [p.name for p in (tree / "sgemm").iterdir()] == ["catalogue.toml"]
    assert "fp32/naive" in sourcetree.kernels(tree)
    with pytest.raises(sourcetree.TreeError, match="cannot export the kernels of no-such-com"):
        sourcetree.export(ROOT, "no-such-commit", tmp_path / "other")


@pytest.mark.gpu
def test_two_builds_of_one_kernel_are_checked_and_timed_paired(tmp_path):
    base, same = tree_copy(tmp_path / "base"), tree_copy(tmp_path / "same")
    builds = [ab.Build("base", sourcetree.kernels(base)["fp32/float4"]),
              ab.Build("head", sourcetree.kernels(same)["fp32/float4"])]
    result = ab.measure(builds, 1024, 1024, 1024, ab.PairedSettings(max_s=0.5))
    assert result.relative_errors[0] < 1e-5 and result.relative_errors[1] < 1e-5
    assert result.ratio() == pytest.approx(1.0, abs=0.01)
    low, high = result.interval()
    assert math.isfinite(low) and low <= result.ratio() <= high
    assert result.timing.pairs >= ab.PairedSettings().min_pairs
    assert all(timing.median_s > 0 for timing in result.timing.builds)


@pytest.mark.gpu
def test_a_build_that_computes_a_wrong_product_fails_naming_its_side(tmp_path):
    base = tree_copy(tmp_path / "base")
    wrong = tree_copy(tmp_path / "wrong", ("kernels/common.cuh", "*c = (beta == 0.0f) ? alpha * acc",
                                           "*c = (beta == 0.0f) ? 2.0f * alpha * acc"))
    builds = [ab.Build("base", sourcetree.kernels(base)["fp32/naive"]),
              ab.Build("head", sourcetree.kernels(wrong)["fp32/naive"])]
    with pytest.raises(ab.BuildFailed) as failed:
        ab.measure(builds, 256, 256, 256)
    assert (failed.value.label, failed.value.kind) == ("head", "wrong result")


@pytest.mark.gpu
def test_a_round_of_the_gate_writes_a_line_a_case(tmp_path):
    base, head = tree_copy(tmp_path / "base"), tree_copy(tmp_path / "head")
    plan = {"trees": {"base": str(base), "head": str(head)}, "device": 0, "settings": {"max_s": 0.3},
            "cases": [{"label": "fp32/naive 512x512x512", "kernels": {"base": "fp32/naive", "head": "fp32/naive"},
                       "shape": [512, 512, 512]},
                      {"label": "fp32/gone 512x512x512", "kernels": {"base": "fp32/naive", "head": "fp32/gone"},
                       "shape": [512, 512, 512]}]}
    (tmp_path / "plan.json").write_text(json.dumps(plan))
    done = subprocess.run([sys.executable, "-m", "sgemm.measuring.ab", str(tmp_path / "plan.json"),
                           str(tmp_path / "out.jsonl")], capture_output=True, text=True)
    assert done.returncode == 0, done.stderr
    lines = [json.loads(line) for line in (tmp_path / "out.jsonl").read_text().splitlines()]
    assert lines[0]["label"] == "fp32/naive 512x512x512" and "ratio" in lines[0], lines[0]
    assert lines[0]["ratio"] == pytest.approx(1.0, abs=0.02)
    assert lines[1]["failed"] == {"side": "head", "kind": "missing", "reason": "head has no kernel fp32/gone"}


def test_get_kernel_default_tree_is_the_package_s():
    assert get_kernel("fp32/naive").kernel_dir == KERNEL_DIR


def test_a_round_gives_each_case_the_time_its_plan_names(tmp_path, monkeypatch):
    """The gate sets a case's time limit by how far it is from a decision (sgemm.gate.run.round_time); the round's
    process honours it case by case, and the settings' own max_s elsewhere."""
    from types import SimpleNamespace

    import cupy

    from sgemm.measuring import telemetry

    given = {}
    monkeypatch.setattr(cupy.cuda, "Device", lambda device: SimpleNamespace(use=lambda: None))
    monkeypatch.setattr(telemetry.CardReadings, "of", classmethod(lambda cls, device: None))
    monkeypatch.setattr(ab, "compile_ahead", lambda kernels, device: None)
    monkeypatch.setattr(ab, "_case_line", lambda case, trees, settings, readings: given.setdefault(
        case["label"], settings.max_s) and {"label": case["label"], "failed": {"kind": "x", "reason": "y"}})
    tree = tree_copy(tmp_path / "tree")
    case = {"kernels": {"base": "fp32/naive", "head": "fp32/naive"}, "shape": [64, 64, 64]}
    plan = {"trees": {"base": str(tree), "head": str(tree)}, "device": 0, "settings": {"max_s": 4.0},
            "cases": [{"label": "far", **case}, {"label": "near", **case}], "max_s": {"far": 11.5}}
    ab.run_round(plan, tmp_path / "out.jsonl")
    assert given == {"far": 11.5, "near": 4.0}

