"""Counts said as a reader says them (sgemm.words)."""

import pytest

from sgemm.words import counted


@pytest.mark.parametrize("number, said", [(0, "0 entries"), (1, "1 entry"), (2, "2 entries")])
def test_a_count_is_singular_for_one_alone(number, said):
    assert counted(number, "entry", "entries") == said
    assert counted(number, "kernel") == said.replace("entries", "kernels").replace("entry", "kernel")
