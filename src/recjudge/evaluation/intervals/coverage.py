"""The coverage each interval achieved in simulation (benchmarks/bench_tau_ci.py), and the notes printed beside it."""

from __future__ import annotations

import math
from collections.abc import Sequence

import numpy as np

from .tau import TAU_METHODS

__all__ = ["TAU_COVERAGE", "USER_BANDS", "BIAS_BANDS", "NOMINAL_LOW", "LOWEST_LOW", "coverage_note",
           "coverage_summary", "SHARE_COVERAGE", "share_coverage_note", "share_coverage_summary", "DOCS_POINTER",
           "NO_RESAMPLES", "CI_FLAG"]


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
CI_FLAG = "*"  # beside an interval whose measured coverage is below nominal; the note follows the table


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
