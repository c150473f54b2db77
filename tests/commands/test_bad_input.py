"""Bad input to every command: the documented exit status (2, for the gate too), a first line saying what is wrong,
no traceback, and nothing touched on the way: no CUDA, no NVML, and no file that was there before changed or gone.

Each row of BAD_INPUT is an argument list (with {placeholders} for the world's paths), the exit status, a piece of
the message's first line, and optionally what to break in the world first (a truncated run file, a catalogue with
one bad field). Every row runs in a world of its own, copied from one made per module: a git repository with this
project's catalogue and kernels, an asv results tree, someone's folder of notes, a file, a home folder and an empty
working directory. Every entry of the world (the repository's tracked files and .git, the results, the notes, the
home's machine file, whatever the site, work or report folders would be) is hashed before and after the row: each
must be there after with the same bytes, and nothing may be new, not even a lock file (locks lie in the user's
cache, which the tests keep apart).
CuPy and pynvml are made unimportable and the GPU queries fail the test if called, so a row that would reach the GPU
before refusing fails here even on a GPU box.

Rows marked `own_catalogue` run the commands that read the package's own catalogue (list, report) against the
world's copy, so that one bad field can be tried on every command that reads it.

What a row cannot say (a catalogue broken at import, a box with no GPU, a full disk, a read-only mount, Ctrl-C) has a
test of its own below, with the same assertions: the exit status, one line, no traceback, nothing recorded changed.
"""

import hashlib
import json
import os
import shutil
import subprocess
import sys
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path

import pytest
from conftest import says

from sgemm import catalogue, cli

ROOT = Path(__file__).resolve().parents[2]
GIT_ENV = {"GIT_AUTHOR_NAME": "t", "GIT_AUTHOR_EMAIL": "t@t", "GIT_COMMITTER_NAME": "t", "GIT_COMMITTER_EMAIL": "t@t",
           "PATH": "/usr/bin:/bin"}
RUN_COLUMNS = ["result", "params", "version", "started_at", "duration", "stats_ci_99_a", "stats_ci_99_b",
               "stats_q_25", "stats_q_75", "stats_number", "stats_repeat", "samples", "profile"]
RUN_FILE = "gpu-box/0123456789abcdef-existing.json"  # the one run of write_results_tree's tree


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


# --- The world each row runs in ---------------------------------------------------------------------------------


@pytest.fixture(scope="module")
def template(tmp_path_factory) -> Path:
    """The world every row starts from (copied, never changed): see the module's docstring."""
    world = tmp_path_factory.mktemp("world")
    repo = world / "repo"
    (repo / "sgemm").mkdir(parents=True)
    shutil.copy(ROOT / "sgemm" / "catalogue.toml", repo / "sgemm" / "catalogue.toml")
    shutil.copytree(ROOT / "kernels", repo / "kernels")
    shutil.copy(ROOT / "asv.conf.json", repo / "asv.conf.json")
    git(repo, "init", "-q", "-b", "main")
    git(repo, "add", "-A")
    git(repo, "commit", "-qm", "first")
    (repo / "README.md").write_text("second\n")
    git(repo, "add", "-A")
    git(repo, "commit", "-qm", "second")
    write_results_tree(world / "data" / "results")
    (world / "file.txt").write_text("a file, not a directory")
    (world / "notes").mkdir()
    (world / "notes" / "mine.txt").write_text("not a site")
    (world / "home").mkdir()
    (world / "home" / ".profile").write_text("# someone's\n")
    (world / "cwd").mkdir()
    return world


@pytest.fixture
def world(template, tmp_path, monkeypatch) -> Path:
    """A copy of the template, the working directory its empty cwd/ and HOME its home/."""
    root = tmp_path / "w"
    shutil.copytree(template, root, symlinks=True)
    monkeypatch.chdir(root / "cwd")
    monkeypatch.setenv("HOME", str(root / "home"))
    return root


def places(root: Path) -> dict[str, str]:
    """What the rows' {placeholders} stand for."""
    return {"repo": str(root / "repo"), "results": str(root / "data" / "results"), "home": str(root / "home"),
            "tmp": str(root)}


def fill(text: str, values: dict[str, str]) -> str:
    for name, value in values.items():
        text = text.replace("{" + name + "}", value)
    return text


def snapshot(root: Path) -> dict[str, tuple]:
    """Every entry under `root`, without following symlinks: a folder, a link and where it points, or a file and the
    hash of its bytes."""
    entries = {}
    for folder, dirs, files in os.walk(root):
        for name in dirs + files:
            path = Path(folder) / name
            rel = path.relative_to(root).as_posix()
            if path.is_symlink():
                entries[rel] = ("link", os.readlink(path))
            elif path.is_dir():
                entries[rel] = ("dir",)
            else:
                entries[rel] = ("file", hashlib.sha256(path.read_bytes()).hexdigest())
    return entries


def _tracked(root: Path) -> list[Path]:
    done = subprocess.run(["git", "-C", str(root), "ls-files", "-z"], capture_output=True, text=True, check=False)
    return [root / name for name in done.stdout.split("\0") if name] if done.returncode == 0 else []


CHECKOUT_FILES = _tracked(ROOT)  # this checkout's tracked files, which the commands read (the catalogue, kernels)


def checkout_state() -> dict[Path, tuple[int, int]]:
    state = {}
    for path in CHECKOUT_FILES:
        if os.path.lexists(path):
            stat = path.lstat()
            state[path] = (stat.st_size, stat.st_mtime_ns)
    return state


@pytest.fixture
def no_gpu_may_be_touched(monkeypatch):
    def touched(*args, **kwargs):
        raise AssertionError("the GPU was queried before the input was checked")

    for module in ("cupy", "pynvml", "cuda.bench"):
        monkeypatch.setitem(sys.modules, module, None)
    import sgemm.commands
    import sgemm.measuring.record
    import sgemm.measuring.telemetry
    import sgemm.results.machine

    for command in (sgemm.commands.kernels, sgemm.commands.site, sgemm.commands.history):
        monkeypatch.setattr(command, "device_info", touched)
    monkeypatch.setattr(sgemm.measuring.record, "device_info", touched)
    monkeypatch.setattr(sgemm.measuring.telemetry, "gpu_identity", touched)
    monkeypatch.setattr(sgemm.results.machine, "gpu_identity", touched)


def use_own_catalogue(monkeypatch, root: Path) -> None:
    """The package's readers of its own catalogue (their default paths) read the world's copy instead."""
    swap = {catalogue.CATALOGUE_PATH: root / "repo" / "sgemm" / "catalogue.toml",
            catalogue.KERNEL_DIR: root / "repo" / "kernels"}
    for function in vars(catalogue).values():
        defaults = getattr(function, "__defaults__", None)
        if callable(function) and defaults and any(isinstance(d, Path) and d in swap for d in defaults):
            monkeypatch.setattr(function, "__defaults__",
                                tuple(swap.get(d, d) if isinstance(d, Path) else d for d in defaults))


# --- Rows --------------------------------------------------------------------------------------------------------


@dataclass(frozen=True)
class Row:
    argv: tuple[str, ...]
    status: int
    message: str  # pieces of the first line of what the command says, in order (apart: " … "), with {placeholders}
    setup: Callable[[Path], None] | None = None  # what to break in the world before the command runs
    what: str = ""  # the setup, in words (part of the row's id)
    lines: int = 1  # how many lines the command says (a merge names each bad file on a line of its own)
    own_catalogue: bool = False

    @property
    def id(self) -> str:
        return " ".join(self.argv) + (f" [{self.what}]" if self.what else "") or "(none)"


def rows(table: list[tuple], **common) -> list[Row]:
    return [Row(tuple(argv), status, message, *more, **common) for argv, status, message, *more in table]


# What to break: each a function of the world's root.

def write(rel: str, content: str | bytes):
    def setup(root: Path) -> None:
        path = root / rel
        path.parent.mkdir(parents=True, exist_ok=True)
        (path.write_bytes if isinstance(content, bytes) else path.write_text)(content)

    return setup


def results_copy(rel: str, change: Callable[[Path], None]):
    """The world's results tree copied to `rel`, then changed."""
    def setup(root: Path) -> None:
        shutil.copytree(root / "data" / "results", root / rel)
        change(root / rel)

    return setup


def truncated(tree: Path) -> None:
    run = tree / RUN_FILE
    run.write_bytes(run.read_bytes()[:100])


def foreign_benchmarks(tree: Path) -> None:
    (tree / "benchmarks.json").write_text("{")


