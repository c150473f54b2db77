"""Bad input to every command: one line saying what is wrong, the documented exit status (2, for the gate too), no
traceback, and nothing touched on the way: no CUDA, no NVML, and no file that was there before changed or gone.

Each row of BAD_INPUT is an argument list (with {placeholders} for the fixtures' paths), the exit status, and a
piece of the message. CuPy and pynvml are made unimportable and the GPU queries fail the test if called, so a row
that would reach the GPU before refusing fails here even on a GPU box.
"""

import json
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

from sgemm import cli

ROOT = Path(__file__).resolve().parents[1]
GIT_ENV = {"GIT_AUTHOR_NAME": "t", "GIT_AUTHOR_EMAIL": "t@t", "GIT_COMMITTER_NAME": "t", "GIT_COMMITTER_EMAIL": "t@t",
           "PATH": "/usr/bin:/bin"}
RUN_COLUMNS = ["result", "params", "version", "started_at", "duration", "stats_ci_99_a", "stats_ci_99_b",
               "stats_q_25", "stats_q_75", "stats_number", "stats_repeat", "samples", "profile"]


def git(repo: Path, *args: str) -> None:
    subprocess.run(["git", "-C", str(repo), *args], check=True, env=GIT_ENV, capture_output=True)


def write_results_tree(root: Path, machine: str = "gpu-box") -> Path:
    """A small asv results tree that asv reads (one machine, one run of one benchmark), made by hand."""
    (root / machine).mkdir(parents=True)
    (root / "benchmarks.json").write_text(json.dumps({"bench_gemm.Gemm.track_tflops": {
        "name": "bench_gemm.Gemm.track_tflops", "type": "track", "params": [], "param_names": [], "unit": "TFLOP/s",
        "version": "v1"}, "version": 2}))
    (root / machine / "machine.json").write_text(json.dumps({"machine": machine, "gpu": "NVIDIA H100 80GB HBM3",
                                                             "version": 1}))
    row = [[5.0], [], "v1", 1_700_000_000_000, 0.5, None, None, None, None, None, None, None, None]
    (root / machine / "0123456789abcdef-existing.json").write_text(json.dumps({
        "commit_hash": "0123456789abcdef0123456789abcdef01234567", "env_name": "existing", "date": 1_700_000_000_000,
        "params": {"machine": machine, "python": "3.11"}, "python": "3.11", "requirements": {}, "env_vars": {},
        "result_columns": RUN_COLUMNS, "results": {"bench_gemm.Gemm.track_tflops": row}, "durations": {},
        "version": 2}))
    return root


@pytest.fixture(scope="module")
def project(tmp_path_factory) -> Path:
    """A git repository with this project's catalogue and kernels and an asv.conf.json, two commits on main."""
    repo = tmp_path_factory.mktemp("project")
    (repo / "sgemm").mkdir()
    shutil.copy(ROOT / "sgemm" / "catalogue.toml", repo / "sgemm" / "catalogue.toml")
    shutil.copytree(ROOT / "kernels", repo / "kernels")
    shutil.copy(ROOT / "asv.conf.json", repo / "asv.conf.json")
    git(repo, "init", "-q", "-b", "main")
    git(repo, "add", "-A")
    git(repo, "commit", "-qm", "first")
    (repo / "README.md").write_text("second\n")
    git(repo, "add", "-A")
    git(repo, "commit", "-qm", "second")
    return repo


@pytest.fixture
def places(project, tmp_path) -> dict[str, str]:
    """What the rows' {placeholders} stand for."""
    (tmp_path / "file.txt").write_text("a file, not a directory")
    (tmp_path / "notes").mkdir()
    (tmp_path / "notes" / "mine.txt").write_text("not a site")
    results = write_results_tree(tmp_path / "data" / "results")
    return {"repo": str(project), "tmp": str(tmp_path), "results": str(results)}


