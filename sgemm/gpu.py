"""One type for a GPU, whichever source filled it in: CUDA (name, compute capability, SM count), NVML (memory,
driver, maximum SM clock, the card), or the facts a results tree or a report recorded. A fact the source does not
know stays None (or empty)."""

from __future__ import annotations

from dataclasses import dataclass

from .peak import peak_tflops


@dataclass(frozen=True)
class Gpu:
    name: str  # e.g. "NVIDIA H100 80GB HBM3"
    compute_capability: int | None = None  # e.g. 90
    sm_count: int | None = None
    max_sm_clock_mhz: float | None = None
    driver: str = "unknown"
    memory_gib: int | None = None
    card: str = ""  # which physical card (sgemm.measuring.telemetry.card_id): a hash, never the UUID itself

    @staticmethod
    def compute_capability_of(text: str) -> int | None:
        """90 from '9.0' (asv's machine facet); None for anything else."""
        major, dot, minor = text.partition(".")
        return int(major) * 10 + int(minor) if dot and major.isdigit() and minor.isdigit() else None

    @property
    def compute_capability_text(self) -> str:
        """'9.0', as asv's machine facet and NVIDIA write it; empty when unknown."""
        if self.compute_capability is None:
            return ""
        return f"{self.compute_capability // 10}.{self.compute_capability % 10}"

    def peak_tflops(self, precision: str) -> float | None:
        if not (self.compute_capability and self.sm_count and self.max_sm_clock_mhz):
            return None
        return peak_tflops(precision, self.compute_capability, self.sm_count, self.max_sm_clock_mhz)
