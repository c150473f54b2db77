"""asv suite: facts of the GPU a run measured on that its rates are read against: SM count and maximum SM clock
(a GPU's peak rate, for "% of peak" in the cross-GPU report), and what the box measured with: the driver, the CUDA
version it supports and cuBLAS's version. They sit in the results beside the rates, so a report made anywhere, from
merged results, reads them from there rather than from the box that makes it; and a step in a history that comes
with a new driver or cuBLAS is named as the environment's (sgemm.watch.notices).
"""

import math
import re

from . import under_test


def version_number(text: str) -> float:
    """A dotted version as one number asv can keep, each later part given three digits: '580.159.04' -> 580159004,
    '535.54' -> 535054; NaN for text that is not a dotted version."""
    parts = text.strip().split(".")
    if not parts or not all(re.fullmatch(r"\d{1,3}", part) for part in parts[1:]) or not parts[0].isdigit():
        return math.nan
    number = int(parts[0])
    for part in parts[1:]:
        number = number * 1000 + int(part)
    return float(number)


def _driver_version() -> float:
    try:
        import pynvml

        pynvml.nvmlInit()
        driver = pynvml.nvmlSystemGetDriverVersion()
    except Exception:  # noqa: BLE001 - no NVML here: the figure is left out, as for the maximum clock
        return math.nan
    return version_number(driver.decode() if isinstance(driver, bytes) else str(driver))


def _cuda_versions() -> tuple[float, float]:
    """(the CUDA version the driver supports, cuBLAS's version), NaN for each that cannot be read."""
    try:
        import cupy

        cuda = float(cupy.cuda.runtime.driverGetVersion())
    except Exception:  # noqa: BLE001 - no CUDA here
        return math.nan, math.nan
    if not cuda:  # 0: CUDA says no driver is loaded
        return math.nan, math.nan
    try:
        from cupy_backends.cuda.libs import cublas

        return cuda, float(cublas.getVersion(cupy.cuda.device.get_cublas_handle()))
    except Exception:  # noqa: BLE001 - no cuBLAS in this CUDA stack
        return cuda, math.nan


class Gpu:
    def setup(self):
        try:
            record, telemetry = under_test.record(), under_test.telemetry()
        except ImportError as exc:
            raise NotImplementedError(f"the commit under test cannot describe the GPU: {exc}") from exc
        try:
            self.sm_count = record.device_info().sm_count
        except record.NoGpuError as exc:
            raise NotImplementedError(str(exc)) from exc
        try:
            self.max_sm_clock_mhz = telemetry.gpu_identity().max_sm_clock_mhz
        except telemetry.TelemetryUnavailable:
            self.max_sm_clock_mhz = math.nan

    def track_sm_count(self):
        return self.sm_count

    track_sm_count.unit = "SMs"

    def track_max_sm_clock(self):
        return self.max_sm_clock_mhz

    track_max_sm_clock.unit = "MHz"

    def track_driver_version(self):
        return _driver_version()

    track_driver_version.unit = "version"

    def track_cuda_driver_version(self):
        return _cuda_versions()[0]

    track_cuda_driver_version.unit = "version"

    def track_cublas_version(self):
        return _cuda_versions()[1]

    track_cublas_version.unit = "version"
