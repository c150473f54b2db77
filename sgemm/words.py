"""Counts said in words: "1 kernel", "10 kernels"."""

from __future__ import annotations


def counted(number: int, noun: str, plural: str | None = None) -> str:
    """`number` and `noun`, in the plural (`plural`, by default the noun and an 's') unless the number is one."""
    return f"{number} {noun if number == 1 else plural or noun + 's'}"
