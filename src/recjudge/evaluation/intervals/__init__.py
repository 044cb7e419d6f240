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

from .blocks import Replicates, bias_corrected, fisher_z, jackknife_se, percentile
from .bounded import bounded_t, share_interval
from .coverage import (
    BIAS_BANDS,
    CI_FLAG,
    DOCS_POINTER,
    NO_RESAMPLES,
    SHARE_COVERAGE,
    TAU_COVERAGE,
    USER_BANDS,
    coverage_note,
    coverage_summary,
    share_coverage_note,
    share_coverage_summary,
)
from .tau import DEFAULT_TAU_METHOD, TAU_METHODS, TauMethod, tau_interval, tau_normal

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
    "CI_FLAG",
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
