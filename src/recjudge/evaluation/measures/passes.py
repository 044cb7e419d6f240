"""One pass over many runs and label sets: each run read once (the next one in a reading thread), scored by all.

:func:`score_runs` holds at most two runs in memory, puts each in score order once, applies the tie
policy once, looks its docids up once for every label set and joins its rows once where label sets
share their judged pairs (:mod:`~recjudge.evaluation.measures.shared`).
"""

from __future__ import annotations

import os
import time
import warnings
from collections.abc import Mapping
from typing import NamedTuple

import numpy as np
import pandas as pd

from ...data.trec import IdDictionary, Qrels, Run
from ..ties.policy import is_tie_free, score_order
from .engine import SamePairs, Scorer, checked
from .index import relabelled
from .parse import DEFAULT_MEASURES
from .rows import Context, ranked_run, resolved_ranking
from .shared import SharedJoin, Vocabulary


class Scored(NamedTuple):
    """What :func:`score_runs` gives: per label set, the matrices of :func:`per_query_matrix`; per run,
    its tied-user share at k before tie resolution; per label set and run, the judged users it ranks."""

    matrices: dict[str, dict[str, pd.DataFrame]]
    tied_user_share: dict[str, float]
    users_ranked: dict[str, dict[str, int]]  # label set → run → judged users the run ranks


def score_runs(runs: Mapping[str, Run | str | os.PathLike], label_sets: Mapping[str, Qrels | tuple],
               measures=DEFAULT_MEASURES, tie_policy: str = "trec_eval", seed: int = 0, k: int | None = 100,
               backend: str = "auto", timings: dict[str, float] | None = None, observe=None) -> Scored:
    """Score every run under every label set in one pass, holding one run in memory at a time.

    ``runs`` maps a name to a :class:`~recjudge.data.trec.Run` or to a run file, read when its turn
    comes and dropped after (:func:`recjudge.data.trec.run_paths` names the files of a folder), so
    the peak memory does not grow with the number of runs: the next file is read in a second thread
    while the current run is scored (polars parses without the GIL), so at most two
    runs are in memory. Each run is put in score order once (:func:`~recjudge.evaluation.ties.policy.score_order`,
    no sort when the file is written that way); its tied-user share at ``k`` is taken from that
    order before :func:`~recjudge.evaluation.ties.policy.ensure_tie_free` applies ``tie_policy`` / ``seed``, and
    the tie-free order is what every label set scores. ``label_sets`` maps a name to qrels, or to
    ``(qrels, queries)`` with ``queries`` as in :func:`per_query_matrix`, or to :class:`SamePairs`
    (another label set's pairs under other labels; scored over its queries). The matrices equal
    ``per_query_matrix(tie_free_runs, qrels, measures, queries, backend)``.

    ``observe``, when given, is called as ``observe(name, col, run, order, scorers, doc_codes)`` after
    each run with ties is scored: the run as read and its score order, each label set's
    :class:`Scorer` holding its column, and per label set the code of each of the run's docids
    (or None) (:class:`recjudge.evaluation.ties.note.TieObserver`).

    ``timings``, when given, gets the seconds spent per stage added to it (``judgments``, ``read
    runs`` — waiting for the reading thread —, ``tie share``, ``ensure_tie_free``, ``docid lookup``,
    ``matrices, <label set>``), summed over the runs: the per-stage split of the benchmark.
    """
    from concurrent.futures import ThreadPoolExecutor

    names = list(runs)
    one = _Pass(runs, checked(measures, backend), backend, len(names), tie_policy, seed, k, timings, observe)
    with ThreadPoolExecutor(max_workers=1, thread_name_prefix="recjudge-read") as reader:
        # the label sets' judgments one after the other (side by side, their sorts would add up to the
        # peak memory), then the first run
        one.judgments(label_sets)
        ahead = reader.submit(one.load, names[0]) if names else None
        one.share_work()
        for col, name in enumerate(names):
            run, doc_codes = ahead.result()
            ahead = reader.submit(one.load, names[col + 1]) if col + 1 < len(names) else None
            one.clock.lap("read runs")
            one.score(name, col, run, doc_codes)
            del run
    scorers = one.scorers
    return Scored({label: sc.frames(names) for label, sc in scorers.items()}, one.shares,
                  {label: dict(zip(names, sc.users_ranked.tolist())) for label, sc in scorers.items()})


