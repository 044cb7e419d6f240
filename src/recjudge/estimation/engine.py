"""Per system and measure: the prediction-powered estimate and interval, the human-only and LLM-only
values, the human users the LLM labels are worth, and the rank sets from simultaneous pairwise
intervals (the numbers of ``recjudge estimate``)."""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from ..errors import ConfigError
from .ppi import Means, finite_mean, human_mean, ppi_mean
from .ranks import RankSets, max_t_critical, pair_index, pair_matrix, rank_sets
from .sample import Sample

__all__ = ["POPULATIONS", "MeasureEstimate", "estimate_sample", "estimate_measure", "effective_users"]

# judged: the mean over the N users the LLM judged (finite population, the n drawn from them);
# sampled: the N are themselves a sample of a larger population (ppi_py's superpopulation formulas)
POPULATIONS = ("judged", "sampled")


@dataclass(frozen=True)
class MeasureEstimate:
    """One measure's numbers: per system (PPI++, human only, LLM only), per pair, the rank sets."""

    measure: str
    ppi: Means
    human: Means
    llm_only: np.ndarray
    effective: np.ndarray  # float; NaN where the human-only variance is 0 (no width to match)
    pairs: list[tuple[int, int]]
    pair_means: Means
    pair_crit: float
    ranks: RankSets
    alpha: float

    def ci(self) -> tuple[np.ndarray, np.ndarray]:
        return self.ppi.interval(self.alpha)

    def human_ci(self) -> tuple[np.ndarray, np.ndarray]:
        return self.human.interval(self.alpha)

    def pair_ci(self) -> tuple[np.ndarray, np.ndarray]:
        return self.pair_means.interval(self.alpha, self.pair_crit)


def _weighted_var(y: np.ndarray, pi: np.ndarray | None) -> np.ndarray:
    n = len(y)
    w = np.ones(n) if pi is None else 1.0 / pi
    ww = w[:, None] / w.sum()
    return (ww * (y - (ww * y).sum(0)) ** 2).sum(0) * n / (n - 1)


def effective_users(var_y: np.ndarray, se: np.ndarray, n_all: int | None) -> np.ndarray:
    """The n a uniform human-only sample needs for standard error ``se``: s²/se² for a superpopulation,
    1 / (se²/s² + 1/N) over N users; NaN where s² = 0."""
    with np.errstate(divide="ignore", invalid="ignore"):
        ratio = se ** 2 / var_y
        out = 1.0 / ratio if n_all is None else 1.0 / (ratio + 1.0 / n_all)
    return np.where(var_y > 0, out, np.nan)


def _means(y, f, f_all, rows, pi, population: str, within=None) -> Means:
    if population == "judged":
        return finite_mean(y, f, f_all, pi, within=within)
    unlabeled = np.delete(f_all, rows, axis=0)
    m = ppi_mean(y, f, unlabeled)
    return Means(m.estimate, m.se, m.lam, m.influence, len(y) - 1)  # t quantile: small n


def estimate_measure(name: str, sample: Sample, alpha: float, population: str, draws: int, seed: int
                     ) -> MeasureEstimate:
    y, f, fa = sample.y[name], sample.f_human[name], sample.f_all[name]
    rows, pi, terms = sample.human_rows, sample.pi, sample.terms(name)
    big_n = len(sample.llm_users)
    eye = np.eye(y.shape[1])
    ppi = _means(y, f, fa, rows, pi, population, None if terms is None else terms.within(eye))
    yh = y if terms is None else terms.human_y
    human = human_mean(yh, big_n if population == "judged" else None, pi,
                       None if terms is None or population != "judged" else terms.within(eye, human=True))
    effective = effective_users(_weighted_var(yh, pi), ppi.se, big_n if population == "judged" else None)
    pairs = pair_index(y.shape[1])
    if pairs:
        within = None if terms is None else terms.within(pair_matrix(eye, pairs))
        pm = _means(pair_matrix(y, pairs), pair_matrix(f, pairs), pair_matrix(fa, pairs), rows, pi, population,
                    within)
        crit = max_t_critical(pm, alpha, draws, seed)
        lo, hi = pm.interval(alpha, crit)
    else:
        pm, crit, lo, hi = Means(*(np.zeros(0),) * 3, np.zeros((len(y), 0)), len(y) - 1), 0.0, [], []
    ranks = rank_sets(y.shape[1], pairs, np.asarray(lo), np.asarray(hi))
    return MeasureEstimate(name, ppi, human, fa.mean(0), effective, pairs, pm, crit, ranks, alpha)


def _check(sample: Sample, alpha: float, population: str) -> None:
    n, big_n = len(sample.human_users), len(sample.llm_users)
    if population not in POPULATIONS:
        raise ConfigError(f"population must be one of {', '.join(POPULATIONS)}, not {population!r}")
    if not 0 < alpha < 1:
        raise ConfigError(f"the level must be between 0 and 1, not {1 - alpha}")
    if n < 2:
        raise ConfigError(f"{n} human user(s): an interval needs at least 2 (a variance)")
    if population == "sampled":
        if big_n - n < 2:
            raise ConfigError(f"population 'sampled' needs at least 2 users the LLM judged beyond the {n} human "
                              f"users (it has {big_n - n}); use population 'judged', the mean over the N users")
        if sample.pi is not None:
            raise ConfigError("inclusion probabilities describe how the n were drawn from the N users: they go "
                              "with population 'judged' (the mean over the N), not 'sampled'")


def estimate_sample(sample: Sample, alpha: float = 0.05, population: str = "judged", draws: int = 2000,
                    seed: int = 0) -> dict[str, MeasureEstimate]:
    """Every measure of ``sample`` estimated (see :mod:`recjudge.estimation.ppi` for the formulas)."""
    _check(sample, alpha, population)
    return {name: estimate_measure(name, sample, alpha, population, draws, seed) for name in sample.y}
