"""The types of the `sgemm` commands' arguments: each turns a word of the command line into a value, or says in an
argparse.ArgumentTypeError why it cannot."""

from __future__ import annotations

import argparse
import math
import os

from ..rounds.evidence import MIN_ROUNDS


def parse_shape(text: str) -> tuple[int, int, int]:
    try:
        m, n, k = (int(part) for part in text.lower().split("x"))
    except ValueError:
        raise argparse.ArgumentTypeError(f"a shape is MxNxK, e.g. 1000x1028x516 (got {text!r})") from None
    if min(m, n, k) < 1:
        raise argparse.ArgumentTypeError(f"M, N and K must be at least 1 (got {text!r})")
    return m, n, k


def path(text: str) -> str:
    """A file or folder as given, with a leading ~ expanded as the shell would have (a quoted '~', or one after '=',
    reaches here as it is); an empty word, which would stand for the current directory, is refused, and so is one
    holding bytes that are not UTF-8 (Python hands them on as lone surrogates), which asv, keeping its paths in
    UTF-8 files, fails on late and elsewhere."""
    if not text.strip():
        raise argparse.ArgumentTypeError(f"expected a path, got {text!r} (an unset variable?)")
    try:
        text.encode("utf-8")
    except UnicodeEncodeError:
        shown = text.encode("utf-8", "surrogateescape").decode("utf-8", "backslashreplace")
        raise argparse.ArgumentTypeError(f"'{shown}' is not valid UTF-8: asv keeps every path in UTF-8 files and "
                                         "cannot take this one; rename it") from None
    return os.path.expanduser(text)


def integer_at_least(lowest: int, what: str):
    def parse(text: str) -> int:
        try:
            value = int(text)
        except ValueError:
            raise argparse.ArgumentTypeError(f"{what} is a whole number, got {text!r}") from None
        if value < lowest:
            raise argparse.ArgumentTypeError(f"{what} must be at least {lowest}, got {value}")
        return value

    return parse


size = integer_at_least(1, "a size")
extra_rounds = integer_at_least(0, "--extra-rounds")
commit_count = integer_at_least(1, "--first")
device = integer_at_least(0, "a device index")


def gpu_count(text: str) -> str:
    if text != "all" and not (text.isdigit() and int(text) >= 1):
        raise argparse.ArgumentTypeError(f"--gpus takes a number of GPUs (at least 1) or 'all', got {text!r}")
    return text


def number(text: str) -> float:
    """The number a word says, NaN where it says none: each type below then refuses NaN by its own range check."""
    try:
        return float(text)
    except ValueError:
        return math.nan


def finite(text: str) -> float:
    value = number(text)
    if not math.isfinite(value):
        raise argparse.ArgumentTypeError(f"expected a finite number, got {text!r}")
    return value


def finite_above(lowest: float, what: str):
    def parse(text: str) -> float:
        value = finite(text)
        if value <= lowest:
            raise argparse.ArgumentTypeError(f"{what} must be above {lowest:g}, got {text!r}")
        return value

    return parse


def finite_at_least(lowest: float, what: str):
    def parse(text: str) -> float:
        value = number(text)
        if not math.isfinite(value) or value < lowest:
            raise argparse.ArgumentTypeError(f"{what} is a finite number of at least {lowest:g}, got {text!r}")
        return value

    return parse


def commit_prefix(text: str) -> str:
    """A commit's hash or its first hex digits, in lower case; an empty word would match every commit."""
    if not text or any(c not in "0123456789abcdef" for c in text.lower()):
        raise argparse.ArgumentTypeError(f"expected a commit hash or its first hex digits, got {text!r}")
    return text.lower()


def machine_name(text: str) -> str:
    from ..results.machine import check_machine_name

    try:
        return check_machine_name(text)
    except ValueError as exc:
        raise argparse.ArgumentTypeError(str(exc)) from None


def threshold_pattern(text: str) -> tuple[str, float]:
    if text.count("=") > 1:
        raise argparse.ArgumentTypeError(f"expected PATTERN=PERCENT with one '=', e.g. 'fp16/*=4', got {text!r}")
    pattern, sep, value = text.rpartition("=")
    percent = number(value)
    if not sep or not pattern or not 0 <= percent < 100:
        raise argparse.ArgumentTypeError(f"expected PATTERN=PERCENT, e.g. 'fp16/*=4', got {text!r}")
    return pattern, percent / 100


def rounds(text: str) -> int:
    try:
        value = int(text)
    except ValueError:
        value = 0
    if value < MIN_ROUNDS:
        raise argparse.ArgumentTypeError(f"rounds per commit must be a whole number of at least {MIN_ROUNDS} "
                                         f"(the between-round spread of fewer cannot be tested), got {text!r}")
    return value


def percent(text: str) -> float:
    value = number(text)
    if not 0 <= value < 100:  # NaN too
        raise argparse.ArgumentTypeError(f"expected a percentage of at least 0 and below 100, got {text!r}")
    return value / 100