TRUNCATED = results_copy("bad", truncated)
BAD_BENCHMARKS = results_copy("bad", foreign_benchmarks)
NOT_JSON = write("bad.json", "not json")
A_LIST = write("list.json", "[1]")
OTHER_NOISE = write("other.json", json.dumps({"machine": "other", "cases": {}, "paired": {}}))
ZERO_NOISE = write("zero.json", json.dumps({"machine": "box", "cases": {}, "paired": {
    "fp32/naive 4096x4096x4096": {"sd": 0.0, "df": 6}}}))
GIT_SITE = write("gitsite/.git/HEAD", "ref: refs/heads/gh-pages\n")
ROUNDS_NOT_JSON = write("gate-work/rounds/round-1.jsonl", "not json\n")
ROUNDS_WORD_RATIO = write("gate-work/rounds/round-1.jsonl", '{"label": "x", "ratio": "a"}\n')
ROUNDS_BAD_PLAN = write("gate-work/rounds/round-1.plan.json", "[")
GATE = ["gate", "HEAD~1", "HEAD", "--repo", "{repo}", "--dry-run"]
PUBLISH = ["publish", "--results", "{results}", "--repo", "{repo}"]
REPORT = ["report", "--out", "{tmp}/report"]
HISTORY = ["history", "--repo", "{repo}", "--machine", "box", "--dry-run"]

KNOWN = [
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
    (["check", "-k", "fp16/wgmma_grouped_tma_store", "--shape", "1000x1024x1024", "--shape", "1024x1024x100"], 2,
     "no selected kernel takes a shape asked for: fp16/wgmma_grouped_tma_store needs M to be a multiple of 256"),
    (["bench", "-k", "fp16/wgmma_tma", "-k", "fp16/wgmma_cluster", "--size", "1000"], 2,
     "no selected kernel takes a shape asked for: fp16/wgmma_tma needs M to be a multiple of 128 (got M=1000)"),
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
    ([*REPORT, "--results", "{tmp}/nowhere", "--machine", "gpu-box"], 2,
     "--results {tmp}/nowhere: no asv results there"),
    ([*REPORT, "--results", "{results}", "--machine", "other-box"], 2, "no asv results for machine 'other-box'"),
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
    ([*HISTORY, "--npm-cache", "{tmp}/no/such/cache"], 2, "--npm-cache {tmp}/no/such/cache: no such folder"),
    ([*HISTORY, "--first", "0"], 2, "--first"),
    (["history", "--repo", "{tmp}", "--dry-run"], 2, "has no asv.conf.json"),
    # history: the cases selected (-k, --size) checked as the places are
    ([*HISTORY, "-k", "fp32/nope"], 2, "-k: unknown kernel 'fp32/nope'; did you mean"),
    ([*HISTORY, "-k", "fp32", "-k", "fp64"], 2, "-k: unknown kernel 'fp64'"),
    ([*HISTORY, "--size", "333"], 2, "--size 333: not among the suite's sizes"),
    ([*HISTORY, "--size", "0"], 2, "a size must be at least 1, got 0"),
    ([*HISTORY, "-k", "fp32", "--size", "8192"], 2, "--size 8192: no kernel of -k fp32 is timed at that size"),
    ([*HISTORY, "-k", "fp32/warptile", "--size", "4096", "--gpus", "2"], 2,
     "--gpus 2 with 1 case selected: each GPU needs a case of its own"),
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
    ([*GATE, "--threshold", "150"], 2, "of at least 0 and below 100"),
    ([*GATE, "-k", "nosuchkernel"], 2, "unknown kernel 'nosuchkernel'"),
    ([*GATE, "--machine", "a/b"], 2, "a machine name is"),
    ([*GATE, "--report", "{tmp}/missing/gate.md"], 2, "the folder {tmp}/missing does not exist"),
    ([*GATE, "--device", "-1"], 2, "a device index must be at least 0"),
    ([*GATE, "--rounds", "5", "--max-rounds", "4"], 2, "--max-rounds 4 is below --rounds 5"),
    ([*GATE, "--extra-rounds", "-1"], 2, "--extra-rounds must be at least 0, got -1"),
    ([*GATE, "--gpus", "0"], 2, "--gpus takes a number of GPUs (at least 1) or 'all', got '0'"),
    ([*GATE, "--gpus", "2", "--device", "1"], 2, "--gpus 2 takes the first cards this process may use: leave out "
     "--device 1"),
    (["gate", "HEAD~1", "HEAD", "--repo", "{repo}", "--gpus", "2"], 2, "sgemm gate: --gpus 2: NVML is not available"),
    (["gate", "HEAD~1", "HEAD", "--repo", "{repo}", "--cpu-check"], 2,
     "--cpu-check goes with --dry-run: it times nothing"),
    ([*GATE, "--plan", "{tmp}/plan.json"], 2, "--plan goes with --cpu-check: it is where that check writes its answer"),
    ([*GATE, "--cpu-check", "--plan", "{tmp}"], 2, "--plan {tmp} is a directory"),
    ([*GATE, "--l2", "cold"], 2, "argument --l2: invalid choice: 'cold' (choose from … flushed … warm"),
    ([*GATE, "--extra-rounds", "two"], 2, "--extra-rounds is a whole number, got 'two'"),
    ([*GATE, "--noise", "{tmp}/missing.json"], 2, "--noise {tmp}/missing.json: no such file"),
    ([*GATE, "-k", "bf16/wgmma_tma", "--size", "1024"], 2, "no case of the suite measures that"),
    (["gate", "HEAD~1", "HEAD", "--repo", "{tmp}", "--dry-run"], 2, "no sgemm/catalogue.toml"),
    (["gate", "HEAD", "HEAD", "--repo", "{repo}", "--dry-run"], 2, "nothing to compare"),
    (["gate", "main", "HEAD", "--repo", "{repo}", "--dry-run"], 2, "nothing to compare"),
    (["gate", "nosuchcommit", "HEAD", "--repo", "{repo}", "--dry-run"], 2, "'nosuchcommit' is not a commit"),
]




# More of each kind, and the inputs that once ran on, touched the GPU first, wrote where they should not, or ended in
# a traceback.
BISECT = ["--repo", "{repo}", "--machine", "box", "--results", "{results}"]
ENDS = ["--size", "4096", "--good", "HEAD~1", "--bad", "HEAD"]
BISECT_AND_CONFIRM = [
    (["bisect", "fp32/warptile", "--size", "4096", "--good", "HEAD", "--bad", "HEAD~1", *BISECT], 2,
     "sgemm bisect: fp32/warptile at 4096 (the command line): the good end … is not an ancestor of the bad end"),
    (["bisect", "fp32/warptile", "--size", "4096", "--good", "HEAD", "--bad", "HEAD", *BISECT], 2,
     "the good and the bad end are the same commit … the range is empty"),
    (["bisect", "fp32/warptile", "--size", "4096", "--good", "nope", "--bad", "HEAD", *BISECT], 2,
     "the good end 'nope' is not a commit of {repo}"),
    (["bisect", "fp32/nope", *ENDS, *BISECT], 2, "fp32/nope is not in the catalogue of the good end"),
    (["bisect", "fp32/cublas", *ENDS, *BISECT], 2, "fp32/cublas calls cublas, one library at every commit"),
    (["bisect", "fp16/wgmma_tma", "--size", "1000", "--good", "HEAD~1", "--bad", "HEAD", *BISECT], 2,
     "fp16/wgmma_tma needs M to be a multiple of 128 (got M=1000)"),
    (["bisect", "fp32/warptile", "--good", "HEAD~1", "--bad", "HEAD", *BISECT], 2,
     "give CASE --size N --good SHA --bad SHA, or --notice ID --notices FILE: --size missing"),
    (["confirm", "fp32/warptile", "--good", "HEAD~1", "--bad", "HEAD", *BISECT], 2,
     "give CASE --size N --good SHA --bad SHA, or --notices FILE alone: --size missing"),
    (["bisect", "--notice", "x", "--notices", "{tmp}/notes/mine.txt", *BISECT], 2,
     "--notices {tmp}/notes/mine.txt: not a readable JSON file"),
    (["bisect", "--notice", "x", "--notices", "{tmp}/nothere.json", *BISECT], 2,
     "--notices {tmp}/nothere.json: no such file"),
    (["bisect", "fp32/warptile", *ENDS, "--repo", "{repo}", "--machine", "box", "--results", "{tmp}/file.txt"], 2,
     "--results {tmp}/file.txt is not a directory"),
    (["bisect", "fp32/warptile", *ENDS, *BISECT, "--confidence", "150"], 2,
     "a confidence is a percentage from 50 to below 100, got '150'"),
    (["bisect", "fp32/warptile", *ENDS, *BISECT, "--max-builds", "0"], 2, "--max-builds must be at least 2, got 0"),
    (["confirm", "fp32/warptile", "--size", "4096", "--good", "HEAD", "--bad", "HEAD~1", *BISECT], 2,
     "sgemm confirm: fp32/warptile at 4096 (the command line): the good end … is not an ancestor of the bad end"),
    (["confirm", "--notices", "{tmp}/notes/mine.txt", *BISECT], 2,
     "--notices {tmp}/notes/mine.txt: not a readable JSON file"),
    (["confirm", "fp32/nope", *ENDS, *BISECT], 2, "fp32/nope is not in the catalogue of the good end"),
    # no --machine: the notices file is read before the GPU would be asked to name the machine
    (["confirm", "--notices", "{tmp}/nothere.json", "--repo", "{repo}", "--results", "{results}"], 2,
     "--notices {tmp}/nothere.json: no such file"),
    (["confirm", "fp32/warptile", *ENDS, *BISECT, "--confidence", "100"], 2,
     "a confidence is a percentage from 50 to below 100, got '100'"),
]

