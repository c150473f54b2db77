import json
import subprocess
import sys
from pathlib import Path

import pytest

from sgemm import cli
from sgemm.catalogue import load_catalogue
from sgemm.commands.args import parse_shape


def run(*args, env=None):
    return subprocess.run([sys.executable, "-m", "sgemm", *args], capture_output=True, text=True, env=env)


@pytest.mark.parametrize("columns", [100, 80])
def test_list_shows_every_kernel_a_line_each_within_the_terminal(capsys, monkeypatch, columns):
    monkeypatch.setenv("COLUMNS", str(columns))
    assert cli.main(["list"]) == 0
    lines = capsys.readouterr().out.splitlines()
    kernels = load_catalogue()
    assert [line.split()[0] for line in lines[2:]] == list(kernels)
    assert max(len(line) for line in lines) <= columns


def test_a_reader_that_stops_reading_is_no_error():
    # `true` exits before sgemm has started, so sgemm's writes meet a closed pipe (before, exit 2 "Broken pipe").
    piped = subprocess.run(["bash", "-c", f"{sys.executable} -m sgemm list | true; echo ${{PIPESTATUS[0]}}"],
                           capture_output=True, text=True)
    assert piped.stdout.strip() == "0" and "Broken pipe" not in piped.stderr and "Traceback" not in piped.stderr


def test_sgemm_alone_lists_its_commands_and_says_its_version():
    bare = run()
    assert bare.returncode == 2
    assert bare.stderr == ("sgemm: give a command: list, check, bench, report, merge, gate, history, publish, noise, "
                           "machine, bisect, confirm (sgemm --help says what each does)\n")
    version = run("--version")
    assert version.returncode == 0 and version.stdout.startswith("sgemm 0.1.0")


def test_list_wide_shows_every_column_in_full(capsys):
    assert cli.main(["list", "--wide"]) == 0
    out = capsys.readouterr().out
    for kernel in load_catalogue().values():
        assert kernel.technique in out and (kernel.library or kernel.entry) in out


def test_an_unknown_kernel_is_a_clear_error():
    done = run("list", "-k", "fp32/nope")
    assert done.returncode == 2
    assert "unknown kernel 'fp32/nope'" in done.stderr and "sgemm list" in done.stderr
    assert "Traceback" not in done.stderr and len(done.stderr.splitlines()[0]) < 200


@pytest.mark.parametrize("text", ["12x12", "axbxc", "0x4x4"])
def test_a_bad_shape_is_refused_by_the_parser(text):
    done = run("check", "--shape", text)
    assert done.returncode == 2
    assert "MxNxK" in done.stderr or "at least 1" in done.stderr
    assert "Traceback" not in done.stderr


def test_shapes_parse():
    assert parse_shape("1000x1028X516") == (1000, 1028, 516)


@pytest.mark.no_gpu
@pytest.mark.parametrize("command", ["check", "bench"])
def test_without_a_gpu_the_message_is_clear_and_the_exit_non_zero(command):
    done = run(command, "-k", "fp32/naive")
    assert done.returncode == 1
    assert f"sgemm {command}: no usable CUDA GPU" in done.stderr
    assert "Traceback" not in done.stderr and done.stderr.count("\n") == 1


@pytest.mark.no_gpu
def test_a_fresh_report_without_a_gpu_is_a_clear_error(tmp_path):
    done = run("report", "--out", str(tmp_path / "report"))
    assert done.returncode == 1 and "sgemm report: no usable CUDA GPU" in done.stderr
    assert "Traceback" not in done.stderr and not (tmp_path / "report").exists()


@pytest.mark.parametrize("args, message", [
    (["--seed", "042"], "unknown seed 042; seeds: 000, 001, 002, 003, 004"),
    (["--results", "nowhere", "--machine", "gpu-box"], "--results nowhere: no asv results there"),
    (["--results", "results", "--size", "1024"], "--size chooses what to measure"),
])
def test_a_report_of_something_that_is_not_there_is_refused(tmp_path, args, message):
    done = run("report", *args, "--out", str(tmp_path / "report"))
    assert done.returncode == 2 and message in done.stderr
    assert "Traceback" not in done.stderr and not (tmp_path / "report").exists()


@pytest.mark.no_gpu
def test_machine_writes_the_file_and_warns_without_nvml(tmp_path):
    path = tmp_path / "machines.json"
    done = run("machine", "--file", str(path))
    assert done.returncode == 0, done.stderr
    assert done.stderr.startswith("sgemm: warning: ") and "NVML is not available" in done.stderr
    entry = json.loads(path.read_text())
    assert len(entry) == 2 and entry["version"] == 1


def test_a_corrupt_machine_file_is_an_error_and_untouched(tmp_path):
    path = tmp_path / "machines.json"
    path.write_text("[1, 2")
    done = run("machine", "--file", str(path))
    assert done.returncode == 2 and "nothing was written" in done.stderr and "Traceback" not in done.stderr
    assert path.read_text() == "[1, 2"


