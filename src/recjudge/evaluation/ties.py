"""Tie handling as part of the evaluation protocol: prevalence, treatments, exact expectations.

When several candidates share a score, the tie-breaking rule becomes part of the ranking. A
candidate list written relevant-first and sorted stably hands the relevant item every tie. This
module makes that measurable:

- **Prevalence** per run (:func:`tie_prevalence`): the share of the run's users with any exact
  (float64) tie, with a tie block touching, crossing or lying inside the top-k, and with a tie
  block holding a relevant item.
- **Treatments** of equal scores: input order (the stable sort: file line order), the disclosed
  hash of :func:`recjudge.data.trec.hash_keys` (seed + user + item, item id as collision fallback),
  many hash seeds (mean and sd), and the **exact expectation under a uniformly random order within
  each tie block** (:func:`expected_metrics`). Closed forms cover Hit@k (ir-measures' Success@k),
  P@k, R@k, nDCG@k (graded, trec_eval semantics) and RR with any number of relevant items; every
  other measure (Compat, Bpref, AP, …) gets a seeded Monte Carlo estimate with a confidence
  interval.
- **Permutation test** (:func:`permutation_test`): shuffle each user's rows, rank with
  input-order tie-breaking, and report the largest change of each metric. It is 0 for a
  row-order-invariant evaluator (the hash policy) and large for input order on tie-heavy runs.
- **Sampled-candidate protocol** (:func:`sampled_candidate_run`): one held-out relevant item plus
  N seeded negatives per user, written relevant-first as common evaluators do, scored by any
  scorer.

Which users count: the qrels' users, as trec_eval and ir-measures do; a user the run lacks scores 0
and a user only the run has is ignored. Prevalence shares are over the run's own users.

Closed forms (a block = a maximal run of equal scores; it starts at 0-based position ``a``, holds
``n`` items of which ``R`` are relevant with total gain ``G``; ``c = clip(k - a, 0, n)`` of its
positions lie in the top k). Blocks are ordered independently, so per user:

- E[#relevant in top k] = Σ R·c/n; P@k divides by k, R@k by the user's relevant count in qrels.
- Hit@k = 1 − Π_blocks C(n − R, c) / C(n, c) (no relevant item lands in the top k of any block).
- E[DCG@k] = Σ G/n · Σ_{p=a}^{min(a+n, k)−1} 1/log2(p + 2): each item of a block is equally likely
  at each of the block's positions, and DCG is linear in the gains. Gain = label, negative labels
  count 0, the ideal comes from the qrels (trec_eval's ndcg_cut). A block straddling k spreads its
  gain over its positions inside the cut only; a run shorter than k simply has fewer positions.
- RR@k: only the first block holding a relevant item matters. With m relevant among its n items,
  the first relevant lands at offset j with probability C(n − 1 − j, m − 1) / C(n, m), so
  E[RR] = Σ_j C(n − 1 − j, m − 1) / C(n, m) / (a + j + 1) over a + j < k. For m = 1 this is the
  mean of 1/(a + j + 1) over the block's positions; several relevant items are exact too.
"""

from __future__ import annotations

import hashlib
import logging
import math
import time
import warnings
from collections.abc import Callable, Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import NamedTuple, Union

import numpy as np
import pandas as pd

from ..data.trec import Qrels, Run, _splitmix64, _string_hash64
from ..errors import ConfigError, InputError

__all__ = [
    "DEFAULT_TIE_MEASURES",
    "DEFAULT_CUTOFFS",
    "TREATMENTS",
    "MeasureSpec",
    "parse_tie_measures",
    "TiePrevalence",
    "MeasureTies",
    "RunTies",
    "TieSettings",
    "TieAudit",
    "PermutationResult",
    "SampledCandidates",
    "tie_prevalence",
    "policy_metrics",
    "expected_metrics",
    "permutation_test",
    "shuffle_rows",
    "audit_run",
    "audit_ties",
    "format_audit",
    "sampled_candidate_run",
    "popularity_scorer",
    "attribute_overlap_scorer",
]

log = logging.getLogger(__name__)

DEFAULT_TIE_MEASURES = ("Hit@10", "nDCG@10", "nDCG@100")
DEFAULT_CUTOFFS = (10, 100)
TREATMENTS = ("input", "hash", "random")
_MAX_ORDERS_PER_CALL = 8  # tie-free copies of a run handed to the reference evaluator at once


# ---------------------------------------------------------------------------------------- measures

class MeasureSpec(NamedTuple):
    """A measure to audit. ``family`` names its closed form, or is ``"general"`` (Monte Carlo)."""

    name: str  # as reported, e.g. "Hit@10"
    key: str  # ir-measures' name, e.g. "Success@10"
    measure: object  # the ir-measures Measure
    family: str  # "hit", "p", "r", "ndcg", "rr" or "general"
    cutoff: int | None
    rel: int


_FAMILIES = {"Success": "hit", "P": "p", "R": "r", "nDCG": "ndcg", "RR": "rr"}


def _alias(name: str) -> str:
    # Hit@k is the recommender name of ir-measures' Success@k
    if name == "Hit" or name.startswith(("Hit@", "Hit(")):
        return "Success" + name[3:]
    return name


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
    from .measures import _split_top_level, measure_key, parse_measures

    if spec is None:
        spec = DEFAULT_TIE_MEASURES
    items = _split_top_level(spec) if isinstance(spec, str) else [str(s).strip() for s in spec]
    names = [s.replace(" ", "") for s in items]
    parsed = parse_measures([_alias(n) for n in names])  # ConfigError on unknown names, duplicates
    out = []
    for name, m in zip(names, parsed):
        family, cutoff, rel = _family(m)
        out.append(MeasureSpec(name, measure_key(m), m, family, cutoff, rel))
    return tuple(out)


def _specs(measures) -> tuple[MeasureSpec, ...]:
    if isinstance(measures, tuple) and all(isinstance(m, MeasureSpec) for m in measures):
        return measures
    return parse_tie_measures(measures)


