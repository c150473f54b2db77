"""Which kernels a change selects, on a scratch copy of this repository's catalogue and kernels."""

import shutil
import subprocess
from pathlib import Path

import pytest

from sgemm.changes import ChangeError, resolve_commit, select_kernels

ROOT = Path(__file__).resolve().parents[1]


@pytest.fixture
def repo(tmp_path, monkeypatch):
    for name, value in (("GIT_AUTHOR_NAME", "t"), ("GIT_AUTHOR_EMAIL", "t@t"), ("GIT_COMMITTER_NAME", "t"),
                        ("GIT_COMMITTER_EMAIL", "t@t")):
        monkeypatch.setenv(name, value)
    shutil.copytree(ROOT / "kernels", tmp_path / "kernels")
    (tmp_path / "sgemm").mkdir()
    for name in ("catalogue.toml", "measure.py", "report.py"):
        shutil.copy(ROOT / "sgemm" / name, tmp_path / "sgemm" / name)
    (tmp_path / "README.md").write_text("docs\n")
    subprocess.run(["git", "init", "-q", "-b", "main", str(tmp_path)], check=True)
    return tmp_path


def commit(repo: Path, edit=None) -> str:
    if edit:
        edit(repo)
    subprocess.run(["git", "-C", str(repo), "add", "-A"], check=True)
    subprocess.run(["git", "-C", str(repo), "commit", "-qm", "c", "--allow-empty"], check=True)
    return resolve_commit(str(repo), "HEAD")


def replace_in(path: Path, old: str, new: str) -> None:
    text = path.read_text()
    assert old in text, f"{old!r} not in {path}"
    path.write_text(text.replace(old, new, 1))


def test_documentation_only_selects_the_controls(repo):
    base = commit(repo)
    head = commit(repo, lambda r: (r / "README.md").write_text("more docs\n"))
    selection = select_kernels(str(repo), base, head)
    assert selection.kernels == ("fp32/cublas", "fp16/cublas")
    assert set(selection.reasons.values()) == {"control"}
    assert selection.everything is None


def test_a_changed_entry_selects_that_kernel_and_its_precisions_control(repo):
    base = commit(repo)
    head = commit(repo, lambda r: replace_in(r / "sgemm" / "catalogue.toml",
                                             'entry = "gemm_vectorized<128, 128, 8, 8, 8, kTransposedA>"',
                                             'entry = "gemm_vectorized<64, 128, 8, 8, 8, kTransposedA>"'))
    selection = select_kernels(str(repo), base, head)
    assert selection.kernels == ("fp32/cublas", "fp32/float4")  # catalogue order
    assert selection.reasons == {"fp32/float4": "catalogue entry changed", "fp32/cublas": "control"}


def test_an_edited_source_selects_every_kernel_built_from_it(repo):
    base = commit(repo)
    head = commit(repo, lambda r: (r / "kernels" / "fp32_naive.cu").write_text(
        (r / "kernels" / "fp32_naive.cu").read_text() + "\n// edited\n"))
    selection = select_kernels(str(repo), base, head)
    naive = [name for name, why in selection.reasons.items() if why == "kernels/fp32_naive.cu changed"]
    assert naive and all(name.startswith("fp32/") for name in naive)
    assert set(selection.kernels) == set(naive) | {"fp32/cublas"}


def test_an_edited_header_selects_every_kernel_that_includes_it(repo):
    base = commit(repo)
    head = commit(repo, lambda r: (r / "kernels" / "common.cuh").write_text(
        (r / "kernels" / "common.cuh").read_text() + "\n// edited\n"))
    selection = select_kernels(str(repo), base, head)
    compiled = [name for name, why in selection.reasons.items() if why != "control"]
    assert any(name.startswith("fp16/") for name in compiled) and any(name.startswith("fp32/") for name in compiled)
    assert all("kernels/common.cuh" in selection.reasons[name] for name in compiled)
    assert {"fp32/cublas", "fp16/cublas"} <= set(selection.kernels)


def test_shared_code_or_suite_changes_select_everything(repo):
    base = commit(repo)
    head = commit(repo, lambda r: (r / "sgemm" / "measure.py").write_text("# changed\n"))
    selection = select_kernels(str(repo), base, head)
    assert selection.everything == "shared code changed: sgemm/measure.py"
    assert len(selection.kernels) > 40
    sizes = commit(repo, lambda r: replace_in(r / "sgemm" / "catalogue.toml", "sizes = [", "sizes = [512, "))
    assert "[suite]" in select_kernels(str(repo), head, sizes).everything


def test_report_code_is_not_measurement_code(repo):
    base = commit(repo)
    head = commit(repo, lambda r: (r / "sgemm" / "report.py").write_text("# changed\n"))
    assert select_kernels(str(repo), base, head).kernels == ("fp32/cublas", "fp16/cublas")


def test_a_new_kernel_and_a_removed_one(repo):
    base = commit(repo)

    def rename(r):
        replace_in(r / "sgemm" / "catalogue.toml", 'name = "fp32/float4"', 'name = "fp32/float4_renamed"')

    head = commit(repo, rename)
    selection = select_kernels(str(repo), base, head)
    assert selection.reasons["fp32/float4_renamed"] == "new kernel"
    assert selection.removed == ("fp32/float4",)


def test_unknown_commit(repo):
    commit(repo)
    with pytest.raises(ChangeError, match="'nope' is not a commit"):
        resolve_commit(str(repo), "nope")
