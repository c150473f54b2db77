"""The one launch path of a compiled kernel, read from its catalogue entry: the grid (a block per tile, or a persistent
grid of as many blocks as the GPU holds at once), the block, the cluster, the dynamic shared memory, and the
arguments: (M, N, K, alpha, A, lda, B, ldb, beta, C, ldc) followed by a TMA descriptor for each operand the entry
declares, in the order A, B, C, each built on the host by the driver (cuTensorMapEncodeTiled) and passed by value.
Every launch goes through cuLaunchKernelEx (cuda-bindings), on CuPy's current stream.
"""

from __future__ import annotations

import ctypes
import math
from dataclasses import dataclass
from typing import Callable

from ..catalogue import TMA_OPERANDS, Kernel, TmaOperand
from .elements import ELEMENT_TYPES

TENSOR_MAP_BYTES = 128  # sizeof(CUtensorMap)


class LaunchError(RuntimeError):
    """The driver refused a launch or a descriptor; the message names the kernel and the driver's error."""


@dataclass(frozen=True)
class TensorMapRequest:
    """What cuTensorMapEncodeTiled is given for one operand of a 2-D row-major matrix, innermost dimension first as
    the driver takes them."""

    data_type: str  # a CUtensorMapDataType member
    address: int
    dims: tuple[int, int]  # (columns, rows) of the matrix
    row_stride_bytes: int
    box: tuple[int, int]  # (columns, rows) one copy moves
    swizzle: int  # bytes


def tensor_map_request(kernel: Kernel, copy: TmaOperand, address: int, rows: int, cols: int,
                       row_stride_elements: int) -> TensorMapRequest:
    element = ELEMENT_TYPES[kernel.types.element_type(copy.operand)]
    box_rows, box_cols = copy.box
    return TensorMapRequest(element.tensor_map_type, address, (cols, rows),
                            row_stride_elements * kernel.element_bytes(copy.operand), (box_cols, box_rows),
                            copy.swizzle)


def _driver_call(result, what: str):
    """The values a cuda-bindings driver call returned, or LaunchError naming the driver's error."""
    from cuda.bindings import driver

    status, *values = result if isinstance(result, tuple) else (result,)
    if status != driver.CUresult.CUDA_SUCCESS:
        _, name = driver.cuGetErrorName(status)
        raise LaunchError(f"{what}: {name.decode() if name else status}")
    return values[0] if len(values) == 1 else values


def encode_tensor_map(request: TensorMapRequest, what: str) -> bytes:
    """The descriptor's 128 bytes, as the kernel receives them."""
    from cuda.bindings import driver

    swizzles = {0: "NONE", 32: "32B", 64: "64B", 128: "128B"}
    tensor_map = _driver_call(driver.cuTensorMapEncodeTiled(
        getattr(driver.CUtensorMapDataType, request.data_type), 2, request.address,
        [driver.cuuint64_t(size) for size in request.dims], [driver.cuuint64_t(request.row_stride_bytes)],
        [driver.cuuint32_t(size) for size in request.box], [driver.cuuint32_t(1), driver.cuuint32_t(1)],
        driver.CUtensorMapInterleave.CU_TENSOR_MAP_INTERLEAVE_NONE,
        getattr(driver.CUtensorMapSwizzle, f"CU_TENSOR_MAP_SWIZZLE_{swizzles[request.swizzle]}"),
        driver.CUtensorMapL2promotion.CU_TENSOR_MAP_L2_PROMOTION_L2_256B,
        driver.CUtensorMapFloatOOBfill.CU_TENSOR_MAP_FLOAT_OOB_FILL_NONE), what)
    return ctypes.string_at(tensor_map.getPtr(), TENSOR_MAP_BYTES)


def _function(raw_kernel, kernel: Kernel):
    """The CUfunction of CuPy's compiled kernel, its dynamic shared memory limit raised to what the entry needs."""
    from cuda.bindings import driver

    function = driver.CUfunction(raw_kernel.kernel.ptr)
    if kernel.shared_memory:
        _driver_call(driver.cuFuncSetAttribute(
            function, driver.CUfunction_attribute.CU_FUNC_ATTRIBUTE_MAX_DYNAMIC_SHARED_SIZE_BYTES,
            kernel.shared_memory), f"{kernel.name}: allowing {kernel.shared_memory} bytes of shared memory")
    return function


