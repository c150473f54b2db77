import json
import warnings

import pytest

from sgemm.gpu import Gpu
from sgemm.measuring import record
from sgemm.measuring.telemetry import TelemetryUnavailable
from sgemm.results import machine

H100 = Gpu("NVIDIA H100 80GB HBM3", 90, driver="580.159.04", max_sm_clock_mhz=1980.0, memory_gib=80,
           card="0a1b2c3d4e5f")


def test_name_and_facets_come_from_the_gpu_and_are_stable():
    entry = machine.machine_entry(H100, machine.machine_name(H100))
    assert entry["machine"] == "nvidia-h100-80gb-hbm3"
    assert entry["gpu"] == "NVIDIA H100 80GB HBM3"
    assert entry["gpu_memory"] == "80 GiB" and entry["compute_capability"] == "9.0"
    assert {"arch", "cpu", "num_cpu", "os", "ram"} <= entry.keys()
    assert "580.159.04" not in json.dumps(entry) and "GPU-1" not in json.dumps(entry), "volatile facts stay out"


def test_writing_keeps_other_machines(tmp_path):
    path = tmp_path / "asv-machine.json"
    path.write_text(json.dumps({"other": {"machine": "other"}, "version": 1}))
    machine.write_machine_file(machine.machine_entry(H100, "h100"), path)
    machine.write_machine_file(machine.machine_entry(H100, "h100"), path)
    saved = json.loads(path.read_text())
    assert set(saved) == {"other", "h100", "version"}


def test_a_corrupt_machine_file_is_left_alone(tmp_path):
    path = tmp_path / "asv-machine.json"
    path.write_text("{not json")
    with pytest.raises(machine.MachineFileError, match="nothing was written"):
        machine.write_machine_file(machine.machine_entry(H100, "h100"), path)
    assert path.read_text() == "{not json"


@pytest.mark.parametrize("content", [{"version": 2, "box": {"machine": "box"}}, {"box": {"machine": "box"}},
                                     {"version": 1, "theme": "dark"}])
def test_a_machine_file_of_another_format_is_left_alone(tmp_path, content):
    path = tmp_path / "asv-machine.json"
    path.write_text(json.dumps(content))
    with pytest.raises(machine.MachineFileError, match="is not asv's machine file of version 1 .* nothing was written"):
        machine.write_machine_file(machine.machine_entry(H100, "h100"), path)
    assert json.loads(path.read_text()) == content


def test_without_nvml_the_identity_falls_back_with_a_warning(monkeypatch):
    def no_nvml(device):
        raise TelemetryUnavailable("NVML is not available: no library")

    monkeypatch.setattr(machine, "gpu_identity", no_nvml)
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        identity = machine.detect_identity()
    assert identity is None
    assert "no library" in str(caught[0].message)
    entry = machine.machine_entry(identity, machine.machine_name(identity))
    assert entry["gpu"] == "unknown" and entry["machine"]


def test_without_nvml_a_gpu_keeps_cudas_facts_and_without_cuda_there_is_none(monkeypatch):
    def no_nvml(device):
        raise TelemetryUnavailable("NVML is not available: no library")

    def no_cuda(device=0):
        raise record.NoGpuError("no usable CUDA GPU")

    cuda = Gpu("NVIDIA H100 80GB HBM3", 90, 132)
    monkeypatch.setattr(machine, "gpu_identity", no_nvml)
    assert machine.with_nvml(cuda, 0) is cuda
    monkeypatch.setattr(record, "device_info", no_cuda)
    assert machine.live_gpu(0) is None


def test_a_machine_file_in_a_folder_that_is_not_there_is_refused_and_nothing_made(tmp_path):
    path = tmp_path / "missing" / "asv-machine.json"
    with pytest.raises(machine.MachineFileError, match="does not exist; nothing was written"):
        machine.write_machine_file(machine.machine_entry(H100, "h100"), path)
    assert list(tmp_path.iterdir()) == []


def test_a_directory_is_not_a_machine_file(tmp_path):
    with pytest.raises(machine.MachineFileError, match="is a directory"):
        machine.write_machine_file(machine.machine_entry(H100, "h100"), tmp_path)
    assert list(tmp_path.iterdir()) == []


def test_another_writers_temporary_file_is_left_alone(tmp_path):
    path = tmp_path / "asv-machine.json"
    theirs = tmp_path / "asv-machine.json.tmp"
    theirs.write_text("another writer's")
    machine.write_machine_file(machine.machine_entry(H100, "h100"), path)
    assert theirs.read_text() == "another writer's"
    assert sorted(p.name for p in tmp_path.iterdir()) == ["asv-machine.json", "asv-machine.json.tmp"]


@pytest.mark.parametrize("name", ["", "../x", "a/b", ".hidden", "-dash", "with space", "x" * 65, "n" * 300])
def test_a_machine_name_that_is_no_directory_name_is_refused(name):
    """300 characters passed once and broke `history` later: asv builds file names from it."""
    with pytest.raises(ValueError, match="a machine name is 1 to 64") as refused:
        machine.check_machine_name(name)
    assert len(str(refused.value)) < 200  # the message shows a long name cut short


def test_a_name_of_64_characters_is_a_name():
    assert machine.check_machine_name("h" * 64) == "h" * 64


def test_the_names_sgemm_gives_machines_pass_its_own_check():
    assert machine.check_machine_name(machine.machine_name(H100)) == "nvidia-h100-80gb-hbm3"


def test_without_a_driver_the_warning_says_so(monkeypatch):
    import ctypes

    def no_library(name, *args, **kwargs):
        raise OSError(f"{name}: cannot open shared object file")

    def no_nvml(device):
        raise TelemetryUnavailable("NVML is not available: NVML Shared Library Not Found")

    monkeypatch.setattr(ctypes, "CDLL", no_library)
    monkeypatch.setattr(machine, "gpu_identity", no_nvml)
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        assert machine.detect_identity() is None
    assert str(caught[0].message).startswith("no NVIDIA driver on this machine (NVML is not available")
