import dataclasses
import json
import os
import re
import shutil
import subprocess
import sys
import tomllib
from pathlib import Path

import pytest
from conftest import says

from sgemm import catalogue, sourcetree
from sgemm.catalogue import KERNEL_DIR, CatalogueError, UnknownKernelError, load_catalogue

KERNELS = load_catalogue()
COMPILED = [k for k in KERNELS.values() if not k.library]


def test_names_are_precision_slash_kernel():
    precisions = catalogue.precision_names()
    assert precisions[:3] == ["fp32", "fp16", "bf16"]  # the suite's parameter: append only
    for name, kernel in KERNELS.items():
        assert re.fullmatch(r"[a-z0-9]+/[a-z0-9_]+", name), name
        assert kernel.precision in precisions and kernel.types.name == kernel.precision


def test_every_precision_names_its_types_baseline_and_bound():
    precisions = catalogue.load_precisions()
    assert (precisions["bf16"].input, precisions["bf16"].accumulate, precisions["bf16"].output) == (
        "bf16", "fp32", "fp32")
    assert precisions["fp32"].tolerance == 1e-5 and precisions["fp16"].tolerance == precisions["bf16"].tolerance
    for precision in precisions.values():
        assert catalogue.baseline(precision.name, KERNELS).name == precision.baseline
        assert KERNELS[precision.baseline].library == "cublas"
    assert precisions["bf16"].rate(75) is None and precisions["bf16"].rate(90) == 4096


def test_every_source_file_belongs_to_an_entry():
    used = {k.source for k in COMPILED}
    on_disk = {p.name for p in KERNEL_DIR.glob("*.cu")}
    assert on_disk == used, f"kernels without an entry: {on_disk - used}; entries without a file: {used - on_disk}"


@pytest.mark.parametrize("source", sorted({k.source for k in COMPILED}))
def test_every_source_opens_with_technique_tiles_and_shapes(source):
    text = (KERNEL_DIR / source).read_text()
    header = text.split("#include", 1)[0]
    assert header.startswith("//"), f"{source} must open with a comment"
    assert "Shapes:" in header, f"{source}'s header must say which shapes it supports"


@pytest.mark.parametrize("kernel", COMPILED, ids=lambda k: k.name)
def test_entry_names_a_template_in_its_source(kernel):
    template = kernel.entry.split("<", 1)[0]
    assert re.search(rf"\b{template}\s*\(", (KERNEL_DIR / kernel.source).read_text())


def test_an_entry_tuned_for_an_architecture_is_the_kernel_there_and_nowhere_else(tmp_path: Path):
    (tmp_path / "k.cu").write_text("// k\n")
    kernel = _load(_write(tmp_path, GOOD + 'tuned_entries = { 90 = "k<2>", 86 = "k<3>" }\n'))["fp32/k"]
    assert kernel.tuned_entries == ((90, "k<2>"), (86, "k<3>"))
    assert (kernel.on(90).entry, kernel.on(86).entry, kernel.on(80).entry) == ("k<2>", "k<3>", "k<1>")
    assert kernel.on_architecture("sm_90").entry == kernel.on_architecture("compute_90").entry == "k<2>"
    # What `on` returns names one entry alone: compiled for any architecture afterwards, it stays that build.
    assert kernel.on(90).tuned_entries == () and kernel.on(90).on(80).entry == "k<2>"
    assert kernel.on(90).name == kernel.name
    plain = KERNELS["fp32/naive"]
    assert plain.on(90) is plain


def test_tuned_entries_fill_the_precisions_element_types(tmp_path: Path):
    (tmp_path / "k.cu").write_text("// k\n")
    text = GOOD.replace('entry = "k<1>"', 'entry = "k<{input}, 1>"') + 'tuned_entries = { 90 = "k<{input}, 2>" }\n'
    assert _load(_write(tmp_path, text))["fp32/k"].on(90).entry == "k<float, 2>"


@pytest.mark.parametrize("m, n, grid", [
    (1, 1, (1, 1, 1)),
    (128, 128, (1, 1, 1)),
    (129, 128, (1, 2, 1)),  # one row past a tile: a second row of blocks
    (4097, 127, (1, 33, 1)),
    (1000, 1028, (9, 8, 1)),
])
def test_the_grid_is_one_block_per_tile_of_c_rounded_up(m, n, grid):
    tiles_128 = catalogue.Geometry((128, 1), (128, 128))
    assert KERNELS["fp32/warptile"].grid(tiles_128, m, n) == grid  # (x over N, y over M, 1), worked out by hand


def test_shape_rules():
    float4 = KERNELS["fp32/float4"]
    assert float4.shape_problem(1000, 1028, 516) is None
    assert "N to be a multiple of 4" in float4.shape_problem(1000, 1001, 516)
    assert "K to be a multiple of 4" in float4.shape_problem(1000, 1028, 517)
    assert KERNELS["fp32/naive"].shape_problem(1, 1, 1) is None
    assert "at least 1" in KERNELS["fp32/naive"].shape_problem(0, 5, 5)


def test_suite_sizes_include_a_size_no_tile_divides():
    sizes = catalogue.default_sizes()
    assert {1024, 2048, 4096} <= set(sizes)
    # The kernels' tiles are 8 to 256 a side (tests/measuring/test_resources.py reads them); the 8x8-tile kernels meet
    # their edges in the GPU correctness tests only.
    assert any(all(size % tile for tile in (16, 32, 64, 128, 256)) for size in sizes)


def test_each_precision_has_one_baseline_the_library_kernel():
    assert catalogue.baseline("fp32", KERNELS).name == "fp32/cublas"
    assert catalogue.baseline("fp16", KERNELS).name == "fp16/cublas"
    assert catalogue.baseline("bf16", KERNELS).name == "bf16/cublas"
    without = {name: kernel for name, kernel in KERNELS.items() if name != "fp16/cublas"}
    with pytest.raises(CatalogueError, match="precision 'fp16' names 'fp16/cublas' as its baseline, which is not"):
        catalogue.baseline("fp16", without)


def test_kernels_are_timed_at_their_own_sizes_of_the_suite():
    assert catalogue.default_sizes() == [1000, 1024, 2048, 4096, 8192]
    assert KERNELS["fp32/naive"].sizes == (1000, 1024, 2048, 4096)  # [suite] kernel_sizes: no 8192
    assert KERNELS["fp16/cublas"].sizes == (1000, 1024, 2048, 4096, 8192)
    hopper = [k for k in COMPILED if k.target == "sm_90a"]
    assert len(hopper) == 18 and all(k.sizes == (4096, 8192) for k in hopper)
    for kernel in KERNELS.values():
        assert set(kernel.sizes) <= set(catalogue.default_sizes())
        reference = catalogue.baseline(kernel.precision, KERNELS)
        assert set(kernel.sizes) <= set(reference.sizes), f"{kernel.name} is timed where its baseline is not"
        assert any(kernel.shape_problem(size, size, size) is None for size in kernel.sizes), kernel.name


# The geometry the Hopper ring kernels state of themselves (tests/measuring/test_resources.py holds them to it).
RING = catalogue.Geometry((384, 1), (128, 256), (1, 1, 1), 196672, (
    catalogue.TmaOperand("A", (128, 64), 128), catalogue.TmaOperand("B", (64, 64), 128),
    catalogue.TmaOperand("C", (64, 32), 128)), 4)
RING_CLUSTER = dataclasses.replace(RING, cluster=(2, 1, 1))


def test_a_persistent_grid_holds_what_the_gpu_holds_and_no_more_than_the_tiles():
    kernel = KERNELS["fp16/wgmma_cluster"]  # 128 x 256 tiles, clusters of 2
    assert kernel.grid_rule == "persistent"
    assert kernel.grid(RING_CLUSTER, 8192, 8192, resident_blocks=132) == (132, 1, 1)  # 64 x 32 tiles, more than 132
    assert kernel.grid(RING_CLUSTER, 256, 512, resident_blocks=132) == (4, 1, 1)  # 2 x 2 tiles
    with pytest.raises(ValueError, match="persistent grid"):
        kernel.grid(RING_CLUSTER, 8192, 8192)
    assert KERNELS["fp16/wgmma_pipelined"].grid(RING, 4096, 4096) == (16, 32, 1)  # a block per tile
    # Clusters of 2 x 2 (along M, along N): the grid is as high as a cluster, so a launch's clusters lie in one row.
    square = dataclasses.replace(RING_CLUSTER, cluster=(2, 2, 1))
    assert kernel.grid(square, 8192, 8192, resident_blocks=128) == (64, 2, 1)
    assert kernel.grid(square, 256, 512, resident_blocks=128) == (2, 2, 1)  # one cluster: 2 x 2 tiles


