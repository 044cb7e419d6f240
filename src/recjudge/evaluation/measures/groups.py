"""Per-group arithmetic the measures share: safe ratios, group starts and positions inside groups."""

from __future__ import annotations

import numpy as np


def safe_ratio(num: np.ndarray, den: np.ndarray) -> np.ndarray:
    """``num / den``, 0.0 where ``den`` is 0 (a query without relevant documents scores 0)."""
    out = np.zeros(len(num), dtype=np.float64)
    np.divide(num, den, out=out, where=den > 0)
    return out


def group_starts(codes: np.ndarray, *more: np.ndarray) -> np.ndarray:
    """Start index of each run of equal values in ``codes`` (and equal ``more``, when given)."""
    if len(codes) == 0:
        return np.zeros(0, dtype=np.int64)
    change = codes[1:] != codes[:-1]
    for other in more:
        change |= other[1:] != other[:-1]
    return np.flatnonzero(np.r_[True, change])


def within_group_position(codes: np.ndarray, *more: np.ndarray) -> np.ndarray:
    """0-based position of each element inside its run of equal ``codes`` (and ``more``)."""
    starts = group_starts(codes, *more)
    lengths = np.diff(np.r_[starts, len(codes)])
    return np.arange(len(codes), dtype=np.int64) - np.repeat(starts, lengths)


def below(pos: np.ndarray, cutoff: int) -> bool:
    """Whether every position is below ``cutoff`` (a run cut at depth <= k): no row needs masking."""
    return len(pos) == 0 or int(pos.max()) < cutoff


def narrowest(lo: int, hi: int, margin: int = 1) -> type:
    """The narrowest of int8/int16/int32 (uint16 for non-negative values) holding ``margin`` × [lo, hi]."""
    if lo >= 0 and hi * margin <= np.iinfo(np.uint16).max and margin == 1:
        return np.uint8 if hi <= np.iinfo(np.uint8).max else np.uint16
    for t in (np.int8, np.int16, np.int32):
        if np.iinfo(t).min < lo * margin and hi * margin < np.iinfo(t).max:
            return t
    return np.int64
