import dataclasses
import json
import shutil
import subprocess
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

import pytest

from sgemm import sourcetree
from sgemm.catalogue import CATALOGUE_PATH, KERNEL_DIR, CatalogueError, Geometry, TmaOperand, get_kernel, load_catalogue
from sgemm.measuring import resources
from sgemm.measuring.build import BuildError

COMPILED = [k for k in load_catalogue().values() if not k.library]
STATIC_SHARED_LIMIT = 48 * 1024
TRACKED = resources.tracked_architectures()
BUILDS = [(kernel, arch) for kernel in COMPILED for arch in kernel.architectures(TRACKED)]


@pytest.mark.parametrize("kernel, arch", BUILDS, ids=[f"{k.name}-{arch}" for k, arch in BUILDS])
def test_every_kernel_compiles_without_a_gpu_and_states_a_geometry_that_holds(kernel, arch, compile_once):
    build = compile_once(kernel, arch)  # compile_offline's, made once a run: setup_cache's test reads it too
    assert build.cubin[:4] == b"\x7fELF", "NVRTC must produce a cubin"
    usage = resources.parse_ptxas_report(build.log)
    assert 0 < usage.registers <= 255
    assert usage.shared_bytes <= STATIC_SHARED_LIMIT
    assert (problem := resources.spill_problem(kernel, arch, usage)) is None, problem
    assert "C7508" not in build.log, f"ptxas ignored setmaxnreg:\n{build.log}"
    assert build.geometry is not None, f"{kernel.source} states no geometry for {kernel.entry}"
    assert resources.geometry_problems(kernel, build.geometry, resources.compiled_geometry(build.ptx),
                                       static_shared_bytes=usage.shared_bytes) == []


def test_architecture_specific_kernels_build_for_their_target_alone():
    targeted = [kernel for kernel in COMPILED if kernel.target]
    assert targeted and {arch for kernel in targeted for arch in kernel.architectures(TRACKED)} == {"sm_90a"}
    table = resources.usage_table(targeted[:1])
    assert list(table) == [(targeted[0].name, "sm_90a")]


def test_the_table_tells_the_file_the_history_follows_how_far_the_compile_is(tmp_path, monkeypatch):
    progress = tmp_path / "compile.jsonl"
    monkeypatch.setenv(resources.PROGRESS_VARIABLE, str(progress))
    monkeypatch.setattr(resources, "resource_usage", lambda kernel, arch: resources.ResourceUsage(32, 0, 0, 0, 0))
    kernels = COMPILED[:6]
    resources.usage_table(kernels, ("sm_80", "sm_90"))
    records = [json.loads(line) for line in progress.read_text().splitlines()]
    programs = len({(kernel.source, kernel.entry, arch) for kernel in kernels
                    for arch in kernel.architectures(("sm_80", "sm_90"))})
    assert records[0] == {"done": 0, "total": programs, "seconds": 0.0}
    assert [record["done"] for record in records[1:]] == sorted(record["done"] for record in records[1:])
    assert len(records) == 1 + resources.PROGRESS_BATCHES and records[-1]["done"] == programs
    assert all(" on sm_" in record["last"] and record["seconds"] >= 0 for record in records[1:])


def test_without_the_variable_the_table_writes_nothing(tmp_path, monkeypatch):
    monkeypatch.delenv(resources.PROGRESS_VARIABLE, raising=False)
    monkeypatch.chdir(tmp_path)
    monkeypatch.setattr(resources, "resource_usage", lambda kernel, arch: resources.ResourceUsage(32, 0, 0, 0, 0))
    resources.usage_table(COMPILED[:2], ("sm_80",))
    assert list(tmp_path.iterdir()) == []


PTX = """.visible .entry _Z4gemm(
\t.param .u32 _Z4gemm_param_0,
\t.param .align 64 .b8 _Z4gemm_param_11[128],
\t.param .align 64 .b8 _Z4gemm_param_12[128]
)
.maxntid 384, 1, 1
.minnctapersm 1
.explicitcluster
.reqnctapercluster 2, 1, 1
{"""


def test_the_compiled_geometry_is_read_from_the_ptx():
    assert resources.compiled_geometry(PTX) == resources.CompiledGeometry(384, (2, 1, 1), 2)
    assert resources.compiled_geometry(".maxntid 256\n{") == resources.CompiledGeometry(256, None, 0)
    with pytest.raises(ValueError, match="__launch_bounds__"):
        resources.compiled_geometry(".entry k()\n{")


