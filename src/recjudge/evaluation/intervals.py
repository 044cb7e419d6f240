"""Confidence intervals, each a pure function of an estimate and its replicates or values.

recjudge prints three kinds of interval; each construction here was chosen by the coverage it
achieved in simulation (``benchmarks/bench_tau_ci.py``), not by its name:

- Kendall's τ between two label sets' system rankings, users resampled (:data:`TAU_METHODS`). τ of
  system means is a step function of the data: a pair of systems closer than the users can
  resolve flips from resample to resample. That makes the bootstrap distribution biased (resampled
  τ sits below the sample τ), the sample τ itself biased below the population τ, and the
  leave-one-user-out jackknife erratic (too wide while many pairs are near-tied, too narrow when
  leaving one user out flips no pair). The default, :func:`tau_normal`, is centred on the sample
  τ with the larger of the jackknife and bootstrap standard errors and clipped to [−1, 1].
- A statistic averaged over N independent experiments (``recjudge ablate``): :func:`bounded_t`,
  a Student t-interval on the Fisher-z scale of the statistic's range, which never leaves it.
- A share of item pairs pooled over users (pairwise agreement): :func:`share_interval`, the
  Korn–Graubard interval (Clopper–Pearson at the effective number of pairs of a cluster sample),
  with :func:`share_coverage_note` where its measured coverage is below nominal (few users).

Every interval here contains its estimate, except the percentile, basic, BC and BCa intervals
of τ, kept so that their coverage can be compared (``--ci-method``).
"""

from __future__ import annotations

import math
from collections.abc import Callable, Sequence
from typing import NamedTuple

import numpy as np

__all__ = [
    "Replicates",
    "TauMethod",
    "TAU_METHODS",
    "DEFAULT_TAU_METHOD",
    "tau_interval",
    "coverage_note",
    "coverage_summary",
    "DOCS_POINTER",
    "NO_RESAMPLES",
    "TAU_COVERAGE",
    "USER_BANDS",
    "BIAS_BANDS",
    "percentile",
    "bias_corrected",
    "jackknife_se",
    "tau_normal",
    "bounded_t",
    "share_interval",
    "share_coverage_note",
    "share_coverage_summary",
    "SHARE_COVERAGE",
    "fisher_z",
]


def _z(level: float) -> float:
    from statistics import NormalDist

    return NormalDist().inv_cdf(0.5 + level / 2)


def _finite(values) -> np.ndarray:
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
        t = _finite(self.bootstrap)
        if len(t) < 2 or not math.isfinite(self.estimate):
            return math.nan
        sd = float(t.std(ddof=1))
        return (self.estimate - float(t.mean())) / sd if sd > 0 else math.nan


# ------------------------------------------------------------------------------ building blocks

def percentile(replicates, level: float = 0.95) -> tuple[float, float]:
    """Percentile interval: the (1 ± level)/2 quantiles of the replicates (linear, as numpy)."""
    t = _finite(replicates)
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
    t = _finite(replicates)
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
        jk = _finite(jackknife)
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
    jk = _finite(values)
    n = len(jk)
    if n < 2:
        return math.nan
    return float(math.sqrt((n - 1) / n * float(np.sum((jk - jk.mean()) ** 2))))


def fisher_z(values, step: float = 0.0) -> np.ndarray:
    """atanh of values in [−1, 1]. ±1 would be infinite: with ``step`` (the statistic's resolution)
    they are pulled in by half a step, else by 1e-12."""
    limit = 1.0 - (step / 2 if step > 0 else 1e-12)
    return np.arctanh(np.clip(np.asarray(values, float), -limit, limit))


def _clip(lo: float, hi: float, bounds: tuple[float, float]) -> tuple[float, float]:
    return (float(max(bounds[0], lo)), float(min(bounds[1], hi)))


# ------------------------------------------------------------------------------ τ over users

