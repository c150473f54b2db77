"""Merging results trees: machines kept apart, idempotent, nothing lost, bad or conflicting input refused whole."""

import json
import shutil
from pathlib import Path

import pytest
from conftest import LAUNCH_METHOD

from sgemm.results import resultstree
from sgemm.site.merge import MergeError, merge_results

SUITE = """
class Gemm:
    params = [["naive"], [1024]]
    param_names = ["kernel", "size"]

    def track_tflops(self, kernel, size):
        return 5.0
"""


@pytest.fixture(scope="module")
def two_boxes(tmp_path_factory):
    """Real asv results of one commit from two machines, each in a results tree of its own."""
    import subprocess
    import sys

    roots = {}
    for machine, gpu in (("nvidia-h100-80gb-hbm3", "NVIDIA H100 80GB HBM3"), ("nvidia-h200", "NVIDIA H200")):
        repo = tmp_path_factory.mktemp(machine)
        (repo / "benchmarks").mkdir()
        (repo / "benchmarks" / "__init__.py").write_text("")
        (repo / "benchmarks" / "bench_gemm.py").write_text(SUITE)
        (repo / "asv.conf.json").write_text(json.dumps({
            "version": 1, "project": "t", "repo": ".", "branches": ["main"], "environment_type": "existing",
            "benchmark_dir": "benchmarks", "results_dir": "results", "html_dir": "html",
            "launch_method": LAUNCH_METHOD}))
        (repo / ".asv-machine.json").write_text(json.dumps({"version": 1, machine: {
            "machine": machine, "gpu": gpu, "os": "Linux", "arch": "x86_64", "cpu": "x", "num_cpu": "1", "ram": "1"}}))
        env = {"HOME": str(repo), "PATH": "/usr/bin:/bin", "GIT_AUTHOR_NAME": "t", "GIT_AUTHOR_EMAIL": "t@t",
               "GIT_COMMITTER_NAME": "t", "GIT_COMMITTER_EMAIL": "t@t"}
        for command in (["git", "init", "-q", "-b", "main"], ["git", "add", "-A"], ["git", "commit", "-qm", "c"]):
            subprocess.run(command, cwd=repo, env=env, check=True)
        commit = subprocess.run(["git", "rev-parse", "HEAD"], cwd=repo, env=env, check=True, capture_output=True,
                                text=True).stdout.strip()
        done = subprocess.run([sys.executable, "-m", "asv", "run", "--python=same", "--machine", machine,
                               "--set-commit-hash", commit], cwd=repo, env=env, capture_output=True, text=True)
        assert done.returncode == 0, done.stdout + done.stderr
        roots[machine] = repo / "results"
    return roots


def tree(root):
    return {str(p.relative_to(root)): p.read_bytes() for p in sorted(root.rglob("*")) if p.is_file()}


def test_two_machines_merge_apart_and_merging_again_changes_nothing(two_boxes, tmp_path):
    dest = tmp_path / "merged"
    plan = merge_results(list(two_boxes.values()), dest)
    assert plan.machines == ["nvidia-h100-80gb-hbm3", "nvidia-h200"]
    files = tree(dest)
    for machine, root in two_boxes.items():
        for name, content in tree(root).items():
            if name != "benchmarks.json":
                assert files[name] == content, name  # every run file arrives byte for byte
    again = merge_results(list(two_boxes.values()), dest)
    assert again.copies == [] and tree(dest) == files


def test_merging_into_a_tree_keeps_what_was_there(two_boxes, tmp_path):
    dest = tmp_path / "merged"
    shutil.copytree(two_boxes["nvidia-h100-80gb-hbm3"], dest)
    before = tree(dest)
    merge_results([two_boxes["nvidia-h200"]], dest)
    after = tree(dest)
    assert all(after[name] == content for name, content in before.items() if name != "benchmarks.json")
    assert any(name.startswith("nvidia-h200/") for name in after)


def with_figure(run: Path, value) -> None:
    """The run file with its first figure replaced by `value`, as a damaged file holds it."""
    content = json.loads(run.read_text())
    figures = content["results"]["bench_gemm.Gemm.track_tflops"][0]
    figures[next(i for i, figure in enumerate(figures) if figure is not None)] = value
    run.write_text(json.dumps(content))