# ------------------------------------------------------------------------------- ranked run record

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
        qf = qrels.frame
        qq, counted = pd.factorize(qf.qid.to_numpy(dtype=object), sort=True)
        self.counted = np.asarray(counted, dtype=object)  # the users every mean is over
        self.q_user = qq.astype(np.int64)
        self.q_label = qf.label.to_numpy(dtype=np.int64)
        self.user_counted = pd.Index(self.counted).get_indexer(self.users).astype(np.int64)
        docs = np.concatenate([self.docid_s, qf.docid.to_numpy(dtype=object)])
        dcodes, duniq = pd.factorize(docs)
        nd = max(len(duniq), 1)
        c_s = self.user_counted[self.u_s]
        run_key = np.where(c_s >= 0, c_s * nd + dcodes[: self.n_rows], -1)
        q_key = self.q_user * nd + dcodes[self.n_rows:]
        sorter = np.argsort(q_key, kind="stable")
        sk = q_key[sorter]
        at = np.clip(np.searchsorted(sk, run_key), 0, max(len(sk) - 1, 0))
        hit = (run_key >= 0) & (sk[at] == run_key) if len(sk) else np.zeros(self.n_rows, bool)
        self.judged_s = hit
        self.label_s = np.where(hit, self.q_label[sorter[at]], 0).astype(np.int64)
        self.counted_s = c_s
        # rows that can score: a positive label in a counted user
        self.lab = np.flatnonzero((self.label_s >= 1) & (c_s >= 0))
        lab_blocks = np.zeros(len(self.b_size), dtype=bool)
        lab_blocks[self.block[self.lab]] = True
        self.sub_rows = self.tied_rows[lab_blocks[self.block[self.tied_rows]]]
        self._idcg: dict[int | None, np.ndarray] = {}
        self._nrel: dict[int, np.ndarray] = {}

    @property
    def n_counted(self) -> int:
        return len(self.counted)

    def nrel(self, rel: int) -> np.ndarray:
        if rel not in self._nrel:
            self._nrel[rel] = np.bincount(self.q_user[self.q_label >= rel], minlength=self.n_counted)
        return self._nrel[rel]

    def idcg(self, cutoff: int | None) -> np.ndarray:
        if cutoff not in self._idcg:
            gain = np.maximum(self.q_label, 0).astype(np.float64)
            o = np.lexsort((-gain, self.q_user))
            uq = self.q_user[o]
            first = np.flatnonzero(np.r_[True, uq[1:] != uq[:-1]])
            starts = np.repeat(first, np.diff(np.append(first, len(uq))))
            p = np.arange(len(uq)) - starts
            keep = p < cutoff if cutoff is not None else np.ones(len(p), bool)
            w = gain[o][keep] / np.log2(p[keep] + 2.0)
            self._idcg[cutoff] = np.bincount(uq[keep], weights=w, minlength=self.n_counted)
        return self._idcg[cutoff]

    # -- tie-break keys for sorted rows
    def hash_key(self, rows: np.ndarray, seed: int) -> np.ndarray:
        """recjudge.data.trec.hash_keys for these rows, from string hashes computed once per run."""
        if self._bq is None:
            self._bq = _string_hash64(self.users.tolist())
            codes, uniq = pd.factorize(self.docid_s)
            self._bd = _string_hash64(list(uniq))[codes]
        hq = _splitmix64(self._bq ^ np.uint64(seed & 0xFFFFFFFFFFFFFFFF))
        return _splitmix64(hq[self.u_s[rows]] ^ self._bd[rows])

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
        raise ValueError(f"unknown treatment {how!r}; choose one of {', '.join(TREATMENTS)}")

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


def shuffle_rows(run: Run, seed: int | Sequence[int] = 0) -> Run:
    """The run with each user's rows shuffled among that user's lines (seeded); nothing else changes."""
    qcodes = pd.factorize(run.frame.qid.to_numpy(dtype=object), sort=True)[0]
    new_index = _shuffled_file_positions(qcodes, np.random.default_rng(seed))
    frame = run.frame.iloc[np.argsort(new_index)].reset_index(drop=True)
    return Run(run.name, frame, tie_policy=run.tie_policy, seed=run.seed)


# -------------------------------------------------------------------------- metric computation

def _closed_values(r: _Ranked, spec: MeasureSpec, pos: np.ndarray) -> np.ndarray:
    """Per counted user, for a tie-free order given by ``pos`` (trec_eval / ir-measures semantics)."""
    lab = r.lab
    cu = r.counted_s[lab]
    label = r.label_s[lab]
    p = pos[lab]
    k = spec.cutoff
    inside = p < k if k is not None else np.ones(len(p), dtype=bool)
    U = r.n_counted
    if spec.family == "ndcg":
        w = label[inside] / np.log2(p[inside] + 2.0)
        dcg = np.bincount(cu[inside], weights=w, minlength=U)
        return _safe_div(dcg, r.idcg(k))
    rel = inside & (label >= spec.rel)
    if spec.family == "rr":
        out = np.zeros(U)
        np.maximum.at(out, cu[rel], 1.0 / (p[rel] + 1.0))
        return out
    count = np.bincount(cu[rel], minlength=U).astype(np.float64)
    if spec.family == "hit":
        return (count > 0).astype(np.float64)
    if spec.family == "p":
        return count / k
    if spec.family == "r":
        return _safe_div(count, r.nrel(spec.rel).astype(np.float64))
    raise ValueError(spec.family)


def _safe_div(a: np.ndarray, b: np.ndarray) -> np.ndarray:
    out = np.zeros_like(a, dtype=np.float64)
    np.divide(a, b, out=out, where=b > 0)
    return out


def _log_choose(n: np.ndarray, k: np.ndarray) -> np.ndarray:
    from scipy.special import gammaln

    return gammaln(n + 1.0) - gammaln(k + 1.0) - gammaln(n - k + 1.0)


