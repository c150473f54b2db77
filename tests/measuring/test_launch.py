import ctypes

import pytest

from sgemm.catalogue import get_kernel
from sgemm.measuring import launch
from sgemm.measuring.resources import launch_geometry


def test_a_descriptor_describes_the_row_major_matrix_innermost_dimension_first():
    kernel = get_kernel("bf16/wgmma_cluster")
    a, b, c = launch_geometry(kernel).tma
    # A is M x K with rows of lda BF16 elements; the box a block copies is 128 rows of 64.
    assert launch.tensor_map_request(kernel, a, 0x1000, 8192, 4096, 4096) == launch.TensorMapRequest(
        "CU_TENSOR_MAP_DATA_TYPE_BFLOAT16", 0x1000, (4096, 8192), 8192, (64, 128), 128)
    # B is K x N: 64-column chunks of 64 rows.
    assert launch.tensor_map_request(kernel, b, 0x2000, 4096, 2048, 2048) == launch.TensorMapRequest(
        "CU_TENSOR_MAP_DATA_TYPE_BFLOAT16", 0x2000, (2048, 4096), 4096, (64, 64), 128)
    # C is FP32 whatever the inputs: 64 rows of 32 (one 128-byte swizzle row).
    assert launch.tensor_map_request(kernel, c, 0x3000, 8192, 2048, 2048) == launch.TensorMapRequest(
        "CU_TENSOR_MAP_DATA_TYPE_FLOAT32", 0x3000, (2048, 8192), 8192, (32, 64), 128)
    fp16 = get_kernel("fp16/wgmma_tma")
    assert launch.tensor_map_request(fp16, launch_geometry(fp16).tma[0], 0, 128, 64, 64).data_type == \
        "CU_TENSOR_MAP_DATA_TYPE_FLOAT16"


def test_arguments_are_passed_as_an_array_of_pointers_to_their_values():
    descriptor = bytes(range(128))
    keep, address = launch._arguments([ctypes.c_int32(4096), ctypes.c_float(1.5), ctypes.c_uint64(0xDEADBEEF),
                                       descriptor])
    pointers = (ctypes.c_void_p * 4).from_address(address)
    assert ctypes.c_int32.from_address(pointers[0]).value == 4096
    assert ctypes.c_float.from_address(pointers[1]).value == 1.5
    assert ctypes.c_uint64.from_address(pointers[2]).value == 0xDEADBEEF
    assert ctypes.string_at(pointers[3], 128) == descriptor
    assert keep  # the storage the pointers point into, kept by the launch


def test_a_cluster_is_asked_for_only_where_the_kernel_runs_in_one():
    config = launch._config(launch_geometry(get_kernel("fp16/wgmma_cluster")), (132, 1, 1))
    assert (config.gridDimX, config.blockDimX, config.sharedMemBytes, config.numAttrs) == (132, 384, 196672, 1)
    assert (config.attrs[0].value.clusterDim.x, config.attrs[0].value.clusterDim.y) == (2, 1)
    # Any cluster attribute, even of one block, would make the launch refuse GPUs older than sm_90.
    assert launch._config(launch_geometry(get_kernel("fp32/naive")), (32, 32, 1)).numAttrs == 0


def test_the_shapes_a_kernel_takes_are_its_entrys_and_its_geometrys():
    naive_8 = get_kernel("fp32/naive_8")  # 8 x 8 tiles, M on the grid's y axis
    assert launch.shape_problem(naive_8, 8 * 65535, 16, 16) is None
    assert "65535 blocks" in launch.shape_problem(naive_8, 8 * 65535 + 1, 16, 16)
    assert "at least 1" in launch.shape_problem(naive_8, 0, 16, 16)
    assert "multiple of 256" in launch.shape_problem(get_kernel("fp16/wgmma_cluster"), 128, 256, 64)
    assert launch.shape_problem(get_kernel("fp32/cublas"), 8 * 65535 + 1, 16, 16) is None


@pytest.mark.gpu
def test_a_persistent_grid_is_whole_clusters_that_fit_at_once():
    import cupy

    from sgemm.measuring.build import compiled
    from sgemm.measuring.record import device_info

    kernel = get_kernel("fp16/wgmma_cluster")
    if reason := kernel.gpu_problem(device_info().compute_capability):
        pytest.skip(reason)
    geometry = launch_geometry(kernel)
    blocks = launch.resident_blocks(kernel, geometry, launch._function(compiled(kernel), kernel, geometry))
    sms = cupy.cuda.runtime.getDeviceProperties(0)["multiProcessorCount"]
    assert 0 < blocks <= sms and blocks % 2 == 0  # one 227 KB block an SM, in pairs
