"""The one launch path of a compiled kernel, with the geometry the kernel states (measuring/resources.py reads it
from the compiled program; an older tree's catalogue states it instead): the grid (a block per tile, or, as its
catalogue entry asks, a persistent grid of as many blocks as the GPU holds at once), the block, the cluster, the
dynamic shared memory, and the arguments: (M, N, K, alpha, A, lda, B, ldb, beta, C, ldc) followed by a TMA descriptor
for each operand the kernel copies so, in the order A, B, C, each built on the host by the driver
(cuTensorMapEncodeTiled) and passed by value. Every launch goes through cuLaunchKernelEx (cuda-bindings), on CuPy's
current stream.
"""

from __future__ import annotations

import ctypes
import math
from dataclasses import dataclass
from typing import Callable

from ..catalogue import OPERAND_DIMS, Geometry, Kernel, TmaOperand, operand_shape
from .elements import ELEMENT_TYPES
from .resources import launch_geometry

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


def shape_problem(kernel: Kernel, m: int, n: int, k: int) -> str | None:
    """Why the kernel cannot compute an M x N x K product: what its entry admits, then what its launch geometry
    allows (compiling it offline for that, once per program); None if it can."""
    if reason := kernel.shape_problem(m, n, k):
        return reason
    return None if kernel.library else kernel.launch_problem(launch_geometry(kernel), m, n, k)


def _function(raw_kernel, kernel: Kernel, geometry: Geometry):
    """The CUfunction of CuPy's compiled kernel, its dynamic shared memory limit raised to what the kernel needs."""
    from cuda.bindings import driver

    function = driver.CUfunction(raw_kernel.kernel.ptr)
    if geometry.shared_memory:
        _driver_call(driver.cuFuncSetAttribute(
            function, driver.CUfunction_attribute.CU_FUNC_ATTRIBUTE_MAX_DYNAMIC_SHARED_SIZE_BYTES,
            geometry.shared_memory), f"{kernel.name}: allowing {geometry.shared_memory} bytes of shared memory")
    return function


def _config(geometry: Geometry, grid: tuple[int, int, int]):
    from cuda.bindings import driver

    config = driver.CUlaunchConfig()
    config.gridDimX, config.gridDimY, config.gridDimZ = grid
    config.blockDimX, config.blockDimY, config.blockDimZ = geometry.block()
    config.sharedMemBytes = geometry.shared_memory
    if geometry.cluster != (1, 1, 1):  # a cluster attribute at all would refuse GPUs before sm_90
        attribute = driver.CUlaunchAttribute()
        attribute.id = driver.CUlaunchAttributeID.CU_LAUNCH_ATTRIBUTE_CLUSTER_DIMENSION
        attribute.value.clusterDim.x, attribute.value.clusterDim.y, attribute.value.clusterDim.z = geometry.cluster
        config.attrs = [attribute]
        config.numAttrs = 1
    return config


def resident_blocks(kernel: Kernel, geometry: Geometry, function) -> int:
    """How many blocks of the kernel the GPU holds at once: whole clusters, as the driver's occupancy calculator
    finds them for this block, cluster and shared memory."""
    from cuda.bindings import driver

    if geometry.cluster != (1, 1, 1):
        config = _config(geometry, geometry.cluster)  # a grid of one cluster: what is counted is how many fit
        clusters = _driver_call(driver.cuOccupancyMaxActiveClusters(function, config),
                                f"{kernel.name}: counting the clusters that fit")
        return clusters * math.prod(geometry.cluster)
    per_sm = _driver_call(driver.cuOccupancyMaxActiveBlocksPerMultiprocessor(
        function, math.prod(geometry.block()), geometry.shared_memory), f"{kernel.name}: counting the blocks that fit")
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

    geometry = launch_geometry(kernel)
    function = _function(raw_kernel, kernel, geometry)
    storage = dict(zip(OPERAND_DIMS, (a, b, c)))  # each whole, padding included: its row stride is its width
    maps = []
    for copy in sorted(geometry.tma, key=lambda copy: tuple(OPERAND_DIMS).index(copy.operand)):
        array = storage[copy.operand]
        request = tensor_map_request(kernel, copy, array.data.ptr, *operand_shape(copy.operand, m, n, k),
                                     array.shape[1])
        maps.append(encode_tensor_map(request, f"{kernel.name}: the TMA descriptor of {copy.operand}"))
    lda, ldb, ldc = (array.shape[1] for array in (a, b, c))
    values = [ctypes.c_int32(m), ctypes.c_int32(n), ctypes.c_int32(k), ctypes.c_float(alpha),
              ctypes.c_uint64(a.data.ptr), ctypes.c_int32(lda), ctypes.c_uint64(b.data.ptr), ctypes.c_int32(ldb),
              ctypes.c_float(beta), ctypes.c_uint64(c.data.ptr), ctypes.c_int32(ldc), *maps]
    keep, address = _arguments(values)
    resident = resident_blocks(kernel, geometry, function) if kernel.grid_rule == "persistent" else None
    config = _config(geometry, kernel.grid(geometry, m, n, resident))

    def launch() -> None:
        config.hStream = driver.CUstream(cupy.cuda.get_current_stream().ptr)
        _driver_call(driver.cuLaunchKernelEx(config, function, address, 0), f"{kernel.name}: launch")

    launch.arguments = keep  # the argument storage lives as long as the launch
    return launch