def test_cluster_and_tma_shape_rules():
    cluster = KERNELS["bf16/wgmma_cluster"]
    assert cluster.shape_problem(4096, 4096, 4096) is None
    assert cluster.launch_problem(RING_CLUSTER, 4096, 4096, 4096) is None
    assert "M to be a multiple of 256" in cluster.shape_problem(128, 4096, 4096)
    loose = dataclasses.replace(cluster, multiple_of=(1, 1, 1))
    assert "do not divide into them" in loose.launch_problem(RING_CLUSTER, 128, 256, 64)  # one tile, clusters of 2
    # A: 100 BF16 a row
    assert "row stride must be a multiple of 16 bytes: 200" in loose.launch_problem(RING_CLUSTER, 256, 256, 100)
    tiles = KERNELS["fp16/wgmma_pipelined"]
    assert "clusters of 2x1 blocks: its 1x2 tiles" in tiles.launch_problem(RING_CLUSTER, 256, 256, 64)


def test_an_architecture_specific_kernel_runs_on_its_own_architecture_alone():
    kernel = KERNELS["fp16/wgmma_tma"]
    assert kernel.target == "sm_90a" and kernel.architectures(("sm_80", "sm_90")) == ("sm_90a",)
    assert kernel.gpu_problem(90) is None
    assert "sm_90a, which runs on compute capability 9.0 alone; this GPU has 8.0" in kernel.gpu_problem(80)
    assert "this GPU has 10.0" in kernel.gpu_problem(100)  # sm_90a code does not run on later GPUs either
    assert KERNELS["fp16/mma_buffered"].gpu_problem(100) is None
    assert "needs compute capability 8.0, this GPU has 7.5" in KERNELS["fp16/mma_buffered"].gpu_problem(75)
    assert KERNELS["fp32/naive"].architectures(("sm_80", "sm_90")) == ("sm_80", "sm_90")


def test_select_by_name_and_precision_prefix():
    assert [k.name for k in catalogue.select(["fp32/naive"])] == ["fp32/naive"]
    assert {k.precision for k in catalogue.select(["fp16"])} == {"fp16"}
    assert len(catalogue.select([])) == len(KERNELS)


def test_an_unknown_kernel_names_the_closest_ones_not_all():
    """The message once listed all 58 kernels in one line of 1,227 characters."""
    with pytest.raises(UnknownKernelError) as info:
        catalogue.get_kernel("fp32/naiv")
    message = str(info.value)
    assert "unknown kernel 'fp32/naiv'; did you mean fp32/naive" in message and len(message) < 200
    assert f"`sgemm list` shows all {len(KERNELS)}" in message
    with pytest.raises(UnknownKernelError) as info:
        catalogue.select(["fp64"])
    assert "did you mean fp16, fp32" in str(info.value) or "did you mean fp32, fp16" in str(info.value)
    with pytest.raises(UnknownKernelError) as info:
        catalogue.get_kernel("zzzz")
    assert "names start with bf16/, fp16/, fp32/" in str(info.value)


HEAD = """
[[precision]]
name = "fp32"
input = "fp32"
accumulate = "fp32"
output = "fp32"
baseline = "fp32/cublas"
tolerance = 1e-5
flop_per_sm_per_clock = { 90 = 256 }
[suite]
sizes = [64, 128]
kernel_sizes = [64]
[[kernel]]
name = "fp32/cublas"
technique = "t"
library = "cublas"
min_compute_capability = 70
sizes = [64, 128]
"""
ENTRY = """
[[kernel]]
name = "fp32/k"
technique = "t"
source = "k.cu"
entry = "k<1>"
multiple_of = { m = 1, n = 1, k = 1 }
min_compute_capability = 70
"""
GOOD = HEAD + ENTRY
# An entry as catalogues wrote them before kernels stated their own geometry.
OLD_STYLE = GOOD + "block_threads = [32, 1]\nblock_tile = [1, 32]\n"


@pytest.mark.parametrize("edit, message", [
    (lambda t: t.replace('name = "fp32/k"', 'name = "fp64/k"'), "precision one of \\('fp32',\\)"),
    (lambda t: t.replace('technique = "t"\n', ""), "missing fields"),
    (lambda t: t.replace('technique = "t"', 'technique = "t"\ncolour = "red"'), "unknown fields"),
    (lambda t: t.replace('"k.cu"', '"missing.cu"'), "is not in"),
    (lambda t: t + "block_threads = [32]\n", "two positive integers"),
    (lambda t: t.replace("m = 1, ", ""), "exactly m, n and k"),
    (lambda t: t + ENTRY, "fp32/k: listed twice"),
    (lambda t: t.replace("[[kernel]]", "[[kernel]"), "cannot read"),
    (lambda t: t + "pitch = 0\n", "pitch must be a positive integer"),
    (lambda t: t + 'may_spill = "yes"\n', "may_spill must be true or false"),
    (lambda t: t + "sizes = [256]\n", r"sizes must be some of the suite's sizes \[64, 128\]"),
    (lambda t: t + "shared_memory = 300000\n", "shared_memory must be 0 to 232448 bytes"),
    (lambda t: t + "cluster = [2, 1]\n", "cluster must be three positive integers"),
    (lambda t: t + 'grid = "waves"\n', "grid must be one of"),
    (lambda t: t + 'target = "sm_90"\n', "architecture-specific target such as 'sm_90a'"),
    (lambda t: t + "tma = { D = { box = [8, 8], swizzle = 0 } }\n", "tma maps operands"),
    (lambda t: t + "tma = { A = { box = [8, 8] } }\n", "tma.A needs exactly box and swizzle"),
    (lambda t: t + "tma = { A = { box = [8, 512], swizzle = 0 } }\n", r"tma.A.box \[8, 512\]: at most 256"),
    (lambda t: t + "tma = { B = { box = [8, 8], swizzle = 48 } }\n", "tma.B.swizzle must be one of"),
    (lambda t: t + "tma = { C = { box = [8, 64], swizzle = 128 } }\n", r"row of the box \(256 bytes\) must fit"),
    (lambda t: t.replace('baseline = "fp32/cublas"', 'baseline = "fp32/k"'), "'fp32/k' as its baseline, which is not"),
    (lambda t: t.replace('output = "fp32"', 'output = "fp64"'), "output must be one of"),
    (lambda t: t.replace('accumulate = "fp32"', 'accumulate = "bf16"'),
     r"accumulate must be one of \('fp32', 'fp16'\)"),
    (lambda t: t.replace("tolerance = 1e-5", "tolerance = 2"), "tolerance must be a relative error"),
    (lambda t: t.replace("{ 90 = 256 }", '{ hopper = 256 }'), "flop_per_sm_per_clock maps compute capabilities"),
    (lambda t: t.replace('accumulate = "fp32"\n', ""), r"precision fp32: missing fields \['accumulate'\]"),
])
def test_malformed_entries_are_named(tmp_path: Path, edit, message):
    (tmp_path / "k.cu").write_text("// k\n")
    load_catalogue(_write(tmp_path, GOOD), tmp_path)  # the unedited text is valid
    with pytest.raises(CatalogueError, match=message):
        load_catalogue(_write(tmp_path, edit(GOOD)), tmp_path)


def _write(directory: Path, text: str) -> Path:
    path = directory / "catalogue.toml"
    path.write_text(text)
    return path


def test_a_library_kernel_takes_no_compile_or_launch_fields(tmp_path: Path):
    load_catalogue(_write(tmp_path, HEAD), tmp_path)
    with pytest.raises(CatalogueError, match=r"a library kernel has no \['pitch'\]"):
        load_catalogue(_write(tmp_path, HEAD + "pitch = 4\n"), tmp_path)
    with pytest.raises(CatalogueError, match=r"a library kernel has no \['cluster'\]"):
        load_catalogue(_write(tmp_path, HEAD + "cluster = [2, 1, 1]\n"), tmp_path)


def test_without_kernel_sizes_an_entry_is_timed_at_every_size_of_the_suite(tmp_path: Path):
    (tmp_path / "k.cu").write_text("// k\n")
    kernels = load_catalogue(_write(tmp_path, GOOD.replace("kernel_sizes = [64]\n", "")), tmp_path)
    assert kernels["fp32/k"].sizes == (64, 128)


def test_launch_fields_are_read(tmp_path: Path):
    (tmp_path / "k.cu").write_text("// k\n")
    text = OLD_STYLE + ('shared_memory = 1024\ncluster = [2, 1, 1]\ngrid = "persistent"\ntarget = "sm_90a"\n'
                        "tma = { C = { box = [64, 32], swizzle = 128 }, A = { box = [128, 32], swizzle = 128 } }\n")
    kernel = load_catalogue(_write(tmp_path, text), tmp_path)["fp32/k"]
    geometry = kernel.stated_geometry
    assert (geometry.shared_memory, geometry.cluster, kernel.grid_rule, kernel.target) == (
        1024, (2, 1, 1), "persistent", "sm_90a")
    assert [(copy.operand, copy.box, copy.swizzle) for copy in geometry.tma] == [("A", (128, 32), 128),
                                                                                   ("C", (64, 32), 128)]
    assert (geometry.block_threads, geometry.block_tile) == ((32, 1), (1, 32))
    assert kernel.target_compute_capability == 90 and kernel.sizes == (64,)
    assert [field for field, _ in kernel.stated] == list(catalogue.GEOMETRY_FIELDS)


