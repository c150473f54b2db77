"""`sgemm machine`: this box's entry in asv's machine file, from NVML (sgemm.results.machine)."""

from __future__ import annotations

import json
from pathlib import Path

from . import args as types, writable_file_problem


def add_machine(add) -> None:
    machine = add("machine", cmd_machine, "write this box's entry in the asv machine file from NVML", kernels=False)
    machine.add_argument("--name", type=types.machine_name, help="machine name (default: from the GPU model)")
    machine.add_argument("--file", type=types.path, default="~/.asv-machine.json", help="asv's machine file (default: "
                         "~/.asv-machine.json; its folder must exist)")


def cmd_machine(args) -> int:
    from ..results.machine import (MachineFileError, detect_identity, machine_entry, machine_name, machines_in,
                                   write_machine_file)

    path = Path(args.file).expanduser()
    if problem := writable_file_problem("--file", args.file):
        raise MachineFileError(f"{problem}; nothing was written")
    machines_in(path)  # a file that is not asv's machine file is said before the GPU is asked
    identity = detect_identity(args.device)
    entry = machine_entry(identity, args.name or machine_name(identity))
    write_machine_file(entry, path)
    print(f"wrote machine {entry['machine']!r} to {args.file}")
    print(json.dumps(entry, indent=2))
    return 0
