import json
import subprocess
import sys

import pytest

from sgemm.measuring.measure import Timing, time_cases


@pytest.mark.parametrize("case_id", ["a,b", "fp32/naive:1024", "x]"])
def test_case_ids_with_nvbench_syntax_are_refused(case_id):
    with pytest.raises(ValueError, match="may not contain"):
        time_cases({case_id: lambda: None})


def test_timing_summaries():
    timing = Timing([3.0, 1.0, 2.0], [1900.0, 1910.0, 2000.0])
    assert timing.median_s == 2.0 and timing.median_sm_clock_mhz == 1910.0


CHILD = """
import json, cupy
from sgemm.measuring.measure import time_cases
x = cupy.ones(1 << 24, dtype=cupy.float32)
def prepare_scale():
    return lambda: cupy.multiply(x, 2.0, out=x)
def prepare_broken():
    raise RuntimeError("cannot prepare this one")
results = time_cases({"scale": prepare_scale, "broken": prepare_broken, "scale-again": prepare_scale})
try:
    time_cases({"late": prepare_scale})
    second = "ran"
except RuntimeError as exc:
    second = str(exc)
print(json.dumps({"second": second, **{k: (vars(v) if not isinstance(v, BaseException) else repr(v))
                                        for k, v in results.items()}}))
"""


@pytest.mark.gpu
def test_nvbench_times_each_case_and_a_failing_case_does_not_stop_the_rest():
    done = subprocess.run([sys.executable, "-c", CHILD], capture_output=True, text=True)
    assert done.returncode == 0, done.stderr
    results = json.loads(done.stdout.strip().splitlines()[-1])
    assert "cannot prepare this one" in results["broken"]
    assert "once per process" in results["second"]
    for case in ("scale", "scale-again"):
        timing = Timing(**results[case])
        assert len(timing.samples_s) >= 10 and all(0 < s < 0.1 for s in timing.samples_s)
        assert len(timing.sm_clock_mhz) == len(timing.samples_s)
        assert 200 < timing.median_sm_clock_mhz < 4000, "per-sample clocks must be in MHz"
