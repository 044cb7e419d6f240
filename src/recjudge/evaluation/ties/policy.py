"""The tie policy: a run's rows in score order, its tie blocks, and the order a declared policy gives them.

A run leaves :func:`resolve_ties` tie-free: each ranking is ordered by score and then by the
declared policy, and its scores are rewritten as strictly decreasing positive integers
(``n, n-1, …, 1``). :func:`ensure_tie_free` is how every consumer gets a tie-free run: it checks the
scores (float32, as trec_eval compares them) instead of trusting ``Run.tie_policy``. trec_eval
breaks ties by docid descending, ir-measures' Python providers by docid ascending; after the
rewrite both see one order.

Cost per run: one linear pass finds the score order of a run written as recommenders write them
(grouped by user, best first; the users' segments are put in string order without sorting rows),
one more finds the tie blocks, and the policy sorts only the tied rows, once, on one 64-bit key.
The disclosed hash of a docid comes from the run's :class:`~recjudge.data.trec.IdDictionary` when
it was read with one, so it is computed once per string for all the runs of an evaluation; the
docid order (trec_eval's, and the hash's collision fallback) compares the tied rows' docids alone.
"""

from __future__ import annotations

import math
import warnings
from typing import NamedTuple

import numpy as np
import pandas as pd

from ...data.trec.hashing import seeded_hash_keys, string_hashes
from ...data.trec.records import TIE_POLICIES, FrameCodes, Run, RunTable, frame_codes, sorted_codes, string_rank
from ...errors import ConfigError

__all__ = [
    "TIE_POLICIES",
    "ScoreOrder",
    "score_order",
    "resolve_ties",
    "ensure_tie_free",
    "tie_free",
    "is_tie_free",
    "top_k",
    "tied_user_share",
    "order_rows",
    "tie_order",
    "tie_blocks",
    "item_hashes",
]


def _check_policy(policy: str) -> None:
    if policy not in TIE_POLICIES:
        raise ConfigError(f"unknown tie policy {policy!r}; choose one of {', '.join(TIE_POLICIES)}")


class ScoreOrder(NamedTuple):
    """A run's rows ordered by qid (string order), then score descending, ties in row order."""

    order: np.ndarray   # row indices (the identity when the rows are in that order already)
    qrank: np.ndarray   # per ordered row: index of its qid in ``qids`` (int32)
    score: np.ndarray   # per ordered row
    in_place: bool      # the rows were in that order: ``order`` is the identity
    qids: np.ndarray    # object: the run's distinct qids in string order
    pos: np.ndarray     # per ordered row: 0-based position inside its query (int32)
    starts: np.ndarray  # per query (index into qids): its first ordered row

    @property
    def lengths(self) -> np.ndarray:
        """Per query (index into qids): its rows."""
        return np.diff(np.r_[self.starts, len(self.qrank)])


def _score_order_of(t: RunTable) -> ScoreOrder:
    c, score = t.codes, t.score
    # a run's own qids sorted, not through the docid dictionary: its order of every string would be
    # sorted again whenever the reading thread adds a docid (4× the time of this sort, measured)
    rank = sorted_codes(c.qids)
    qids = np.empty(len(c.qids), dtype=object)
    qids[rank] = c.qids
    small = np.int32 if len(score) < 2**31 else np.int64
    qrank = rank.astype(small)[c.qcode]
    n = len(score)
    order, in_place = np.arange(n), True
    if n > 1:
        new_query = qrank[1:] != qrank[:-1]
        seg = np.flatnonzero(np.r_[True, new_query])  # the file's segments of one query
        if len(seg) == len(qids) and np.all((score[1:] <= score[:-1]) | new_query):
            # each query in one segment, best first: order the segments, not the rows
            first = qrank[seg]
            if np.any(first[1:] < first[:-1]):
                by = np.argsort(first)
                size = np.diff(np.r_[seg, n])[by]
                start = seg[by]
                order = np.arange(n) + np.repeat(start - (np.cumsum(size) - size), size)
                in_place = False
        else:
            order, in_place = np.lexsort((-score, qrank)), False  # stable: equal scores keep row order
        if not in_place:
            qrank, score = qrank[order], score[order]
    starts = np.flatnonzero(np.r_[True, qrank[1:] != qrank[:-1]]) if n else np.zeros(0, dtype=np.int64)
    pos = np.arange(n, dtype=small) - np.repeat(starts.astype(small), np.diff(np.r_[starts, n]))
    return ScoreOrder(order, qrank, score, in_place, qids, pos, starts)