CLUSTER = Geometry((384, 1), (128, 256), (2, 1, 1), 196672,
                   (TmaOperand("A", (128, 64), 128), TmaOperand("B", (64, 64), 128)), 4)


@pytest.mark.parametrize("change, message", [
    (dict(block_threads=(256, 1)), "fp16/wgmma_cluster: block_threads [256, 1] are 256 threads a block, "
                                   "__launch_bounds__ says 384"),
    (dict(cluster=(1, 1, 1)), "fp16/wgmma_cluster: cluster [1, 1, 1], the kernel's __cluster_dims__ require [2, 1, 1]"),
    (dict(tma=()), "fp16/wgmma_cluster: tma names 0 descriptors, the kernel takes 2"),
    (dict(shared_memory=232448), "fp16/wgmma_cluster: shared_memory 232448 bytes of dynamic and 1024 of static"),
    (dict(block_threads=(320, 1)), "block_threads [320, 1] are not whole warpgroups of 128"),
    (dict(block_tile=(128, 0)), "fp16/wgmma_cluster: block_tile [128, 0] must be positive"),
    (dict(tma=(TmaOperand("A", (96, 64), 128), TmaOperand("B", (64, 64), 128))),
     "fp16/wgmma_cluster: tma.A.box [96, 64]: a stage of A is the tile's 128 rows"),
    (dict(tma=(TmaOperand("A", (128, 64), 128), TmaOperand("B", (32, 64), 128))),
     "fp16/wgmma_cluster: tma.B.box [32, 64]: a stage of B is 64 rows"),
    (dict(tma=(TmaOperand("A", (128, 64), 128), TmaOperand("B", (64, 96), 128))),
     "tma.B: a row of the box (192 bytes) must fit the 128-byte swizzle"),
    (dict(tma=(TmaOperand("A", (128, 64), 128), TmaOperand("C", (64, 32), 128))),
     "fp16/wgmma_cluster: tma: a kernel that copies by TMA copies A and B so"),
    (dict(shared_memory=1000), "fp16/wgmma_cluster: shared_memory 1000 bytes, where its 4 stage(s) of a 128x64 tile "
                               "of A and a 64x256 tile of B need 196608"),
    (dict(shared_memory=True), "fp16/wgmma_cluster: shared_memory True bytes"),  # C++'s true is 1
    (dict(stages=0), "fp16/wgmma_cluster: stages 0: a kernel that copies by TMA holds at least one"),
    (dict(block_tile=(256, 256), tma=(TmaOperand("A", (256, 64), 128), TmaOperand("B", (64, 64), 128))),
     "fp16/wgmma_cluster: multiple_of {'m': 256, 'n': 256, 'k': 64} admits shapes its tiles do not cover"),
])
def test_a_geometry_at_odds_with_its_program_or_itself_is_named(change, message):
    kernel = get_kernel("fp16/wgmma_cluster")
    compiled = resources.compiled_geometry(PTX)
    assert resources.geometry_problems(kernel, CLUSTER, compiled, static_shared_bytes=1024) == []
    problems = resources.geometry_problems(kernel, dataclasses.replace(CLUSTER, **change), compiled,
                                           static_shared_bytes=1024)
    assert any(message in problem for problem in problems), problems


def test_blocks_of_a_cluster_along_n_copy_a_share_of_as_rows_and_cover_wider_shapes():
    """A cluster two blocks wide shares A's rows between them: each box is half the tile's rows, and the entry must
    admit only N that whole clusters cover."""
    kernel = dataclasses.replace(get_kernel("fp16/wgmma_cluster"), multiple_of=(256, 512, 64))
    square = dataclasses.replace(CLUSTER, cluster=(2, 2, 1),
                                 tma=(TmaOperand("A", (64, 64), 128), TmaOperand("B", (64, 64), 128)))
    assert resources.geometry_problems(kernel, square, stated_by_kernel=False) == []
    whole_a = dataclasses.replace(square, tma=(TmaOperand("A", (128, 64), 128), TmaOperand("B", (64, 64), 128)))
    assert resources.geometry_problems(kernel, whole_a, stated_by_kernel=False) == [
        "fp16/wgmma_cluster: tma.A.box [128, 64]: a stage of A is the tile's 128 rows, copied in 2 boxes by the "
        "blocks of a cluster row"]
    narrow = dataclasses.replace(kernel, multiple_of=(256, 256, 64))
    assert any("must be multiples of {'m': 256, 'n': 512, 'k': 64}" in problem
               for problem in resources.geometry_problems(narrow, square, stated_by_kernel=False))


