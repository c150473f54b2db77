"""How each element type a precision may name is held on the GPU: the array type that stores it, rounding into it
from FP32, widening out of it to FP64 for the reference, and the enums CUDA's libraries name it by.

NumPy and CuPy have no BF16, so BF16 is stored as its bit pattern (uint16) and rounded in integer arithmetic.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Callable

import numpy as np

# cudaDataType (library_types.h)
_CUDA_R_32F, _CUDA_R_16F, _CUDA_R_16BF = 0, 2, 14


def _round_to_bf16(values):
    """FP32 -> BF16 bits, rounded to nearest, ties to even (the inputs here are finite)."""
    import cupy

    bits = values.astype(cupy.float32).view(cupy.uint32)
    return ((bits + 0x7FFF + ((bits >> 16) & 1)) >> 16).astype(cupy.uint16)


def _widen_bf16(stored):
    import cupy

    return (stored.astype(cupy.uint32) << 16).view(cupy.float32).astype(cupy.float64)


@dataclass(frozen=True)
class ElementType:
    name: str
    storage: type  # the NumPy/CuPy dtype of the arrays that hold it
    cuda_data_type: int  # cudaDataType, for cuBLAS
    tensor_map_type: str  # the CUtensorMapDataType member, for TMA descriptors
    round_from_fp32: Callable  # a float32 array -> an array of `storage`
    widen: Callable  # an array of `storage` -> float64, exactly

    @property
    def is_16_bit(self) -> bool:
        return np.dtype(self.storage).itemsize == 2

    def nan_array(self, shape):
        """An array of NaN: what an output holds before a kernel writes it, so an element left unwritten fails."""
        import cupy

        return self.round_from_fp32(cupy.full(shape, np.nan, dtype=np.float32))


ELEMENT_TYPES = {
    "fp32": ElementType("fp32", np.float32, _CUDA_R_32F, "CU_TENSOR_MAP_DATA_TYPE_FLOAT32",
                        lambda values: values.astype(np.float32), lambda stored: stored.astype(np.float64)),
    "fp16": ElementType("fp16", np.float16, _CUDA_R_16F, "CU_TENSOR_MAP_DATA_TYPE_FLOAT16",
                        lambda values: values.astype(np.float16), lambda stored: stored.astype(np.float64)),
    "bf16": ElementType("bf16", np.uint16, _CUDA_R_16BF, "CU_TENSOR_MAP_DATA_TYPE_BFLOAT16",
                        _round_to_bf16, _widen_bf16),
}