def tau_normal(r: Replicates, level: float = 0.95) -> tuple[float, float]:
    """τ̂ ± z·max(SE_jackknife, SE_bootstrap), clipped to [−1, 1] (the default).

    Each standard error fails in a known direction for τ of means, a step function of the data:
    the leave-one-user-out jackknife is inconsistent for such statistics (as for the median) and
    comes out near 0 when leaving one user out flips no pair of systems, while the bootstrap
    standard deviation misses the spread the near-tied pairs add. The larger of the two covered
    the population τ closest to nominal over the simulated grid. Always contains τ̂.
    """
    se = np.nanmax([jackknife_se(r.jackknife) if r.jackknife is not None else math.nan,
                    _sd(r.bootstrap)])
    if not (math.isfinite(r.estimate) and math.isfinite(se)):
        return (math.nan, math.nan)
    z = _z(level)
    return _clip(r.estimate - z * se, r.estimate + z * se, (-1.0, 1.0))


def _sd(values) -> float:
    t = _finite(values)
    return float(t.std(ddof=1)) if len(t) > 1 else math.nan


def _tau_jackknife(r: Replicates, level: float) -> tuple[float, float]:
    """τ̂ ± z·SE_jackknife, clipped to [−1, 1] (Efron & Tibshirani 1993, §11)."""
    se = jackknife_se(r.jackknife)
    if not (math.isfinite(r.estimate) and math.isfinite(se)):
        return (math.nan, math.nan)
    z = _z(level)
    return _clip(r.estimate - z * se, r.estimate + z * se, (-1.0, 1.0))


def _tau_jackknife_z(r: Replicates, level: float) -> tuple[float, float]:
    """tanh(atanh τ̂ ± z·SE), SE the jackknife's on the Fisher-z scale."""
    se = jackknife_se(fisher_z(r.jackknife, r.step)) if r.jackknife is not None else math.nan
    return _fisher_normal(r, se, level)


def _tau_bootstrap_z(r: Replicates, level: float) -> tuple[float, float]:
    """tanh(atanh τ̂ ± z·SD(atanh τ*)): a normal interval on the Fisher-z scale, SE from the bootstrap."""
    return _fisher_normal(r, _sd(fisher_z(_finite(r.bootstrap), r.step)), level)


def _fisher_normal(r: Replicates, se: float, level: float) -> tuple[float, float]:
    if not (math.isfinite(r.estimate) and math.isfinite(se)):
        return (math.nan, math.nan)
    zt = float(fisher_z(r.estimate, r.step))
    z = _z(level)
    return _reach(r.estimate, float(np.tanh(zt - z * se)), float(np.tanh(zt + z * se)))


def _reach(estimate: float, lo: float, hi: float) -> tuple[float, float]:
    """An interval built around atanh of an estimate of ±1 (pulled in to stay finite) still reaches it."""
    return (min(lo, estimate), max(hi, estimate))


def _tau_centred_percentile(r: Replicates, level: float) -> tuple[float, float]:
    """Percentile interval of atanh τ* moved so that its median sits on atanh τ̂ (the bootstrap's
    bias removed, its shape kept), mapped back with tanh."""
    t = fisher_z(_finite(r.bootstrap), r.step)
    if len(t) == 0 or not math.isfinite(r.estimate):
        return (math.nan, math.nan)
    alpha = (1 - level) / 2
    lo, mid, hi = np.quantile(t, [alpha, 0.5, 1 - alpha])
    zt = float(fisher_z(r.estimate, r.step))
    return _reach(r.estimate, float(np.tanh(zt + lo - mid)), float(np.tanh(zt + hi - mid)))


def _tau_basic(r: Replicates, level: float) -> tuple[float, float]:
    """Basic (reverse percentile) interval on the Fisher-z scale, 2·atanh τ̂ − quantiles of atanh τ*
    (Davison & Hinkley 1997, eq. 5.6): corrects the bootstrap's bias by reflecting it."""
    t = fisher_z(_finite(r.bootstrap), r.step)
    if len(t) == 0 or not math.isfinite(r.estimate):
        return (math.nan, math.nan)
    alpha = (1 - level) / 2
    lo, hi = np.quantile(t, [alpha, 1 - alpha])
    zt = float(fisher_z(r.estimate, r.step))
    return (float(np.tanh(2 * zt - hi)), float(np.tanh(2 * zt - lo)))


class TauMethod(NamedTuple):
    name: str
    build: Callable[[Replicates, float], tuple[float, float]]
    jackknife: bool          # needs the leave-one-user-out values
    contains_estimate: bool  # by construction
    description: str


