"""Which measures a tie audit computes, and which closed form (if any) serves each.

A measure is parsed once by :func:`recjudge.evaluation.measures.parse_measures` (ir-measures
syntax; ``Hit`` is ir-measures' ``Success``); its family names the closed form of its expectation
under random order within ties, or is ``"general"`` (Monte Carlo).
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import NamedTuple

import numpy as np

from ...errors import ConfigError
from ..measures import measure_key, measure_names, parse_measures, split_top_level

DEFAULT_TIE_MEASURES = ("Hit@10", "nDCG@10", "nDCG@100")


class MeasureSpec(NamedTuple):
    """A measure to audit. ``family`` names its closed form, or is ``"general"`` (Monte Carlo)."""

    name: str  # as reported, e.g. "Hit@10"
    key: str  # ir-measures' name, e.g. "Success@10"
    measure: object  # the ir-measures Measure
    family: str  # "hit", "p", "r", "ndcg", "rr" or "general"
    cutoff: int | None
    rel: int


_FAMILIES = {"Success": "hit", "P": "p", "R": "r", "nDCG": "ndcg", "RR": "rr"}


def _family(measure) -> tuple[str, int | None, int]:
    name = measure.NAME
    params = {k: v.default for k, v in measure.SUPPORTED_PARAMS.items()}
    params.update(measure.params)
    cutoff = params.get("cutoff")
    cutoff = cutoff if isinstance(cutoff, int) and not isinstance(cutoff, bool) else None
    rel = params.get("rel", 1)
    family = _FAMILIES.get(name, "general")
    if params.get("judged_only", False):
        family = "general"
    elif family in ("hit", "p", "r") and cutoff is None:
        family = "general"
    elif family in ("hit", "p", "r", "rr") and not (isinstance(rel, int) and rel >= 1):
        family = "general"
    elif family == "ndcg":
        gains = measure.params.get("gains")
        if params.get("dcg", "log2") != "log2" or gains is not None:
            family = "general"
    if cutoff is not None and cutoff < 1:
        raise ConfigError(f"measure {measure}: the cutoff must be at least 1")
    return family, cutoff, int(rel) if isinstance(rel, (int, np.integer)) else 1


def parse_tie_measures(spec: str | Sequence[str] | None = None) -> tuple[MeasureSpec, ...]:
    """Measures from ``"Hit@10,nDCG@10,nDCG@100"`` (ir-measures syntax; ``Hit`` = ``Success``)."""
    if spec is None:
        spec = DEFAULT_TIE_MEASURES
    items = split_top_level(spec) if isinstance(spec, str) else [str(s).strip() for s in spec]
    names = list(measure_names([s.replace(" ", "") for s in items]))  # trec_eval names in ir-measures spelling
    parsed = parse_measures(names)  # ConfigError on unknown names, duplicates; Hit = Success
    out = []
    for name, m in zip(names, parsed):
        family, cutoff, rel = _family(m)
        out.append(MeasureSpec(name, measure_key(m), m, family, cutoff, rel))
    return tuple(out)


def measure_specs(measures) -> tuple[MeasureSpec, ...]:
    if isinstance(measures, tuple) and all(isinstance(m, MeasureSpec) for m in measures):
        return measures
    return parse_tie_measures(measures)