@pytest.mark.gpu
def test_check_and_bench_on_the_gpu(tmp_path):
    done = run("check", "-k", "fp32/naive", "-k", "fp32/float4", "--shape", "130x132x68")
    assert done.returncode == 0, done.stdout + done.stderr
    assert "2 passed, 0 failed" in done.stdout
    out = tmp_path / "bench.json"
    done = run("bench", "-k", "fp32/cublas", "-k", "fp32/naive", "--size", "512", "--json", str(out))
    assert done.returncode == 0, done.stdout + done.stderr
    assert "% cuBLAS" in done.stdout and "100.0" in done.stdout
    assert set(json.loads(out.read_text())) == {"fp32/cublas/512x512x512", "fp32/naive/512x512x512"}


def test_merge_reports_what_it_did_and_refuses_a_missing_source(tmp_path):
    done = run("merge", str(tmp_path / "missing"), "--into", str(tmp_path / "merged"))
    assert done.returncode == 2 and "missing: not a directory" in done.stderr and "nothing was written" in done.stderr
    assert "Traceback" not in done.stderr and not (tmp_path / "merged").exists()


def test_report_across_gpus_writes_the_page_and_refuses_what_it_cannot_read(two_gpu_results, tmp_path, capsys):
    out = tmp_path / "gpus"
    assert cli.main(["report", "--across-gpus", "--results", str(two_gpu_results.results), "--out", str(out)]) == 0
    assert f"wrote {out / 'index.html'}" in capsys.readouterr().out
    assert "# GEMM kernels across GPUs, 2048x2048x2048" in (out / "README.md").read_text()
    assert cli.main(["report", "--across-gpus", "--results", str(tmp_path / "none"), "--out", str(out)]) == 2
    assert "sgemm report: no asv machine directories in" in capsys.readouterr().err
    assert cli.main(["report", "--across-gpus", "--out", str(out)]) == 2
    assert "--across-gpus reads asv results: pass --results" in capsys.readouterr().err


def test_a_report_from_results_states_the_gpu_and_driver_the_run_recorded(two_gpu_results, tmp_path, capsys):
    # Made on a box with no GPU: the SM count, maximum clock and driver are the run's (asv class Gpu), not this box's.
    out = tmp_path / "h200"
    assert cli.main(["report", "--results", str(two_gpu_results.results), "--machine", "nvidia-h200",
                     "--out", str(out)]) == 0
    header = (out / "README.md").read_text()
    assert "- GPU: NVIDIA H200, 132 SMs, max SM clock 1980 MHz\n" in header
    assert "- Driver (recorded with the run): 580.159.04\n" in header


def test_a_report_is_drawn_again_from_its_points_with_its_source(two_gpu_results, tmp_path, capsys):
    # No results tree and no GPU: the earlier report's points.json alone, its source kept through a second redraw.
    first, again, twice = tmp_path / "h200", tmp_path / "again", tmp_path / "twice"
    assert cli.main(["report", "--results", str(two_gpu_results.results), "--machine", "nvidia-h200",
                     "--out", str(first)]) == 0
    tables = [line for line in (first / "README.md").read_text().splitlines() if line.startswith("| ")]
    assert cli.main(["report", "--points", str(first / "points.json"), "--out", str(again)]) == 0
    redrawn = (again / "README.md").read_text()
    assert [line for line in redrawn.splitlines() if line.startswith("| ")] == tables
    assert "- Source: asv results of machine `nvidia-h200`, commit " in redrawn and "drawn again from" in redrawn
    assert "- Driver (recorded with the run): 580.159.04\n" in redrawn
    assert cli.main(["report", "--points", str(again / "points.json"), "--out", str(twice)]) == 0
    assert (twice / "README.md").read_text().count("drawn again from") == 1
    capsys.readouterr()


@pytest.mark.parametrize("args, message", [
    (["--results", "{results}"], "--points draws an earlier report again from its own figures: no --results"),
    (["--size", "1024"], "with --results or --points the sizes are those measured then"),
])
def test_points_with_what_chooses_other_figures_is_refused_in_one_line(two_gpu_results, tmp_path, capsys, args,
                                                                        message):
    points = tmp_path / "points.json"
    points.write_text('{"gpu": {"name": "NVIDIA H200"}, "points": []}')
    argv = [word.replace("{results}", str(two_gpu_results.results)) for word in args]
    assert cli.main(["report", "--points", str(points), *argv, "--out", str(tmp_path / "out")]) == 2
    error = capsys.readouterr().err
    assert error.count("\n") == 1 and message in error
    assert not (tmp_path / "out").exists()


