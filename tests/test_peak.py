import pytest

from sgemm.peak import peak_tflops


def test_h100_sxm_peaks_at_its_max_clock():
    assert peak_tflops("fp32", 90, 132, 1980) == pytest.approx(66.9, abs=0.1)
    assert peak_tflops("fp16", 90, 132, 1980) == pytest.approx(1070.5, abs=0.1)


def test_unknown_architecture_or_clock_has_no_peak():
    assert peak_tflops("fp32", 120, 170, 2400) is None
    assert peak_tflops("fp32", 90, 132, 0) is None
