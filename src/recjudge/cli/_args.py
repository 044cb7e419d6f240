"""Argument types shared by every command: numbers are range-checked where argparse reads them."""

from __future__ import annotations

import argparse

MAX_SEED = 2**63 - 1  # numpy's Generator and our 64-bit hash both take it
MAX_COUNT = 2**31 - 1  # cutoffs, depths and resample counts beyond this only fail later, deep inside


def int_range(lo: int, hi: int = MAX_COUNT, what: str = "a whole number"):
    """An argparse ``type`` accepting integers in [lo, hi]."""

    def parse(text: str) -> int:
        try:
            value = int(text)
        except ValueError:
            raise argparse.ArgumentTypeError(f"{what} is expected, not {text!r}") from None
        if not lo <= value <= hi:
            raise argparse.ArgumentTypeError(f"must be from {lo} to {hi}, not {value}")
        return value

    parse.__name__ = what  # argparse names the type in its messages
    return parse


def float_range(lo: float, hi: float, lo_open: bool = False, hi_open: bool = False, what: str = "a number"):
    """An argparse ``type`` accepting finite floats in the given interval."""

    def parse(text: str) -> float:
        try:
            value = float(text)
        except ValueError:
            raise argparse.ArgumentTypeError(f"{what} is expected, not {text!r}") from None
        ok = (value > lo if lo_open else value >= lo) and (value < hi if hi_open else value <= hi)
        if not ok:
            left, right = "(" if lo_open else "[", ")" if hi_open else "]"
            raise argparse.ArgumentTypeError(f"must lie in {left}{lo:g}, {hi:g}{right}, not {text}")
        return value

    parse.__name__ = what
    return parse


seed = int_range(0, MAX_SEED, "a seed")
count = int_range(0)  # 0 allowed: e.g. --bootstrap 0 switches resampling off
positive = int_range(1)