def _expected_closed(r: _Ranked, spec: MeasureSpec) -> np.ndarray:
    """Exact expectation per counted user under a uniformly random order within every tie block."""
    U = r.n_counted
    label = r.label_s[r.lab]
    w = label.astype(np.float64) if spec.family == "ndcg" else (label >= spec.rel).astype(np.float64)
    keep = w > 0
    blocks, inv = np.unique(r.block[r.lab][keep], return_inverse=True)
    W = np.bincount(inv, weights=w[keep], minlength=len(blocks))  # R (count) or G (gain) per block
    a = r.b_start[blocks].astype(np.float64)
    n = r.b_size[blocks].astype(np.float64)
    cu = r.user_counted[r.b_user[blocks]]
    k = spec.cutoff
    kk = float(k) if k is not None else float(r.max_len)
    c = np.clip(kk - a, 0.0, n)  # the block's positions inside the cut
    if spec.family == "ndcg":
        disc = np.concatenate([[0.0], np.cumsum(1.0 / np.log2(np.arange(r.max_len) + 2.0))])
        lo = np.minimum(a, kk).astype(np.int64)
        hi = np.minimum(a + n, kk).astype(np.int64)
        dcg = np.bincount(cu, weights=W / n * (disc[hi] - disc[lo]), minlength=U)
        return _safe_div(dcg, r.idcg(k))
    if spec.family in ("p", "r"):
        count = np.bincount(cu, weights=W * c / n, minlength=U)
        return count / k if spec.family == "p" else _safe_div(count, r.nrel(spec.rel).astype(np.float64))
    if spec.family == "hit":
        # P(no relevant in the block's c top slots) = C(n - R, c) / C(n, c) = C(n - c, R) / C(n, R)
        # = Π_{i<R} (n - c - i) / (n - i): R factors (few), each summed as an exact-ish log1p
        impossible = c > n - W
        R = W.astype(np.int64)
        idx = np.repeat(np.arange(len(R)), R)
        i = np.arange(R.sum()) - np.repeat(np.cumsum(R) - R, R)
        ok = ~impossible[idx]
        terms = np.log1p(-c[idx][ok] / (n[idx][ok] - i[ok]))
        log_miss = np.bincount(idx[ok], weights=terms, minlength=len(R))
        any_sure = np.bincount(cu, weights=impossible.astype(np.float64), minlength=U) > 0
        miss = np.exp(np.bincount(cu, weights=log_miss, minlength=U))
        has = np.bincount(cu, minlength=U) > 0
        return np.where(any_sure, 1.0, np.where(has, 1.0 - miss, 0.0))
    if spec.family == "rr":
        # only the first block with a relevant item matters (blocks are in user, position order)
        first = np.unique(cu, return_index=True)[1]
        fa, fn, fm, fu = a[first], n[first], W[first], cu[first]
        count = (fn - fm + 1).astype(np.int64)
        idx = np.repeat(np.arange(len(first)), count)
        j = np.arange(count.sum()) - np.repeat(np.cumsum(count) - count, count)
        nn, mm = fn[idx], fm[idx]
        prob = np.exp(_log_choose(nn - 1 - j, mm - 1) - _log_choose(nn, mm))
        at = fa[idx] + j
        w_rr = np.where(at < kk, prob / (at + 1.0), 0.0)
        return np.bincount(fu[idx], weights=w_rr, minlength=U)
    raise ValueError(spec.family)


class _Evaluator:
    """Per-user values of the general measures for an order, via :func:`recjudge.evaluation.measures.per_query_matrix`.

    Orders are memoised by content: a treatment that leaves a run unchanged (a tie-free run, the
    hash policy after a shuffle) costs nothing.
    """

    def __init__(self, r: _Ranked, specs: Sequence[MeasureSpec]):
        self.r = r
        self.specs = [s for s in specs if s.family == "general"]
        self.memo: dict[bytes, np.ndarray] = {}

    def values(self, orders: Sequence[np.ndarray]) -> list[np.ndarray]:
        """For each order: an array (len(specs), counted users)."""
        if not self.specs:
            return [np.zeros((0, self.r.n_counted)) for _ in orders]
        digests = [hashlib.blake2b(p.tobytes(), digest_size=16).digest() for p in orders]
        todo = {d: p for d, p in zip(digests, orders) if d not in self.memo}
        items = list(todo.items())
        for start in range(0, len(items), _MAX_ORDERS_PER_CALL):
            chunk = items[start:start + _MAX_ORDERS_PER_CALL]
            self._evaluate(chunk)
        return [self.memo[d] for d in digests]

    def _evaluate(self, chunk: list[tuple[bytes, np.ndarray]]) -> None:
        from .measures import per_query_matrix

        r = self.r
        runs = {f"order{i}": r.tie_free_run(p, f"order{i}") for i, (_, p) in enumerate(chunk)}
        mats = per_query_matrix(runs, r.qrels, [s.measure for s in self.specs], queries=list(r.counted))
        for i, (digest, _) in enumerate(chunk):
            self.memo[digest] = np.vstack([
                mats[s.key][f"order{i}"].reindex(r.counted).fillna(0.0).to_numpy(dtype=np.float64)
                for s in self.specs
            ])


def _per_user(r: _Ranked, specs: Sequence[MeasureSpec], ev: _Evaluator, orders: Sequence[np.ndarray]
              ) -> list[np.ndarray]:
    """For each order, an array (len(specs), counted users) in the order of ``specs``."""
    general = ev.values(orders)
    out = []
    for pos, gen in zip(orders, general):
        rows, g = [], iter(gen)
        for s in specs:
            rows.append(next(g) if s.family == "general" else _closed_values(r, s, pos))
        out.append(np.vstack(rows) if rows else np.zeros((0, r.n_counted)))
    return out


# ------------------------------------------------------------------------------------ prevalence

