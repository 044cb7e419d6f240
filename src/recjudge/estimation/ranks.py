"""Simultaneous intervals for every pairwise difference of systems, rank confidence sets and the
systems that can be the best (the projection method of Mogstad, Romano, Shaikh & Wilhelm).

The pairwise differences are estimated as the means are (:mod:`recjudge.estimation.ppi`, on the
per-user differences, each pair with its own λ). Their simultaneous critical value is the (1 − α)
quantile of max_p |Z_p| with Z normal, correlated as the pair estimates are (max-t): all the intervals
cover together with probability 1 − α (asymptotically), so every statement drawn from them below
holds together too. A system j is surely behind k when the interval of θ_k − θ_j lies above 0;
its rank set runs from 1 + (systems surely ahead) to K − (systems surely behind).
"""

from __future__ import annotations

from dataclasses import dataclass
from itertools import combinations

import numpy as np

from .ppi import Means, critical

__all__ = ["pair_index", "pair_matrix", "max_t_critical", "RankSets", "rank_sets"]


def pair_index(k: int) -> list[tuple[int, int]]:
    """The pairs (a, b), a < b, of k systems, in a fixed order."""
    return list(combinations(range(k), 2))


def pair_matrix(x: np.ndarray, pairs: list[tuple[int, int]]) -> np.ndarray:
    """Per-user differences x[:, a] − x[:, b], one column per pair."""
    a = np.fromiter((p[0] for p in pairs), dtype=int, count=len(pairs))
    b = np.fromiter((p[1] for p in pairs), dtype=int, count=len(pairs))
    return x[:, a] - x[:, b]


def max_t_critical(means: Means, alpha: float, draws: int = 2000, seed: int = 0, chunk: int = 500) -> float:
    """The simultaneous critical value of ``means``' columns (max-t: the (1 − alpha) quantile of
    max |Z| over Z ~ N(0, R), R the estimates' correlation), widened by the t quantile's small-n
    factor; at least the marginal value."""
    se = means.se
    keep = se > 0
    marginal = critical(alpha, means.df)
    if not keep.any():
        return marginal
    a = means.influence[:, keep] / se[keep]
    if a.shape[0] <= a.shape[1]:  # fewer users than columns: Z = aᵀg, g ~ N(0, I) per user, has R
        root = a.T
    else:  # a square root of R = aᵀa, the estimates' correlation
        vals, vecs = np.linalg.eigh(a.T @ a)
        root = vecs * np.sqrt(np.clip(vals, 0.0, None))
    rng = np.random.default_rng(seed)
    maxima = [np.abs(rng.standard_normal((min(chunk, draws - start), root.shape[1])) @ root.T).max(1)
              for start in range(0, draws, chunk)]
    gauss = float(np.quantile(np.concatenate(maxima), 1 - alpha))
    return max(marginal, gauss * marginal / critical(alpha, None))


@dataclass(frozen=True)
class RankSets:
    """Per system: the lowest and highest rank it can hold (1 = best), and whether it can be the best."""

    lo: np.ndarray
    hi: np.ndarray

    @property
    def can_be_best(self) -> np.ndarray:
        return self.lo == 1


def rank_sets(k: int, pairs: list[tuple[int, int]], lo: np.ndarray, hi: np.ndarray) -> RankSets:
    """Rank sets from simultaneous intervals [lo, hi] of θ_a − θ_b for ``pairs`` (higher is better)."""
    ahead = np.zeros(k, dtype=int)   # systems surely ahead of each system
    behind = np.zeros(k, dtype=int)  # systems surely behind it
    for (a, b), low, high in zip(pairs, lo, hi):
        if low > 0:  # a surely ahead of b
            ahead[b] += 1
            behind[a] += 1
        elif high < 0:
            ahead[a] += 1
            behind[b] += 1
    return RankSets(1 + ahead, k - behind)
