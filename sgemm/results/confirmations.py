"""A machine's confirmations: each a second, paired measurement of a step's two sides, kept in
`<results>/<machine>/confirmations.json` beside the machine's asv runs, which `sgemm confirm` appends to, `sgemm merge`
joins record by record, and the change-point detector reads.

    {"confirmations": [{"case": "fp16/wgmma_x", "size": 8192, "good": "<sha40>", "bad": "<sha40>",
                        "verdict": "DIFFERENT" | "SAME" | "UNKNOWN", "ratio": 1.0102, "interval": [1.008, 1.012],
                        "confidence": 0.95, "method": "paired in one process, L2 warm",
                        "measured_at": "<iso8601>"}]}

ratio is the bad build's time over the good build's. A file that is not of this shape is refused whole, never
rewritten: what was recorded stays as it was. Records are only ever added, under a lock, in one atomic write.
"""

from __future__ import annotations

import contextlib
import fcntl
import json
import math
import os
import re
from collections.abc import Iterator
from pathlib import Path

from ..atomic import write_atomically

FILE = "confirmations.json"
KEY = "confirmations"
VERDICTS = ("DIFFERENT", "SAME", "UNKNOWN")
SHA = re.compile(r"[0-9a-f]{40}")
FIELDS = ("case", "size", "good", "bad", "verdict", "ratio", "interval", "confidence", "method", "measured_at")


class ConfirmationsError(ValueError):
    """The file is not a confirmations file; the message names it and says why. Nothing was written."""


def path_for(results: Path, machine: str) -> Path:
    return Path(results) / machine / FILE


def _number(value) -> bool:
    return isinstance(value, (int, float)) and not isinstance(value, bool)


def record_problem(record) -> str | None:
    """Why a record is not one of this file's, or None."""
    if not isinstance(record, dict):
        return "a record is not a JSON object"
    if missing := [key for key in FIELDS if key not in record]:
        return f"a record lacks {', '.join(missing)}"
    if not isinstance(record["case"], str) or "/" not in record["case"]:
        return f"case {record['case']!r} is not a kernel name such as fp16/wgmma_x"
    if not isinstance(record["size"], int) or isinstance(record["size"], bool) or record["size"] < 1:
        return f"size {record['size']!r} is not a positive whole number"
    for end in ("good", "bad"):
        if not isinstance(record[end], str) or not SHA.fullmatch(record[end]):
            return f"{end} {record[end]!r} is not a full commit hash"
    if record["verdict"] not in VERDICTS:
        return f"verdict {record['verdict']!r} is not one of {', '.join(VERDICTS)}"
    interval = record["interval"]
    if not isinstance(interval, list) or len(interval) != 2 or not all(_number(v) for v in interval):
        return f"interval {interval!r} is not two numbers"
    if not _number(record["ratio"]) or not _number(record["confidence"]) or not 0 < record["confidence"] < 1:
        return "ratio and confidence must be numbers, confidence between 0 and 1"
    if not all(math.isfinite(v) and v > 0 for v in (record["ratio"], *interval)):
        # A time over a time: an undecided record says UNKNOWN with the figures it had, never NaN or infinity.
        return "ratio and interval must be positive finite numbers"
    if not isinstance(record["method"], str) or not isinstance(record["measured_at"], str):
        return "method and measured_at must be text"
    return None


def parse(text: str, where: str) -> list[dict]:
    """The records of a confirmations file's text, or ConfirmationsError naming `where`."""
    try:
        data = json.loads(text)
    except ValueError as exc:
        raise ConfirmationsError(f"{where}: not valid JSON ({exc})") from None
    if not isinstance(data, dict) or not isinstance(data.get(KEY), list):
        raise ConfirmationsError(f"{where}: not a confirmations file (expected {{\"{KEY}\": [...]}})")
    for number, record in enumerate(data[KEY], 1):
        if problem := record_problem(record):
            raise ConfirmationsError(f"{where}: record {number}: {problem}")
    return data[KEY]


def read(path: Path) -> list[dict]:
    """The file's records; none when it is not there."""
    path = Path(path)
    if not path.exists():
        return []
    try:
        text = path.read_text()
    except (OSError, UnicodeDecodeError) as exc:
        raise ConfirmationsError(f"{path}: cannot be read ({exc})") from None
    return parse(text, str(path))


def render(records: list[dict]) -> str:
    return json.dumps({KEY: records}, indent=1) + "\n"


def joined(*lists: list[dict]) -> list[dict]:
    """Every record of the lists, in order, each once."""
    seen, out = set(), []
    for records in lists:
        for record in records:
            key = json.dumps(record, sort_keys=True)
            if key not in seen:
                seen.add(key)
                out.append(record)
    return out


@contextlib.contextmanager
def _locked(path: Path) -> Iterator[None]:
    """An exclusive lock on a file beside `path` (a dot-file: asv and `sgemm merge` pass it by), so that two writers
    take turns between reading the records and writing them back."""
    fd = os.open(path.parent / f".{path.name}.lock", os.O_RDWR | os.O_CREAT, 0o644)
    try:
        fcntl.flock(fd, fcntl.LOCK_EX)
        yield
    finally:
        os.close(fd)


def append(path: Path, new: list[dict]) -> list[dict]:
    """Add `new` after the records already there; every record, the file's and the new, is checked first. Returns
    the file's records as written."""
    for record in new:
        if problem := record_problem(record):
            raise ConfirmationsError(f"a new record cannot be written: {problem}")
    path = Path(path)
    path.parent.mkdir(parents=True, exist_ok=True)
    with _locked(path):
        records = joined(read(path), new)
        write_atomically(path, render(records))
    return records