class TiePrevalence(NamedTuple):
    """Shares of a run's users (before any tie policy). ``*_top`` tuples follow ``cutoffs``.

    touching: a tie block with an item in the top k (position or membership may change);
    crossing: a block holding positions k and k + 1 (membership of the top k changes);
    inside: a block of two or more items lying wholly within the top k (positions change);
    relevant: a tie block holding an item labelled ≥ 1 (None without qrels).
    """

    users: int
    rows: int
    tied: float
    tied_rows: float
    largest_block: int
    float32_tied: float
    cutoffs: tuple[int, ...]
    touching_top: tuple[float, ...]
    crossing_top: tuple[float, ...]
    inside_top: tuple[float, ...]
    relevant_tied: float | None
    relevant_touching_top: tuple[float | None, ...]

    def as_dict(self) -> dict:
        out: dict = {"users": self.users, "rows": self.rows, "tied": self.tied}
        for i, k in enumerate(self.cutoffs):
            out[f"tied_top{k}"] = self.touching_top[i]
            out[f"crossing_top{k}"] = self.crossing_top[i]
            out[f"inside_top{k}"] = self.inside_top[i]
        out["relevant_tied"] = self.relevant_tied
        for i, k in enumerate(self.cutoffs):
            out[f"relevant_tied_top{k}"] = self.relevant_touching_top[i]
        out.update(tied_rows=self.tied_rows, largest_block=self.largest_block,
                   float32_tied=self.float32_tied)
        return out


def _check_cutoffs(cutoffs: Iterable[int]) -> tuple[int, ...]:
    ks = tuple(int(k) for k in cutoffs)
    if any(k < 1 for k in ks):
        raise ConfigError(f"cutoffs must be positive integers, got {list(ks)}")
    return tuple(dict.fromkeys(ks))


def _prevalence(r: _Ranked, cutoffs: Sequence[int]) -> TiePrevalence:
    U = len(r.users)
    tied_b = r.b_size > 1

    def share(block_mask: np.ndarray) -> float:
        return float(np.unique(r.b_user[block_mask]).size / U) if U else math.nan

    a, n = r.b_start, r.b_size
    touching = tuple(share(tied_b & (a < k)) for k in cutoffs)
    crossing = tuple(share((a < k) & (a + n > k)) for k in cutoffs)
    inside = tuple(share(tied_b & (a + n <= k)) for k in cutoffs)
    if r.qrels is not None:
        rel_b = np.zeros(len(n), dtype=bool)
        rel_b[r.block[r.lab]] = True
        relevant = share(tied_b & rel_b)
        rel_top = tuple(share(tied_b & rel_b & (a < k)) for k in cutoffs)
    else:
        relevant, rel_top = None, tuple(None for _ in cutoffs)
    s32 = r.score_s.astype(np.float32)  # trec_eval compares scores as float32
    same = (r.u_s[1:] == r.u_s[:-1]) & (s32[1:] == s32[:-1])
    f32 = float(np.unique(r.u_s[1:][same]).size / U) if U else math.nan
    return TiePrevalence(
        users=U, rows=r.n_rows, tied=share(tied_b),
        tied_rows=float(len(r.tied_rows) / r.n_rows) if r.n_rows else math.nan,
        largest_block=int(n.max()) if len(n) else 0, float32_tied=f32, cutoffs=tuple(cutoffs),
        touching_top=touching, crossing_top=crossing, inside_top=inside,
        relevant_tied=relevant, relevant_touching_top=rel_top)


def tie_prevalence(run: Run, qrels: Qrels | None = None, cutoffs: Iterable[int] = DEFAULT_CUTOFFS
                   ) -> TiePrevalence:
    """How often exact (float64) ties occur in ``run``, as shares of the run's users."""
    return _prevalence(_Ranked(run, qrels), _check_cutoffs(cutoffs))


# ------------------------------------------------------------------------------ public per-user API

def _frame(r: _Ranked, specs: Sequence[MeasureSpec], values: np.ndarray) -> pd.DataFrame:
    return pd.DataFrame(values.T, index=pd.Index(r.counted, name="qid"), columns=[s.name for s in specs])


def policy_metrics(run: Run, qrels: Qrels, measures=DEFAULT_TIE_MEASURES, policy: str = "hash",
                   seed: int = 0) -> pd.DataFrame:
    """Per-user values (index: qrels' users) with ties ordered by ``policy``: "input", "hash" or "random"."""
    specs = _specs(measures)
    r = _Ranked(run, qrels)
    rng = np.random.default_rng(seed)
    pos = r.treatment(r.tied_rows, policy, seed=seed, rng=rng)
    return _frame(r, specs, _per_user(r, specs, _Evaluator(r, specs), [pos])[0])


def expected_metrics(run: Run, qrels: Qrels, measures=DEFAULT_TIE_MEASURES, mc_samples: int = 100,
                     seed: int = 0) -> pd.DataFrame:
    """Per-user expectation under a uniformly random order within each tie block.

    Exact for the closed-form families; a mean over ``mc_samples`` seeded random orders otherwise.
    """
    specs = _specs(measures)
    r = _Ranked(run, qrels)
    values, _ = _expected(r, specs, _Evaluator(r, specs), mc_samples, seed)
    return _frame(r, specs, values)


def _expected(r: _Ranked, specs: Sequence[MeasureSpec], ev: _Evaluator, mc_samples: int, seed: int
              ) -> tuple[np.ndarray, np.ndarray | None]:
    """Per-user expectations (specs × users) and, for the general measures, each draw's mean."""
    out = np.zeros((len(specs), r.n_counted))
    for i, s in enumerate(specs):
        if s.family != "general":
            out[i] = _expected_closed(r, s)
    draws = None
    if ev.specs:
        if mc_samples < 2:
            raise ConfigError(f"Monte Carlo needs at least 2 samples, got {mc_samples}")
        chunks = []  # a few orders at a time: each is a full-length position array
        for start in range(0, mc_samples, _MAX_ORDERS_PER_CALL):
            orders = [r.treatment(r.tied_rows, "random", rng=np.random.default_rng([seed, 1, d]))
                      for d in range(start, min(start + _MAX_ORDERS_PER_CALL, mc_samples))]
            chunks += ev.values(orders)
        vals = np.stack(chunks)  # draws × general specs × users
        gi = [i for i, s in enumerate(specs) if s.family == "general"]
        out[gi] = vals.mean(axis=0)
        draws = vals.mean(axis=2)  # draws × general specs
    return out, draws


