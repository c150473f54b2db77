import dataclasses
import json

import pytest

from sgemm.catalogue import get_kernel, load_catalogue
from sgemm.measuring import resources
from sgemm.measuring.build import BuildError

COMPILED = [k for k in load_catalogue().values() if not k.library]
STATIC_SHARED_LIMIT = 48 * 1024
BUILDS = [(kernel, arch) for kernel in COMPILED for arch in kernel.architectures(resources.ARCHITECTURES)]


@pytest.mark.parametrize("kernel, arch", BUILDS, ids=[f"{k.name}-{arch}" for k, arch in BUILDS])
def test_every_kernel_compiles_without_a_gpu_and_launches_as_its_entry_says(kernel, arch):
    build = resources.compile_offline(kernel, arch)
    assert build.cubin[:4] == b"\x7fELF", "NVRTC must produce a cubin"
    usage = resources.parse_ptxas_report(build.log)
    assert 0 < usage.registers <= 255
    assert usage.shared_bytes <= STATIC_SHARED_LIMIT
    assert (problem := resources.spill_problem(kernel, arch, usage)) is None, problem
    assert "C7508" not in build.log, f"ptxas ignored setmaxnreg:\n{build.log}"
    geometry = resources.compiled_geometry(build.ptx)
    assert (problem := resources.geometry_problem(kernel, geometry, usage.shared_bytes)) is None, problem


def test_architecture_specific_kernels_build_for_their_target_alone():
    targeted = [kernel for kernel in COMPILED if kernel.target]
    assert targeted and {arch for kernel in targeted for arch in kernel.architectures(resources.ARCHITECTURES)} == {
        "sm_90a"}
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


@pytest.mark.parametrize("change, message", [
    (dict(block_threads=(256, 1)), "launches 256 threads a block, __launch_bounds__ says 384"),
    (dict(cluster=(1, 1, 1)), "clusters of [1, 1, 1], the kernel requires [2, 1, 1]"),
    (dict(tma=()), "declares 0 TMA descriptors, the kernel takes 2"),
    (dict(shared_memory=232448), "bytes of static and 232448 of dynamic shared memory exceed"),
])
def test_an_entry_that_disagrees_with_its_kernel_is_named(change, message):
    kernel = dataclasses.replace(get_kernel("fp16/wgmma_cluster"), tma=get_kernel("fp16/wgmma_tma").tma)
    geometry = resources.compiled_geometry(PTX)
    assert resources.geometry_problem(kernel, geometry, 0) is None
    assert message in resources.geometry_problem(dataclasses.replace(kernel, **change), geometry, 1024)


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
    with pytest.raises(BuildError, match=r"fp32/broken: compiling .* for sm_90 failed.*\n.*identifier \"x\" is undefined"):
        resources.compile_offline(kernel, "sm_90")


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
