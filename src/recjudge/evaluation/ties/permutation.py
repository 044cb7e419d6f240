"""Permutation test: does shuffling each user's rows change a measure under a tie policy?"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import NamedTuple

import numpy as np
import pandas as pd

from ...data.trec import Qrels, Run
from ...errors import ConfigError
from .ranked import Ranked, shuffled_file_positions, user_slots
from .specs import DEFAULT_TIE_MEASURES, measure_specs
from .treatments import Evaluator, per_user_values


def shuffle_rows(run: Run, seed: int | Sequence[int] = 0) -> Run:
    """The run with each user's rows shuffled among that user's lines (seeded); nothing else changes."""
    qcodes = pd.factorize(run.frame.qid.to_numpy(dtype=object), sort=True)[0]
    new_index = shuffled_file_positions(qcodes, np.random.default_rng(seed))
    frame = run.frame.iloc[np.argsort(new_index)].reset_index(drop=True)
    return Run(run.name, frame, tie_policy=run.tie_policy, seed=run.seed)


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
    specs = measure_specs(measures)
    r = Ranked(run, qrels)
    ev = Evaluator(r, specs)
    rows = r.tied_rows if ev.specs else r.sub_rows
    base = per_user_values(r, specs, ev, [r.treatment(rows, policy, seed=seed)])[0]
    return permute_and_score(r, specs, ev, rows, {policy: base}, permutations, seed)[policy]


def permute_and_score(r: Ranked, specs, ev, rows, bases: Mapping[str, np.ndarray], permutations: int,
                 seed: int) -> dict[str, PermutationResult]:
    """One permutation test per policy in ``bases`` (policy -> unshuffled per-user values), sharing
    the shuffles."""
    if permutations < 1:
        raise ConfigError(f"the permutation test needs at least 1 permutation, got {permutations}")
    max_change = {k: np.zeros(len(specs)) for k in bases}
    moved = {k: np.zeros_like(b, dtype=bool) for k, b in bases.items()}
    slots = user_slots(r.qcodes)
    for p in range(permutations):
        file_pos = shuffled_file_positions(r.qcodes, np.random.default_rng([seed, p]), slots)
        for policy, base in bases.items():
            pos = r.treatment(rows, policy, seed=seed, file_pos=file_pos)
            vals = per_user_values(r, specs, ev, [pos])[0]
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
