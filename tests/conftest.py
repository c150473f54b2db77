import json
import os
import shutil
import subprocess
import sys
import textwrap
import threading
from dataclasses import dataclass
from pathlib import Path

import pytest

# The project's asv.conf.json runs benchmarks this way: a server imports the suite once and forks a process per
# benchmark and parameter combination. asv's default starts a Python for each, about half a second apiece on a 2-core
# box, which made most of the time of the tests that run asv.
LAUNCH_METHOD = "forkserver"


def _no_gpu_reason() -> str | None:
    from sgemm.measuring.record import NoGpuError, device_info

    try:
        device_info()
    except NoGpuError as exc:
        return str(exc)
    return None


# What `pip install -e '.[test]'` alone lacks: the CUDA stack of the cuda13 (or cuda12) extra.
_STACK_HINT = "pip install -e '.[cuda13,test]'"


def _installed(module: str) -> bool:
    import importlib.util

    try:
        return importlib.util.find_spec(module) is not None
    except ModuleNotFoundError:  # its parent package is missing
        return False


def _skip_without_modules(items) -> None:
    """A test marked requires("cupy") skips, saying so, where that module is not installed."""
    for item in items:
        for marker in item.iter_markers("requires"):
            missing = [name for name in marker.args if not _installed(name)]
            if missing:
                item.add_marker(pytest.mark.skip(reason=f"needs {', '.join(missing)} ({_STACK_HINT})"))


# Its module's two scenarios take 20 s and 10 s to set up: collected late, they were the last thing one xdist worker
# ran while the other had finished (12 s of a 2-core run). First, they are spread among the rest.
RUN_FIRST = ("tests/tools/acceptance/test_history_demo.py",)


def pytest_collection_modifyitems(config, items):
    items.sort(key=lambda item: item.nodeid.split("::")[0] not in RUN_FIRST)  # stable: the rest keep their order
    _skip_without_modules(items)
    marked = [item for item in items if "gpu" in item.keywords or "no_gpu" in item.keywords]
    if not marked:
        return
    reason = _no_gpu_reason()
    for item in marked:
        if "gpu" in item.keywords and reason:
            item.add_marker(pytest.mark.skip(reason=f"needs a CUDA GPU ({reason})"))
        elif "no_gpu" in item.keywords and not reason:
            item.add_marker(pytest.mark.skip(reason="tests the behaviour without a GPU, and this machine has one"))


# A one-line message held to its pieces, for the bad-input tables of the commands and the catalogue.
def says(line: str, message: str) -> bool:
    """Whether `line` holds each piece of `message` (pieces apart: " … "), in that order."""
    at = 0
    for piece in message.split(" … "):
        at = line.find(piece, at)
        if at < 0:
            return False
        at += len(piece)
    return True


@pytest.fixture
def asv_run_suite(tmp_path):
    """Run `asv run` (current interpreter, samples recorded) on a one-module suite in a fresh git repo; returns the
    repo, whose results/<machine>/ holds what asv wrote."""

    def run(module: str, source: str, machine: str = "synthetic"):
        repo = tmp_path / "repo"
        (repo / "benchmarks").mkdir(parents=True)
        (repo / "benchmarks" / "__init__.py").write_text("")
        (repo / "benchmarks" / f"{module}.py").write_text(textwrap.dedent(source))
        (repo / "asv.conf.json").write_text(json.dumps({
            "version": 1, "project": "synthetic", "repo": ".", "branches": ["main"],
            "environment_type": "existing", "benchmark_dir": "benchmarks", "results_dir": "results",
            "html_dir": "html", "env_dir": "env", "launch_method": LAUNCH_METHOD,
        }))
        env = dict(os.environ, HOME=str(tmp_path), GIT_AUTHOR_NAME="t", GIT_AUTHOR_EMAIL="t@t",
                   GIT_COMMITTER_NAME="t", GIT_COMMITTER_EMAIL="t@t")

        def sh(*args):
            return subprocess.run(args, cwd=repo, env=env, check=True, capture_output=True, text=True)

        sh("git", "init", "-q", "-b", "main")
        sh("git", "add", "-A")
        sh("git", "commit", "-qm", "synthetic")
        sh(sys.executable, "-m", "asv", "machine", "--yes", "--machine", machine)
        sh(sys.executable, "-m", "asv", "run", "--python=same", "--machine", machine, "--record-samples",
           "--set-commit-hash", sh("git", "rev-parse", "HEAD").stdout.strip())
        return repo

    return run


