"""The GPUs this process may use: those CUDA_VISIBLE_DEVICES names, where it is set (a Slurm job or a shared box hands
out some of a box's cards), else every one NVML sees; each with its CUDA index in this process, its model and UUID.

NVML ignores CUDA_VISIBLE_DEVICES and numbers every card of the box, so the variable is read here as CUDA reads it:
a list of NVML indices or UUIDs (a UUID's unique prefix will do), CUDA numbering the cards it names 0, 1, ... in the
list's order, and stopping at the first entry it cannot use.
"""

from __future__ import annotations

import os
from dataclasses import dataclass

VISIBLE_VARIABLE = "CUDA_VISIBLE_DEVICES"


class CardsError(RuntimeError):
    """The cards asked for cannot be used: the message names them and says why."""


@dataclass(frozen=True)
class Card:
    cuda_index: int  # as this process numbers it
    model: str  # NVML's name, e.g. "NVIDIA H100 80GB HBM3"
    uuid: str


def visible(box: list[tuple[str, str]], variable: str | None) -> list[Card]:
    """The cards of a box (each card's (model, UUID) in NVML's order) that a process may use under
    CUDA_VISIBLE_DEVICES = `variable` (None: not set)."""
    if variable is None:
        return [Card(index, model, uuid) for index, (model, uuid) in enumerate(box)]
    chosen: list[tuple[str, str]] = []
    for entry in (part.strip() for part in variable.split(",")):
        if entry.isdigit() and int(entry) < len(box):
            card = box[int(entry)]
        elif entry.startswith("GPU-") and len(matches := [c for c in box if c[1].startswith(entry)]) == 1:
            card = matches[0]
        else:
            break  # as CUDA does: what follows an entry it cannot use is not visible either
        if card in chosen:
            break
        chosen.append(card)
    return [Card(index, model, uuid) for index, (model, uuid) in enumerate(chosen)]


def visible_cards() -> list[Card]:
    """The cards this process may use; CardsError when NVML cannot say."""
    from .telemetry import TelemetryUnavailable, box_gpus

    try:
        box = box_gpus()
    except TelemetryUnavailable as exc:
        raise CardsError(str(exc)) from exc
    return visible(box, os.environ.get(VISIBLE_VARIABLE))


def choose(cards: list[Card], requested: str) -> list[Card]:
    """The first `requested` cards ('all': every one) of one model; CardsError saying why not."""
    where = (f" ({VISIBLE_VARIABLE}={os.environ[VISIBLE_VARIABLE]})" if VISIBLE_VARIABLE in os.environ
             else "")
    if not cards:
        raise CardsError(f"this process may use no GPU{where}")
    count = len(cards) if requested == "all" else int(requested)
    if count > len(cards):
        raise CardsError(f"this process may use {len(cards)} GPU{'s' if len(cards) != 1 else ''}{where}, not {count}")
    chosen = cards[:count]
    if len({card.model for card in chosen}) > 1:
        listed = ", ".join(f"GPU {card.cuda_index}: {card.model}" for card in chosen)
        raise CardsError(f"the GPUs are not one model ({listed}): their rounds could not be judged together; name "
                         f"cards of one model ({VISIBLE_VARIABLE})")
    return chosen
