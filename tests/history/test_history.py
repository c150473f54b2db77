"""Which commits and benchmarks a box's history run measures, in scratch repositories with asv results written
through asv's API; what it says first; and the command's refusals."""

import re
import shutil
import subprocess
import sys
from pathlib import Path

import pytest
from conftest import write_asv_run

from sgemm.history import run
from sgemm.results.asvsuite import GEMM, TIME

ROOT = Path(__file__).resolve().parents[2]


def git(repo, *args):
    return subprocess.run(["git", "-C", str(repo), *args], check=True, capture_output=True, text=True).stdout.strip()


class Repo(type(Path())):
    commits: list[str]


@pytest.fixture
def repo(tmp_path):
    """A branch main of five commits, oldest first in `repo.commits`."""
    path = Repo(tmp_path / "repo")
    path.mkdir()
    git(path, "init", "-q", "-b", "main")
    git(path, "config", "user.name", "t")
    git(path, "config", "user.email", "t@t")
    (path / "asv.conf.json").write_text("{}")
    (path / "sgemm").mkdir()
    shutil.copy(ROOT / "sgemm" / "catalogue.toml", path / "sgemm" / "catalogue.toml")
    shutil.copytree(ROOT / "kernels", path / "kernels")
    commits = []
    for number in range(5):
        (path / "notes.txt").write_text(f"{number}\n")
        git(path, "add", "-A")
        git(path, "commit", "-qm", f"change {number}")
        commits.append(git(path, "rev-parse", "HEAD"))
    path.commits = commits
    return path


def test_a_first_run_measures_the_newest_commits_only(repo, tmp_path):
    chosen = run.plan(repo, tmp_path / "results", "box", gpu=True)
    assert chosen.commits == (repo.commits[-1],)
    assert run.plan(repo, tmp_path / "results", "box", gpu=True, first=3).commits == tuple(repo.commits[:1:-1])
    assert chosen.left_out == ()
    assert chosen.describe()[1].startswith("expected: no run of this machine to go by")


def runs(chosen, name: str) -> bool:
    """Whether asv, given the plan's --bench patterns, runs the benchmark instance `name`."""
    return any(re.search(pattern, name) for pattern in chosen.bench)


def test_a_gpu_box_runs_every_case_of_the_suite_and_no_combination_that_is_none(repo, tmp_path):
    chosen = run.plan(repo, tmp_path / "results", "box", gpu=True)

    assert runs(chosen, "bench_gemm.Gemm.track_time('wgmma_cluster', 8192, 'bf16')")
    assert runs(chosen, "bench_gemm.Gemm.track_card('naive', 1024, 'fp32')")
    assert runs(chosen, "bench_gemm.GemmShapes.track_time('fp32/naive', '256x1024x1024')")
    assert runs(chosen, "bench_gpu.Gpu.track_sm_count")
    assert runs(chosen, "bench_resources.Resources.track_registers('fp32/naive', 'sm_90')")
    assert runs(chosen, "bench_resources.Resources.track_spill_loads('fp16/wgmma_tma', 'sm_90a')")
    # built for sm_90a alone
    assert not runs(chosen, "bench_resources.Resources.track_registers('fp16/wgmma_tma', 'sm_80')")
    assert not runs(chosen, "bench_resources.Resources.track_registers('fp32/naive', 'sm_90a')")
    assert not runs(chosen, "bench_resources.Resources.track_registers('fp32/cublas', 'sm_90')")  # a library call
    assert not runs(chosen, "bench_gemm.Gemm.track_time('naive', 8192, 'fp32')")  # not timed at 8192
    assert not runs(chosen, "bench_gemm.Gemm.track_time('naive', 1024, 'bf16')")  # no such kernel
    assert not runs(chosen, "bench_gemm.Gemm.track_time('wgmma_tma', 2048, 'fp16')")
    assert len(chosen.bench) == len(run.suite_cases(repo)) + len(run.other_patterns(repo))


