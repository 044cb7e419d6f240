"""How many human-judged users to buy: from the pilot (the n users judged both ways), the users (and
labels, and their cost) a target interval half-width or the separation of a pair of systems needs.

Per system (or pair) the pilot gives the residual variance s_r² = Var(Y − λf) at its λ (the power
the LLM labels add) and, for a superpopulation, the imputed part λ² Var(f)/U. The half-width with n
human users is c · se(n), se(n)² = (1/n − 1/N) s_r² over the N users the LLM judged (s_r²/n +
λ² Var(f)/U for a superpopulation), c the t quantile (n − 1 degrees of freedom). Separating a pair
whose difference is δ with power β needs |δ| ≥ (c + z_β) se(n) (a marginal, two-sided test at the
command's level; the simultaneous intervals over all pairs need more). λ and the variances are the
pilot's: the plan is as good as the pilot is large.
"""

from __future__ import annotations

import math
from dataclasses import dataclass

import numpy as np
from scipy import stats

__all__ = ["Pilot", "pilot", "users_for_se", "users_for_width", "users_to_separate"]


@dataclass(frozen=True)
class Pilot:
    """What the plan needs of one quantity (a system's mean or a pair's difference)."""

    residual_var: float  # s_r² over the pilot's human users, at the pilot's λ
    imputed_var: float   # λ² Var(f) / U (0 for the N users the LLM judged)
    n_all: int | None    # N for the finite population, None for a superpopulation


def pilot(y: np.ndarray, f: np.ndarray, lam: float, n_all: int | None, imputed_var: float = 0.0) -> Pilot:
    return Pilot(float(np.var(y - lam * f, ddof=1)), imputed_var, n_all)


def users_for_se(p: Pilot, se: float) -> float:
    """The (real) n with se(n) = se; inf where no n reaches it."""
    if p.residual_var <= 0:
        return 1.0
    room = se ** 2 - p.imputed_var
    if room <= 0:
        return math.inf
    inv = room / p.residual_var + (0.0 if p.n_all is None else 1.0 / p.n_all)
    return 1.0 / inv


def _solve(p: Pilot, target: float, quantile) -> int | None:
    """The least n ≥ 2 with quantile(n) · se(n) ≤ target (fixed point over the t quantile's df)."""
    n = 2.0
    for _ in range(50):
        need = users_for_se(p, target / quantile(max(n, 2.0)))
        if not math.isfinite(need):
            return None
        need = max(2.0, math.ceil(need - 1e-9))
        if need == n:
            break
        n = need
    if p.n_all is not None and n > p.n_all:
        return None
    return int(n)


def users_for_width(p: Pilot, half_width: float, alpha: float) -> int | None:
    """Human users for an interval of ``half_width`` at level 1 − alpha (None: not reachable)."""
    return _solve(p, half_width, lambda n: stats.t.ppf(1 - alpha / 2, n - 1))


def users_to_separate(p: Pilot, delta: float, alpha: float, power: float) -> int | None:
    """Human users for a pair whose difference is ``delta`` to be told apart with ``power``."""
    if delta == 0:
        return None
    z_power = stats.norm.ppf(power)
    return _solve(p, abs(delta), lambda n: stats.t.ppf(1 - alpha / 2, n - 1) + z_power)
