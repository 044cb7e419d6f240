"""What the measure functions read: a run in score order, its judged rows, and per-call caches.

A :class:`RankedRun` is built once per run and shared by every label set; :func:`judged_rows` joins
it with one label set's :class:`~recjudge.evaluation.measures.index.Judgments`; :class:`Context`
caches what every run and measure of that label set shares (ideal DCG, relevant counts, RBO tables).
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import NamedTuple

import numpy as np

from ...data.trec import Run
from ..ties.policy import ScoreOrder, score_order
from .index import Judgments
from .ndcg import ideal_dcg
from .rbo import rbo_tables

class RankedRun(NamedTuple):
    """A tie-free run in score order (query by query in string order, best first): what each label
    set scores. Built once per run (:func:`ranked_run`) and shared by every label set."""

    qids: np.ndarray    # object: the run's distinct qids in string order
    qrank: np.ndarray   # int32 per row: index into qids (non-decreasing)
    dcode: np.ndarray   # int32 per row: index into docids
    docids: np.ndarray  # object: the run's distinct docids
    score: np.ndarray   # float64 per row
    pos: np.ndarray     # int32 per row: 0-based rank inside its query
    counts: np.ndarray  # int64 per query (index into qids): its ranked rows


def ranked_run(run: Run, order: ScoreOrder | None = None) -> RankedRun:
    """``run`` (tie-free: :func:`~recjudge.evaluation.ties.policy.ensure_tie_free`) in its one score
    order (``order``, or :func:`~recjudge.evaluation.ties.policy.score_order`: no sort when the file
    is written in that order)."""
    so = order if order is not None else score_order(run)
    c = run.codes
    dcode = c.dcode if so.in_place else c.dcode[so.order]
    return RankedRun(so.qids, so.qrank, dcode, c.docids, so.score, so.pos, so.lengths)


def resolved_ranking(run: Run, so: ScoreOrder, order: np.ndarray) -> RankedRun:
    """What ``ranked_run(resolve_ties(run, ...))`` gives, from the run's score order ``so`` and the
    policy's row ``order`` (:func:`~recjudge.evaluation.ties.policy.tie_order`): the scores rewritten
    as n, n-1, …, 1 per query; the policy moves rows inside blocks only, so queries and positions stay."""
    n = np.repeat(so.lengths, so.lengths)
    n -= so.pos
    return RankedRun(so.qids, so.qrank, run.codes.dcode[order], run.codes.docids, n.astype(np.float64), so.pos,
                     so.lengths)


class Rows(NamedTuple):
    """Judged ranked rows: what every measure function reads (:data:`~recjudge.evaluation.measures.fast.MEASURE_FUNCTIONS`).

    Rows of one group (one query of one run) are contiguous and in rank order, and they are the
    group's judged rows (an unjudged row adds nothing to any measure but Judged, which counts the
    rows it is given); ``length`` is the group's whole ranking. In the engine a group is a query of
    one run; the tie audit builds them for one tie order of one run.
    """

    group: np.ndarray   # per row; groups are contiguous, rows in rank order inside
    pos: np.ndarray     # per row: 0-based rank
    score: np.ndarray   # per row
    j: np.ndarray       # per row: index into the judgments arrays
    label: np.ndarray   # per row: its label
    gq: np.ndarray      # per group: query code
    length: np.ndarray  # per group: ranked documents (0 when the run lacks the query)
    gstart: np.ndarray  # per group: first row
    nrows: np.ndarray   # per group: rows held here (its judged rows)

    @property
    def ng(self) -> int:
        return len(self.gq)


def judged_rows(ranked: RankedRun, qmap: np.ndarray, doc_of_unique: np.ndarray, jd: Judgments,
                 joined: tuple[np.ndarray, np.ndarray, np.ndarray] | None = None) -> Rows:
    """The judged rows of a ranked run, one group per query of ``jd`` (group = query code).

    ``qmap`` is the judgments' code of each of the run's queries (-1: not evaluated),
    ``doc_of_unique`` of each of its distinct docids; ``joined``: :meth:`Judgments.join`'s result,
    when the caller has it (:class:`~recjudge.evaluation.measures.shared.SharedJoin`).
    """
    at, j, group = joined if joined is not None else jd.join(qmap, doc_of_unique, ranked.qrank, ranked.dcode)
    nrows = np.bincount(group, minlength=jd.nq)
    length = np.zeros(jd.nq, dtype=np.int64)
    evaluated = qmap >= 0
    length[qmap[evaluated]] = ranked.counts[evaluated]
    return Rows(group, ranked.pos[at], ranked.score[at], j, jd.label[j],
                np.arange(jd.nq, dtype=np.int64), length, np.cumsum(nrows) - nrows, nrows)


class Context:
    """Per-call caches of per-query quantities (ideal DCG, relevant counts), shared by every run and measure."""

    def __init__(self, jd: Judgments):
        self.jd = jd
        self._cache: dict = {}

    def cached(self, key, fn):
        if key not in self._cache:
            self._cache[key] = fn()
        return self._cache[key]

    def relevant(self, rel: int) -> np.ndarray:
        jd = self.jd
        return self.cached(("R", rel), lambda: jd.count(jd.label >= rel))

    def ideal_dcg(self, cutoff: int | None, gains: Mapping[int, int] | None = None, dcg: str = "log2") -> np.ndarray:
        key = ("idcg", cutoff, None if gains is None else tuple(sorted(gains.items())), dcg)
        return self.cached(key, lambda: ideal_dcg(self.jd, cutoff, gains, dcg))

    def rbo_tables(self, p: float, depth: int) -> tuple[np.ndarray, np.ndarray]:
        tables = self._cache.get(("rbo", p))
        if tables is None or len(tables[0]) <= depth:
            tables = self._cache[("rbo", p)] = rbo_tables(p, max(depth, 128))
        return tables

    def log2_ranks(self, pos: np.ndarray) -> np.ndarray | None:
        """``log2(pos + 2)`` per row, gathered from a table computed once (np.log2 of the same doubles,
        so every value is the one computed in place), or None when ``pos`` is not an integer array."""
        if pos.dtype.kind not in "iu" or len(pos) == 0:
            return None
        top = int(pos.max())
        table = self._cache.get("log2")
        if table is None or len(table) <= top:
            table = self._cache["log2"] = np.log2(np.arange(max(top + 1, 1024), dtype=np.float64) + 2.0)
        return table[pos]