def test_a_case_is_selected_with_every_track_and_nothing_else():
    from sgemm.results.asvsuite import SuiteCase

    cases = [SuiteCase.square("fp32/naive", 1024), SuiteCase.square("fp32/naive", 2048)]
    names = [case.entry(track) for case in cases for track in ("track_time", "track_card")]
    patterns = run.case_patterns(cases[:1])
    assert [n for n in names if any(re.search(p, n) for p in patterns)] == names[:2]


def test_a_later_run_measures_what_came_since_and_says_how_long(repo, tmp_path):
    results = tmp_path / "results"
    write_asv_run(results, "box", repo.commits[2], 1_000, {(GEMM, TIME): {("naive", 64, "fp32"): [1.0]}},
                  duration_s=120.0)
    chosen = run.plan(repo, results, "box", gpu=True, first=1)
    assert chosen.commits == (repo.commits[4], repo.commits[3])
    assert chosen.seconds_per_commit == 120.0
    assert chosen.describe()[1] == "expected: about 4.0 min (2.0 min a commit in this machine's last run)"
    # Under a minute, in seconds: a sharded run of short commits is not "about 0 min".
    write_asv_run(results, "box", repo.commits[3], 2_000, {(GEMM, TIME): {("naive", 64, "fp32"): [1.0]}},
                  duration_s=40.0)  # the newer run: its duration is the one the plan goes by
    chosen = run.plan(repo, results, "box", gpu=True, first=1)
    assert chosen.describe(gpus=4)[1] == ("expected: about 10 s (40 s a commit in this machine's last run, spread "
                                          "over 4 GPUs)")


def test_another_machines_results_do_not_count_as_measured_here(repo, tmp_path):
    results = tmp_path / "results"
    write_asv_run(results, "other-box", repo.commits[4], 1_000, {(GEMM, TIME): {("naive", 64, "fp32"): [1.0]}})
    assert run.plan(repo, results, "box", gpu=True).commits == (repo.commits[4],)


def test_a_measured_commit_no_longer_in_the_repository_is_ignored(repo, tmp_path):
    results = tmp_path / "results"
    write_asv_run(results, "box", "f" * 40, 1_000, {(GEMM, TIME): {("naive", 64, "fp32"): [1.0]}})
    assert run.plan(repo, results, "box", gpu=True, first=2).commits == (repo.commits[4], repo.commits[3])


def test_without_a_gpu_only_the_resource_suite_runs_and_the_rest_is_named(repo, tmp_path):
    chosen = run.plan(repo, tmp_path / "results", "box", gpu=False)
    assert chosen.bench == tuple(run.resource_patterns(repo))
    assert all(pattern.startswith(r"^bench_resources\.Resources\.") for pattern in chosen.bench)
    assert [line.split(": ", 1)[1].split()[0] for line in chosen.describe() if line.startswith("left out")] == \
        ["bench_gemm", "bench_gpu"]
    assert f"recorded here: {run.RESOURCE_SUITE}" in chosen.describe()


def test_a_first_run_without_a_gpu_measures_enough_commits_to_draw_a_line(repo, tmp_path):
    chosen = run.plan(repo, tmp_path / "results", "box", gpu=False)
    assert chosen.commits == tuple(repo.commits[:-run.DEFAULT_FIRST_WITHOUT_GPU - 1:-1])
    assert len(chosen.commits) == run.DEFAULT_FIRST_WITHOUT_GPU > 1
    assert any("a first run without a GPU measures the newest 3 commits" in line for line in chosen.describe())
    asked = run.plan(repo, tmp_path / "results", "box", gpu=False, first=1)
    assert asked.commits == (repo.commits[-1],) and asked.notes == ()  # --first is the user's to set


def test_the_summary_reads_back_what_was_recorded_of_each_planned_commit(repo, tmp_path):
    results = tmp_path / "results"
    chosen = run.plan(repo, results, "box", gpu=False)
    write_asv_run(results, "box", chosen.commits[1], 1_000,
                  {("Resources", "track_registers"): {("fp32/naive", "sm_90"): [32.0]}}, module="bench_resources")
    lines = run.summary(results, chosen)
    assert len(lines) == 1 + len(chosen.commits)
    assert "nothing recorded" in lines[1] and "nothing recorded" in lines[3]
    assert lines[2].startswith(chosen.commits[1][:8]) and " 32 " in lines[2]