@pytest.fixture
def project_repo(tmp_path, monkeypatch) -> Path:
    """A scratch git repository holding this project's kernels, catalogue, code and configuration, committed once."""
    for name, value in (("GIT_AUTHOR_NAME", "t"), ("GIT_AUTHOR_EMAIL", "t@t"), ("GIT_COMMITTER_NAME", "t"),
                        ("GIT_COMMITTER_EMAIL", "t@t")):
        monkeypatch.setenv(name, value)
    root, repo = Path(__file__).resolve().parents[1], tmp_path / "repo"
    no_cache = shutil.ignore_patterns("__pycache__")
    for folder in ("kernels", "benchmarks", "sgemm"):
        shutil.copytree(root / folder, repo / folder, ignore=no_cache)
    for name in ("asv.conf.json", "pyproject.toml"):
        shutil.copy(root / name, repo / name)
    for command in (["init", "-q", "-b", "main"], ["add", "-A"], ["commit", "-qm", "base"]):
        subprocess.run(["git", "-C", str(repo), *command], check=True, capture_output=True)
    return repo


# --- The npm tarballs of the site's libraries (test_site.py, test_publish.py) -----------------------------------


@pytest.fixture(scope="session")
def npm_cache(request, tmp_path_factory):
    """A folder holding the tarball of every package the site needs: $SGEMM_NPM_CACHE if set (for machines
    without internet), else one kept in pytest's cache, filled from the npm registry the first time."""
    from sgemm.site import vendor
    from sgemm.site.vendor import SiteError

    if os.environ.get("SGEMM_NPM_CACHE"):
        folder = Path(os.environ["SGEMM_NPM_CACHE"])
    elif getattr(request.config, "cache", None) is not None:
        folder = Path(request.config.cache.mkdir("sgemm-npm-tarballs"))
    else:
        folder = tmp_path_factory.mktemp("npm-tarballs")
    try:
        vendor.fill_cache(folder, timeout=30)
    except SiteError as exc:
        reason = f"the npm tarballs are neither in {folder} nor downloadable: {exc}"
        if os.environ.get("SGEMM_REQUIRE_CHROMIUM") == "1":  # where the site's tests must run, as in test_site.py
            pytest.fail(f"{reason} (SGEMM_REQUIRE_CHROMIUM=1)")
        pytest.skip(reason)
    return folder


# --- One commit's asv results from two GPU boxes, in one tree (test_crossgpu.py, test_publish.py) ---------------

# What a box measures is set through the environment of its `asv run`: its figures, and which kernels and sizes it
# ran; the others are skips (NotImplementedError), as a kernel or size a box cannot run is in the real suite.
TWO_GPU_GEMM_SUITE = """
import os

RATE = {"cublas": 50.0, "naive": 5.0, "float4": 35.0}


def _ran(what):
    return os.environ["SYNTHETIC_" + what].split(",")


class Gemm:
    params = [["cublas", "naive", "float4"], [1024, 2048, 4096], ["fp32", "fp16"]]
    param_names = ["kernel", "size", "precision"]

    def setup(self, kernel, size, precision):
        if precision == "fp16" and kernel != "cublas":
            raise NotImplementedError("there is no such fp16 kernel")
        if kernel not in _ran("KERNELS") or str(size) not in _ran("SIZES"):
            raise NotImplementedError("not measured on this GPU")

    def track_tflops(self, kernel, size, precision):
        scale = float(os.environ["SYNTHETIC_SCALE"])
        return scale * RATE[kernel] * size / 4096 * (10 if precision == "fp16" else 1)

    track_tflops.unit = "TFLOP/s"

    def track_sm_clock(self, kernel, size, precision):
        clock = float(os.environ["SYNTHETIC_SM_CLOCK"]) + size / 1024
        return {"samples": [clock - 4, clock, clock + 4], "number": 1}

    track_sm_clock.unit = "MHz"
"""

TWO_GPU_GPU_SUITE = """
class Gpu:
    def track_sm_count(self):
        return 132

    track_sm_count.unit = "SMs"

    def track_max_sm_clock(self):
        return 1980.0

    track_max_sm_clock.unit = "MHz"

    def track_driver_version(self):
        return 580159004.0  # 580.159.04, as benchmarks/bench_gpu.py records it
"""


