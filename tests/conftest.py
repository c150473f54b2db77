import json
import os
import subprocess
import sys
import textwrap

import pytest


def _no_gpu_reason() -> str | None:
    from sgemm.record import NoGpuError, device_info

    try:
        device_info()
    except NoGpuError as exc:
        return str(exc)
    return None


def pytest_collection_modifyitems(config, items):
    marked = [item for item in items if "gpu" in item.keywords or "no_gpu" in item.keywords]
    if not marked:
        return
    reason = _no_gpu_reason()
    for item in marked:
        if "gpu" in item.keywords and reason:
            item.add_marker(pytest.mark.skip(reason=f"needs a CUDA GPU ({reason})"))
        elif "no_gpu" in item.keywords and not reason:
            item.add_marker(pytest.mark.skip(reason="tests the behaviour without a GPU, and this machine has one"))


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
            "html_dir": "html", "env_dir": "env",
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
