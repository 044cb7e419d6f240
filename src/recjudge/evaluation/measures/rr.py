"""RR and RR@k: 1 / rank of the first relevant document (0.0 when none is retrieved, or none in the top k)."""

from __future__ import annotations

import numpy as np


def rr(m, rows, ctx) -> np.ndarray:
    """trec_eval's ``recip_rank``; with a cutoff, MS MARCO's MRR@k (what ir-measures' msmarco provider computes)."""
    hit = rows.label >= int(m["rel"])
    cutoff = m.params.get("cutoff")
    if cutoff is not None:
        hit &= rows.pos < cutoff
    hit = np.flatnonzero(hit)
    out = np.zeros(rows.ng)
    g = rows.group[hit]
    first = np.r_[True, g[1:] != g[:-1]] if len(g) else np.zeros(0, bool)
    out[g[first]] = 1.0 / (rows.pos[hit][first] + 1.0)
    return out
