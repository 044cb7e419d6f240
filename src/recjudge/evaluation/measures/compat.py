"""Compat(p): RBO(ranking, ideal) / RBO(ideal, ideal) as ir-measures' compat provider (claclark) computes it."""

from __future__ import annotations

import numpy as np

from .groups import safe_ratio
from .rbo import ideal_ranks, n_ideal


def compat(m, rows, ctx) -> np.ndarray:
    """RBO(ranking, ideal) / RBO(ideal, ideal), in closed form.

    The overlap at depth d counts the documents in both lists whose later position is < d, so
    each such document contributes ``C[depth] - C[max(rank, ideal rank)]``.
    """
    jd = ctx.jd
    p = float(m["p"])
    ideal_len = n_ideal(ctx)[rows.gq]
    depth = np.maximum(rows.length, ideal_len)
    c_tab, w_tab = ctx.rbo_tables(p, int(depth.max(initial=0)))
    # ideal rank: higher labels first, then retrieved same-label documents by run score
    # (unretrieved ones score 0.0), then qrels order
    hit, g, ideal = ideal_ranks(rows, jd)
    s = rows.score[hit]
    if np.any(s <= 0):
        ideal += _unretrieved_ahead(rows, jd, hit, s)
    later = np.maximum(rows.pos[hit], ideal)
    num = np.bincount(g, weights=c_tab[depth[g]] - c_tab[later], minlength=rows.ng)
    if not m["normalize"]:
        return safe_ratio(num, w_tab[depth])
    return safe_ratio(num, _best_rbo(c_tab, ideal_len, depth, ctx, p))


def _best_rbo(c_tab, n_ideal, depth, ctx, p) -> np.ndarray:
    """RBO(ideal, ideal) numerators, computed once per distinct (ideal length, depth)."""
    n_ideal, depth = np.asarray(n_ideal, dtype=np.int64), np.asarray(depth, dtype=np.int64)
    width = int(depth.max(initial=0)) + 1
    pairs, inverse = np.unique(n_ideal * width + depth, return_inverse=True)  # one int64 key per pair
    cache = ctx.cached(("best", p), dict)
    vals = np.empty(len(pairs))
    for i, (k, dep) in enumerate(zip((pairs // width).tolist(), (pairs % width).tolist())):
        if (k, dep) not in cache:
            cache[(k, dep)] = float(np.sum(c_tab[dep] - c_tab[:k])) if k else 0.0
        vals[i] = cache[(k, dep)]
    return vals[inverse.ravel()]


def _unretrieved_ahead(rows, jd, hit: np.ndarray, s: np.ndarray) -> np.ndarray:
    """Unretrieved same-label documents (score 0.0) ranked ahead of a retrieved one scoring <= 0."""
    extra = np.zeros(len(hit), dtype=np.int64)
    for i in np.flatnonzero(s <= 0):
        row = hit[i]
        j = rows.j[row]
        g = rows.group[row]
        in_run = rows.j[rows.gstart[g]:rows.gstart[g] + rows.nrows[g]]
        lo, hi = jd.segment(int(jd.qcode[j]))
        same = np.zeros(len(jd.label), dtype=bool)
        same[lo:hi] = jd.label[lo:hi] == jd.label[j]
        same[in_run[in_run >= 0]] = False
        extra[i] = int(same.sum()) if s[i] < 0 else int((same & (jd.qrow < jd.qrow[j])).sum())
    return extra

