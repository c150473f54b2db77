"""This box's entry in ~/.asv-machine.json, named and described from NVML.

asv turns every extra key of a machine into a facet of the published site and part of each graph's identity, so only
stable facts go in: GPU model, memory, compute capability. Driver and clocks change under the same GPU and are
recorded with each case instead.
"""

from __future__ import annotations

import json
import os
import platform
import re
import socket
import warnings
from pathlib import Path

from ..atomic import write_atomically
from ..gpu import Gpu
from ..measuring.telemetry import TelemetryUnavailable, driver_present, gpu_identity
from ..writable import not_a_folder

ASV_MACHINE_FILE = Path("~/.asv-machine.json").expanduser()
ASV_MACHINE_VERSION = 1
MACHINE_NAME = re.compile(r"[A-Za-z0-9][A-Za-z0-9._-]{0,63}")  # a directory name, and part of asv's file names


class MachineFileError(RuntimeError):
    """The machine file cannot be read or written where it was asked for; nothing was written."""


def machine_name(identity: Gpu | None) -> str:
    """'nvidia-h100-80gb-hbm3' from the GPU model; the host name when the GPU is unknown."""
    if identity is None:
        return socket.gethostname()
    return re.sub(r"[^a-z0-9]+", "-", identity.name.lower()).strip("-")


def _ram_bytes() -> str:
    try:
        return str(os.sysconf("SC_PAGE_SIZE") * os.sysconf("SC_PHYS_PAGES"))
    except (ValueError, OSError, AttributeError):
        return ""


def _cpu_model() -> str:
    try:
        for line in Path("/proc/cpuinfo").read_text().splitlines():
            if line.startswith("model name"):
                return line.split(":", 1)[1].strip()
    except OSError:
        pass
    return platform.processor()


def machine_entry(identity: Gpu | None, name: str) -> dict:
    entry = {
        "machine": name,
        "arch": platform.machine(),
        "cpu": _cpu_model(),
        "num_cpu": str(os.cpu_count() or ""),
        "os": f"{platform.system()} {platform.release()}",
        "ram": _ram_bytes(),
    }
    if identity is None:
        entry["gpu"] = "unknown"
    else:
        entry.update(gpu=identity.name, gpu_memory=f"{identity.memory_gib} GiB",
                     compute_capability=identity.compute_capability_text)
    return entry


def _why_no_gpu(exc: TelemetryUnavailable) -> str:
    return str(exc) if driver_present() else f"no NVIDIA driver on this machine ({exc})"


def detect_identity(cuda_device: int = 0) -> Gpu | None:
    try:
        return gpu_identity(cuda_device)
    except TelemetryUnavailable as exc:
        warnings.warn(f"{_why_no_gpu(exc)}; the machine is named after the host and its GPU recorded as unknown")
        return None


def required_identity(cuda_device: int, then: str) -> Gpu:
    """This box's GPU as NVML describes it, for work that cannot go on without one: NoGpuError saying why there is
    none and, in `then`, what that means for the work (one line, with no warning before it)."""
    from ..measuring.record import NoGpuError

    try:
        return gpu_identity(cuda_device)
    except TelemetryUnavailable as exc:
        raise NoGpuError(f"no GPU found through NVML, {_why_no_gpu(exc)}: {then}") from None


def check_machine_name(name: str) -> str:
    """`name` if asv can file results under it: it becomes a directory of the results tree, so no path tricks."""
    if not MACHINE_NAME.fullmatch(name):
        shown = name if len(name) <= 40 else f"{name[:40]}... ({len(name)} characters)"
        raise ValueError(f"a machine name is 1 to 64 letters, digits, '.', '_' and '-', starting with a letter or "
                         f"digit (got {shown!r})")
    return name


def machines_in(path: Path) -> dict:
    """The machines the file holds (none when it is not there yet); MachineFileError when it cannot be read or
    written, found before the GPU is asked for the entry."""
    if path.is_dir():
        raise MachineFileError(f"{path} is a directory: name the machine file itself; nothing was written")
    if not path.parent.is_dir():
        raise MachineFileError(f"{path}: the folder {path.parent} {not_a_folder(path.parent)}; nothing was written")
    if not path.exists():
        return {}
    try:
        machines = json.loads(path.read_text())
    except (OSError, ValueError) as exc:
        raise MachineFileError(f"{path} is not valid JSON ({exc}); fix or move it, nothing was written") from exc
    if not isinstance(machines, dict):
        raise MachineFileError(f"{path} does not hold a JSON object; fix or move it, nothing was written")
    # Another format's file (a newer asv's) or another program's JSON would be rewritten as version 1 and lost.
    if machines and (machines.get("version") != ASV_MACHINE_VERSION
                     or not all(isinstance(entry, dict) for key, entry in machines.items() if key != "version")):
        raise MachineFileError(f"{path} is not asv's machine file of version {ASV_MACHINE_VERSION} (its version: "
                               f"{machines.get('version')!r}, or an entry that is no object); nothing was written")
    return machines


def write_machine_file(entry: dict, path: Path = ASV_MACHINE_FILE) -> None:
    """Add or replace this machine's entry, keeping every other machine already in the file."""
    machines = machines_in(path)
    machines[entry["machine"]] = entry
    machines["version"] = ASV_MACHINE_VERSION
    write_atomically(path, (json.dumps(machines, indent=4, sort_keys=True) + "\n").encode())


def with_nvml(info: Gpu, device: int) -> Gpu:
    """CUDA's facts of the GPU, with NVML's (driver, maximum clock, card) where it answers."""
    from dataclasses import replace

    try:
        return replace(gpu_identity(device), name=info.name, sm_count=info.sm_count)
    except TelemetryUnavailable:
        return info


def live_gpu(device: int) -> Gpu | None:
    """This box's GPU, CUDA's facts with NVML's, for a report; None without one."""
    from ..measuring import record

    try:
        return with_nvml(record.device_info(device), device)
    except record.NoGpuError:
        return None