@pytest.fixture
def no_gpu_may_be_touched(monkeypatch):
    def touched(*args, **kwargs):
        raise AssertionError("the GPU was queried before the input was checked")

    for module in ("cupy", "pynvml", "cuda.bench"):
        monkeypatch.setitem(sys.modules, module, None)
    import sgemm.commands
    import sgemm.machine
    import sgemm.measuring.record
    import sgemm.measuring.telemetry

    for command in (sgemm.commands.kernels, sgemm.commands.publish, sgemm.commands.history):
        monkeypatch.setattr(command, "device_info", touched)
    monkeypatch.setattr(sgemm.measuring.record, "device_info", touched)
    monkeypatch.setattr(sgemm.measuring.telemetry, "gpu_identity", touched)
    monkeypatch.setattr(sgemm.machine, "gpu_identity", touched)


GATE = ["gate", "HEAD~1", "HEAD", "--repo", "{repo}", "--dry-run"]
PUBLISH = ["publish", "--results", "{results}", "--repo", "{repo}"]
REPORT = ["report", "--out", "{tmp}/report"]
HISTORY = ["history", "--repo", "{repo}", "--machine", "box", "--dry-run"]

BAD_INPUT = [
    # the command line itself
    ([], 2, "sgemm: give a command: list, check, bench, report, merge, gate, history, publish, noise, machine"),
    (["frobnicate"], 2, "invalid choice: 'frobnicate'"),
    (["report"], 2, "the following arguments are required: --out"),
    # kernels and shapes
    (["list", "-k", "fp32/nope"], 2, "unknown kernel 'fp32/nope'"),
    (["check", "-k", "fp64"], 2, "unknown kernel 'fp64'"),
    (["bench", "-k", "nosuchkernel"], 2, "unknown kernel 'nosuchkernel'"),
    (["check", "--shape", "12x12"], 2, "a shape is MxNxK"),
    (["check", "--shape", "axbxc"], 2, "a shape is MxNxK"),
    (["check", "--shape", "0x4x4"], 2, "M, N and K must be at least 1 (got '0x4x4')"),
    (["check", "--shape", "-3x4x5"], 2, "M, N and K must be at least 1 (got '-3x4x5')"),
    (["check", "--shape=-3x4x5"], 2, "M, N and K must be at least 1 (got '-3x4x5')"),
    (["check", "--alpha", "nan"], 2, "expected a finite number, got 'nan'"),
    (["check", "--beta", "one"], 2, "expected a finite number, got 'one'"),
    (["check", "--device", "-1"], 2, "a device index must be at least 0, got -1"),
    (["bench", "--size", "0"], 2, "a size must be at least 1, got 0"),
    (["bench", "--size", "-5"], 2, "a size must be at least 1, got -5"),
    (["bench", "--size", "big"], 2, "a size is a whole number, got 'big'"),
    (["bench", "--size", "1024", "--shape", "1x1x1"], 2, "not allowed with argument --size"),
    (["bench", "--json", "{tmp}/missing/out.json"], 2, "the folder {tmp}/missing does not exist"),
    (["bench", "--json", "{tmp}"], 2, "--json {tmp} is a directory"),
    # report
    ([*REPORT, "--seed", "042"], 2, "unknown seed 042"),
    ([*REPORT, "--size", "0"], 2, "a size must be at least 1"),
    (["report", "--out", "{tmp}/file.txt"], 2, "--out {tmp}/file.txt is a file"),
    ([*REPORT, "--results", "{tmp}/nowhere", "--machine", "gpu-box"], 2, "no asv results for machine 'gpu-box'"),
    ([*REPORT, "--results", "{results}", "--machine", "../gpu-box"], 2, "a machine name is"),
    ([*REPORT, "--across-gpus"], 2, "--across-gpus reads asv results: pass --results"),
    ([*REPORT, "--across-gpus", "--results", "{tmp}/nowhere"], 2, "no asv machine directories in"),
    # merge
    (["merge", "{tmp}/missing", "--into", "{tmp}/merged"], 2, "{tmp}/missing: not a directory"),
    (["merge", "--into", "{tmp}/merged"], 2, "the following arguments are required: sources"),
    (["merge", "{results}", "--into", "{results}"], 2, "is also a source"),
    (["merge", "{results}", "--into", "{results}/inner"], 2, "lies inside the source"),
    (["merge", "{results}", "--into", "{tmp}/file.txt"], 2, "--into {tmp}/file.txt: not a directory"),
    (["merge", "{results}", "--into", "{tmp}/no/such/merged"], 2, "does not exist"),
    (["merge", "{tmp}/notes", "--into", "{tmp}/merged"], 2, "not part of an asv results tree"),
    # publish
    ([*PUBLISH, "--html", "{repo}"], 2, "--html {repo} is the repository"),
    ([*PUBLISH, "--html", "{results}"], 2, "--html {results} is the results"),
    ([*PUBLISH, "--html", "{tmp}/data"], 2, "--html {tmp}/data holds the results"),
    ([*PUBLISH, "--html", "{results}/site"], 2, "lies inside the results"),
    ([*PUBLISH, "--html", "{repo}/.git/site"], 2, "lies inside the repository's .git"),
    ([*PUBLISH, "--html", "{tmp}/notes"], 2, "is not empty and is not a site `sgemm publish` made"),
    ([*PUBLISH, "--html", "{tmp}/file.txt"], 2, "--html {tmp}/file.txt: not a directory"),
    ([*PUBLISH, "--html", "{tmp}/site", "--npm-cache", "{tmp}/site/cache"], 2, "holds the npm cache"),
    ([*PUBLISH, "--html", "{tmp}/site", "--size", "0"], 2, "a size must be at least 1"),
    (["publish", "--results", "{tmp}/notes", "--html", "{tmp}/site"], 2, "not an asv results tree"),
    (["publish", "--results", "{results}", "--html", "{tmp}/site", "--repo", "{tmp}"], 2, "no asv.conf.json"),
    # history: every place checked before the GPU is asked, let alone anything measured
    ([*HISTORY, "--results", "{tmp}/file.txt"], 2, "--results {tmp}/file.txt: not a directory"),
    ([*HISTORY, "--results", "{tmp}/out", "--work", "{tmp}/out"], 2, "overlap"),
    ([*HISTORY, "--results", "{tmp}/out", "--work", "{tmp}/out/envs"], 2, "overlap"),
    ([*HISTORY, "--results", "{repo}/.git/results"], 2, "inside the repository's .git"),
    ([*HISTORY, "--work", "{tmp}/file.txt"], 2, "--work {tmp}/file.txt: not a directory"),
    ([*HISTORY, "--html", "{repo}"], 2, "is the repository"),
    ([*HISTORY, "--html", "{tmp}/notes"], 2, "is not empty and is not a site `sgemm publish` made"),
    ([*HISTORY, "--html", "{tmp}/no/such/site"], 2, "does not exist"),
    ([*HISTORY, "--npm-cache", "{tmp}/nowhere"], 2, "--npm-cache {tmp}/nowhere: no such folder"),
    ([*HISTORY, "--first", "0"], 2, "--first"),
    (["history", "--repo", "{tmp}", "--dry-run"], 2, "has no asv.conf.json"),
    # machine
    (["machine", "--name", "n" * 65], 2, "a machine name is 1 to 64"),
    (["machine", "--file", "{tmp}/missing/machines.json"], 2, "the folder {tmp}/missing does not exist"),
    (["machine", "--file", "{tmp}"], 2, "--file {tmp} is a directory"),
    (["machine", "--name", "../evil"], 2, "a machine name is"),
    (["machine", "--name", ""], 2, "a machine name is"),
    # noise
    (["noise", "--machine", "box", "--repo", "{tmp}"], 2, "give asv results (--results) or paired gates' work folders"),
    (["noise", "--machine", "box", "--rounds", "{tmp}/nowhere", "--out", "{tmp}/n.json"], 2,
     "--rounds {tmp}/nowhere: no such folder"),
    (["noise", "--machine", "box", "--rounds", "{tmp}/notes", "--out", "{tmp}/n.json"], 2,
     "no case was measured in two rounds or more"),
    (["noise", "--machine", "..", "--rounds", "{tmp}/notes"], 2, "a machine name is 1 to 64"),
    (["noise", "--machine", "../GEMM/x", "--rounds", "{tmp}/notes"], 2, "a machine name is 1 to 64"),
    (["noise", "--machine", "box", "--rounds", "{tmp}/notes", "--out", "{tmp}/no/such/n.json"], 2,
     "the folder {tmp}/no/such does not exist"),
    (["noise", "--machine", "box", "--rounds", "{tmp}/notes", "--out", "{tmp}"], 2, "--out {tmp} is a directory"),
    # gate
    ([*GATE, "--rounds", "0"], 2, "at least 3"),
    ([*GATE, "--rounds", "2"], 2, "at least 3"),
    ([*GATE, "--size", "0"], 2, "a size must be at least 1, got 0"),
    ([*GATE, "--size", "-5"], 2, "a size must be at least 1, got -5"),
    ([*GATE, "--size", "12345"], 2, "--size 12345: not among the suite's sizes"),
    ([*GATE, "--threshold-for", "fp16/*=4=5"], 2, "expected PATTERN=PERCENT with one '='"),
    ([*GATE, "--threshold-for", "=4"], 2, "expected PATTERN=PERCENT"),
    ([*GATE, "--threshold-for", "fp64/*=4"], 2, "--threshold-for 'fp64/*' matches no kernel"),
    ([*GATE, "--threshold", "150"], 2, "between 0 and 100"),
    ([*GATE, "-k", "nosuchkernel"], 2, "unknown kernel 'nosuchkernel'"),
    ([*GATE, "--machine", "a/b"], 2, "a machine name is"),
    ([*GATE, "--report", "{tmp}/missing/gate.md"], 2, "the folder {tmp}/missing does not exist"),
    ([*GATE, "--device", "-1"], 2, "a device index must be at least 0"),
    ([*GATE, "--rounds", "5", "--max-rounds", "4"], 2, "--max-rounds 4 is below --rounds 5"),
    ([*GATE, "--noise", "{tmp}/missing.json"], 2, "--noise {tmp}/missing.json: no such file"),
    ([*GATE, "-k", "bf16/wgmma_tma", "--size", "1024"], 2, "no case of the suite measures that"),
    (["gate", "HEAD~1", "HEAD", "--repo", "{tmp}", "--dry-run"], 2, "no sgemm/catalogue.toml"),
    (["gate", "HEAD", "HEAD", "--repo", "{repo}", "--dry-run"], 2, "nothing to compare"),
    (["gate", "main", "HEAD", "--repo", "{repo}", "--dry-run"], 2, "nothing to compare"),
    (["gate", "nosuchcommit", "HEAD", "--repo", "{repo}", "--dry-run"], 2, "'nosuchcommit' is not a commit"),
]


