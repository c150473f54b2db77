"""The catalogue's Markdown tables (sgemm.kernel_table) and `sgemm list --markdown [--into FILE]`."""

import dataclasses
from pathlib import Path

import pytest

from sgemm import catalogue, cli, kernel_table
from sgemm.kernel_table import BEGIN, END, KernelTableError

KERNELS = list(catalogue.load_catalogue().values())
SEEDS = catalogue.seeds()


def test_the_readme_table_has_a_row_for_each_source_and_every_kernel_in_it_within_the_line_limit():
    table = kernel_table.by_source(KERNELS, SEEDS)
    assert max(len(line) for line in table) <= kernel_table.MAX_LINE
    text = "\n".join(table)
    for kernel in KERNELS:
        assert f"`{kernel.family}`" in text
    sources = {f"`{kernel.source}`" for kernel in KERNELS if kernel.source} | {kernel_table.LIBRARY}
    first_cells = [line.split("|")[1].strip() for line in table[2:]]
    assert sorted(cell for cell in first_cells if cell) == sorted(sources)


def test_a_list_of_kernels_too_long_for_a_line_goes_on_in_the_rows_below():
    source = next(kernel for kernel in KERNELS if kernel.source == "fp32_naive.cu")
    many = [dataclasses.replace(source, name=f"fp32/a_rather_long_kernel_name_{i}") for i in range(12)]
    table = kernel_table.by_source(many, SEEDS)
    assert len(table) > 3 and max(len(line) for line in table) <= kernel_table.MAX_LINE
    continued = table[3:]
    assert all(line.startswith("|  |  | ") for line in continued)
    assert all(line.split(" | ")[2].endswith(",") for line in table[2:-1])
    assert "a_rather_long_kernel_name_11" in table[-1]


def test_the_per_kernel_table_shares_a_row_between_precision_twins_and_escapes_pipes():
    table = kernel_table.per_kernel(KERNELS, SEEDS)
    twins = [kernel for kernel in KERNELS if kernel.family == "wgmma_cluster"]
    assert len(twins) == 2
    row = next(line for line in table if "`fp16/wgmma_cluster`" in line)
    assert "`bf16/wgmma_cluster`" in row and row.count(" | ") == 4
    odd = dataclasses.replace(twins[0], name="fp16/odd", technique="A | B")
    assert "A \\| B" in kernel_table.per_kernel([odd], SEEDS)[2]


def test_where_a_kernel_runs():
    by_name = {kernel.name: kernel for kernel in KERNELS}
    assert kernel_table.runs_on(by_name["fp32/naive"]) == "sm_70+"
    assert kernel_table.runs_on(by_name["fp16/wgmma_tma"]) == "sm_90a"


def test_only_the_lines_between_the_markers_are_replaced():
    text = f"# Title\n\nbefore\n{BEGIN}\nold 1\nold 2\n{END}\nafter\n"
    new = kernel_table.with_block(text, ["| a |", "| b |"])
    assert new == f"# Title\n\nbefore\n{BEGIN}\n| a |\n| b |\n{END}\nafter\n"
    assert kernel_table.block(new) == ["| a |", "| b |"]
    assert kernel_table.with_block(new, ["| a |", "| b |"]) == new


@pytest.mark.parametrize("text, found", [
    ("no markers\n", "found 0 and 0"),
    (f"{END}\n{BEGIN}\n", "found 1 and 1"),
    (f"{BEGIN}\n{BEGIN}\n{END}\n", "found 2 and 1"),
])
def test_a_file_without_one_pair_of_markers_in_order_is_refused(text, found):
    with pytest.raises(KernelTableError, match=found):
        kernel_table.with_block(text, ["x"], "F.md")


def test_list_markdown_prints_the_readme_table_or_with_wide_the_per_kernel_one(capsys):
    assert cli.main(["list", "--markdown"]) == 0
    assert capsys.readouterr().out.splitlines() == kernel_table.by_source(KERNELS, SEEDS)
    assert cli.main(["list", "--markdown", "--wide", "-k", "fp16"]) == 0
    printed = capsys.readouterr().out
    assert "`fp16/mma_naive`" in printed and "fp32/" not in printed


def test_list_markdown_into_a_file_rewrites_its_block_once(tmp_path, capsys):
    page = tmp_path / "page.md"
    page.write_text(f"intro\n{BEGIN}\nstale\n{END}\noutro\n")
    assert cli.main(["list", "--markdown", "--into", str(page)]) == 0
    assert "the table rewritten" in capsys.readouterr().err
    assert kernel_table.block(page.read_text()) == kernel_table.by_source(KERNELS, SEEDS)
    assert page.read_text().startswith("intro\n") and page.read_text().endswith(f"{END}\noutro\n")
    assert cli.main(["list", "--markdown", "--into", str(page)]) == 0
    assert "already the catalogue's" in capsys.readouterr().err


@pytest.mark.parametrize("argv, first_line", [
    (["--into", "{page}"], "sgemm list: --into needs --markdown: it writes the Markdown table"),
    (["--markdown", "-k", "fp16", "--into", "{page}"],
     "sgemm list: --into writes the whole catalogue's table: leave out -k"),
    (["--markdown", "--into", "{tmp}/missing.md"], "sgemm list: cannot read {tmp}/missing.md: No such file"),
    (["--markdown", "--into", "{tmp}"], "sgemm list: cannot read {tmp}: Is a directory"),
    (["--markdown", "--into", "{bare}"], "sgemm list: {bare} needs one line <!-- kernels:begin -->"),
    (["--markdown", "--into", "{binary}"], "sgemm list: cannot read {binary}: 'utf-8' codec can't decode"),
])
def test_bad_input_to_list_markdown_is_one_line_and_exit_2_and_changes_nothing(tmp_path, capsys, argv, first_line):
    files = {"page": tmp_path / "page.md", "bare": tmp_path / "bare.md", "binary": tmp_path / "binary.md"}
    files["page"].write_text(f"{BEGIN}\n{END}\n")
    files["bare"].write_text("no markers\n")
    files["binary"].write_bytes(b"\xff\xfe" + BEGIN.encode())
    before = {name: path.read_bytes() for name, path in files.items()}
    places = {"tmp": str(tmp_path), **{name: str(path) for name, path in files.items()}}
    assert cli.main(["list", *(word.format(**places) for word in argv)]) == 2
    err = capsys.readouterr().err
    assert len(err.splitlines()) == 1 and err.startswith(first_line.format(**places))
    assert {name: path.read_bytes() for name, path in files.items()} == before


ROOT = Path(__file__).resolve().parents[1]
TABLES = {"README.md": kernel_table.by_source, "docs/kernels.md": kernel_table.per_kernel}


@pytest.mark.parametrize("page", ["README.md", "docs/kernels.md"])
def test_the_tables_of_kernels_in_the_docs_are_the_catalogues(page):
    """A kernel added, renamed or edited without regenerating these fails here."""
    written = kernel_table.block((ROOT / page).read_text(), page)
    assert written == TABLES[page](KERNELS, SEEDS), \
        f"{page}'s table is not the catalogue's: run {kernel_table.REGENERATE}"
