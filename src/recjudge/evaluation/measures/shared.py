"""Work shared between label sets scored together: one join of a run's rows, one docid lookup.

:class:`SharedJoin` gives a label set whose judged pairs are all judged by the first one its rows
from the first one's join; :class:`Vocabulary` looks a run's docids up once for every label set.
"""

from __future__ import annotations

import threading

import numpy as np
import pandas as pd

from ...data.trec import IdDictionary
from .index import Judgments, Lookup

_JOIN_SLICE = 1 << 20  # judgments joined at a time when label sets are matched (SharedJoin)


class SharedJoin:
    """One join of a run's rows for several label sets, when their judged pairs allow it.

    A label set whose every (query, document) pair is also judged by the first one (the same pool
    labelled twice, or part of it) takes its judged rows from the first one's join: ``of_first``
    maps each judgment of the first label set to its own (-1: not judged here). Others join alone.
    """

    def __init__(self, judgments: list[Judgments]):
        self.of_first: list[np.ndarray | None] = [None] * len(judgments)
        if len(judgments) < 2:
            return
        a = judgments[0]
        small = np.int32 if max(len(jd.qcode) for jd in judgments) < 2**31 else np.int64
        seen: dict[tuple[int, int], np.ndarray | None] = {}  # judgments that share their pairs' arrays (SamePairs)
        for i, b in enumerate(judgments[1:], start=1):
            if (id(b.qcode), id(b.dcode)) in seen:
                self.of_first[i] = seen[id(b.qcode), id(b.dcode)]
                continue
            qmap, dmap = a.qlookup(np.asarray(b.queries, dtype=object)), a.dlookup(b.dlookup.keys)
            of_first = np.full(len(a.qcode), -1, dtype=small)
            # a slice of b's judgments at a time: the join's temporaries of tens of millions of
            # judgments would set the peak memory of the whole evaluation
            for lo in range(0, len(b.qcode), _JOIN_SLICE):
                hi = min(lo + _JOIN_SLICE, len(b.qcode))
                rows, ja, _ = a.join(qmap, dmap, b.qcode[lo:hi], b.dcode[lo:hi])
                if len(rows) < hi - lo:  # a pair of b that a does not judge: b joins alone
                    of_first = None
                    break
                of_first[ja] = rows + lo
            self.of_first[i] = seen[id(b.qcode), id(b.dcode)] = of_first

    def rows(self, i: int, first: tuple[np.ndarray, np.ndarray, np.ndarray] | None, jd: Judgments):
        """The join of label set ``i`` from the first one's (None: join alone)."""
        if first is None or self.of_first[i] is None:
            return None
        at, ja, _ = first
        j = self.of_first[i][ja]
        keep = np.flatnonzero(j >= 0)
        j = j[keep].astype(np.int64)
        return at[keep], j, jd.qcode[j].astype(np.int64)


class Vocabulary:
    """The documents of several label sets as one index, so a run's docids are looked up once for all.

    With an :class:`~recjudge.data.trec.IdDictionary` the runs were read with, each dictionary id is
    looked up once for every run: a run then costs a lookup of the ids it added, not of all its ids.
    """

    def __init__(self, judgments: list[Judgments], dictionary: IdDictionary | None = None):
        docs = [jd.dlookup.keys for jd in judgments]
        self.lookup = Lookup(pd.unique(np.concatenate(docs)) if docs else np.zeros(0, dtype=object))
        shared = self.lookup.keys
        # per label set: its document code of each shared document, with -1 appended for "absent"
        self.to_jd = [np.r_[jd.dlookup(shared), -1].astype(np.int32) for jd in judgments]
        self.dictionary = dictionary
        # per label set: the code of each dictionary id mapped so far (the first ``_done``), grown by doubling
        # so that a run adding a few ids does not copy the whole mapping
        self.mapped = [np.zeros(0, dtype=np.int32) for _ in judgments]
        self._done = 0
        self._lock = threading.Lock()  # the reading thread and the scoring one both map runs

    def doc_codes(self, docids: np.ndarray) -> list[np.ndarray]:
        """Per label set, the document code (int32) of each of a run's distinct docids (-1: not judged)."""
        if self.dictionary is not None and self.dictionary.issued(docids):
            with self._lock:
                done, need = self._done, len(docids)
                if need > done:
                    shared = self.lookup(docids[done:])
                    if self.mapped and need > len(self.mapped[0]):
                        room = max(need, 2 * len(self.mapped[0]))
                        self.mapped = [np.resize(m, room) for m in self.mapped]
                    for m, to_jd in zip(self.mapped, self.to_jd):
                        m[done:need] = to_jd[shared]
                    self._done = need
                return [m[:need] for m in self.mapped]
        shared = self.lookup(docids)  # -1 indexes the appended "absent"
        return [to_jd[shared] for to_jd in self.to_jd]
