"""How one candidate's system ranking agrees with the reference's on one measure: τ-b and its CI, weighted τ, τ_AP, rank displacement."""

from __future__ import annotations

import math
import warnings

import pandas as pd

from ..intervals import DEFAULT_TAU_METHOD, NO_RESAMPLES
from .comparison import RankAgreement
from .kendall import BootstrapWeights, kendall_tau_interval
from .ranks import system_means, system_ranks, tau_ap, tied_ranking, weighted_tau

__all__ = ["rank_agreement"]


def _undefined(measure: str, ref: pd.DataFrame, cand: pd.DataFrame, reference: str, label: str,
               ci_method: str = DEFAULT_TAU_METHOD) -> RankAgreement:
    """The record of a measure on which a label set ties every system: no τ, no CI, no displacement."""
    why = tied_ranking(system_means(ref), reference, measure) or tied_ranking(system_means(cand), label, measure)
    nan = math.nan
    return RankAgreement(measure=measure, n_systems=ref.shape[1], n_users_reference=len(ref.index),
                         n_users_candidate=len(cand.index), kendall_tau=nan, kendall_tau_ci=(nan, nan),
                         weighted_tau=nan, tau_ap=nan, median_abs_rank_displacement=nan,
                         max_abs_rank_displacement=nan, most_displaced=(), ci_method=ci_method, undefined=why,
                         ci_missing="no interval: τ is undefined")


def rank_agreement(measure: str, ref: pd.DataFrame, cand: pd.DataFrame, n_boot: int, seed: int,
               top: int = 5, ci_method: str = DEFAULT_TAU_METHOD, label: str = "candidate",
               weights: BootstrapWeights | None = None, reference: str = "the reference") -> RankAgreement:
    from scipy import stats

    names = list(ref.columns)
    ref_means, cand_means = system_means(ref), system_means(cand)
    if tied_ranking(ref_means, reference, measure) or tied_ranking(cand_means, label, measure):
        return _undefined(measure, ref, cand, reference, label, ci_method)
    r, c = ref_means.to_numpy(), cand_means.to_numpy()
    tau = stats.kendalltau(r, c, variant="b")
    ci = kendall_tau_interval(ref, cand, n_boot, seed, method=ci_method, weights=weights)
    missing = NO_RESAMPLES if n_boot <= 0 else ""
    if n_boot > 0 and not math.isfinite(ci.low):
        one_side = ci_method in ("BC", "BCa") and math.isfinite(tau.statistic)
        missing = ("no interval (every resampled τ-b on one side of the estimate)" if one_side
                   else "no interval (no resample gave a defined τ-b)")
        why = (f"every bootstrap τ-b falls on one side of the estimate {tau.statistic:.3f}, so the {ci_method} "
               "interval is undefined (reported as no interval); the systems' differences are small against the "
               "users' spread" if one_side else
               f"no resample gave a defined τ-b, so the {ci_method} interval is undefined (reported as no interval)")
        if math.isfinite(tau.statistic):
            warnings.warn(f"{label}, {measure}: {why}", stacklevel=3)
    displacement = system_ranks(cand_means) - system_ranks(ref_means)
    abs_disp = displacement.abs()
    movers = abs_disp.sort_values(ascending=False, kind="stable")
    most = tuple((str(s), float(displacement[s])) for s in movers.index[:top] if movers[s] > 0)
    return RankAgreement(
        measure=measure,
        n_systems=len(names),
        n_users_reference=len(ref.index),
        n_users_candidate=len(cand.index),
        kendall_tau=float(tau.statistic),
        kendall_tau_ci=ci.bounds,
        weighted_tau=weighted_tau(r, c),
        tau_ap=tau_ap(r, c, names),
        median_abs_rank_displacement=float(abs_disp.median()),
        max_abs_rank_displacement=float(abs_disp.max()),
        most_displaced=most,
        kendall_tau_p=float(tau.pvalue),
        ci_method=ci_method,
        ci_note=ci.note,
        ci_summary=ci.summary,
        ci_missing=missing,
        ci_coverage=ci.coverage,
        bootstrap_bias_sd=ci.bootstrap_bias_sd,
    )
