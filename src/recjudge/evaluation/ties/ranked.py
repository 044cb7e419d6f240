"""One run sorted once into tie blocks and joined to qrels; each tie treatment as a position array.

The join to qrels, the ideal DCG and the relevant counts come from the measure engine
(:class:`recjudge.evaluation.measures.Judgments`), and the hash key from
:func:`recjudge.data.trec.hashing.seeded_hash_keys`: each is defined once.
"""

from __future__ import annotations

import functools
from collections.abc import Callable

import numpy as np

from ...data.trec.hashing import seeded_hash_keys, string_hashes
from ...data.trec.records import FrameCodes, Qrels, Run, RunTable, string_rank
from ...errors import ConfigError
from ..measures import Context, RankedRun, judgments
from .policy import ScoreOrder, block_starts, item_hashes, score_order

TREATMENTS = ("input", "hash", "random", "trec_eval", "docid")


class Ranked:
    """One run sorted once by (user, score desc, input order), split into tie blocks, joined to qrels.

    Arrays named ``*_s`` are in that sorted order; ``pos`` is the 0-based position within the
    user's ranking. A tie treatment only permutes rows inside blocks, so every treatment is a new
    ``pos`` array computed from the blocks without re-sorting the run.
    """

    def __init__(self, run: Run, qrels: Qrels | None = None, *, context: Context | None = None,
                 order: ScoreOrder | None = None, doc_codes: np.ndarray | None = None):
        """``context``: the measure engine's judgments of ``qrels`` (and their caches) when the caller
        built them already; ``order``: the run's :func:`score_order`, when known; ``doc_codes``: the
        judgments' code of each of the run's distinct docids, when known."""
        # the run's one score order (policy.score_order: stable, so ties keep file order)
        so = order if order is not None else score_order(run)
        c = run.codes
        self.name = run.name
        n = len(so.qrank)
        self.n_rows = n
        self.users = so.qids  # in string order: u_s and qcodes index them
        self.order = so.order
        u = so.qrank
        self.u_s = u
        self.score_s = so.score
        self.dcode_s = c.dcode if so.in_place else c.dcode[so.order]  # into c.docids
        self.docids = c.docids
        ids = run.table.ids  # the IdDictionary the docids come from: per-id work done once for every run
        self.ids = ids if ids is not None and ids.issued(c.docids) else None
        new_block = block_starts(so)
        self.user_len = so.lengths
        self.pos = so.pos
        small = np.int32 if n < 2**31 else np.int64  # row-length index arrays at half the memory
        self.block = (np.cumsum(new_block) - 1).astype(small)
        b_first = np.flatnonzero(new_block)
        self.b_size = np.diff(np.append(b_first, n))
        self.b_start = self.pos[b_first]
        self.b_user = u[b_first]
        self.tied_rows = np.flatnonzero(self.b_size[self.block] > 1).astype(small)
        self.max_len = int(self.user_len.max()) if n else 0
        self._bq: np.ndarray | None = None
        self._bd: np.ndarray | None = None
        self._bd_done: np.ndarray | None = None
        self._docrank: np.ndarray | None = None
        self.qrels = qrels
        if qrels is not None:
            self._join(qrels, context, doc_codes)

    @functools.cached_property
    def qcodes(self) -> np.ndarray:
        """Each row's user (index into ``users``) in file order: the score order's, put back."""
        out = np.empty(self.n_rows, dtype=np.int64)
        out[self.order] = self.u_s
        return out

    # -- qrels
    def _join(self, qrels: Qrels, context: Context | None, doc_codes: np.ndarray | None) -> None:
        # the users every mean is over: the qrels' (or the given judgments')
        jd = context.jd if context is not None else judgments(qrels, qrels.qids)
        self.ctx = context if context is not None else Context(jd)  # ideal DCG and relevant counts, cached
        self.counted = np.asarray(jd.queries, dtype=object)
        self.user_counted = jd.qlookup(self.users)  # -1: a user the qrels lack
        c_s = self.user_counted.astype(np.int32)[self.u_s]
        # the distinct documents are looked up, not every row's
        if doc_codes is None:
            doc_codes = jd.dlookup(self.docids).astype(np.int32)
        self.doc_codes = doc_codes  # handed to the measure engine with every order of this run
        at, j, _ = jd.join(self.user_counted, doc_codes, self.u_s, self.dcode_s)
        self.j_s = np.full(self.n_rows, -1, dtype=np.int32 if len(jd.label) < 2**31 else np.int64)
        self.j_s[at] = j
        self.label_s = np.zeros(self.n_rows, dtype=np.int64)
        self.label_s[at] = jd.label[j]
        self.counted_s = c_s
        # rows that can score: a positive label in a counted user
        self.lab = np.flatnonzero((self.label_s >= 1) & (c_s >= 0))
        lab_blocks = np.zeros(len(self.b_size), dtype=bool)
        lab_blocks[self.block[self.lab]] = True
        self.sub_rows = self.tied_rows[lab_blocks[self.block[self.tied_rows]]]

    @property
    def n_counted(self) -> int:
        return len(self.counted)

    def nrel(self, rel: int) -> np.ndarray:
        return self.ctx.relevant(rel)

    def idcg(self, cutoff: int | None) -> np.ndarray:
        return self.ctx.ideal_dcg(cutoff)

    # -- tie-break keys for sorted rows
    def hash_key(self, rows: np.ndarray, seed: int) -> np.ndarray:
        """recjudge.data.trec.hash_keys for these rows, from string hashes computed once per run and
        row asked for (the tied rows): the docids of rows no treatment moves are never hashed."""
        if self._bq is None:
            self._bq = string_hashes(self.users)
            self._bd = np.zeros(self.n_rows, dtype=np.uint64)  # per sorted row where _bd_done
            self._bd_done = np.zeros(self.n_rows, dtype=bool)
        need = rows[~self._bd_done[rows]]
        if len(need):
            self._bd[need] = item_hashes(self.docids, self.ids, self.dcode_s[need])
            self._bd_done[need] = True
        return seeded_hash_keys(self._bq, self._bd[rows], self.u_s[rows], seed)

    @property
    def docrank(self) -> np.ndarray:
        """Per sorted row, a key in its item id's string order among the ids of the tied rows (0 on
        the other rows, which no treatment moves): the docid policies' key and the hash policy's
        collision fallback. Only the tied rows' ids are compared, never the run's whole dictionary."""
        if self._docrank is None:
            key = np.zeros(self.n_rows, dtype=np.int64)
            key[self.tied_rows] = string_rank(self.docids, self.dcode_s[self.tied_rows])
            self._docrank = key
        return self._docrank

    def positions(self, rows: np.ndarray, order: np.ndarray) -> np.ndarray:
        """New 0-based positions when ``rows`` (whole tie blocks) are put in ``order`` (an argsort of rows)."""
        pos = self.pos.copy()
        if len(rows):
            pos[rows[order]] = self.pos[rows]
        return pos

    def treatment(self, rows: np.ndarray, how: str, *, seed: int = 0, rng: np.random.Generator | None = None,
                  file_pos: np.ndarray | None = None) -> np.ndarray:
        """Positions with ties ordered by ``how``; ``file_pos`` is each row's line after a shuffle.

        As in a stable sort of the (shuffled) file, the line order is the last key of every policy.
        """
        if how == "input" and file_pos is None:
            return self.pos  # the base sort already keeps file order within blocks
        if len(rows) == 0:
            return self.pos
        line = self.order[rows] if file_pos is None else file_pos[self.order[rows]]
        block = self.block[rows]
        if how == "input":
            # lines are unique, so one integer sort on (block, line) is exact
            # in int64: NumPy 1 keeps an int32 array's type against an int64 scalar, and would overflow
            return self.positions(rows, np.argsort(block.astype(np.int64) * self.n_rows + line, kind="stable"))
        if how == "hash":
            h = self.hash_key(rows, seed)
            return self.positions(rows, _order_in_blocks(
                block, h, lambda: (line, self.docrank[rows], h)))
        if how in ("trec_eval", "docid"):
            # the policies of the same names: docid descending (trec_eval) or ascending, unique per row
            rank = self.docrank[rows]
            return self.positions(rows, np.lexsort((-rank if how == "trec_eval" else rank, block)))
        if how == "random":
            key = rng.integers(0, np.iinfo(np.uint64).max, size=len(rows), dtype=np.uint64, endpoint=True)
            return self.positions(rows, _order_in_blocks(block, key, lambda: (line, key)))
        raise ConfigError(f"unknown treatment {how!r}; choose one of {', '.join(TREATMENTS)}")

    def ranked_at(self, pos: np.ndarray) -> tuple[RankedRun, tuple[np.ndarray, np.ndarray, np.ndarray]]:
        """What the measure engine scores for the order ``pos`` (:class:`RankedRun`, scores n, n-1, …,
        1) and its judged rows (:meth:`Judgments.join`'s result), from the join made once: a treatment
        only moves rows inside blocks, so neither a sort nor another join is needed."""
        n = self.n_rows
        start = np.cumsum(self.user_len) - self.user_len
        inv = np.empty(n, dtype=np.int64)
        inv[start[self.u_s] + pos] = np.arange(n)  # the rows in rank order
        ranked = RankedRun(self.users, self.u_s, self.dcode_s[inv], self.docids,
                           (self.user_len[self.u_s] - self.pos).astype(np.float64), self.pos, self.user_len)
        j = self.j_s[inv]
        at = np.flatnonzero(j >= 0)
        return ranked, (at, j[at].astype(np.int64), self.counted_s[inv[at]].astype(np.int64))

    def tie_free_run(self, pos: np.ndarray, name: str) -> Run:
        """This run with its rows at ``pos`` and scores rewritten n, n-1, ..., 1: codes only, no frame."""
        codes = FrameCodes(self.u_s.astype(np.int32), self.users, self.dcode_s, self.docids)
        table = RunTable(codes, (pos + 1).astype(np.int64), (self.user_len[self.u_s] - pos).astype(np.float64),
                         np.zeros(self.n_rows, dtype=np.int32), np.array([name], dtype=object))
        return Run(name, tie_policy="input", table=table._replace(ids=self.ids))


