"""A GEMM problem on the GPU: random inputs from a fixed seed, an output buffer, and a launch of one kernel.

Inputs are uniform in [-1, 1) (never zeros: a GEMM on zeros runs faster than on real data and hides unwritten
outputs). With beta == 0 the output starts as NaN, so an element the kernel never writes fails the check.
A kernel with a pitch gets rows padded to that many elements, the padding NaN like C: a kernel that lets padding
into an element it stores fails the check. A, B and C are the M x K, K x N and M x N views the reference is
computed from.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Callable

import numpy as np

from ..catalogue import Kernel
from .build import compiled

DEFAULT_SEED = 2024
INPUT_DTYPE = {"fp32": np.float32, "fp16": np.float16}

# cuBLAS / CUDA library enums (cublas_api.h, library_types.h).
_CUDA_R_32F, _CUDA_R_16F = 0, 2
_CUBLAS_OP_N = 0
_CUBLAS_COMPUTE_32F = 68  # true FP32 arithmetic: no TF32 unless asked for
_CUBLAS_GEMM_DEFAULT, _CUBLAS_GEMM_DEFAULT_TENSOR_OP = -1, 99
_CUBLAS_CALL = {
    # precision: (input type, algorithm)
    "fp32": (_CUDA_R_32F, _CUBLAS_GEMM_DEFAULT),
    "fp16": (_CUDA_R_16F, _CUBLAS_GEMM_DEFAULT_TENSOR_OP),
}


class UnsupportedShape(ValueError):
    """The kernel does not claim this M x N x K."""


@dataclass
class Problem:
    kernel: Kernel
    m: int
    n: int
    k: int
    alpha: float
    beta: float
    a: object  # cupy arrays (views of padded storage when the kernel has a pitch)
    b: object
    c: object
    c_initial: object | None  # what C held before the first launch, when beta != 0
    launch: Callable[[], None] = field(repr=False)

    @property
    def flops(self) -> int:
        return 2 * self.m * self.n * self.k

    @property
    def shape(self) -> str:
        return f"{self.m}x{self.n}x{self.k}"


def make_problem(kernel: Kernel, m: int, n: int, k: int, alpha: float = 1.0, beta: float = 0.0,
                 seed: int = DEFAULT_SEED) -> Problem:
    """Allocate A, B, C on the current device and bind the kernel's launch to them (compiling it if needed)."""
    import cupy

    if reason := kernel.shape_problem(m, n, k):
        raise UnsupportedShape(reason)
    rng = cupy.random.default_rng(seed)
    dtype = INPUT_DTYPE[kernel.precision]
    lda, ldb, ldc = kernel.leading_dimensions(m, n, k)
    a = cupy.full((m, lda), np.nan, dtype=dtype)
    b = cupy.full((k, ldb), np.nan, dtype=dtype)
    c = cupy.full((m, ldc), np.nan, dtype=np.float32)
    a[:, :k] = rng.uniform(-1.0, 1.0, (m, k), dtype=np.float32).astype(dtype)
    b[:, :n] = rng.uniform(-1.0, 1.0, (k, n), dtype=np.float32).astype(dtype)
    c_initial = None
    if beta != 0.0:
        c[:, :n] = rng.uniform(-1.0, 1.0, (m, n), dtype=np.float32)
        c_initial = c[:, :n].copy()
    launch = _cublas_launch if kernel.library == "cublas" else _compiled_launch
    return Problem(kernel, m, n, k, alpha, beta, a[:, :k], b[:, :n], c[:, :n], c_initial,
                   launch(kernel, m, n, k, alpha, beta, a, b, c))


def _compiled_launch(kernel, m, n, k, alpha, beta, a, b, c) -> Callable[[], None]:
    """a, b, c: the whole (padded) storage; the kernel gets their base pointers and row strides."""
    function = compiled(kernel)
    grid, block = kernel.grid(m, n), kernel.block()
    lda, ldb, ldc = (np.int32(array.shape[1]) for array in (a, b, c))
    args = (np.int32(m), np.int32(n), np.int32(k), np.float32(alpha), a, lda, b, ldb, np.float32(beta), c, ldc)

    def launch() -> None:
        function(grid, block, args)  # on CuPy's current stream

    return launch


def _cublas_launch(kernel, m, n, k, alpha, beta, a, b, c) -> Callable[[], None]:
    import cupy
    from cupy_backends.cuda.libs import cublas

    input_type, algorithm = _CUBLAS_CALL[kernel.precision]
    handle = cupy.cuda.device.get_cublas_handle()
    scalars = np.array([alpha, beta], dtype=np.float32)  # host pointers: the handle's default pointer mode
    alpha_ptr, beta_ptr = scalars.ctypes.data, scalars.ctypes.data + scalars.itemsize

    def launch() -> None:
        # Row-major C = A B is column-major C^T = B^T A^T: swap the operands, keep the storage.
        cublas.setStream(handle, cupy.cuda.get_current_stream().ptr)
        cublas.gemmEx(handle, _CUBLAS_OP_N, _CUBLAS_OP_N, n, m, k, alpha_ptr, b.data.ptr, input_type, n,
                      a.data.ptr, input_type, k, beta_ptr, c.data.ptr, _CUDA_R_32F, n, _CUBLAS_COMPUTE_32F, algorithm)

    launch.scalars = scalars  # keeps the host scalars alive as long as the launch
    return launch
