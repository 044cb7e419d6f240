"""Kendall's τ-b between two label sets' system means over users: bootstrap resamples, jackknife, and its interval."""

from __future__ import annotations

import math
from collections.abc import Iterator
from typing import TYPE_CHECKING, NamedTuple

import numpy as np
import pandas as pd

from ...errors import ConfigError
from ..intervals import (
    DEFAULT_TAU_METHOD,
    TAU_METHODS,
    Replicates,
    coverage_note,
    coverage_summary,
    tau_interval,
)
from .ranks import MEAN_DECIMALS

if TYPE_CHECKING:
    from .ranks import SystemTable

__all__ = ["BootstrapWeights", "TauInterval", "kendall_tau_interval", "kendall_tau_replicates",
           "jackknife_kendall_tau", "check_ci_method"]


def _pair_signs(means: np.ndarray) -> np.ndarray:
    """sign(x_i − x_j) for all system pairs i < j, along the last axis."""
    i, j = np.triu_indices(means.shape[-1], k=1)
    return np.sign(means[..., i] - means[..., j])


def _tau_b_rows(x: np.ndarray, y: np.ndarray) -> np.ndarray:
    """τ-b for each row pair of two (B, S) matrices: Σ s_x s_y / sqrt(Σ s_x² · Σ s_y²)."""
    sx, sy = _pair_signs(x), _pair_signs(y)
    num = np.einsum("bp,bp->b", sx, sy)
    den = np.sqrt(np.einsum("bp,bp->b", sx, sx) * np.einsum("bp,bp->b", sy, sy))
    with np.errstate(invalid="ignore", divide="ignore"):
        return np.where(den > 0, num / den, np.nan)


class BootstrapWeights:
    """The resamples of one seed over one set of users: each user's count in each resample.

    Drawn once and shared by every measure compared over those users (a seed gives the same draws
    whichever measure asks for them), and kept as the smallest unsigned integers that hold them.
    """

    def __init__(self, seed: int, n_users: int, n_resamples: int, chunk: int = 200):
        self.seed, self.n_users, self.n_resamples, self.chunk = seed, n_users, n_resamples, chunk
        self._chunks: list[np.ndarray] | None = None

    @classmethod
    def over(cls, reference: SystemTable, candidate: SystemTable, seed: int, n_resamples: int
             ) -> BootstrapWeights | None:
        """The resamples :func:`kendall_tau_interval` draws for every measure of two tables (whose
        matrices share their users), or None without resamples."""
        if n_resamples <= 0 or not reference.matrices:
            return None
        first = next(iter(reference.matrices))
        users = reference.matrices[first].index.union(candidate.matrices[first].index)
        return cls(seed, len(users), n_resamples)

    def chunks(self) -> Iterator[np.ndarray]:
        """The resamples ``chunk`` at a time, as float64 (resamples × users)."""
        if self._chunks is None:
            rng = np.random.default_rng(self.seed)
            stored = []
            for start in range(0, self.n_resamples, self.chunk):
                w = rng.multinomial(self.n_users, np.full(self.n_users, 1.0 / self.n_users),
                                    size=min(self.chunk, self.n_resamples - start))
                stored.append(w.astype(np.min_scalar_type(int(w.max(initial=0)))))
            self._chunks = stored
        for w in self._chunks:
            yield w.astype(np.float64)


def _weighted_means(weights: np.ndarray, matrix: np.ndarray, present: np.ndarray | None = None) -> np.ndarray:
    """Per-resample system means; NaN cells (user not in this label set) carry no weight.

    ``present`` (``~isnan(matrix)``, when the caller has it) with no False: every weight counts, and
    the denominators are the row sums, exactly what the product with ones gives (integer counts).
    """
    if present is None:
        present = ~np.isnan(matrix)
    if present.all():
        num = weights @ matrix
        den = weights.sum(axis=1)[:, None]
    else:
        num = weights @ np.where(present, matrix, 0.0)
        den = weights @ present.astype(np.float64)
    with np.errstate(invalid="ignore", divide="ignore"):
        return np.round(num / den, MEAN_DECIMALS)


def _jackknife_means(matrix: np.ndarray) -> np.ndarray:
    """(U, S) system means with user u left out, for every u at once; NaN cells carry no weight."""
    present = ~np.isnan(matrix)
    values = np.where(present, matrix, 0.0)
    num = values.sum(axis=0)[None, :] - values
    den = present.sum(axis=0)[None, :] - present
    with np.errstate(invalid="ignore", divide="ignore"):
        return np.round(num / den, MEAN_DECIMALS)


def jackknife_kendall_tau(reference: np.ndarray, candidate: np.ndarray, chunk: int = 500) -> np.ndarray:
    """τ-b of system means with each user left out in turn: (U,) for two (U, S) user × system
    arrays over the same users (NaN = user not judged). Vectorised: no loop over users in Python
    beyond chunks of ``chunk`` rows, so 10,000 users cost one pass of pair signs."""
    ref_jk, cand_jk = _jackknife_means(reference), _jackknife_means(candidate)
    out = [_tau_b_rows(ref_jk[i:i + chunk], cand_jk[i:i + chunk]) for i in range(0, len(ref_jk), chunk)]
    return np.concatenate(out) if out else np.empty(0)