@pytest.mark.parametrize("damage, message", [
    (lambda run: run.write_text("{not json"), "Error parsing JSON"),
    (lambda run: with_figure(run, "fast"), "holds 'fast', which is no figure: the run file is damaged"),
    (lambda run: with_figure(run, float("inf")), "holds inf, which is no figure: the run file is damaged"),
    (lambda run: run.with_name("machine.json").write_text("[1, 2]"), "machine.json: not a JSON object"),
    (lambda run: run.write_text(json.dumps({"version": 2, "results": {}})), "not an asv results file"),
    (lambda run: run.with_name("notes.txt").write_text("hello"), "not part of an asv results tree"),
])
def test_a_bad_file_stops_the_merge_before_anything_is_written(two_boxes, tmp_path, damage, message):
    source = tmp_path / "source"
    shutil.copytree(two_boxes["nvidia-h200"], source)
    [run] = [p for p in (source / "nvidia-h200").glob("*.json") if p.name != "machine.json"]
    damage(run)
    with pytest.raises(MergeError, match=message):
        merge_results([two_boxes["nvidia-h100-80gb-hbm3"], source], tmp_path / "merged")
    assert not (tmp_path / "merged").exists()


def another_run(two_boxes, tmp_path) -> tuple[Path, Path]:
    """A copy of the H200's tree whose run of the commit differs (it is dated a second later): the tree, the run."""
    rerun = tmp_path / "rerun"
    shutil.copytree(two_boxes["nvidia-h200"], rerun)
    [run] = [p for p in (rerun / "nvidia-h200").glob("*.json") if p.name != "machine.json"]
    data = json.loads(run.read_text())
    data["date"] += 1000
    run.write_text(json.dumps(data))
    return rerun, run


def test_a_different_run_of_the_same_commit_is_refused_not_overwritten(two_boxes, tmp_path):
    dest = tmp_path / "merged"
    merge_results([two_boxes["nvidia-h200"]], dest)
    rerun, run = another_run(two_boxes, tmp_path)
    before = tree(dest)
    with pytest.raises(MergeError, match="already holds a different run"):
        merge_results([rerun], dest)
    assert tree(dest) == before


def test_a_machine_directory_of_another_gpu_is_refused(two_boxes, tmp_path):
    dest = tmp_path / "merged"
    merge_results([two_boxes["nvidia-h200"]], dest)
    impostor = tmp_path / "impostor"
    shutil.copytree(two_boxes["nvidia-h200"], impostor)
    machine_file = impostor / "nvidia-h200" / "machine.json"
    machine_file.write_text(json.dumps({**json.loads(machine_file.read_text()), "gpu": "NVIDIA A100"}))
    with pytest.raises(MergeError, match="different GPU"):
        merge_results([impostor], dest)


# --- benchmarks.json, by each benchmark's version -------------------------------------------------------------------

TRACK = "bench_gemm.Gemm.track_tflops"
DAY_MS = 86_400_000


def restamp(tree_root, version, shift_ms):
    """The tree as if its suite's track_tflops had been at `version`, its runs `shift_ms` later than they were."""
    benchmarks_file = tree_root / "benchmarks.json"
    benchmarks = json.loads(benchmarks_file.read_text())
    benchmarks[TRACK]["version"] = version
    benchmarks_file.write_text(json.dumps(benchmarks))
    for run in tree_root.glob("*/*.json"):
        if run.name == "machine.json":
            continue
        data = json.loads(run.read_text())
        columns = data["result_columns"]
        row = data["results"][TRACK]
        row[columns.index("version")] = version
        row[columns.index("started_at")] += shift_ms
        run.write_text(json.dumps(data))


def shown(dest):
    """{run file: whether asv publish shows its track_tflops}, as asv decides it (Results.get_result_keys)."""
    from asv.results import Results

    benchmarks = json.loads((dest / "benchmarks.json").read_text())
    return {run.relative_to(dest).as_posix(): TRACK in Results.load(str(run)).get_result_keys(benchmarks)
            for run in sorted(dest.glob("*/*.json")) if run.name != "machine.json"}


def two_versions(two_boxes, tmp_path):
    """Two boxes' trees whose suites differ: the newer run's benchmarks at version v-new, the older's at v-old."""
    newer, older = tmp_path / "newer", tmp_path / "older"
    shutil.copytree(two_boxes["nvidia-h100-80gb-hbm3"], newer)
    shutil.copytree(two_boxes["nvidia-h200"], older)
    restamp(newer, "v-new", 0)
    restamp(older, "v-old", -DAY_MS)
    return newer, older


@pytest.mark.parametrize("order", ["older last", "older first"])
def test_the_newest_runs_definition_of_a_benchmark_wins_whatever_the_order(two_boxes, tmp_path, order):
    newer, older = two_versions(two_boxes, tmp_path)
    dest = tmp_path / "merged"
    sources = [newer, older] if order == "older last" else [older, newer]
    plan = merge_results(sources, dest)
    assert json.loads((dest / "benchmarks.json").read_text())[TRACK]["version"] == "v-new"
    [old_run] = [name for name in shown(dest) if name.startswith("nvidia-h200/")]
    assert shown(dest) == {name: name != old_run for name in shown(dest)}  # the newer box's results are shown
    assert plan.superseded == [(dest / old_run, TRACK)]  # and the older one's named, still on disk
    assert (dest / old_run).read_bytes() == next((older / "nvidia-h200").glob("*-*.json")).read_bytes()


