"""The numpy engine: one label set's query × run matrices (:class:`Scorer`) and :func:`per_query_matrix`.

How it is fast: the reader gives ids as integer codes (one lookup per distinct id maps a run's
documents to each label set's); each run is put in score order once
(:func:`~recjudge.evaluation.ties.policy.score_order`: a linear pass for runs written grouped by
user, best first); its rows are joined with the judgments of their query only, by a hash bucket of
a few documents (:meth:`~recjudge.evaluation.measures.index.Judgments.join`); and every measure is
a few vectorised passes over the judged rows (bincount per query). A measure the engine does not
cover goes to ir-measures' providers (:mod:`~recjudge.evaluation.measures.reference`).
"""

from __future__ import annotations

import warnings
from collections.abc import Mapping, Sequence
from typing import NamedTuple

import numpy as np
import pandas as pd

from ...data.trec import Qrels, Run
from ...errors import ConfigError
from ..ties.policy import ensure_tie_free, is_tie_free
from .fast import MEASURE_FUNCTIONS, fast_supported
from .index import judgments
from .parse import DEFAULT_MEASURES, measure_key, parse_measures
from .reference import Reference, computes
from .rows import Context, RankedRun, judged_rows, ranked_run

BACKENDS = ("auto", "numpy", "ir_measures")

def _query_index(qrels: Qrels, queries: Sequence[str] | None) -> list[str]:
    if queries is None:
        return qrels.qids
    judged = set(qrels.codes.qids)
    wanted = sorted({str(q) for q in queries})
    missing = [q for q in wanted if q not in judged]
    if missing:
        shown = ", ".join(missing[:5]) + (" …" if len(missing) > 5 else "")
        raise ConfigError(
            f"{len(missing)} requested queries have no judgments in qrels {qrels.name!r} ({shown}); "
            "a measure is undefined there — pass only judged queries")
    return wanted


def _tie_free(run: Run) -> Run:
    if is_tie_free(run):
        return run
    warnings.warn(f"run {run.name!r} has equal scores within a query (compared as float32, as trec_eval "
                  "does); ordered them as trec_eval does (score, then docid descending) — call "
                  "recjudge.evaluation.ties.policy.ensure_tie_free or resolve_ties to choose", stacklevel=3)
    return ensure_tie_free(run, "trec_eval", 0)

def per_query_matrix(runs: Mapping[str, Run], qrels: Qrels, measures=DEFAULT_MEASURES,
                     queries: Sequence[str] | None = None, backend: str = "auto") -> dict[str, pd.DataFrame]:
    """Score every run on every query: one DataFrame per measure.

    Returns ``{measure_key(m): frame}``; keys are the names ir-measures prints (``nDCG@100``,
    ``Judged@100``, ``Bpref``; ``Compat(p=0.95)`` prints as ``Compat`` since 0.95 is its default).
    Each frame has index = query ids (sorted strings; the qrels' queries, or ``queries``, which
    must all be judged), columns = run names in the order given, float64 values.

    Semantics (those of ir-measures 0.4.3, which the ``numpy`` path reproduces):

    - A query the run does not rank scores 0.0 (trec_eval ``-c``); queries the run ranks but the
      qrels lack are ignored.
    - Runs must be tie-free (:func:`recjudge.evaluation.ties.policy.ensure_tie_free`): trec_eval compares scores
      as float32 and breaks ties by docid descending, ir-measures' Python providers by docid
      ascending. A run whose scores tie in float32 (whatever its ``tie_policy`` says) is resolved
      here with the ``trec_eval`` policy (docid descending) and a warning.
    - Negative labels count as judged for ``Judged`` and are otherwise ignored: trec_eval reads
      them as "in the pool but unjudged" (no gain, neither relevant nor non-relevant for Bpref).
    - ``nDCG@k``: gain = label, discount log2(rank + 1), ideal from every label > 0 of the query
      in the qrels (cut at k); 0.0 when the query has no label > 0.
    - ``Bpref``: R = labels >= rel, N = labels in [0, rel); each retrieved relevant document adds
      ``1 - min(n, R) / min(N, R)`` with n the judged non-relevant documents above it (1 when
      n = 0); divided by R; 0.0 when R = 0.
    - ``Judged@k``: judged documents in the top k / min(k, run length); any label counts,
      including 0 and negative ones, so a query without relevant documents still scores.
    - ``Compat(p)``: RBO(ranking, ideal, p, depth) / RBO(ideal, ideal, p, depth) with ideal = the
      documents with label > 0 by label desc, then run score desc (unretrieved = 0.0), then qrels
      order, and depth = max(len(ranking), len(ideal)); 0.0 when the ideal list is empty.
    - ``P@k`` divides by k, ``R@k`` and ``AP`` by the query's number of relevant documents,
      ``RR`` is 1 / rank of the first relevant document (0.0 when none is retrieved).
    - ``nDCG(gains={…})@k``: each label is mapped through the gains first (an unlisted label keeps
      its value), then as ``nDCG@k``; ``nDCG(dcg='exp-log2')@k`` and its alias ``nDCGexp@k``: gain
      2^rel − 1 (labels <= 0: none), then as ``nDCG@k``.
    - ``CompatHM(p)``: the trec-health-misinfo/Compatibility script's Compatibility
      (:func:`~recjudge.evaluation.measures.compat_hm.compat_hm`); NaN for a query the run does not
      rank or without a label > 0, as the script leaves them out of its mean. No other provider
      computes it, so the engine does whatever the backend.

    ``backend``: ``auto`` (numpy where :func:`fast_supported`, ir-measures otherwise), ``numpy``
    (ConfigError for a measure it does not cover) or ``ir_measures`` (the reference).
    """
    parsed = checked(measures, backend)
    names = list(runs)
    scorer = Scorer(qrels, parsed, queries, backend, len(names))
    for col, name in enumerate(names):
        scorer.add(_tie_free(runs[name]), col)
    return scorer.frames(names)


