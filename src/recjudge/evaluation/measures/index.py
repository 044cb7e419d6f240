"""The judgments of the evaluated queries as integer codes, and the join of ranked rows with them.

Inside a query, documents are ordered by a hash bucket (then code), so a ranked row is compared with
the few judgments of its bucket only (:meth:`Judgments.join`): a few vectorised gathers per run.
"""

from __future__ import annotations

from dataclasses import dataclass, replace

import numpy as np
import pandas as pd

from ...data.trec import Qrels
from ...errors import ConfigError
from .groups import group_starts, narrowest

class Lookup:
    """Position of each value among ``keys`` (-1 when absent)."""

    def __init__(self, keys: np.ndarray):
        self.keys = np.asarray(keys, dtype=object)
        self._index = pd.Index(self.keys)

    def __call__(self, values: np.ndarray) -> np.ndarray:
        return self._index.get_indexer(np.asarray(values, dtype=object)).astype(np.int64, copy=False)


_MULT = np.uint32(0x9E3779B1)  # Knuth's multiplicative hash: a document's bucket inside its query


def _bucket_shift(counts: np.ndarray) -> np.ndarray:
    """Per query, the right shift that maps a 32-bit hash to one of 2^b buckets, 2^b about half its
    judgments (at most a few documents per bucket)."""
    bits = np.maximum(np.ceil(np.log2(np.maximum(counts, 1))).astype(np.int64) - 1, 0)
    return (32 - bits).astype(np.uint32)


def _buckets(dcode: np.ndarray, shift: np.ndarray) -> np.ndarray:
    """Each document's bucket inside its query (uint32: the product wraps modulo 2^32, as the hash wants)."""
    h = dcode.astype(np.uint32) * _MULT
    # a shift by 32 (a query of one or two documents: one bucket) is not defined on uint32
    return np.where(shift < 32, h >> np.minimum(shift, np.uint32(31)), np.uint32(0)) if (shift >= 32).any() \
        else h >> shift


