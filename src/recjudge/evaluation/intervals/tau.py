"""Intervals of Kendall's τ over users, one per ``--ci-method``, and the registry that names them."""

from __future__ import annotations

import math
from collections.abc import Callable
from typing import NamedTuple

import numpy as np

from .blocks import Replicates, bias_corrected, clipped, finite, fisher_z, jackknife_se, percentile, sample_sd, z_value

__all__ = ["TauMethod", "TAU_METHODS", "DEFAULT_TAU_METHOD", "tau_interval", "tau_normal"]


def tau_normal(r: Replicates, level: float = 0.95) -> tuple[float, float]:
    """τ̂ ± z·max(SE_jackknife, SE_bootstrap), clipped to [−1, 1] (the default).

    Each standard error fails in a known direction for τ of means, a step function of the data:
    the leave-one-user-out jackknife is inconsistent for such statistics (as for the median) and
    comes out near 0 when leaving one user out flips no pair of systems, while the bootstrap
    standard deviation misses the spread the near-tied pairs add. The larger of the two covered
    the population τ closest to nominal over the simulated grid. Always contains τ̂.
    """
    se = np.nanmax([jackknife_se(r.jackknife) if r.jackknife is not None else math.nan,
                    sample_sd(r.bootstrap)])
    if not (math.isfinite(r.estimate) and math.isfinite(se)):
        return (math.nan, math.nan)
    z = z_value(level)
    return clipped(r.estimate - z * se, r.estimate + z * se, (-1.0, 1.0))


def _tau_jackknife(r: Replicates, level: float) -> tuple[float, float]:
    """τ̂ ± z·SE_jackknife, clipped to [−1, 1] (Efron & Tibshirani 1993, §11)."""
    se = jackknife_se(r.jackknife)
    if not (math.isfinite(r.estimate) and math.isfinite(se)):
        return (math.nan, math.nan)
    z = z_value(level)
    return clipped(r.estimate - z * se, r.estimate + z * se, (-1.0, 1.0))


def _tau_jackknife_z(r: Replicates, level: float) -> tuple[float, float]:
    """tanh(atanh τ̂ ± z·SE), SE the jackknife's on the Fisher-z scale."""
    se = jackknife_se(fisher_z(r.jackknife, r.step)) if r.jackknife is not None else math.nan
    return _fisher_normal(r, se, level)


def _tau_bootstrap_z(r: Replicates, level: float) -> tuple[float, float]:
    """tanh(atanh τ̂ ± z·SD(atanh τ*)): a normal interval on the Fisher-z scale, SE from the bootstrap."""
    return _fisher_normal(r, sample_sd(fisher_z(finite(r.bootstrap), r.step)), level)


def _fisher_normal(r: Replicates, se: float, level: float) -> tuple[float, float]:
    if not (math.isfinite(r.estimate) and math.isfinite(se)):
        return (math.nan, math.nan)
    zt = float(fisher_z(r.estimate, r.step))
    z = z_value(level)
    return _reach(r.estimate, float(np.tanh(zt - z * se)), float(np.tanh(zt + z * se)))


def _reach(estimate: float, lo: float, hi: float) -> tuple[float, float]:
    """An interval built around atanh of an estimate of ±1 (pulled in to stay finite) still reaches it."""
    return (min(lo, estimate), max(hi, estimate))


def _tau_centred_percentile(r: Replicates, level: float) -> tuple[float, float]:
    """Percentile interval of atanh τ* moved so that its median sits on atanh τ̂ (the bootstrap's
    bias removed, its shape kept), mapped back with tanh."""
    t = fisher_z(finite(r.bootstrap), r.step)
    if len(t) == 0 or not math.isfinite(r.estimate):
        return (math.nan, math.nan)
    alpha = (1 - level) / 2
    lo, mid, hi = np.quantile(t, [alpha, 0.5, 1 - alpha])
    zt = float(fisher_z(r.estimate, r.step))
    return _reach(r.estimate, float(np.tanh(zt + lo - mid)), float(np.tanh(zt + hi - mid)))


def _tau_basic(r: Replicates, level: float) -> tuple[float, float]:
    """Basic (reverse percentile) interval on the Fisher-z scale, 2·atanh τ̂ − quantiles of atanh τ*
    (Davison & Hinkley 1997, eq. 5.6): corrects the bootstrap's bias by reflecting it."""
    t = fisher_z(finite(r.bootstrap), r.step)
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