def test_an_entry_that_states_part_of_its_geometry_or_none_has_no_whole_geometry(tmp_path: Path):
    """The launch then takes the kernel's own (sgemm/measuring/resources.py), holding a stated field against it."""
    (tmp_path / "k.cu").write_text("// k\n")
    assert load_catalogue(_write(tmp_path, GOOD), tmp_path)["fp32/k"].stated_geometry is None
    partial = load_catalogue(_write(tmp_path, GOOD + "block_tile = [128, 64]\n"), tmp_path)["fp32/k"]
    assert partial.stated == (("block_tile", (128, 64)),) and partial.stated_geometry is None


def test_pitched_rows_round_each_leading_dimension_up():
    assert KERNELS["fp32/pitched"].leading_dimensions(5, 6, 7) == (8, 8, 8)
    assert KERNELS["fp32/float4"].leading_dimensions(5, 6, 7) == (7, 6, 6)


def test_shapes_beyond_the_grid_or_32_bit_indexing_are_refused():
    tiles_8 = catalogue.Geometry((8, 8), (8, 8))
    assert "65535 blocks" in KERNELS["fp32/naive_8"].launch_problem(tiles_8, 8 * 65535 + 1, 16, 16)
    assert KERNELS["fp32/naive_8"].launch_problem(tiles_8, 8 * 65535, 16, 16) is None
    assert "32-bit" in KERNELS["fp32/naive"].shape_problem(46341, 46341, 46341)
    assert KERNELS["fp32/cublas"].shape_problem(8 * 65535 + 1, 16, 16) is None  # cuBLAS has no such limit


def test_renamed_from_takes_one_old_name_or_several(tmp_path: Path):
    (tmp_path / "k.cu").write_text("// k\n")
    one = load_catalogue(_write(tmp_path, GOOD + 'renamed_from = "fp32/old"\n'), tmp_path)["fp32/k"]
    several = load_catalogue(_write(tmp_path, GOOD + 'renamed_from = ["fp32/a", "fp32/b"]\n'), tmp_path)["fp32/k"]
    assert one.renamed_from == ("fp32/old",) and several.renamed_from == ("fp32/a", "fp32/b")
    assert load_catalogue(_write(tmp_path, GOOD), tmp_path)["fp32/k"].renamed_from == ()


SECOND = ENTRY.replace('"fp32/k"', '"fp32/k2"')


@pytest.mark.parametrize("text, message", [
    (GOOD + "renamed_from = 3\n", "renamed_from must be a kernel name or a list of them"),
    (GOOD + 'renamed_from = ["fp32/a", 3]\n', "renamed_from must be a kernel name or a list of them"),
    (GOOD + 'renamed_from = "fp16/k"\n', "fp32/k: renamed_from 'fp16/k' must be another 'fp32/<kernel>' name"),
    (GOOD + 'renamed_from = "fp32/k"\n', "renamed_from 'fp32/k' must be another"),
    (GOOD + 'renamed_from = "fp32"\n', "renamed_from 'fp32' must be another"),
    (GOOD + 'renamed_from = "fp32/k2"\n' + SECOND, "fp32/k: renamed_from 'fp32/k2', which is still listed as a kernel"),
    (GOOD + 'renamed_from = "fp32/old"\n' + SECOND + 'renamed_from = "fp32/old"\n',
     "fp32/k2: renamed_from 'fp32/old', which fp32/k was renamed from"),
])
def test_a_bad_renamed_from_is_named(tmp_path: Path, text, message):
    (tmp_path / "k.cu").write_text("// k\n")
    with pytest.raises(CatalogueError, match=re.escape(message)):
        load_catalogue(_write(tmp_path, text), tmp_path)


# --- A bad field is refused by name ----------------------------------------------------------------------------------


def _kernel_edit(old: str, new: str) -> str:
    """GOOD with one edit inside the fp32/k table (HEAD's library entry has fields of the same names)."""
    assert ENTRY.count(old) == 1, old
    return HEAD + ENTRY.replace(old, new)


def _head_edit(old: str, new: str) -> str:
    assert HEAD.count(old) == 1, old
    return HEAD.replace(old, new) + ENTRY


def _load(path: Path):
    return load_catalogue(path, path.parent)


SEED = '\n[[seed]]\nfile = "a.txt"\ntitle = "a worklog"\nsizes = [64]\n'
MCC = "min_compute_capability = 70"

