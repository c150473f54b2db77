"""A GEMM problem on the GPU: random inputs from a fixed seed, an output buffer, and a launch of one kernel.

Inputs are uniform in [-1, 1) (never zeros: a GEMM on zeros runs faster than on real data and hides unwritten
outputs). With beta == 0 the output starts as NaN, so an element the kernel never writes fails the check.
A kernel with a pitch gets rows padded to that many elements, the padding NaN like C: a kernel that lets padding
into an element it stores fails the check. A, B and C are the M x K, K x N and M x N views the reference is
computed from.
"""

from __future__ import annotations

from dataclasses import dataclass, field, replace
from typing import Callable

import numpy as np

from ..catalogue import OPERAND_DIMS, Kernel, operand_shape
from .build import compiled, for_this_gpu
from .elements import ELEMENT_TYPES
from .launch import prepare, shape_problem

DEFAULT_SEED = 2024

# cuBLAS enums (cublas_api.h).
_CUBLAS_OP_N = 0
# The compute type by accumulation type: true FP32 arithmetic (no TF32 unless asked for), or FP16.
_CUBLAS_COMPUTE = {"fp32": 68, "fp16": 64}
_CUBLAS_GEMM_DEFAULT, _CUBLAS_GEMM_DEFAULT_TENSOR_OP = -1, 99


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
    storage: tuple = field(default=(), repr=False)  # A, B and C whole, padding included: what a launch is given

    @property
    def flops(self) -> int:
        return 2 * self.m * self.n * self.k

    @property
    def shape(self) -> str:
        return f"{self.m}x{self.n}x{self.k}"


def make_problem(kernel: Kernel, m: int, n: int, k: int, alpha: float = 1.0, beta: float = 0.0,
                 seed: int = DEFAULT_SEED) -> Problem:
    """Allocate A, B, C on the current device and bind the kernel's launch to them (compiling it if needed)."""
    if reason := shape_problem(for_this_gpu(kernel), m, n, k):
        raise UnsupportedShape(reason)
    import cupy

    rng = cupy.random.default_rng(seed)
    inputs, outputs = ELEMENT_TYPES[kernel.types.input], ELEMENT_TYPES[kernel.types.output]
    (a_rows, _), (b_rows, _), (c_rows, _) = (operand_shape(operand, m, n, k) for operand in OPERAND_DIMS)
    lda, ldb, ldc = kernel.leading_dimensions(m, n, k)
    a, b, c = inputs.nan_array((a_rows, lda)), inputs.nan_array((b_rows, ldb)), outputs.nan_array((c_rows, ldc))
    a[:, :k] = inputs.round_from_fp32(rng.uniform(-1.0, 1.0, (m, k), dtype=np.float32))
    b[:, :n] = inputs.round_from_fp32(rng.uniform(-1.0, 1.0, (k, n), dtype=np.float32))
    c_initial = None
    if beta != 0.0:
        c[:, :n] = outputs.round_from_fp32(rng.uniform(-1.0, 1.0, (m, n), dtype=np.float32))
        c_initial = c[:, :n].copy()
    launch = _launch(kernel, m, n, k, alpha, beta, a, b, c)
    return Problem(kernel, m, n, k, alpha, beta, a[:, :k], b[:, :n], c[:, :n], c_initial, launch, (a, b, c))


def shares_storage(problem: Problem, kernel: Kernel) -> bool:
    """Whether `kernel` can run on the problem's very arrays: the same element types and row strides."""
    return (kernel.types.input, kernel.types.output) == (problem.kernel.types.input, problem.kernel.types.output) \
        and kernel.leading_dimensions(problem.m, problem.n, problem.k) == \
        problem.kernel.leading_dimensions(problem.m, problem.n, problem.k)


def rebind(problem: Problem, kernel: Kernel) -> Problem:
    """The same problem, on the same arrays, launched by another kernel (another build of it, or its baseline): two
    builds timed side by side read the same inputs from the same addresses. ValueError when the storage differs."""
    if not shares_storage(problem, kernel):
        raise ValueError(f"{kernel.name} cannot share {problem.kernel.name}'s arrays: other element types or strides")
    if reason := shape_problem(for_this_gpu(kernel), problem.m, problem.n, problem.k):
        raise UnsupportedShape(reason)
    launch = _launch(kernel, problem.m, problem.n, problem.k, problem.alpha, problem.beta, *problem.storage)
    return replace(problem, kernel=kernel, launch=launch)


def _launch(kernel: Kernel, m: int, n: int, k: int, alpha: float, beta: float, a, b, c) -> Callable[[], None]:
    if kernel.library == "cublas":
        return _cublas_launch(kernel, m, n, k, alpha, beta, a, b, c)
    built = for_this_gpu(kernel)  # the entry for this GPU's architecture: its program and its geometry
    return prepare(built, compiled(built), m, n, k, alpha, beta, a, b, c)


def _cublas_launch(kernel, m, n, k, alpha, beta, a, b, c) -> Callable[[], None]:
    import cupy
    from cupy_backends.cuda.libs import cublas

    inputs, outputs = ELEMENT_TYPES[kernel.types.input], ELEMENT_TYPES[kernel.types.output]
    algorithm = _CUBLAS_GEMM_DEFAULT_TENSOR_OP if inputs.is_16_bit else _CUBLAS_GEMM_DEFAULT
    compute = _CUBLAS_COMPUTE[kernel.types.accumulate]
    handle = cupy.cuda.device.get_cublas_handle()
    scalars = np.array([alpha, beta], dtype=np.float32)  # host pointers: the handle's default pointer mode
    alpha_ptr, beta_ptr = scalars.ctypes.data, scalars.ctypes.data + scalars.itemsize

    def launch() -> None:
        # Row-major C = A B is column-major C^T = B^T A^T: swap the operands, keep the storage.
        cublas.setStream(handle, cupy.cuda.get_current_stream().ptr)
        cublas.gemmEx(handle, _CUBLAS_OP_N, _CUBLAS_OP_N, n, m, k, alpha_ptr, b.data.ptr, inputs.cuda_data_type,
                      b.shape[1], a.data.ptr, inputs.cuda_data_type, a.shape[1], beta_ptr, c.data.ptr,
                      outputs.cuda_data_type, c.shape[1], compute, algorithm)

    launch.scalars = scalars  # keeps the host scalars alive as long as the launch
    return launch


def library_version(kernel: Kernel) -> str:
    """The version of the library a library kernel calls (cuBLAS 13.1.0 as '130100'), or '' for a compiled one: a
    baseline that moved with its library is an environment change, not a change of the code measured against it."""
    if kernel.library != "cublas":
        return ""
    import cupy
    from cupy_backends.cuda.libs import cublas

    return str(cublas.getVersion(cupy.cuda.device.get_cublas_handle()))
