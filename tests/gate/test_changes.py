"""Which kernels a change selects, on a scratch copy of this repository's code, catalogue and kernels."""

import shutil
import subprocess
from pathlib import Path

import pytest

from sgemm.catalogue import load_catalogue
from sgemm.gate.changes import select_kernels
from sgemm.git import GitError, resolve_commit

ROOT = Path(__file__).resolve().parents[2]
# Measurement as the asv suite reaches it through its imports, and code that only judges or publishes results.
MEASUREMENT = ["sgemm/measuring/build.py", "sgemm/measuring/problem.py", "sgemm/measuring/verify.py",
               "sgemm/measuring/measure.py", "sgemm/measuring/record.py", "sgemm/measuring/telemetry.py",
               "sgemm/measuring/resources.py", "sgemm/measuring/__init__.py", "sgemm/catalogue.py", "sgemm/gpu.py",
               "sgemm/peak.py", "sgemm/__init__.py", "benchmarks/bench_gemm.py", "benchmarks/worktree.py",
               "asv.conf.json", "pyproject.toml"]
JUDGING = ["sgemm/gate/run.py", "sgemm/gate/verdict.py", "sgemm/gate/changes.py", "sgemm/gate/noise.py",
           "sgemm/site/ladders.py", "sgemm/site/crossgpu.py", "sgemm/site/vendor.py",
           "sgemm/site/publish.py", "sgemm/site/merge.py", "sgemm/figures.py", "sgemm/cli.py",
           "sgemm/results/machine.py", "sgemm/history/run.py", "sgemm/commands/__init__.py", "sgemm/commands/args.py",
           "sgemm/commands/kernels.py", "sgemm/commands/site.py", "sgemm/commands/gate.py",
           "sgemm/commands/history.py", "sgemm/commands/machine.py"]


@pytest.fixture
def repo(tmp_path, monkeypatch):
    for name, value in (("GIT_AUTHOR_NAME", "t"), ("GIT_AUTHOR_EMAIL", "t@t"), ("GIT_COMMITTER_NAME", "t"),
                        ("GIT_COMMITTER_EMAIL", "t@t")):
        monkeypatch.setenv(name, value)
    no_cache = shutil.ignore_patterns("__pycache__")
    for folder in ("kernels", "benchmarks", "sgemm"):
        shutil.copytree(ROOT / folder, tmp_path / folder, ignore=no_cache)
    for name in ("asv.conf.json", "pyproject.toml"):
        shutil.copy(ROOT / name, tmp_path / name)
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


def append_to(path: Path, text: str) -> None:
    assert path.exists(), f"{path} does not exist: the test would edit nothing the suite reads"
    path.write_text(path.read_text() + text)


def drop_kernel(catalogue: Path, name: str) -> None:
    tables = catalogue.read_text().split("[[kernel]]\n")
    kept = [table for table in tables if not table.startswith(f'name = "{name}"\n')]
    assert len(kept) == len(tables) - 1, f"no [[kernel]] table {name}"
    catalogue.write_text("[[kernel]]\n".join(kept))


def changed_only(selection) -> set[str]:
    return {name for name, why in selection.reasons.items() if why != "control"}


def catalogue(repo: Path) -> dict:
    return load_catalogue(repo / "sgemm" / "catalogue.toml", repo / "kernels")


def kernels_including(repo: Path, include_line: str) -> set[str]:
    """The kernels whose own source has this line: the expectation, found without the code under test."""
    compiled = [k for k in catalogue(repo).values() if k.source]
    return {k.name for k in compiled if include_line in (repo / "kernels" / k.source).read_text()}


# Nothing measurable changed


def test_documentation_only_selects_nothing(repo):
    base = commit(repo)
    head = commit(repo, lambda r: (r / "README.md").write_text("more docs\n"))
    selection = select_kernels(str(repo), base, head)
    assert selection.kernels == () and selection.reasons == {} and selection.everything is None
    assert selection.undeclared == ()


@pytest.mark.parametrize("path", JUDGING)
def test_code_that_only_judges_or_publishes_selects_nothing(repo, path):
    base = commit(repo)
    head = commit(repo, lambda r: append_to(r / path, "# edited\n"))
    assert select_kernels(str(repo), base, head).kernels == ()


# Measurement code, found through the suite's imports