# (what is wrong, the catalogue's text, the reader that meets it, what its message must say: the entry, the field, what
# was expected and what was found; "{path}" is the file's)
BAD_FIELDS = [
    # [[kernel]] fields
    ("compute capability a word", _kernel_edit(MCC, 'min_compute_capability = "abc"'), _load,
     ["fp32/k: min_compute_capability must be an integer such as 80 for compute capability 8.0", "got 'abc'"]),
    ("compute capability a float", _kernel_edit(MCC, "min_compute_capability = 7.0"), _load,
     ["fp32/k: min_compute_capability", "such as 80 for compute capability 8.0", "got 7.0"]),
    ("compute capability a single digit", _kernel_edit(MCC, "min_compute_capability = 8"), _load,
     ["fp32/k: min_compute_capability", "such as 80", "got 8"]),
    ("compute capability a bool", _kernel_edit(MCC, "min_compute_capability = true"), _load,
     ["fp32/k: min_compute_capability", "got True"]),
    ("origin without label", GOOD + 'origins = [{ seed = "a.txt" }]\n', _load,
     ["fp32/k: origins[0] must be a table { seed = file, label = step } (it lacks label)"]),
    ("origins a string", GOOD + 'origins = "x"\n', _load,
     ["fp32/k: origins must be a list of { seed = file, label = step } tables, got 'x'"]),
    ("origins a list of strings", GOOD + 'origins = ["x"]\n', _load, ["fp32/k: origins[0] must be a table", "'x'"]),
    ("origin label a number", GOOD + 'origins = [{ seed = "a.txt", label = 3 }]\n', _load,
     ["fp32/k: origins[0].label must be a non-empty string, got 3"]),
    ("multiple_of zero", _kernel_edit("m = 1,", "m = 0,"), _load,
     ["fp32/k: multiple_of.m must be a positive integer, got 0"]),
    ("multiple_of a string", _kernel_edit("m = 1,", 'm = "a",'), _load,
     ["fp32/k: multiple_of.m must be a positive integer, got 'a'"]),
    ("multiple_of negative", _kernel_edit("k = 1 }", "k = -4 }"), _load, ["fp32/k: multiple_of.k", "got -4"]),
    ("multiple_of a bool", _kernel_edit("n = 1,", "n = true,"), _load, ["fp32/k: multiple_of.n", "got True"]),
    ("multiple_of a list", _kernel_edit("{ m = 1, n = 1, k = 1 }", "[1, 1, 1]"), _load,
     ["fp32/k: multiple_of needs exactly m, n and k", "got [1, 1, 1]"]),
    ("multiple_of an extra key", _kernel_edit("k = 1 }", "k = 1, q = 2 }"), _load,
     ["fp32/k: multiple_of needs exactly m, n and k", "(it also has q)"]),
    ("shared_memory a bool", GOOD + "shared_memory = true\n", _load,
     ["fp32/k: shared_memory must be 0 to 232448 bytes, got True"]),
    ("block_threads holding a bool", GOOD + "block_threads = [32, true]\n", _load,
     ["fp32/k: block_threads must be two positive integers, got [32, True]"]),
    ("block_tile of one", GOOD + "block_tile = [128]\n", _load,
     ["fp32/k: block_tile must be two positive integers, got [128]"]),
    ("block_tile a string", GOOD + 'block_tile = "128x128"\n', _load, ["fp32/k: block_tile", "got '128x128'"]),
    ("cluster holding a bool", GOOD + "cluster = [2, true, 1]\n", _load,
     ["fp32/k: cluster must be three positive integers, got [2, True, 1]"]),
    ("pitch a bool", GOOD + "pitch = true\n", _load, ["fp32/k: pitch must be a positive integer, got True"]),
    ("pitch a float", GOOD + "pitch = 4.0\n", _load, ["fp32/k: pitch", "got 4.0"]),
    ("may_spill a number", GOOD + "may_spill = 1\n", _load, ["fp32/k: may_spill must be true or false, got 1"]),
    ("sizes holding a bool", GOOD + "sizes = [true]\n", _load,
     ["fp32/k: sizes[0] must be a positive integer, got True"]),
    ("sizes a number", GOOD + "sizes = 64\n", _load, ["fp32/k: sizes must be a non-empty list", "got 64"]),
    ("sizes empty", GOOD + "sizes = []\n", _load, ["fp32/k: sizes must be a non-empty list", "got []"]),
    ("tma box holding a bool", GOOD + "tma = { A = { box = [true, 8], swizzle = 0 } }\n", _load,
     ["fp32/k: tma.A.box must be two positive integers, got [True, 8]"]),
    ("tma swizzle a bool", GOOD + "tma = { A = { box = [8, 8], swizzle = false } }\n", _load,
     ["fp32/k: tma.A.swizzle must be one of (0, 32, 64, 128) bytes, got False"]),
    ("tma operand a number", GOOD + "tma = { B = 5 }\n", _load, ["fp32/k: tma.B needs exactly box and swizzle, got 5"]),
    ("grid a list", GOOD + 'grid = ["tiles"]\n', _load, ["fp32/k: grid must be one of", "got ['tiles']"]),
    ("target a number", GOOD + "target = 90\n", _load, ["fp32/k: target names an architecture-specific", "got 90"]),
    ("tuned entry keyed by a name", GOOD + 'tuned_entries = { sm_90 = "k<2>" }\n', _load,
     ["fp32/k: tuned_entries maps compute capabilities (e.g. 90) to entries", "got {'sm_90': 'k<2>'}"]),
    ("tuned entry a number", GOOD + "tuned_entries = { 90 = 2 }\n", _load,
     ["fp32/k: tuned_entries.90 must be a non-empty string, got 2"]),
    ("tuned entry older than the kernel", GOOD + 'tuned_entries = { 60 = "k<2>" }\n', _load,
     ["fp32/k: tuned_entries.60: the kernel runs on compute capability from 7.0 on, not 6.0"]),
    ("tuned entry of another template", GOOD + 'tuned_entries = { 90 = "other<2>" }\n', _load,
     ["fp32/k: tuned_entries.90 'other<2>' must instantiate the entry's template k"]),
    ("tuned entry with a placeholder left", GOOD + 'tuned_entries = { 90 = "k<{accumulate}>" }\n', _load,
     ["fp32/k: tuned_entries.90 'k<{accumulate}>' holds {accumulate}"]),
    ("tuned entry on a library kernel", _head_edit("library = \"cublas\"", 'library = "cublas"\ntuned_entries = {}'),
     _load, ["fp32/cublas: a library kernel has no ['tuned_entries']"]),
    ("technique a number", _kernel_edit('technique = "t"', "technique = 3"), _load,
     ["fp32/k: technique must be a non-empty string, got 3"]),
    ("entry a list", _kernel_edit('entry = "k<1>"', 'entry = ["k<1>"]'), _load, ["fp32/k: entry", "got ['k<1>']"]),
    ("source a number", _kernel_edit('source = "k.cu"', "source = 3"), _load, ["fp32/k: source", "got 3"]),
    ("library a number", _head_edit('library = "cublas"', "library = 1"), _load,
     ["fp32/cublas: library must be a non-empty string, got 1"]),
    ("library empty", _head_edit('library = "cublas"', 'library = ""'), _load, ["fp32/cublas: library", "got ''"]),
    ("name a number", _kernel_edit('name = "fp32/k"', "name = 3"), _load,
     ["[[kernel]] table 2 (counting from 1): name must be a non-empty string, got 3"]),
    ("no name", _kernel_edit('name = "fp32/k"\n', ""), _load,
     ["[[kernel]] table 2 (counting from 1): missing fields ['name']"]),
    ("an unknown field", GOOD + "colour = 3\n", _load, ["fp32/k: unknown fields ['colour']"]),
    ("kernel not an array of tables", "kernel = [1]\n" + HEAD.replace("[[kernel]]", "[[nothing]]"), _load,
     ["{path}: kernel[0] must be a table, got 1"]),
    # [suite]
    ("suite without sizes", _head_edit("sizes = [64, 128]\nkernel_sizes", "kernel_sizes"), _load,
     ["the [suite] table of {path}: missing fields ['sizes']"]),
    ("suite kernel_sizes not its sizes", _head_edit("kernel_sizes = [64]", "kernel_sizes = [99]"), _load,
     ["the [suite] table of {path}: kernel_sizes must be some of its sizes [64, 128], got [99]"]),
    ("suite size a float", _head_edit("sizes = [64, 128]\nkernel", "sizes = [64.0, 128]\nkernel"), _load,
     ["the [suite] table of {path}: sizes[0] must be a positive integer, got 64.0"]),
    ("suite sweep shape of a zero", _head_edit("[suite]", '[suite]\nsweep_shapes = ["64x0x64"]'), catalogue.sweep,
     ["the [suite] table of {path}: sweep_shapes[0] must be 'MxNxK' with M, N and K at least 1, got '64x0x64'"]),
    ("suite reference not a hash", _head_edit("[suite]", '[suite]\nreference = "main"'), catalogue.reference,
     ["the [suite] table of {path}: reference must be a full commit hash (40 hex digits), got 'main'"]),
    ("suite architecture a number", _head_edit("[suite]", "[suite]\narchitectures = [90]"), catalogue.architectures,
     ["the [suite] table of {path}: architectures[0] must be a non-empty string, got 90"]),
    # [[precision]]
    ("precision rate a float", _head_edit("{ 90 = 256 }", "{ 90 = 256.5 }"), _load,
     ["precision fp32: flop_per_sm_per_clock.90 must be a positive integer, got 256.5"]),
    ("precision baseline a number", _head_edit('baseline = "fp32/cublas"', "baseline = 1"), _load,
     ["precision fp32: baseline must be a non-empty string, got 1"]),
    # [[seed]]
    ("seed size a string", GOOD + SEED.replace("[64]", '["64"]'), catalogue.seeds,
     ["[[seed]] a.txt: sizes[0] must be a positive integer, got '64'"]),
    ("seed without a title", GOOD + SEED.replace('title = "a worklog"\n', ""), catalogue.seeds,
     ["[[seed]] a.txt: missing fields ['title']"]),
    ("seed file a number", GOOD + SEED.replace('"a.txt"', "3"), catalogue.seeds,
     ["[[seed]] table 1 (counting from 1): file must be a non-empty string, got 3"]),
    # TOML syntax: the file and the place, whichever reader meets it first
    ("broken [suite] header, loading", _head_edit("[suite]", "[suite"), _load,
     ["cannot read {path}: not valid TOML at line 10, column 7: Expected ']' at the end of a table declaration"]),
    ("broken [suite] header, reading seeds", _head_edit("[suite]", "[suite") + SEED, catalogue.seeds,
     ["cannot read {path}: not valid TOML at line 10, column 7"]),
    ("unfinished array at the end", GOOD + "sizes = [64,", _load, ["cannot read {path}: not valid TOML at the end"]),
]


@pytest.mark.parametrize("text, reader, parts", [row[1:] for row in BAD_FIELDS], ids=[row[0] for row in BAD_FIELDS])
def test_a_bad_field_is_refused_naming_the_entry_and_the_field(tmp_path: Path, text, reader, parts):
    (tmp_path / "k.cu").write_text("// k\n")
    path = _write(tmp_path, text)
    try:
        reader(path)
    except CatalogueError as exc:  # anything else propagates: a traceback is what this test exists to prevent
        message = str(exc)
    else:
        pytest.fail(f"{reader.__name__} accepted it")
    for part in parts:
        assert part.replace("{path}", str(path)) in message, message
    assert "\n" not in message
    assert "[[seed]]" not in message or reader is catalogue.seeds  # a syntax error once read as the seeds' fault


def test_a_suite_without_sizes_blames_the_suite_not_the_first_kernel_to_need_them(tmp_path: Path):
    path = _write(tmp_path, HEAD.replace("sizes = [64, 128]\nkernel_sizes", "kernel_sizes"))
    with pytest.raises(CatalogueError) as info:
        load_catalogue(path, tmp_path)
    assert "[suite]" in str(info.value) and "'sizes'" in str(info.value) and "fp32/cublas" not in str(info.value)


def test_the_real_catalogue_reads_as_its_toml_says(tmp_path: Path):
    """Every field of every [[kernel]] table reaches its Kernel unchanged, and every field it leaves out takes the
    dataclass's default (sizes: [suite] kernel_sizes): the checks refuse bad input without reshaping good input."""
    raw = tomllib.loads(catalogue.CATALOGUE_PATH.read_text())
    renamed = {"grid": "grid_rule"}
    defaults = {field.name: field.default for field in dataclasses.fields(catalogue.Kernel)}
    tables = [table for _, table in catalogue.kernel_tables(raw)]
    assert [table["name"] for table in tables] == list(KERNELS)
    assert not any(field in table for table in tables for field in catalogue.GEOMETRY_FIELDS)  # the kernels' own
    for table in tables:
        kernel = KERNELS[table["name"]]
        expected = {**defaults, "sizes": tuple(raw["suite"]["kernel_sizes"]), "kernel_dir": KERNEL_DIR}
        if "target" in table:
            expected["min_compute_capability"] = int(table["target"][3:5])
        for key, value in table.items():
            if key == "multiple_of":
                value = (value["m"], value["n"], value["k"])
            elif key == "origins":
                value = tuple(catalogue.Origin(o["seed"], o["label"]) for o in value)
            elif key == "renamed_from":
                value = (value,) if isinstance(value, str) else tuple(value)
            elif key == "tuned_entries":
                value = tuple((int(cc), entry) for cc, entry in value.items())
            elif isinstance(value, list):
                value = tuple(value)
            expected[renamed.get(key, key)] = value
        expected["types"] = catalogue.load_precisions()[kernel.precision]
        assert dataclasses.asdict(kernel) == dataclasses.asdict(catalogue.Kernel(**expected)), kernel.name
    # A few fields pinned as they read before the checks were declared in one table.
    assert len(KERNELS) >= 58
    assert KERNELS["fp32/pitched"].pitch == 4 and KERNELS["fp32/float4"].multiple_of == (1, 4, 4)
    assert KERNELS["bf16/wgmma_cluster"].entry == "gemm_wgmma_specialized<__nv_bfloat16, 4, 2, 0>"
    assert KERNELS["fp16/wgmma_cluster"].entry == "gemm_wgmma_specialized<__half, 4, 2, 0>"
    assert KERNELS["bf16/wgmma_cluster"].min_compute_capability == 90  # its target's
    assert KERNELS["fp16/mma_buffered"].min_compute_capability == 80
    assert KERNELS["fp32/cublas"].origins == (catalogue.Origin("000_d5d34bc6da484ce9.txt", "CUBLAS"),)
    assert [seed.number for seed in catalogue.seeds()][:2] == ["000", "001"]
    assert catalogue.sweep()[1][0] == (256, 1024, 1024)


