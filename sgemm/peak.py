"""A GPU's peak GEMM rate: SMs x FLOP per SM per clock x the maximum SM clock.

FLOP per SM per clock are the dense rates of the data-centre parts of each architecture (FP32: 2 x FP32 lanes;
FP16: tensor cores, FP16 inputs, FP32 accumulate): V100, T4, A100, A40/A10, L4/L40, H100. GeForce parts of
sm_75/sm_86/sm_89 accumulate FP16 into FP32 at half that rate, so their FP16 "% of peak" reads low by 2x.
"""

from __future__ import annotations

FLOP_PER_SM_PER_CLOCK = {
    "fp32": {70: 128, 75: 128, 80: 128, 86: 256, 89: 256, 90: 256},
    "fp16": {70: 1024, 75: 1024, 80: 2048, 86: 1024, 89: 1024, 90: 4096},
}


def peak_tflops(precision: str, compute_capability: int, sm_count: int, max_sm_clock_mhz: float) -> float | None:
    """None for an architecture this table does not know."""
    rate = FLOP_PER_SM_PER_CLOCK[precision].get(compute_capability)
    if rate is None or not max_sm_clock_mhz:
        return None
    return sm_count * rate * max_sm_clock_mhz * 1e6 / 1e12
