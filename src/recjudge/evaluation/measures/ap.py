"""AP and AP@k as trec_eval's ``map`` and ``map_cut``: precision at each relevant document, over R."""

from __future__ import annotations

import numpy as np

from .groups import safe_ratio, within_group_position


def ap(m, rows, ctx) -> np.ndarray:
    """The sum of the precision at each retrieved relevant document (in the top k), over the query's relevant documents."""
    rel = int(m["rel"])
    cutoff = m.params.get("cutoff")
    hit = rows.label >= rel
    if cutoff is not None:
        hit &= rows.pos < cutoff
    g = rows.group[hit]
    seen = within_group_position(g) + 1.0  # relevant documents up to and including this one
    total = np.bincount(g, weights=seen / (rows.pos[hit] + 1.0), minlength=rows.ng)
    return safe_ratio(total, ctx.relevant(rel)[rows.gq].astype(np.float64))
