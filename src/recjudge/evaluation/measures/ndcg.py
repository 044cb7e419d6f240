"""nDCG as trec_eval computes it: linear gain, an ir-measures gains map, or exponential gain (``dcg='exp-log2'``).

``nDCG(dcg='exp-log2')`` is the exponential-gain nDCG of Penha et al. 2025 (recjudge's alias
``nDCGexp``): gain 2^rel − 1 with the log2 discount, as trec_eval computes ``nDCG`` with the gains
map ``{rel: 2^rel − 1}``; on the 0–7 interest scale that map is :data:`EXP_GAINS`. Negative labels
carry no gain in every variant (as in every trec_eval nDCG).
"""

from __future__ import annotations

from collections.abc import Mapping

import numpy as np

from .groups import below, safe_ratio, within_group_position

EXP_GAINS = {rel: 2**rel - 1 for rel in range(8)}  # 2^rel - 1 on the 0-7 interest scale: nDCGexp's gains there


def apply_gains(label: np.ndarray, gains: Mapping[int, int] | None = None, dcg: str = "log2") -> np.ndarray:
    """Each label's gain: the label itself, mapped through ``gains`` as ir-measures does before calling
    trec_eval (an unlisted label keeps its value; a gain <= 0 then counts nothing), or 2^label − 1
    for ``dcg='exp-log2'`` (labels <= 0: none)."""
    if dcg == "exp-log2":
        return np.where(label > 0, np.exp2(label.astype(np.float64)) - 1.0, 0.0)
    if gains is None:
        return label
    out = label.astype(np.int64)  # a gain may not fit the labels' int32
    for rel, gain in gains.items():
        out[label == rel] = gain
    return out


def ideal_dcg(jd, cutoff: int | None, gains: Mapping[int, int] | None = None, dcg: str = "log2") -> np.ndarray:
    """trec_eval's ideal DCG per query of the judgments ``jd``: gains > 0 in descending order, log2 discount."""
    gain = apply_gains(jd.label, gains, dcg)
    pos_mask = gain > 0
    q, lab = jd.qcode[pos_mask], gain[pos_mask]
    order = np.lexsort((-lab, q))
    q, lab = q[order], lab[order]
    pos = within_group_position(q)
    keep = pos < cutoff if cutoff is not None else np.ones(len(q), bool)
    weights = lab[keep] / np.log2(pos[keep] + 2.0)
    return np.bincount(q[keep], weights=weights, minlength=jd.nq)


def ndcg(m, rows, ctx) -> np.ndarray:
    """nDCG per group (:class:`~recjudge.evaluation.measures.rows.Rows`): gain / log2(rank + 1), over the ideal DCG."""
    cutoff = m.params.get("cutoff")
    gains = m.params.get("gains")
    dcg_kind = m.params.get("dcg", "log2")
    gain = apply_gains(rows.label, gains, dcg_kind)
    log2 = ctx.log2_ranks(rows.pos)
    if log2 is None:
        hit = gain > 0
        if cutoff is not None:
            hit &= rows.pos < cutoff
        dcg = np.bincount(rows.group[hit], weights=gain[hit] / np.log2(rows.pos[hit] + 2.0), minlength=rows.ng)
    else:
        # every row at once, a row without gain adding 0.0: x + 0.0 == x, so each sum is the one over
        # the rows with gain, in the same order
        w = np.maximum(gain, 0) / log2
        if cutoff is not None and not below(rows.pos, cutoff):
            w[rows.pos >= cutoff] = 0.0
        dcg = np.bincount(rows.group, weights=w, minlength=rows.ng)
    return safe_ratio(dcg, ctx.ideal_dcg(cutoff, gains, dcg_kind)[rows.gq])
