"""Which (user, item) pairs to judge: a depth pool, K sampled per user, or only the unjudged ones.

:func:`select_pairs` is one selection; :func:`judge_selection` is the one `recjudge judge` makes of its
runs and reference (the reference's items of the users the runs rank, with the runs' pool beside them).
"""

from __future__ import annotations

from typing import Callable, Iterable, Mapping, NamedTuple

import numpy as np
import pandas as pd

from ..data.trec import Qrels, Run, hash_keys
from ..evaluation.ties.policy import ensure_tie_free, top_k
from ..errors import ConfigError

__all__ = ["Pair", "select_pairs", "judge_selection"]


class Pair(NamedTuple):
    qid: str
    docid: str


def _frames(runs: Mapping[str, Run] | Iterable[Run], depth: int | None, tie_policy: str, seed: int):
    items = runs.values() if isinstance(runs, Mapping) else runs
    for run in items:
        # a depth cut needs one order among tied scores: the declared tie policy decides it
        run = ensure_tie_free(run, run.tie_policy or tie_policy, seed if run.seed is None else run.seed)
        frame = top_k(run, depth) if depth is not None else run.frame
        yield frame[["qid", "docid"]]


def select_pairs(runs: Mapping[str, Run] | Iterable[Run] = (), depth: int | None = None,
                 per_user: int | None = None, reference: Qrels | None = None,
                 only_unjudged: Qrels | None = None, seed: int = 0, tie_policy: str = "trec_eval",
                 users: Iterable[str] | None = None) -> tuple[Pair, ...]:
    """Pairs to judge, sorted by (qid, docid).

    - ``depth``: the union of every run's top-``depth`` (ties ordered by ``tie_policy``), deduplicated
      across systems; without it, every ranked item.
    - ``per_user``: ``K`` items per user sampled (seeded hash order, so the choice for one user does
      not depend on the others) from the pool, or from the items ``reference`` judges for the user
      when a reference is given (the alignment setting of Penha et al. 2025). Users with fewer than
      ``K`` candidates keep all of them.
    - ``only_unjudged``: drop the pairs these qrels already judge (gap filling).
    - ``users``: restrict to these users.
    """
    if depth is not None and depth < 1:
        raise ConfigError(f"--depth must be at least 1, got {depth}")
    if per_user is not None and per_user < 1:
        raise ConfigError(f"--per-user must be at least 1, got {per_user}")
    if reference is not None and per_user is None:
        raise ConfigError("a reference qrels selects the items to sample K from: give --per-user K too")
    if reference is not None:
        pool = reference.frame[["qid", "docid"]]
    else:
        frames = list(_frames(runs, depth, tie_policy, seed))
        if not frames:
            raise ConfigError("no runs to select pairs from: give run files, or a reference qrels with --per-user")
        pool = pd.concat(frames, ignore_index=True)
    pool = pool.drop_duplicates(["qid", "docid"])
    if users is not None:
        pool = pool[pool.qid.isin(set(map(str, users)))]
    if only_unjudged is not None:
        judged = pd.MultiIndex.from_frame(only_unjudged.frame[["qid", "docid"]])
        pool = pool[~pd.MultiIndex.from_frame(pool[["qid", "docid"]]).isin(judged)]
    if per_user is not None and len(pool):
        # salted: the tie policy orders tied items by hash_keys(qid, docid, seed); sampling by the same
        # key would pick exactly the items that win every tie
        salted = np.char.add("sample\x1f", pool.docid.to_numpy(dtype=str)).astype(object)
        key = hash_keys(pool.qid.to_numpy(), salted, seed)
        pool = pool.assign(_k=key.astype(np.uint64)).sort_values(["qid", "_k", "docid"], kind="stable")
        pool = pool[pool.groupby("qid", sort=False).cumcount().to_numpy() < per_user]
    pool = pool.sort_values(["qid", "docid"], kind="stable")
    return tuple(Pair(q, d) for q, d in zip(pool.qid.tolist(), pool.docid.tolist()))


def judge_selection(runs: Mapping[str, Run], reference: Qrels | None = None, *, depth: int | None = None,
                    per_user: int | None = None, only_unjudged: Qrels | None = None, seed: int = 0,
                    tie_policy: str = "trec_eval", say: Callable[[str], None] = lambda m: None) -> tuple[Pair, ...]:
    """The pairs `recjudge judge` asks about, sorted by (qid, docid).

    Without a reference: the runs' pool (:func:`select_pairs`). With one: ``per_user`` items each of
    the items the reference judges, for the users the runs rank (every reference user when no run is
    given), and with ``depth`` the runs' top-``depth`` pool beside them (the demo's design). ``say``
    hears which users are judged and how large the pool is."""
    users = None
    if reference is not None:
        judged_users = set(reference.qids)
        if runs:
            # the runs say whose rankings are evaluated: users of the reference no run ranks are not judged
            users = {q for run in runs.values() for q in run.qids}
            say(f"reference: {len(judged_users & users):,} of its {len(judged_users):,} users are ranked by "
                "the runs; only they are judged")
        else:
            say(f"reference: judging every one of its {len(judged_users):,} users (no runs restrict them to "
                "the users the runs rank)")
    pairs = select_pairs(runs if reference is None else (), depth=depth, per_user=per_user, reference=reference,
                         only_unjudged=only_unjudged, seed=seed, tie_policy=tie_policy, users=users)
    if reference is not None and depth is not None:
        pool = select_pairs(runs, depth=depth, only_unjudged=only_unjudged, seed=seed, tie_policy=tie_policy)
        say(f"pool: {len(pool):,} pairs of the runs' top-{depth}, beside {len(pairs):,} sampled from the reference")
        pairs = tuple(sorted(set(pairs) | set(pool)))
    return pairs
