"""Which measures the numpy engine computes, and the function that computes each.

:data:`SUPPORTED_MEASURES` is written as ir-measures' providers write theirs (a measure with a
specification per parameter), so :func:`fast_supported` and the ir-measures provider
(:mod:`recjudge.evaluation.measures.provider`) answer alike. The engine reproduces trec_eval /
pytrec_eval for nDCG, Bpref, P, R, Success, RR, AP; ir-measures' Python providers for Judged and
Compat; MS MARCO's for RR@k; the trec-health-misinfo/Compatibility script for CompatHM.
"""

from __future__ import annotations

from ir_measures import measures as irm
from ir_measures.providers.base import NOT_PROVIDED, Any, Choices

from .ap import ap
from .bpref import bpref
from .compat import compat
from .compat_hm import CompatHM, compat_hm
from .judged import judged
from .ndcg import ndcg
from .precision import precision_family
from .rr import rr


class AtLeastOne:
    """A parameter spec: a whole number >= 1 (``rel`` <= 0 would make trec_eval count its internal
    "unjudged" codes as relevant, a difference the engine does not reproduce)."""

    def validate(self, value) -> bool:
        return isinstance(value, int) and not isinstance(value, bool) and value >= 1

    def __repr__(self) -> str:
        return ">=1"


class WholeGains:
    """A parameter spec: no gains map, or one whose gains are whole numbers (as trec_eval reads them)."""

    def validate(self, value) -> bool:
        return value is NOT_PROVIDED or all(isinstance(v, int) and not isinstance(v, bool) for v in value.values())

    def __repr__(self) -> str:
        return "whole gains"


_REL, _NO = AtLeastOne(), Choices(False)
SUPPORTED_MEASURES = [
    irm.Judged(cutoff=Any()),
    irm.Compat(p=Any(), normalize=Any()),
    CompatHM(p=Any()),
    irm.nDCG(cutoff=Any(), dcg=Choices("log2"), gains=WholeGains(), judged_only=_NO),
    irm.nDCG(cutoff=Any(), dcg=Choices("exp-log2"), gains=Choices(NOT_PROVIDED), judged_only=_NO),
    irm.Bpref(rel=_REL),
    irm.P(cutoff=Any(), rel=_REL, judged_only=_NO),
    irm.R(cutoff=Any(), rel=_REL, judged_only=_NO),
    irm.Success(cutoff=Any(), rel=_REL, judged_only=_NO),
    irm.RR(cutoff=Any(), rel=_REL, judged_only=_NO),
    irm.AP(cutoff=Any(), rel=_REL, judged_only=_NO),
]
FAST_MEASURES = tuple(dict.fromkeys(m.NAME for m in SUPPORTED_MEASURES))

# measure name -> f(measure, rows, ctx): one value per group (query) of the judged rows
MEASURE_FUNCTIONS = {
    "Judged": judged, "nDCG": ndcg, "Bpref": bpref, "Compat": compat,
    "P": precision_family, "R": precision_family, "Success": precision_family,
    "RR": rr, "AP": ap, "CompatHM": compat_hm,
}


def fast_supported(measure) -> bool:
    """Whether the numpy path computes ``measure`` (else ``auto`` asks ir-measures' other providers);
    the test ir-measures' ``Provider.supports`` makes."""
    measure.validate_params()
    return any(spec.NAME == measure.NAME and all(p.validate(measure[k]) for k, p in spec.params.items())
               for spec in SUPPORTED_MEASURES)
