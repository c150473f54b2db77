import pytest

from sgemm.peak import FLOP_PER_SM_PER_CLOCK, peak_tflops

# NVIDIA's datasheet figures (dense TFLOP/s: FP32, and FP16 tensor cores with FP32 accumulate) with the SM count and
# the boost clock each is quoted at.
DATASHEETS = [
    ("V100 SXM2", 70, 80, 1530, 15.7, 125.0),
    ("T4", 75, 40, 1590, 8.1, 65.0),
    ("A100 SXM", 80, 108, 1410, 19.5, 312.0),
    ("A40", 86, 84, 1740, 37.4, 149.7),
    ("L4", 89, 58, 2040, 30.3, 121.0),
]


@pytest.mark.parametrize("gpu, capability, sms, clock_mhz, fp32, fp16", DATASHEETS, ids=[d[0] for d in DATASHEETS])
def test_every_architecture_peaks_as_its_datasheet_says(gpu, capability, sms, clock_mhz, fp32, fp16):
    assert peak_tflops("fp32", capability, sms, clock_mhz) == pytest.approx(fp32, rel=0.01)
    assert peak_tflops("fp16", capability, sms, clock_mhz) == pytest.approx(fp16, rel=0.01)


def test_h100_sxm_peaks_as_its_datasheet_says():
    # Its FP32 figure (67) is quoted at 1980 MHz and its FP16 figure (989.4) at 1830 MHz.
    assert peak_tflops("fp32", 90, 132, 1980) == pytest.approx(67.0, rel=0.01)
    assert peak_tflops("fp16", 90, 132, 1830) == pytest.approx(989.4, rel=0.01)


def test_every_architecture_of_the_table_is_tested():
    tested = {capability for _, capability, *_ in DATASHEETS} | {90}
    assert set(FLOP_PER_SM_PER_CLOCK["fp32"]) == set(FLOP_PER_SM_PER_CLOCK["fp16"]) == tested


def test_unknown_architecture_or_clock_has_no_peak():
    assert peak_tflops("fp32", 120, 170, 2400) is None
    assert peak_tflops("fp32", 90, 132, 0) is None