VARIANTS = [
    # the command line
    (["list", "extra"], 2, "unrecognized arguments: extra"),
    (["list", "--device", "x"], 2, "a device index is a whole number, got 'x'"),
    (["list", "--wide", "-k", "fp99"], 2, "unknown kernel 'fp99'; did you mean fp32, fp16?"),
    (["list", "-k", "fp32", "-k", "nope"], 2, "unknown kernel 'nope'"),
    (["list", "-k", ""], 2, "unknown kernel ''"),
    (["check", "--shape", "1x1"], 2, "a shape is MxNxK"),
    (["check", "--shape", "1x1x1x1"], 2, "a shape is MxNxK"),
    (["check", "--shape", "1.5x2x2"], 2, "a shape is MxNxK"),
    (["check", "--shape", ""], 2, "a shape is MxNxK"),
    (["check", "--alpha", "inf"], 2, "expected a finite number, got 'inf'"),
    (["check", "--alpha", "1e400"], 2, "expected a finite number, got '1e400'"),
    (["check", "--beta=-nan"], 2, "expected a finite number, got '-nan'"),
    (["check", "--device", "1.5"], 2, "a device index is a whole number, got '1.5'"),
    (["check", "-k", "fp32/naive", "-k", "fp64/naive"], 2, "unknown kernel 'fp64/naive'"),
    (["bench", "--json", ""], 2, "argument --json: expected a path, got ''"),
    (["bench", "--json", "{tmp}/file.txt/x.json"], 2, "the folder {tmp}/file.txt is a file"),
    (["bench", "--json", "{tmp}/notes"], 2, "--json {tmp}/notes is a directory"),
    (["bench", "--json", "~/no/such/out.json"], 2, "the folder {home}/no/such does not exist"),
    (["bench", "--size", "1024", "--size", "0"], 2, "a size must be at least 1, got 0"),
    (["bench", "--size", "1e3"], 2, "a size is a whole number, got '1e3'"),
    (["bench", "--shape", "0x1x1"], 2, "M, N and K must be at least 1"),
    (["bench", "--shape", "4x4x4", "--size", "4"], 2, "not allowed with argument --shape"),
    (["bench", "--versus-baseline", "-k", "zz"], 2, "unknown kernel 'zz'"),
    # report: what it reads and where it writes, checked before the GPU is asked to name the machine
    (["report", "--out", ""], 2, "argument --out: expected a path, got ''"),
    (["report", "--out", "{repo}", "--results", "{results}", "--machine", "gpu-box"], 2,
     "--out {repo} holds a README.md that no report wrote"),
    (["report", "--out", ".", "--results", "{results}", "--machine", "gpu-box"], 2,
     ("--out . holds a README.md that no "
     "report wrote"), write("cwd/README.md", "mine"),
     "a README.md of someone's in the working directory"),
    (["report", "--out", "{results}", "--results", "{results}", "--machine", "gpu-box"], 2,
     "--out {results} lies in the asv results tree {results}"),
    (["report", "--out", "{results}/gpu-box/report", "--results", "{results}", "--machine", "gpu-box"], 2,
     "lies in the asv results tree {results}"),
    (["report", "--out", "{tmp}/no/such/report", "--results", "{results}", "--machine", "gpu-box"], 2,
     "--out {tmp}/no/such/report: the folder it would be made in, {tmp}/no/such, does not exist"),
    (["report", "--out", "{tmp}/file.txt/report"], 2, "the folder it would be made in, {tmp}/file.txt, is a file"),
    (["report", "--out", "~/no/such/report"], 2, "the folder it would be made in, {home}/no/such, does not exist"),
    ([*REPORT, "--results", ""], 2, "argument --results: expected a path, got ''"),
    ([*REPORT, "--results", "{tmp}/nowhere"], 2, "--results {tmp}/nowhere: no asv results there"),
    ([*REPORT, "--results", "{tmp}/file.txt"], 2, "--results {tmp}/file.txt: no asv results there"),
    ([*REPORT, "--results", "{tmp}/notes"], 2, "--results {tmp}/notes: no asv results there"),
    ([*REPORT, "--results", "{results}", "--machine", "gpu-box"], 2,
     "Gemm has parameters [], not this suite's ['kernel', 'size', 'precision']"),
    ([*REPORT, "--results", "{results}", "--machine", "gpu-box", "--commit", "fff"], 2,
     "no Gemm results for machine 'gpu-box' at commit fff"),
    ([*REPORT, "--results", "{results}", "--machine", "gpu-box", "--commit", "zzz"], 2,
     "argument --commit: expected a commit hash or its first hex digits, got 'zzz'"),
    ([*REPORT, "--results", "{results}", "--machine", "gpu-box", "--commit", ""], 2,
     "argument --commit: expected a commit hash or its first hex digits, got ''"),
    ([*REPORT, "--results", "{tmp}/bad", "--machine", "gpu-box"], 2, "Error parsing JSON in file '{tmp}/bad/gpu-box/",
     TRUNCATED, "a truncated run file"),
    ([*REPORT, "--results", "{results}", "--machine", ""], 2, "a machine name is 1 to 64"),
    ([*REPORT, "--results", "{results}", "--size", "1024"], 2,
     "with --results or --points the sizes are those measured then"),
    ([*REPORT, "--points", "{tmp}/none.json"], 2, "cannot read the points of a seed ladder report from"),
    ([*REPORT, "--points", "{tmp}/file.txt"], 2, "cannot read the points of a seed ladder report from"),
    ([*REPORT, "--points", "{tmp}/none.json", "--results", "{results}"], 2,
     "--points draws an earlier report again from its own figures: no --results, --machine or --commit"),
    ([*REPORT, "--across-gpus", "--points", "{tmp}/none.json"], 2, "cannot read the runs of a cross-GPU page"),
    ([*REPORT, "--machine", "gpu-box"], 2, "--machine and --commit choose a run of asv results: pass --results"),
    ([*REPORT, "--commit", "0123abc"], 2, "--machine and --commit choose a run of asv results: pass --results"),
    ([*REPORT, "--seed", "999", "--seed", "001"], 2, "unknown seed 999; seeds: 000, 001"),
    ([*REPORT, "--seed", ""], 2, "unknown seed ; seeds:"),
    ([*REPORT, "--across-gpus", "--results", "{results}", "--machine", "gpu-box"], 2,
     "--across-gpus takes every machine's newest run and one --size"),
    ([*REPORT, "--across-gpus", "--results", "{results}", "--size", "1024", "--size", "2048"], 2,
     "--across-gpus takes every machine's newest run and one --size"),
    ([*REPORT, "--across-gpus", "--results", "{results}"], 2, "Gemm has parameters [], not this suite's"),
    ([*REPORT, "--across-gpus", "--results", "{results}", "--counters", "{tmp}/notes"], 2,
     "(no --machine, --commit, --seed or --counters)"),
    ([*REPORT, "--results", "{results}", "--machine", "gpu-box", "--counters", "{tmp}/nowhere"], 2,
     "--counters {tmp}/nowhere: not a folder of Nsight Compute CSV exports"),
    ([*REPORT, "--results", "{results}", "--machine", "gpu-box", "--counters", "{tmp}/notes"], 2,
     "{tmp}/notes/fp16-x-4096.csv: not an Nsight Compute CSV export", write("notes/fp16-x-4096.csv", "hello"),
     "a CSV file that is no Nsight Compute export"),
    ([*REPORT, "--across-gpus", "--results", "{tmp}/file.txt"], 2, "no asv machine directories in {tmp}/file.txt"),
    ([*REPORT, "--across-gpus", "--results", "{tmp}/bad"], 2, "Error parsing JSON", TRUNCATED, "a truncated run file"),
    # merge
    (["merge", "{results}", "--into", ""], 2, "argument --into: expected a path, got ''"),
    (["merge", "", "--into", "{tmp}/merged"], 2, "argument sources: expected a path, got ''"),
    (["merge", "{results}", "--into", "{tmp}/data"], 2, "{results} lies inside --into {tmp}/data"),
    (["merge", "{results}", "--into", "{tmp}/file.txt/merged"], 2,
     "--into {tmp}/file.txt/merged: the folder it would be made in, {tmp}/file.txt, is a file"),
    (["merge", "{tmp}/file.txt", "--into", "{tmp}/merged"], 2, "{tmp}/file.txt: not a directory"),
    (["merge", "{results}/gpu-box", "--into", "{tmp}/merged"], 2, "cannot merge, nothing was written:", None, "", 3),
    (["merge", "{tmp}/bad", "--into", "{tmp}/merged"], 2, "{tmp}/bad/benchmarks.json: not valid JSON", BAD_BENCHMARKS,
     "a benchmarks.json cut short"),
    (["merge", "{tmp}/bad", "--into", "{tmp}/merged"], 2,
     ("{tmp}/bad/gpu-box/0123456789abcdef-existing.json: not an asv "
     "results file of machine 'gpu-box'"), TRUNCATED, "a truncated run file"),
    (["merge", "{tmp}/bad", "--into", "{results}"], 2, "cannot merge, nothing was written:", TRUNCATED,
     "a truncated run file over a good one", 3),
    # publish: every place checked before asv publish runs
    (["publish", "--results", "{results}", "--repo", "{repo}", "--html", ""], 2,
     "argument --html: expected a path, got ''"),
    (["publish", "--results", "", "--repo", "{repo}", "--html", "{tmp}/site"], 2,
     "argument --results: expected a path, got ''"),
    ([*PUBLISH, "--repo", "", "--html", "{tmp}/site"], 2, "argument --repo: expected a path, got ''"),
    ([*PUBLISH, "--html", "~"], 2, "--html {home} is not empty and is not a site `sgemm publish` made"),
    ([*PUBLISH, "--html", "/"], 2, "--html / holds the repository"),
    ([*PUBLISH, "--html", "{tmp}"], 2, "--html {tmp} holds the repository ({repo})"),
    ([*PUBLISH, "--html", "{repo}/sgemm"], 2, "is not empty and is not a site `sgemm publish` made"),
    ([*PUBLISH, "--html", "{repo}/kernels"], 2, "is not empty and is not a site `sgemm publish` made"),
    ([*PUBLISH, "--html", "{tmp}/gitsite"], 2, "--html {tmp}/gitsite is not empty and is not a site", GIT_SITE,
     "a gh-pages checkout no publish made"),
    ([*PUBLISH, "--html", "{tmp}/site", "--npm-cache", "{tmp}/file.txt"], 2, ("--npm-cache {tmp}/file.txt: not a "
     "directory")),
    ([*PUBLISH, "--html", "{tmp}/site", "--npm-cache", "{tmp}/no/such/cache"], 2,
     "--npm-cache {tmp}/no/such/cache: no such folder"),
    ([*PUBLISH, "--html", "{tmp}/site", "--npm-cache", "{tmp}/site"], 2, "--html {tmp}/site is the npm cache"),
    ([*PUBLISH, "--html", "{tmp}/site", "--npm-cache", ""], 2, "argument --npm-cache: expected a path, got ''"),
    # X12g: a cache named but not there is refused at once, not found missing offline after the site was built
    ([*PUBLISH, "--html", "{tmp}/site", "--npm-cache", "{tmp}/nonexistent"], 2,
     "--npm-cache {tmp}/nonexistent: no such folder; name the folder that holds the npm tarballs, or make it"),
    (["publish", "--results", "{results}/gpu-box", "--repo", "{repo}", "--html", "{tmp}/site"], 2,
     "{results}/gpu-box: not an asv results tree (no benchmarks.json)"),
    (["publish", "--results", "{tmp}/file.txt", "--repo", "{repo}", "--html", "{tmp}/site"], 2,
     "{tmp}/file.txt: not an asv results tree"),
    ([*PUBLISH, "--html", "{tmp}/site", "--size", "x"], 2, "a size is a whole number, got 'x'"),
    ([*PUBLISH, "--html", "{tmp}/site", "--size", "-1"], 2, "a size must be at least 1, got -1"),
    # history
    ([*HISTORY, "--html", ""], 2, "argument --html: expected a path, got ''"),
    ([*HISTORY, "--results", ""], 2, "argument --results: expected a path, got ''"),
    ([*HISTORY, "--work", ""], 2, "argument --work: expected a path, got ''"),
    ([*HISTORY, "--html", "~"], 2, "--html {home} is not empty and is not a site `sgemm publish` made"),
    ([*HISTORY, "--html", "."], 2, "--html . holds the results ({tmp}/cwd/results)"),
    ([*HISTORY, "--html", "{tmp}/gitsite"], 2, "--html {tmp}/gitsite is not empty and is not a site", GIT_SITE,
     "a gh-pages checkout no publish made"),
    ([*HISTORY, "--npm-cache", "{tmp}/file.txt"], 2, "--npm-cache {tmp}/file.txt: not a directory"),
    ([*HISTORY, "--npm-cache", "{tmp}/site", "--html", "{tmp}/site"], 2, "--html {tmp}/site is the npm cache"),
    # X28: as for publish, and by the dry run as by the run
    ([*HISTORY, "--npm-cache", "{tmp}/nonexistent"], 2, "--npm-cache {tmp}/nonexistent: no such folder"),
    ([*HISTORY, "--results", "{results}", "--html", "{tmp}/data"], 2, "--html {tmp}/data holds the results"),
    ([*HISTORY, "--results", "{repo}"], 2, "--work {repo}/.asv/history and --results {repo} overlap"),
    ([*HISTORY, "--results", "{repo}/.git"], 2, "--results {repo}/.git lies inside the repository's .git"),
    ([*HISTORY, "--work", "{repo}/.git/work"], 2, "--work {repo}/.git/work lies inside the repository's .git"),
    ([*HISTORY, "--work", "{results}", "--results", "{results}"], 2, "overlap"),
    ([*HISTORY, "--results", "{tmp}/file.txt/results"], 2,
     "--results {tmp}/file.txt/results: {tmp}/file.txt is not a directory"),
    ([*HISTORY, "--gpus", "0"], 2, "--gpus takes a number of GPUs (at least 1) or 'all', got '0'"),
    ([*HISTORY, "--gpus", "x"], 2, "--gpus takes a number of GPUs (at least 1) or 'all', got 'x'"),
    ([*HISTORY, "--first", "-1"], 2, "--first must be at least 1, got -1"),
    ([*HISTORY, "--first", "x"], 2, "--first is a whole number, got 'x'"),
    (["history", "--repo", "{tmp}/nowhere", "--dry-run"], 2, "{tmp}/nowhere has no asv.conf.json"),
    (["history", "--repo", "{tmp}/file.txt", "--dry-run"], 2, "{tmp}/file.txt has no asv.conf.json"),
    (["history", "--repo", "", "--dry-run"], 2, "argument --repo: expected a path, got ''"),
    (["history", "--repo", "{repo}", "--machine", "", "--dry-run"], 2, "a machine name is 1 to 64"),
    (["history", "--repo", "{repo}", "--machine", "..", "--dry-run"], 2, "a machine name is 1 to 64"),
    # machine: the file checked before the GPU is asked for the entry
    (["machine", "--file", "{tmp}/bad.json"], 2, "{tmp}/bad.json is not valid JSON", NOT_JSON, ("a file that is not "
     "JSON")),
    (["machine", "--file", "{tmp}/list.json"], 2, "{tmp}/list.json does not hold a JSON object", A_LIST,
     "a JSON list"),
    (["machine", "--file", "{tmp}/file.txt"], 2, "{tmp}/file.txt is not valid JSON"),
    (["machine", "--file", ""], 2, "argument --file: expected a path, got ''"),
    (["machine", "--file", "{tmp}/file.txt/machines.json"], 2, "the folder {tmp}/file.txt is a file"),
    (["machine", "--file", "~/no/such/machines.json"], 2, "the folder {home}/no/such does not exist"),
    (["machine", "--name", "a b"], 2, "a machine name is 1 to 64"),
    (["machine", "--name", "-x"], 2, "expected one argument"),
    (["machine", "--name", ".hidden"], 2, "a machine name is 1 to 64"),
    (["machine", "--device", "-1"], 2, "a device index must be at least 0, got -1"),
    # noise
    (["noise", "--machine", "gpu-box", "--results", "{tmp}/bad", "--out", "{tmp}/n.json"], 2,
     "cannot read the asv results of 'gpu-box' in {tmp}/bad: Error parsing JSON", TRUNCATED, "a truncated run file"),
    (["noise", "--machine", "gpu-box", "--results", "{results}", "--out", "{tmp}/n.json"], 2,
     "no case was measured in two rounds or more"),
    (["noise", "--machine", "gpu-box", "--results", "{tmp}/file.txt", "--out", "{tmp}/n.json"], 2,
     "{tmp}/file.txt has no results of machine 'gpu-box'"),
    (["noise", "--machine", "other-box", "--results", "{results}", "--out", "{tmp}/n.json"], 2,
     "{results} has no results of machine 'other-box'"),
    (["noise", "--machine", "box", "--rounds", "{tmp}/file.txt", "--out", "{tmp}/n.json"], 2,
     "--rounds {tmp}/file.txt: no such folder"),
    (["noise", "--machine", "box", "--rounds", "{tmp}/gate-work", "--out", "{tmp}/n.json"], 2,
     "cannot read the paired rounds in {tmp}/gate-work", ROUNDS_NOT_JSON, "a round file that is not JSON"),
    (["noise", "--machine", "box", "--rounds", "{tmp}/gate-work", "--out", "{tmp}/n.json"], 2,
     "cannot read the paired rounds in {tmp}/gate-work", ROUNDS_WORD_RATIO, "a ratio that is a word"),
    (["noise", "--machine", "box", "--rounds", "{tmp}/gate-work", "--out", "{tmp}/n.json"], 2,
     "cannot read the paired rounds in {tmp}/gate-work", lambda root: (ROUNDS_BAD_PLAN(root), write(
         "gate-work/rounds/round-1.jsonl", '{"label": "x", "ratio": 1.0}\n')(root)), "a round plan cut short"),
    (["noise", "--machine", "gpu-box", "--results", "{results}", "--out", ""], 2,
     "argument --out: expected a path, got ''"),
    (["noise", "--machine", "gpu-box", "--results", ""], 2, "argument --results: expected a path, got ''"),
    (["noise", "--machine", "gpu-box", "--results", "{results}", "--out", "{tmp}/file.txt/n.json"], 2,
     "the folder {tmp}/file.txt is a file"),
    (["noise", "--machine", "gpu-box", "--results", "{results}", "--out", "~/no/such/n.json"], 2,
     "the folder {home}/no/such does not exist"),
    (["noise", "--results", "{results}"], 2, "the following arguments are required: --machine"),
    (["noise", "--machine", "", "--results", "{results}"], 2, "a machine name is 1 to 64"),
    # gate
    ([*GATE, "--noise", "{tmp}/file.txt"], 2, "--noise {tmp}/file.txt is not a noise file"),
    ([*GATE, "--noise", "{tmp}/list.json"], 2, "--noise {tmp}/list.json is not a noise file", A_LIST, "a JSON list"),
    ([*GATE, "--noise", "{tmp}/other.json", "--machine", "box"], 2,
     "--noise {tmp}/other.json is the noise of machine 'other', not of 'box'", OTHER_NOISE, "another machine's noise"),
    ([*GATE, "--noise", "{tmp}/notes"], 2, "--noise {tmp}/notes: no such file"),
    ([*GATE, "--noise", "{tmp}/zero.json", "--machine", "box"], 2,
     "--noise {tmp}/zero.json: paired entry 'fp32/naive 4096x4096x4096': a noise entry's sd must be a positive number",
     ZERO_NOISE, "an entry of sd 0"),
    ([*GATE, "--noise", ""], 2, "argument --noise: expected a path, got ''"),
    ([*GATE, "--report", "{tmp}"], 2, "--report {tmp} is a directory: name a file"),
    ([*GATE, "--report", ""], 2, "argument --report: expected a path, got ''"),
    ([*GATE, "--report", "~/no/such/gate.md"], 2, "the folder {home}/no/such does not exist"),
    ([*GATE, "--work", "{tmp}/file.txt"], 2, "--work {tmp}/file.txt: not a directory"),
    ([*GATE, "--work", "{repo}/.git/gate"], 2, "--work {repo}/.git/gate lies inside the repository's .git"),
    ([*GATE, "--work", ""], 2, "argument --work: expected a path, got ''"),
    ([*GATE, "--threshold", "-1"], 2, "of at least 0 and below 100, got '-1'"),
    ([*GATE, "--threshold", "nan"], 2, "of at least 0 and below 100, got 'nan'"),
    ([*GATE, "--threshold", "100"], 2, "of at least 0 and below 100, got '100'"),
    ([*GATE, "--threshold-for", "fp16/*=nan"], 2, "expected PATTERN=PERCENT"),
    ([*GATE, "--threshold-for", "fp16/*=inf"], 2, "expected PATTERN=PERCENT"),
    ([*GATE, "--threshold-for", "fp16/*=-1"], 2, "expected PATTERN=PERCENT"),
    ([*GATE, "--threshold-for", "fp16/*"], 2, "expected PATTERN=PERCENT"),
    ([*GATE, "--rounds", "3.5"], 2, "at least 3"),
    ([*GATE, "--max-rounds", "2"], 2, "at least 3"),
    ([*GATE, "--size", "1024", "--size", "999"], 2, "--size 999: not among the suite's sizes"),
    ([*GATE, "-k", "fp32/nope"], 2, "unknown kernel 'fp32/nope'"),
    ([*GATE, "-k", "fp99"], 2, "unknown kernel 'fp99'"),
    ([*GATE, "-k", ""], 2, "unknown kernel ''"),
    ([*GATE, "--machine", ""], 2, "a machine name is 1 to 64"),
    ([*GATE, "--device", "x"], 2, "a device index is a whole number"),
    ([*GATE, "--unknown"], 2, "unrecognized arguments: --unknown"),
    (["gate", "HEAD~1", "--repo", "{repo}", "--dry-run"], 2, "the following arguments are required: head"),
    (["gate", "HEAD~1", "HEAD", "--repo", "{tmp}/nowhere", "--dry-run"], 2, "{tmp}/nowhere: no sgemm/catalogue.toml"),
    (["gate", "HEAD~1", "HEAD", "--repo", "{tmp}/file.txt", "--dry-run"], 2, "{tmp}/file.txt: no sgemm/catalogue.toml"),
    (["gate", "HEAD~1", "HEAD", "--repo", "", "--dry-run"], 2, "argument --repo: expected a path, got ''"),
    (["gate", "HEAD", "nosuch", "--repo", "{repo}", "--dry-run"], 2, "'nosuch' is not a commit of {repo}"),
    (["gate", "HEAD~5", "HEAD", "--repo", "{repo}", "--dry-run"], 2, "'HEAD~5' is not a commit of {repo}"),
    (["gate", "HEAD~1", "HEAD~1", "--repo", "{repo}", "--dry-run"], 2, "are the same commit: nothing to compare"),
]