def test_a_newer_run_merged_into_a_tree_brings_its_definition(two_boxes, tmp_path):
    dest, newer = tmp_path / "merged", tmp_path / "newer"
    shutil.copytree(two_boxes["nvidia-h200"], dest)
    restamp(dest, "v-old", -DAY_MS)
    shutil.copytree(two_boxes["nvidia-h100-80gb-hbm3"], newer)
    restamp(newer, "v-new", 0)
    merge_results([newer], dest)
    assert json.loads((dest / "benchmarks.json").read_text())[TRACK]["version"] == "v-new"
    # and an older tree merged after it does not take it back
    again = tmp_path / "older-again"
    shutil.copytree(two_boxes["nvidia-h200"], again)
    restamp(again, "v-old", -DAY_MS)
    merge_results([again], dest)
    assert json.loads((dest / "benchmarks.json").read_text())[TRACK]["version"] == "v-new"


def test_two_sources_with_different_runs_of_one_commit_are_named_both(two_boxes, tmp_path):
    rerun, run = another_run(two_boxes, tmp_path)
    dest = tmp_path / "merged"
    with pytest.raises(MergeError) as refused:
        merge_results([two_boxes["nvidia-h200"], rerun], dest)
    message = str(refused.value)
    assert f"{run} and {two_boxes['nvidia-h200'] / 'nvidia-h200' / run.name} are different runs" in message
    assert str(dest) not in message  # no folder that does not exist
    assert not dest.exists()


@pytest.mark.parametrize("into, message", [
    (lambda src, tmp: src, "is also a source"),
    (lambda src, tmp: src / "inner", "lies inside the source"),
    (lambda src, tmp: src.parent, "lies inside --into"),
    (lambda src, tmp: tmp / "a-file", "not a directory"),
    (lambda src, tmp: tmp / "no" / "such" / "place", "does not exist"),
])
def test_an_into_that_overlaps_a_source_or_cannot_be_a_tree_is_refused(two_boxes, tmp_path, into, message):
    source = tmp_path / "trees" / "source"
    shutil.copytree(two_boxes["nvidia-h200"], source)
    (tmp_path / "a-file").write_text("keep me")
    before = tree(tmp_path)
    with pytest.raises(MergeError, match=message):
        merge_results([source], into(source, tmp_path))
    after = tree(tmp_path)
    assert after == before


def test_a_merge_waits_for_the_lock_of_its_destination(two_boxes, tmp_path):
    import threading

    from sgemm.site.merge import locked

    dest = tmp_path / "merged"
    done = threading.Event()

    def merge():
        merge_results([two_boxes["nvidia-h200"]], dest)
        done.set()

    with locked(exclusive=[dest]):
        worker = threading.Thread(target=merge)
        worker.start()
        assert not done.wait(1.0), "the merge ran while another held the destination's lock"
        assert not dest.exists()
    worker.join(30)
    assert done.is_set() and (dest / "benchmarks.json").is_file()


def test_temporary_files_have_names_of_their_own(two_boxes, tmp_path):
    dest = tmp_path / "merged"
    # Another writer's temporary file under the name the merge once used for its own.
    (dest / "nvidia-h200").mkdir(parents=True)
    theirs = dest / "nvidia-h200" / "machine.json.tmp"
    theirs.write_text("another writer's")
    merge_results([two_boxes["nvidia-h200"]], dest)
    assert theirs.read_text() == "another writer's"
    assert [p.name for p in dest.rglob("*.tmp")] == ["machine.json.tmp"]  # none of the merge's own left behind


def test_sgemm_merge_warns_of_results_an_older_version_leaves_unshown(two_boxes, tmp_path, capsys):
    from sgemm import cli

    newer, older = two_versions(two_boxes, tmp_path)
    assert cli.main(["merge", str(newer), str(older), "--into", str(tmp_path / "merged")]) == 0
    out, err = capsys.readouterr()
    assert out.startswith(f"merged into {tmp_path / 'merged'}: ")
    assert err.startswith(f"sgemm merge: warning: an older version of 1 benchmark was measured in 1 run file "
                          f"(e.g. {TRACK} in {tmp_path / 'merged' / 'nvidia-h200'}")
    assert err.count("\n") == 1