@dataclass(frozen=True, eq=False)
class Judgments:
    """The qrels of the evaluated queries as integer codes, grouped by query.

    Inside a query, documents are ordered by a hash bucket (then code): a document is looked up
    among the few of its bucket (``bstart[boff[q] + bucket]`` to the next), the join of a ranked
    row being a few vectorised gathers. ``qrow`` orders a query's judgments as the qrels list them
    (Compat's ideal list breaks full ties by qrels order; :func:`_rows_in_query`); ``above`` is, for
    a label > 0, the number of documents of the query with a higher label; ``starts[q]:starts[q + 1]``
    are the rows of query ``q``.
    """

    queries: list[str]
    qlookup: Lookup
    dlookup: Lookup
    ndoc: int
    qcode: np.ndarray   # the narrowest unsigned integers that hold the query codes
    dcode: np.ndarray   # int32, by bucket inside each query
    label: np.ndarray   # int8 for labels within ±63, else int16 or int32
    qrow: np.ndarray    # per judgment, its qrels row less its query's first (uint16 when they fit, else int32)
    above: np.ndarray   # the narrowest unsigned integers that hold the counts
    starts: np.ndarray  # int64, nq + 1
    shift: np.ndarray   # uint32 per query: see _bucket_shift
    boff: np.ndarray    # int64 per query: its first bucket
    bstart: np.ndarray  # per bucket + 1: its first judgment

    @property
    def nq(self) -> int:
        return len(self.queries)

    def join(self, qmap: np.ndarray, dmap: np.ndarray, qidx: np.ndarray, didx: np.ndarray
             ) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
        """The rows that are judged, their index in the judgments arrays and their query code.

        Row r names the query ``qmap[qidx[r]]`` and the document ``dmap[didx[r]]`` (codes of these
        judgments; a negative index or code is absent). Returns ``(rows, j, q)``, int64, in row
        order: each row is compared with the judgments of its query's bucket only.
        """
        qmap = np.r_[np.asarray(qmap, dtype=np.int32), -1]
        dmap = np.r_[np.asarray(dmap, dtype=np.int32), -1]
        q = qmap[qidx if qidx.min(initial=0) >= 0 else np.where(qidx < 0, -1, qidx)]
        d = dmap[didx if didx.min(initial=0) >= 0 else np.where(didx < 0, -1, didx)]
        valid = (q >= 0) & (d >= 0)
        live = None if valid.all() else np.flatnonzero(valid)
        if live is not None:
            q, d = q[live], d[live]
        f = self.boff[q] + _buckets(d, self.shift[q])
        at, end = self.bstart[f], self.bstart[f + 1]
        del f
        # the first document of each row's bucket, for every row at once; then the rows whose bucket
        # holds more, a few rounds on fewer and fewer rows
        first = self.dcode[np.minimum(at, len(self.dcode) - 1)]
        j = np.where((at < end) & (first == d), at, -1).astype(np.int64)
        # a bucket holds its documents in code order: past a larger code, the row's document is not there
        todo = np.flatnonzero((first < d) & (at + 1 < end))
        step = 1
        while len(todo):
            a = at[todo] + step
            got, want = self.dcode[a], d[todo]
            hit = got == want
            j[todo[hit]] = a[hit]
            todo = todo[(got < want) & (a + 1 < end[todo])]
            step += 1
        found = np.flatnonzero(j >= 0)
        rows = found if live is None else live[found]
        return rows, j[found], q[found].astype(np.int64)

    def find(self, qcode: np.ndarray, dcode: np.ndarray) -> np.ndarray:
        """Row of each (query code, document code) in the judgments arrays, -1 when not judged
        (``dcode`` is -1 for a document no query judges)."""
        rows, j, _ = self.join(np.arange(self.nq), np.arange(self.ndoc, dtype=np.int32), qcode, dcode)
        out = np.full(len(qcode), -1, dtype=np.int64)
        out[rows] = j
        return out

    def count(self, mask: np.ndarray) -> np.ndarray:
        """Per query, how many judged documents satisfy ``mask``."""
        return np.bincount(self.qcode[mask], minlength=self.nq).astype(np.int64)

    def segment(self, q: int) -> tuple[int, int]:
        """Rows of query ``q`` in the judgments arrays (sorted by query first)."""
        return int(self.starts[q]), int(self.starts[q + 1])


def _rows_in_query(qrow: np.ndarray, starts: np.ndarray) -> np.ndarray:
    """The qrels rows made relative to their query's first row, 16-bit when they fit (qrels written
    user by user): only compared within one query (Compat's qrels order), they keep that order."""
    if len(qrow) <= np.iinfo(np.uint16).max:  # every row number fits as it is
        return qrow.astype(np.uint16)
    nonempty = starts[:-1] < starts[1:]
    first = np.zeros(len(starts) - 1, dtype=qrow.dtype)
    first[nonempty] = np.minimum.reduceat(qrow, starts[:-1][nonempty])
    rel = qrow - np.repeat(first, np.diff(starts))
    return rel.astype(np.uint16) if int(rel.max()) <= np.iinfo(np.uint16).max else qrow


def labels_above(qcode: np.ndarray, label: np.ndarray, nq: int) -> np.ndarray:
    """For each judged document, how many documents of its query have a higher label."""
    if len(label) == 0:
        return np.zeros(0, dtype=np.int64)
    lo, hi = int(label.min()), int(label.max())
    width = hi - lo + 1
    if nq * width <= 50_000_000:  # counting, no sort: labels are small integers in practice
        flat = qcode.astype(np.int32) * np.int32(width) + (label - lo).astype(np.int32)  # below 5e7
        counts = np.bincount(flat, minlength=nq * width).reshape(nq, width)
        above = np.cumsum(counts[:, ::-1], axis=1)[:, ::-1] - counts  # labels strictly higher
        return above.ravel().astype(np.int32)[flat]  # counts within one query
    by_label = np.lexsort((-label, qcode))
    sq, sl = qcode[by_label], label[by_label]

    def first_of_group(*keys: np.ndarray) -> np.ndarray:
        starts = group_starts(*keys)
        return np.repeat(starts, np.diff(np.r_[starts, len(sq)]))

    out = np.empty(len(label), dtype=np.int64)
    out[by_label] = first_of_group(sq, sl) - first_of_group(sq)
    return out