def score_order(run: Run) -> ScoreOrder:
    """The run's rows by qid, then score descending (ties in row order).

    Runs written as TREC runs usually are grouped by query, best first; then the order costs a few
    linear passes and no sort. The tie share, the tie check, :func:`resolve_ties` and the measures
    all start from this one order: compute it once and hand it on (their ``order`` argument).
    """
    return _score_order_of(run.table)


def block_starts(so: ScoreOrder) -> np.ndarray:
    """Per ordered row: whether it starts a block of equal scores (a new query or a new score)."""
    new_block = np.ones(len(so.score), dtype=bool)
    new_block[1:] = (so.pos[1:] == 0) | (so.score[1:] != so.score[:-1])
    return new_block


def _tie_blocks(so: ScoreOrder) -> tuple[np.ndarray, np.ndarray] | None:
    """(ordered positions inside a block of equal scores, their block number), or None when no two
    rows of a query share a score. Blocks are numbered 0, 1, … in row order among the tied rows
    alone (every caller only needs the numbers to order the blocks)."""
    s = so.score
    if len(s) < 2:
        return None
    cont = np.zeros(len(s), dtype=bool)  # the row continues the block of the row before it
    np.equal(s[1:], s[:-1], out=cont[1:])
    cont[1:] &= so.pos[1:] != 0
    if not cont.any():
        return None
    tied = cont.copy()
    tied[:-1] |= cont[1:]
    at = np.flatnonzero(tied)
    block = np.cumsum(~cont[at], dtype=np.int64)
    block -= 1
    return at, block


def tie_blocks(so: ScoreOrder) -> tuple[np.ndarray, np.ndarray] | None:
    """(positions in ``so`` of the rows inside a block of equal scores, their block number), or None
    when no two rows of a query share a score; a block's rows are adjacent."""
    return _tie_blocks(so)


def _used(codes: np.ndarray, n: int) -> np.ndarray:
    """The distinct values of ``codes`` (into ``n`` values), ascending, without a sort."""
    seen = np.zeros(n, dtype=bool)
    seen[codes] = True
    return np.flatnonzero(seen)


def _docid_rank(t: RunTable, dcode: np.ndarray) -> np.ndarray:
    """Per row (``dcode``: the tied rows), a key whose order is its docid's string order (unique per
    docid), from the docids of these rows alone: never a sort of the dictionary the run shares."""
    return string_rank(t.codes.docids, dcode)


def item_hashes(docids: np.ndarray, ids, dcode: np.ndarray) -> np.ndarray:
    """``B(docid)`` per row (``dcode`` into ``docids``): from the :class:`~recjudge.data.trec.IdDictionary`
    ``ids`` when the docids are its own (each id hashed once for every run), else of the rows' distinct docids."""
    if ids is not None and ids.issued(docids):
        return ids.hashes_of(dcode)
    used, inverse = np.unique(dcode, return_inverse=True)
    return string_hashes(docids[used])[inverse.reshape(-1)]


def _in_blocks(block: np.ndarray, key: np.ndarray, exact) -> np.ndarray:
    """Argsort by (block, 64-bit key) as one sort of block bits + the key's top bits; where two
    truncated keys of a block collide (odds about pairs in a block / 2^44), an exact lexsort by
    block then ``exact()``'s keys (last key first) decides instead."""
    bits = int(block.max()).bit_length() if len(block) else 0
    comp = key if bits == 0 else (block.astype(np.uint64) << np.uint64(64 - bits)) | (key >> np.uint64(bits))
    o = np.argsort(comp)
    c = comp[o]
    if np.any(c[1:] == c[:-1]):
        o = np.lexsort((*exact(), block))
    return o


