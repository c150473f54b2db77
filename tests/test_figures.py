"""A case's figures, computed in one place for every table: known answers, and gaps where a figure is unknown."""

import math

import pytest

from sgemm.figures import Figures, cell


def test_percentages_are_of_the_baseline_and_of_the_peak():
    figures = Figures.of(25.0, 50.0, 66.9, 1975.4)
    assert figures == Figures(25.0, 50.0, pytest.approx(37.369, abs=1e-3), 1975.4)
    assert figures.texts() == ["25.00", "50.0", "37.4", "1975"]


@pytest.mark.parametrize("baseline, peak, clock, texts", [
    (None, 66.9, 1975.0, ["25.00", "-", "37.4", "1975"]),  # cuBLAS not measured at that shape
    (50.0, None, 1975.0, ["25.00", "50.0", "-", "1975"]),  # no peak known for the GPU
    (50.0, 66.9, math.nan, ["25.00", "50.0", "37.4", "-"]),  # no clock recorded
    (math.nan, math.nan, None, ["25.00", "-", "-", "-"]),
])
def test_an_unknown_figure_is_a_gap_never_a_number(baseline, peak, clock, texts):
    assert Figures.of(25.0, baseline, peak, clock).texts() == texts


def test_an_unmeasured_case_has_no_figures_at_all():
    assert Figures.of(None, 50.0, 66.9, 1975.0) == Figures(None, None, None, 1975.0)
    assert Figures.of(math.nan, 50.0, 66.9, None) == Figures()
    assert Figures().texts() == ["-", "-", "-", "-"]


def test_cells_round_to_their_digits():
    assert (cell(1.005, 0), cell(12.3456, 2), cell(None, 1)) == ("1", "12.35", "-")