def check_ci_method(method: str) -> None:
    """Refuse a ``method`` that is no key of :data:`recjudge.evaluation.intervals.TAU_METHODS`."""
    if method not in TAU_METHODS:
        raise ConfigError(f"CI method must be one of {', '.join(TAU_METHODS)}, not {method!r}")


def kendall_tau_replicates(reference: np.ndarray, candidate: np.ndarray, weights: BootstrapWeights,
                           jackknife: bool = True) -> Replicates:
    """τ-b of the system means of two (U, S) user × system arrays over the same users (NaN: user not
    judged by that label set), its bootstrap replicates over ``weights`` (resamples of those users)
    and, with ``jackknife``, its leave-one-user-out values. Vectorised over the matrices: no measure
    is recomputed. The estimate goes through the replicates' own arithmetic, so "equal" means equal."""
    if weights.n_users != len(reference):
        raise ConfigError("bootstrap weights drawn for another seed, user set or number of resamples")
    ref_present, cand_present = ~np.isnan(reference), ~np.isnan(candidate)
    taus = [_tau_b_rows(_weighted_means(w, reference, ref_present), _weighted_means(w, candidate, cand_present))
            for w in weights.chunks()]
    t = np.concatenate(taus) if taus else np.empty(0)
    ones = np.ones((1, len(reference)))
    estimate = float(_tau_b_rows(_weighted_means(ones, reference), _weighted_means(ones, candidate))[0])
    n_pairs = reference.shape[1] * (reference.shape[1] - 1) // 2
    return Replicates(estimate, t[~np.isnan(t)], jackknife_kendall_tau(reference, candidate) if jackknife else None,
                      2.0 / n_pairs if n_pairs else 0.0)


class TauInterval(NamedTuple):
    """A confidence interval of τ-b over users, with what a reader needs to judge it."""

    low: float
    high: float
    method: str
    level: float
    bootstrap_bias_sd: float  # (τ − mean resampled τ) / SD of resampled τ; large: near-tied system pairs
    n_users: int              # the fewer users of the two label sets (what the coverage note is read at)
    coverage: float           # measured coverage of such intervals in simulation (NaN: not measured)
    note: str                 # "" when the measured coverage is near nominal, else what to make of it
    summary: str = ""         # the note in one line, as printed under a table

    @property
    def bounds(self) -> tuple[float, float]:
        return (self.low, self.high)


def kendall_tau_interval(reference: pd.DataFrame, candidate: pd.DataFrame, n_resamples: int = 1000,
                         seed: int = 0, level: float = 0.95, chunk: int = 200,
                         method: str = DEFAULT_TAU_METHOD, weights: BootstrapWeights | None = None) -> TauInterval:
    """Confidence interval of τ-b between system means, resampling users with replacement.

    ``reference`` and ``candidate`` are user × system matrices (same columns). Users are the union
    of both indexes; a user missing from one matrix counts for the other only. ``method`` is a key
    of :data:`recjudge.evaluation.intervals.TAU_METHODS`; the default, ``"normal"``, is the one whose
    coverage of the population τ came closest to nominal in ``benchmarks/bench_tau_ci.py`` among
    those that always contain the estimate. τ of resampled means is biased downward — resampling
    adds noise to both rankings — and so is the sample τ against the population's; when the bias is
    large the percentile interval can exclude the estimate and BCa collapses above it (on 63 TREC
    runs τ 0.897 gave BCa [0.905, 0.913]). ``note`` says when the measured coverage at this many
    users and this bootstrap bias is below nominal.

    ``weights``: the resamples of this seed over these users, when the caller compares several
    measures over them (:class:`BootstrapWeights`; the same numbers, drawn once).
    """
    check_ci_method(method)
    users = reference.index.union(candidate.index)
    n_users = min(len(reference.index), len(candidate.index))
    if n_resamples <= 0:
        return TauInterval(math.nan, math.nan, method, level, math.nan, n_users, math.nan, "")
    cols = list(reference.columns)
    ref = reference.reindex(index=users, columns=cols).to_numpy(np.float64)
    cand = candidate.reindex(index=users, columns=cols).to_numpy(np.float64)
    if weights is None:
        weights = BootstrapWeights(seed, len(users), n_resamples, chunk)
    elif (weights.seed, weights.n_users, weights.n_resamples, weights.chunk) != (seed, len(users), n_resamples, chunk):
        raise ConfigError("bootstrap weights drawn for another seed, user set or number of resamples")
    reps = kendall_tau_replicates(ref, cand, weights, jackknife=TAU_METHODS[method].jackknife)
    if len(reps.bootstrap) == 0:
        return TauInterval(math.nan, math.nan, method, level, math.nan, n_users, math.nan, "")
    lo, hi = tau_interval(method, reps, level)
    bias = reps.bootstrap_bias_sd
    coverage, note = coverage_note(method, n_users, bias, level)
    return TauInterval(lo, hi, method, level, bias, n_users, coverage, note,
                       coverage_summary(method, n_users, bias, level))