def _order_in_blocks(block: np.ndarray, key: np.ndarray, exact: Callable[[], tuple]) -> np.ndarray:
    """Argsort by (block, 64-bit key) as one unsigned sort of block bits + the key's top bits.

    Truncating the key keeps its order; if two truncated keys collide inside a block (odds about
    pairs in a block / 2^44), an exact lexsort by block, then ``exact()``'s keys (last key first)
    decides instead.
    """
    bits = int(block.max()).bit_length()
    if bits == 0:
        comp = key
    else:
        comp = (block.astype(np.uint64) << np.uint64(64 - bits)) | (key >> np.uint64(bits))
    o = np.argsort(comp, kind="stable")
    c = comp[o]
    if np.any(c[1:] == c[:-1]):
        o = np.lexsort((*exact(), block))
    return o


def user_slots(qcodes: np.ndarray) -> np.ndarray:
    return np.argsort(qcodes, kind="stable")  # each user's lines, in file order


def shuffled_file_positions(qcodes: np.ndarray, rng: np.random.Generator,
                             slots: np.ndarray | None = None) -> np.ndarray:
    """New line index of each row after shuffling every user's rows among that user's lines."""
    n = len(qcodes)
    if slots is None:
        slots = user_slots(qcodes)
    key = rng.integers(0, np.iinfo(np.uint64).max, size=n, dtype=np.uint64, endpoint=True)
    moved = _order_in_blocks(qcodes, key, lambda: (key,))  # each user's rows, in random order
    new_index = np.empty(n, dtype=np.int64)
    new_index[moved] = slots
    return new_index
