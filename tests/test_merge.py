"""Merging results trees: machines kept apart, idempotent, nothing lost, bad or conflicting input refused whole."""

import json
import shutil

import pytest

from sgemm.merge import MergeError, merge_results

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
            "benchmark_dir": "benchmarks", "results_dir": "results", "html_dir": "html"}))
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


@pytest.mark.parametrize("damage, message", [
    (lambda run: run.write_text("{not json"), "Error parsing JSON"),
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


def test_a_different_run_of_the_same_commit_is_refused_not_overwritten(two_boxes, tmp_path):
    dest = tmp_path / "merged"
    merge_results([two_boxes["nvidia-h200"]], dest)
    rerun = tmp_path / "rerun"
    shutil.copytree(two_boxes["nvidia-h200"], rerun)
    [run] = [p for p in (rerun / "nvidia-h200").glob("*.json") if p.name != "machine.json"]
    data = json.loads(run.read_text())
    data["date"] += 1000
    run.write_text(json.dumps(data))
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