def test_a_field_the_catalogue_states_is_held_against_the_kernels_own():
    kernel = dataclasses.replace(get_kernel("fp16/wgmma_cluster"), stated=(("block_tile", (128, 128)),
                                                                              ("cluster", (2, 1, 1))))
    assert resources.geometry_problems(kernel, CLUSTER) == [
        "fp16/wgmma_cluster: block_tile: the catalogue states [128, 128], the kernel [128, 256]"]
    # An older tree's kernel states nothing: what its catalogue states is the geometry, not held against itself.
    assert resources.geometry_problems(kernel, kernel.stated_geometry or CLUSTER, stated_by_kernel=False) == []


def test_a_spill_fails_unless_the_catalogue_allows_it():
    spilling = resources.ResourceUsage(255, 0, 64, 32, 32)
    kernel = get_kernel("fp32/naive")
    assert "fp32/naive spills on sm_90 (32 bytes stored" in resources.spill_problem(kernel, "sm_90", spilling)
    assert resources.spill_problem(dataclasses.replace(kernel, may_spill=True), "sm_90", spilling) is None
    assert resources.spill_problem(kernel, "sm_90", resources.ResourceUsage(32, 0, 0, 0, 0)) is None


def test_parse_ptxas_report():
    log = """ptxas info    : Compiling entry function '_Z4gemm' for 'sm_90'
ptxas info    : Function properties for _Z4gemm
    8 bytes stack frame, 12 bytes spill stores, 16 bytes spill loads
ptxas info    : Used 168 registers, used 1 barriers, 16384 bytes smem, 400 bytes cmem[0]"""
    usage = resources.parse_ptxas_report(log)
    assert usage == resources.ResourceUsage(168, 16384, 8, 12, 16)
    assert usage.spills


def test_a_report_without_resources_is_an_error():
    with pytest.raises(ValueError, match="no ptxas resource report"):
        resources.parse_ptxas_report("ptxas info    : 0 bytes gmem")


def test_a_compile_error_carries_the_compiler_log(tmp_path, monkeypatch):
    monkeypatch.setattr(resources, "kernel_source",
                        lambda kernel: "template <int X, int Y, int Z> __global__ void gemm_naive() { x; }")
    kernel = dataclasses.replace(get_kernel("fp32/naive"), name="fp32/broken")
    with pytest.raises(BuildError,
                       match=r"fp32/broken: compiling .* for sm_90 failed.*\n.*identifier \"x\" is undefined"):
        resources.compile_offline(kernel, "sm_90")


def test_a_compile_with_an_empty_log_leaves_pythons_bytes_as_they_were():
    """NVRTC writes into the buffers it is given; the NUL of an empty log once went into the b" " that every piece
    of the process shares, and `b"a b".split(b" ")` no longer split."""
    build = resources.compile_offline(get_kernel("fp32/naive"), "compute_80")
    assert build.log == ""  # the case: a log of one byte, its NUL
    assert b"a b".split(b" ") == [b"a", b"b"]


def test_the_cuda_extras_carry_what_compiling_without_a_gpu_needs():
    """The main job on a box without a GPU is this module's compile: its environment is the package with a CUDA
    extra, not the tests' extra, so that extra must bring NVRTC, its Python bindings and the runtime's headers."""
    import tomllib
    from pathlib import Path

    extras = tomllib.loads((Path(__file__).resolve().parents[2] / "pyproject.toml").read_text())["project"][
        "optional-dependencies"]
    for extra, suffix in (("cuda13", ""), ("cuda12", "-cu12")):
        names = {requirement.split(">")[0].split("=")[0].split("[")[0] for requirement in extras[extra]}
        assert {"cuda-bindings", f"nvidia-cuda-nvrtc{suffix}", f"nvidia-cuda-runtime{suffix}"} <= names, extra


# --- The geometry a kernel states, read from its PTX ---------------------------------------------------------------

# As NVRTC writes a LaunchGeometry: little-endian bytes, the trailing zeros left out.
GEOMETRY_PTX = """.global .align 4 .b8 _Z22gemm_x_geometryILi4EE[72] = {128, 1, 0, 0, 1, 0, 0, 0, 128, 0, 0, 0,
0, 1, 0, 0, 2, 0, 0, 0, 1, 0, 0, 0, 1, 0, 0, 0, 64, 128, 3, 0, 4, 0, 0, 0, 128, 0, 0, 0, 64, 0, 0, 0, 128, 0, 0, 0,
64, 0, 0, 0, 64, 0, 0, 0, 128};
"""


