"""A case's figures as every table shows them: TFLOP/s, % of its precision's cuBLAS, % of the GPU's peak and the
median SM clock, computed here alone (for `sgemm bench`, the seed ladder reports and the cross-GPU page), and
their text; and, where the case was charged, its joules per GEMM as recorded (the cross-GPU page)."""

from __future__ import annotations

import math
from dataclasses import dataclass


def _known(value: float | None) -> float | None:
    return None if value is None or math.isnan(value) else value


@dataclass(frozen=True)
class Figures:
    """None where a figure is unknown: shown as a gap, never as a number."""

    tflops: float | None = None
    percent_of_cublas: float | None = None
    percent_of_peak: float | None = None
    sm_clock_mhz: float | None = None
    joules_per_gemm: float | None = None

    @classmethod
    def of(cls, tflops: float | None, baseline_tflops: float | None, peak_tflops: float | None,
           sm_clock_mhz: float | None, joules_per_gemm: float | None = None) -> Figures:
        """The figures of a case measured at `tflops`, beside its precision's cuBLAS at the same shape on the same
        GPU and that GPU's peak (either None where unknown)."""
        rate, baseline, peak = _known(tflops), _known(baseline_tflops), _known(peak_tflops)
        return cls(rate, 100 * rate / baseline if rate and baseline else None,
                   100 * rate / peak if rate and peak else None, _known(sm_clock_mhz), _known(joules_per_gemm))

    def texts(self) -> list[str]:
        """The four figures as table cells: TFLOP/s to 2 decimals, percentages to 1, the clock in whole MHz."""
        return [cell(self.tflops, 2), cell(self.percent_of_cublas, 1), cell(self.percent_of_peak, 1),
                cell(self.sm_clock_mhz, 0)]

    def texts_with_energy(self) -> list[str]:
        """The four figures with joules per GEMM (to 3 decimals) beside TFLOP/s."""
        rate, *rest = self.texts()
        return [rate, cell(self.joules_per_gemm, 3), *rest]


def cell(value: float | None, digits: int) -> str:
    return "-" if value is None else f"{value:.{digits}f}"
