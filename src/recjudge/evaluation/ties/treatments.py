"""Measure values under each tie treatment: one given order, and the expectation under random order within ties.

Per-order values come from the measure engine (:data:`recjudge.evaluation.measures.MEASURE_FUNCTIONS`
for the closed-form families, :func:`~recjudge.evaluation.measures.per_query_matrix` for the
others); this module adds the exact expectations (closed forms) and their Monte Carlo fallback.

Closed forms (a block = a maximal run of equal scores; it starts at 0-based position ``a``, holds
``n`` items of which ``R`` are relevant with total gain ``G``; ``c = clip(k - a, 0, n)`` of its
positions lie in the top k). Blocks are ordered independently, so per user:

- E[#relevant in top k] = Σ R·c/n; P@k divides by k, R@k by the user's relevant count in qrels.
- Hit@k = 1 − Π_blocks C(n − R, c) / C(n, c) (no relevant item lands in the top k of any block).
- E[DCG@k] = Σ G/n · Σ_{p=a}^{min(a+n, k)−1} 1/log2(p + 2): each item of a block is equally likely
  at each of the block's positions, and DCG is linear in the gains. Gain = label, negative labels
  count 0, the ideal comes from the qrels (trec_eval's ndcg_cut). A block straddling k spreads its
  gain over its positions inside the cut only; a run shorter than k simply has fewer positions.
- RR@k: only the first block holding a relevant item matters. With m relevant among its n items,
  the first relevant lands at offset j with probability C(n − 1 − j, m − 1) / C(n, m), so
  E[RR] = Σ_j C(n − 1 − j, m − 1) / C(n, m) / (a + j + 1) over a + j < k. For m = 1 this is the
  mean of 1/(a + j + 1) over the block's positions; several relevant items are exact too.
"""

from __future__ import annotations

import hashlib
import math
from collections.abc import Sequence

import numpy as np
import pandas as pd

from ...data.trec import Qrels, Run
from ...errors import ConfigError
from ..measures import MEASURE_FUNCTIONS, Rows, Scorer, parse_measures, safe_ratio
from .ranked import Ranked
from .specs import DEFAULT_TIE_MEASURES, MeasureSpec, measure_specs

_MAX_ORDERS_PER_CALL = 4  # random orders (full-length position arrays) drawn at once


def _closed_values(r: Ranked, spec: MeasureSpec, pos: np.ndarray) -> np.ndarray:
    """Per counted user, for a tie-free order given by ``pos``: the measure engine's own function.

    Only rows labelled >= 1 can add to nDCG, P, R, Hit or RR, so the engine gets those rows alone,
    one group per counted user. RR takes each group's first row, so it gets them in rank order;
    the sums keep the run's score order (a reordered float sum would move the last digit of
    published audit numbers).
    """
    lab = r.lab
    cu, p = r.counted_s[lab], pos[lab]
    if spec.family == "rr":
        o = np.lexsort((p, cu))
        lab, cu, p = lab[o], cu[o], p[o]
    U = r.n_counted
    length = np.bincount(cu, minlength=U)
    rows = Rows(group=cu, pos=p, score=r.score_s[lab], j=r.j_s[lab], label=r.label_s[lab],
                gq=np.arange(U, dtype=np.int64), length=length, gstart=np.cumsum(length) - length, nrows=length)
    return MEASURE_FUNCTIONS[spec.measure.NAME](spec.measure, rows, r.ctx)


def _log_choose(n: np.ndarray, k: np.ndarray) -> np.ndarray:
    from scipy.special import gammaln

    return gammaln(n + 1.0) - gammaln(k + 1.0) - gammaln(n - k + 1.0)


