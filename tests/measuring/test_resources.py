import dataclasses

import pytest

from sgemm.catalogue import get_kernel, load_catalogue
from sgemm.measuring import resources
from sgemm.measuring.build import BuildError

COMPILED = [k for k in load_catalogue().values() if not k.library]
STATIC_SHARED_LIMIT = 48 * 1024


@pytest.mark.parametrize("arch", resources.ARCHITECTURES)
@pytest.mark.parametrize("kernel", COMPILED, ids=lambda k: k.name)
def test_every_kernel_compiles_without_a_gpu(kernel, arch):
    cubin, log = resources.compile_offline(kernel, arch)
    assert cubin[:4] == b"\x7fELF", "NVRTC must produce a cubin"
    usage = resources.parse_ptxas_report(log)
    assert 0 < usage.registers <= 255
    assert usage.shared_bytes <= STATIC_SHARED_LIMIT
    assert (problem := resources.spill_problem(kernel, arch, usage)) is None, problem


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
    monkeypatch.setattr(resources, "kernel_source", lambda kernel: "template <int X, int Y, int Z> __global__ void gemm_naive() { x; }")
    kernel = dataclasses.replace(get_kernel("fp32/naive"), name="fp32/broken")
    with pytest.raises(BuildError, match=r"fp32/broken: compiling .* for sm_90 failed.*\n.*identifier \"x\" is undefined"):
        resources.compile_offline(kernel, "sm_90")