TAU_METHODS: dict[str, TauMethod] = {m.name: m for m in (
    TauMethod("normal", tau_normal, True, True,
              "τ ± z·max(jackknife SE, bootstrap SE), clipped to [−1, 1]"),
    TauMethod("jackknife", _tau_jackknife, True, True,
              "τ ± z·jackknife SE (leave one user out), clipped to [−1, 1]"),
    TauMethod("jackknife-z", _tau_jackknife_z, True, True, "normal on the Fisher-z scale, jackknife SE"),
    TauMethod("bootstrap-z", _tau_bootstrap_z, False, True, "normal on the Fisher-z scale, bootstrap SE"),
    TauMethod("centred-percentile", _tau_centred_percentile, False, True,
              "bootstrap percentiles on the Fisher-z scale, median moved onto the estimate"),
    TauMethod("basic", _tau_basic, False, False, "basic (reverse percentile) bootstrap on the Fisher-z scale"),
    TauMethod("percentile", lambda r, level: percentile(r.bootstrap, level), False, False,
              "bootstrap percentile"),
    TauMethod("BC", lambda r, level: bias_corrected(r.bootstrap, r.estimate, level), False, False,
              "bias-corrected bootstrap percentile"),
    TauMethod("BCa", lambda r, level: bias_corrected(r.bootstrap, r.estimate, level, r.jackknife), True, False,
              "bias-corrected and accelerated bootstrap (Efron & Tibshirani 1993, §14.3)"),
)}
DEFAULT_TAU_METHOD = "normal"


def tau_interval(method: str, r: Replicates, level: float = 0.95) -> tuple[float, float]:
    """The ``method`` interval (a key of :data:`TAU_METHODS`) from ``r``."""
    return TAU_METHODS[method].build(r, level)


