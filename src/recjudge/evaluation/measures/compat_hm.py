"""CompatHM(p): Compatibility as the trec-health-misinfo/Compatibility script computes it, as an ir-measures measure.

The script is the one the ML-32M-ext release evaluates with (claclark/Compatibility computes the
same). It differs from ir-measures' ``Compat``, which Penha et al. 2025 use (see :func:`compat_hm`).
The measure is registered with ir-measures on import, so ``ir_measures.parse_measure("CompatHM(p=0.9)")``
and ``ir_measures.calc_aggregate([CompatHM(p=0.95)], qrels, run)`` know it; recjudge's provider
(:mod:`recjudge.evaluation.measures.provider`) computes it.
"""

from __future__ import annotations

import math

import numpy as np
from ir_measures import measures

from .rbo import ideal_ranks, n_ideal

HM_DEPTH = 1000  # the script's fixed RBO depth


class _CompatHM(measures.Measure):
    """Compatibility as the trec-health-misinfo/Compatibility script computes it (the ML-32M-ext release's):
    RBO to depth 1000, ideal ties by run rank, a value only for users with a relevant item that the run ranks.
    """

    __name__ = "CompatHM"
    NAME = __name__
    PRETTY_NAME = "Compatibility (trec-health-misinfo script)"
    SHORT_DESC = ("The Rank Biased Overlap between the results and an ideal ranking, to depth 1000, as the "
                  "trec-health-misinfo/Compatibility script computes it.")
    SUPPORTED_PARAMS = {  # noqa: RUF012 - as ir-measures declares its measures
        "p": measures.ParamInfo(dtype=float, default=0.95, desc="persistence"),
    }
    DEFAULT = math.nan  # a user the run does not rank has no value (the script leaves it out of its mean)


CompatHM = _CompatHM()
if CompatHM.NAME not in measures.registry:  # ir-measures refuses a name registered twice
    measures.register(CompatHM)


def compat_hm(m, rows, ctx) -> np.ndarray:
    """Compatibility as the trec-health-misinfo/Compatibility script (the ML-32M-ext release's) computes it.

    Both lists are scored by RBO and the run's RBO is divided by the ideal list's, as ir-measures'
    ``Compat`` does, but:

    - depth: a fixed 1000 (the script's ``DEPTH``), not max(len(ranking), len(ideal)); an item at
      rank >= 1000 in either list adds nothing;
    - ideal order inside one label: retrieved items by run rank, then the unretrieved ones (their
      order cannot change the value: they overlap nothing). ir-measures orders them by run score
      with unretrieved items at score 0.0, so a retrieved item scoring < 0 goes after them;
    - which users count: the script reports and averages only users the run ranks and that have a
      label > 0. Such a user's value here is NaN (no value), so a system mean, which skips NaN,
      averages the same users; ir-measures gives both 0.0 and averages over every judged user;
    - RBO scale: the script divides RBO by ``sum_{i<1000} p^i``; the ratio of two RBOs cancels it.

    In closed form (:mod:`~recjudge.evaluation.measures.rbo`): an item in both lists adds
    ``C[1000] - C[min(later, 1000)]`` with ``later`` the larger of its two ranks; RBO(ideal, ideal)
    over n relevant items is ``sum_{k < min(n, 1000)} (C[1000] - C[k])``.
    """
    depth = HM_DEPTH
    c_tab, _ = ctx.rbo_tables(float(m["p"]), depth)
    hit, g, ideal = ideal_ranks(rows, ctx.jd)
    later = np.minimum(np.maximum(rows.pos[hit], ideal), depth)
    num = np.bincount(g, weights=c_tab[depth] - c_tab[later], minlength=rows.ng)
    ideal_len = np.minimum(n_ideal(ctx)[rows.gq], depth)
    best = ideal_len * c_tab[depth] - np.r_[0.0, np.cumsum(c_tab[:depth])][ideal_len]
    out = np.full(rows.ng, np.nan)
    ok = (ideal_len > 0) & (rows.length > 0)
    out[ok] = num[ok] / best[ok]
    return out
