import numpy as np
import pytest

from sgemm.catalogue import get_kernel
from sgemm.measuring.problem import UnsupportedShape, make_problem


def test_a_shape_the_kernel_does_not_claim_is_refused_before_any_allocation():
    with pytest.raises(UnsupportedShape, match="N to be a multiple of 4"):
        make_problem(get_kernel("fp32/float4"), 64, 65, 64)


@pytest.mark.gpu
def test_inputs_are_random_and_the_output_poisoned():
    import cupy

    problem = make_problem(get_kernel("fp16/cublas"), 64, 48, 32)
    assert problem.a.dtype == np.float16 and problem.b.dtype == np.float16 and problem.c.dtype == np.float32
    assert problem.a.shape == (64, 32) and problem.b.shape == (32, 48) and problem.c.shape == (64, 48)
    assert bool((problem.a != 0).all()) and float(cupy.std(problem.a.astype(np.float32))) > 0.3
    assert bool(cupy.isnan(problem.c).all())
    assert problem.flops == 2 * 64 * 48 * 32


@pytest.mark.gpu
def test_the_same_seed_gives_the_same_inputs():
    import cupy

    one = make_problem(get_kernel("fp32/naive"), 32, 32, 32, seed=7)
    two = make_problem(get_kernel("fp32/naive"), 32, 32, 32, seed=7)
    assert bool(cupy.array_equal(one.a, two.a)) and bool(cupy.array_equal(one.b, two.b))


@pytest.mark.gpu
def test_beta_keeps_the_initial_output():
    import cupy

    problem = make_problem(get_kernel("fp32/naive"), 32, 32, 32, beta=0.5)
    assert problem.c_initial is not None and bool(cupy.array_equal(problem.c, problem.c_initial))


@pytest.mark.gpu
def test_bf16_inputs_are_held_as_rounded_bits_and_read_back_exactly():
    import cupy

    from sgemm.measuring.elements import ELEMENT_TYPES

    problem = make_problem(get_kernel("bf16/cublas"), 64, 48, 32)
    assert problem.a.dtype == np.uint16 and problem.c.dtype == np.float32
    values = ELEMENT_TYPES["bf16"].widen(problem.a)
    assert float(cupy.abs(values).max()) <= 1.0 and float(cupy.std(values)) > 0.3
    fp32_bits = values.astype(np.float32).view(np.uint32)
    assert not bool((fp32_bits & 0xFFFF).any())  # each value a BF16: FP32 with the low 16 bits clear
    assert bool(cupy.isnan(problem.c).all())