# --- The catalogue: every command that reads it reaches its checks ---------------------------------------------
# What each broken field says is the catalogue's own test (test_catalogue.py, a row per field, calling the loader);
# here three kinds of breakage (a kernel's field, the [suite] table, the TOML itself) go through every command that
# reads the catalogue: each must say the loader's message in one line with exit 2, before any GPU work.

CATALOGUE = "repo/sgemm/catalogue.toml"


def catalogue_edit(old: str, new: str):
    """The world's catalogue with its first `old` replaced by `new`."""
    def setup(root: Path) -> None:
        path = root / CATALOGUE
        text = path.read_text()
        assert old in text, f"{old!r} is not in the catalogue: it changed, update this row"
        path.write_text(text.replace(old, new, 1))

    return setup


CATALOGUE_BREAKAGES = [  # (what, the change, what the message says)
    ("a kernel's field", catalogue_edit("min_compute_capability = 70", "min_compute_capability = 7.0"),  # fp32/cublas's
     "fp32/cublas: min_compute_capability must be an integer such as 80 for compute capability 8.0 (major * 10 + "
     "minor), got 7.0"),
    ("[suite] without sizes", catalogue_edit("sizes = [1000, 1024, 2048, 4096, 8192]\n", ""),
     "the [suite] table of {repo}/sgemm/catalogue.toml: missing fields ['sizes']"),
    ("[suite] header cut short", catalogue_edit("\n[suite]\n", "\n[suite\n"),
     "cannot read {repo}/sgemm/catalogue.toml: not valid TOML at line"),
]
# The commands that read the working tree's catalogue (gate, history) and those that read the package's own.
CATALOGUE_READERS = [
    (["gate", "HEAD~1", "HEAD", "--repo", "{repo}", "--dry-run"], "", False),
    (["history", "--repo", "{repo}", "--machine", "box", "--dry-run"], "the catalogue cannot be read: … ", False),
    (["list"], "", True),
    (["check", "-k", "fp32/naive"], "", True),
    (["bench", "-k", "fp32/naive", "--size", "1024"], "", True),
    (["report", "--out", "{tmp}/report", "--results", "{results}", "--machine", "gpu-box"], "", True),
    (["publish", "--results", "{results}", "--repo", "{repo}", "--html", "{tmp}/site"], "", True),
]