@dataclass(frozen=True)
class SyntheticBox:
    """One GPU box: its asv machine entry (sgemm.results.machine wrote it) and what its run of the suite measures."""

    machine: str
    gpu: str
    gpu_memory: str
    scale: float
    kernels: tuple[str, ...]
    sizes: tuple[int, ...]
    sm_clock: float
    compute_capability: str | None = "9.0"  # None: an entry without it

    def entry(self) -> dict:
        entry = {"machine": self.machine, "arch": "x86_64", "cpu": "Intel(R) Xeon(R) Platinum 8480+", "num_cpu": "16",
                 "os": "Linux 6.8.0", "ram": "134217728000", "gpu": self.gpu, "gpu_memory": self.gpu_memory}
        if self.compute_capability is not None:
            entry["compute_capability"] = self.compute_capability
        return entry

    def environment(self) -> dict[str, str]:
        return {"SYNTHETIC_SCALE": str(self.scale), "SYNTHETIC_KERNELS": ",".join(self.kernels),
                "SYNTHETIC_SIZES": ",".join(str(size) for size in self.sizes),
                "SYNTHETIC_SM_CLOCK": str(self.sm_clock)}


class GpuResultsTree:
    """root/repo: a git repository (branch main) with the synthetic suite committed once, its asv results in
    results/; root/home: the HOME of its asv runs, with the machine file."""

    # The H100 ran neither float4 nor 4096; the H200 ran everything, 1.5 times as fast, at another SM clock.
    H100 = SyntheticBox("nvidia-h100-80gb-hbm3", "NVIDIA H100 80GB HBM3", "80 GiB", 1.0, ("cublas", "naive"),
                        (1024, 2048), 1755.0)
    H200 = SyntheticBox("nvidia-h200", "NVIDIA H200", "141 GiB", 1.5, ("cublas", "naive", "float4"),
                        (1024, 2048, 4096), 1830.0)

    def __init__(self, root: Path):
        self.root = Path(root)
        self.repo, self.home = self.root / "repo", self.root / "home"
        self.results = self.repo / "results"

    def sh(self, *command: str, **extra_env: str) -> str:
        env = dict(os.environ, HOME=str(self.home), GIT_AUTHOR_NAME="t", GIT_AUTHOR_EMAIL="t@t",
                   GIT_COMMITTER_NAME="t", GIT_COMMITTER_EMAIL="t@t", **extra_env)
        done = subprocess.run(command, cwd=self.repo, env=env, capture_output=True, text=True)
        assert done.returncode == 0, f"{' '.join(command)} exited {done.returncode}:\n{done.stdout}{done.stderr}"
        return done.stdout.strip()

    @property
    def commit(self) -> str:
        return self.sh("git", "rev-parse", "HEAD")

    def create(self) -> "GpuResultsTree":
        (self.repo / "benchmarks").mkdir(parents=True)
        self.home.mkdir()
        (self.repo / "benchmarks" / "__init__.py").write_text("")
        (self.repo / "benchmarks" / "bench_gemm.py").write_text(TWO_GPU_GEMM_SUITE)
        (self.repo / "benchmarks" / "bench_gpu.py").write_text(TWO_GPU_GPU_SUITE)
        (self.repo / "asv.conf.json").write_text(json.dumps({
            "version": 1, "project": "sgemm", "repo": ".", "branches": ["main"], "environment_type": "existing",
            "benchmark_dir": "benchmarks", "results_dir": "results", "html_dir": "html", "env_dir": "env",
            "launch_method": LAUNCH_METHOD}))
        (self.repo / ".gitignore").write_text("results/\nhtml/\nenv/\n")
        self.sh("git", "init", "-q", "-b", "main")
        self.sh("git", "add", "-A")
        self.sh("git", "commit", "-qm", "synthetic suite")
        return self

    def run(self, box: SyntheticBox, bench: str | None = None) -> None:
        """A real `asv run` of the committed suite on `box` (of the benchmarks matching `bench` alone, if given)."""
        from sgemm.results.machine import write_machine_file

        write_machine_file(box.entry(), self.home / ".asv-machine.json")
        self.sh(sys.executable, "-m", "asv", "run", "--python=same", "--machine", box.machine, "--record-samples",
                "--set-commit-hash", self.commit, *(["--bench", bench] if bench else []), **box.environment())
        assert (self.results / box.machine / "machine.json").is_file(), f"asv wrote no results for {box.machine}"

    def copy(self, destination: Path) -> "GpuResultsTree":
        """The repository, its results and its HOME copied to `destination`, to change there."""
        shutil.copytree(self.root, destination, symlinks=True)
        return GpuResultsTree(destination)


