"""Prediction-powered means (PPI++) of per-user metrics, one column per system or system pair.

Every function takes matrices with one column per quantity estimated (a system's metric, or the
difference of two systems' metrics) and one row per user, and returns a :class:`Means`: the
estimate, its standard error, the power-tuning λ, and the influence rows ``A`` whose column sums of
squares are the squared standard errors (the simultaneous intervals resample them).

Two targets:

- :func:`ppi_mean`: the mean of a superpopulation the n labelled users and the U unlabelled users
  are independent samples of. The formulas are ``ppi_py``'s (``ppi_mean_pointestimate`` and
  ``ppi_mean_ci`` with ``lam=None``, ``lam_optim_mode="overall"`` per column): λ = Cov_n(Y, f) /
  ((1 + n/U) Var_{n+U}(f)) clipped to [0, 1] (Cov with denominator n, Var with n + U − 1),
  θ = λ mean_U(f) + mean_n(Y − λf), se² = λ² Var_U(f)/U + Var_n(Y − λf)/n (denominators U and n).
- :func:`finite_mean`: the mean over the N users the LLM judged, the n human users a sample of them
  with inclusion probabilities π_i (uniform π = n/N by default). θ = λ mean_N(f) + r̄_w with
  r = Y − λf and r̄_w the Hájek mean Σ w r / Σ w (w = 1/π); se² = n/(n−1) Σ (1−π) w² (r − r̄_w)² /
  (Σ w)², which for uniform π is (1 − n/N) s_r²/n (s² with denominator n − 1); λ = the weighted
  regression slope of Y on f over the n, clipped to [0, 1] (λ = 0 gives the human-only estimate).
  Where the users' Y are themselves estimated from a sample of their pairs (Ŷ, variance v̂_i given
  the user, :mod:`recjudge.estimation.pools`), ``within`` adds the second stage Σ w v̂ / (Σ w)²
  (for uniform π: Σ v̂ / (n N)); the superpopulation formula needs no term, as s² of Ŷ holds it.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np
from scipy import stats

__all__ = ["Means", "ppi_mean", "finite_mean", "human_mean", "critical"]


@dataclass(frozen=True)
class Means:
    """Estimates of several means from the same users (one entry per column)."""

    estimate: np.ndarray
    se: np.ndarray
    lam: np.ndarray
    influence: np.ndarray  # rows: users (labelled, then unlabelled); se² = (influence ** 2).sum(0)
    df: int | None  # the t quantile's degrees of freedom; None: the normal quantile (ppi_py's)

    def interval(self, alpha: float, crit: float | None = None) -> tuple[np.ndarray, np.ndarray]:
        """(lo, hi) at level 1 − alpha, or with the critical value ``crit`` when given."""
        c = critical(alpha, self.df) if crit is None else crit
        return self.estimate - c * self.se, self.estimate + c * self.se


def critical(alpha: float, df: int | None) -> float:
    """The two-sided quantile: normal (df None) or Student's t with df degrees of freedom."""
    return float(stats.norm.ppf(1 - alpha / 2) if df is None else stats.t.ppf(1 - alpha / 2, df))


def _columns(x) -> np.ndarray:
    x = np.asarray(x, dtype=float)
    return x.reshape(-1, 1) if x.ndim == 1 else x


def ppi_mean(y, yhat, yhat_unlabeled, lam=None) -> Means:
    """PPI++ for a superpopulation mean, as ``ppi_py.ppi_mean_ci(Y, Yhat, Yhat_unlabeled, lam=lam)``
    column by column (normal quantile)."""
    y, f, fu = _columns(y), _columns(yhat), _columns(yhat_unlabeled)
    n, u = len(y), len(fu)
    if lam is None:
        cov = ((y - y.mean(0)) * (f - f.mean(0))).sum(0) / n
        pooled = np.concatenate([f, fu]).var(0, ddof=1)
        with np.errstate(divide="ignore", invalid="ignore"):
            lam = np.where(pooled > 0, cov / ((1 + n / u) * pooled), 0.0)
        lam = np.clip(lam, 0.0, 1.0)
    lam = np.broadcast_to(np.asarray(lam, dtype=float), (y.shape[1],)).copy()
    r = y - lam * f
    estimate = lam * fu.mean(0) + r.mean(0)
    influence = np.concatenate([(r - r.mean(0)) / n, lam * (fu - fu.mean(0)) / u])
    return Means(estimate, np.sqrt((influence ** 2).sum(0)), lam, influence, None)


def _weighted_slope(y: np.ndarray, f: np.ndarray, w: np.ndarray) -> np.ndarray:
    ww = w[:, None] / w.sum()
    yc, fc = y - (ww * y).sum(0), f - (ww * f).sum(0)
    num, den = (ww * yc * fc).sum(0), (ww * fc * fc).sum(0)
    with np.errstate(divide="ignore", invalid="ignore"):
        return np.clip(np.where(den > 1e-300, num / den, 0.0), 0.0, 1.0)


def finite_mean(y, yhat, yhat_all, pi=None, lam=None, within=None) -> Means:
    """The mean over the N users of ``yhat_all`` (rows: every user the LLM judged, the n labelled ones
    among them), from the n rows of ``y`` / ``yhat``; ``pi``: each labelled user's inclusion
    probability (default n/N); ``within``: the variance of each ``y`` given its user (n × columns),
    when ``y`` is estimated from part of the user's pairs. t quantile with n − 1 degrees of freedom."""
    y, f, fa = _columns(y), _columns(yhat), _columns(yhat_all)
    n, big_n = len(y), len(fa)
    pi = np.full(n, n / big_n) if pi is None else np.asarray(pi, dtype=float)
    w = 1.0 / pi
    if lam is None:
        lam = _weighted_slope(y, f, w)
    lam = np.broadcast_to(np.asarray(lam, dtype=float), (y.shape[1],)).copy()
    r = y - lam * f
    rbar = (w[:, None] * r).sum(0) / w.sum()
    estimate = lam * fa.mean(0) + rbar
    scale = np.sqrt(n / (n - 1) * (1 - pi)) * w / w.sum()
    influence = scale[:, None] * (r - rbar)
    if within is not None:
        influence = np.concatenate([influence, np.sqrt(w[:, None] * _columns(within)) / w.sum()])
    return Means(estimate, np.sqrt((influence ** 2).sum(0)), lam, influence, n - 1)


def human_mean(y, n_all: int | None, pi=None, within=None) -> Means:
    """The classical estimate from the human labels alone: over the N = ``n_all`` users (finite, with
    ``pi`` as in :func:`finite_mean`), or of a superpopulation (``n_all`` None: s/√n); t quantile."""
    y = _columns(y)
    n = len(y)
    if n_all is None:
        influence = (y - y.mean(0)) / np.sqrt(n * (n - 1))
        return Means(y.mean(0), np.sqrt((influence ** 2).sum(0)), np.zeros(y.shape[1]), influence, n - 1)
    return finite_mean(y, np.zeros_like(y), np.zeros((n_all, y.shape[1])), pi, lam=0.0, within=within)
