"""Tie prevalence: how often exact ties occur in a run, overall, near the top k and on relevant items."""

from __future__ import annotations

import math
from collections.abc import Iterable, Sequence
from typing import NamedTuple

import numpy as np

from ...data.trec import Qrels, Run
from ...errors import ConfigError
from .ranked import Ranked

DEFAULT_CUTOFFS = (10, 100)


class TiePrevalence(NamedTuple):
    """Shares of a run's users (before any tie policy). ``*_top`` tuples follow ``cutoffs``.

    touching: a tie block with an item in the top k (position or membership may change);
    crossing: a block holding positions k and k + 1 (membership of the top k changes);
    inside: a block of two or more items lying wholly within the top k (positions change);
    relevant: a tie block holding an item labelled ≥ 1 (None without qrels), as a share of the
    ``judged_users`` (the run's users the qrels judge): only they can hold a labelled item, so a
    share over every user would shrink with the users nobody judged.
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
    judged_users: int | None = None

    def as_dict(self) -> dict:
        out: dict = {"users": self.users, "rows": self.rows, "tied": self.tied}
        for i, k in enumerate(self.cutoffs):
            out[f"tied_top{k}"] = self.touching_top[i]
            out[f"crossing_top{k}"] = self.crossing_top[i]
            out[f"inside_top{k}"] = self.inside_top[i]
        out["judged_users"] = self.judged_users
        out["relevant_tied"] = self.relevant_tied
        for i, k in enumerate(self.cutoffs):
            out[f"relevant_tied_top{k}"] = self.relevant_touching_top[i]
        out.update(tied_rows=self.tied_rows, largest_block=self.largest_block,
                   float32_tied=self.float32_tied)
        return out


def check_cutoffs(cutoffs: Iterable[int]) -> tuple[int, ...]:
    ks = tuple(int(k) for k in cutoffs)
    if any(k < 1 for k in ks):
        raise ConfigError(f"cutoffs must be positive integers, got {list(ks)}")
    return tuple(dict.fromkeys(ks))


def prevalence_of(r: Ranked, cutoffs: Sequence[int]) -> TiePrevalence:
    U = len(r.users)
    tied_b = r.b_size > 1

    def share(block_mask: np.ndarray) -> float:
        return float(np.unique(r.b_user[block_mask]).size / U) if U else math.nan

    a, n = r.b_start, r.b_size
    touching = tuple(share(tied_b & (a < k)) for k in cutoffs)
    crossing = tuple(share((a < k) & (a + n > k)) for k in cutoffs)
    inside = tuple(share(tied_b & (a + n <= k)) for k in cutoffs)
    judged = None
    if r.qrels is not None:
        rel_b = np.zeros(len(n), dtype=bool)
        rel_b[r.block[r.lab]] = True
        judged = int((r.user_counted >= 0).sum())

        def judged_share(block_mask: np.ndarray) -> float:
            return float(np.unique(r.b_user[block_mask]).size / judged) if judged else math.nan

        relevant = judged_share(tied_b & rel_b)
        rel_top = tuple(judged_share(tied_b & rel_b & (a < k)) for k in cutoffs)
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
        relevant_tied=relevant, relevant_touching_top=rel_top, judged_users=judged)


def tie_prevalence(run: Run, qrels: Qrels | None = None, cutoffs: Iterable[int] = DEFAULT_CUTOFFS
                   ) -> TiePrevalence:
    """How often exact (float64) ties occur in ``run``, as shares of the run's users (the relevant
    shares: of its users the qrels judge)."""
    return prevalence_of(Ranked(run, qrels), check_cutoffs(cutoffs))