def fill(text: str, places: dict[str, str]) -> str:
    for name, value in places.items():
        text = text.replace("{" + name + "}", value)
    return text


def test_there_are_at_least_thirty_rows():
    assert len(BAD_INPUT) >= 30


@pytest.mark.parametrize("argv, status, message", BAD_INPUT, ids=[" ".join(row[0]) or "(none)" for row in BAD_INPUT])
def test_bad_input_is_one_line_and_its_exit_status(argv, status, message, places, no_gpu_may_be_touched, capsys):
    assert cli.main([fill(arg, places) for arg in argv]) == status
    out, err = capsys.readouterr()
    assert fill(message, places) in err
    assert "Traceback" not in out + err
    assert err.count("\n") == 1, err  # one line
    assert not (Path(places["tmp"]) / "report").exists() and not (Path(places["tmp"]) / "merged").exists()


def test_a_size_no_gpu_measured_is_refused_by_report_and_publish(two_gpu_results, tmp_path, no_gpu_may_be_touched,
                                                                  capsys):
    results = str(two_gpu_results.results)
    for argv in (["report", "--across-gpus", "--results", results, "--out", str(tmp_path / "r"), "--size", "12345"],
                 ["publish", "--results", results, "--repo", str(two_gpu_results.repo), "--html",
                  str(tmp_path / "site"), "--size", "12345"]):
        assert cli.main(argv) == 2
        err = capsys.readouterr().err
        assert f"--size 12345: no GPU in {results} measured that size (measured: 1024, 2048, 4096)" in err
        assert err.count("\n") == 1 and "Traceback" not in err
    assert [p.name for p in tmp_path.iterdir()] == [".site.sgemm-lock"]