# Measured coverage of the population τ by 95% intervals (benchmarks/bench_tau_ci.py --constants):
# method → {(user band, bias band): (share covered, replications pooled over the grid; the lowest
# share of one simulated population with at least 50 replications in that band)}. User bands: users
# per label set below 25, 25–49, 50–199, 200–999, 1,000 and more; bias bands: |bootstrap_bias_sd|
# below 0.5, 0.5–1, 1–1.5, 1.5 and more standard deviations.
USER_BANDS = (25, 50, 200, 1000)
BIAS_BANDS = (0.5, 1.0, 1.5)
# said beside the interval: pooled coverage below NOMINAL_LOW, or one simulated population's below
# LOWEST_LOW (lower, as a share over 50–500 replications carries a few points of Monte Carlo error)
NOMINAL_LOW = 0.93
LOWEST_LOW = 0.90
TAU_COVERAGE: dict[str, dict[tuple[int, int], tuple[float, float]]] = {
    "normal": {
        (1, 0): (0.860, 0.512), (1, 1): (0.838, 0.689), (1, 2): (0.666, 0.000), (1, 3): (0.344, 0.000),
        (2, 0): (0.983, 0.845), (2, 1): (0.965, 0.965), (2, 2): (0.854, 0.450), (2, 3): (0.429, 0.011),
        (3, 0): (0.998, 0.988), (3, 1): (0.999, 0.993), (3, 2): (0.995, 1.000), (3, 3): (0.983, 0.940),
        (4, 0): (0.994, 0.977), (4, 1): (0.983, 0.929), (4, 2): (0.975, 0.974), (4, 3): (0.995, 1.000),
    },
    "jackknife": {
        (1, 0): (0.860, 0.512), (1, 1): (0.837, 0.689), (1, 2): (0.666, 0.000), (1, 3): (0.344, 0.000),
        (2, 0): (0.983, 0.845), (2, 1): (0.965, 0.965), (2, 2): (0.854, 0.450), (2, 3): (0.429, 0.011),
        (3, 0): (0.996, 0.988), (3, 1): (0.998, 0.993), (3, 2): (0.993, 0.988), (3, 3): (0.983, 0.940),
        (4, 0): (0.831, 0.670), (4, 1): (0.846, 0.658), (4, 2): (0.888, 0.597), (4, 3): (0.979, 1.000),
    },
    "jackknife-z": {
        (1, 0): (0.732, 0.000), (1, 1): (0.672, 0.030), (1, 2): (0.515, 0.000), (1, 3): (0.265, 0.000),
        (2, 0): (0.896, 0.232), (2, 1): (0.881, 0.493), (2, 2): (0.778, 0.258), (2, 3): (0.365, 0.000),
        (3, 0): (0.992, 0.947), (3, 1): (0.991, 0.942), (3, 2): (0.961, 0.859), (3, 3): (0.797, 0.417),
        (4, 0): (0.832, 0.677), (4, 1): (0.847, 0.671), (4, 2): (0.892, 0.611), (4, 3): (0.981, 1.000),
    },
    "bootstrap-z": {
        (1, 0): (0.393, 0.000), (1, 1): (0.415, 0.000), (1, 2): (0.310, 0.000), (1, 3): (0.115, 0.000),
        (2, 0): (0.556, 0.000), (2, 1): (0.576, 0.000), (2, 2): (0.465, 0.000), (2, 3): (0.165, 0.000),
        (3, 0): (0.797, 0.070), (3, 1): (0.790, 0.338), (3, 2): (0.747, 0.000), (3, 3): (0.226, 0.000),
        (4, 0): (0.891, 0.075), (4, 1): (0.821, 0.100), (4, 2): (0.723, 0.108), (4, 3): (0.748, 0.662),
    },
    "centred-percentile": {
        (1, 0): (0.413, 0.000), (1, 1): (0.418, 0.000), (1, 2): (0.312, 0.000), (1, 3): (0.119, 0.000),
        (2, 0): (0.592, 0.000), (2, 1): (0.592, 0.000), (2, 2): (0.478, 0.000), (2, 3): (0.169, 0.000),
        (3, 0): (0.837, 0.244), (3, 1): (0.824, 0.391), (3, 2): (0.765, 0.000), (3, 3): (0.222, 0.000),
        (4, 0): (0.884, 0.083), (4, 1): (0.815, 0.120), (4, 2): (0.683, 0.183), (4, 3): (0.764, 0.716),
    },
    "basic": {
        (1, 0): (0.413, 0.000), (1, 1): (0.548, 0.000), (1, 2): (0.430, 0.000), (1, 3): (0.255, 0.000),
        (2, 0): (0.549, 0.000), (2, 1): (0.679, 0.000), (2, 2): (0.564, 0.058), (2, 3): (0.296, 0.000),
        (3, 0): (0.759, 0.047), (3, 1): (0.801, 0.460), (3, 2): (0.712, 0.054), (3, 3): (0.363, 0.062),
        (4, 0): (0.861, 0.120), (4, 1): (0.721, 0.320), (4, 2): (0.619, 0.570), (4, 3): (0.679, 0.732),
    },
    "percentile": {
        (1, 0): (0.396, 0.000), (1, 1): (0.276, 0.000), (1, 2): (0.147, 0.000), (1, 3): (0.034, 0.000),
        (2, 0): (0.576, 0.000), (2, 1): (0.438, 0.000), (2, 2): (0.287, 0.000), (2, 3): (0.054, 0.000),
        (3, 0): (0.845, 0.256), (3, 1): (0.735, 0.152), (3, 2): (0.563, 0.000), (3, 3): (0.150, 0.000),
        (4, 0): (0.902, 0.045), (4, 1): (0.824, 0.000), (4, 2): (0.618, 0.000), (4, 3): (0.168, 0.005),
    },
    "BC": {
        (1, 0): (0.457, 0.000), (1, 1): (0.512, 0.000), (1, 2): (0.310, 0.000), (1, 3): (0.069, 0.000),
        (2, 0): (0.641, 0.000), (2, 1): (0.695, 0.014), (2, 2): (0.477, 0.000), (2, 3): (0.080, 0.000),
        (3, 0): (0.854, 0.430), (3, 1): (0.860, 0.659), (3, 2): (0.684, 0.011), (3, 3): (0.123, 0.000),
        (4, 0): (0.902, 0.211), (4, 1): (0.783, 0.420), (4, 2): (0.549, 0.280), (4, 3): (0.389, 0.303),
    },
    "BCa": {
        (1, 0): (0.447, 0.000), (1, 1): (0.510, 0.000), (1, 2): (0.310, 0.000), (1, 3): (0.070, 0.000),
        (2, 0): (0.637, 0.000), (2, 1): (0.696, 0.014), (2, 2): (0.477, 0.000), (2, 3): (0.080, 0.000),
        (3, 0): (0.851, 0.419), (3, 1): (0.860, 0.652), (3, 2): (0.684, 0.011), (3, 3): (0.123, 0.000),
        (4, 0): (0.901, 0.211), (4, 1): (0.783, 0.420), (4, 2): (0.547, 0.280), (4, 3): (0.389, 0.303),
    },
}