def test_points_that_are_no_reports_are_refused_in_one_line(two_gpu_results, tmp_path, capsys):
    page = tmp_path / "page"
    assert cli.main(["report", "--across-gpus", "--results", str(two_gpu_results.results), "--out", str(page)]) == 0
    capsys.readouterr()
    for argv, message in [(["--points", str(page / "points.json")], "cannot read the points of a seed ladder report"),
                          (["--points", str(tmp_path / "none.json")], "cannot read the points of a seed ladder report"),
                          (["--across-gpus", "--points", str(tmp_path / "none.json")],
                           "cannot read the runs of a cross-GPU page")]:
        assert cli.main(["report", *argv, "--out", str(tmp_path / "out")]) == 2
        error = capsys.readouterr().err
        assert error.count("\n") == 1 and message in error and "Traceback" not in error
    assert not (tmp_path / "out").exists()


def test_a_cross_gpu_page_is_drawn_again_from_its_points(two_gpu_results, tmp_path, capsys):
    page, again = tmp_path / "page", tmp_path / "again"
    assert cli.main(["report", "--across-gpus", "--results", str(two_gpu_results.results), "--out", str(page)]) == 0
    assert cli.main(["report", "--across-gpus", "--points", str(page / "points.json"), "--out", str(again)]) == 0
    rows = [line for line in (page / "README.md").read_text().splitlines() if line.startswith("| ")]
    redrawn = (again / "README.md").read_text()
    assert [line for line in redrawn.splitlines() if line.startswith("| ")] == rows
    assert "UTC from the points of an earlier page, `" in redrawn and "from the asv results" not in redrawn
    capsys.readouterr()
    assert cli.main(["report", "--across-gpus", "--points", str(page / "points.json"), "--size", "12345",
                     "--out", str(tmp_path / "other")]) == 2
    assert "--size 12345: no GPU in" in capsys.readouterr().err


def test_bench_prints_each_case_against_its_baseline_and_the_gpus_peak(monkeypatch, capsys, tmp_path):
    """The GPU's part stood in for (CUDA's facts, NVML's, the measurements): what the table makes of them."""
    from sgemm.gpu import Gpu
    from sgemm.measuring import record
    from sgemm.measuring.record import CaseResult

    h100 = Gpu("NVIDIA H100 80GB HBM3", 90, 132, 1980.0, "580.159.04", 80)
    seconds = {"fp32/cublas": 2.0e-3, "fp32/naive": 20.0e-3}

    def run_cases(cases, device, progress):
        return {case.id: (RuntimeError("wrong result\nmore") if case.kernel.name == "fp32/float4" else
                          CaseResult([seconds[case.kernel.name]], [1975.0, 1985.0], case.kernel.name, case.m, case.n,
                                     case.k, h100.name, 0.0))
                for case in cases}

    from sgemm.commands import kernels

    monkeypatch.setattr(kernels, "device_info", lambda device=0: Gpu(h100.name, 90, 132))
    monkeypatch.setattr(kernels, "with_nvml", lambda info, device=0: h100)
    monkeypatch.setattr(record, "run_cases", run_cases)
    status = cli.main(["bench", "-k", "fp32/cublas", "-k", "fp32/naive", "-k", "fp32/float4", "--size", "1024",
                       "--json", str(tmp_path / "out.json")])
    out = capsys.readouterr().out.splitlines()
    assert status == 1  # a case failed
    assert out[0] == "NVIDIA H100 80GB HBM3, 132 SMs, max SM clock 1980 MHz"
    rows = {line.split()[0]: line.split() for line in out[3:]}
    peak = 132 * 256 * 1980e6 / 1e12
    naive_rate = 2 * 1024**3 / 20.0e-3 / 1e12
    assert rows["fp32/naive"][1:7] == ["1024x1024x1024", "20.000", f"{naive_rate:.2f}", "10.0",
                                      f"{100 * naive_rate / peak:.1f}", "1980"]
    assert rows["fp32/cublas"][4] == "100.0" and rows["fp32/float4"][7:9] == ["FAILED", "wrong"]
    recorded = json.loads((tmp_path / "out.json").read_text())
    assert recorded["fp32/float4/1024x1024x1024"] == {"error": "wrong result\nmore"}


def test_every_subpackage_is_in_what_pip_installs():
    """A non-editable install (the GPU jobs install sgemm so, from the trusted checkout) carries only the packages
    pyproject.toml names: a new folder of modules left out would be missing there alone."""
    import tomllib

    root = Path(__file__).resolve().parents[1]
    setuptools = tomllib.loads((root / "pyproject.toml").read_text())["tool"]["setuptools"]
    listed = set(setuptools["packages"]) - set(setuptools["package-dir"])  # kernels/ ships as sgemm.kernels
    found = {".".join(init.parent.relative_to(root).parts) for init in (root / "sgemm").rglob("__init__.py")}
    assert found == listed
