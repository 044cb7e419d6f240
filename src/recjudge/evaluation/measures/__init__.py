"""Per-query × per-system measure matrices, with ir-measures as the reference semantics.

Laid out as ir-measures lays out its measures: one module per measure (or family) holding its numpy
function (:mod:`.judged`, :mod:`.ndcg`, :mod:`.bpref`, :mod:`.precision`, :mod:`.rr`, :mod:`.ap`,
:mod:`.compat`, :mod:`.compat_hm` with the RBO closed form they share in :mod:`.rbo`); names and
aliases (:mod:`.parse`, :mod:`.describe`); the judgments and their join (:mod:`.index`,
:mod:`.shared`); the rows the functions read (:mod:`.rows`); the engine (:mod:`.fast`,
:mod:`.engine`, :mod:`.passes`); ir-measures' own providers as the reference and fallback
(:mod:`.reference`); and the engine as an ir-measures provider (:mod:`.provider`), registered with
``CompatHM`` on import.

Two backends compute the same numbers. ``ir_measures`` calls ``ir_measures.evaluator(...).iter_calc``
run by run. ``numpy`` reproduces ir-measures 0.4.3 (pytrec_eval for nDCG, Bpref, P, R, Success,
RR, AP; its Python providers for Judged and Compat; msmarco's for RR@k) to 1e-9 (observed: 0 for all
but Compat, ~1e-14 for Compat). ``auto`` uses numpy for the measures it covers
(:func:`fast_supported`) and ir-measures for the rest.

recjudge's own names (:func:`describe_measure` states each measure's definition in words):

- ``nDCGexp@k`` (and ``nDCGexp``) is the exponential-gain nDCG of Penha et al. 2025: ir-measures'
  ``nDCG(dcg='exp-log2')@k``, gain 2^rel − 1 (trec_eval's nDCG with the gains map
  ``{rel: 2^rel − 1}``; negative labels carry no gain, as in every trec_eval nDCG). ``nDCG@k``
  stays trec_eval's linear gain.
- ``CompatHM(p)`` is Compatibility as computed by the trec-health-misinfo/Compatibility script, the
  script the ML-32M-ext release evaluates with (claclark/Compatibility computes the same). It
  differs from ir-measures' ``Compat``, which Penha et al. 2025 use (see
  :func:`~recjudge.evaluation.measures.compat_hm.compat_hm`).
"""

from .compat_hm import CompatHM
from .describe import describe_measure
from .engine import BACKENDS, SamePairs, Scorer, per_query_matrix
from .fast import FAST_MEASURES, MEASURE_FUNCTIONS, SUPPORTED_MEASURES, fast_supported
from .groups import safe_ratio
from .index import Judgments, judgments, relabelled
from .ndcg import EXP_GAINS
from .parse import (
    ACCEPTED_FORMS,
    DEFAULT_MEASURES,
    TREC_NAMES,
    RelConflict,
    measure_key,
    measure_names,
    parse_measures,
    split_top_level,
    takes_rel,
)
from .passes import Scored, score_runs
from .provider import PROVIDER, RecjudgeProvider
from .rows import Context, RankedRun, Rows, judged_rows, ranked_run

__all__ = [
    "DEFAULT_MEASURES",
    "EXP_GAINS",
    "describe_measure",
    "BACKENDS",
    "FAST_MEASURES",
    "SUPPORTED_MEASURES",
    "parse_measures",
    "measure_names",
    "takes_rel",
    "RelConflict",
    "TREC_NAMES",
    "ACCEPTED_FORMS",
    "measure_key",
    "fast_supported",
    "per_query_matrix",
    "score_runs",
    "SamePairs",
    "Scored",
    "Scorer",
    "split_top_level",
    "Judgments",
    "judgments",
    "relabelled",
    "RankedRun",
    "ranked_run",
    "Rows",
    "judged_rows",
    "Context",
    "MEASURE_FUNCTIONS",
    "safe_ratio",
    "CompatHM",
    "RecjudgeProvider",
    "PROVIDER",
]
