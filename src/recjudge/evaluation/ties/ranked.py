"""One run sorted once into tie blocks and joined to qrels; each tie treatment as a position array.

The join to qrels, the ideal DCG and the relevant counts come from the measure engine
(:class:`recjudge.evaluation.measures.Judgments`), and the hash key from
:func:`recjudge.data.trec.seeded_hash_keys`: each is defined once.
"""

from __future__ import annotations

from collections.abc import Callable

import numpy as np
import pandas as pd

from ...data.trec import Qrels, Run, seeded_hash_keys, string_hashes
from ...errors import ConfigError
from ..measures import Context, judgments

TREATMENTS = ("input", "hash", "random")


class _Ranked:
    """One run sorted once by (user, score desc, input order), split into tie blocks, joined to qrels.

    Arrays named ``*_s`` are in that sorted order; ``pos`` is the 0-based position within the
    user's ranking. A tie treatment only permutes rows inside blocks, so every treatment is a new
    ``pos`` array computed from the blocks without re-sorting the run.
    """

    def __init__(self, run: Run, qrels: Qrels | None = None):
        f = run.frame
        self.name = run.name
        n = len(f)
        self.n_rows = n
        qcodes, users = pd.factorize(f.qid.to_numpy(dtype=object), sort=True)
        self.qcodes = qcodes.astype(np.int64)  # frame order
        self.users = np.asarray(users, dtype=object)
        score = f.score.to_numpy(dtype=np.float64)
        # lexsort is stable, but the explicit row key documents that ties keep file order
        order = np.lexsort((np.arange(n), -score, self.qcodes))
        self.order = order
        u = self.qcodes[order]
        s = score[order]
        self.u_s = u
        self.score_s = s
        self.docid_s = f.docid.to_numpy(dtype=object)[order]
        new_user = np.ones(n, dtype=bool)
        new_user[1:] = u[1:] != u[:-1]
        new_block = new_user.copy()
        new_block[1:] |= s[1:] != s[:-1]
        user_first = np.flatnonzero(new_user)
        self.user_len = np.diff(np.append(user_first, n))
        self.pos = np.arange(n) - user_first[u]
        self.block = np.cumsum(new_block) - 1
        b_first = np.flatnonzero(new_block)
        self.b_size = np.diff(np.append(b_first, n))
        self.b_start = self.pos[b_first]
        self.b_user = u[b_first]
        self.tied_rows = np.flatnonzero(self.b_size[self.block] > 1)
        self.max_len = int(self.user_len.max()) if n else 0
        self._bq: np.ndarray | None = None
        self._bd: np.ndarray | None = None
        self._docrank: np.ndarray | None = None
        self.qrels = qrels
        if qrels is not None:
            self._join(qrels)

    # -- qrels
    def _join(self, qrels: Qrels) -> None:
        jd = judgments(qrels, sorted(set(qrels.frame.qid)))  # the users every mean is over
        self.ctx = Context(jd)  # ideal DCG and relevant counts, cached as the measure engine does
        self.counted = np.asarray(jd.queries, dtype=object)
        self.user_counted = jd.query_codes(self.users)  # -1: a user the qrels lack
        c_s = self.user_counted[self.u_s]
        dcode = np.where(c_s >= 0, jd.doc_codes(self.docid_s), -1)
        j = jd.find(np.maximum(c_s, 0), dcode)
        hit = j >= 0
        self.judged_s = hit
        self.j_s = j
        self.label_s = np.where(hit, jd.label[np.maximum(j, 0)], 0).astype(np.int64)
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
        """recjudge.data.trec.hash_keys for these rows, from string hashes computed once per run."""
        if self._bq is None:
            self._bq = string_hashes(self.users.tolist())
            codes, uniq = pd.factorize(self.docid_s)
            self._bd = string_hashes(list(uniq))[codes]
        return seeded_hash_keys(self._bq, self._bd[rows], self.u_s[rows], seed)

    @property
    def docrank(self) -> np.ndarray:
        """Rank of each sorted row's item id in string order: the hash policy's collision fallback."""
        if self._docrank is None:
            self._docrank = pd.factorize(self.docid_s, sort=True)[0]
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
            return self.positions(rows, np.argsort(block * np.int64(self.n_rows) + line, kind="stable"))
        if how == "hash":
            h = self.hash_key(rows, seed)
            return self.positions(rows, _order_in_blocks(
                block, h, lambda: (line, self.docrank[rows], h)))
        if how == "random":
            key = rng.integers(0, np.iinfo(np.uint64).max, size=len(rows), dtype=np.uint64, endpoint=True)
            return self.positions(rows, _order_in_blocks(block, key, lambda: (line, key)))
        raise ConfigError(f"unknown treatment {how!r}; choose one of {', '.join(TREATMENTS)}")

    def tie_free_run(self, pos: np.ndarray, name: str) -> Run:
        frame = pd.DataFrame({
            "qid": self.users[self.u_s],
            "docid": self.docid_s,
            "rank": pos + 1,
            "score": (self.user_len[self.u_s] - pos).astype(np.float64),
            "tag": name,
        })
        return Run(name, frame, tie_policy="input")


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


def _user_slots(qcodes: np.ndarray) -> np.ndarray:
    return np.argsort(qcodes, kind="stable")  # each user's lines, in file order


def _shuffled_file_positions(qcodes: np.ndarray, rng: np.random.Generator,
                             slots: np.ndarray | None = None) -> np.ndarray:
    """New line index of each row after shuffling every user's rows among that user's lines."""
    n = len(qcodes)
    if slots is None:
        slots = _user_slots(qcodes)
    key = rng.integers(0, np.iinfo(np.uint64).max, size=n, dtype=np.uint64, endpoint=True)
    moved = _order_in_blocks(qcodes, key, lambda: (key,))  # each user's rows, in random order
    new_index = np.empty(n, dtype=np.int64)
    new_index[moved] = slots
    return new_index