def _expected_closed(r: Ranked, spec: MeasureSpec) -> np.ndarray:
    """Exact expectation per counted user under a uniformly random order within every tie block."""
    U = r.n_counted
    label = r.label_s[r.lab]
    w = label.astype(np.float64) if spec.family == "ndcg" else (label >= spec.rel).astype(np.float64)
    keep = w > 0
    blocks, inv = np.unique(r.block[r.lab][keep], return_inverse=True)
    W = np.bincount(inv, weights=w[keep], minlength=len(blocks))  # R (count) or G (gain) per block
    a = r.b_start[blocks].astype(np.float64)
    n = r.b_size[blocks].astype(np.float64)
    cu = r.user_counted[r.b_user[blocks]]
    k = spec.cutoff
    kk = float(k) if k is not None else float(r.max_len)
    c = np.clip(kk - a, 0.0, n)  # the block's positions inside the cut
    if spec.family == "ndcg":
        disc = np.concatenate([[0.0], np.cumsum(1.0 / np.log2(np.arange(r.max_len) + 2.0))])
        lo = np.minimum(a, kk).astype(np.int64)
        hi = np.minimum(a + n, kk).astype(np.int64)
        dcg = np.bincount(cu, weights=W / n * (disc[hi] - disc[lo]), minlength=U)
        return safe_ratio(dcg, r.idcg(k))
    if spec.family in ("p", "r"):
        count = np.bincount(cu, weights=W * c / n, minlength=U)
        return count / k if spec.family == "p" else safe_ratio(count, r.nrel(spec.rel).astype(np.float64))
    if spec.family == "hit":
        # P(no relevant in the block's c top slots) = C(n - R, c) / C(n, c) = C(n - c, R) / C(n, R)
        # = Π_{i<R} (n - c - i) / (n - i): R factors (few), each summed as an exact-ish log1p
        impossible = c > n - W
        R = W.astype(np.int64)
        idx = np.repeat(np.arange(len(R)), R)
        i = np.arange(R.sum()) - np.repeat(np.cumsum(R) - R, R)
        ok = ~impossible[idx]
        terms = np.log1p(-c[idx][ok] / (n[idx][ok] - i[ok]))
        log_miss = np.bincount(idx[ok], weights=terms, minlength=len(R))
        any_sure = np.bincount(cu, weights=impossible.astype(np.float64), minlength=U) > 0
        miss = np.exp(np.bincount(cu, weights=log_miss, minlength=U))
        has = np.bincount(cu, minlength=U) > 0
        return np.where(any_sure, 1.0, np.where(has, 1.0 - miss, 0.0))
    if spec.family == "rr":
        # only the first block with a relevant item matters (blocks are in user, position order)
        first = np.unique(cu, return_index=True)[1]
        fa, fn, fm, fu = a[first], n[first], W[first], cu[first]
        count = (fn - fm + 1).astype(np.int64)
        idx = np.repeat(np.arange(len(first)), count)
        j = np.arange(count.sum()) - np.repeat(np.cumsum(count) - count, count)
        nn, mm = fn[idx], fm[idx]
        prob = np.exp(_log_choose(nn - 1 - j, mm - 1) - _log_choose(nn, mm))
        at = fa[idx] + j
        w_rr = np.where(at < kk, prob / (at + 1.0), 0.0)
        return np.bincount(fu[idx], weights=w_rr, minlength=U)
    raise ConfigError(f"no closed form for {spec.name}")


class Evaluator:
    """Per-user values of the general measures for an order, from the measure engine
    (:func:`recjudge.evaluation.measures.per_query_matrix`'s scorer, whose judgments are built once).

    Orders are memoised by content: a treatment that leaves a run unchanged (a tie-free run, the
    hash policy after a shuffle) costs nothing. One tie-free copy of the run exists at a time.
    """

    def __init__(self, r: Ranked, specs: Sequence[MeasureSpec], scorer: Scorer | None = None):
        """``scorer``: :meth:`scorer_for` of these judgments and specs, to share between runs."""
        self.r = r
        self.specs = [s for s in specs if s.family == "general"]
        self.memo: dict[bytes, np.ndarray] = {}
        self._scorer = scorer

    @staticmethod
    def scorer_for(r: Ranked, specs: Sequence[MeasureSpec]) -> Scorer | None:
        """The measure engine's scorer of the general ``specs`` over ``r``'s judgments (the counted users)."""
        general = [s.measure for s in specs if s.family == "general"]
        return Scorer(r.qrels, parse_measures(general), list(r.counted), "auto", 1, context=r.ctx) if general else None

    def values(self, orders: Sequence[np.ndarray]) -> list[np.ndarray]:
        """For each order: an array (len(specs), counted users)."""
        if not self.specs:
            return [np.zeros((0, self.r.n_counted)) for _ in orders]
        digests = [hashlib.blake2b(p.tobytes(), digest_size=16).digest() for p in orders]
        for digest, pos in zip(digests, orders):
            if digest not in self.memo:
                self.memo[digest] = self._evaluate(pos)
        return [self.memo[d] for d in digests]

    def _evaluate(self, pos: np.ndarray) -> np.ndarray:
        r = self.r
        if self._scorer is None:
            self._scorer = self.scorer_for(r, self.specs)  # the run's judgments, built once
        sc = self._scorer
        sc.reset(1)
        if sc.reference is None:  # the engine alone: the order's rows from the run's one join
            sc.add(None, 0, r.doc_codes, *r.ranked_at(pos))
        else:  # ir-measures reads a run
            sc.add(r.tie_free_run(pos, "order"), 0, r.doc_codes)
        # the scorer's rows are the counted users in their order; no value (CompatHM) counts 0
        out = np.vstack([sc.values[s.key][:, 0] for s in self.specs]).astype(np.float64)
        return np.where(np.isnan(out), 0.0, out)