def catalogue_rows() -> list[Row]:
    return [Row(tuple(argv), 2, before + message, setup, what, own_catalogue=own)
            for argv, before, own in CATALOGUE_READERS for what, setup, message in CATALOGUE_BREAKAGES]


# --- The newcomer's trial of 2026-11-27 (shared/reviews/newcomer-2026-11-27.md): each input by its id there -------


def garbled(tree: Path) -> None:
    """The run file overwritten by bytes that are not UTF-8, as `head -c 3000 /dev/urandom` would."""
    (tree / RUN_FILE).write_bytes(bytes(range(128, 256)) * 4)


def appended(rel: str, text: str):
    def setup(root: Path) -> None:
        with open(root / rel, "a") as out:
            out.write(text)

    return setup


NOT_UTF8 = results_copy("bad", garbled)
RUN_PATH = "{tmp}/bad/" + RUN_FILE
NOT_MEASURED = "move it aside or restore it, nothing was measured"
NEWCOMER = [
    # X12f, X12d: the dry run refuses a run file the run would refuse, with or without the site
    ([*HISTORY, "--results", "{tmp}/bad"], 2, f"Error parsing JSON in file '{RUN_PATH}' … {NOT_MEASURED}",
     TRUNCATED, "X12f: a truncated run file"),
    ([*HISTORY, "--results", "{tmp}/bad", "--no-site"], 2, f"Error parsing JSON in file '{RUN_PATH}' … {NOT_MEASURED}",
     TRUNCATED, "X12f: a truncated run file, no site"),
    ([*HISTORY, "--results", "{tmp}/bad"], 2, f"{RUN_PATH}: not an asv results file (UnicodeDecodeError: … "
     f"{NOT_MEASURED}", NOT_UTF8, "X12d: a run file that is not UTF-8"),
    ([*PUBLISH, "--html", "{tmp}/site", "--results", "{tmp}/bad"], 2,
     f"{RUN_PATH}: not an asv results file of machine 'gpu-box' (", NOT_UTF8, "X12d: a run file that is not UTF-8"),
    (["merge", "{tmp}/bad", "--into", "{tmp}/merged"], 2,
     f"cannot merge, nothing was written: {RUN_PATH}: not an asv results file of machine 'gpu-box'", NOT_UTF8,
     "X12d: a run file that is not UTF-8"),
    # RO9, X34b, X40: a place that cannot be written, found by trying (root passes every look at the mode bits)
    ([*GATE, "-k", "fp32/naive", "--report", "/proc/gate.md"], 2, "--report /proc/gate.md: /proc cannot be written"),
    ([*GATE, "-k", "fp32/naive", "--work", "/proc/x"], 2, "--work /proc/x: /proc cannot be written"),
    ([*HISTORY, "--work", "/proc/x"], 2, "--work /proc/x: /proc cannot be written"),
    ([*HISTORY, "--results", "/proc/x"], 2, "--results /proc/x: /proc cannot be written"),
    (["machine", "--name", "vm", "--file", "/proc/m.json"], 2, "--file /proc/m.json: /proc cannot be written"),
    (["noise", "--machine", "box", "--rounds", "{tmp}/notes", "--out", "/proc/n.json"], 2,
     "--out /proc/n.json: /proc cannot be written"),
    (["bench", "--json", "/proc/bench.json"], 2, "--json /proc/bench.json: /proc cannot be written"),
    (["merge", "{results}", "--into", "/proc/merged"], 2, "--into /proc/merged: /proc cannot be written"),
    # X15: an uncommitted change to what the gate measures is named, and the gate refuses to pass it unmeasured
    ([*GATE], 2, "uncommitted changes to what the gate measures (kernels/fp32_naive.cu): the gate measures the two "
     "commits as committed", appended("repo/kernels/fp32_naive.cu", "// x\n"), "X15: a kernel edited, not committed"),
    ([*GATE], 2, "uncommitted changes to what the gate measures (kernels/fp32_new.cu)",
     write("repo/kernels/fp32_new.cu", "// new\n"), "X15: a kernel file not added"),
    ([*GATE, "-k", "fp32/naive"], 2, "uncommitted changes to what the gate measures (sgemm/catalogue.toml)",
     appended(CATALOGUE, "# mine\n"), "X15: the catalogue edited, not committed"),
    ([*GATE], 0, "0 cases of 0 kernels (nothing to measure)", appended("repo/README.md", "mine\n"),
     "X15: an edit of the documentation, which measures nothing"),
    # U02: a path of bytes that are not UTF-8 is refused at once (an emoji is UTF-8, and works)
    ([*PUBLISH, "--html", "{tmp}/bad\udcff"], 2, r"argument --html: '{tmp}/bad\xff' is not valid UTF-8: asv keeps "
     "every path in UTF-8 files"),
    ([*HISTORY, "--results", "{tmp}/r\udcff"], 2, r"argument --results: '{tmp}/r\xff' is not valid UTF-8"),
]