def test_past_catalogues_still_load(tmp_path: Path):
    """The gate and the history build kernels of older commits with this reader: every past catalogue it could read
    (those with [[precision]] tables, which older ones lack) must still load, with that commit's own kernels."""
    root = Path(__file__).resolve().parents[1]
    log = subprocess.run(["git", "-C", str(root), "log", "--format=%H", "--", "sgemm/catalogue.toml"],
                         capture_output=True, text=True, check=False)  # an export without .git: skipped below
    commits = log.stdout.split() if log.returncode == 0 else []
    if not commits:
        pytest.skip("no git history of sgemm/catalogue.toml here")
    loaded = 0
    for commit in commits:
        text = subprocess.run(["git", "-C", str(root), "show", f"{commit}:sgemm/catalogue.toml"], capture_output=True,
                              text=True, check=True).stdout
        if "[[precision]]" not in text:
            continue
        tree = sourcetree.export(root, commit, tmp_path / commit)
        assert sourcetree.kernels(tree), commit
        loaded += 1
    assert loaded >= 1


# --- A kernel is one .cu file and one catalogue entry --------------------------------------------------------------

FIXTURE_SOURCE = """// Test fixture: one thread per element of C, K walked in order; any shape.
// Tile parameters: BX x BY threads, a BX x BY tile of C per block.
#include "common.cuh"

template <int BX, int BY>
__device__ constexpr LaunchGeometry gemm_fixture_geometry = {{BX, BY}, {BY, BX}, {1, 1, 1}};

template <int BX, int BY>
__global__ void __launch_bounds__(BX * BY)
gemm_fixture(int M, int N, int K, float alpha, const float* A, int lda, const float* B, int ldb,
             float beta, float* C, int ldc) {
    const int row = blockIdx.y * BY + threadIdx.y;
    const int col = blockIdx.x * BX + threadIdx.x;
    if (row >= M || col >= N) {
        return;
    }
    float sum = 0.0f;
    for (int k = 0; k < K; ++k) {
        sum += A[row * lda + k] * B[k * ldb + col];
    }
    C[row * ldc + col] = alpha * sum + (beta != 0.0f ? beta * C[row * ldc + col] : 0.0f);
}
"""
FIXTURE_ENTRY = """
[[kernel]]
name = "fp32/fixture"
technique = "test fixture: one thread per C element"
source = "fp32_fixture.cu"
entry = "gemm_fixture<16, 8>"
multiple_of = { m = 1, n = 1, k = 1 }
min_compute_capability = 70
origins = [{ seed = "001_62eeff6f76076a98.txt", label = "fixture step" }]
"""
# Run in the scratch copy, with its package and suite: what each consumer of the catalogue makes of the new kernel.
CONSUMERS = """
import json
from benchmarks import bench_gemm
from sgemm import catalogue, sourcetree
from sgemm.results.asvsuite import cases_for
from sgemm.site.ladders import seed_kernels
from sgemm.measuring.resources import launch_geometry, usage_table

kernels = catalogue.load_catalogue()
seed = next(s for s in catalogue.seeds() if s.number == "001")
usage = usage_table([kernels["fp32/fixture"]], ("sm_80",))[("fp32/fixture", "sm_80")]
print(json.dumps({
    "suite": "fixture" in bench_gemm.Gemm.params[0],
    "report": [label for label, kernel in seed_kernels(seed, kernels) if kernel.name == "fp32/fixture"],
    "registers": usage.registers,
    "geometry": [list(launch_geometry(kernels["fp32/fixture"]).block_tile)],
    "gate cases": [c.label for c in cases_for([kernels["fp32/fixture"]], [1024], [], [])],
}))
"""


def test_a_kernel_is_one_source_file_and_one_catalogue_entry(tmp_path, monkeypatch):
    from sgemm.gate.changes import select_kernels

    root = Path(__file__).resolve().parents[1]
    for name, value in (("GIT_AUTHOR_NAME", "t"), ("GIT_AUTHOR_EMAIL", "t@t"), ("GIT_COMMITTER_NAME", "t"),
                        ("GIT_COMMITTER_EMAIL", "t@t")):
        monkeypatch.setenv(name, value)
    for folder in ("kernels", "benchmarks", "sgemm"):
        shutil.copytree(root / folder, tmp_path / folder, ignore=shutil.ignore_patterns("__pycache__"))
    for name in ("asv.conf.json", "pyproject.toml"):
        shutil.copy(root / name, tmp_path / name)

    def git(*args):
        return subprocess.run(["git", "-C", str(tmp_path), *args], check=True, capture_output=True,
                              text=True).stdout.strip()

    git("init", "-q", "-b", "main")
    git("add", "-A")
    git("commit", "-qm", "base")
    base = git("rev-parse", "HEAD")
    (tmp_path / "kernels" / "fp32_fixture.cu").write_text(FIXTURE_SOURCE)
    with open(tmp_path / "sgemm" / "catalogue.toml", "a") as entries:
        entries.write(FIXTURE_ENTRY)
    git("add", "-A")
    git("commit", "-qm", "a kernel: one .cu file and one catalogue entry")
    head = git("rev-parse", "HEAD")
    assert git("diff", "--name-only", base, head).split() == ["kernels/fp32_fixture.cu", "sgemm/catalogue.toml"]

    done = subprocess.run([sys.executable, "-c", CONSUMERS], cwd=tmp_path, capture_output=True, text=True,
                          env={**os.environ, "PYTHONPATH": str(tmp_path)})
    assert done.returncode == 0, done.stderr
    seen = json.loads(done.stdout.splitlines()[-1])
    assert seen["suite"] and seen["report"] == ["fixture step"] and seen["registers"] > 0
    assert seen["geometry"] == [[8, 16]]  # the kernel's own: BY rows of BX columns
    assert seen["gate cases"] == ["fp32/fixture 1024x1024x1024"]
    selection = select_kernels(str(tmp_path), base, head)
    assert selection.reasons["fp32/fixture"] == "new kernel" and "fp32/fixture" in selection.kernels


# --- One table, several precisions ---------------------------------------------------------------------------------

TWO_PRECISIONS = HEAD.replace("[suite]", """[[precision]]
name = "bf16"
input = "bf16"
accumulate = "fp32"
output = "fp32"
baseline = "bf16/cublas"
tolerance = 1e-4
flop_per_sm_per_clock = { 90 = 4096 }
[suite]""") + """
[[kernel]]
name = "bf16/cublas"
technique = "t"
library = "cublas"
min_compute_capability = 80
sizes = [64, 128]
"""
TWINS = TWO_PRECISIONS + """
[[kernel]]
name = "k"
precisions = ["fp32", "bf16"]
technique = "t"
source = "k.cu"
entry = "k<{input}, {output}, 1>"
multiple_of = { m = 1, n = 1, k = 1 }
target = "sm_90a"
"""


def test_a_table_of_several_precisions_is_a_kernel_in_each(tmp_path: Path):
    (tmp_path / "k.cu").write_text("// k\n")
    kernels = load_catalogue(_write(tmp_path, TWINS + 'renamed_from = "old"\n'), tmp_path)
    assert list(kernels) == ["fp32/cublas", "bf16/cublas", "fp32/k", "bf16/k"]
    assert kernels["fp32/k"].entry == "k<float, float, 1>" and kernels["bf16/k"].entry == "k<__nv_bfloat16, float, 1>"
    assert kernels["bf16/k"].types.name == "bf16" and kernels["bf16/k"].technique == kernels["fp32/k"].technique
    assert kernels["bf16/k"].renamed_from == ("bf16/old",) and kernels["fp32/k"].renamed_from == ("fp32/old",)
    assert kernels["bf16/k"].min_compute_capability == 90  # its target's


