"""Judged@k: the share of the top k that is judged (any label counts, 0 and negative ones included)."""

from __future__ import annotations

import numpy as np

from .groups import safe_ratio


def judged(m, rows, ctx) -> np.ndarray:
    """Judged documents in the top k over min(k, ranking length); every row held is judged."""
    cutoff = m.params.get("cutoff")
    if cutoff is None or int(rows.pos.max(initial=-1)) < cutoff:
        count = np.bincount(rows.group, minlength=rows.ng)
    else:
        count = np.bincount(rows.group[rows.pos < cutoff], minlength=rows.ng)
    den = rows.length if cutoff is None else np.minimum(rows.length, cutoff)
    return safe_ratio(count.astype(np.float64), den.astype(np.float64))