def test_the_loader_is_pointed_at_the_nvrtc_of_the_linked_stack(tmp_path, monkeypatch):
    site = tmp_path / "site-packages"
    (site / "nvidia" / "cu13" / "lib").mkdir(parents=True)
    (site / "nvidia" / "cu13" / "lib" / "libnvrtc.so.13").write_bytes(b"")
    (site / "nvidia" / "nccl" / "lib").mkdir(parents=True)  # no NVRTC there
    monkeypatch.setenv("LD_LIBRARY_PATH", "/opt/lib")
    assert run.library_path(f"{site}:{tmp_path / 'missing'}") == f"{site / 'nvidia' / 'cu13' / 'lib'}:/opt/lib"


def sgemm_history(*args, cwd):
    return subprocess.run([sys.executable, "-m", "sgemm", "history", *args], cwd=cwd, capture_output=True, text=True)


def test_the_reference_tree_is_named_by_its_whole_path_for_processes_that_run_elsewhere(repo, monkeypatch):
    # asv runs each benchmark in a folder of its own: a tree named relative to the repository is found by none.
    catalogue = repo / "sgemm" / "catalogue.toml"
    text = catalogue.read_text()
    named = re.search(r'^reference = "([0-9a-f]+)"', text, re.M).group(1)
    catalogue.write_text(text.replace(named, repo.commits[0]))
    monkeypatch.chdir(repo)
    tree = run.reference_tree(Path("."), Path(".asv/history"))
    assert tree == repo / ".asv" / "history" / "reference" / repo.commits[0] and tree.is_absolute()
    assert (tree / "COMMIT").read_text().strip() == repo.commits[0] and (tree / "kernels").is_dir()


def test_the_dry_run_says_what_it_would_measure_and_measures_nothing(repo):
    done = sgemm_history("--dry-run", "--first", "2", "--machine", "box", cwd=repo)
    assert done.returncode == 0, done.stderr
    assert f"machine box: 2 commits to measure ({repo.commits[4][:8]}, {repo.commits[3][:8]})" in done.stderr
    assert not (repo / "results").exists() and not (repo / "html").exists()


def test_the_history_publishes_through_the_publish_commands_own_function(tmp_path, monkeypatch, capsys):
    """After the measuring, the history publishes as `sgemm publish` does, every argument given by name: the site's
    publish with the watch's pages as its part, and what went wrong said as the history's."""
    from sgemm.commands import EXIT_BAD_INPUT
    from sgemm.commands.site import publish
    from sgemm.site import publish as site_publish
    from sgemm.watch.page import WatchPages

    given = {}

    def stop(repo, results, html, kernels, header, size, npm_cache, parts):
        given.update(repo=repo, results=results, html=html, header=header, size=size, npm_cache=npm_cache,
                     parts=parts)
        raise site_publish.PublishError("stopped before anything was built")

    monkeypatch.setattr(site_publish, "publish_site", stop)
    status = publish(tmp_path / "repo", tmp_path / "results", tmp_path / "html", ["Made: here"],
                     npm_cache=tmp_path / "npm", command="sgemm history")
    assert status == EXIT_BAD_INPUT
    assert capsys.readouterr().err == "sgemm history: stopped before anything was built\n"
    assert (given["html"], given["size"], given["npm_cache"]) == (tmp_path / "html", None, tmp_path / "npm")
    [part] = given["parts"]
    assert isinstance(part, WatchPages) and part.results_dir == tmp_path / "results" and part.commit_url is None


@pytest.mark.parametrize("args, message", [
    (["--first", "0"], "--first must be at least 1, got 0"),
    (["--repo", "{tmp}"], "has no asv.conf.json"),
    (["--gpus", "0"], "--gpus takes a number of GPUs (at least 1) or 'all', got '0'"),
])
def test_bad_input_is_refused_before_anything_runs(repo, tmp_path, args, message):
    done = sgemm_history(*[a.replace("{tmp}", str(tmp_path)) for a in args], "--machine", "box", cwd=repo)
    assert done.returncode == 2 and message in done.stderr and "Traceback" not in done.stderr