BAD_INPUT = rows(KNOWN) + rows(VARIANTS) + rows(BISECT_AND_CONFIRM) + catalogue_rows() + rows(NEWCOMER)


def test_the_table_has_every_kind_of_row():
    commands = {row.argv[0] if row.argv else "(none)" for row in BAD_INPUT}
    assert commands == {"(none)", "frobnicate", "list", "check", "bench", "report", "merge", "publish", "history",
                        "machine", "noise", "gate", "bisect", "confirm"}
    assert len(BAD_INPUT) >= 250
    assert len({row.id for row in BAD_INPUT}) == len(BAD_INPUT), "two rows with one id"


@pytest.mark.parametrize("row", BAD_INPUT, ids=[row.id for row in BAD_INPUT])
def test_bad_input_is_refused_with_its_exit_status_and_first_line_touching_nothing(row, world, no_gpu_may_be_touched,
                                                                                    monkeypatch, capsys):
    values = places(world)
    if row.setup:
        row.setup(world)
    if row.own_catalogue:
        use_own_catalogue(monkeypatch, world)
    before, checkout = snapshot(world), checkout_state()
    status = cli.main([fill(arg, values) for arg in row.argv])
    out, err = capsys.readouterr()
    assert "Traceback" not in out + err
    assert status == row.status, err
    assert err.count("\n") == row.lines, err
    assert says(err.splitlines()[0], fill(row.message, values)), err
    after = snapshot(world)
    assert {name: after.get(name) for name in before} == before, "something that was there changed or went"
    assert sorted(set(after) - set(before)) == [], "something new was made"
    assert checkout_state() == checkout, "a file of this checkout changed"


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
    assert list(tmp_path.iterdir()) == []  # no lock file beside the site either: locks lie in the user's cache


# --- What a row cannot say ---------------------------------------------------------------------------------------


def run_in(world: Path, argv: list[str], capsys) -> tuple[int, str]:
    """`sgemm ARGV` in the world, its {placeholders} filled; the exit status and what it said on stderr, after the
    assertions every row makes: no traceback, one line, and nothing that was there changed or new."""
    before = snapshot(world)
    status = cli.main([fill(arg, places(world)) for arg in argv])
    out, err = capsys.readouterr()
    assert "Traceback" not in out + err and err.count("\n") == 1, err
    after = snapshot(world)
    assert {name: after.get(name) for name in before} == before, "something that was there changed or went"
    assert sorted(set(after) - set(before)) == [], "something new was made"
    return status, err