def test_sgemm_merge_warns_of_a_source_that_holds_no_results(two_boxes, tmp_path, capsys):
    from sgemm import cli

    empty = tmp_path / "empty"
    empty.mkdir()
    assert cli.main(["merge", str(two_boxes["nvidia-h200"]), str(empty), "--into", str(tmp_path / "merged")]) == 0
    err = capsys.readouterr().err
    assert err == (f"sgemm merge: warning: {empty} holds no asv results (no <machine>/<file>.json): nothing came "
                   "from it\n")


def confirmation(bad: str, verdict: str = "DIFFERENT") -> dict:
    return {"case": "fp16/wgmma_x", "size": 8192, "good": "a" * 40, "bad": bad * 40, "verdict": verdict,
            "ratio": 1.01, "interval": [1.008, 1.012], "confidence": 0.95, "method": "paired in one process, L2 warm",
            "measured_at": "2026-11-25T00:00:00+00:00"}


def test_confirmations_are_joined_record_by_record_and_bisect_files_the_newest_kept(two_boxes, tmp_path):
    machine = "nvidia-h100-80gb-hbm3"
    dest, box = tmp_path / "merged", tmp_path / "box"
    merge_results([two_boxes[machine]], dest)
    (dest / machine / "confirmations.json").write_text(json.dumps({"confirmations": [confirmation("b")]}))
    (dest / machine / "bisect").mkdir()
    (dest / machine / "bisect" / "n1.json").write_text(json.dumps({"id": "n1", "finished_at": "2026-11-24T00:00"}))
    (dest / machine / "bisect" / "n2.json").write_text(json.dumps({"id": "n2", "finished_at": "2026-11-26T00:00"}))
    shutil.copytree(two_boxes[machine], box)
    # The box started from the published records and added one; it ran both bisects again, n1 later, n2 earlier.
    (box / machine / "confirmations.json").write_text(json.dumps({"confirmations": [confirmation("b"),
                                                                                    confirmation("c", "SAME")]}))
    (box / machine / "bisect").mkdir()
    (box / machine / "bisect" / "n1.json").write_text(json.dumps({"id": "n1", "finished_at": "2026-11-25T00:00"}))
    (box / machine / "bisect" / "n2.json").write_text(json.dumps({"id": "n2", "finished_at": "2026-11-25T00:00"}))
    plan = merge_results([box], dest)
    assert plan.machines == [machine]
    records = json.loads((dest / machine / "confirmations.json").read_text())["confirmations"]
    assert records == [confirmation("b"), confirmation("c", "SAME")]
    assert json.loads((dest / machine / "bisect" / "n1.json").read_text())["finished_at"] == "2026-11-25T00:00"
    assert json.loads((dest / machine / "bisect" / "n2.json").read_text())["finished_at"] == "2026-11-26T00:00"
    before = tree(dest)
    merge_results([box], dest)
    assert tree(dest) == before, "merging again changes nothing"


def test_a_bisect_result_and_its_state_are_merged_as_two_files(two_boxes, tmp_path):
    machine = "nvidia-h100-80gb-hbm3"
    dest, box = tmp_path / "merged", tmp_path / "box"
    merge_results([two_boxes[machine]], dest)
    resultstree.bisect_state(dest / machine, "n1").parent.mkdir()
    resultstree.bisect_state(dest / machine, "n1").write_text(json.dumps({"updated_at": "2026-11-24T00:00"}))
    shutil.copytree(two_boxes[machine], box)
    # The box resumed the bisect from the published state and finished it: a newer state and a result.
    resultstree.bisect_state(box / machine, "n1").parent.mkdir()
    resultstree.bisect_state(box / machine, "n1").write_text(json.dumps({"updated_at": "2026-11-25T00:00"}))
    resultstree.bisect_result(box / machine, "n1").write_text(json.dumps({"id": "n1", "finished_at": "2026-11-25"}))
    merge_results([box], dest)
    assert json.loads(resultstree.bisect_state(dest / machine, "n1").read_text()) == {"updated_at": "2026-11-25T00:00"}
    assert json.loads(resultstree.bisect_result(dest / machine, "n1").read_text())["id"] == "n1"


def test_a_corrupt_confirmations_file_stops_the_merge_before_anything_is_written(two_boxes, tmp_path):
    machine = "nvidia-h100-80gb-hbm3"
    box = tmp_path / "box"
    shutil.copytree(two_boxes[machine], box)
    (box / machine / "confirmations.json").write_text('{"confirmations": "none"}')
    with pytest.raises(MergeError, match="not a confirmations file"):
        merge_results([box], tmp_path / "merged")
    assert not (tmp_path / "merged").exists()
