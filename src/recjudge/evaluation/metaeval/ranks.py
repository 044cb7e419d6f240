"""System means and ranks under one label set, and the rank correlations of two score vectors (τ-b, weighted τ, τ_AP)."""

from __future__ import annotations

import math
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field

import numpy as np
import pandas as pd

__all__ = ["MEAN_DECIMALS", "system_means", "system_ranks", "system_order", "kendall_tau", "weighted_tau", "tau_ap",
           "tied_ranking", "SystemTable"]

MEAN_DECIMALS = 12


def system_means(matrix: pd.DataFrame) -> pd.Series:
    """Per-system mean over users, rounded to 12 decimals: equal scores summed in another order
    (e.g. Judged@k = j/k) must stay equal, or τ-b, shared ranks and τ_AP see a false order."""
    return matrix.mean(axis=0).round(MEAN_DECIMALS)


def system_ranks(scores: pd.Series) -> pd.Series:
    """Rank 1 = best (highest mean score); equal scores share the average rank (scipy.stats.rankdata's
    "average"; pandas ranks alike without loading scipy.stats, ~0.85 s and 40 MB)."""
    return pd.Series(pd.Series(-scores.to_numpy(dtype=float)).rank(method="average").to_numpy(), index=scores.index)


_PAIRWISE_TAU = 2000  # systems up to which τ-b counts its pairs directly (n² signs, in blocks of rows)


def kendall_tau(reference: Sequence[float], candidate: Sequence[float]) -> float:
    """Kendall's τ-b between two score vectors over the same systems, as scipy.stats.kendalltau gives it
    (the same integer counts and the same float operations); scipy.stats is loaded only past
    2,000 systems or for a vector with NaN."""
    x, y = np.asarray(reference, dtype=float), np.asarray(candidate, dtype=float)
    if x.shape != y.shape or x.ndim != 1 or len(x) > _PAIRWISE_TAU or np.isnan(x).any() or np.isnan(y).any():
        from scipy import stats

        return float(stats.kendalltau(reference, candidate, variant="b").statistic)
    n = len(x)
    tot = n * (n - 1) // 2
    if n < 2:
        return math.nan
    s = 0  # Σ over pairs of sign(Δx)·sign(Δy): concordant minus discordant
    xtie = ytie = 0  # pairs tied in x, in y
    for start in range(0, n, 256):
        dx = np.sign(x[start:start + 256, None] - x[None, :])
        dy = np.sign(y[start:start + 256, None] - y[None, :])
        s += int((dx * dy).sum())
        xtie += int((dx == 0).sum())
        ytie += int((dy == 0).sum())
    # every pair was counted twice, and each value tied with itself once
    s, xtie, ytie = s // 2, (xtie - n) // 2, (ytie - n) // 2
    if xtie == tot or ytie == tot:
        return math.nan
    tau = s / np.sqrt(tot - xtie) / np.sqrt(tot - ytie)
    return float(min(1.0, max(-1.0, tau)))


def weighted_tau(reference: Sequence[float], candidate: Sequence[float]) -> float:
    """Weighted τ: scipy.stats.weightedtau on scores with its default hyperbolic weigher.

    This is Vigna's τ_h: an exchange between ranks r and s weighs 1/(r+1) + 1/(s+1), ranks taken
    from each score vector in turn and the two results averaged (``rank=True``), so swaps at the
    top of either ranking count most.
    """
    from scipy import stats

    return float(stats.weightedtau(np.asarray(reference, float), np.asarray(candidate, float)).statistic)


def system_order(scores: np.ndarray, names: Sequence[str]) -> np.ndarray:
    # Score descending, then name, so equal scores never fall back on input order.
    return np.lexsort((np.asarray(names, dtype=str), -np.asarray(scores, float)))


def tau_ap(reference: Sequence[float], candidate: Sequence[float], names: Sequence[str] | None = None) -> float:
    """AP correlation τ_AP of the candidate ranking against the reference (Yilmaz et al. 2008).

    τ_AP = 2/(n−1) · Σ_{i=2..n} C(i)/(i−1) − 1, where C(i) counts the systems above position i of
    the candidate ranking that the reference also ranks above the system at position i. Equal
    scores are ordered by system name (τ_AP has no tie correction); if either vector is constant
    the ranking is arbitrary and τ_AP is NaN, as τ-b is.
    """
    ref = np.asarray(reference, float)
    cand = np.asarray(candidate, float)
    n = len(ref)
    if n < 2 or np.all(ref == ref[0]) or np.all(cand == cand[0]):
        return math.nan
    names = list(names) if names is not None else [f"{i:09d}" for i in range(n)]
    ref_pos = np.empty(n, int)
    ref_pos[system_order(ref, names)] = np.arange(n)
    cand_order = system_order(cand, names)
    rp = ref_pos[cand_order]  # reference position of the system at each candidate position
    total = 0.0
    for i in range(1, n):
        total += np.count_nonzero(rp[:i] < rp[i]) / i
    return 2.0 / (n - 1) * total - 1.0


def tied_ranking(means: pd.Series, label_set: str, measure: str) -> str:
    """Why ``means`` give no ranking to correlate ('' when they do): every system has the same mean."""
    values = means.to_numpy(dtype=float)
    if len(values) and np.all(values == values[0]):
        return (f"every system ties under {label_set} on {measure} (all {len(values)} means are "
                f"{values[0]:.4g}), so there is no ranking to compare: τ and the rank displacements are undefined")
    return ""


@dataclass(frozen=True, eq=False)
class SystemTable:
    """Per-measure user × system matrices under one label set, and their means and ranks."""

    label_set: str
    matrices: Mapping[str, pd.DataFrame]
    # means and ranks, computed once per measure (a JSON output asks for them per system)
    _cache: dict = field(default_factory=dict, repr=False)

    @property
    def measures(self) -> list[str]:
        return list(self.matrices)

    def means(self, measure: str) -> pd.Series:
        key = ("means", measure)
        if key not in self._cache:
            self._cache[key] = system_means(self.matrices[measure])
        return self._cache[key].copy()  # a caller may change its copy

    def ranks(self, measure: str) -> pd.Series:
        key = ("ranks", measure)
        if key not in self._cache:
            self._cache[key] = system_ranks(self.means(measure))
        return self._cache[key].copy()

    def scores_frame(self) -> pd.DataFrame:
        """Systems × measures table of mean scores."""
        return pd.DataFrame({m: self.means(m) for m in self.matrices})
