"""The confirmations file: records added under a lock in one atomic write, what was there kept, a file of another
shape refused whole and left as it was."""

import json
import multiprocessing

import pytest

from sgemm.results import confirmations


def record(n: int, verdict: str = "DIFFERENT") -> dict:
    return {"case": "fp16/wgmma_x", "size": 8192, "good": f"{n:040x}", "bad": f"{n + 1:040x}", "verdict": verdict,
            "ratio": 1.0102, "interval": [1.008, 1.012], "confidence": 0.95,
            "method": "paired in one process, L2 warm", "measured_at": "2026-11-25T00:00:00+00:00"}


def test_records_are_added_after_those_there(tmp_path):
    path = tmp_path / "m" / "confirmations.json"
    confirmations.append(path, [record(1)])
    confirmations.append(path, [record(2, "SAME"), record(1)])
    assert json.loads(path.read_text()) == {"confirmations": [record(1), record(2, "SAME")]}


@pytest.mark.parametrize("text, message", [
    ("{", "not valid JSON"),
    ("[]", "not a confirmations file"),
    ('{"confirmations": [{"case": "x"}]}', "record 1: a record lacks"),
    (json.dumps({"confirmations": [record(1) | {"verdict": "REGRESSION"}]}), "verdict 'REGRESSION' is not one of"),
    (json.dumps({"confirmations": [record(1) | {"good": "abc"}]}), "good 'abc' is not a full commit hash"),
])
def test_a_file_of_another_shape_is_refused_and_kept(tmp_path, text, message):
    path = tmp_path / "confirmations.json"
    path.write_text(text)
    with pytest.raises(confirmations.ConfirmationsError, match=message):
        confirmations.append(path, [record(3)])
    assert path.read_text() == text


def test_a_record_without_finite_figures_is_not_written(tmp_path):
    path = tmp_path / "confirmations.json"
    with pytest.raises(confirmations.ConfirmationsError, match="finite"):
        confirmations.append(path, [record(1) | {"interval": [float("-inf"), float("inf")]}])
    assert not path.exists()


def _add(path, n):
    confirmations.append(path, [record(n)])


def test_writers_at_once_lose_no_record(tmp_path):
    path = tmp_path / "confirmations.json"
    with multiprocessing.get_context("fork").Pool(4) as pool:
        pool.starmap(_add, [(path, n) for n in range(24)])
    assert sorted(r["good"] for r in confirmations.read(path)) == sorted(f"{n:040x}" for n in range(24))
    assert [p.name for p in tmp_path.iterdir() if p.name.endswith(".tmp")] == []