def _config(kernel: Kernel, grid: tuple[int, int, int]):
    from cuda.bindings import driver

    config = driver.CUlaunchConfig()
    config.gridDimX, config.gridDimY, config.gridDimZ = grid
    config.blockDimX, config.blockDimY, config.blockDimZ = kernel.block()
    config.sharedMemBytes = kernel.shared_memory
    if kernel.cluster != (1, 1, 1):  # a cluster attribute at all would refuse GPUs before sm_90
        attribute = driver.CUlaunchAttribute()
        attribute.id = driver.CUlaunchAttributeID.CU_LAUNCH_ATTRIBUTE_CLUSTER_DIMENSION
        attribute.value.clusterDim.x, attribute.value.clusterDim.y, attribute.value.clusterDim.z = kernel.cluster
        config.attrs = [attribute]
        config.numAttrs = 1
    return config


def resident_blocks(kernel: Kernel, function) -> int:
    """How many blocks of the kernel the GPU holds at once: whole clusters, as the driver's occupancy calculator
    finds them for this block, cluster and shared memory."""
    from cuda.bindings import driver

    if kernel.cluster != (1, 1, 1):
        config = _config(kernel, (math.prod(kernel.cluster), 1, 1))
        clusters = _driver_call(driver.cuOccupancyMaxActiveClusters(function, config),
                                f"{kernel.name}: counting the clusters that fit")
        return clusters * math.prod(kernel.cluster)
    per_sm = _driver_call(driver.cuOccupancyMaxActiveBlocksPerMultiprocessor(
        function, math.prod(kernel.block()), kernel.shared_memory), f"{kernel.name}: counting the blocks that fit")
    device = _driver_call(driver.cuCtxGetDevice(), "finding the current device")
    sms = _driver_call(driver.cuDeviceGetAttribute(
        driver.CUdevice_attribute.CU_DEVICE_ATTRIBUTE_MULTIPROCESSOR_COUNT, device), "counting the SMs")
    return per_sm * sms


def _arguments(values: list) -> tuple[list, int]:
    """ctypes storage for each argument, and the address of the array of pointers to them that the driver takes."""
    storage = [value if isinstance(value, ctypes._SimpleCData)
               else (ctypes.c_ubyte * len(value)).from_buffer_copy(value) for value in values]
    pointers = (ctypes.c_void_p * len(storage))(*(ctypes.addressof(item) for item in storage))
    return [storage, pointers], ctypes.addressof(pointers)


def prepare(kernel: Kernel, raw_kernel, m: int, n: int, k: int, alpha: float, beta: float,
            a, b, c) -> Callable[[], None]:
    """A launch of the compiled kernel on a, b, c (the whole, padded storage: the kernel gets their base pointers and
    row strides) that runs on CuPy's current stream each time it is called."""
    import cupy
    from cuda.bindings import driver

    function = _function(raw_kernel, kernel)
    lda, ldb, ldc = (array.shape[1] for array in (a, b, c))
    matrices = {"A": (a, m, k, lda), "B": (b, k, n, ldb), "C": (c, m, n, ldc)}  # storage, rows, columns, stride
    maps = []
    for copy in sorted(kernel.tma, key=lambda copy: TMA_OPERANDS.index(copy.operand)):
        array, rows, cols, stride = matrices[copy.operand]
        request = tensor_map_request(kernel, copy, array.data.ptr, rows, cols, stride)
        maps.append(encode_tensor_map(request, f"{kernel.name}: the TMA descriptor of {copy.operand}"))
    values = [ctypes.c_int32(m), ctypes.c_int32(n), ctypes.c_int32(k), ctypes.c_float(alpha),
              ctypes.c_uint64(a.data.ptr), ctypes.c_int32(lda), ctypes.c_uint64(b.data.ptr), ctypes.c_int32(ldb),
              ctypes.c_float(beta), ctypes.c_uint64(c.data.ptr), ctypes.c_int32(ldc), *maps]
    keep, address = _arguments(values)
    resident = resident_blocks(kernel, function) if kernel.grid_rule == "persistent" else None
    config = _config(kernel, kernel.grid(m, n, resident))

    def launch() -> None:
        config.hStream = driver.CUstream(cupy.cuda.get_current_stream().ptr)
        _driver_call(driver.cuLaunchKernelEx(config, function, address, 0), f"{kernel.name}: launch")

    launch.arguments = keep  # the argument storage lives as long as the launch
    return launch