@pytest.mark.parametrize("edit, message", [
    (lambda t: t.replace('name = "k"', 'name = "fp32/k"'),
     "fp32/k: a table with precisions names the kernel without its precision (name = \"wgmma_tma\"), got 'fp32/k'"),
    (lambda t: t.replace('["fp32", "bf16"]', '"fp32"'),
     "k: precisions must be a non-empty list of precisions such as [\"fp16\", \"bf16\"], got 'fp32'"),
    (lambda t: t.replace('["fp32", "bf16"]', "[]"), "precisions must be a non-empty list"),
    (lambda t: t.replace('["fp32", "bf16"]', '["fp32", "fp64"]'),
     "fp64/k: precisions names 'fp64', which no [[precision]] table defines"),
    (lambda t: t.replace('["fp32", "bf16"]', '["bf16", "bf16"]'), "precisions lists a precision twice"),
    (lambda t: t.replace("{input}", "float"), "entry 'k<float, {output}, 1>' must name the element type as {input}"),
    (lambda t: t.replace("{output}", "{accumulate}"), "fp32/k: entry 'k<float, {accumulate}, 1>' holds "
     "{accumulate}; an entry may hold {input} and {output}"),
    (lambda t: t.replace('target = "sm_90a"\n', ""), "fp32/k: missing fields ['min_compute_capability']"),
    (lambda t: t + "block_tile = [1, true]\n", "fp32/k: block_tile must be two positive integers"),
])
def test_a_bad_table_of_several_precisions_is_named(tmp_path: Path, edit, message):
    (tmp_path / "k.cu").write_text("// k\n")
    with pytest.raises(CatalogueError) as info:
        load_catalogue(_write(tmp_path, edit(TWINS)), tmp_path)
    assert message in str(info.value)


def test_the_hopper_ladder_is_written_once_for_both_of_its_precisions():
    """Each Hopper table is an FP16 and a BF16 kernel: the section once wrote every table twice."""
    text = catalogue.CATALOGUE_PATH.read_text()
    hopper = text[text.index("# The Hopper ladder"):]
    assert len(hopper.splitlines()) <= 110  # it was 220 lines when each precision had its own tables
    hopper_kernels = [k for k in COMPILED if k.target == "sm_90a"]
    assert {k.family for k in hopper_kernels if k.precision == "fp16"} == {
        k.family for k in hopper_kernels if k.precision == "bf16"}
    for kernel in hopper_kernels:
        twin = KERNELS[f"{'bf16' if kernel.precision == 'fp16' else 'fp16'}/{kernel.family}"]
        assert kernel.entry.replace("__nv_bfloat16", "T").replace("__half", "T") == \
            twin.entry.replace("__nv_bfloat16", "T").replace("__half", "T")


def test_an_operand_is_row_major_over_its_dimensions():
    assert [catalogue.operand_shape(op, 2, 3, 5) for op in catalogue.OPERAND_DIMS] == [(2, 5), (5, 3), (2, 3)]
    assert catalogue.TMA_OPERANDS == ("A", "B", "C")


def test_a_catalogue_is_built_again_only_when_its_text_changes(tmp_path):
    path = tmp_path / "catalogue.toml"
    shutil.copy(catalogue.CATALOGUE_PATH, path)
    first = load_catalogue(path)
    first.pop("fp32/naive")  # the caller's own dict: the next reader still gets every kernel
    again = load_catalogue(path)
    assert "fp32/naive" in again and again["fp32/warptile"] is first["fp32/warptile"]  # not built again
    path.write_text(path.read_text().replace('technique = "', 'technique = "Edited: ', 1))
    edited = load_catalogue(path)
    assert [name for name, kernel in edited.items() if kernel.technique.startswith("Edited: ")] and edited != again
    shutil.copytree(KERNEL_DIR, tmp_path / "kernels")
    other_tree = load_catalogue(path, tmp_path / "kernels")  # another tree's kernels are built for it
    assert other_tree["fp32/naive"].kernel_dir == tmp_path / "kernels"


# --- The project's catalogue, one bad field at a time ---------------------------------------------------------------
# Each row breaks one thing of a copy of sgemm/catalogue.toml and reads it as every command does: the message is one
# line naming the table, the field, the rule and the value found. (Not the kernels' geometry: block_threads,
# block_tile, shared_memory, tma, cluster and grid are checked against the compiled kernel elsewhere.) That every
# command reaches this check and says the message in one line with exit 2 is test_bad_input.py's.

CATALOGUE = "repo/sgemm/catalogue.toml"


def _table(text: str, where: str) -> tuple[int, int]:
    """Where a table of the catalogue starts and ends: a kernel by name, "precision NAME", "suite" or "seed FILE"."""
    kind, _, name = where.partition(" ")
    heads = {"precision": f'[[precision]]\nname = "{name}"\n', "suite": "\n[suite]\n",
             "seed": f'[[seed]]\nfile = "{name}'}
    start = text.index(heads.get(kind, f'[[kernel]]\nname = "{where}"\n'))
    end = text.find("\n[", start + 2)
    return start, len(text) if end < 0 else end


def edit(*changes: tuple[str, str, str]):
    """The catalogue with each (table, old, new) change made inside that table; an `old` ending in '...' stands for
    the rest of its line."""
    def setup(root: Path) -> None:
        path = root / CATALOGUE
        text = path.read_text()
        for where, old, new in changes:
            start, end = _table(text, where)
            table = text[start:end]
            if old.endswith("..."):
                line_start = table.index("\n" + old[:-3]) + 1
                new = new.replace(old, table[line_start:table.index("\n", line_start)])
                old = table[line_start:table.index("\n", line_start)]
            assert old in table, f"{old!r} is not in the {where} table: the catalogue changed, update this row"
            text = text[:start] + table.replace(old, new, 1) + text[end:]
        path.write_text(text)

    return setup


def replace_file(content: str | bytes | None):
    """The catalogue's file replaced by `content`, by a folder (content "folder") or by nothing (None)."""
    def setup(root: Path) -> None:
        path = root / CATALOGUE
        path.unlink()
        if content == "folder":
            path.mkdir()
        elif content is not None:
            (path.write_bytes if isinstance(content, bytes) else path.write_text)(content)

    return setup


K, L, P, S, D = "fp32/naive", "fp32/cublas", "precision fp32", "suite", "seed 000"
ORIGIN = 'seed = "000_d5d34bc6da484ce9.txt", label = "kernel_1"'
MULTIPLE = "multiple_of = { m = 1, n = 1, k = 1 }"
SOURCE = 'source = "fp32_naive.cu"'
SIZES = "sizes = [1000, 1024, 2048, 4096, 8192]"


def field(where: str, old: str, new: str):
    return edit((where, old, new))


def added(where: str, after: str, line: str):
    return edit((where, after, f"{after}\n{line}"))