def made_once_per_run(tmp_path_factory, name: str, make) -> Path:
    """The folder `name` that `make(folder)` fills, made once per test run: by the first pytest-xdist worker to ask,
    in the run's own base folder (the parent of each worker's), the others waiting on a file lock."""
    from filelock import FileLock

    # Not xdist's worker_id fixture, which `-p no:xdist` takes away: the variable each of its workers is given.
    if not os.environ.get("PYTEST_XDIST_WORKER"):  # no workers: the base folder's parent is shared with other runs
        folder = tmp_path_factory.mktemp(name)
        make(folder)
        return folder
    shared = tmp_path_factory.getbasetemp().parent
    folder = shared / name
    with FileLock(str(shared / f"{name}.lock")):
        if not (folder / ".made").is_file():
            shutil.rmtree(folder, ignore_errors=True)
            folder.mkdir()
            make(folder)
            (folder / ".made").write_text("")
    return folder


@pytest.fixture(scope="session")
def two_gpu_results(tmp_path_factory) -> GpuResultsTree:
    """Real `asv run` results of one commit on two GPU boxes (GpuResultsTree.H100 and .H200) in one tree, as
    `sgemm merge` leaves them. Read it; copy it (`.copy(tmp_path / "tree")`) to change it.

    Seven test modules read the tree: it is made once per test run (made_once_per_run)."""
    return GpuResultsTree(made_once_per_run(tmp_path_factory, "two-gpus", _make_two_gpu_results))


def _make_two_gpu_results(root: Path) -> None:
    tree = GpuResultsTree(root).create()
    for box in (GpuResultsTree.H100, GpuResultsTree.H200):
        tree.run(box)


# --- The virtualenv asv makes for a benchmark suite with no requirements (test_gate.py, test_history.py) -----------


@pytest.fixture(scope="session")
def asv_virtualenv(tmp_path_factory) -> Path:
    """An asv env_dir holding the virtualenv asv makes for a configuration of this Python with no requirements, as
    `asv setup` made it: pip, wheel, build, asv_runner and pympler installed from the index, 12 CPU seconds of every
    test that ran asv in a virtualenv. Copy it into a configuration's env_dir (seed_asv_virtualenv) before asv first
    runs there: asv names an environment by its Python and requirements alone, finds this one present and checks it
    (asv-env-info.json, `python -c pass`), and installs each commit into it as into one it had just made."""
    return made_once_per_run(tmp_path_factory, "asv-virtualenv", _make_asv_virtualenv)


def _make_asv_virtualenv(root: Path) -> None:
    (root / "benchmarks").mkdir()
    (root / "benchmarks" / "__init__.py").write_text("")
    (root / "asv.conf.json").write_text(json.dumps({
        "version": 1, "project": "t", "repo": ".", "branches": ["main"], "environment_type": "virtualenv",
        "pythons": [f"{sys.version_info.major}.{sys.version_info.minor}"], "benchmark_dir": "benchmarks",
        "env_dir": "env", "results_dir": "results", "html_dir": "html"}))
    # asv looks for python3.11 on PATH: this interpreter's, as the gate's tests have it (test_gate.py). HOME stays
    # the user's, whose pip configuration and cache (10.5 s with an empty one, 7.3 s with a warm) pip then uses.
    env = dict(os.environ, PATH=os.path.dirname(sys.executable) + os.pathsep + os.environ["PATH"],
               GIT_AUTHOR_NAME="t", GIT_AUTHOR_EMAIL="t@t", GIT_COMMITTER_NAME="t", GIT_COMMITTER_EMAIL="t@t")
    for command in (["git", "init", "-q", "-b", "main"], ["git", "add", "-A"], ["git", "commit", "-qm", "c"]):
        subprocess.run(command, cwd=root, env=env, check=True, capture_output=True)
    # asv 0.6.6's setup exits 1 when it succeeds (it returns its list of environments): the info file asv writes
    # last, once everything is installed, is the proof.
    done = subprocess.run([sys.executable, "-m", "asv", "setup"], cwd=root, env=env, capture_output=True, text=True)
    made = list((root / "env").glob("*/asv-env-info.json"))
    assert made, f"asv setup made no environment:\n{done.stdout}{done.stderr}"


