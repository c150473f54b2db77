import numpy as np
import pytest

from sgemm.catalogue import ELEMENT_FORMATS
from sgemm.measuring.elements import ELEMENT_TYPES

BF16 = ELEMENT_TYPES["bf16"]
ONE = 0x3F80  # 1.0 in BF16: sign 0, exponent 127, significand 0


def _bits(value: float) -> int:
    return int(BF16.round_from_fp32(np.array([value], dtype=np.float32))[0])


def test_every_element_type_of_the_catalogue_is_held_somewhere():
    assert set(ELEMENT_TYPES) == set(ELEMENT_FORMATS)
    for name, element in ELEMENT_TYPES.items():
        assert np.dtype(element.storage).itemsize == ELEMENT_FORMATS[name].bytes
    assert [ELEMENT_TYPES[name].cuda_data_type for name in ("fp32", "fp16", "bf16")] == [0, 2, 14]


@pytest.mark.requires("cupy")
@pytest.mark.parametrize("value, bits", [
    (1.0, ONE),
    (1 + 2**-8, ONE),  # halfway between 1 and 1 + 2^-7: ties go to the even significand, 1
    (1 + 3 * 2**-8, ONE + 2),  # halfway between 1 + 2^-7 and 1 + 2^-6: to the even one
    (1 + 2**-8 + 2**-20, ONE + 1),  # just past halfway: up
    (1 + 2**-8 - 2**-20, ONE),  # just short of it: down
    (-1.0, 0xBF80),
    (-(1 + 3 * 2**-8), 0xBF82),
    (2.0**-130, 0x0008),  # BF16 has FP32's exponent range, subnormals too: 8 units of 2^-133
    (2.0**-135, 0x0000),  # below half of BF16's smallest subnormal: zero
])
def test_bf16_rounds_to_nearest_even(value, bits):
    assert _bits(value) == bits


@pytest.mark.requires("cupy")
def test_nan_stays_nan_in_bf16():
    stored = BF16.round_from_fp32(np.array([np.nan], dtype=np.float32))
    assert np.isnan(BF16.widen(stored)).all()


@pytest.mark.requires("cupy")
def test_bf16_widens_exactly_and_rounds_within_half_a_unit():
    values = np.random.default_rng(1).uniform(-1, 1, 10_000).astype(np.float32)
    widened = BF16.widen(BF16.round_from_fp32(values))
    assert widened.dtype == np.float64
    assert np.all(np.abs(widened - values) <= np.abs(values) * 2.0**-8)  # 8 significant bits: half a unit, 2^-8
    assert np.array_equal(BF16.widen(BF16.round_from_fp32(widened.astype(np.float32))), widened)  # a fixed point