def test_the_stated_geometry_is_read_from_the_ptx():
    assert resources.read_geometry(GEOMETRY_PTX, "_Z22gemm_x_geometryILi4EE") == Geometry(
        (384, 1), (128, 256), (2, 1, 1), 229440, (TmaOperand("A", (128, 64), 128), TmaOperand("B", (64, 64), 128)), 4)
    with pytest.raises(ValueError, match="no initialised variable _Z1y"):
        resources.read_geometry(GEOMETRY_PTX, "_Z1y")
    with pytest.raises(ValueError, match="is 40 bytes, a LaunchGeometry 72"):
        resources.read_geometry(GEOMETRY_PTX.replace("[72]", "[40]"), "_Z22gemm_x_geometryILi4EE")


def test_the_geometry_variable_is_named_after_the_entry():
    kernel = get_kernel("bf16/wgmma_tma")
    source = (KERNEL_DIR / kernel.source).read_text()
    assert resources.geometry_expression(kernel, source) == "&gemm_wgmma_tma_geometry<__nv_bfloat16, 128, 128, 1>"
    assert resources.geometry_expression(kernel, "// a kernel from before kernels stated their geometry") is None


# The Hopper kernels' geometry, as the catalogue stated it before the kernels did (tests/data holds such catalogues).
HOPPER = {
    "wgmma_tma": ((128, 1), (128, 128), 32776), "wgmma_tma_wide": ((256, 1), (128, 256), 49160),
    "wgmma_specialized": ((384, 1), (128, 256), 98336), "wgmma_pipelined": ((384, 1), (128, 256), 196672),
    "wgmma_cluster": ((384, 1), (128, 256), 196672), "wgmma_grouped_tma_store": ((384, 1), (128, 256), 229440),
}


@pytest.mark.parametrize("family", sorted(HOPPER))
def test_a_hopper_kernel_states_what_the_catalogue_once_did(family):
    for precision in ("fp16", "bf16"):
        geometry = resources.launch_geometry(get_kernel(f"{precision}/{family}"))
        assert (geometry.block_threads, geometry.block_tile, geometry.shared_memory) == HOPPER[family]
        assert geometry.tma[0] == TmaOperand("A", (128, 64), 128) and geometry.tma[1] == TmaOperand("B", (64, 64), 128)


# --- Each geometry error, in each form it can still be written, fails naming the kernel and the field -------------

TMA_TABLE = "gemm_wgmma_tma<{input}, 128, 128, 1>\"\n"
# (what is wrong, the field, the catalogue's edit after fp16/wgmma_tma's entry or None, the kernel source's edit)
CATALOGUE_FORMS = [
    ("a TMA box of 96 rows for a 128-row tile", "tma",
     "tma = { A = { box = [96, 64], swizzle = 128 }, B = { box = [64, 64], swizzle = 128 } }"),
    ("a 128x64 block tile for a 128x128 template", "block_tile", "block_tile = [128, 64]"),
    ("1,000 bytes of shared memory where 32,776 are needed", "shared_memory", "shared_memory = 1000"),
    ("threads for one warpgroup too many", "block_threads", "block_threads = [256, 1]"),
]


def _catalogue_with(tmp_path: Path, line: str) -> Path:
    text = CATALOGUE_PATH.read_text()
    assert text.count(TMA_TABLE) == 1
    path = tmp_path / "catalogue.toml"
    path.write_text(text.replace(TMA_TABLE, TMA_TABLE + line + "\n"))
    return path


@pytest.mark.parametrize("field, line", [row[1:] for row in CATALOGUE_FORMS], ids=[row[0] for row in CATALOGUE_FORMS])
def test_a_wrong_geometry_in_the_catalogue_names_the_kernel_and_the_field(tmp_path, field, line):
    kernels = load_catalogue(_catalogue_with(tmp_path, line), KERNEL_DIR)
    for precision in ("fp16", "bf16"):  # the table is both kernels'
        with pytest.raises(resources.GeometryError) as info:
            resources.launch_geometry(kernels[f"{precision}/wgmma_tma"])
        assert str(info.value).startswith(f"{precision}/wgmma_tma: {field}: the catalogue states"), info.value
    assert resources.launch_geometry(kernels["fp16/wgmma_tma_wide"])  # the other tables are untouched


