"""The `sgemm` command: list the catalogue, check kernels, time them, and describe this box to asv."""

from __future__ import annotations

import argparse
import os
import sys
import warnings

from .catalogue import CatalogueError, UnknownKernelError
from .commands import (EXIT_BAD_INPUT, EXIT_FAILED, EXIT_INTERRUPTED, EXIT_OK, bisect, gate, history, kernels, machine,
                       site)
from .commands.args import device as _device
from .measuring.record import NoGpuError

# Options whose value may start with '-': argparse reads "-3x4x5" or "-1e-3" as an option of its own, and says only
# "expected one argument", unless the value is glued on with '='. main() glues them on.
SIGNED_VALUE_OPTIONS = ("--shape", "--size", "--alpha", "--beta", "--device", "--rounds", "--max-rounds",
                        "--threshold", "--budget-s", "--max-builds", "--confidence")
# Each command's arguments, in the order `sgemm --help` lists them.
COMMANDS = (kernels.add_list, kernels.add_check, kernels.add_bench, site.add_report, site.add_merge,
            gate.add_gate, history.add_history, site.add_publish, gate.add_noise, machine.add_machine,
            bisect.add_bisect, bisect.add_confirm)


def _glue_signed_values(argv: list[str]) -> list[str]:
    glued, tokens = [], iter(argv)
    for token in tokens:
        value = next(tokens, None) if token in SIGNED_VALUE_OPTIONS else None
        if value is None:
            glued.append(token)
        elif value[:1] == "-" and value[1:2] in set("0123456789."):
            glued.append(f"{token}={value}")
        else:
            glued += [token, value]
    return glued


class _Parser(argparse.ArgumentParser):
    """argparse, but a bad argument is one line (the usage it prints first is in --help)."""

    def error(self, message: str):
        self.exit(EXIT_BAD_INPUT, f"{self.prog}: {message}\n")


def _version() -> str:
    from importlib.metadata import PackageNotFoundError, version

    try:
        return version("sgemm")
    except PackageNotFoundError:
        return "(not installed: run from a checkout)"


def build_parser() -> argparse.ArgumentParser:
    parser = _Parser(prog="sgemm", description=__doc__, epilog="Every command exits 130 when interrupted (Ctrl-C), "
                     "with one line; what was recorded before stays.")
    parser.add_argument("--version", action="version", version=f"sgemm {_version()}")
    sub = parser.add_subparsers(dest="command", required=True)

    def add(name: str, handler, help_text: str, kernels: bool = True) -> argparse.ArgumentParser:
        command = sub.add_parser(name, help=help_text, description=help_text)
        command.set_defaults(handler=handler)
        command.add_argument("--device", type=_device, default=0, help="CUDA device index (default 0)")
        if kernels:
            command.add_argument("-k", "--kernel", action="append", default=[],
                                 help="kernel name or precision prefix, e.g. fp32/naive or fp16 (repeatable)")
        return command

    for add_command in COMMANDS:
        add_command(add)
    parser.commands = list(sub.choices)
    return parser


def _show_warning(message, category, filename, lineno, file=None, line=None) -> None:
    print(f"sgemm: warning: {message}", file=sys.stderr)


def main(argv: list[str] | None = None) -> int:
    given = list(sys.argv[1:] if argv is None else argv)
    parser = build_parser()
    if not given:  # what there is to do, rather than a complaint that something is missing
        print(f"sgemm: give a command: {', '.join(parser.commands)} (sgemm --help says what each does)",
              file=sys.stderr)
        return EXIT_BAD_INPUT
    try:
        args = parser.parse_args(_glue_signed_values(given))
    except SystemExit as exc:  # a bad argument (2), or --help (0): the parser has said why
        return exc.code if isinstance(exc.code, int) else EXIT_OK if exc.code is None else EXIT_BAD_INPUT
    args.argv = given
    warnings.showwarning = _show_warning
    from .results.machine import MachineFileError

    try:
        return args.handler(args)
    except (UnknownKernelError, CatalogueError) as exc:
        print(f"sgemm: {exc.args[0] if exc.args else exc}", file=sys.stderr)
        return EXIT_BAD_INPUT
    except NoGpuError as exc:
        print(f"sgemm {args.command}: {exc}", file=sys.stderr)
        return EXIT_FAILED
    except MachineFileError as exc:
        print(f"sgemm {args.command}: {exc}", file=sys.stderr)
        return EXIT_BAD_INPUT
    except KeyboardInterrupt:  # Ctrl-C: one line, not a traceback (the history has ended the asv it started)
        lead = "\n" if sys.stderr.isatty() else ""  # off the line where the terminal echoed ^C
        print(f"{lead}sgemm {args.command}: interrupted", file=sys.stderr)
        return EXIT_INTERRUPTED
    except BrokenPipeError:  # the reader went away (`sgemm list | head`): what it read was all it wanted
        os.dup2(os.open(os.devnull, os.O_WRONLY), sys.stdout.fileno())  # nothing more to say at exit either
        return EXIT_OK
    except OSError as exc:  # a path given that cannot be read or written
        print(f"sgemm {args.command}: {exc}", file=sys.stderr)
        return EXIT_BAD_INPUT


if __name__ == "__main__":
    sys.exit(main())