@pytest.mark.parametrize("path", MEASUREMENT)
def test_measurement_code_selects_everything(repo, path):
    base = commit(repo)
    head = commit(repo, lambda r: append_to(r / path, "\n"))
    selection = select_kernels(str(repo), base, head)
    assert selection.everything == f"shared code changed: {path}"
    assert len(selection.kernels) > 40 and selection.controls == ()


def test_a_module_measurement_imports_through_another_is_shared(repo):
    def add_clocks(r):
        (r / "sgemm" / "measuring" / "clocks.py").write_text("PERIOD_S = 1.0\n")
        append_to(r / "sgemm" / "measuring" / "telemetry.py", "\nfrom . import clocks  # noqa: E402\n")

    base = commit(repo, add_clocks)
    head = commit(repo, lambda r: append_to(r / "sgemm" / "measuring" / "clocks.py", "PERIOD_S = 2.0\n"))
    assert select_kernels(str(repo), base, head).everything == "shared code changed: sgemm/measuring/clocks.py"


def test_a_module_measurement_starts_to_import_at_head_is_shared(repo):
    # base already tries the import, so head adds the module and touches no file that imports it
    optional = "\ntry:\n    from .tuning import TABLE\nexcept ImportError:\n    TABLE = {}\n"
    base = commit(repo, lambda r: append_to(r / "sgemm" / "measuring" / "measure.py", optional))
    head = commit(repo, lambda r: (r / "sgemm" / "measuring" / "tuning.py").write_text("TABLE = {'fp32/naive': 2}\n"))
    assert select_kernels(str(repo), base, head).everything == "shared code changed: sgemm/measuring/tuning.py"


def test_a_module_only_the_gate_imports_is_not_shared(repo):
    def add_helper(r):
        (r / "sgemm" / "gate" / "gate_rules.py").write_text("LIMIT = 1\n")
        append_to(r / "sgemm" / "gate" / "run.py", "\nfrom . import gate_rules  # noqa: E402\n")

    base = commit(repo, add_helper)
    head = commit(repo, lambda r: append_to(r / "sgemm" / "gate" / "gate_rules.py", "LIMIT = 2\n"))
    assert select_kernels(str(repo), base, head).kernels == ()


def test_a_suite_change_selects_everything(repo):
    base = commit(repo)
    head = commit(repo, lambda r: replace_in(r / "sgemm" / "catalogue.toml", "sizes = [", "sizes = [512, "))
    assert select_kernels(str(repo), base, head).everything == "shared code changed: sgemm/catalogue.toml [suite]"


# Kernels the change touched


def test_a_changed_entry_selects_that_kernel_and_its_precisions_control(repo):
    base = commit(repo)
    head = commit(repo, lambda r: replace_in(r / "sgemm" / "catalogue.toml",
                                             'entry = "gemm_vectorized<128, 128, 8, 8, 8, kTransposedA>"',
                                             'entry = "gemm_vectorized<64, 128, 8, 8, 8, kTransposedA>"'))
    selection = select_kernels(str(repo), base, head)
    assert selection.kernels == ("fp32/cublas", "fp32/float4")  # catalogue order
    assert selection.reasons == {"fp32/float4": "catalogue entry changed", "fp32/cublas": "control"}
    assert selection.undeclared == ()


def test_an_edited_source_selects_every_kernel_built_from_it(repo):
    base = commit(repo)
    head = commit(repo, lambda r: append_to(r / "kernels" / "fp32_naive.cu", "\n// edited\n"))
    selection = select_kernels(str(repo), base, head)
    naive = {k.name for k in catalogue(repo).values() if k.source == "fp32_naive.cu"}
    assert len(naive) > 1 and all(name.startswith("fp32/") for name in naive)
    assert selection.reasons == {**dict.fromkeys(naive, "kernels/fp32_naive.cu changed"), "fp32/cublas": "control"}


def test_an_edited_header_selects_every_kernel_that_includes_it(repo):
    base = commit(repo)
    head = commit(repo, lambda r: append_to(r / "kernels" / "common.cuh", "\n// edited\n"))
    selection = select_kernels(str(repo), base, head)
    assert changed_only(selection) == kernels_including(repo, '#include "common.cuh"')
    assert all(selection.reasons[name] == "kernels/common.cuh changed" for name in changed_only(selection))
    assert {"fp32/cublas", "fp16/cublas"} <= set(selection.kernels)


