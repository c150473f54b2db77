"""The GPUs a process may use, read as CUDA reads CUDA_VISIBLE_DEVICES, and the cards a gate takes of them (NVML
stood in for by a list of each card's model and UUID)."""

import pytest

from sgemm.measuring import cards
from sgemm.measuring.cards import Card, CardsError, choose, visible

H100, H200 = "NVIDIA H100 80GB HBM3", "NVIDIA H200"
BOX = [(H100, "GPU-aaaa-0"), (H100, "GPU-bbbb-1"), (H100, "GPU-cccc-2"), (H100, "GPU-dddd-3")]


@pytest.mark.parametrize("variable, uuids", [
    (None, ["GPU-aaaa-0", "GPU-bbbb-1", "GPU-cccc-2", "GPU-dddd-3"]),  # not set: every card
    ("2,3", ["GPU-cccc-2", "GPU-dddd-3"]),  # a Slurm job's two cards, numbered 0 and 1 in the process
    ("3,0", ["GPU-dddd-3", "GPU-aaaa-0"]),  # in the list's order
    ("GPU-cccc", ["GPU-cccc-2"]),  # a UUID's unique prefix
    ("1,7,2", ["GPU-bbbb-1"]),  # CUDA stops at the first entry it cannot use
    ("GPU-,2", []),  # a prefix every card has names none
    ("1,1", ["GPU-bbbb-1"]),
    ("", []),
])
def test_the_visible_cards_are_those_cuda_visible_devices_names_numbered_as_cuda_does(variable, uuids):
    found = visible(BOX, variable)
    assert [card.uuid for card in found] == uuids
    assert [card.cuda_index for card in found] == list(range(len(uuids)))


def test_a_gate_takes_the_first_cards_or_all_of_them():
    box = visible(BOX, None)
    assert [card.cuda_index for card in choose(box, "2")] == [0, 1]
    assert choose(box, "all") == box


def test_more_cards_than_the_process_may_use_are_refused_naming_the_variable(monkeypatch):
    monkeypatch.setenv(cards.VISIBLE_VARIABLE, "2,3")
    with pytest.raises(CardsError, match=r"^this process may use 2 GPUs \(CUDA_VISIBLE_DEVICES=2,3\), not 4$"):
        choose(visible(BOX, "2,3"), "4")
    monkeypatch.setenv(cards.VISIBLE_VARIABLE, "")
    with pytest.raises(CardsError, match="may use no GPU"):
        choose(visible(BOX, ""), "all")


def test_cards_of_two_models_are_refused():
    mixed = [Card(0, H100, "GPU-a"), Card(1, H200, "GPU-b")]
    with pytest.raises(CardsError, match="not one model \\(GPU 0: NVIDIA H100 80GB HBM3, GPU 1: NVIDIA H200\\)"):
        choose(mixed, "all")
    assert choose(mixed, "1") == mixed[:1]