def tie_order(run: Run, order: ScoreOrder, policy: str = "trec_eval", seed: int = 0) -> np.ndarray:
    """Row indices of ``run`` by qid, score descending, then ``policy`` (``order``: its :func:`score_order`):
    the order :func:`resolve_ties` puts the rows in, without building the resolved run."""
    _check_policy(policy)
    return _policy_order(run.table, order, policy, seed)


def _policy_order(t: RunTable, so: ScoreOrder, policy: str, seed: int) -> np.ndarray:
    """Row indices ordered by qid, score descending, then ``policy``: the score order, with the rows
    of each tie block (and only those) put in the policy's order by one sort."""
    order = so.order
    blocks = None if policy == "input" else _tie_blocks(so)
    if blocks is None:
        return order  # tie-free (or 'input'): the policy decides nothing, so its keys are never computed
    at, block = blocks
    rows = order[at]
    c = t.codes
    dcode = c.dcode[rows]
    if policy == "hash":
        qcode = c.qcode[rows]
        users = _used(qcode, len(c.qids))
        uh = np.zeros(len(c.qids), dtype=np.uint64)
        uh[users] = string_hashes(c.qids[users])
        key = seeded_hash_keys(uh, item_hashes(c.docids, t.ids, dcode), qcode, seed)
        o = _in_blocks(block, key, lambda: (_docid_rank(t, dcode), key))  # docid: the collision fallback
    else:
        rank = _docid_rank(t, dcode)
        # unique inside a block (one line per query and document): block bits + rank fit 64 bits
        rank = (rank.max() - rank) if policy == "trec_eval" else rank
        o = np.lexsort((rank, block)) if int(block.max()).bit_length() + int(rank.max()).bit_length() > 63 else \
            np.argsort((block.astype(np.int64) << np.int64(int(rank.max()).bit_length())) | rank)
    order = order.copy()
    order[at] = rows[o]  # blocks stay where they are; rows are reordered inside each block
    return order


def order_rows(frame: pd.DataFrame, policy: str = "trec_eval", seed: int = 0) -> np.ndarray:
    """Row indices of ``frame`` ordered by qid, score descending, then the tie policy."""
    _check_policy(policy)
    n = len(frame)
    t = RunTable(frame_codes(frame), np.zeros(n, dtype=np.int64), frame["score"].to_numpy(dtype=np.float64),
                 np.zeros(n, dtype=np.int32), np.array([""], dtype=object))
    return _policy_order(t, _score_order_of(t), policy, seed)


