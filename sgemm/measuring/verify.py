"""Correctness before timing: a kernel's output against an FP64 reference on the same inputs."""

from __future__ import annotations

import math

import numpy as np

from .elements import ELEMENT_TYPES
from .problem import Problem


class VerificationError(AssertionError):
    """The kernel's output is wrong; the message names kernel, shape and error."""


def reference(problem: Problem):
    """alpha * A @ B + beta * C0 in FP64, from the inputs exactly as the kernel reads them (FP16 and BF16 already
    rounded)."""
    inputs = ELEMENT_TYPES[problem.kernel.types.input]
    ref = problem.alpha * (inputs.widen(problem.a) @ inputs.widen(problem.b))
    if problem.beta != 0.0:
        ref += problem.beta * ELEMENT_TYPES[problem.kernel.types.output].widen(problem.c_initial)
    return ref


def output(problem: Problem):
    """C as the kernel left it, in FP64."""
    return ELEMENT_TYPES[problem.kernel.types.output].widen(problem.c)


def relative_error(out, ref) -> float:
    """||out - ref|| / ||ref|| (Frobenius); infinite when any output is NaN or infinite."""
    import cupy

    out64 = out.astype(np.float64)
    if not bool(cupy.isfinite(out64).all()):
        return math.inf
    return float(cupy.linalg.norm(out64 - ref) / cupy.linalg.norm(ref))


def verify(problem: Problem) -> float:
    """Launch once on fresh output and compare; returns the relative error or raises VerificationError."""
    import cupy

    if problem.beta == 0.0:
        problem.c[...] = ELEMENT_TYPES[problem.kernel.types.output].nan_array(problem.c.shape)
    else:
        problem.c[...] = problem.c_initial
    problem.launch()
    cupy.cuda.get_current_stream().synchronize()
    error = relative_error(output(problem), reference(problem))
    tolerance = problem.kernel.tolerance
    if not error <= tolerance:
        raise VerificationError(
            f"{problem.kernel.name} is wrong at {problem.shape} (alpha={problem.alpha}, beta={problem.beta}): "
            f"relative error {error:.3g} against FP64 exceeds {tolerance:g}"
        )
    return error