def tree_digest(root):
    """Every file under `root` (the .git folder aside) with its bytes' hash: what a refusal must leave alone."""
    import hashlib

    return {str(path.relative_to(root)): hashlib.sha256(path.read_bytes()).hexdigest()
            for path in sorted(root.rglob("*")) if path.is_file() and ".git" not in path.relative_to(root).parts}


def a_run_file(repo, content: bytes) -> None:
    """repo/results/box holding a run file with `content` (cut short, or not UTF-8)."""
    (repo / "results" / "box").mkdir(parents=True)
    (repo / "results" / "box" / "machine.json").write_text('{"machine": "box", "version": 1}')
    (repo / "results" / "box" / "01234567-x.json").write_bytes(content)


@pytest.mark.parametrize("dry_run", [True, False])
@pytest.mark.parametrize("make, args, message", [
    (lambda r: (r / "results").write_text("x"), ["--results", "results"], "--results {repo}/results: not a directory"),
    (lambda r: None, ["--results", "out", "--work", "out"], "overlap"),
    (lambda r: None, ["--results", "out", "--work", "out/envs"], "overlap"),
    (lambda r: None, ["--results", "out/res", "--work", "out"], "overlap"),
    (lambda r: None, ["--results", ".git/res"], "inside the repository's .git"),
    (lambda r: None, ["--html", "."], "--html . is the repository"),
    (lambda r: None, ["--html", "results"], "--html results is the results"),
    (lambda r: (r / "site").mkdir() or (r / "site" / "notes.md").write_text("mine"), ["--html", "site"],
     "is not empty and is not a site"),
    (lambda r: None, ["--html", "no/such/place"], "does not exist"),
    (lambda r: None, ["--npm-cache", "nowhere/cache"], "--npm-cache nowhere/cache: no such folder"),
    (lambda r: (r / "cache").write_text("a file"), ["--npm-cache", "cache"], "--npm-cache cache: not a directory"),
    (lambda r: (r / "sgemm" / "catalogue.toml").write_text("[suite\n"), [], "the catalogue cannot be read"),
    # the newcomer's X28, X34b, X12f and X12d: what the run refused after measuring, the dry run passed
    (lambda r: None, ["--npm-cache", "/nonexistent"], "--npm-cache /nonexistent: no such folder"),
    (lambda r: None, ["--work", "/proc/x"], "--work /proc/x: /proc cannot be written"),
    (lambda r: a_run_file(r, b'{"commit_hash": "01'), [], "Error parsing JSON in file '{repo}/results/box/"),
    (lambda r: a_run_file(r, bytes(range(128, 256))), [], "results/box/01234567-x.json: not an asv results file "
     "(UnicodeDecodeError"),
])
def test_every_place_and_the_catalogue_are_checked_before_any_measuring(repo, make, args, message, dry_run):
    """The dry run runs exactly the checks the real run makes first: a bad --html is refused before an hour of
    measuring, not after it, and nothing in the repository changes."""
    make(repo)
    before = tree_digest(repo)
    done = sgemm_history(*args, "--machine", "box", *(["--dry-run"] if dry_run else []), cwd=repo)
    assert done.returncode == 2, done.stderr
    assert message.replace("{repo}", str(repo)) in done.stderr and "Traceback" not in done.stderr
    assert "commits to measure" not in done.stderr  # refused before the plan, let alone the measuring
    assert tree_digest(repo) == before


def test_first_is_said_to_be_left_aside_once_the_machine_has_runs(repo, tmp_path, monkeypatch):
    chosen = run.plan(repo, tmp_path / "results", "box", gpu=True, first=3)
    assert not chosen.notes
    monkeypatch.setattr(run, "_known_commits", lambda _repo, hashes: [repo.commits[2]])
    monkeypatch.setattr(run.asvsuite, "runs", lambda *_, **__: [type("R", (), {
        "commit": repo.commits[2], "run": type("D", (), {"duration": {"x": 60.0}})()})()])
    (tmp_path / "results" / "box").mkdir(parents=True)
    later = run.plan(repo, tmp_path / "results", "box", gpu=True, first=3)
    assert later.commits == (repo.commits[4], repo.commits[3])
    assert any("--first 3 left aside" in line for line in later.describe())
    assert not run.plan(repo, tmp_path / "results", "box", gpu=True).notes  # not asked for: nothing to say