@pytest.fixture
def no_gpu_here(monkeypatch):
    """A box without an NVIDIA driver, as the newcomer's: NVML answers that it is not there."""
    import sgemm.results.machine
    from sgemm.measuring.telemetry import TelemetryUnavailable

    def unavailable(*args, **kwargs):
        raise TelemetryUnavailable("NVML is not available: NVML Shared Library Not Found")

    for module in ("cupy", "pynvml", "cuda.bench"):
        monkeypatch.setitem(sys.modules, module, None)
    monkeypatch.setattr(sgemm.results.machine, "gpu_identity", unavailable)
    monkeypatch.setattr(sgemm.results.machine, "driver_present", lambda: False)


BISECT_ENDS = ["fp32/naive", "--size", "1024", "--good", "HEAD~1", "--bad", "HEAD", "--repo", "{repo}",
               "--results", "{results}"]
WITHOUT_A_GPU = [  # (newcomer's id, argv, what the one line says): 2, which bisect's help gives no answer, not 1
    ("X36b", ["bisect", *BISECT_ENDS, "--machine", "box"], "sgemm bisect: no GPU found through NVML, no NVIDIA driver "
     "on this machine (NVML is not available: NVML Shared Library Not Found): nothing can be measured here"),
    ("X36", ["bisect", *BISECT_ENDS], "sgemm bisect: no GPU found through NVML, … give --machine to name this machine"),
    ("X36c", ["confirm", *BISECT_ENDS, "--machine", "box"], "sgemm confirm: no GPU found through NVML, … nothing can "
     "be measured here"),
]


@pytest.mark.parametrize("newcomer, argv, message", WITHOUT_A_GPU, ids=[row[0] for row in WITHOUT_A_GPU])
def test_bisect_and_confirm_without_a_gpu_say_so_with_exit_2_not_not_found(world, no_gpu_here, capsys, newcomer,
                                                                           argv, message):
    status, err = run_in(world, argv, capsys)
    assert status == 2 and says(err, fill(message, places(world))), err


def refuse_writes_in(monkeypatch, folder: Path, errno_number: int) -> None:
    """Every file made in `folder` (the probes of sgemm.writable and everything written) fails with `errno_number`,
    as on a read-only mount or a full disk; what is made elsewhere is made."""
    import errno as errnos
    import tempfile

    import sgemm.atomic
    import sgemm.writable

    real = tempfile.mkstemp

    def mkstemp(*args, dir=None, **kwargs):
        if dir is not None and Path(dir).resolve().is_relative_to(folder.resolve()):
            raise OSError(errno_number, os.strerror(errno_number), str(Path(dir) / ".tmp"))
        return real(*args, dir=dir, **kwargs)

    fake = type("tempfile", (), {"mkstemp": staticmethod(mkstemp)})
    monkeypatch.setattr(sgemm.writable, "tempfile", fake)
    monkeypatch.setattr(sgemm.atomic, "tempfile", fake)
    assert errno_number in (errnos.EROFS, errnos.ENOSPC)


READ_ONLY = [  # (newcomer's id, argv, what the one line says), with {tmp}/ro a read-only mount
    ("RO9", [*GATE, "-k", "fp32/naive", "--report", "{tmp}/ro/gate.md"], "--report {tmp}/ro/gate.md: {tmp}/ro is "
     "read-only"),
    ("X34b", [*GATE, "-k", "fp32/naive", "--work", "{tmp}/ro/work"], "--work {tmp}/ro/work: {tmp}/ro is read-only"),
    ("RO-results", [*HISTORY, "--results", "{tmp}/ro/results"], "--results {tmp}/ro/results: {tmp}/ro is read-only"),
    ("P14b", [*PUBLISH, "--html", "{tmp}/ro/site"], "--html {tmp}/ro/site: {tmp}/ro is read-only"),
    ("P14b-history", [*HISTORY, "--html", "{tmp}/ro/site"], "--html {tmp}/ro/site: {tmp}/ro is read-only"),
    ("RO-merge", ["merge", "{results}", "--into", "{tmp}/ro/merged"], "--into {tmp}/ro/merged: {tmp}/ro is read-only"),
    ("RO-machine", ["machine", "--file", "{tmp}/ro/machines.json"], "--file {tmp}/ro/machines.json: {tmp}/ro is "
     "read-only"),
]


def test_an_energy_sizes_variable_that_names_no_sizes_stops_the_history_before_any_work(world, no_gpu_may_be_touched,
                                                                                        monkeypatch, capsys):
    monkeypatch.setenv("SGEMM_ENERGY_SIZES", "big")
    before = snapshot(world)
    status = cli.main([fill(arg, places(world)) for arg in HISTORY])
    out, err = capsys.readouterr()
    assert "Traceback" not in out + err and status == 2 and err.count("\n") == 1, err
    assert says(err, "sgemm history: SGEMM_ENERGY_SIZES='big': not a comma-separated list of sizes"), err
    assert snapshot(world) == before


@pytest.mark.parametrize("newcomer, argv, message", READ_ONLY, ids=[row[0] for row in READ_ONLY])
def test_a_read_only_place_is_refused_before_any_work_by_the_dry_run_too(world, no_gpu_may_be_touched, monkeypatch,
                                                                          capsys, newcomer, argv, message):
    import errno

    (world / "ro").mkdir()
    refuse_writes_in(monkeypatch, world / "ro", errno.EROFS)
    status, err = run_in(world, argv, capsys)
    assert status == 2 and says(err, fill(message, places(world))), err


def test_a_site_that_is_a_read_only_mount_point_is_refused_before_it_is_built(world, no_gpu_may_be_touched,
                                                                              monkeypatch, capsys):
    """P14: rename(2) cannot move a mount point away, which the publish found only after building the site."""
    import errno

    import sgemm.site.publish

    (world / "ro").mkdir()
    refuse_writes_in(monkeypatch, world / "ro", errno.EROFS)
    monkeypatch.setattr(sgemm.site.publish, "is_mount_point", lambda path: Path(path) == world / "ro")
    status, err = run_in(world, [*PUBLISH, "--html", "{tmp}/ro"], capsys)
    said = "sgemm publish: --html {tmp}/ro is a mount point ({tmp}/ro is read-only): the site is built beside it"
    assert status == 2 and says(err, fill(said, places(world))), err


def test_a_merge_onto_a_full_disk_writes_nothing_and_says_so(world, no_gpu_may_be_touched, monkeypatch, capsys):
    """FD2: the second file of the merge meets a full disk; the first, written already, must not be left behind."""
    import errno

    import sgemm.atomic

    real, written = sgemm.atomic._write_temporary, []

    def full_after_one(path, content):
        if written:
            raise OSError(errno.ENOSPC, os.strerror(errno.ENOSPC))
        written.append(real(path, content))
        return written[-1]

    monkeypatch.setattr(sgemm.atomic, "_write_temporary", full_after_one)
    status, err = run_in(world, ["merge", "{results}", "--into", "{tmp}/merged"], capsys)
    assert status == 2 and written, err
    assert says(err, fill("sgemm merge: cannot merge, nothing was written: --into {tmp}/merged: no space left on the "
                          "device of {tmp}/merged", places(world))), err


def _a_site_of_asv(repo, results_dir, html_dir):
    html_dir.mkdir()
    (html_dir / "index.html").write_text("<html><head></head><body></body></html>")
    return []


def test_a_publish_onto_a_full_disk_is_one_line_whether_asv_or_the_publish_meets_it(world, no_gpu_may_be_touched,
                                                                                     monkeypatch, capsys):
    """FD1: asv's own traceback (its last line the OSError) or a write of the publish's own, one line naming the
    cause and the place; the site is built beside --html, so nothing is left of it there."""
    import errno
    import subprocess as subprocesses

    import sgemm.site.publish
    import sgemm.watch.page

    said = "sgemm publish: --html {tmp}/site: no space left on the device of {tmp}; nothing was changed"
    asv_traceback = ('Traceback (most recent call last):\n  File "asv/commands/publish.py", line 119, in run\n'
                     "OSError: [Errno 28] No space left on device\n")
    real_run = subprocesses.run

    def run(command, *args, **kwargs):  # asv publish fails as it did on the full disk; git answers as it does
        if command[1:4] == ["-m", "asv", "publish"]:
            return subprocesses.CompletedProcess(command, 1, "", asv_traceback)
        return real_run(command, *args, **kwargs)

    monkeypatch.setattr(subprocesses, "run", run)
    status, err = run_in(world, [*PUBLISH, "--html", "{tmp}/site"], capsys)
    assert status == 2 and says(err, fill(said, places(world))), err

    def full(path, document):
        raise OSError(errno.ENOSPC, os.strerror(errno.ENOSPC), str(path))

    monkeypatch.setattr(sgemm.site.publish, "asv_publish", _a_site_of_asv)
    monkeypatch.setattr(sgemm.watch.page, "write_notices", full)  # the watch's part of the site
    status, err = run_in(world, [*PUBLISH, "--html", "{tmp}/site"], capsys)
    assert status == 2 and says(err, fill(said, places(world))), err


