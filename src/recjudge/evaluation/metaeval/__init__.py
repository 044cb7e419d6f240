"""Meta-evaluation: do two label sets rank recommender systems the same way?

Pipeline: one pass over the runs, one run in memory at a time (:func:`recjudge.evaluation.measures.score_runs`),
takes each run's tie share, makes it tie-free (:func:`recjudge.evaluation.ties.policy.ensure_tie_free`) and fills its
column of a per-user × per-system matrix for every measure and label set; everything else — system
scores, rankings, τ, bootstrap CIs — is aggregated from those matrices.

Which users count
-----------------
``queries="own"``: each label set is averaged over the users it judges (as trec_eval does);
``"shared"``: only users judged by both label sets. A user that a run does not rank scores 0 for
that run. Users whose labels hold no relevant item (no label > 0) are kept with the value
ir-measures gives them (see :mod:`recjudge.evaluation.measures`). For nDCG, Bpref and Compat that value is
the same for every system, so such users lower all means alike and change neither the ranking
nor τ (they do widen the bootstrap intervals honestly); Judged@k does not depend on relevance
and counts them like any other user.

Runs written by ``recjudge train`` are tie-free on disk (their ties were resolved at export);
:func:`export_tie_info` reads the sidecar JSON that records the policy and the share of users
with ties before it, so reports state what actually happened.

Modules: ``ranks`` (means, ranks, τ-b / weighted τ / τ_AP of two score vectors, ``SystemTable``),
``kendall`` (τ-b over users: bootstrap, jackknife, its interval), ``rank_agreement`` (one measure's
agreement record), ``scoring`` (the measures asked for, the one scoring pass, the tie note),
``evaluating`` (:func:`evaluate` and its result), ``comparing`` (:func:`compare`), ``comparison``
(its result), ``inputs`` (label set names, export tie records), ``text`` (lines both results print).
"""

from __future__ import annotations

from .comparing import QUERY_SETS, compare, user_overlap
from .comparison import CompareResult, RankAgreement, UserOverlap, ci_cell, ci_notes, trivial_tau_lines
from .evaluating import EvaluationResult, evaluate, per_query_frame
from .inputs import export_tie_info, label_set_names
from .kendall import (
    BootstrapWeights,
    TauInterval,
    jackknife_kendall_tau,
    kendall_tau_interval,
    kendall_tau_replicates,
)
from .rank_agreement import rank_agreement
from .ranks import (
    MEAN_DECIMALS,
    SystemTable,
    kendall_tau,
    system_means,
    system_order,
    system_ranks,
    tau_ap,
    tied_ranking,
    weighted_tau,
)
from .scoring import COVERAGE_MEASURES, measure_definitions, ranking_measure

__all__ = [
    "SystemTable",
    "RankAgreement",
    "UserOverlap",
    "user_overlap",
    "CompareResult",
    "EvaluationResult",
    "evaluate",
    "compare",
    "kendall_tau",
    "weighted_tau",
    "tau_ap",
    "system_ranks",
    "system_order",
    "system_means",
    "MEAN_DECIMALS",
    "BootstrapWeights",
    "kendall_tau_interval",
    "kendall_tau_replicates",
    "TauInterval",
    "jackknife_kendall_tau",
    "rank_agreement",
    "label_set_names",
    "export_tie_info",
    "ranking_measure",
    "measure_definitions",
    "COVERAGE_MEASURES",
    "QUERY_SETS",
    "tied_ranking",
    "per_query_frame",
    "ci_cell",
    "ci_notes",
    "trivial_tau_lines",
]