class PermutationResult(NamedTuple):
    """Largest |change| of each measure's mean over ``permutations`` seeded shuffles of the rows."""

    policy: str
    permutations: int
    max_abs_change: dict[str, float]
    users_changed: dict[str, float]  # share of qrels users whose value moved in some shuffle


def permutation_test(run: Run, qrels: Qrels, measures=DEFAULT_TIE_MEASURES, permutations: int = 20,
                     seed: int = 0, policy: str = "input") -> PermutationResult:
    """Shuffle each user's rows ``permutations`` times (seeded) and rank them with ``policy``.

    Shuffle p uses ``shuffle_rows(run, seed=[seed, p])``. An evaluator is row-order invariant when
    every change is 0.
    """
    if policy not in ("input", "hash"):
        raise ConfigError(f"the permutation test compares 'input' or 'hash' tie-breaking, not {policy!r}")
    specs = _specs(measures)
    r = _Ranked(run, qrels)
    ev = _Evaluator(r, specs)
    rows = r.tied_rows if ev.specs else r.sub_rows
    base = _per_user(r, specs, ev, [r.treatment(rows, policy, seed=seed)])[0]
    return _permutation(r, specs, ev, rows, {policy: base}, permutations, seed)[policy]


def _permutation(r: _Ranked, specs, ev, rows, bases: Mapping[str, np.ndarray], permutations: int,
                 seed: int) -> dict[str, PermutationResult]:
    """One permutation test per policy in ``bases`` (policy -> unshuffled per-user values), sharing
    the shuffles."""
    if permutations < 1:
        raise ConfigError(f"the permutation test needs at least 1 permutation, got {permutations}")
    max_change = {k: np.zeros(len(specs)) for k in bases}
    moved = {k: np.zeros_like(b, dtype=bool) for k, b in bases.items()}
    slots = _user_slots(r.qcodes)
    for p in range(permutations):
        file_pos = _shuffled_file_positions(r.qcodes, np.random.default_rng([seed, p]), slots)
        for policy, base in bases.items():
            pos = r.treatment(rows, policy, seed=seed, file_pos=file_pos)
            vals = _per_user(r, specs, ev, [pos])[0]
            change = np.abs(vals.mean(axis=1) - base.mean(axis=1))
            max_change[policy] = np.maximum(max_change[policy], change)
            moved[policy] |= ~np.isclose(vals, base, rtol=0.0, atol=1e-12)
    out = {}
    for policy in bases:
        users = moved[policy].mean(axis=1) if r.n_counted else np.zeros(len(specs))
        out[policy] = PermutationResult(policy, permutations,
                                        {s.name: float(v) for s, v in zip(specs, max_change[policy])},
                                        {s.name: float(v) for s, v in zip(specs, users)})
    return out


# ----------------------------------------------------------------------------------------- audit

class MeasureTies(NamedTuple):
    """One measure's mean over the qrels' users under each tie treatment."""

    measure: str
    input_order: float
    hash: float
    expected: float
    hash_seeds_mean: float
    hash_seeds_sd: float
    expected_method: str  # "exact" or "monte_carlo"
    expected_ci: tuple[float, float] | None  # Monte Carlo only
    permutation: float  # largest |change| of the mean, input-order tie-breaking
    permutation_hash: float  # the same with the hash policy (0 for an invariant evaluator)
    permutation_users: float  # share of users whose value moved under input order

    def as_dict(self) -> dict:
        return {
            "input_order": self.input_order,
            "hash": self.hash,
            "expected": self.expected,
            "hash_seeds_mean": self.hash_seeds_mean,
            "hash_seeds_sd": self.hash_seeds_sd,
            "expected_method": self.expected_method,
            "expected_ci": list(self.expected_ci) if self.expected_ci is not None else None,
            "input_minus_expected": self.input_order - self.expected,
        }


class RunTies(NamedTuple):
    name: str
    prevalence: TiePrevalence
    measures: tuple[MeasureTies, ...]
    seconds: float

    def as_dict(self) -> dict:
        return {
            "prevalence": self.prevalence.as_dict(),
            "measures": {m.measure: m.as_dict() for m in self.measures},
            "permutation": {m.measure: m.permutation for m in self.measures},
            "permutation_hash": {m.measure: m.permutation_hash for m in self.measures},
            "permutation_users_changed": {m.measure: m.permutation_users for m in self.measures},
        }


@dataclass(frozen=True)
class TieSettings:
    measures: tuple[str, ...]
    cutoffs: tuple[int, ...]
    seed: int = 0
    seeds: int = 100
    permutations: int = 20
    mc_samples: int = 100
    confidence: float = 0.95

    def __post_init__(self):
        if self.seeds < 2:
            raise ConfigError(f"--seeds must be at least 2 (a spread needs two seeds), got {self.seeds}")
        if self.permutations < 1:
            raise ConfigError(f"--permutations must be at least 1, got {self.permutations}")
        if self.mc_samples < 2:
            raise ConfigError(f"--mc-samples must be at least 2, got {self.mc_samples}")
        if not 0.0 < self.confidence < 1.0:
            raise ConfigError(f"confidence must lie in (0, 1), got {self.confidence}")


