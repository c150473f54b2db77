"""The argument parser of every tool here: argparse, but a bad argument is one line and exit status 2, as the `sgemm`
command says it (the usage argparse prints first is in --help)."""

from __future__ import annotations

import argparse


class ToolParser(argparse.ArgumentParser):
    def error(self, message: str):
        self.exit(2, f"{self.prog}: {message}\n")