def test_shared_memory_true_in_the_catalogue_names_the_kernel_and_the_field(tmp_path):
    with pytest.raises(CatalogueError, match="fp16/wgmma_tma: shared_memory must be 0 to 232448 bytes, got True"):
        load_catalogue(_catalogue_with(tmp_path, "shared_memory = true"), KERNEL_DIR)


def test_a_right_geometry_in_the_catalogue_passes(tmp_path):
    line = ("block_threads = [128, 1]\nblock_tile = [128, 128]\nshared_memory = 32776\n"
            "tma = { A = { box = [128, 64], swizzle = 128 }, B = { box = [64, 64], swizzle = 128 } }")
    kernel = load_catalogue(_catalogue_with(tmp_path, line), KERNEL_DIR)["bf16/wgmma_tma"]
    assert resources.launch_geometry(kernel) == kernel.stated_geometry.__class__(
        (128, 1), (128, 128), (1, 1, 1), 32776, kernel.stated_geometry.tma, 1)


GEOMETRY_OF_TMA = "__device__ constexpr LaunchGeometry gemm_wgmma_tma_geometry = {"
KERNEL_FORMS = [
    ("a TMA box of 96 rows for a 128-row tile", "tma", "{{BM, TmaTiles<T, BM, BN, WARPGROUPS>::kBK",
     "{{96, TmaTiles<T, BM, BN, WARPGROUPS>::kBK"),
    ("a 128x64 block tile for a 128x128 template", "block_tile", "    {BM, BN},\n", "    {BM, 64},\n"),
    ("1,000 bytes of shared memory where 32,776 are needed", "shared_memory",
     "    TmaTiles<T, BM, BN, WARPGROUPS>::kSharedBytes,\n", "    1000,\n"),
    ("shared memory true (a bool as an int)", "shared_memory", "    TmaTiles<T, BM, BN, WARPGROUPS>::kSharedBytes,\n",
     "    true,\n"),
]


@pytest.mark.parametrize("field, old, new", [row[1:] for row in KERNEL_FORMS], ids=[row[0] for row in KERNEL_FORMS])
def test_a_wrong_geometry_in_the_kernel_names_the_kernel_and_the_field(tmp_path, field, old, new):
    kernels = tmp_path / "kernels"
    shutil.copytree(KERNEL_DIR, kernels)
    source = (kernels / "wgmma_tma.cu").read_text()
    stated = source[source.index(GEOMETRY_OF_TMA):]
    stated = stated[:stated.index("};") + 2]
    assert stated.count(old) == 1, old
    (kernels / "wgmma_tma.cu").write_text(source.replace(stated, stated.replace(old, new)))
    kernel = load_catalogue(CATALOGUE_PATH, kernels)["bf16/wgmma_tma"]
    with pytest.raises((BuildError, resources.GeometryError)) as info:
        resources.launch_geometry(kernel)
    message = str(info.value)
    assert message.startswith("bf16/wgmma_tma: ") and f"{field}: " in message, message


def test_a_kernel_that_states_no_geometry_needs_its_entry_to(tmp_path):
    kernels = tmp_path / "kernels"
    shutil.copytree(KERNEL_DIR, kernels)
    (kernels / "fp32_naive.cu").write_text((kernels / "fp32_naive.cu").read_text().replace(
        "gemm_naive_geometry", "naive_launch"))
    kernel = load_catalogue(CATALOGUE_PATH, kernels)["fp32/naive"]
    with pytest.raises(resources.GeometryError) as info:
        resources.launch_geometry(kernel)
    assert str(info.value) == ("fp32/naive: no launch geometry: fp32_naive.cu defines no gemm_naive_geometry and the "
                               "catalogue entry lacks block_threads, block_tile")
    older = dataclasses.replace(kernel, stated=(("block_threads", (32, 32)), ("block_tile", (32, 32))))
    assert resources.launch_geometry(older) == Geometry((32, 32), (32, 32))


def test_what_a_compile_says_of_the_geometry_is_kept_on_disk(tmp_path, monkeypatch):
    monkeypatch.setenv("SGEMM_CACHE_DIR", str(tmp_path))
    kernel = get_kernel("fp32/naive_cols2")
    first = resources.declared.__wrapped__(kernel)
    assert first[0] == Geometry((16, 16), (16, 32)) and len(list((tmp_path / "geometry").glob("*.json"))) == 1

    def no_compile(_):
        raise AssertionError("compiled again")

    monkeypatch.setattr(resources, "_declared_now", no_compile)
    assert resources.declared.__wrapped__(kernel) == first
    edited = dataclasses.replace(kernel, entry="gemm_naive<16, 16, 4>")
    with pytest.raises(AssertionError, match="compiled again"):  # another program: another key
        resources.declared.__wrapped__(edited)


