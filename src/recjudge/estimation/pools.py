"""Partly judged pools: a human user's value of a measure linear in the labels estimated from K of
the m pairs the LLM judged for that user (Horvitz–Thompson weights), with its within-user variance.

A measure is linear in the labels when a user's value is a sum of per-pair gains,
M_i = Σ_{d ∈ P_i} t_id · h(label_id), t depending on the ranking only: P@k (t = [rank ≤ k]/k,
h = [label ≥ rel]) and Judged@k (h = 1 for every pair of the pool, the same under either labels).
The K_i pairs of J_i were judged by hand, drawn at random without replacement from the pool P_i of
m_i pairs, so each has inclusion probability K_i/m_i. With e_id = t_id (h(H_id) − h(L_id)):

    Ŷ_i  = f_i + (m_i/K_i) Σ_{J_i} e_id             (the LLM value plus the HT-weighted residuals)
    Ŷᴴ_i = (m_i/K_i) Σ_{J_i} t_id h(H_id)          (from the human labels alone)
    v̂_i  = m_i² (1 − K_i/m_i) s_i² / K_i           (s_i²: the variance, denominator K_i − 1, of the
                                                     K_i terms; 0 when K_i = m_i)

Ŷ_i is unbiased for the user's value under human labels given the user; v̂_i for its variance.
:func:`recjudge.estimation.ppi.finite_mean` adds Σ w_i v̂_i / (Σ w)² to the users' term (the second
stage of a two-stage sample; the first-stage formula on Ŷ counts only (1 − π_i) of it). The t_id
come from the engine: the judged pairs with a relevant label under either labels are dealt into
layers, at most one pair of a user per layer, and P@k under a layer's qrels (the pair alone, labelled
relevant) is t_id. nDCG, Bpref, Compat, R, AP, RR and Success are not sums of per-pair gains (a
normalisation or a first hit depends on every label of the user): refused with that reason.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np
import pandas as pd

from ..errors import ConfigError

__all__ = ["Pools", "PairTerms", "read_pools", "nonlinear_reason", "layer_qrels", "pair_terms", "POOL_ASSUMPTION"]

POOL_ASSUMPTION = ("each partly judged user's human-judged pairs are a uniform random sample of the pairs the LLM "
                   "judged for that user (inclusion probability K/m, K judged of the user's m); P@k and Judged@k "
                   "are then estimated per user by Horvitz-Thompson weights and the user is still the unit")


@dataclass(frozen=True)
class Pools:
    """Per human user (in ``users`` order): K judged by hand of the m the LLM judged, and the pairs
    judged by hand (qid, docid, human, llm labels) within the LLM's pool."""

    users: list[str]
    judged: np.ndarray
    size: np.ndarray
    pairs: pd.DataFrame

    @property
    def partial(self) -> int:
        """How many users are partly judged."""
        return int((self.judged < self.size).sum())


def _labels(qrels, users) -> pd.DataFrame:
    f = qrels.frame
    f = f[f["qid"].isin(users)][["qid", "docid", "label"]]
    return f.drop_duplicates(["qid", "docid"], keep="last")


def read_pools(human, llm, users: list[str]) -> Pools:
    """K and m per human user; refused where a user has fewer than 2 of its pairs judged by hand."""
    g = _labels(llm, users).rename(columns={"label": "llm"})
    h = _labels(human, users).rename(columns={"label": "human"})
    pairs = g.merge(h, on=["qid", "docid"], how="inner")
    size = g.groupby("qid").size().reindex(users, fill_value=0).to_numpy()
    judged = pairs.groupby("qid").size().reindex(users, fill_value=0).to_numpy()
    few = [(u, k, m) for u, k, m in zip(users, judged, size) if k < min(2, m)]
    if few:
        u, k, m = few[0]
        raise ConfigError(
            f"{len(few)} human user(s) have fewer than 2 of their LLM-judged pairs judged by hand (user {u}: {k} "
            f"of {m}): a partly judged user needs at least 2 for the variance of its pairs; judge more of its "
            "pairs by hand or leave it out of the human qrels")
    return Pools(list(users), judged, size, pairs.reset_index(drop=True))


def nonlinear_reason(measure) -> str | None:
    """Why ``measure`` cannot be estimated from partly judged pools (None: it can)."""
    if measure.NAME in ("P", "Judged"):
        return None
    return ("not a sum of per-pair gains (a normalisation or a first hit depends on every label of "
            "the user), so weighting the judged pairs by 1/π gives no unbiased per-user value; no method here "
            "gives it a valid interval from partly judged users (judge every pair of the human users by hand, "
            "or estimate P@k / Judged@k)")


def layer_qrels(pools: Pools, rel: int) -> tuple[list, np.ndarray, np.ndarray]:
    """The layers' qrels for relevance threshold ``rel`` and, per user and layer, h(H) and h(L)."""
    from ..data.trec import Qrels

    p = pools.pairs
    p = p[(p["human"] >= rel) | (p["llm"] >= rel)]
    layer = p.groupby("qid").cumcount().to_numpy()
    row = pd.Index(pools.users).get_indexer(p["qid"])
    depth = int(layer.max()) + 1 if len(p) else 0
    hh, hl = np.zeros((len(pools.users), depth)), np.zeros((len(pools.users), depth))
    hh[row, layer], hl[row, layer] = p["human"] >= rel, p["llm"] >= rel
    sets = [Qrels(f"layer{rel}.{j}", pd.DataFrame({"qid": p["qid"][layer == j], "iteration": "0",
                                                  "docid": p["docid"][layer == j], "label": rel}))
            for j in range(depth)]
    return sets, hh, hl


@dataclass(frozen=True)
class PairTerms:
    """One measure's per-user values from partly judged pools: Ŷ (PPI), Ŷᴴ (human only), and the
    per-pair terms (n × layers × systems) whose within-user variance :meth:`within` gives."""

    y: np.ndarray
    human_y: np.ndarray
    e: np.ndarray
    gh: np.ndarray
    judged: np.ndarray
    size: np.ndarray

    def within(self, combine: np.ndarray, human: bool = False) -> np.ndarray:
        """v̂_i of the combinations ``combine`` (systems × columns) of the systems' values."""
        x = (self.gh if human else self.e) @ combine
        k, m = self.judged[:, None].astype(float), self.size[:, None].astype(float)
        s1, s2 = x.sum(1), (x ** 2).sum(1)
        with np.errstate(divide="ignore", invalid="ignore"):
            s = np.where(k > 1, (s2 - s1 ** 2 / k) / (k - 1), 0.0)
            return np.where(k < m, m ** 2 * (1 - k / m) * np.maximum(s, 0.0) / k, 0.0)


def pair_terms(pools: Pools, f: np.ndarray, hits: np.ndarray | None, hh, hl, judged_measure: bool) -> PairTerms:
    """Ŷ, Ŷᴴ and the terms of one measure; ``hits``: t per user, layer and system (None for Judged@k,
    whose value is the same under either labels since the pool is the same)."""
    n, systems = f.shape
    if judged_measure or hits is None:
        zero = np.zeros((n, 0, systems))
        return PairTerms(f, f, zero, zero, pools.judged, pools.size)
    e = (hh - hl)[:, :, None] * hits
    gh = hh[:, :, None] * hits
    scale = (pools.size / pools.judged)[:, None]
    return PairTerms(f + scale * e.sum(1), scale * gh.sum(1), e, gh, pools.judged, pools.size)
