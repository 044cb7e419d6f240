"""Rank-biased overlap in closed form, shared by Compat and CompatHM: weight tables and ideal ranks.

A document in both the ranking and the ideal list adds ``sum_{i >= max(rank, ideal rank)} p^i / (i + 1)``
to the RBO numerator, so no per-depth set intersection is needed.
"""

from __future__ import annotations

import numpy as np

from .groups import within_group_position


def rbo_tables(p: float, depth: int) -> tuple[np.ndarray, np.ndarray]:
    """``C[d] = sum_{i<d} p^i/(i+1)`` and ``W[d] = sum_{i<d} p^i``, weights multiplied as ir-measures does."""
    w = np.cumprod(np.r_[1.0, np.full(max(depth - 1, 0), p)])[:depth]
    return np.r_[0.0, np.cumsum(w / np.arange(1, depth + 1))], np.r_[0.0, np.cumsum(w)]


def n_ideal(ctx) -> np.ndarray:
    """Per query, the length of the ideal list (documents with a label > 0)."""
    jd = ctx.jd
    return ctx.cached("n_ideal", lambda: jd.count(jd.label > 0))


def ideal_ranks(rows, jd) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """The rows with a label > 0, their groups, and their ideal rank among the retrieved: higher
    labels first (the query's documents above them), then same-label documents in run order."""
    hit = np.flatnonzero(rows.label > 0)
    g, lab = rows.group[hit], rows.label[hit]
    ahead = np.empty(len(g), dtype=np.int64)
    if lab.dtype.itemsize <= 2:
        # NumPy's stable sort of 8- and 16-bit integers is a radix sort: one linear pass, rows kept
        # in group, then rank order inside each label
        by_label = np.argsort(lab, kind="stable")
        ahead[by_label] = within_group_position(lab[by_label], g[by_label])
        return hit, g, jd.above[rows.j[hit]] + ahead
    top = int(lab.max()) if len(lab) else 0
    # the labels present, counted rather than sorted when they are small (they are > 0 here)
    values = np.flatnonzero(np.bincount(lab)) if top < 4096 else np.unique(lab)
    if len(values) <= 32:  # labels are a few small integers: one pass per label, no sort
        for v in values:
            same = np.flatnonzero(lab == v)  # rows stay in group, then rank order
            ahead[same] = within_group_position(g[same])
    else:
        by_label = np.lexsort((-lab, g))  # stable: rank order inside each (group, label)
        ahead[by_label] = within_group_position(g[by_label], lab[by_label])
    return hit, g, jd.above[rows.j[hit]] + ahead