def test_a_header_included_by_a_header_selects_exactly_the_kernels_that_reach_it(repo):
    def nest(r):
        (r / "kernels" / "nested.cuh").write_text("#pragma once\n")
        replace_in(r / "kernels" / "common.cuh", "#pragma once\n", '#pragma once\n#include "nested.cuh"\n')

    base = commit(repo, nest)
    head = commit(repo, lambda r: append_to(r / "kernels" / "nested.cuh", "// edited\n"))
    selection = select_kernels(str(repo), base, head)
    reach = kernels_including(repo, '#include "common.cuh"')
    assert reach and reach != set(catalogue(repo))
    assert changed_only(selection) == reach
    assert all(selection.reasons[name] == "kernels/nested.cuh changed" for name in reach)


def test_a_header_included_in_angle_brackets_selects_the_kernels_that_include_it(repo):
    def include(r):
        (r / "kernels" / "warp_extra.cuh").write_text("#pragma once\n")
        replace_in(r / "kernels" / "fp32_warptile.cu", '#include "common.cuh"\n',
                   '#include "common.cuh"\n#include <warp_extra.cuh>\n')

    base = commit(repo, include)
    head = commit(repo, lambda r: append_to(r / "kernels" / "warp_extra.cuh", "// edited\n"))
    selection = select_kernels(str(repo), base, head)
    assert changed_only(selection) == kernels_including(repo, "<warp_extra.cuh>") != set()
    assert set(selection.kernels) == changed_only(selection) | {"fp32/cublas"}


# Kernels that come and go


def rename_float4(r: Path, declare: bool) -> None:
    declaration = '\nrenamed_from = "fp32/float4"' if declare else ""
    replace_in(r / "sgemm" / "catalogue.toml", 'name = "fp32/float4"', f'name = "fp32/float4_t"{declaration}')


def test_a_declared_rename_is_compared_with_the_old_name(repo):
    base = commit(repo)
    head = commit(repo, lambda r: rename_float4(r, declare=True))
    selection = select_kernels(str(repo), base, head)
    assert selection.renamed == {"fp32/float4_t": "fp32/float4"}
    assert selection.reasons == {"fp32/float4_t": "renamed from fp32/float4", "fp32/cublas": "control"}
    assert selection.removed == () and selection.undeclared == ()


def test_an_undeclared_rename_is_a_removed_and_a_new_kernel_and_a_problem(repo):
    base = commit(repo)
    head = commit(repo, lambda r: rename_float4(r, declare=False))
    selection = select_kernels(str(repo), base, head)
    assert selection.reasons["fp32/float4_t"] == "new kernel" and selection.renamed == {}
    assert selection.removed == ("fp32/float4",)
    [message] = selection.undeclared
    assert message.startswith("fp32/float4: ") and "new at head: fp32/float4_t" in message
    assert 'renamed_from = "fp32/float4"' in message and "[[retired]]" in message


def test_a_rename_from_a_name_base_lacks_is_a_problem(repo):
    base = commit(repo)
    head = commit(repo, lambda r: append_to(r / "sgemm" / "catalogue.toml", LIBRARY_KERNEL.format(
        name="fp32/cublas_again", extra='renamed_from = "fp32/never"')))
    selection = select_kernels(str(repo), base, head)
    assert selection.renamed == {} and selection.reasons["fp32/cublas_again"] == "new kernel"
    [message] = selection.undeclared
    assert message.startswith("fp32/cublas_again: renamed_from fp32/never, which base's catalogue does not have")


LIBRARY_KERNEL = """
[[kernel]]
name = "{name}"
technique = "t"
library = "cublas"
min_compute_capability = 70
{extra}
"""


def test_a_declared_deletion_is_removed_without_a_problem(repo):
    def retire(r):
        drop_kernel(r / "sgemm" / "catalogue.toml", "fp32/float4")
        append_to(r / "sgemm" / "catalogue.toml", '\n[[retired]]\nname = "fp32/float4"\nreason = "superseded"\n')

    base = commit(repo)
    head = commit(repo, retire)
    selection = select_kernels(str(repo), base, head)
    assert selection.removed == ("fp32/float4",) and selection.retired == {"fp32/float4": "superseded"}
    assert selection.undeclared == () and selection.kernels == ()


@pytest.mark.parametrize("retired", ["", '\n[[retired]]\nname = "fp32/float4"\n',
                                     '\n[[retired]]\nname = "fp32/float5"\nreason = "superseded"\n'],
                         ids=["no table", "no reason", "another name"])
