"""Bpref as trec_eval computes it: each retrieved relevant document less the judged non-relevant ones above it."""

from __future__ import annotations

import numpy as np

from .groups import safe_ratio


def bpref(m, rows, ctx) -> np.ndarray:
    """R = labels >= rel, N = labels in [0, rel); each retrieved relevant document adds
    ``1 - min(n, R) / min(N, R)`` with n the judged non-relevant documents above it; divided by R."""
    rel = int(m["rel"])
    jd = ctx.jd
    big_r = ctx.relevant(rel)
    big_n = ctx.cached(("N", rel), lambda: jd.count((jd.label >= 0) & (jd.label < rel)))
    label = rows.label
    nonrel = (label >= 0) & (label < rel)
    hit = np.flatnonzero(label >= rel)
    g = rows.group[hit]
    # non-relevant rows ranked above each relevant one inside its group: a running count over all
    # rows less the count before the group's first row (a relevant row is not non-relevant itself)
    cum = np.cumsum(nonrel, dtype=np.int64)
    if len(cum):
        at = np.minimum(rows.gstart, len(cum) - 1)
        before_group = cum[at] - nonrel[at]
        nr = cum[hit] - before_group[g]
    else:
        nr = cum
    q = rows.gq[g]
    rr, nn = big_r[q], big_n[q]
    # 1 - min(n, R) / min(N, R), and 1 when n = 0: then the quotient is 0 / (min(N, R) or 1), so one
    # expression gives both, bit for bit (n > 0 implies N >= n > 0 and R >= 1 here)
    den = np.minimum(nn, rr)
    np.maximum(den, 1, out=den)
    frac = np.minimum(nr, rr) / den
    np.subtract(1.0, frac, out=frac)
    total = np.bincount(g, weights=frac, minlength=rows.ng)
    return safe_ratio(total, big_r[rows.gq].astype(np.float64))