class _Pass:
    """The state of one :func:`score_runs` call: the label sets' scorers and what they share."""

    def __init__(self, runs, parsed, backend, n_runs, tie_policy, seed, k, timings, observe):
        self.runs, self.parsed, self.backend, self.n_runs = runs, parsed, backend, n_runs
        self.tie_policy, self.seed, self.k, self.observe = tie_policy, seed, k, observe
        self.clock = _StageClock(timings)
        self.dictionary = IdDictionary()
        self.vocabulary: Vocabulary | None = None  # set once the judgments are built
        self.scorers: dict[str, Scorer] = {}
        self.shares: dict[str, float] = {}

    def judgments(self, label_sets: Mapping) -> None:
        for label, value in label_sets.items():
            self.scorers[label] = self._scorer(value)

    def _scorer(self, value) -> Scorer:
        if isinstance(value, SamePairs):
            like = self.scorers[value.like]
            return Scorer(value.qrels, self.parsed, like.index, self.backend, self.n_runs,
                          context=Context(relabelled(like.jd, value.qrels)))
        qrels, queries = value if isinstance(value, tuple) else (value, None)
        return Scorer(qrels, self.parsed, queries, self.backend, self.n_runs)

    def share_work(self) -> None:
        jds = [sc.jd for sc in self.scorers.values()]
        self.vocabulary = Vocabulary(jds, self.dictionary)
        self.shared = SharedJoin(jds)
        self.keep_runs = any(sc.reference is not None for sc in self.scorers.values())  # ir-measures reads the run
        self.clock.lap("judgments")

    def load(self, name: str) -> tuple[Run, list[np.ndarray] | None]:
        """In the reading thread: the file, then its documents' codes in every label set."""
        from ...data.trec import read_run

        run = self.runs[name]
        if not isinstance(run, Run):
            run = read_run(run, name=name, dictionary=self.dictionary)
        return run, None if self.vocabulary is None else self.vocabulary.doc_codes(run.codes.docids)

    def score(self, name: str, col: int, run: Run, doc_codes: list[np.ndarray] | None) -> None:
        from ..ties.policy import tie_free, tie_order, tied_user_share

        clock = self.clock
        so = score_order(run)  # once: the tie share, the tie policy and the measures share it
        self.shares[name] = tied_user_share(run, self.k, order=so)
        clock.lap("tie share")
        docids = run.codes.docids
        raw, raw_so, free = run, so, is_tie_free(run, order=so)
        if self.keep_runs or free:
            with warnings.catch_warnings():
                warnings.simplefilter("ignore")  # 'input' warns once per run; the caller says it once
                run, so = tie_free(run, self.tie_policy, self.seed, so)
            ranked = ranked_run(run, so)
        else:  # no measure needs the resolved run itself: its ranking alone, as resolve_ties orders it
            ranked = resolved_ranking(run, so, tie_order(run, so, self.tie_policy, self.seed))
        clock.lap("ensure_tie_free")
        if doc_codes is None or ranked.docids is not docids:  # read before the judgments were ready
            doc_codes = self.vocabulary.doc_codes(ranked.docids)
        clock.lap("docid lookup")
        first = None
        for i, ((label, scorer), doc_of_unique) in enumerate(zip(self.scorers.items(), doc_codes)):
            joined = scorer.add(run, col, doc_of_unique, ranked, self.shared.rows(i, first, scorer.jd))
            first = joined if i == 0 else first
            clock.lap(f"matrices, {label}")
        if self.observe is not None and not free:
            self.observe(name, col, raw, raw_so, self.scorers, doc_codes if ranked.docids is docids else None)
            clock.lap("tie note")


class _StageClock:
    """Seconds since the last lap, added to ``timings[stage]``; does nothing without ``timings``."""

    def __init__(self, timings: dict[str, float] | None):
        self.timings = timings
        self.last = time.perf_counter()

    def lap(self, stage: str) -> None:
        if self.timings is not None:
            now = time.perf_counter()
            self.timings[stage] = self.timings.get(stage, 0.0) + now - self.last
            self.last = now