def judgments(qrels: Qrels, queries: list[str]) -> Judgments:
    """The judgments of ``queries`` (sorted query ids; query code = index) coded for lookups."""
    qlookup = Lookup(np.array(queries, dtype=object))
    codes = qrels.codes  # the reader's codes: no string is hashed again
    # int32 throughout (labels have at most nine digits, read_qrels): a few row-length arrays at a
    # time, since one label set of 100,000 users holds 60 million judgments
    small = np.int32 if len(codes.qcode) < 2**31 else np.int64
    qcode = qlookup(codes.qids).astype(np.int32)[codes.qcode]
    keep = None
    if (qcode < 0).any():
        keep = np.flatnonzero(qcode >= 0)
        qcode = qcode[keep]
    dcode = codes.dcode if keep is None else codes.dcode[keep]
    docs = codes.docids
    ndoc = max(len(docs), 1)
    nq = len(queries)
    shift = _bucket_shift(np.bincount(qcode, minlength=nq))
    nbucket = np.left_shift(np.int64(1), (32 - shift).astype(np.int64))
    boff = np.cumsum(nbucket) - nbucket
    bucket = boff.astype(small)[qcode] + _buckets(dcode, shift[qcode]).astype(small)  # below the judgments' count
    bstart = np.r_[0, np.cumsum(np.bincount(bucket, minlength=int(nbucket.sum())))].astype(small)
    # the keys are unique (one label per pair), so any sort gives this one order
    key = bucket.astype(np.int64) * ndoc
    del bucket
    key += dcode
    order = np.argsort(key)
    del key
    qrow = (order if keep is None else keep[order]).astype(small)
    qcode, dcode = qcode[order], dcode[order].astype(np.int32)
    table_label = qrels.table.label  # narrow: no int64 copy of every label
    label = (table_label if keep is None else table_label[keep])[order].astype(np.int32)
    del order
    starts = np.searchsorted(qcode, np.arange(nq + 1)).astype(np.int64)
    above = labels_above(qcode, label, nq)
    # the smallest integers that hold them (a few labels, a few hundred judgments per query: a
    # quarter of the memory): labels within ±63, so that a difference or a negation still fits
    above = above.astype(narrowest(0, int(above.max(initial=0))))
    label = label.astype(narrowest(int(label.min(initial=0)), int(label.max(initial=0)), margin=2))
    qcode = qcode.astype(narrowest(0, nq))
    qrow = _rows_in_query(qrow, starts)
    return Judgments(queries, qlookup, Lookup(docs), ndoc, qcode, dcode, label, qrow, above, starts, shift, boff,
                     bstart)


def relabelled(jd: Judgments, qrels: Qrels) -> Judgments:
    """``jd`` under the labels of ``qrels``, whose pairs are ``jd``'s pairs in the same reader codes."""
    c = qrels.codes
    q = jd.qlookup(c.qids).astype(np.int32)[c.qcode]
    at = jd.find(q, np.asarray(c.dcode, dtype=np.int32)) if len(q) else np.zeros(0, dtype=np.int64)
    kept = at >= 0
    if int(kept.sum()) != len(jd.label):
        raise ConfigError(f"label set {qrels.name!r} does not label the pairs of the judgments it was to share")
    label = np.zeros(len(jd.label), dtype=np.int32)
    label[at[kept]] = qrels.table.label[kept]
    above = labels_above(jd.qcode, label, jd.nq)
    return replace(jd, label=label.astype(narrowest(int(label.min(initial=0)), int(label.max(initial=0)), margin=2)),
                   above=above.astype(narrowest(0, int(above.max(initial=0)))))

