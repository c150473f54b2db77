"""The suite finds the commit under test's measuring modules in either layout of the package, and a module that
cannot be imported says why rather than reading as an old layout."""

import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]
# under_test.py loaded by its path: the checkout's own sgemm must not be importable in the probe.
PROBE = """
import importlib.util, sys
spec = importlib.util.spec_from_file_location("under_test", sys.argv[1])
under_test = importlib.util.module_from_spec(spec)
spec.loader.exec_module(under_test)
try:
    print(under_test.record().__name__)
except ImportError as exc:
    print(f"{type(exc).__name__}: {exc}")
"""


def package(root: Path, files: dict[str, str]) -> Path:
    for name, text in {"sgemm/__init__.py": "", **files}.items():
        (root / name).parent.mkdir(parents=True, exist_ok=True)
        (root / name).write_text(text)
    return root


def probe(package_root: Path) -> str:
    # -S: no site-packages, where this checkout's own sgemm is installed too
    done = subprocess.run([sys.executable, "-S", "-c", PROBE, str(ROOT / "benchmarks" / "under_test.py")],
                          capture_output=True, text=True, env={"PYTHONPATH": str(package_root)}, cwd=package_root)
    assert done.returncode == 0, done.stderr
    return done.stdout.strip()


@pytest.mark.parametrize("files, found", [
    ({"sgemm/measuring/__init__.py": "", "sgemm/measuring/record.py": ""}, "sgemm.measuring.record"),
    ({"sgemm/record.py": ""}, "sgemm.record"),  # a commit from before the stages
])
def test_the_record_module_is_found_in_either_layout(tmp_path, files, found):
    assert probe(package(tmp_path, files)) == found


def test_a_module_that_fails_to_import_says_why(tmp_path):
    root = package(tmp_path, {"sgemm/measuring/__init__.py": "", "sgemm/measuring/record.py": "import nosuchdep\n"})
    assert probe(root) == "ModuleNotFoundError: No module named 'nosuchdep'"


def test_a_commit_without_the_package_is_an_import_error(tmp_path):
    assert probe(tmp_path).startswith("ModuleNotFoundError: No module named 'sgemm'")