@dataclass(frozen=True, eq=False)
class TieAudit:
    runs: tuple[RunTies, ...]
    settings: TieSettings
    qrels: str | None
    counted_users: int | None
    notes: tuple[str, ...] = field(default=())

    def as_dict(self) -> dict:
        s = self.settings
        return {
            "runs": {r.name: r.as_dict() for r in self.runs},
            "settings": {
                "qrels": self.qrels,
                "measures": list(s.measures),
                "k": list(s.cutoffs),
                "users": ("mean over the qrels' users; a user the run lacks scores 0"
                          if self.qrels is not None else None),
                "counted_users": self.counted_users,
                "prevalence_users": "shares of each run's own users; exact float64 ties",
                "relevant": "label >= 1",
                "input_order": "stable sort by score: equal scores keep the run file's line order",
                "hash": f"recjudge.data.trec.hash_keys(user, item, seed={s.seed}), item id as fallback",
                "hash_seeds": {"first": s.seed, "count": s.seeds},
                "expected": "uniformly random order within tie blocks: exact closed form, or Monte "
                            f"Carlo over {s.mc_samples} seeded orders with a {s.confidence:.0%} CI",
                "permutations": s.permutations,
                "mc_samples": s.mc_samples,
                "seed": s.seed,
            },
            "notes": list(self.notes),
        }

    def format(self) -> str:
        return format_audit(self)


def audit_run(run: Run, qrels: Qrels | None = None, measures=DEFAULT_TIE_MEASURES,
              settings: TieSettings | None = None) -> RunTies:
    """Prevalence and, with qrels, every measure under every tie treatment, plus the permutation test."""
    t0 = time.perf_counter()
    specs = _specs(measures) if qrels is not None else ()
    if settings is None:
        settings = TieSettings(tuple(s.name for s in specs), DEFAULT_CUTOFFS)
    r = _Ranked(run, qrels)
    prevalence = _prevalence(r, _check_cutoffs(settings.cutoffs))
    if not specs:
        return RunTies(run.name, prevalence, (), time.perf_counter() - t0)
    ev = _Evaluator(r, specs)
    rows = r.tied_rows if ev.specs else r.sub_rows
    seed = settings.seed
    if ev.specs and len(r.tied_rows):
        log.info("%s: %s have no closed form; up to %d evaluations of the run (Monte Carlo, hash seeds, "
                 "shuffles)", run.name, ", ".join(s.name for s in ev.specs),
                 2 + settings.seeds + settings.mc_samples + settings.permutations)
    inp, hsh = _per_user(r, specs, ev, [r.treatment(rows, "input"), r.treatment(rows, "hash", seed=seed)])
    seed_means = np.stack([
        _per_user(r, specs, ev, [r.treatment(rows, "hash", seed=seed + i)])[0].mean(axis=1)
        for i in range(settings.seeds)
    ])
    expected, draws = _expected(r, specs, ev, settings.mc_samples, seed)
    perm = _permutation(r, specs, ev, rows, {"input": inp, "hash": hsh}, settings.permutations, seed)
    perm_in, perm_hash = perm["input"], perm["hash"]
    out, gi = [], 0
    for i, s in enumerate(specs):
        ci = None
        if s.family == "general":
            d = draws[:, gi]
            gi += 1
            ci = mc_interval(d, settings.confidence)
        out.append(MeasureTies(
            measure=s.name,
            input_order=float(inp[i].mean()),
            hash=float(hsh[i].mean()),
            expected=float(expected[i].mean()),
            hash_seeds_mean=float(seed_means[:, i].mean()),
            hash_seeds_sd=float((seed_means[:, i] - seed_means[0, i]).std(ddof=1)),
            expected_method="exact" if s.family != "general" else "monte_carlo",
            expected_ci=ci,
            permutation=perm_in.max_abs_change[s.name],
            permutation_hash=perm_hash.max_abs_change[s.name],
            permutation_users=perm_in.users_changed[s.name],
        ))
    return RunTies(run.name, prevalence, tuple(out), time.perf_counter() - t0)


def mc_interval(draws: np.ndarray, confidence: float) -> tuple[float, float]:
    """Two-sided Student-t interval for the mean of Monte Carlo draws."""
    from scipy import stats

    d = np.asarray(draws, dtype=np.float64)
    # shifting by one draw makes the sd exactly 0 when every draw agrees (a tie-free run)
    half = stats.t.ppf(0.5 + confidence / 2, len(d) - 1) * (d - d[0]).std(ddof=1) / math.sqrt(len(d))
    return float(d.mean() - half), float(d.mean() + half)


def audit_ties(runs: Mapping[str, Run] | Iterable[Run], qrels: Qrels | None = None,
               measures=None, cutoffs: Iterable[int] = DEFAULT_CUTOFFS, seeds: int = 100,
               permutations: int = 20, seed: int = 0, mc_samples: int = 100,
               confidence: float = 0.95) -> TieAudit:
    """Audit every run. ``runs`` may be a lazy iterable so that only one run is in memory at a time.

    ``measures`` defaults to Hit@10, nDCG@10 and nDCG@100 when qrels are given; without qrels only
    prevalence is computed.
    """
    if measures is not None and qrels is None:
        raise ConfigError("measures need relevance labels: pass qrels (--qrels QRELS)")
    specs = _specs(measures if measures is not None else DEFAULT_TIE_MEASURES) if qrels is not None else ()
    settings = TieSettings(tuple(s.name for s in specs), _check_cutoffs(cutoffs), seed, seeds,
                           permutations, mc_samples, confidence)
    if isinstance(runs, Mapping):  # the mapping's keys name the runs
        items: Iterable[Run] = (v if v.name == k else Run(k, v.frame, v.tie_policy, v.seed)
                                for k, v in runs.items())
    else:
        items = runs
    out: list[RunTies] = []
    seen: set[str] = set()
    notes: list[str] = []
    for run in items:
        if run.name in seen:
            raise InputError(run.name, f"run name {run.name!r} appears twice", "give each run a unique name")
        seen.add(run.name)
        if qrels is not None and not set(run.frame.qid.unique()) & set(qrels.frame.qid.unique()):
            note = f"run {run.name!r} ranks none of the {qrels.name!r} qrels' users: every measure is 0"
            warnings.warn(note, stacklevel=2)
            notes.append(note)
        res = audit_run(run, qrels, specs, settings)
        log.info("%s audited in %.1f s", run.name, res.seconds)
        out.append(res)
    if not out:
        raise ConfigError("no runs given; pass run files or a folder of runs")
    counted = int(qrels.frame.qid.nunique()) if qrels is not None else None
    return TieAudit(tuple(out), settings, qrels.name if qrels is not None else None, counted, tuple(notes))


