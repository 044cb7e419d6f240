"""Offline, deterministic non-LLM judges: ``overlap`` and ``popularity``.

They run the whole pipeline without an endpoint and give every LLM a simple alternative to beat.
Both are declared ``kind='baseline'`` in their provenance. Both are tie-heavy by construction.

- ``overlap``: the candidate's categorical attributes (values of the chosen fields among genres,
  directors, cast, languages, year) are compared with each item of the user's sampled profile (the
  same sample the LLM would see). Per history item h, ``o_h = |A(c) ∩ A(h)| / |A(c)|``; the score is
  the rating-weighted mean ``s = Σ r_h o_h / Σ r_h`` in [0, 1], and the label ``min(7, floor(8 s))``.
  A candidate with no attribute values scores 0.
- ``popularity``: ``p`` = share of the collection's items with fewer training ratings than the
  candidate; the label is ``min(7, floor(8 p))`` (items never rated get 0, the most popular 7).
"""

from __future__ import annotations

import math
import time
from collections import Counter
from typing import Mapping

import numpy as np
import pandas as pd

from ..errors import ConfigError
from .cache import Usage
from .profile import HistoryProfiles
from .registry import JudgeContext, JudgeSpec, register_judge
from .results import JudgeResult, Judgment, Summary

__all__ = ["CATEGORICAL_FIELDS", "overlap_score", "popularity_labels"]

CATEGORICAL_FIELDS = ("genres", "directors", "cast", "languages", "year")
_SCALE = 8  # labels 0..7


def _attributes(items: pd.DataFrame, fields) -> dict[str, frozenset]:
    out: dict[str, frozenset] = {}
    columns = {f: items[f].tolist() for f in fields}
    for n, item in enumerate(items.index.astype(str)):
        attrs = set()
        for f in fields:
            v = columns[f][n]
            if v is None or (isinstance(v, float) and math.isnan(v)):
                continue
            values = v if isinstance(v, (tuple, list, np.ndarray)) else (v,)
            attrs.update((f, str(x)) for x in values)
        out[item] = frozenset(attrs)
    return out


def overlap_score(candidate: frozenset, history: list[tuple[frozenset, float]]) -> float:
    """Rating-weighted mean share of the candidate's attributes found in each history item."""
    total = sum(r for _, r in history)
    if not candidate or total <= 0:
        return 0.0
    return sum(r * len(candidate & h) / len(candidate) for h, r in history) / total


def _label(score: float) -> int:
    return min(_SCALE - 1, int(math.floor(_SCALE * score)))


def _result(ctx: JudgeContext, judgments: list[Judgment], started: float, extra: Mapping) -> JudgeResult:
    failures = Counter(j.reason for j in judgments if j.label is None)
    summary = Summary(judge=ctx.config.judge, kind="baseline", pairs=len(judgments),
                      judged=sum(j.label is not None for j in judgments), failures=dict(failures),
                      planned_calls=0, calls=0, attempts=0, cache_hits=0, skipped_calls=0, stopped=None,
                      usage=Usage(), cost=0.0, estimated_input_tokens=0, estimated_cost=0.0,
                      dry_run=ctx.config.dry_run, elapsed=time.perf_counter() - started)
    prov = {"judge": ctx.config.judge, "kind": "baseline", "llm": False, "profiles": ctx.profiles.provenance(),
            "seed": ctx.config.seed, **extra}
    return JudgeResult(ctx.name, tuple(judgments), summary, prov)


def _failed(p, reason: str) -> Judgment:
    return Judgment(p.qid, p.docid, None, "failed", reason, (None,), (reason,))


def _run_overlap(ctx: JudgeContext) -> JudgeResult:
    started = time.perf_counter()
    profiles = ctx.profiles
    if not isinstance(profiles, HistoryProfiles):
        raise ConfigError("the overlap judge compares items with a user's rated history; it cannot judge "
                          "queries (topics)")
    fields = [f for f in profiles.fields if f in CATEGORICAL_FIELDS]
    if not fields:
        raise ConfigError(f"the overlap judge needs at least one categorical field ({', '.join(CATEGORICAL_FIELDS)}) "
                          f"in --fields; {profiles.field_spec!r} has none")
    attrs = _attributes(ctx.collection.items, fields)
    judgments = []
    for p in ctx.pairs:
        if not profiles.has(p.qid):
            judgments.append(_failed(p, "no_profile"))
        elif p.docid not in attrs:
            judgments.append(_failed(p, "unknown_item"))
        else:
            history = [(attrs[i], r) for i, r in profiles.sample(p.qid, exclude=(p.docid,))]
            s = overlap_score(attrs[p.docid], history)
            judgments.append(Judgment(p.qid, p.docid, _label(s), "ok", None, (_label(s),), (None,), score=s))
    return _result(ctx, judgments, started, {"method": "rating-weighted attribute overlap",
                                             "overlap_fields": fields})


def popularity_labels(counts: pd.Series, universe: pd.Index) -> pd.Series:
    """Label per item of ``universe``: floor(8 × share of items with strictly fewer ratings), max 7."""
    c = counts.reindex(universe).fillna(0).to_numpy()
    fewer = np.searchsorted(np.sort(c), c, side="left")  # items with a strictly smaller count
    p = fewer / len(c)
    return pd.Series(np.minimum(_SCALE - 1, np.floor(_SCALE * p)).astype(int), index=universe)


def _run_popularity(ctx: JudgeContext) -> JudgeResult:
    started = time.perf_counter()
    history = ctx.history if ctx.history is not None else ctx.collection.interactions
    universe = ctx.collection.items.index.astype(str)
    counts = history["item"].astype(str).value_counts()
    labels = popularity_labels(counts, universe)
    judgments = []
    for p in ctx.pairs:
        if p.docid not in labels.index:
            judgments.append(_failed(p, "unknown_item"))
            continue
        lab = int(labels[p.docid])
        judgments.append(Judgment(p.qid, p.docid, lab, "ok", None, (lab,), (None,),
                                  score=float(counts.get(p.docid, 0))))
    return _result(ctx, judgments, started, {"method": "training-rating count percentile"})


register_judge(JudgeSpec("overlap", "baseline", "rating-weighted metadata overlap with the user's history "
                         "(non-LLM baseline)", _run_overlap))
register_judge(JudgeSpec("popularity", "baseline", "percentile of the item's training rating count "
                         "(non-LLM baseline)", _run_popularity))