class SamePairs(NamedTuple):
    """A label set of :func:`score_runs` whose (query, document) pairs are exactly those of the label
    set ``like`` (its key, given before it), read with the same codes, under other labels (a trivial
    judge's, :mod:`recjudge.evaluation.baselines`): its judgments share ``like``'s arrays but the
    labels, so ten of them cost ten label columns, not ten sorts and ten lookups."""

    qrels: Qrels
    like: object

def checked(measures, backend: str) -> tuple:
    if backend not in BACKENDS:
        raise ConfigError(f"unknown backend {backend!r}; choose one of {', '.join(BACKENDS)}")
    parsed = parse_measures(measures)
    if backend == "numpy":
        slow = [measure_key(m) for m in parsed if not fast_supported(m)]
        if slow:
            raise ConfigError(f"the numpy backend does not compute {', '.join(slow)}; use backend='auto'")
    return parsed


class Scorer:
    """One label set's scoring: its judgments and caches, and the query × run matrices filled run by run
    (``parsed``: :func:`parse_measures`; ``queries`` as in :func:`per_query_matrix`)."""

    def __init__(self, qrels: Qrels, parsed: tuple, queries: Sequence[str] | None, backend: str, n_runs: int,
                 context: Context | None = None):
        # under backend="ir_measures" the engine computes only what no other provider does (CompatHM)
        self.fast = [m for m in parsed if fast_supported(m) and (backend != "ir_measures" or not computes(m))]
        slow = [m for m in parsed if m not in self.fast]
        self.index = _query_index(qrels, queries)
        # ``context``: these very judgments and their caches, when the caller built them already
        if context is not None and list(context.jd.queries) != self.index:
            raise ConfigError("the given judgments are of other queries")
        self.ctx = context if context is not None else Context(judgments(qrels, self.index))
        self.jd = self.ctx.jd
        # a query a run does not rank: the measure's default, 0 (trec_eval -c) or no value (CompatHM, as its script)
        self._start = {measure_key(m): float(m.DEFAULT) for m in parsed}
        self.reset(n_runs)
        self.reference = Reference(qrels, slow, self.index) if slow else None

    def reset(self, n_runs: int) -> None:
        """Empty matrices for ``n_runs`` runs; the judgments and their caches are kept."""
        self.values = {k: np.full((len(self.index), n_runs), start) for k, start in self._start.items()}
        self.users_ranked = np.zeros(n_runs, dtype=np.int64)  # per run: judged users it ranks

    def add(self, run: Run, col: int, doc_of_unique: np.ndarray | None = None, ranked: RankedRun | None = None,
            joined: tuple[np.ndarray, np.ndarray, np.ndarray] | None = None):
        """Fill column ``col`` with the scores of ``run`` (tie-free; ``ranked`` is its :func:`ranked_run`,
        ``doc_of_unique`` the judgments' code of each of its distinct docids, ``joined`` its judged rows,
        when the caller has them). Returns the judged rows (:meth:`~recjudge.evaluation.measures.index.Judgments.join`), or None."""
        jd = self.jd
        if ranked is None:
            ranked = ranked_run(run)
        if doc_of_unique is None:
            doc_of_unique = jd.dlookup(ranked.docids).astype(np.int32)
        qmap = jd.qlookup(ranked.qids)
        self.users_ranked[col] = int((qmap >= 0).sum())
        if self.fast and len(ranked.qrank):
            if joined is None:
                joined = jd.join(qmap, doc_of_unique, ranked.qrank, ranked.dcode)
            rows = judged_rows(ranked, qmap, doc_of_unique, jd, joined)
            for m in self.fast:
                self.values[measure_key(m)][:, col] = MEASURE_FUNCTIONS[m.NAME](m, rows, self.ctx)
        if self.reference is not None:
            self.reference.fill(run, col, self.values)
        return joined

    def frames(self, names: list[str]) -> dict[str, pd.DataFrame]:
        return {k: pd.DataFrame(v, index=pd.Index(self.index, name="qid"), columns=pd.Index(names, name="run"))
                for k, v in self.values.items()}
