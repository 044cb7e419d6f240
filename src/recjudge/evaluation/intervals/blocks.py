"""The bootstrap's and the jackknife's building blocks: replicates, percentile and BCa intervals, standard errors, Fisher's z."""

from __future__ import annotations

import math
from typing import NamedTuple

import numpy as np

__all__ = ["Replicates", "percentile", "bias_corrected", "jackknife_se", "fisher_z", "z_value", "finite",
           "sample_sd", "clipped"]


def z_value(level: float) -> float:
    """The standard normal quantile of a two-sided ``level`` interval (1.96 at 0.95)."""
    from statistics import NormalDist

    return NormalDist().inv_cdf(0.5 + level / 2)


def finite(values) -> np.ndarray:
    """``values`` flattened, NaN left out."""
    v = np.asarray(values, float).ravel()
    return v[~np.isnan(v)]


class Replicates(NamedTuple):
    """A statistic, its bootstrap replicates and its leave-one-unit-out (jackknife) values."""

    estimate: float
    bootstrap: np.ndarray
    jackknife: np.ndarray | None = None
    step: float = 0.0  # the statistic's resolution (τ over P pairs moves in steps of 2/P), 0 if continuous

    @property
    def bootstrap_bias_sd(self) -> float:
        """(estimate − mean of the replicates) in replicate standard deviations: how far the
        resampled statistic sits below the estimate (NaN without spread)."""
        t = finite(self.bootstrap)
        if len(t) < 2 or not math.isfinite(self.estimate):
            return math.nan
        sd = float(t.std(ddof=1))
        return (self.estimate - float(t.mean())) / sd if sd > 0 else math.nan


def percentile(replicates, level: float = 0.95) -> tuple[float, float]:
    """Percentile interval: the (1 ± level)/2 quantiles of the replicates (linear, as numpy)."""
    t = finite(replicates)
    if len(t) == 0:
        return (math.nan, math.nan)
    alpha = (1 - level) / 2
    lo, hi = np.quantile(t, [alpha, 1 - alpha])
    return (float(lo), float(hi))


def bias_corrected(replicates, estimate: float, level: float = 0.95, jackknife=None) -> tuple[float, float]:
    """BCa interval (Efron & Tibshirani 1993, §14.3) from bootstrap replicates of a statistic.

    z0 = Φ⁻¹(share of replicates below ``estimate``, ties counted half, as scipy.stats.bootstrap
    does: τ takes few distinct values, so many replicates equal the estimate). The acceleration
    a = Σd³ / (6 (Σd²)^1.5) with d = mean(jackknife) − jackknife; without ``jackknife`` a = 0, the
    bias-corrected percentile (BC) interval. The interval is the empirical quantiles (linear, as
    numpy and scipy) at Φ(z0 + (z0 + z)/(1 − a(z0 + z))) for z = ±Φ⁻¹((1 − level)/2). NaN when the
    estimate lies outside every replicate (z0 infinite): no correction can place it then.

    With a large bias (z0 near 2) both quantiles move into the top tail and the interval collapses
    above the estimate; the τ simulation measured its coverage far below nominal.
    """
    t = finite(replicates)
    if len(t) == 0 or not math.isfinite(estimate):
        return (math.nan, math.nan)
    share = (np.count_nonzero(t < estimate) + np.count_nonzero(t <= estimate)) / (2.0 * len(t))
    if share <= 0.0 or share >= 1.0:
        return (math.nan, math.nan)
    from statistics import NormalDist

    nd = NormalDist()
    z0 = nd.inv_cdf(share)
    a = 0.0
    if jackknife is not None:
        jk = finite(jackknife)
        d = jk.mean() - jk if len(jk) else jk
        den = 6.0 * float(np.sum(d ** 2)) ** 1.5
        # all leave-one-out values equal (or one unit): no skew to correct for
        a = float(np.sum(d ** 3)) / den if den > 0 else 0.0
    z = nd.inv_cdf((1 - level) / 2)
    probs = [nd.cdf(z0 + (z0 + zz) / (1 - a * (z0 + zz))) for zz in (z, -z)]
    lo, hi = np.quantile(t, probs)
    return (float(lo), float(hi))


def jackknife_se(values) -> float:
    """Jackknife standard error sqrt((n − 1)/n · Σ (θ₍ᵢ₎ − θ̄)²) from n leave-one-out values
    (Efron & Tibshirani 1993, eq. 11.5); NaN with fewer than two."""
    jk = finite(values)
    n = len(jk)
    if n < 2:
        return math.nan
    return float(math.sqrt((n - 1) / n * float(np.sum((jk - jk.mean()) ** 2))))


def fisher_z(values, step: float = 0.0) -> np.ndarray:
    """atanh of values in [−1, 1]. ±1 would be infinite: with ``step`` (the statistic's resolution)
    they are pulled in by half a step, else by 1e-12."""
    limit = 1.0 - (step / 2 if step > 0 else 1e-12)
    return np.arctanh(np.clip(np.asarray(values, float), -limit, limit))


def clipped(lo: float, hi: float, bounds: tuple[float, float]) -> tuple[float, float]:
    """(lo, hi) kept within ``bounds``."""
    return (float(max(bounds[0], lo)), float(min(bounds[1], hi)))


def sample_sd(values) -> float:
    """The standard deviation (ddof 1) of the finite ``values``; NaN with fewer than two."""
    t = finite(values)
    return float(t.std(ddof=1)) if len(t) > 1 else math.nan