def _band(value: float, edges: Sequence[float]) -> int:
    return int(np.searchsorted(np.asarray(edges, float), value, side="right"))


def _band_text(i: int, edges: Sequence[float], unit: str, integer: bool) -> str:
    if i == 0:
        return f"fewer than {edges[0]:g}{unit}" if integer else f"under {edges[0]:g}{unit}"
    if i == len(edges):
        return f"{edges[-1]:,g}{unit} or more"
    hi = edges[i] - 1 if integer else edges[i]
    return f"{edges[i - 1]:g}–{hi:g}{unit}"


# where the measured coverages and what they mean are explained; every one-line summary points there
DOCS_POINTER = "see docs: statistics"
NO_RESAMPLES = "no interval (0 resamples)"  # printed where an interval would be with no bootstrap resample


def _tau_coverage(method: str, n_users: int, bias_sd: float, level: float):
    """(pooled, lowest, users band text, bias band text) of :data:`TAU_COVERAGE`, or None when not measured
    (another level or method); pooled NaN below the simulated users."""
    if level != 0.95 or method not in TAU_METHODS:
        return None
    bias = 0.0 if not math.isfinite(bias_sd) else abs(bias_sd)
    ub, bb = _band(n_users, USER_BANDS), _band(bias, BIAS_BANDS)
    users = _band_text(ub, USER_BANDS, " users", True)
    if ub == 0:
        return (math.nan, math.nan, users, "")
    pooled, lowest = TAU_COVERAGE.get(method, {}).get((ub, bb), (math.nan, math.nan))
    return (pooled, lowest, users, _band_text(bb, BIAS_BANDS, " SD", False))


def _flagged(pooled: float, lowest: float) -> bool:
    return pooled < NOMINAL_LOW or lowest < LOWEST_LOW


def coverage_note(method: str, n_users: int, bias_sd: float, level: float = 0.95) -> tuple[float, str]:
    """(measured coverage, note) for a ``method`` τ interval from ``n_users`` users per label set whose
    resampled τ sits ``bias_sd`` standard deviations from the estimate. The coverage is the pooled
    share of :data:`TAU_COVERAGE`; the note is empty when both it and the lowest simulated
    population's are near nominal (:data:`NOMINAL_LOW`, :data:`LOWEST_LOW`), and otherwise says what
    was measured and what it means (:func:`coverage_summary` says it in one line)."""
    found = _tau_coverage(method, n_users, bias_sd, level)
    if found is None:
        return (math.nan, "")
    pooled, lowest, users, bias = found
    if not bias and math.isnan(pooled):
        return (math.nan, f"coverage unknown: {users} per label set, fewer than any case simulated "
                          "(benchmarks/bench_tau_ci.py); read the interval as the spread of the sample τ only")
    if math.isnan(pooled) or not _flagged(pooled, lowest):
        return (pooled, "")
    where = f"{users} per label set, resampled τ {bias} below the estimate"
    return (pooled, f"may under-cover: in simulation ({where}) {pooled:.0%} of such 95% intervals covered the "
                    f"population τ over all simulated populations, only {lowest:.0%} for the worst one "
                    "(benchmarks/bench_tau_ci.py); system pairs closer than the users resolve bias the sample τ "
                    "below the population τ")


