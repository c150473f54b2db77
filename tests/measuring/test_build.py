import dataclasses
import shutil

import pytest

from sgemm.catalogue import KERNEL_DIR, get_kernel
from sgemm.measuring import build


@pytest.fixture
def kernels(tmp_path):
    """A copy of the kernels folder, to edit."""
    for path in KERNEL_DIR.iterdir():
        shutil.copy(path, tmp_path)
    return tmp_path


def test_source_carries_a_digest_of_each_local_header(kernels):
    kernel = dataclasses.replace(get_kernel("fp32/naive"), kernel_dir=kernels)
    before = build.kernel_source(kernel)
    assert "common.cuh: sha256" in before
    with open(kernels / "common.cuh", "a") as header:
        header.write("// edited\n")
    assert build.kernel_source(kernel) != before, "an edited header must change CuPy's cache key"


def test_a_header_included_by_a_header_changes_the_digest(kernels):
    common = kernels / "common.cuh"
    common.write_text(common.read_text().replace("#pragma once\n", '#pragma once\n#include "nested.cuh"\n', 1))
    (kernels / "nested.cuh").write_text("#pragma once\n")
    kernel = dataclasses.replace(get_kernel("fp32/naive"), kernel_dir=kernels)
    before = build.kernel_source(kernel)
    assert "nested.cuh: sha256" in before
    with open(kernels / "nested.cuh", "a") as header:
        header.write("// edited\n")
    assert build.kernel_source(kernel) != before, "a nested header must change CuPy's cache key"


def test_a_header_included_in_angle_brackets_changes_the_digest(kernels):
    source = kernels / "fp16_wmma.cu"  # includes toolkit headers, which stay out of the digests, and "common.cuh"
    source.write_text(source.read_text() + "#include <extra.cuh>\n")
    (kernels / "extra.cuh").write_text("#pragma once\n")
    kernel = dataclasses.replace(get_kernel("fp16/wmma_naive"), kernel_dir=kernels)
    before = build.kernel_source(kernel)
    assert [line.split(":")[0] for line in before.splitlines() if ": sha256 " in line] == ["// common.cuh",
                                                                                          "// extra.cuh"]
    with open(kernels / "extra.cuh", "a") as header:
        header.write("// edited\n")
    assert build.kernel_source(kernel) != before


def test_the_include_walk_follows_both_forms_once_each_in_the_order_reached():
    files = {
        "k.cu": '#include <cuda_fp16.h>\n#include "a.cuh"\n  #  include <sub/b.cuh>\n',
        "a.cuh": '#include "a.cuh"\n#include "sub/b.cuh"\n',  # a cycle, and b twice: each file once
        "sub/b.cuh": '#include "c.cuh"\n',  # quotes look beside the including file first
        "sub/c.cuh": "",
        "c.cuh": "// the kernel folder's c.cuh, which sub/b.cuh does not reach\n",
    }
    assert build.kernel_files("k.cu", files.get) == ["k.cu", "a.cuh", "sub/b.cuh", "sub/c.cuh"]


def test_options_include_the_kernel_directory(kernels):
    assert f"-I{KERNEL_DIR}" in build.nvrtc_options(KERNEL_DIR)
    assert f"-I{kernels}" in build.nvrtc_options(kernels)
    assert "--std=c++17" in build.nvrtc_options(kernels)


def test_a_kernel_is_read_from_the_tree_its_catalogue_was_loaded_with(kernels):
    from sgemm.catalogue import CATALOGUE_PATH, load_catalogue

    (kernels / "fp32_naive.cu").write_text((kernels / "fp32_naive.cu").read_text() + "// this tree's own\n")
    kernel = load_catalogue(CATALOGUE_PATH, kernels)["fp32/naive"]
    assert kernel.kernel_dir == kernels
    assert "// this tree's own" in build.kernel_source(kernel)
    assert "// this tree's own" not in build.kernel_source(get_kernel("fp32/naive"))


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
            assert build.compiled(kernel).kernel.ptr, f"{kernel.name}: no function loaded"


@pytest.mark.gpu
def test_a_compile_error_carries_the_compiler_log(monkeypatch):
    import dataclasses

    broken = dataclasses.replace(get_kernel("fp32/naive"), name="fp32/broken", entry="gemm_naive<32, 32>")
    monkeypatch.setattr(build, "kernel_source",
                        lambda kernel: "template <int X, int Y> __global__ void gemm_naive() { x; }")
    with pytest.raises(build.BuildError, match="fp32/broken.*\n.*identifier \"x\" is undefined"):
        build.compiled(broken)