def _compact(codes: np.ndarray, values: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """``codes`` renumbered over the values still used (first-seen order), when some are not."""
    used = np.zeros(len(values), dtype=bool)
    used[codes] = True
    if used.all():
        return codes, values
    new = np.cumsum(used, dtype=np.int64) - 1
    return new[codes].astype(np.int32), values[used]


def _resolve(run: Run, policy: str, seed: int, depth: int | None, so: ScoreOrder) -> tuple[Run, ScoreOrder]:
    t = run.table
    order = _policy_order(t, so, policy, seed)
    pos = so.pos  # the policy reorders rows inside blocks only: qids stay in place
    n = np.repeat(so.lengths, so.lengths)
    qrank, starts = so.qrank, so.starts
    if depth is not None:
        keep = pos < depth
        order, pos, qrank = order[keep], pos[keep], qrank[keep]
        n = np.minimum(n[keep], depth)
        starts = np.flatnonzero(pos == 0)
    c = t.codes
    tcode = t.tcode[order] if len(t.tags) > 1 else np.broadcast_to(np.int32(0), (len(order),))  # one tag: no copy
    dcode, docids, tags, ids = c.dcode[order], c.docids, t.tags, t.ids
    if depth is not None:  # rows were dropped: keep only the ids still used
        dcode, docids = _compact(dcode, docids)
        tcode, tags = _compact(tcode, tags)
        ids = ids if docids is c.docids else None
    # qids in string order: the result's codes are its score order's query ranks
    table = RunTable(FrameCodes(qrank, so.qids, dcode, docids), (pos + 1).astype(np.int64),
                     (n - pos).astype(np.float64), tcode, tags, ids)
    out = Run(run.name, tie_policy=policy, seed=seed, table=table)
    # in score order by construction: nothing checks or sorts it again
    return out, ScoreOrder(np.arange(len(pos)), qrank, table.score, True, so.qids, pos, starts)


def resolve_ties(run: Run, policy: str = "trec_eval", seed: int = 0, depth: int | None = None, *,
                 order: ScoreOrder | None = None) -> Run:
    """Order each ranking by score then ``policy`` and rewrite scores as n, n-1, …, 1 (tie-free).

    ``depth`` truncates each ranking to its top ``depth`` after ordering. ``input`` keeps file order
    among ties and warns: a relevant-first candidate list then wins every tie. ``order``: the run's
    :func:`score_order`, when the caller has it.
    """
    if policy == "input":
        warnings.warn(
            f"run {run.name!r}: tie policy 'input' resolves equal scores by file order; a list written "
            "relevant-first then wins every tie. Prefer 'trec_eval' (the default) or 'hash'.", stacklevel=2)
    _check_policy(policy)
    return _resolve(run, policy, seed, depth, order if order is not None else score_order(run))[0]


def is_tie_free(run: Run, *, order: ScoreOrder | None = None) -> bool:
    """Whether no two documents of a query share a score compared as float32 (trec_eval's view).

    Then every tie policy gives the same order, so trec_eval and ir-measures rank alike.
    """
    so = order if order is not None else score_order(run)
    s32 = so.score.astype(np.float32)
    return bool(np.all((s32[1:] < s32[:-1]) | (so.pos[1:] == 0)))


def tie_free(run: Run, policy: str = "trec_eval", seed: int = 0, order: ScoreOrder | None = None
             ) -> tuple[Run, ScoreOrder]:
    """:func:`ensure_tie_free` with the result's score order (``order``: the run's, when known)."""
    _check_policy(policy)
    so = order if order is not None else score_order(run)
    if is_tie_free(run, order=so):
        return (run if run.tie_policy is not None else run.recorded(run.name, policy, seed)), so
    return _resolve(run, policy, seed, None, so)


def ensure_tie_free(run: Run, policy: str = "trec_eval", seed: int = 0, *, order: ScoreOrder | None = None) -> Run:
    """``run`` made tie-free under ``policy``: untouched when its scores are already tie-free.

    The check is on the scores (:func:`is_tie_free`), never on ``run.tie_policy``: a run that
    claims a policy but ties in float32 is resolved again, and a raw run without ties keeps its
    scores (it is recorded as resolved by ``policy``, which could not reorder it).
    """
    return tie_free(run, policy, seed, order)[0]


def top_k(run: Run, k: int, *, order: ScoreOrder | None = None) -> pd.DataFrame:
    """Rows of each query's ``k`` best scores, ranked; ``run`` must be tie-free (:func:`ensure_tie_free`)."""
    so = order if order is not None else score_order(run)
    return run.frame.iloc[so.order[so.pos < k]]


def tied_user_share(run: Run, k: int | None = None, *, order: ScoreOrder | None = None) -> float:
    """Share of queries whose top-``k`` (by score, before any tie policy) holds two equal scores.

    A tie block that straddles position k counts: it decides which items enter the top-k.
    """
    # computed, not read from run.tie_policy: a resolved run simply has no ties; ties need no order
    # among themselves here, so the run's one score order serves
    so = order if order is not None else score_order(run)
    q, s = so.qrank, so.score
    tie = (s[1:] == s[:-1]) & (so.pos[1:] > 0)  # position 0 starts a query
    if k is not None:
        tie &= so.pos[1:] <= k  # pair (k-1, k) 0-based crosses the boundary and counts
    n = len(so.qids)
    if not n:
        return math.nan
    tied = np.zeros(n, dtype=bool)
    tied[q[1:][tie]] = True
    return int(tied.sum()) / n
