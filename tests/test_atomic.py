"""One atomic writer: the old content stays whole when writing fails, permissions are kept, nothing is left over."""

import os

import pytest

from sgemm.atomic import write_atomically


def test_a_new_file_is_written_readable_by_others(tmp_path):
    path = tmp_path / "deep" / "results.json"
    write_atomically(path, "{}")
    assert path.read_text() == "{}"
    assert path.stat().st_mode & 0o777 == 0o644


def test_an_existing_file_keeps_its_permissions(tmp_path):
    path = tmp_path / "machine.json"
    path.write_text("old")
    os.chmod(path, 0o600)
    write_atomically(path, b"new")
    assert path.read_bytes() == b"new" and path.stat().st_mode & 0o777 == 0o600


def test_a_failed_write_leaves_the_old_content_and_no_temporary_file(tmp_path, monkeypatch):
    path = tmp_path / "benchmarks.json"
    path.write_text("recorded")

    def full_disk(*_):
        raise OSError(28, "No space left on device")

    monkeypatch.setattr(os, "replace", full_disk)
    with pytest.raises(OSError, match="No space"):
        write_atomically(path, "half")
    assert path.read_text() == "recorded"
    assert sorted(p.name for p in tmp_path.iterdir()) == ["benchmarks.json"]