# (what is wrong, the change, what the message says: the entry or table, the field, the rule, the value found)
CATALOGUE_ERRORS = [
    # [[kernel]]: names
    ("name empty", field(K, 'name = "fp32/naive"', 'name = ""'),
     "[[kernel]] table 4 (counting from 1): name must be a non-empty string, got ''"),
    ("name a number", field(K, 'name = "fp32/naive"', "name = 5"), "name must be a non-empty string, got 5"),
    ("name of no precision", field(K, 'name = "fp32/naive"', 'name = "fp64/naive"'),
     "fp64/naive: a name is '<precision>/<kernel>' with precision one of ('fp32', 'fp16', 'bf16')"),
    ("name without a kernel", field(K, 'name = "fp32/naive"', 'name = "fp32"'),
     "fp32: a name is '<precision>/<kernel>'"),
    ("name of three parts", field(K, 'name = "fp32/naive"', 'name = "fp32/naive/x"'),
     "fp32/naive/x: a name is '<precision>/<kernel>'"),
    ("name upper case", field(K, 'name = "fp32/naive"', 'name = "FP32/naive"'), "FP32/naive: a name is"),
    ("name twice", field(K, 'name = "fp32/naive"', 'name = "fp32/naive_16"'), "fp32/naive_16: listed twice"),
    ("name missing", field(K, 'name = "fp32/naive"\n', ""), ("[[kernel]] table 4 (counting from 1): missing fields "
     "['name']")),
    # technique, library
    ("technique empty", field(K, "technique = ...", 'technique = ""'),
     "fp32/naive: technique must be a non-empty string, got ''"),
    ("technique a number", field(K, "technique = ...", "technique = 3"), "fp32/naive: technique must be a non-empty"),
    ("technique missing", field(K, "technique = ...", "#"), "fp32/naive: missing fields ['technique']"),
    ("library empty", field(L, 'library = "cublas"', 'library = ""'),
     "fp32/cublas: library must be a non-empty string"),
    ("library a number", field(L, 'library = "cublas"', "library = 1"), "fp32/cublas: library must be a non-empty"),
    ("library missing", field(L, 'library = "cublas"', "#"), "fp32/cublas: a compiled kernel needs ["),
    ("library kernel with a source", added(L, 'library = "cublas"', SOURCE), ("fp32/cublas: a library kernel has no "
     "['source']")),
    ("library kernel with a pitch", added(L, 'library = "cublas"', "pitch = 8"), "a library kernel has no ['pitch']"),
    ("library kernel with may_spill", added(L, 'library = "cublas"', "may_spill = true"),
     "a library kernel has no ['may_spill']"),
    ("unknown field", added(K, SOURCE, 'colour = "red"'), "fp32/naive: unknown fields ['colour']"),
    # min_compute_capability
    ("compute capability a word", field(K, MCC, 'min_compute_capability = "abc"'),
     "fp32/naive: min_compute_capability must be an integer such as 80 for compute capability 8.0"),
    ("compute capability 7.0", field(K, MCC, "min_compute_capability = 7.0"), ("min_compute_capability must be an "
     "integer such as 80 for compute capability 8.0 (major * 10 + minor), got 7.0")),
    ("compute capability 8", field(K, MCC, "min_compute_capability = 8"), ("min_compute_capability must be an integer "
     "such as 80 for compute capability 8.0 (major * 10 + minor), got 8")),
    ("compute capability true", field(K, MCC, "min_compute_capability = true"), "got True"),
    ("compute capability negative", field(K, MCC, "min_compute_capability = -70"), "got -70"),
    ("compute capability a list", field(L, MCC, "min_compute_capability = [70]"),
     ("fp32/cublas: min_compute_capability "
     "must be an integer")),
    ("compute capability missing", field(K, MCC, "#"), "fp32/naive: missing fields ['min_compute_capability']"),
    # origins
    ("origins a string", field(K, "origins = ...", 'origins = "x"'),
     "fp32/naive: origins must be a list of { seed = file, label = step } tables, got 'x'"),
    ("origin without label", field(K, ', label = "kernel_1" }', " }"),
     "fp32/naive: origins[0] must be a table { seed = file, label = step } (it lacks label)"),
    ("origin without seed", field(K, ORIGIN, 'label = "kernel_1"'),
     ("origins[0] must be a table { seed = file, label = "
     "step } (it lacks seed)")),
    ("origin seed empty", field(K, ORIGIN, 'seed = "", label = "kernel_1"'),
     "fp32/naive: origins[0].seed must be a non-empty string, got ''"),
    ("origin seed a number", field(K, ORIGIN, 'seed = 0, label = "kernel_1"'), "origins[0].seed must be a non-empty"),
    ("origin label a number", field(K, ORIGIN, 'seed = "000_d5d34bc6da484ce9.txt", label = 1'),
     "fp32/naive: origins[0].label must be a non-empty string, got 1"),
    ("origin a number", field(K, "{ " + ORIGIN + " }", "1"), "fp32/naive: origins[0] must be a table"),
    # renamed_from
    ("renamed_from a number", added(K, MCC, "renamed_from = 5"), ("fp32/naive: renamed_from must be a kernel name or a "
     "list of them, got 5")),
    ("renamed_from itself", added(K, MCC, 'renamed_from = "fp32/naive"'),
     "fp32/naive: renamed_from 'fp32/naive' must be another 'fp32/<kernel>' name"),
    ("renamed_from another precision", added(K, MCC, 'renamed_from = "fp16/old"'),
     "renamed_from 'fp16/old' must be another 'fp32/<kernel>' name"),
    ("renamed_from a list with a number", added(K, MCC, 'renamed_from = ["fp32/old", 3]'),
     "renamed_from must be a kernel name or a list of them, got ['fp32/old', 3]"),
    ("renamed_from a kernel still listed", added(K, MCC, 'renamed_from = "fp32/naive_16"'),
     "fp32/naive: renamed_from 'fp32/naive_16', which is still listed as a kernel"),
    ("renamed_from without a kernel", added(K, MCC, 'renamed_from = "old"'), "renamed_from 'old' must be another"),
    ("renamed_from empty", added(K, MCC, 'renamed_from = ""'), "renamed_from '' must be another 'fp32/<kernel>' name"),
    ("renamed_from claimed twice", edit((L, MCC, f'{MCC}\nrenamed_from = "fp32/old"'),
                                        (K, MCC, f'{MCC}\nrenamed_from = "fp32/old"')),
     "fp32/naive: renamed_from 'fp32/old', which fp32/cublas was renamed from"),
    # sizes
    ("sizes empty", added(K, MCC, "sizes = []"),
     ("fp32/naive: sizes must be a non-empty list of the suite's sizes, got "
     "[]")),
    ("sizes not the suite's", added(K, MCC, "sizes = [999]"),
     "fp32/naive: sizes must be some of the suite's sizes [1000, 1024, 2048, 4096, 8192], got [999]"),
    ("sizes a string", added(K, MCC, 'sizes = "1024"'), ("sizes must be a non-empty list of the suite's sizes, got "
     "'1024'")),
    ("sizes zero", added(K, MCC, "sizes = [0]"), "fp32/naive: sizes[0] must be a positive integer, got 0"),
    ("sizes a float", added(K, MCC, "sizes = [1024.0]"), "sizes[0] must be a positive integer, got 1024.0"),
    ("sizes of a library kernel not the suite's", field(L, MCC, f"{MCC}\nsizes = [4096, 512]"),
     "fp32/cublas: sizes must be some of the suite's sizes"),
    # source, entry
    ("source not there", field(K, SOURCE, 'source = "nope.cu"'), ("fp32/naive: source 'nope.cu' is not in "
     "{repo}/kernels")),
    ("source empty", field(K, SOURCE, 'source = ""'), "fp32/naive: source must be the name of a file in kernels/"),
    ("source a number", field(K, SOURCE, "source = 1"), ("source must be the name of a file in kernels/ (no folders), "
     "got 1")),
    ("source outside kernels", field(K, SOURCE, 'source = "../asv.conf.json"'),
     "source must be the name of a file in kernels/ (no folders), got '../asv.conf.json'"),
    ("source the kernels folder", field(K, SOURCE, 'source = "."'), "source must be the name of a file in kernels/"),
    ("source missing", field(K, SOURCE, "#"), "fp32/naive: a compiled kernel needs ['source']"),
    ("entry empty", field(K, "entry = ...", 'entry = ""'), "fp32/naive: entry must be a non-empty string, got ''"),
    ("entry a number", field(K, "entry = ...", "entry = 3"), "fp32/naive: entry must be a non-empty string, got 3"),
    ("entry missing", field(K, "entry = ...", "#"), "fp32/naive: a compiled kernel needs ['entry']"),
    # multiple_of, pitch, may_spill, target
    ("multiple_of zero", field(K, MULTIPLE, "multiple_of = { m = 0, n = 1, k = 1 }"),
     "fp32/naive: multiple_of.m must be a positive integer, got 0"),
    ("multiple_of a word", field(K, MULTIPLE, 'multiple_of = { m = "a", n = 1, k = 1 }'),
     "fp32/naive: multiple_of.m must be a positive integer, got 'a'"),
    ("multiple_of negative", field(K, MULTIPLE, "multiple_of = { m = -16, n = 1, k = 1 }"),
     "multiple_of.m must be a positive integer, got -16"),
    ("multiple_of without k", field(K, MULTIPLE, "multiple_of = { m = 1, n = 1 }"),
     "fp32/naive: multiple_of needs exactly m, n and k, each a positive integer (it lacks k)"),
    ("multiple_of with q", field(K, MULTIPLE, "multiple_of = { m = 1, n = 1, k = 1, q = 2 }"),
     "multiple_of needs exactly m, n and k, each a positive integer (it also has q)"),
    ("multiple_of a number", field(K, MULTIPLE, "multiple_of = 16"),
     "multiple_of needs exactly m, n and k, each a positive integer, got 16"),
    ("multiple_of true", field(K, MULTIPLE, "multiple_of = { m = true, n = 1, k = 1 }"),
     "multiple_of.m must be a positive integer, got True"),
    ("multiple_of a float", field(K, MULTIPLE, "multiple_of = { m = 1, n = 1, k = 1.5 }"),
     "multiple_of.k must be a positive integer, got 1.5"),
    ("multiple_of missing", field(K, MULTIPLE, "#"), "fp32/naive: a compiled kernel needs ['multiple_of']"),
    ("pitch zero", added(K, SOURCE, "pitch = 0"), "fp32/naive: pitch must be a positive integer, got 0"),
    ("pitch a string", added(K, SOURCE, 'pitch = "8"'), "fp32/naive: pitch must be a positive integer, got '8'"),
    ("may_spill a string", added(K, SOURCE, 'may_spill = "yes"'), ("fp32/naive: may_spill must be true or false, got "
     "'yes'")),
    ("may_spill a number", added(K, SOURCE, "may_spill = 1"), "may_spill must be true or false, got 1"),
    ("target without sm_", added(K, SOURCE, 'target = "90a"'),
     "fp32/naive: target names an architecture-specific target such as 'sm_90a', got '90a'"),
    ("target not architecture-specific", added(K, SOURCE, 'target = "sm_90"'), "got 'sm_90'"),
    # [[precision]]
    ("precision name upper case", field(P, 'name = "fp32"', 'name = "FP32"'),
     "precision FP32: name must be lower-case letters and digits, got 'FP32'"),
    ("precision name empty", field(P, 'name = "fp32"', 'name = ""'),
     "[[precision]] table 1 (counting from 1): name must be lower-case letters and digits, got ''"),
    ("precision input fp64", field(P, 'input = "fp32"', 'input = "fp64"'),
     "precision fp32: input must be one of ('fp32', 'fp16', 'bf16'), got 'fp64'"),
    ("precision accumulate bf16", field(P, 'accumulate = "fp32"', 'accumulate = "bf16"'),
     "precision fp32: accumulate must be one of ('fp32', 'fp16'), got 'bf16'"),
    ("precision output a number", field(P, 'output = "fp32"', "output = 32"), "precision fp32: output must be one of"),
    ("precision baseline a compiled kernel", field(P, 'baseline = "fp32/cublas"', 'baseline = "fp32/naive"'),
     "precision 'fp32' names 'fp32/naive' as its baseline, which is not a library kernel of that precision"),
    ("precision baseline not there", field(P, 'baseline = "fp32/cublas"', 'baseline = "fp32/nothere"'),
     "precision 'fp32' names 'fp32/nothere' as its baseline"),
    ("precision baseline of another precision", field(P, 'baseline = "fp32/cublas"', 'baseline = "fp16/cublas"'),
     "precision 'fp32' names 'fp16/cublas' as its baseline, which is not a library kernel of that precision"),
    ("precision baseline empty", field(P, 'baseline = "fp32/cublas"', 'baseline = ""'),
     "precision fp32: baseline must be a non-empty string"),
    ("precision tolerance zero", field(P, "tolerance = 1e-5", "tolerance = 0.0"),
     "precision fp32: tolerance must be a relative error between 0 and 1, such as 1e-4, got 0.0"),
    ("precision tolerance a whole number", field(P, "tolerance = 1e-5", "tolerance = 1"), "such as 1e-4, got 1"),
    ("precision tolerance above one", field(P, "tolerance = 1e-5", "tolerance = 2.0"), "such as 1e-4, got 2.0"),
    ("precision tolerance a word", field(P, "tolerance = 1e-5", 'tolerance = "small"'), "such as 1e-4, got 'small'"),
    ("precision tolerance missing", field(P, "tolerance = 1e-5\n", ""), "precision fp32: missing fields ['tolerance']"),
    ("precision rate of a word", field(P, "70 = 128, ", "sm70 = 128, "),
     "precision fp32: flop_per_sm_per_clock maps compute capabilities (e.g. 90) to whole rates"),
    ("precision rate zero", field(P, "70 = 128, ", "70 = 0, "),
     "precision fp32: flop_per_sm_per_clock.70 must be a positive integer, got 0"),
    ("precision rate a float", field(P, "70 = 128, ", "70 = 1.5, "), ("flop_per_sm_per_clock.70 must be a positive "
     "integer, got 1.5")),
    ("precision rates a list", field(P, "flop_per_sm_per_clock = ...", "flop_per_sm_per_clock = [1]"),
     "precision fp32: flop_per_sm_per_clock maps compute capabilities"),
    ("precision unknown field", added(P, "tolerance = 1e-5", 'colour = "red"'), ("precision fp32: unknown fields "
     "['colour']")),
    ("precision twice", field("precision fp16", 'name = "fp16"', 'name = "fp32"'), "precision fp32: listed twice"),
    ("precision with no kernels", added("precision bf16", "flop_per_sm_per_clock = ...",
                                        '\n[[precision]]\nname = "fp8"\ninput = "fp16"\naccumulate = "fp16"\n'
                                        'output = "fp16"\nbaseline = "fp8/cublas"\ntolerance = 1e-2\n'
                                        "flop_per_sm_per_clock = {}"),
     "precision 'fp8' has no kernels in the catalogue"),
    # [suite]
    ("suite sizes empty", field(S, SIZES, "sizes = []"),
     "the [suite] table of {repo}/sgemm/catalogue.toml: sizes must be a non-empty list of square sizes, got []"),
    ("suite sizes zero", field(S, SIZES, "sizes = [0, 1024]"), "sizes[0] must be a positive integer, got 0"),
    ("suite sizes a string", field(S, SIZES, 'sizes = "1024"'), "sizes must be a non-empty list of square sizes"),
    ("suite sizes missing", field(S, "\n" + SIZES + "\n", "\n"),
     "the [suite] table of {repo}/sgemm/catalogue.toml: missing fields ['sizes']"),
    ("suite kernel_sizes not its sizes", field(S, "kernel_sizes = ...", "kernel_sizes = [999]"),
     "kernel_sizes must be some of its sizes [1000, 1024, 2048, 4096, 8192], got [999]"),
    ("suite kernel_sizes empty", field(S, "kernel_sizes = ...", "kernel_sizes = []"),
     "kernel_sizes must be a non-empty list of square sizes, got []"),
    ("suite sweep shape of two", field(S, 'sweep_shapes = ["256x1024x1024"', 'sweep_shapes = ["1024x1024"'),
     "sweep_shapes[0] must be 'MxNxK' with M, N and K at least 1, got '1024x1024'"),
    ("suite sweep shape of zero", field(S, 'sweep_shapes = ["256x1024x1024"', 'sweep_shapes = ["0x1024x1024"'),
     "got '0x1024x1024'"),
    ("suite sweep kernel a number", field(S, 'sweep_kernels = ["fp32/cublas"', "sweep_kernels = [1"),
     "sweep_kernels[0] must be a non-empty string, got 1"),
    ("suite architectures a string", field(S, "architectures = ...", 'architectures = "sm_90"'),
     "architectures must be a list of architectures such as 'sm_90', got 'sm_90'"),
    ("suite architecture empty", field(S, "architectures = ...", 'architectures = [""]'),
     "architectures[0] must be a non-empty string, got ''"),
    ("suite reference short", field(S, "reference = ...", 'reference = "c267dd0"'),
     "reference must be a full commit hash (40 hex digits), got 'c267dd0'"),
    ("suite reference a name", field(S, "reference = ...", 'reference = "HEAD"'), "got 'HEAD'"),
    ("suite table missing", field(S, "[suite]", "[suite_of_old]"), "{repo}/sgemm/catalogue.toml has no [suite] table"),
    ("suite header broken", field(S, "[suite]", "[suite"),
     "cannot read {repo}/sgemm/catalogue.toml: not valid TOML at line"),
    # the file
    ("string never closed", field(K, "technique = ...", 'technique = "one thread'),
     "cannot read {repo}/sgemm/catalogue.toml: not valid TOML at line"),
    ("key twice", added(K, MCC, "min_compute_capability = 80"), "not valid TOML at line"),
    ("empty", replace_file(""), "{repo}/sgemm/catalogue.toml has no [suite] table"),
    ("not UTF-8", replace_file(b"\xff\xfe[suite]\n"), "cannot read {repo}/sgemm/catalogue.toml: not UTF-8 text"),
]
# [[seed]]: read by what reports on the seeds (list, report), not by the gate or the history
SEED_ERRORS = [
    ("seed sizes empty", field(D, "sizes = [4096]", "sizes = []"),
     "[[seed]] 000_d5d34bc6da484ce9.txt: sizes must be a non-empty list of square sizes, got []"),
    ("seed sizes missing", field(D, "sizes = [4096]\n", ""), ("[[seed]] 000_d5d34bc6da484ce9.txt: missing fields "
     "['sizes']")),
    ("seed sizes a word", field(D, "sizes = [4096]", 'sizes = ["big"]'), ("sizes[0] must be a positive integer, got "
     "'big'")),
    ("seed title missing", field(D, "title = ...", "#"), "[[seed]] 000_d5d34bc6da484ce9.txt: missing fields ['title']"),
    ("seed title a number", field(D, "title = ...", "title = 0"), "title must be a non-empty string, got 0"),
    ("seed file empty", field(D, 'file = "000_d5d34bc6da484ce9.txt"', 'file = ""'),
     "[[seed]] table 1 (counting from 1): file must be a non-empty string, got ''"),
    ("seed name a number", added(D, "sizes = [4096]", "name = 4"), "name must be a non-empty string, got 4"),
]