def test_an_undeclared_deletion_is_a_problem(repo, retired):
    def delete(r):
        drop_kernel(r / "sgemm" / "catalogue.toml", "fp32/float4")
        append_to(r / "sgemm" / "catalogue.toml", retired)

    base = commit(repo)
    head = commit(repo, delete)
    selection = select_kernels(str(repo), base, head)
    assert selection.removed == ("fp32/float4",) and selection.retired == {}
    [message] = selection.undeclared
    assert message.startswith("fp32/float4: in base's catalogue and gone from head's, undeclared.")


# Kernels head cannot measure


def test_a_selected_kernel_that_no_suite_shape_fits_is_a_problem(repo):
    base = commit(repo)
    head = commit(repo, lambda r: replace_in(r / "sgemm" / "catalogue.toml",
                                             'kTransposedA>"\nmultiple_of = { m = 1, n = 4, k = 4 }',
                                             'kTransposedA>"\nmultiple_of = { m = 3000, n = 4, k = 4 }'))
    selection = select_kernels(str(repo), base, head)
    assert selection.kernels == ("fp32/cublas", "fp32/float4")
    [message] = selection.undeclared
    assert message.startswith("fp32/float4: supports none of the suite's shapes at head (1000x1000x1000, ")


def test_a_head_catalogue_the_suite_cannot_load_is_a_problem(repo):
    base = commit(repo)
    # A moved file, which git would otherwise list under its new name alone, its entry left pointing at the old.
    head = commit(repo, lambda r: (r / "kernels" / "fp32_vectorized.cu").rename(r / "kernels" / "fp32_float4.cu"))
    selection = select_kernels(str(repo), base, head)
    assert selection.reasons["fp32/float4"] == "kernels/fp32_vectorized.cu changed"
    [message] = selection.undeclared
    assert message.startswith("sgemm/catalogue.toml at head: the suite cannot load it") and "fp32/float4" in message


def test_unknown_commit(repo):
    commit(repo)
    with pytest.raises(GitError, match="'nope' is not a commit"):
        resolve_commit(str(repo), "nope")


# A table shared by several precisions


def test_an_edited_table_of_two_precisions_selects_both_as_the_loader_makes_them(repo):
    base = commit(repo)
    head = commit(repo, lambda r: replace_in(r / "sgemm" / "catalogue.toml", 'name = "wgmma_tma_wide"\n',
                                             'name = "wgmma_tma_wide"\nmay_spill = true\n'))
    selection = select_kernels(str(repo), base, head)
    assert changed_only(selection) == {"fp16/wgmma_tma_wide", "bf16/wgmma_tma_wide"}
    assert selection.reasons["bf16/wgmma_tma_wide"] == "catalogue entry changed"
    assert set(selection.controls) == {"fp16/cublas", "bf16/cublas"} and not selection.undeclared


def test_a_kernel_moved_into_a_shared_table_is_one_name_at_base_and_head(repo):
    """Writing fp16/x and bf16/x as one table keeps both names: nothing removed, nothing new, no rename to declare."""
    catalogue_file = repo / "sgemm" / "catalogue.toml"
    shared = catalogue_file.read_text()
    fp16 = shared.replace('name = "wgmma_tma"\nprecisions = ["fp16", "bf16"]\n', 'name = "fp16/wgmma_tma"\n').replace(
        "gemm_wgmma_tma<{input}, 128, 128, 1>", "gemm_wgmma_tma<__half, 128, 128, 1>")
    bf16 = '\n[[kernel]]\nname = "bf16/wgmma_tma"\n' + _table_body(shared, "wgmma_tma").replace("{input}",
                                                                                               "__nv_bfloat16")
    base = commit(repo, lambda r: catalogue_file.write_text(fp16 + bf16))
    head = commit(repo, lambda r: catalogue_file.write_text(shared))
    selection = select_kernels(str(repo), base, head)
    assert not selection.removed and not selection.renamed and not selection.undeclared
    assert "fp16/wgmma_tma" not in selection.reasons and "bf16/wgmma_tma" not in selection.reasons


def _table_body(text: str, name: str) -> str:
    """A [[kernel]] table's fields after its name and precisions."""
    table = text.split(f'[[kernel]]\nname = "{name}"\n', 1)[1].split("\n[[kernel]]", 1)[0]
    return table.split("\n", 1)[1]  # past the precisions line
