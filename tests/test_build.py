import shutil

import pytest

from sgemm import build
from sgemm.catalogue import KERNEL_DIR, get_kernel


def test_source_carries_a_digest_of_each_local_header(tmp_path):
    for path in KERNEL_DIR.iterdir():
        shutil.copy(path, tmp_path)
    kernel = get_kernel("fp32/naive")
    before = build.kernel_source(kernel, tmp_path)
    assert "common.cuh: sha256" in before
    with open(tmp_path / "common.cuh", "a") as header:
        header.write("// edited\n")
    assert build.kernel_source(kernel, tmp_path) != before, "an edited header must change CuPy's cache key"


def test_options_include_the_kernel_directory():
    assert f"-I{KERNEL_DIR}" in build.nvrtc_options()
    assert "--std=c++17" in build.nvrtc_options()


def test_toolkit_headers_are_found_through_cuda_path(tmp_path, monkeypatch):
    (tmp_path / "include" / "crt").mkdir(parents=True)
    (tmp_path / "include" / "crt" / "mma.h").write_text("")
    monkeypatch.setenv("CUDA_PATH", str(tmp_path))
    assert build.toolkit_include_dirs() == [str(tmp_path / "include")]


def test_a_library_kernel_is_not_compiled():
    with pytest.raises(build.BuildError, match="cublas"):
        build.compiled(get_kernel("fp32/cublas"))


@pytest.mark.gpu
def test_every_kernel_compiles_with_cupy_on_this_gpu():
    from sgemm.catalogue import load_catalogue

    for kernel in load_catalogue().values():
        if not kernel.library:
            assert build.compiled(kernel) is build.compiled(kernel)  # compiled once, then cached


@pytest.mark.gpu
def test_a_compile_error_carries_the_compiler_log(monkeypatch):
    import dataclasses

    broken = dataclasses.replace(get_kernel("fp32/naive"), name="fp32/broken", entry="gemm_naive<32, 32>")
    monkeypatch.setattr(build, "kernel_source", lambda kernel: "template <int X, int Y> __global__ void gemm_naive() { x; }")
    with pytest.raises(build.BuildError, match="fp32/broken.*\n.*identifier \"x\" is undefined"):
        build.compiled(broken)