# --- Nothing that was there is lost -----------------------------------------------------------------------------


@pytest.fixture
def clone(tmp_path) -> Path:
    """tmp_path/clone: a git clone's worth of files, with an asv results tree inside; tmp_path/data/results: another
    results tree; tmp_path/site-of-mine: someone's own directory that no publish made."""
    repo = tmp_path / "clone"
    (repo / "sgemm").mkdir(parents=True)
    (repo / "sgemm" / "cli.py").write_text("print('the code')\n")
    (repo / "README.md").write_text("# the project\n")
    shutil.copy(ROOT / "asv.conf.json", repo / "asv.conf.json")
    (repo / ".gitignore").write_text("results/\n")
    git(repo, "init", "-q", "-b", "main")
    git(repo, "add", "-A")
    git(repo, "commit", "-qm", "the project")
    write_results_tree(repo / "results")
    write_results_tree(tmp_path / "data" / "results")
    (tmp_path / "site-of-mine").mkdir()
    (tmp_path / "site-of-mine" / "index.html").write_text("<p>mine</p>")
    return repo


def every_file(root: Path) -> dict[str, bytes]:
    return {p.relative_to(root).as_posix(): p.read_bytes() for p in sorted(root.rglob("*")) if p.is_file()}


DATA_LOSS = [
    # (where it runs, the command): each once deleted or overwrote what it did not make
    ("clone", ["publish", "--results", "results", "--html", "."]),
    ("clone", ["publish", "--results", "results", "--html", ".."]),
    ("clone", ["publish", "--results", "results", "--html", "results"]),
    ("clone", ["publish", "--results", "results", "--html", "results/nvidia-h100"]),
    ("clone", ["publish", "--results", "../data/results", "--html", "../data"]),
    ("clone", ["publish", "--results", "../data/results", "--html", "../data/results"]),
    ("clone", ["publish", "--results", "results", "--html", "sgemm"]),
    ("clone", ["publish", "--results", "results", "--html", "../site-of-mine"]),
    ("clone", ["publish", "--results", "results", "--html", ".git"]),
    ("clone", ["merge", "../data/results", "--into", "results/gpu-box"]),
    ("clone", ["merge", "results", "--into", "results"]),
    ("clone", ["machine", "--file", "missing/machines.json"]),
]


@pytest.mark.parametrize("cwd, argv", DATA_LOSS, ids=[" ".join(argv) for _, argv in DATA_LOSS])
def test_a_refused_command_leaves_every_file_in_place(clone, cwd, argv, monkeypatch, no_gpu_may_be_touched, capsys):
    root = clone.parent
    before = every_file(root)
    assert any(name.startswith("clone/.git/") for name in before)
    monkeypatch.chdir(clone)
    assert cli.main(argv) == 2
    err = capsys.readouterr().err
    assert err.count("\n") == 1 and "Traceback" not in err, err
    after = every_file(root)
    assert {name: after.get(name) for name in before} == before  # every file there, with the same bytes
    assert all(name.endswith(".sgemm-lock") for name in set(after) - set(before)), set(after) - set(before)
    assert not (clone / "missing").exists()
