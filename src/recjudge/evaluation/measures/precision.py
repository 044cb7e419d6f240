"""P@k, R@k and Success@k: relevant documents in the top k, over k, over R, or whether there is one."""

from __future__ import annotations

import numpy as np

from .groups import safe_ratio


def precision_family(m, rows, ctx) -> np.ndarray:
    """``P@k`` divides the relevant documents of the top k by k, ``R@k`` by the query's relevant
    documents; ``Success@k`` is 1.0 when there is one."""
    rel = int(m["rel"])
    cutoff = m.params.get("cutoff")
    hit = rows.label >= rel
    if cutoff is not None:
        hit &= rows.pos < cutoff
    count = np.bincount(rows.group[hit], minlength=rows.ng).astype(np.float64)
    if m.NAME == "P":
        return count / cutoff
    if m.NAME == "Success":
        return (count > 0).astype(np.float64)
    return safe_ratio(count, ctx.relevant(rel)[rows.gq].astype(np.float64))  # R@k