# ------------------------------------------------------------------------------------- formatting

def _pct(x: float | None) -> str:
    return "—" if x is None or (isinstance(x, float) and math.isnan(x)) else f"{100 * x:.1f}%"


def _num(x: float | None) -> str:
    return "—" if x is None or (isinstance(x, float) and math.isnan(x)) else f"{x:.4f}"


def _table(header: Sequence[str], rows: Sequence[Sequence[str]]) -> list[str]:
    widths = [max(len(h), *(len(r[i]) for r in rows)) for i, h in enumerate(header)]

    def line(cells):
        return "  ".join(c.ljust(w) if i == 0 else c.rjust(w) for i, (c, w) in enumerate(zip(cells, widths)))

    return [line(header), line(["-" * w for w in widths]), *(line(r) for r in rows)]


def format_audit(audit: TieAudit) -> str:
    """Readable tables: prevalence, then one table per measure with every treatment."""
    s = audit.settings
    out = ["Tie prevalence (share of each run's users with an exact tie; before any tie policy)"]
    header = ["run", "users", "tied"]
    for k in s.cutoffs:
        header += [f"tied@{k}", f"cross@{k}", f"inside@{k}"]
    with_rel = audit.qrels is not None
    if with_rel:
        header += ["rel tied"] + [f"rel tied@{k}" for k in s.cutoffs]
    header += ["tied rows", "largest block"]
    rows = []
    for r in audit.runs:
        p = r.prevalence
        row = [r.name, str(p.users), _pct(p.tied)]
        for i, _ in enumerate(s.cutoffs):
            row += [_pct(p.touching_top[i]), _pct(p.crossing_top[i]), _pct(p.inside_top[i])]
        if with_rel:
            row += [_pct(p.relevant_tied)] + [_pct(x) for x in p.relevant_touching_top]
        row += [_pct(p.tied_rows), str(p.largest_block)]
        rows.append(row)
    out += _table(header, rows)
    out.append("  tied@k: a tie block reaches the top k; cross@k: it holds ranks k and k+1 (changes "
               "membership); inside@k: it lies wholly in the top k (changes positions); rel: it holds "
               "an item labelled >= 1.")
    for name in s.measures:
        out.append("")
        out.append(f"{name} (mean over {audit.counted_users} users of qrels {audit.qrels!r}; a user the "
                   "run lacks scores 0)")
        header = ["run", "input order", f"hash (seed {s.seed})", "expected",
                  f"hash seeds mean ± sd ({s.seeds})", "input − expected", "perm max |Δ| input",
                  "perm max |Δ| hash"]
        rows = []
        for r in audit.runs:
            m = next(x for x in r.measures if x.measure == name)
            exp = _num(m.expected)
            if m.expected_ci is not None:
                exp += f" [{_num(m.expected_ci[0])}, {_num(m.expected_ci[1])}] MC"
            rows.append([r.name, _num(m.input_order), _num(m.hash), exp,
                         f"{_num(m.hash_seeds_mean)} ± {_num(m.hash_seeds_sd)}",
                         f"{round(m.input_order - m.expected, 4) + 0.0:+.4f}",  # no "-0.0000"
                         _num(m.permutation), _num(m.permutation_hash)])
        out += _table(header, rows)
    if audit.runs and audit.runs[0].measures:
        mc = any(m.expected_ci is not None for m in audit.runs[0].measures)
        out.append("")
        out.append("expected: uniformly random order within tie blocks (exact closed form"
                   + (f"; MC = Monte Carlo over {s.mc_samples} orders with a {s.confidence:.0%} CI" if mc else "")
                   + f"). perm: largest change of the mean over {s.permutations} seeded shuffles of "
                   "each user's rows.")
    for note in audit.notes:
        out.append(f"note: {note}")
    return "\n".join(out)


# ------------------------------------------------------------------------ sampled-candidate protocol

Scorer = Callable[[str, np.ndarray], Union[Sequence[float], np.ndarray]]


class SampledCandidates(NamedTuple):
    """A candidate run (relevant item first, then the negatives in sampled order) and its qrels."""

    run: Run
    qrels: Qrels
    n_negatives: int | None
    seed: int


def _user_seed(user: str) -> list[int]:
    digest = hashlib.blake2b(user.encode("utf-8"), digest_size=8).digest()
    return [int.from_bytes(digest[:4], "little"), int.from_bytes(digest[4:], "little")]


def _pairs(obj, what: str) -> dict[str, list[str]]:
    if obj is None:
        return {}
    if isinstance(obj, pd.DataFrame):
        if not {"user", "item"} <= set(obj.columns):
            raise InputError(f"<{what}>", f"columns {list(obj.columns)} lack 'user' and 'item'",
                             "give a frame with columns user and item")
        out: dict[str, list[str]] = {}
        for u, i in zip(obj["user"].astype(str), obj["item"].astype(str)):
            out.setdefault(u, []).append(i)
        return out
    return {str(u): ([str(v)] if isinstance(v, str) else [str(x) for x in v]) for u, v in obj.items()}


