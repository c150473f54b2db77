"""One GPU type: its compute capability in both spellings, and a peak only where every fact it needs is known."""

import pytest

from sgemm.gpu import Gpu

H100 = Gpu("NVIDIA H100 80GB HBM3", 90, 132, 1980.0)


@pytest.mark.parametrize("text, capability", [("9.0", 90), ("8.6", 86), ("12.0", 120), ("", None), ("9", None),
                                              ("nine.0", None)])
def test_the_compute_capability_is_read_from_asvs_facet(text, capability):
    assert Gpu.compute_capability_of(text) == capability


def test_the_compute_capability_is_written_as_nvidia_writes_it():
    assert H100.compute_capability_text == "9.0" and Gpu("B200", 100).compute_capability_text == "10.0"
    assert Gpu("unknown").compute_capability_text == ""


def test_the_peak_needs_the_architecture_the_sm_count_and_the_clock():
    assert H100.peak_tflops("fp32") == pytest.approx(66.9, abs=0.1)
    assert Gpu("H100 without NVML", 90, 132).peak_tflops("fp32") is None
    assert Gpu("H100 without CUDA", 90, None, 1980.0).peak_tflops("fp32") is None