# --- Sharded: real asv runs of a synthetic suite, two shards at once, joined --------------------------------------

def test_two_shards_run_at_once_and_join_into_the_run_of_one_gpu(two_gpu_results, asv_virtualenv, tmp_path,
                                                                  monkeypatch, capsys):
    import json

    from conftest import GpuResultsTree, seed_asv_virtualenv

    from sgemm.history.shards import Shard, _row
    from sgemm.results.asvsuite import SuiteCase

    box = GpuResultsTree.H200
    tree = two_gpu_results.copy(tmp_path / "tree")
    # Virtualenvs as on a GPU box (asv takes no commits for an existing environment), with nothing to build: the
    # synthetic suite needs nothing but the standard library.
    conf = json.loads((tree.repo / "asv.conf.json").read_text())
    conf.update(environment_type="virtualenv", matrix={}, build_command=[], install_command=[],
                uninstall_command=[])
    (tree.repo / "asv.conf.json").write_text(json.dumps(conf))
    # Each shard's environment is where asv will look for it (work_dir/gpu-N/env), as on a box that ran before:
    # what is tested here is the shards' running at once and their joining, not asv making virtualenvs.
    for gpu in (0, 1):
        seed_asv_virtualenv(asv_virtualenv, tmp_path / "work" / f"gpu-{gpu}" / "env")
    whole = next(p for p in (two_gpu_results.results / box.machine).glob("*.json") if p.name != "machine.json")
    results = tmp_path / "results"
    monkeypatch.setenv("HOME", str(tree.home))
    for name, value in box.environment().items():
        monkeypatch.setenv(name, value)
    cases = [SuiteCase.square(f"{precision}/{kernel}", size) for kernel in ("cublas", "naive", "float4")
             for size in (1024, 2048, 4096) for precision in ("fp32", "fp16")]
    shards = [Shard(0, tuple(c for c in cases if c.kernel.endswith("float4")), 1.0),
              Shard(1, tuple(c for c in cases if not c.kernel.endswith("float4")), 90.0)]
    chosen = run.HistoryPlan(box.machine, (tree.commit,), None, (), None, others=(run.GPU_FACTS,))
    status = run.run_sharded(tree.repo, chosen, results, shards, ["GPU-a", "GPU-b"], tmp_path / "work")
    assert status == 0, (tmp_path / "work" / "gpu-0" / "asv.log").read_text()[-2000:]
    # each GPU's share said up front in seconds or minutes as its size asks (it once read "about 0 min a commit")
    said = capsys.readouterr().err
    assert f"sgemm history: GPU 0: 6 cases, about 1 s a commit; asv's output in {tmp_path / 'work' / 'gpu-0'}" in said
    assert "sgemm history: GPU 1: 12 cases, about 1.5 min a commit; asv's output in" in said
    [written] = [p for p in (results / box.machine).glob("*.json") if p.name != "machine.json"]
    assert written.name.startswith(tree.commit[:8])  # one file for the commit, as one GPU's run writes
    joined = json.loads(written.read_text())
    single = json.loads(whole.read_text())
    assert set(joined["results"]) == set(single["results"])  # the GPU facts came with the first shard
    for name in single["results"]:
        assert [_row(joined, name)[c] for c in ("result", "samples")] == \
            [_row(single, name)[c] for c in ("result", "samples")], name
    assert (results / "benchmarks.json").is_file() and (results / box.machine / "machine.json").is_file()
    # each shard's asv had a machine file of its own: asv rewrites it as it starts, and two at once collide
    assert all(json.loads((tmp_path / "work" / f"gpu-{gpu}" / "home" / ".asv-machine.json").read_text())[box.machine]
               for gpu in (0, 1))