def coverage_summary(method: str, n_users: int, bias_sd: float, level: float = 0.95) -> str:
    """The line printed under a table for an interval :func:`coverage_note` flags ('' when it flags
    none): the measured coverage, the worst simulated population's, and where the docs explain it."""
    found = _tau_coverage(method, n_users, bias_sd, level)
    if found is None:
        return ""
    pooled, lowest, users, bias = found
    if not bias and math.isnan(pooled):
        return f"coverage unknown: {users} per label set, none simulated — {DOCS_POINTER}"
    if math.isnan(pooled) or not _flagged(pooled, lowest):
        return ""
    return f"may under-cover: {pooled:.0%} in simulation, worst {lowest:.0%} — {DOCS_POINTER}"


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
    x = _finite(values)
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
        se = _sd(replicates)
    else:
        resid = hits - p * totals
        se = math.sqrt(users / (users - 1) * float(np.sum(resid ** 2))) / n_pairs
    n_eff = n_pairs
    if math.isfinite(se) and se > 0 and 0 < p < 1:
        n_eff = min(n_pairs, p * (1 - p) / se ** 2)
    n_df = n_eff * (_z(level) / float(stats.t.ppf(0.5 + level / 2, users - 1))) ** 2
    x = p * n_df
    alpha = 1 - level
    lo = 0.0 if x <= 0 else float(stats.beta.ppf(alpha / 2, x, n_df - x + 1))
    hi = 1.0 if x >= n_df else float(stats.beta.ppf(1 - alpha / 2, x + 1, n_df - x))
    return (min(lo, p), max(hi, p))  # Clopper–Pearson contains x/n; min/max only guard rounding


# Measured coverage of the population share by 95% share_interval's (benchmarks/bench_tau_ci.py
# --sections C --share-constants): users with pairs → (coverage pooled over the simulated
# populations, the lowest population's). The band of n users is the largest simulated number ≤ n
# (coverage grows with the users, so the band's figure is the conservative one).
SHARE_COVERAGE: dict[int, tuple[float, float]] = {
    5: (0.923, 0.859), 10: (0.916, 0.864), 25: (0.934, 0.903), 50: (0.942, 0.925), 200: (0.949, 0.934),
}


def _share_coverage(n_users: int, level: float):
    """(band, pooled, lowest) of :data:`SHARE_COVERAGE` for ``n_users`` (band 0 and NaN below the
    simulated users), or None when not measured."""
    if level != 0.95 or not SHARE_COVERAGE or n_users < 2:
        return None
    simulated = sorted(SHARE_COVERAGE)
    if n_users < simulated[0]:
        return (0, math.nan, math.nan)
    band = max(n for n in simulated if n <= n_users)
    return (band, *SHARE_COVERAGE[band])


def share_coverage_note(n_users: int, level: float = 0.95) -> tuple[float, str]:
    """(measured coverage, note) for a 95% :func:`share_interval` from ``n_users`` users with pairs:
    the note is empty when the pooled coverage of :data:`SHARE_COVERAGE` is at least
    :data:`NOMINAL_LOW`, and otherwise says what was measured and why (:func:`share_coverage_summary`
    says it in one line)."""
    found = _share_coverage(n_users, level)
    if found is None:
        return (math.nan, "")
    band, pooled, lowest = found
    if band == 0:
        return (math.nan, f"coverage unknown: {n_users} users, fewer than any case simulated "
                          f"({min(SHARE_COVERAGE)}; benchmarks/bench_tau_ci.py section C); few users say little about "
                          "how agreement varies between users, so the true share may lie well outside the interval")
    if pooled >= NOMINAL_LOW:
        return (pooled, "")
    return (pooled, f"may under-cover: {n_users} users; in simulation {pooled:.0%} of such 95% intervals from "
                    f"{band} users covered the population share ({lowest:.0%} for the worst simulated population; "
                    "benchmarks/bench_tau_ci.py section C): a user's pairs are not independent, and few users say "
                    "little about how agreement varies between users")


def share_coverage_summary(n_users: int, level: float = 0.95) -> str:
    """The one line printed for an interval :func:`share_coverage_note` flags ('' when it flags none)."""
    found = _share_coverage(n_users, level)
    if found is None:
        return ""
    band, pooled, lowest = found
    if band == 0:
        return f"coverage unknown: {n_users} users, fewer than simulated — {DOCS_POINTER}"
    if pooled >= NOMINAL_LOW:
        return ""
    return f"may under-cover: {pooled:.0%} in simulation, worst {lowest:.0%} — {DOCS_POINTER}"
