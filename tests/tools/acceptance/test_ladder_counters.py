"""tools/acceptance/ladder_counters.py with no GPU: the ladder's compiled steps at the sizes their entries take, one
ncu command each that profiles the step's own launch with the clocks left alone and writes the file the report
reads, and bad input said in one line before anything is made."""

import subprocess
import sys
from pathlib import Path

import pytest

from sgemm.catalogue import load_catalogue, seeds
from sgemm.site.counters import SECTIONS, file_name
from tools.acceptance import ladder_counters

ROOT = Path(__file__).resolve().parents[3]


def test_the_cases_are_the_ladders_compiled_steps_at_the_sizes_their_entries_take():
    hopper = next(seed for seed in seeds() if seed.number == "hopper")
    found = ladder_counters.cases(hopper, load_catalogue(), [4096, 1000], ["fp16"])
    names = [kernel.name for kernel, _ in found]
    assert names[:2] == ["fp16/wgmma_tma", "fp16/wgmma_tma_wide"] and "fp16/wgmma_lean_loop" in names
    assert all(size == 4096 for _, size in found)  # 1000 is no multiple of their tiles
    assert not any(kernel.library for kernel, _ in found)


def test_a_dry_run_prints_one_profile_a_case_into_the_file_the_report_reads(tmp_path):
    done = subprocess.run([sys.executable, "-m", "tools.acceptance.ladder_counters", str(tmp_path / "ctr"), "--seed",
                           "hopper", "--size", "4096", "--precision", "bf16", "--dry-run"], cwd=ROOT,
                          capture_output=True, text=True, check=False)
    assert done.returncode == 0, done.stderr
    first = done.stdout.splitlines()[0]
    assert "--clock-control none" in first and "--kernel-name regex:gemm_wgmma_tma " in first
    assert all(f"--section {section}" in first for section in SECTIONS)
    assert "--page details --print-details all" in first  # the charts: the tensor pipe and the stall reasons
    assert "-m sgemm check -k bf16/wgmma_tma --shape 4096x4096x4096" in first
    assert first.endswith(f"> {tmp_path / 'ctr' / file_name('bf16/wgmma_tma', 4096)}")
    assert not (tmp_path / "ctr").exists()


def test_without_ncu_it_stops_in_one_line_before_making_anything(tmp_path, monkeypatch, capsys):
    monkeypatch.delenv("NCU", raising=False)
    monkeypatch.setenv("PATH", str(tmp_path))
    with pytest.raises(SystemExit) as stopped:
        ladder_counters.main([str(tmp_path / "ctr"), "--seed", "hopper"])
    assert stopped.value.code == 2
    error = capsys.readouterr().err
    assert error.count("\n") == 1 and "no ncu on PATH" in error
    assert not (tmp_path / "ctr").exists()


def test_kernel_keeps_the_profiles_to_the_steps_named(tmp_path, capsys):
    assert ladder_counters.main([str(tmp_path / "ctr"), "--seed", "hopper", "--size", "4096", "--kernel",
                                 "bf16/wgmma_persistent", "--kernel", "fp16/wgmma_tma_wide", "--dry-run"]) == 0
    profiled = [line.split(" -k ")[1].split()[0] for line in capsys.readouterr().out.splitlines()]
    assert profiled == ["fp16/wgmma_tma_wide", "bf16/wgmma_persistent"]  # in ladder order


@pytest.mark.parametrize("kernel", ["fp16/cublas", "fp32/naive", "fp16/nonesuch"])
def test_a_kernel_that_is_no_compiled_step_of_the_ladder_is_refused_in_one_line(tmp_path, capsys, kernel):
    with pytest.raises(SystemExit) as stopped:
        ladder_counters.main([str(tmp_path / "ctr"), "--seed", "hopper", "--kernel", kernel, "--dry-run"])
    assert stopped.value.code == 2
    error = capsys.readouterr().err
    assert error.count("\n") == 1 and f"{kernel}: no compiled step of seed hopper's ladder" in error