def sampled_candidate_run(held_out: Mapping[str, str] | pd.DataFrame, catalogue: Iterable[str],
                          scorer: Scorer, n_negatives: int | None = 30, seed: int = 0,
                          exclude: Mapping[str, Iterable[str]] | pd.DataFrame | None = None,
                          name: str = "sampled", label: int = 1) -> SampledCandidates:
    """Rows of each user's held-out item plus ``n_negatives`` sampled negatives, scored by ``scorer``.

    - ``held_out``: one item per user (a mapping, or a frame with columns user and item).
    - ``catalogue``: the items negatives are drawn from (uniformly, without replacement), never the
      held-out item nor the user's ``exclude`` items (e.g. the training history).
    - ``n_negatives=None`` ranks the whole catalogue (a full-catalogue run) instead of a sample.
    - ``scorer(user, items) -> scores`` is any system or baseline (see :func:`popularity_scorer`,
      :func:`attribute_overlap_scorer`).

    Each user's sample depends only on (``seed``, user), never on the other users. Rows are written
    relevant-first, as common evaluators do, so input-order tie-breaking shows its bias directly.
    """
    held = _pairs(held_out, "held_out")
    for u, items in held.items():
        if len(items) != 1:
            raise ConfigError(f"user {u!r} has {len(items)} held-out items; the sampled-candidate "
                              "protocol takes exactly one per user (use a leave-one-out split)")
    excl = _pairs(exclude, "exclude")
    cat = np.asarray(pd.unique(np.asarray(list(catalogue), dtype=object)), dtype=object)
    if len(cat) == 0:
        raise ConfigError("the catalogue is empty; pass the items negatives are drawn from")
    index = {item: i for i, item in enumerate(cat.tolist())}
    if n_negatives is not None and n_negatives < 1:
        raise ConfigError(f"n_negatives must be at least 1 (or None for the full catalogue), got {n_negatives}")
    qids, docids, scores = [], [], []
    for user in sorted(held):
        pos_item = held[user][0]
        banned = {index[i] for i in excl.get(user, ()) if i in index}
        if pos_item in index:
            banned.add(index[pos_item])
        if n_negatives is None:
            mask = np.ones(len(cat), dtype=bool)
            mask[list(banned)] = False
            negs = np.flatnonzero(mask)
        else:
            available = len(cat) - len(banned)
            if available < n_negatives:
                raise ConfigError(f"user {user!r}: only {available} catalogue items are eligible as "
                                  f"negatives, {n_negatives} requested; lower n_negatives")
            rng = np.random.default_rng([seed, *_user_seed(user)])
            negs = _sample_without(rng, len(cat), n_negatives, banned)
        items = np.concatenate([[pos_item], cat[negs]]).astype(object)
        s = np.asarray(scorer(user, items), dtype=np.float64).reshape(-1)
        if s.shape[0] != len(items):
            raise ConfigError(f"scorer returned {s.shape[0]} scores for {len(items)} items (user {user!r}); "
                              "return one score per item, in the order given")
        if not np.all(np.isfinite(s)):
            raise ConfigError(f"scorer returned a non-finite score for user {user!r}; return finite numbers")
        qids.append(np.full(len(items), user, dtype=object))
        docids.append(items)
        scores.append(s)
    if not qids:
        raise ConfigError("no held-out items given")
    frame = pd.DataFrame({"qid": np.concatenate(qids), "docid": np.concatenate(docids),
                          "score": np.concatenate(scores)})
    frame["rank"] = frame.groupby("qid", sort=False).cumcount() + 1
    frame["tag"] = name
    run = Run(name, frame[["qid", "docid", "rank", "score", "tag"]].reset_index(drop=True))
    qrels = Qrels.from_frame(pd.DataFrame({
        "qid": sorted(held), "docid": [held[u][0] for u in sorted(held)], "label": label}), name=name)
    return SampledCandidates(run, qrels, n_negatives, seed)


def _sample_without(rng: np.random.Generator, size: int, n: int, banned: set[int]) -> np.ndarray:
    """``n`` distinct indices in [0, size) avoiding ``banned``, in the order drawn (rejection sampling)."""
    if size - len(banned) <= 4 * n:  # dense: permute the eligible items
        eligible = np.setdiff1d(np.arange(size), np.fromiter(banned, dtype=np.int64, count=len(banned)))
        return rng.permutation(eligible)[:n]
    chosen: list[int] = []
    taken = set(banned)
    while len(chosen) < n:
        for i in rng.integers(0, size, size=2 * (n - len(chosen)) + 8).tolist():
            if i not in taken:
                taken.add(i)
                chosen.append(i)
                if len(chosen) == n:
                    break
    return np.asarray(chosen, dtype=np.int64)


def popularity_scorer(interactions: pd.DataFrame) -> Scorer:
    """Score = number of interactions with the item (columns user, item). Tie-heavy by nature."""
    counts = interactions["item"].astype(str).value_counts().to_dict()

    def score(user: str, items: np.ndarray) -> np.ndarray:
        return np.fromiter((counts.get(i, 0) for i in items), dtype=np.float64, count=len(items))

    return score


def attribute_overlap_scorer(history: pd.DataFrame, items: pd.DataFrame, fields: Sequence[str]) -> Scorer:
    """Score = how many (field, value) pairs an item shares with the user's history items.

    ``history``: columns user, item; ``items``: indexed by item id, one column per field, values
    scalars or tuples (multi-valued), None when missing. A small integer score, so heavily tied.
    """
    missing = [f for f in fields if f not in items.columns]
    if missing:
        raise ConfigError(f"item metadata has no field(s) {missing}; available: {list(items.columns)}")

    def attrs(row) -> frozenset:
        out = set()
        for f, v in zip(fields, row):
            if v is None or (isinstance(v, float) and math.isnan(v)):
                continue
            for x in (v if isinstance(v, (tuple, list, set, frozenset)) else (v,)):
                out.add((f, x))
        return frozenset(out)

    item_attrs = {str(i): attrs(row) for i, row in zip(items.index, items[list(fields)].itertuples(index=False))}
    profiles: dict[str, set] = {}
    for u, i in zip(history["user"].astype(str), history["item"].astype(str)):
        profiles.setdefault(u, set()).update(item_attrs.get(i, ()))

    def score(user: str, cand: np.ndarray) -> np.ndarray:
        prof = profiles.get(user, set())
        return np.fromiter((len(item_attrs.get(i, frozenset()) & prof) for i in cand), dtype=np.float64,
                           count=len(cand))

    return score