@pytest.mark.parametrize("gpus, visible, requested, expected", [
    ([("NVIDIA H200", "GPU-a"), ("NVIDIA H200", "GPU-b")], None, "all", [0, 1]),
    ([("NVIDIA H200", "GPU-a"), ("NVIDIA H200", "GPU-b")], None, "1", [0]),
    ([("NVIDIA H200", "GPU-a"), ("NVIDIA H200", "GPU-b")], None, "3", "--gpus 3: this process may use 2 GPUs, not 3"),
    ([("NVIDIA H200", "GPU-a"), ("NVIDIA H100 80GB HBM3", "GPU-b")], None, "all", "--gpus all: the GPUs are not one"),
    # 'all' is the cards this process may use, as the gate's --gpus: CUDA_VISIBLE_DEVICES where it is set
    ([("NVIDIA H200", "GPU-a"), ("NVIDIA H200", "GPU-b"), ("NVIDIA H200", "GPU-c")], "2,1", "all", [0, 1]),
    ([("NVIDIA H200", "GPU-a"), ("NVIDIA H200", "GPU-b"), ("NVIDIA H200", "GPU-c")], "2", "2",
     "--gpus 2: this process may use 1 GPU (CUDA_VISIBLE_DEVICES=2), not 2"),
])
def test_the_shards_are_over_the_cards_this_process_may_use(repo, tmp_path, monkeypatch, gpus, visible, requested,
                                                           expected):
    from sgemm.measuring import telemetry

    monkeypatch.setattr(telemetry, "box_gpus", lambda: gpus)
    if visible is None:
        monkeypatch.delenv("CUDA_VISIBLE_DEVICES", raising=False)
    else:
        monkeypatch.setenv("CUDA_VISIBLE_DEVICES", visible)
    if isinstance(expected, str):
        with pytest.raises(run.HistoryError, match=re.escape(expected)):
            run.box_shards(repo, tmp_path / "results", "box", requested)
        return
    shards, uuids = run.box_shards(repo, tmp_path / "results", "box", requested)
    cards = {None: ["GPU-a", "GPU-b"], "2,1": ["GPU-c", "GPU-b"]}[visible]
    assert [shard.gpu for shard in shards] == expected and uuids == cards
    assert sum(len(shard.cases) for shard in shards) == len(run.suite_cases(ROOT))


# --- A selection of cases (-k, --size) ------------------------------------------------------------------------------

HOPPER_AND_FP32 = (("fp32/", "fp16/wgmma_grouped_tma_store"), (4096, 8192))


def test_a_selection_runs_the_kernels_asked_for_at_the_sizes_asked_for_and_nothing_else(repo, tmp_path):
    from sgemm.results.asvsuite import SuiteCase

    kernels, sizes = HOPPER_AND_FP32
    chosen = run.plan(repo, tmp_path / "results", "box", gpu=True, kernels=kernels, sizes=sizes)
    fp32 = [name for name in run.catalogue.load_catalogue(repo / "sgemm" / "catalogue.toml", repo / "kernels")
            if name.startswith("fp32/")]
    expected = {SuiteCase.square(name, 4096) for name in fp32} | {
        SuiteCase.square("fp16/wgmma_grouped_tma_store", size) for size in sizes}
    assert set(chosen.cases) == expected and len(chosen.cases) == len(expected)

    assert runs(chosen, "bench_gemm.Gemm.track_time('warptile', 4096, 'fp32')")
    assert runs(chosen, "bench_gemm.Gemm.track_round_time('wgmma_grouped_tma_store', 8192, 'fp16')")
    assert runs(chosen, "bench_gpu.Gpu.track_sm_count")
    assert runs(chosen, "bench_resources.Resources.track_registers('fp32/warptile', 'sm_90')")
    assert runs(chosen, "bench_resources.Resources.track_registers('fp16/wgmma_grouped_tma_store', 'sm_90a')")
    assert not runs(chosen, "bench_gemm.Gemm.track_time('warptile', 2048, 'fp32')")  # another size
    assert not runs(chosen, "bench_gemm.Gemm.track_time('wgmma_grouped_tma_store', 8192, 'bf16')")  # another precision
    assert not runs(chosen, "bench_gemm.GemmShapes.track_time('fp32/naive', '256x1024x1024')")  # the sweep has no size
    assert not runs(chosen, "bench_resources.Resources.track_registers('fp16/wgmma_tma', 'sm_90a')")  # not selected
    assert len(chosen.bench) == len(expected) + len(run.other_patterns(repo, {c.kernel for c in expected}))
    assert any(line.startswith(f"selected (-k fp32/ -k fp16/wgmma_grouped_tma_store --size 4096 --size 8192): "
                               f"{len(expected)} cases") for line in chosen.describe())


