"""A GPU's peak GEMM rate: SMs x FLOP per SM per clock x the maximum SM clock.

FLOP per SM per clock come from each precision's [[precision]] table in the catalogue: the dense rates of the
data-centre parts of each architecture (FP32: 2 x FP32 lanes; FP16 and BF16: tensor cores with FP32 accumulate).
GeForce parts of sm_75/sm_86/sm_89 accumulate FP16 into FP32 at half that rate, so their "% of peak" reads low by 2x.
"""

from __future__ import annotations

from .catalogue import load_precisions


def peak_tflops(precision: str, compute_capability: int, sm_count: int, max_sm_clock_mhz: float) -> float | None:
    """None for a precision or an architecture the catalogue does not know."""
    types = load_precisions().get(precision)
    rate = types.rate(compute_capability) if types else None
    if rate is None or not max_sm_clock_mhz:
        return None
    return sm_count * rate * max_sm_clock_mhz * 1e6 / 1e12