def _broken_copy(root: Path, setup) -> Path:
    """root/repo: the project's catalogue and kernels, with `setup` (a row's change) made to the catalogue."""
    repo = root / "repo"
    (repo / "sgemm").mkdir(parents=True)
    shutil.copy(catalogue.CATALOGUE_PATH, repo / "sgemm" / "catalogue.toml")
    shutil.copytree(KERNEL_DIR, repo / "kernels")
    setup(root)
    return repo


def _message(reader) -> str:
    try:
        reader()
    except CatalogueError as exc:  # anything else propagates: a traceback is what these rows exist to prevent
        return exc.args[0]
    pytest.fail("the catalogue was accepted")


FILE_ERRORS = [("catalogue missing", replace_file(None), "cannot read {repo}/sgemm/catalogue.toml"),
               ("catalogue a folder", replace_file("folder"), "cannot read {repo}/sgemm/catalogue.toml")]


@pytest.mark.parametrize("setup, message", [row[1:] for row in CATALOGUE_ERRORS + FILE_ERRORS],
                         ids=[row[0] for row in CATALOGUE_ERRORS + FILE_ERRORS])
def test_a_broken_catalogue_is_refused_in_one_line_naming_what_is_wrong(tmp_path: Path, setup, message):
    repo = _broken_copy(tmp_path, setup)
    said = _message(lambda: load_catalogue(repo / "sgemm" / "catalogue.toml", repo / "kernels"))
    assert "\n" not in said and says(said, message.replace("{repo}", str(repo))), said


@pytest.mark.parametrize("setup, message", [row[1:] for row in SEED_ERRORS], ids=[row[0] for row in SEED_ERRORS])
def test_a_broken_seed_table_is_refused_in_one_line_by_what_reads_the_seeds(tmp_path: Path, setup, message):
    repo = _broken_copy(tmp_path, setup)
    said = _message(lambda: catalogue.seeds(repo / "sgemm" / "catalogue.toml"))
    assert "\n" not in said and says(said, message.replace("{repo}", str(repo))), said