def test_ptxas_s_report_is_kept_on_disk_and_an_edited_program_is_compiled_again(tmp_path, monkeypatch):
    monkeypatch.setenv("SGEMM_CACHE_DIR", str(tmp_path / "cache"))
    kernels = tmp_path / "kernels"
    shutil.copytree(KERNEL_DIR, kernels)
    kernel = load_catalogue(CATALOGUE_PATH, kernels)["fp32/naive_cols2"]
    first = resources.resource_usage(kernel, "sm_80")
    assert first.registers > 0 and len(list((tmp_path / "cache" / "usage").glob("*.json"))) == 1

    def no_compile(*_):
        raise AssertionError("compiled again")

    compile_offline = resources.compile_offline
    monkeypatch.setattr(resources, "compile_offline", no_compile)
    assert resources.resource_usage(kernel, "sm_80") == first
    for other in (dataclasses.replace(kernel, entry="gemm_naive<16, 16, 4>"), kernel):
        arch = "sm_90" if other is kernel else "sm_80"  # another program, or the same one for another architecture
        with pytest.raises(AssertionError, match="compiled again"):
            resources.resource_usage(other, arch)
    (kernels / kernel.source).write_text((kernels / kernel.source).read_text() + "\n// an edit\n")
    with pytest.raises(AssertionError, match="compiled again"):
        resources.resource_usage(kernel, "sm_80")
    monkeypatch.setattr(resources, "compile_offline", compile_offline)
    assert resources.resource_usage(kernel, "sm_80") == first  # a comment changes no resource


# --- Older catalogues state the geometry; it is the same as the kernels' own ----------------------------------------

OLDER_CATALOGUES = sorted((Path(__file__).resolve().parents[1] / "data").glob("catalogue-*.toml"))


@pytest.mark.parametrize("path", OLDER_CATALOGUES, ids=lambda path: path.stem)
def test_an_older_catalogue_gives_every_kernel_the_launch_geometry_it_has_now(path):
    """tests/data holds the catalogues of main before kernels stated their geometry (ef23a46) and of an older commit
    (475f194), each stating it for every compiled kernel: read with today's kernels, each statement is held against
    the kernel's own and must agree, and give the launch today's geometry."""
    older, now = load_catalogue(path, KERNEL_DIR), load_catalogue()
    compiled = [kernel for kernel in older.values() if not kernel.library]
    assert len(compiled) >= 50 and all(kernel.stated_geometry for kernel in compiled)
    assert {kernel.name for kernel in compiled} <= set(now)
    for kernel in compiled:
        assert now[kernel.name].entry == kernel.entry and now[kernel.name].grid_rule == kernel.grid_rule
    with ThreadPoolExecutor() as pool:
        pairs = list(pool.map(lambda k: (resources.launch_geometry(k), resources.launch_geometry(now[k.name])),
                              compiled))
    for kernel, (stated, own) in zip(compiled, pairs):
        assert stated == own, kernel.name
        assert dataclasses.replace(kernel.stated_geometry, stages=own.stages) == own, kernel.name


def test_an_older_commit_builds_with_the_geometry_its_catalogue_states(tmp_path):
    """The gate and the history build an older commit's own kernels, which state no geometry: the launch takes its
    catalogue's, and it is what today's kernels state."""
    root = Path(__file__).resolve().parents[2]
    known = subprocess.run(["git", "-C", str(root), "cat-file", "-e", "ef23a46^{commit}"], capture_output=True,
                           check=False)
    if known.returncode:
        pytest.skip("no git history here (an export): tests/data's catalogues are read with today's kernels above")
    tree = sourcetree.export(root, "ef23a46", tmp_path / "ef23a46")
    older, now = sourcetree.kernels(tree), load_catalogue()
    compiled = [kernel for kernel in older.values() if not kernel.library]
    assert compiled and all(resources.declared(kernel)[0] is None for kernel in compiled[:1])
    with ThreadPoolExecutor() as pool:
        pairs = list(pool.map(lambda k: (resources.launch_geometry(k), resources.launch_geometry(now[k.name])),
                              compiled))
    for kernel, (then, own) in zip(compiled, pairs):
        assert then == kernel.stated_geometry, kernel.name
        assert then == dataclasses.replace(own, stages=0), kernel.name
