"""What a variant measured: one experiment's outcome, and the row of N experiments (mean, 95% interval)."""

from __future__ import annotations

import math
from collections.abc import Mapping, Sequence
from types import MappingProxyType
from typing import NamedTuple

import numpy as np

from .experiment import Variant

class Estimate(NamedTuple):
    """One metric over N experiments: their mean, a 95% t-interval across them, and each value."""

    mean: float
    ci: tuple[float, float]     # NaN, NaN with fewer than two defined values
    values: tuple[float, ...]   # experiment 1, 2, ... (NaN where the metric is undefined)

    @property
    def n(self) -> int:
        return sum(not math.isnan(v) for v in self.values)


def across_experiments(values: Sequence[float], confidence: float = 0.95,
                       bounds: tuple[float, float] = (-1.0, 1.0)) -> Estimate:
    """Mean and a Student t-interval over the defined values, on the Fisher-z scale of the metric's
    range ``bounds`` (:func:`recjudge.evaluation.intervals.bounded_t`): it never leaves the range
    (the plain ``mean ± t·s/√n`` gave τ 0.837 [0.559, 1.115] over three experiments) and always
    contains the mean.

    The interval is across independent experiments (each its own sample of items and histories), the
    paper's "repeated three times ... averaged"; one value gives no interval.
    """
    from ...evaluation.intervals import bounded_t

    values = tuple(float(v) for v in values)
    x = np.array([v for v in values if not math.isnan(v)], dtype=np.float64)
    if len(x) == 0:
        return Estimate(math.nan, (math.nan, math.nan), values)
    return Estimate(float(x.mean()), bounded_t(x, bounds, confidence), values)


class ExperimentOutcome(NamedTuple):
    """One variant in one experiment: its seeds, counts and metrics."""

    experiment: int             # 1-based
    pairs_seed: int             # the K judged items per user
    history_seed: int           # the judge's history sample (JudgeSettings.seed)
    pairs: int
    judged: int
    calls: int
    cache_hits: int
    est_input_tokens: int
    agree: float
    agree_ci: tuple[float, float]      # user bootstrap within this experiment
    tie: float
    tie_ci: tuple[float, float]
    disagree: float
    disagree_ci: tuple[float, float]
    kappa: float
    alpha_ordinal: float
    tau: Mapping[str, float]           # vs the complete reference qrels
    weighted_tau: Mapping[str, float]
    ci_note: str = ""                  # the shares' CIs covered below 95% in simulation (few users): why
    ci_summary: str = ""               # that note in one line, as printed
    ci_missing: str = ""               # why the shares have no CI (bootstrap = 0, ...); '' when they have
    # trivial judge → metric (kappa, agree, tau <measure>) → value on this experiment's pairs (random: mean of draws)
    baselines: Mapping[str, Mapping[str, float]] = MappingProxyType({})
    warnings: tuple[str, ...] = ()     # e.g. the variant gave every pair one label

    def to_json(self) -> dict:
        out = self._asdict()
        for key in ("agree_ci", "tie_ci", "disagree_ci"):
            out[key] = list(out[key])
        out["tau"], out["weighted_tau"] = dict(self.tau), dict(self.weighted_tau)
        out["baselines"] = {judge: dict(v) for judge, v in self.baselines.items()}
        out["warnings"] = list(self.warnings)
        return out


class VariantRow(NamedTuple):
    variant: str
    axis: str
    per_user: int
    experiments: int            # N
    pairs: int                  # counts: totals over the N experiments
    judged: int
    failed: int
    calls: int
    cache_hits: int
    est_input_tokens: int
    agree: Estimate
    tie: Estimate
    disagree: Estimate
    kappa: Estimate
    alpha_ordinal: Estimate
    tau: Mapping[str, Estimate]
    weighted_tau: Mapping[str, Estimate]
    outcomes: tuple[ExperimentOutcome, ...]



SHARES = ("agree", "tie", "disagree")  # in [0, 1]; κ, α and τ in [−1, 1]


def variant_row(var: Variant, outcomes: Sequence[ExperimentOutcome]) -> VariantRow:
    def est(name: str) -> Estimate:
        return across_experiments([getattr(o, name) for o in outcomes],
                                  bounds=(0.0, 1.0) if name in SHARES else (-1.0, 1.0))

    def per_measure(name: str) -> dict[str, Estimate]:
        measures = list(dict.fromkeys(m for o in outcomes for m in getattr(o, name)))
        return {m: across_experiments([getattr(o, name).get(m, math.nan) for o in outcomes]) for m in measures}

    total = {k: sum(getattr(o, k) for o in outcomes) for k in ("pairs", "judged", "calls", "cache_hits",
                                                                "est_input_tokens")}
    return VariantRow(var.name, var.axis, var.per_user, len(outcomes), total["pairs"], total["judged"],
                      total["pairs"] - total["judged"], total["calls"], total["cache_hits"],
                      total["est_input_tokens"], est("agree"), est("tie"), est("disagree"), est("kappa"),
                      est("alpha_ordinal"), per_measure("tau"), per_measure("weighted_tau"), tuple(outcomes))


