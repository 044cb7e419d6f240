"""Intervals that stay in a statistic's range: a mean over experiments (bounded t) and a share of pairs (Korn–Graubard)."""

from __future__ import annotations

import math
from collections.abc import Sequence

import numpy as np

from .blocks import finite, sample_sd, z_value

__all__ = ["bounded_t", "share_interval"]


# ------------------------------------------------------------------------------ across experiments

def _to_unit(x, bounds: tuple[float, float]):
    lo, hi = bounds
    return (2 * np.asarray(x, float) - lo - hi) / (hi - lo)


def bounded_t(values: Sequence[float], bounds: tuple[float, float] = (-1.0, 1.0), level: float = 0.95
              ) -> tuple[float, float]:
    """Student t-interval for the mean of a few values of a statistic bounded by ``bounds``, built on
    the Fisher-z scale of that range and mapped back, so it never leaves it.

    g(x) = atanh(u) with u = (2x − lo − hi)/(hi − lo): Fisher's z for [−1, 1] (τ, κ, α), half the
    logit for [0, 1] (shares). Centred on g(mean) with the delta-method standard error
    g′(mean)·s/√n (s the values' standard deviation) and t(level, n − 1): it contains the mean,
    equals the ordinary t-interval where the range is far away, and bends away from a bound the
    mean is near. NaN with fewer than two values or a value outside ``bounds``; a mean on a bound
    (every value on it) gives that point.
    """
    x = finite(values)
    if len(x) < 2 or x.min() < bounds[0] or x.max() > bounds[1]:
        return (math.nan, math.nan)
    from scipy import stats

    mean = float(x.mean())
    u = float(_to_unit(mean, bounds))
    if abs(u) >= 1.0:
        return (mean, mean)
    se_g = float(x.std(ddof=1)) / math.sqrt(len(x)) * (2.0 / (bounds[1] - bounds[0])) / (1.0 - u * u)
    half = float(stats.t.ppf(0.5 + level / 2, len(x) - 1)) * se_g
    g = math.atanh(u)
    lo, hi = math.tanh(g - half), math.tanh(g + half)
    scale = (bounds[1] - bounds[0]) / 2
    mid = (bounds[1] + bounds[0]) / 2
    return (mid + scale * lo, mid + scale * hi)


# ------------------------------------------------------------------------------ shares of pairs

def share_interval(hits: np.ndarray, totals: np.ndarray, level: float = 0.95,
                   replicates: np.ndarray | None = None) -> tuple[float, float]:
    """Korn–Graubard interval for a share of pairs pooled over users: Clopper–Pearson at the
    effective number of pairs of a cluster sample, adjusted for the degrees of freedom.

    ``hits[u]`` of ``totals[u]`` pairs of user u count; the share is p = Σhits / Σtotals. Pairs of
    one user are not independent, so (Korn & Graubard 1998) the exact binomial interval is taken at
    n* = p(1 − p)/SE² (Kish's effective size), SE the linearised ratio-estimator SE over users
    (or the SD of ``replicates``, bootstrap shares over users, when given), shrunk for the few users
    that SE rests on: n*_df = n* · (z / t_{users − 1})², with x* = p · n*_df "successes": lower
    bound the α/2 quantile of Beta(x*, n*_df − x* + 1), upper the 1 − α/2 quantile of
    Beta(x* + 1, n*_df − x*). n* is capped at the number of pairs (never more informative than
    independent pairs), which is also its value when p is 0 or 1 (SE 0). Of the intervals
    benchmarks/bench_tau_ci.py (section C) compared, this covered the population share nearest to
    95%; it stays in [0, 1] and contains the share. With few users no construction reaches 95%:
    :func:`share_coverage_note` says so beside the interval. NaN without pairs or with pairs from
    fewer than two users.
    """
    from scipy import stats

    hits = np.asarray(hits, float)
    totals = np.asarray(totals, float)
    n_pairs = float(totals.sum())
    if n_pairs <= 0:
        return (math.nan, math.nan)
    p = float(hits.sum()) / n_pairs
    users = int(np.count_nonzero(totals > 0))
    if users < 2:  # one user's pairs tell nothing about the spread between users
        return (math.nan, math.nan)
    if replicates is not None:
        se = sample_sd(replicates)
    else:
        resid = hits - p * totals
        se = math.sqrt(users / (users - 1) * float(np.sum(resid ** 2))) / n_pairs
    n_eff = n_pairs
    if math.isfinite(se) and se > 0 and 0 < p < 1:
        n_eff = min(n_pairs, p * (1 - p) / se ** 2)
    n_df = n_eff * (z_value(level) / float(stats.t.ppf(0.5 + level / 2, users - 1))) ** 2
    x = p * n_df
    alpha = 1 - level
    lo = 0.0 if x <= 0 else float(stats.beta.ppf(alpha / 2, x, n_df - x + 1))
    hi = 1.0 if x >= n_df else float(stats.beta.ppf(1 - alpha / 2, x + 1, n_df - x))
    return (min(lo, p), max(hi, p))  # Clopper–Pearson contains x/n; min/max only guard rounding