@pytest.mark.parametrize("argv, where", [(["list"], "sgemm.catalogue.load_catalogue"),
                                          ([*GATE], "sgemm.gate.plan.input_problem"),
                                          (["merge", "{results}", "--into", "{tmp}/merged"],
                                           "sgemm.site.merge.merge_results"),
                                          ([*HISTORY], "sgemm.history.run.check_places")])
def test_ctrl_c_in_any_command_is_one_line_and_the_status_of_an_interrupt(world, no_gpu_may_be_touched, monkeypatch,
                                                                           capsys, argv, where):
    def interrupted(*args, **kwargs):
        raise KeyboardInterrupt

    monkeypatch.setattr(where, interrupted)
    status, err = run_in(world, argv, capsys)
    assert status == 130 and err == f"sgemm {argv[0]}: interrupted\n", err


# X09: the driver of a history whose `asv run` is a child that says it started and then waits; the box has no GPU.
INTERRUPTED_HISTORY = """
import signal
import sys
from pathlib import Path

import sgemm.commands.history
import sgemm.history.run
from sgemm import cli
from sgemm.measuring.record import NoGpuError

started = Path(sys.argv[1])


def no_gpu(device):
    raise NoGpuError("no GPU on this test box")


def slow_asv(chosen, hashes):
    return [sys.executable, "-c", "import os, sys, time; from pathlib import Path; "
            f"Path({str(started)!r}).write_text(str(os.getpid())); time.sleep(600)"]


sgemm.commands.history.device_info = no_gpu
sgemm.history.run._asv_run = slow_asv
# Ctrl-C as a terminal's foreground job takes it, whoever started the tests: a shell without job control starts its
# background jobs (`tests.sh &`) with SIGINT ignored, and the ignoring would be inherited down to here.
signal.signal(signal.SIGINT, signal.default_int_handler)
sys.exit(cli.main(sys.argv[2:]))
"""


@pytest.mark.parametrize("to_whom", ["group", "process"])
def test_ctrl_c_during_the_history_ends_asv_and_says_one_line_with_the_status_of_an_interrupt(world, tmp_path,
                                                                                               to_whom):
    """SIGINT to the command's process group (Ctrl-C on a terminal), or to its process alone (`kill -INT`, a job
    runner cancelling): either way asv, which does not get the first, is ended."""
    import signal
    import time

    driver, started = tmp_path / "driver.py", tmp_path / "asv-started"
    driver.write_text(INTERRUPTED_HISTORY)
    results_before = snapshot(world / "data")
    argv = [fill(arg, places(world)) for arg in ["history", "--repo", "{repo}", "--machine", "box", "--results",
                                                 "{results}", "--html", "{tmp}/site", "--work", "{tmp}/work"]]
    # In a process group of its own, which Ctrl-C signals as a whole (the terminal's foreground group).
    history = subprocess.Popen([sys.executable, str(driver), str(started), *argv], cwd=world / "cwd",
                               stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, process_group=0,
                               env=dict(os.environ, HOME=str(world / "home")))
    try:
        deadline = time.monotonic() + 120
        while not started.is_file() or not started.read_text():
            assert history.poll() is None and time.monotonic() < deadline, history.communicate()
            time.sleep(0.1)
        (os.killpg if to_whom == "group" else os.kill)(history.pid, signal.SIGINT)
        out, err = history.communicate(timeout=60)
    finally:  # whatever the outcome, nothing of the test is left running
        if history.poll() is None:
            os.killpg(history.pid, signal.SIGKILL)
        if started.is_file() and started.read_text() and os.path.exists(f"/proc/{started.read_text()}"):
            stray = int(started.read_text())
            os.kill(stray, signal.SIGKILL)
            assert False, f"asv's stand-in (process {stray}) was left running"
    asv = int(started.read_text())
    assert "Traceback" not in out + err, err
    assert history.returncode == 130 and err.splitlines()[-1] == "sgemm history: interrupted", err
    with pytest.raises(ProcessLookupError):  # asv's stand-in was ended and waited for, not left running
        os.kill(asv, 0)
    assert snapshot(world / "data") == results_before  # nothing recorded was lost


# --- A catalogue that cannot be read, in a fresh process -------------------------------------------------------
# The rows above run in this process, where the package was imported with a good catalogue: a module that read the
# catalogue at import would pass them. The newcomer ran a clone whose catalogue was broken, so every import read it.


@pytest.fixture(scope="module")
def clone_of_the_package(tmp_path_factory) -> Path:
    """A git clone's worth of the project (package, kernels, asv configuration), two commits, to be run with
    PYTHONPATH at it: its package reads its own catalogue."""
    clone = tmp_path_factory.mktemp("clone") / "sgemm-clone"
    no_cache = shutil.ignore_patterns("__pycache__")
    for folder in ("sgemm", "kernels", "benchmarks"):
        shutil.copytree(ROOT / folder, clone / folder, ignore=no_cache)
    shutil.copy(ROOT / "asv.conf.json", clone / "asv.conf.json")
    git(clone, "init", "-q", "-b", "main")
    git(clone, "add", "-A")
    git(clone, "commit", "-qm", "first")
    (clone / "README.md").write_text("second\n")
    git(clone, "add", "-A")
    git(clone, "commit", "-qm", "second")
    return clone


SIZES_LINE = "sizes = [1000, 1024, 2048, 4096, 8192]\n"
BROKEN_CATALOGUES = {
    "[suite] without sizes": lambda text: text.replace(SIZES_LINE, "", 1),  # the first is the suite's
    "[suite] header cut short": lambda text: text.replace("\n[suite]\n", "\n[suite\n", 1),
    "empty": lambda text: "",
}
FRESH_PROCESS = [  # (newcomer's id, the breakage, argv, status, first line of stderr, or None for none at all)
    ("X37", "[suite] without sizes", ["--help"], 0, None),
    ("X37b", "empty", ["list", "--help"], 0, None),
    ("C16", "[suite] without sizes", ["list"], 2,
     "sgemm: the [suite] table of {clone}/sgemm/catalogue.toml: missing fields ['sizes']"),
    ("C01", "[suite] header cut short", ["list"], 2,
     "sgemm: cannot read {clone}/sgemm/catalogue.toml: not valid TOML at line"),
    ("X22", "empty", ["list"], 2, "sgemm: {clone}/sgemm/catalogue.toml has no [suite] table"),
    ("X22h", "empty", ["history", "--dry-run", "--machine", "box"], 2,
     "sgemm history: the catalogue cannot be read: {clone}/sgemm/catalogue.toml has no [suite] table"),
    ("X22g", "empty", ["gate", "HEAD~1", "HEAD", "--dry-run"], 2,
     "sgemm: {clone}/sgemm/catalogue.toml has no [suite] table"),
]


@pytest.mark.parametrize("newcomer, breakage, argv, status, message", FRESH_PROCESS,
                         ids=[f"{row[0]} {' '.join(row[2])} [{row[1]}]" for row in FRESH_PROCESS])
def test_a_catalogue_that_cannot_be_read_is_one_line_in_a_fresh_process(clone_of_the_package, tmp_path, newcomer,
                                                                        breakage, argv, status, message):
    clone = tmp_path / "clone"
    shutil.copytree(clone_of_the_package, clone, symlinks=True)
    path = clone / "sgemm" / "catalogue.toml"
    broken = BROKEN_CATALOGUES[breakage](path.read_text())
    assert broken != path.read_text(), "the catalogue changed: update this breakage"
    path.write_text(broken)
    (tmp_path / "home").mkdir()
    done = subprocess.run([sys.executable, "-m", "sgemm", *argv], cwd=clone, capture_output=True, text=True,
                          env=dict(os.environ, PYTHONPATH=str(clone), HOME=str(tmp_path / "home")), timeout=120)
    assert "Traceback" not in done.stdout + done.stderr, done.stderr
    assert done.returncode == status, done.stderr
    if message is None:
        assert done.stderr == "" and done.stdout.startswith("usage: sgemm")
    else:
        assert done.stderr.count("\n") == 1 and says(done.stderr, message.replace("{clone}", str(clone))), done.stderr


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
    assert set(after) == set(before), set(after) - set(before)  # not even a lock file
    assert not (clone / "missing").exists()
