"""The history run's summary: one row per commit, read back from the results asv wrote."""

import re

from conftest import write_asv_run

from sgemm.history import recorded
from sgemm.results import asvsuite


def test_a_row_per_commit_from_what_is_on_disk(tmp_path):
    resources = {("Resources", "track_registers"): {("fp32/naive", "sm_90"): [32.0],
                                                    ("fp32/warptile", "sm_90"): [201.0],
                                                    ("fp32/broken", "sm_90"): None},
                 ("Resources", "track_shared_memory"): {("fp32/naive", "sm_90"): [0.0],
                                                        ("fp32/warptile", "sm_90"): [16640.0]},
                 ("Resources", "track_spill_stores"): {("fp32/naive", "sm_90"): [0.0],
                                                       ("fp32/warptile", "sm_90"): [8.0]}}
    write_asv_run(tmp_path, "box", "a" * 40, 1_764_000_000_000, resources, module="bench_resources")
    write_asv_run(tmp_path, "box", "b" * 40, 1_764_100_000_000,
                  {("Gemm", "track_tflops"): {("naive", 64, "fp32"): [7.0], ("float4", 64, "fp32"): [9.0],
                                              ("cublas", 64, "fp32"): None}})
    lines = recorded.summary(asvsuite.runs(tmp_path, "box"), ("c" * 40, "b" * 40, "a" * 40))
    header, *rows = lines
    assert re.split(r"\s{2,}", header)[0] == "commit" and "registers/thread" in header and "spilling" in header
    assert len({len(line) for line in lines[:1] + rows[1:]}) <= 2  # columns line up (a short last cell aside)
    cells = [re.split(r"\s{2,}", row) for row in rows]
    assert cells[0] == ["cccccccc", "-", "nothing recorded: see asv's log"]
    assert cells[1] == ["bbbbbbbb", "2025-11-25", "2", "-", "-", "-", "-", "1"]  # the failed cuBLAS case
    assert cells[2] == ["aaaaaaaa", "2025-11-24", "-", "2", "32-201", "0-16,640 B", "1", "1"]


def test_the_table_is_as_wide_as_its_widest_cell():
    lines = recorded.table([("a", "b", "c", "d", "e", "f", "g", "a long cell")])
    assert lines[1].endswith("a long cell") and lines[0].index("failed") == lines[1].index("a long cell")
