"""A paired round's lines as the gate reads them back, and what identifies a build across runs (the rounds
themselves, end to end, are in test_gate.py)."""

import json
from dataclasses import replace
from pathlib import Path

from sgemm.catalogue import load_catalogue
from sgemm.rounds.session import _read_lines, build_digest

ROOT = Path(__file__).resolve().parents[2]
SIDE = {"median_s": 1e-3, "sm_clock_mhz": 1400.0}
LINE = {"label": "fp32/naive 64x64x64", "ratio": 1.001, "launches_per_block": 10, "sides": {"base": SIDE, "head": SIDE}}
FAILED = {"label": "fp32/tiled 64x64x64", "failed": {"side": "head", "kind": "wrong result", "reason": "3e-2"}}


def test_a_line_cut_off_as_it_was_written_is_left_out(tmp_path):
    out = tmp_path / "round-1.jsonl"
    out.write_text(json.dumps(LINE) + "\n" + json.dumps(FAILED) + "\n" + json.dumps(LINE)[:40])
    assert _read_lines(out) == [LINE, FAILED]


def test_a_line_without_its_figures_is_not_complete(tmp_path):
    out = tmp_path / "round-1.jsonl"
    lines = [{"label": "x"}, {**LINE, "sides": {"base": SIDE}}, {**LINE, "ratio": None}, [1, 2],
             {"label": "y", "failed": {"kind": "missing"}}]
    out.write_text("".join(json.dumps(line) + "\n" for line in lines))
    assert _read_lines(out) == []
    assert _read_lines(tmp_path / "round-2.jsonl") == []  # a round whose process never began to write


def test_a_builds_digest_follows_its_entry_and_its_source_not_where_its_tree_lies(tmp_path):
    kernels = load_catalogue(ROOT / "sgemm" / "catalogue.toml", ROOT / "kernels")
    warptile = kernels["fp32/warptile"]
    copy = tmp_path / "kernels"
    copy.mkdir()
    for path in (ROOT / "kernels").iterdir():
        if path.is_file():
            (copy / path.name).write_bytes(path.read_bytes())
    moved = replace(warptile, kernel_dir=copy)
    assert build_digest(moved) == build_digest(warptile)
    (copy / warptile.source).write_text((copy / warptile.source).read_text() + "// edited\n")
    assert build_digest(moved) != build_digest(warptile)
    assert build_digest(replace(warptile, pitch=warptile.pitch * 2)) != build_digest(warptile)
    assert build_digest(kernels["fp32/cublas"]) != build_digest(kernels["fp16/cublas"])
    assert build_digest(None) == ""
