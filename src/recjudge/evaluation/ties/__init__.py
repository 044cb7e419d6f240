"""Tie handling as part of the evaluation protocol: prevalence, treatments, exact expectations.

When several candidates share a score, the tie-breaking rule becomes part of the ranking. A
candidate list written relevant-first and sorted stably hands the relevant item every tie. This
package makes that measurable, one module per job:

- :mod:`.policy`: the tie policy every evaluation applies (:func:`resolve_ties`, :func:`ensure_tie_free`),
  a run's score order and tie blocks (:func:`score_order`, :func:`tied_user_share`).
- :mod:`.specs`: the measures to audit and which closed form serves each.
- :mod:`.ranked`: a run sorted once into tie blocks, joined to qrels by the measure engine; every
  tie treatment (input order, the disclosed hash of :func:`recjudge.data.trec.hash_keys`,
  random) is a position array over it.
- :mod:`.prevalence` (:func:`tie_prevalence`): the share of a run's users with any exact (float64)
  tie, with a tie block touching, crossing or lying inside the top k, and holding a relevant item.
- :mod:`.treatments` (:func:`policy_metrics`, :func:`expected_metrics`): each measure under one
  treatment, and its **exact expectation under a uniformly random order within each tie block**
  (closed forms for Hit@k, P@k, R@k, nDCG@k and RR; seeded Monte Carlo with a confidence
  interval for Compat, Bpref, AP, …).
- :mod:`.permutation` (:func:`permutation_test`): shuffle each user's rows, rank with a policy,
  and report the largest change of each metric: 0 for a row-order-invariant evaluator (hash),
  large for input order on tie-heavy runs.
- :mod:`.sensitivity` (:func:`audit_ties`) runs all of it per run and prints it (:func:`format_audit`).

The sampled-candidate protocol (one held-out positive + N sampled negatives, written
relevant-first) lives with the systems: :mod:`recjudge.systems.sampled`.

Which users count: the qrels' users, as trec_eval and ir-measures do; a user the run lacks scores 0
and a user only the run has is ignored. Prevalence shares are over the run's own users.
"""

from __future__ import annotations

import importlib

# name -> submodule. Loaded on first use: the measure engine imports .policy, and .audit imports the
# measure engine, so an eager package import would be circular.
_EXPORTS = {
    "MeasureTies": "sensitivity", "RunTies": "sensitivity", "TieAudit": "sensitivity", "TieSettings": "sensitivity", "audit_run": "sensitivity",
    "audit_ties": "sensitivity", "format_audit": "sensitivity", "PermutationResult": "permutation",
    "permutation_test": "permutation", "shuffle_rows": "permutation", "DEFAULT_CUTOFFS": "prevalence",
    "TiePrevalence": "prevalence", "tie_prevalence": "prevalence", "TREATMENTS": "ranked",
    "DEFAULT_TIE_MEASURES": "specs", "MeasureSpec": "specs", "parse_tie_measures": "specs",
    "expected_metrics": "treatments", "mc_interval": "treatments", "policy_metrics": "treatments",
    "TIE_POLICIES": "policy", "ScoreOrder": "policy", "score_order": "policy", "resolve_ties": "policy",
    "ensure_tie_free": "policy", "is_tie_free": "policy", "top_k": "policy", "tied_user_share": "policy",
    "order_rows": "policy",
}

__all__ = [
    "DEFAULT_TIE_MEASURES",
    "DEFAULT_CUTOFFS",
    "TREATMENTS",
    "TIE_POLICIES",
    "MeasureSpec",
    "parse_tie_measures",
    "TiePrevalence",
    "MeasureTies",
    "RunTies",
    "TieSettings",
    "TieAudit",
    "PermutationResult",
    "ScoreOrder",
    "score_order",
    "resolve_ties",
    "ensure_tie_free",
    "is_tie_free",
    "top_k",
    "tied_user_share",
    "order_rows",
    "tie_prevalence",
    "policy_metrics",
    "expected_metrics",
    "permutation_test",
    "shuffle_rows",
    "audit_run",
    "audit_ties",
    "format_audit",
    "mc_interval",
]


def __getattr__(name: str):
    if name in _EXPORTS:
        return getattr(importlib.import_module(f"{__name__}.{_EXPORTS[name]}"), name)
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
