"""When a step the detector sees becomes a notice, and when two sightings are one step.

A step seen at a publish is a **candidate**: it is written to the notices file (so `sgemm confirm` can measure it,
paired) but opens no issue. It is **filed** (an issue is opened for it) once it was seen at PUBLISHES publishes in a
row with at least MIN_AFTER commits measured from its first slow one, or once a paired confirmation said DIFFERENT.
A sighting is the same step as an earlier one of the same kernel when their first slow commits lie at most
SAME_STEP_COMMITS measured commits apart: a boundary that moves by a commit or two as figures arrive updates one
notice (its id is the one it got when first seen), not a new one. The rules are elementwise, so that the simulation
of tools/simulate/simulate_watch.py applies them to whole arrays of publishes.
"""

from __future__ import annotations

import numpy as np

PUBLISHES = 2  # publishes in a row that must see a step before it is filed
MIN_AFTER = 5  # measured commits from the first slow one (itself included) before a step can be filed
SAME_STEP_COMMITS = 3  # how far (measured commits) a step's first slow commit may move and stay one notice


def same_step(first_bad, other_first_bad):
    """Whether two sightings' first slow commits (indices among the measured commits) are one step's."""
    return np.abs(np.asarray(first_bad) - np.asarray(other_first_bad)) <= SAME_STEP_COMMITS


def persisted(publishes_in_a_row, commits_after):
    """Whether a step seen at this many publishes in a row, with this many commits measured from its first slow
    one, is filed without a confirmation."""
    return (np.asarray(publishes_in_a_row) >= PUBLISHES) & (np.asarray(commits_after) >= MIN_AFTER)
