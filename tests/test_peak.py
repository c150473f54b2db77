import pytest

from sgemm.catalogue import load_precisions
from sgemm.peak import peak_tflops

# NVIDIA's datasheet figures (dense TFLOP/s: FP32, FP16 and BF16 tensor cores with FP32 accumulate; None where the
# part has no BF16 tensor cores) with the SM count and the boost clock each is quoted at.
DATASHEETS = [
    ("V100 SXM2", 70, 80, 1530, 15.7, 125.0, None),
    ("T4", 75, 40, 1590, 8.1, 65.0, None),
    ("A100 SXM", 80, 108, 1410, 19.5, 312.0, 312.0),
    ("A40", 86, 84, 1740, 37.4, 149.7, 149.7),
    ("L4", 89, 58, 2040, 30.3, 121.0, 121.0),
]


@pytest.mark.parametrize("gpu, capability, sms, clock_mhz, fp32, fp16, bf16", DATASHEETS,
                         ids=[d[0] for d in DATASHEETS])
def test_every_architecture_peaks_as_its_datasheet_says(gpu, capability, sms, clock_mhz, fp32, fp16, bf16):
    assert peak_tflops("fp32", capability, sms, clock_mhz) == pytest.approx(fp32, rel=0.01)
    assert peak_tflops("fp16", capability, sms, clock_mhz) == pytest.approx(fp16, rel=0.01)
    if bf16 is None:
        assert peak_tflops("bf16", capability, sms, clock_mhz) is None
    else:
        assert peak_tflops("bf16", capability, sms, clock_mhz) == pytest.approx(bf16, rel=0.01)


def test_h100_sxm_peaks_as_its_datasheet_says():
    # Its FP32 figure (67) is quoted at 1980 MHz and its FP16 and BF16 figures (989.4) at 1830 MHz.
    assert peak_tflops("fp32", 90, 132, 1980) == pytest.approx(67.0, rel=0.01)
    assert peak_tflops("fp16", 90, 132, 1830) == pytest.approx(989.4, rel=0.01)
    assert peak_tflops("bf16", 90, 132, 1830) == pytest.approx(989.4, rel=0.01)


def test_every_architecture_of_every_precision_is_tested():
    tested = {capability for _, capability, *_ in DATASHEETS} | {90}
    for precision in load_precisions().values():
        assert {cc for cc, _ in precision.flop_per_sm_per_clock} <= tested, precision.name
    assert {cc for cc, _ in load_precisions()["fp32"].flop_per_sm_per_clock} == tested


def test_unknown_architecture_precision_or_clock_has_no_peak():
    assert peak_tflops("fp32", 120, 170, 2400) is None
    assert peak_tflops("fp32", 90, 132, 0) is None
    assert peak_tflops("fp8", 90, 132, 1980) is None
