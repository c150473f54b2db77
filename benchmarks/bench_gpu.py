"""asv suite: facts of the GPU a run measured on that its rates are read against: SM count and maximum SM clock
(a GPU's peak rate, for "% of peak" in the cross-GPU report). They sit in the results beside the rates, so a
report made anywhere, from merged results, reads them from there rather than from the box that makes it.
"""

import math

from . import under_test


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
