"""A confirmation: the step's two sides timed until DIFFERENT or SAME, the record appended in the file's format."""

import json
import re

import bisect_histories as histories
import pytest

from sgemm.bisect.compare import CompareSchedule
from sgemm.bisect.confirm import already_decided, confirm
from sgemm.bisect.targets import Target

GOOD, BAD = "a" * 40, "b" * 40


@pytest.fixture
def fake_builds():
    return histories.FakeBuilds


def test_a_step_is_confirmed_and_recorded_in_the_files_format(tmp_path, fake_builds):
    path = tmp_path / "m" / "confirmations.json"
    target = Target("t", "fp16/x", 8192, GOOD, BAD)
    made = confirm(target, fake_builds({BAD: 1.0102}), path, 0.0025, say=lambda text: None)
    assert set(made) == {"case", "size", "good", "bad", "verdict", "ratio", "interval", "confidence", "method",
                         "measured_at"}
    assert made["verdict"] == "DIFFERENT" and made["interval"][0] < made["ratio"] < made["interval"][1]
    assert re.fullmatch(r"\d{4}-\d\d-\d\dT\d\d:\d\d:\d\d\+00:00", made["measured_at"])
    assert json.loads(path.read_text()) == {"confirmations": [made]}
    assert already_decided([made], target) == made


def test_an_unknown_record_is_measured_again(tmp_path, fake_builds):
    path = tmp_path / "confirmations.json"
    target = Target("t", "fp16/x", 8192, GOOD, BAD)
    noisy = fake_builds({BAD: 1.0025}, noise=0.003)
    made = confirm(target, noisy, path, 0.0025, CompareSchedule(max_rounds=3), say=lambda text: None)
    assert made["verdict"] == "UNKNOWN" and already_decided([made], target) is None