def test_kernels_alone_keep_their_sweep_and_every_size(repo, tmp_path):
    chosen = run.plan(repo, tmp_path / "results", "box", gpu=True, kernels=("fp32/naive",))
    assert {c.label for c in chosen.cases} == {c.label for c in run.suite_cases(repo) if c.kernel == "fp32/naive"}
    assert any(c.benchmark == "GemmShapes" for c in chosen.cases)
    assert run.select(repo) == run.suite_cases(repo)  # nothing asked: the whole suite


@pytest.mark.parametrize("kernels, sizes, message", [
    (("fp32/nope",), (), "-k: unknown kernel 'fp32/nope'"),
    (("fp16/wgmma",), (), "-k: unknown kernel 'fp16/wgmma'"),  # a name or a prefix ending at '/', as the gate's -k
    ((), (333,), "--size 333: not among the suite's sizes"),
    (("fp32",), (8192,), "--size 8192: no kernel of -k fp32 is timed at that size"),
])
def test_a_selection_that_selects_nothing_is_refused_before_any_measuring(repo, tmp_path, kernels, sizes, message):
    with pytest.raises(run.HistoryError, match=re.escape(message)):
        run.plan(repo, tmp_path / "results", "box", gpu=True, kernels=kernels, sizes=sizes)
    assert not (tmp_path / "results").exists()


def test_no_more_gpus_than_cases(repo):
    cases = run.select(repo, ("fp32/warptile",), (4096,))
    run.check_gpus("1", cases)
    run.check_gpus("all", cases)  # as many cards as there are cases: box_shards takes no more
    with pytest.raises(run.HistoryError, match=re.escape("--gpus 2 with 1 case selected")):
        run.check_gpus("2", cases)


def test_the_measuring_environment_and_asvs_command_carry_exactly_the_selected_cases(repo, tmp_path, monkeypatch):
    import json

    from sgemm.measuring.record import CASES_VARIABLE

    kernels, sizes = HOPPER_AND_FP32
    chosen = run.plan(repo, tmp_path / "results", "box", gpu=True, kernels=kernels, sizes=sizes)
    given = {}

    def asv(command, log, cwd=None, env=None, **_):
        given.update(command=command, env=env)
        return 0, None

    monkeypatch.setattr(run, "follow_asv", asv)
    monkeypatch.setattr(run, "reference_tree", lambda *_: None)
    assert run.run(repo, chosen, tmp_path / "results", tmp_path / "work") == 0
    measured = json.loads(given["env"][CASES_VARIABLE])
    assert sorted(map(tuple, measured)) == sorted((c.kernel, *c.shape) for c in chosen.cases)
    command = given["command"]
    assert [command[i + 1] for i, word in enumerate(command) if word == "--bench"] == list(chosen.bench)


class _Started:
    """What subprocess.Popen started: an `asv run` that ended at once, recording nothing."""

    started: list = []

    def __init__(self, command, env=None, **_):
        self.command, self.env, self.returncode, self.pid = command, env, 0, 0
        _Started.started.append(self)

    def poll(self):
        return 0