def seed_asv_virtualenv(template: Path, env_dir: Path) -> None:
    """asv_virtualenv's environment copied into `env_dir`, where asv will look for it."""
    shutil.copytree(template / "env", env_dir, symlinks=True)


# --- asv results written through asv's own Results API (test_asvsuite.py, test_noise.py) -------------------------


def write_asv_run(results_dir: Path, machine: str, commit: str, date_ms: int,
                  figures: dict[tuple[str, str], dict[tuple, list[float] | None]], duration_s: float = 1.0,
                  module: str | None = None) -> None:
    """One run of `machine` at `commit`, as `asv run --record-samples` files it.

    `figures` maps (benchmark class, method) to {the case's parameters (Python values): its samples, or None for
    a case that failed}; every parameter combination not given is a skip (NaN), as asv records one. Each method
    took `duration_s`. The benchmarks are of asv module `module` (default: the Gemm suite's).
    """
    import itertools
    import statistics

    from asv.results import Results
    from asv.runner import BenchmarkResult

    from sgemm.results import asvsuite

    (results_dir / machine).mkdir(parents=True, exist_ok=True)
    (results_dir / machine / "machine.json").write_text(json.dumps({"machine": machine, "version": 1}))
    params = {"machine": machine, "python": "3.11"}
    run = Results(params, {}, commit, date_ms, "3.11", "existing-py", {})
    for (benchmark, method), cases in figures.items():
        axes = [sorted({combo[i] for combo in cases}, key=repr) for i in range(len(next(iter(cases))))]
        combos = list(itertools.product(*axes))
        values, samples = [float("nan")] * len(combos), [None] * len(combos)
        for combo, kept in cases.items():
            j = combos.index(combo)
            values[j], samples[j] = (None, None) if kept is None else (statistics.median(kept), list(kept))
        entry = {"name": f"{module or asvsuite.MODULE}.{benchmark}.{method}", "version": "1",
                 "params": [[repr(v) for v in axis] for axis in axes]}
        run.add_result(entry, BenchmarkResult(result=values, samples=samples, number=[1] * len(combos), errcode=0,
                                              stderr="", profile=None), record_samples=True, duration=duration_s)
    run.save(str(results_dir))


@pytest.fixture(autouse=True, scope="session")
def compile_cache_of_the_run(tmp_path_factory):
    """What compiles said (launch geometry, ptxas's reports) is kept on disk between processes (SGEMM_CACHE_DIR);
    the tests keep theirs in a folder of their own run, so that no test reads what another run kept, and nothing is
    written under the home folder."""
    previous = os.environ.get("SGEMM_CACHE_DIR")
    os.environ["SGEMM_CACHE_DIR"] = str(tmp_path_factory.mktemp("compile-cache"))
    yield
    if previous is None:
        del os.environ["SGEMM_CACHE_DIR"]
    else:
        os.environ["SGEMM_CACHE_DIR"] = previous


# --- Each kernel compiled once a run for each architecture (measuring/test_resources.py, test_bench_resources.py) ---


@pytest.fixture(scope="session")
def compile_once(tmp_path_factory):
    """sgemm.measuring.resources.compile_offline, each program compiled once per test run for each architecture:
    the per-kernel compile tests and the resource suite's setup_cache ask for the same 178 builds (70 CPU seconds
    on a 2-core box), and whichever asks first compiles while the other reads what it kept. Kept in a folder of the
    run (made_once_per_run), by what the compile reads: the kernel's name, entry, folder, source with its headers'
    digests, and the architecture. NVRTC, its options and the headers it is given stay as they are for a run."""
    import hashlib
    import pickle

    from sgemm.measuring import resources
    from sgemm.measuring.build import kernel_source

    compile_offline = resources.compile_offline
    folder = made_once_per_run(tmp_path_factory, "offline-builds", lambda folder: None)

    def compiled(kernel, arch: str):
        what = [kernel.name, kernel.entry, str(kernel.kernel_dir), kernel.source, kernel_source(kernel), arch]
        path = folder / f"{hashlib.sha256(json.dumps(what).encode()).hexdigest()}.pickle"
        try:
            return pickle.loads(path.read_bytes())
        except FileNotFoundError:
            pass
        build = compile_offline(kernel, arch)  # a compile that fails raises, and nothing is kept
        partial = path.with_name(f"{path.name}.{os.getpid()}.{threading.get_ident()}")
        partial.write_bytes(pickle.dumps(build))
        os.replace(partial, path)  # the other worker reads a whole build or none
        return build

    return compiled