def per_user_values(r: Ranked, specs: Sequence[MeasureSpec], ev: Evaluator, orders: Sequence[np.ndarray]
              ) -> list[np.ndarray]:
    """For each order, an array (len(specs), counted users) in the order of ``specs``."""
    general = ev.values(orders)
    out = []
    for pos, gen in zip(orders, general):
        rows, g = [], iter(gen)
        for s in specs:
            rows.append(next(g) if s.family == "general" else _closed_values(r, s, pos))
        out.append(np.vstack(rows) if rows else np.zeros((0, r.n_counted)))
    return out


def _frame(r: Ranked, specs: Sequence[MeasureSpec], values: np.ndarray) -> pd.DataFrame:
    return pd.DataFrame(values.T, index=pd.Index(r.counted, name="qid"), columns=[s.name for s in specs])


def policy_metrics(run: Run, qrels: Qrels, measures=DEFAULT_TIE_MEASURES, policy: str = "hash",
                   seed: int = 0) -> pd.DataFrame:
    """Per-user values (index: qrels' users) with ties ordered by ``policy``: "input", "hash" or "random"."""
    specs = measure_specs(measures)
    r = Ranked(run, qrels)
    rng = np.random.default_rng(seed)
    pos = r.treatment(r.tied_rows, policy, seed=seed, rng=rng)
    return _frame(r, specs, per_user_values(r, specs, Evaluator(r, specs), [pos])[0])


def expected_metrics(run: Run, qrels: Qrels, measures=DEFAULT_TIE_MEASURES, mc_samples: int = 100,
                     seed: int = 0) -> pd.DataFrame:
    """Per-user expectation under a uniformly random order within each tie block.

    Exact for the closed-form families; a mean over ``mc_samples`` seeded random orders otherwise.
    """
    specs = measure_specs(measures)
    r = Ranked(run, qrels)
    values, _ = expected_values(r, specs, Evaluator(r, specs), mc_samples, seed)
    return _frame(r, specs, values)


def expected_values(r: Ranked, specs: Sequence[MeasureSpec], ev: Evaluator, mc_samples: int, seed: int
              ) -> tuple[np.ndarray, np.ndarray | None]:
    """Per-user expectations (specs × users) and, for the general measures, each draw's mean."""
    out = np.zeros((len(specs), r.n_counted))
    for i, s in enumerate(specs):
        if s.family != "general":
            out[i] = _expected_closed(r, s)
    draws = None
    if ev.specs:
        if mc_samples < 2:
            raise ConfigError(f"Monte Carlo needs at least 2 samples, got {mc_samples}")
        chunks = []  # a few orders at a time: each is a full-length position array
        for start in range(0, mc_samples, _MAX_ORDERS_PER_CALL):
            orders = [r.treatment(r.tied_rows, "random", rng=np.random.default_rng([seed, 1, d]))
                      for d in range(start, min(start + _MAX_ORDERS_PER_CALL, mc_samples))]
            chunks += ev.values(orders)
        vals = np.stack(chunks)  # draws × general specs × users
        gi = [i for i, s in enumerate(specs) if s.family == "general"]
        out[gi] = vals.mean(axis=0)
        draws = vals.mean(axis=2)  # draws × general specs
    return out, draws


def mc_interval(draws: np.ndarray, confidence: float) -> tuple[float, float]:
    """Two-sided Student-t interval for the mean of Monte Carlo draws."""
    from scipy import stats

    d = np.asarray(draws, dtype=np.float64)
    # shifting by one draw makes the sd exactly 0 when every draw agrees (a tie-free run)
    half = stats.t.ppf(0.5 + confidence / 2, len(d) - 1) * (d - d[0]).std(ddof=1) / math.sqrt(len(d))
    return float(d.mean() - half), float(d.mean() + half)
