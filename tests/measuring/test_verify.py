import pytest

from sgemm.catalogue import load_catalogue
from sgemm.measuring.problem import make_problem
from sgemm.measuring.resources import launch_geometry

KERNELS = list(load_catalogue().values())
# Square, non-square (M != N != K), single element, and edges that no tile divides, in both directions, at the
# sizes 1, 127, 1000, 1111 and 4097.
SHAPES = [(1024, 1024, 1024), (1000, 1028, 516), (512, 256, 2048), (1, 1, 1), (1, 4, 4), (127, 132, 68),
          (129, 260, 1020), (4097, 132, 36), (33, 1000, 1111), (1111, 127, 1000), (2, 8, 4096)]


def _claimed(kernel, shapes):
    """Each shape with every dimension rounded up to what the kernel claims: the edges of its own domain."""
    return list(dict.fromkeys(tuple(-(-size // multiple) * multiple
                                    for size, multiple in zip(shape, kernel.multiple_of))
                              for shape in shapes))


def _supported(kernel):
    return _claimed(kernel, SHAPES)


def test_the_shapes_hold_the_boundary_sizes():
    assert {1, 127, 1000, 1111, 4097} <= {size for shape in SHAPES for size in shape}


def test_every_kernel_is_checked_at_partial_tiles_wherever_it_claims_them():
    for kernel in KERNELS:
        if kernel.library:
            continue
        # Each build: its entry, and each entry tuned for an architecture, whose tiles may differ.
        for build in [kernel.on(0), *(kernel.on(cc) for cc, _ in kernel.tuned_entries)]:
            for axis, tile in enumerate(launch_geometry(build).block_tile):  # rows (M), then columns (N)
                if kernel.multiple_of[axis] % tile:  # the kernel claims sizes that leave a partial tile
                    assert any(shape[axis] % tile for shape in _supported(kernel)), (build.entry, "MN"[axis])


def _runnable_here(kernel):
    """Skips, with the kernel's reason, where this GPU cannot run it (too old, or not its one architecture)."""
    from sgemm.measuring.record import device_info

    if reason := kernel.gpu_problem(device_info().compute_capability):
        pytest.skip(reason)


def _problem(kernel, m, n, k, **scalars):
    """The problem, or a skip with the reason where the kernel's launch geometry refuses the shape."""
    from sgemm.measuring.problem import UnsupportedShape

    try:
        return make_problem(kernel, m, n, k, **scalars)
    except UnsupportedShape as exc:
        pytest.skip(str(exc))


@pytest.mark.gpu
@pytest.mark.parametrize("kernel", KERNELS, ids=lambda k: k.name)
def test_every_kernel_matches_fp64_at_every_shape_it_claims(kernel):
    from sgemm.measuring.verify import verify

    _runnable_here(kernel)
    for m, n, k in _supported(kernel):
        assert verify(_problem(kernel, m, n, k)) <= kernel.tolerance


@pytest.mark.gpu
@pytest.mark.parametrize("kernel", KERNELS, ids=lambda k: k.name)
def test_alpha_and_beta_are_honoured(kernel):
    from sgemm.measuring.verify import verify

    _runnable_here(kernel)
    for m, n, k in _claimed(kernel, [(1000, 1028, 516), (127, 132, 68)]):
        assert verify(_problem(kernel, m, n, k, alpha=1.5, beta=-0.75)) <= kernel.tolerance


@pytest.mark.gpu
def test_a_kernel_that_misses_the_last_row_is_rejected():
    from sgemm.measuring.verify import VerificationError, verify

    problem = make_problem(KERNELS[0], 300, 200, 100)
    right = problem.launch

    def misses_last_row():
        right()
        problem.c[-1, :] = 0.0

    problem.launch = misses_last_row
    with pytest.raises(VerificationError, match=r"fp32/cublas is wrong at 300x200x100.*relative error"):
        verify(problem)


@pytest.mark.gpu
def test_an_unwritten_output_is_rejected():
    from sgemm.measuring.verify import VerificationError, verify

    problem = make_problem(KERNELS[0], 64, 64, 64)
    problem.launch = lambda: None  # C stays NaN
    with pytest.raises(VerificationError, match="relative error inf"):
        verify(problem)


@pytest.mark.gpu
def test_tf32_precision_fails_the_fp32_bound():
    import cupy
    import numpy as np

    from sgemm.measuring.verify import reference, relative_error

    problem = make_problem(KERNELS[0], 512, 512, 512)
    a = problem.a.view(np.uint32) & np.uint32(0xFFFFE000)  # keep TF32's 10 mantissa bits
    b = problem.b.view(np.uint32) & np.uint32(0xFFFFE000)
    tf32_product = cupy.matmul(a.view(np.float32).astype(np.float64), b.view(np.float32).astype(np.float64))
    assert relative_error(tf32_product, reference(problem)) > KERNELS[0].tolerance