def test_each_shard_measures_and_runs_its_own_part_of_the_selection_and_together_all_of_it(repo, tmp_path,
                                                                                           monkeypatch):
    import json

    from sgemm.measuring.record import CASES_VARIABLE

    kernels, sizes = HOPPER_AND_FP32
    chosen = run.plan(repo, tmp_path / "results", "box", gpu=True, kernels=kernels, sizes=sizes)
    shards = run.shard_plan(repo, tmp_path / "results", "box", [0, 1, 2, 3], list(chosen.cases))
    _Started.started = []
    monkeypatch.setattr(run.subprocess, "Popen", _Started)
    monkeypatch.setattr(run, "reference_tree", lambda *_: None)
    run.run_sharded(repo, chosen, tmp_path / "results", shards, ["GPU-a", "GPU-b", "GPU-c", "GPU-d"],
                    tmp_path / "work")
    assert len(_Started.started) == 4
    measured, patterns = [], []
    for started in _Started.started:
        measured += [tuple(case) for case in json.loads(started.env[CASES_VARIABLE])]
        command = started.command
        patterns += [command[i + 1] for i, word in enumerate(command) if word == "--bench"]
    assert sorted(measured) == sorted((c.kernel, *c.shape) for c in chosen.cases)  # each case once
    assert sorted(patterns) == sorted(chosen.bench)


def test_no_shard_is_made_without_a_case(repo, tmp_path):
    cases = run.select(repo, ("fp16/wgmma_grouped_tma_store",), (8192,))
    shards = run.shard_plan(repo, tmp_path / "results", "box", [0, 1, 2, 3], cases)
    assert [len(shard.cases) for shard in shards] == [1]


def test_a_selective_run_leaves_every_other_series_recorded_as_it_was(two_gpu_results, asv_virtualenv, tmp_path,
                                                                      monkeypatch):
    """A real `asv run` of a synthetic suite, sharded over two GPUs, of two of its cases at a new commit, into the
    results tree that holds both boxes' runs of the commit before: every file there stays as it was, the new run holds
    the two cases alone, and benchmarks.json still lists every benchmark (the site draws a series only from it)."""
    import ast
    import itertools
    import json

    from conftest import GpuResultsTree, seed_asv_virtualenv

    from sgemm.history.shards import Shard, _row
    from sgemm.results.asvsuite import SuiteCase

    box = GpuResultsTree.H200
    tree = two_gpu_results.copy(tmp_path / "tree")
    conf = json.loads((tree.repo / "asv.conf.json").read_text())
    conf.update(environment_type="virtualenv", matrix={}, build_command=[], install_command=[],
                uninstall_command=[])
    (tree.repo / "asv.conf.json").write_text(json.dumps(conf))
    tree.sh("git", "commit", "-qam", "the configuration of a GPU box")
    for gpu in (0, 1):
        seed_asv_virtualenv(asv_virtualenv, tmp_path / "work" / f"gpu-{gpu}" / "env")
    results = tree.results
    before = {str(p.relative_to(results)): p.read_bytes() for p in results.rglob("*.json")}
    listed = set(json.loads((results / "benchmarks.json").read_text()))
    monkeypatch.setenv("HOME", str(tree.home))
    for name, value in box.environment().items():
        monkeypatch.setenv(name, value)
    selected = [SuiteCase.square("fp32/naive", 1024), SuiteCase.square("fp32/cublas", 4096)]
    shards = [Shard(0, (selected[0],), 1.0), Shard(1, (selected[1],), 1.0)]
    chosen = run.HistoryPlan(box.machine, (tree.commit,), None, (), None, others=(run.GPU_FACTS,),
                             cases=tuple(selected))
    status = run.run_sharded(tree.repo, chosen, results, shards, ["GPU-a", "GPU-b"], tmp_path / "work")
    assert status == 0, (tmp_path / "work" / "gpu-0" / "asv.log").read_text()[-2000:]
    after = {str(p.relative_to(results)): p.read_bytes() for p in results.rglob("*.json")}
    assert {name: data for name, data in after.items() if name in before and name != "benchmarks.json"} == \
        {name: data for name, data in before.items() if name != "benchmarks.json"}
    assert set(json.loads((results / "benchmarks.json").read_text())) == listed
    [new] = [name for name in after if name not in before]
    assert new.startswith(f"{box.machine}/{tree.commit[:8]}")
    joined = json.loads((results / new).read_text())
    row = _row(joined, "bench_gemm.Gemm.track_tflops")
    combos = [tuple(ast.literal_eval(v) for v in combo) for combo in itertools.product(*row["params"])]
    measured = {combo for combo, value in zip(combos, row["result"]) if value is not None and value == value}
    assert measured == {("naive", 1024, "fp32"), ("cublas", 4096, "fp32")}
